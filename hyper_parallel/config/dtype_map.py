"""``TORCH_DTYPE_MAP``: dtype names -> the platform's dtype objects, resolved on first use.

Configs store dtypes as strings (``"bfloat16"``) so that they parse without any framework; this
mapping turns them into framework dtypes through :func:`hyper_parallel.platform.get_platform`.
It is named after torchtitan's map but yields mindspore dtypes on the mindspore platform.
Importing this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hyper_parallel.platform.dtypes import DTYPE_NAMES


class _PlatformDtypeMap(Mapping):
    """A read-only mapping that asks the platform for its dtype map on first access."""

    def _map(self) -> Mapping[str, Any]:
        from hyper_parallel.platform import get_platform

        return get_platform().dtype_map

    def __getitem__(self, name: str) -> Any:
        try:
            return self._map()[str(name).lower()]
        except KeyError:
            raise KeyError(f"unknown dtype {name!r}; valid names: {', '.join(DTYPE_NAMES)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(DTYPE_NAMES)

    def __len__(self) -> int:
        return len(DTYPE_NAMES)

    def __repr__(self) -> str:
        return f"TORCH_DTYPE_MAP({', '.join(DTYPE_NAMES)})"


TORCH_DTYPE_MAP: Mapping[str, Any] = _PlatformDtypeMap()
