"""``ParallelDims``: the parallel degrees of a job, their validation, and the device mesh.

The base mesh dims are, in this order, ``dp_replicate, dp_shard, ep, cp, tp, pp``; only degrees
> 1 become mesh dims (a job with no parallelism gets a 1-D ``dp_shard`` mesh of the world size).
Expert parallelism is its own axis here and counts in the world-size product (unlike torchtitan,
which carves it out of data parallelism), as in the legacy schema: the ranks along ``ep`` load the
same batch, as tensor-parallel peers do, and then *split its rows* (:attr:`ParallelDims.
batch_split`), so each computes the dense layers on its own rows and the mixture-of-experts
layers exchange tokens with all-to-all. Tokens and losses are therefore summed over ``ep`` too.

Flattened aliases registered on the root mesh:

* ``fsdp`` = ``dp_shard`` (only when ``dp_shard`` is a mesh dim);
* ``dp`` = ``(dp_replicate, dp_shard)``, whichever of them exist;
* ``loss`` = the ``dp`` dims plus ``ep`` and ``cp`` when they are mesh dims (the ranks that
  hold different tokens: tokens and losses are summed over it);
* ``dp_shard_ep`` = ``(dp_shard, ep)`` when both are mesh dims: what FSDP shards the dense
  parameters over under expert parallelism (every rank of it trains on different rows);
* ``dp_shard_cp`` = ``(dp_shard, cp)`` when both are mesh dims: what FSDP shards the
  parameters over under context parallelism (every rank of it trains on different tokens, so
  its gradients are summed over it, as torchtitan's ``dp_shard_cp``).

Context parallelism: the ranks along ``cp`` load the same batch, like the expert-parallel
ones, and each trains on its own contiguous ``1/cp`` of every sequence
(:attr:`ParallelDims.seq_split`); the model's token mixers exchange the rest.

A pure tensor-parallel mesh has no ``fsdp`` / ``dp`` / ``loss`` alias.

Errors: ``ParallelDims(...)`` itself names its own degrees (``tp``, ``dp_shard``, ...), a
``ValueError``; the trainer's checks -- :meth:`ParallelDims.from_parallelism`,
:meth:`~ParallelDims.validate_training`, :meth:`~ParallelDims.validate_against_model` -- raise a
:class:`~hyper_parallel.utils.errors.ConfigError` naming the recipe field to change
(``parallelism.tensor_parallel_degree``, ``training.global_batch_size``, ...) in its ``path``.

Only :meth:`ParallelDims.build_mesh` imports torch.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Optional

from hyper_parallel.utils.errors import ConfigError

BASE_DIM_ORDER = ("dp_replicate", "dp_shard", "ep", "cp", "tp", "pp")

#: ``ParallelDims`` degree -> the ``parallelism`` field it comes from (``from_parallelism``).
PARALLELISM_FIELDS: dict[str, str] = {
    "dp_replicate": "parallelism.data_parallel_replicate_degree",
    "dp_shard": "parallelism.data_parallel_shard_degree",
    "cp": "parallelism.context_parallel_degree",
    "tp": "parallelism.tensor_parallel_degree",
    "pp": "parallelism.pipeline_parallel_degree",
    "ep": "parallelism.expert_parallel_degree",
    "etp": "parallelism.expert_tensor_parallel_degree",
}

#: The most samples a dataset can hold (``len()`` is an index-sized integer).
MAX_SAMPLES = sys.maxsize


def parallelism_degrees(parallelism: Any) -> dict[str, int]:
    """``ParallelDims`` name -> degree of the new tree's ``parallelism`` section
    (``data_parallel_shard_degree`` unset means 1; -1 stays -1: inferred from the world)."""
    dp_shard = parallelism.data_parallel_shard_degree
    return {
        "dp_replicate": parallelism.data_parallel_replicate_degree,
        "dp_shard": 1 if dp_shard is None else dp_shard,
        "cp": parallelism.context_parallel_degree,
        "tp": parallelism.tensor_parallel_degree,
        "pp": parallelism.pipeline_parallel_degree,
        "ep": parallelism.expert_parallel_degree,
        "etp": parallelism.expert_tensor_parallel_degree,
    }


def _check_parallelism(degrees: dict[str, int], world_size: int) -> None:
    """The rules of ``ParallelDims.__post_init__`` for a ``parallelism`` section, each failure a
    :class:`ConfigError` whose path is the field to change. ``degrees`` holds the
    ``ParallelDims`` names (``dp_shard`` may be -1: inferred)."""
    f = PARALLELISM_FIELDS
    for name in ("dp_replicate", "cp", "tp", "pp", "ep", "etp"):
        value = degrees[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{value!r} is invalid: it must be an integer >= 1", path=f[name])
    dp_shard = degrees["dp_shard"]
    if not isinstance(dp_shard, int) or isinstance(dp_shard, bool) or (
        dp_shard != -1 and dp_shard < 1
    ):
        raise ConfigError(
            f"{dp_shard!r} is invalid: it must be >= 1, or -1 to infer it from the world size",
            path=f["dp_shard"],
        )
    # The degree that does not divide the number of processes is the one to name.
    for name in ("tp", "cp", "pp", "ep", "dp_replicate", "dp_shard"):
        value = degrees[name]
        if value > 1 and world_size % value:
            raise ConfigError(
                f"{value} does not divide the world size {world_size} (the number of "
                f"processes); launch a multiple of {value} processes or lower {f[name]}",
                path=f[name],
            )
    set_degrees = [
        f"{f[n]}={degrees[n]}"
        for n in ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep")
        if degrees[n] > 1
    ]
    others = (
        degrees["dp_replicate"] * degrees["cp"] * degrees["tp"] * degrees["pp"] * degrees["ep"]
    )
    if dp_shard == -1:
        if world_size % others:
            raise ConfigError(
                f"-1 cannot be inferred: the world size {world_size} is not divisible by the "
                f"product {others} of {' x '.join(set_degrees) or 'the other degrees'}; change "
                "them or the number of processes",
                path=f["dp_shard"],
            )
    elif others * dp_shard != world_size:
        raise ConfigError(
            f"the parallel degrees multiply to {others * dp_shard} "
            f"({' x '.join(set_degrees) or 'all 1'}) but the world size is {world_size}; set "
            f"{f['dp_shard']}=-1 to infer it, or launch {others * dp_shard} processes",
            path=f["dp_shard"],
        )
    # (with pipeline parallelism each stage runs its shard of the rows; the schedule cuts the
    # shard's rows, runtime/pipeline_step.py)
    for other, what in (("ep", "expert"),):
        if degrees["cp"] > 1 and degrees[other] > 1:
            raise ConfigError(
                f"{degrees['cp']} with {f[other]}={degrees[other]}: context parallelism has not "
                f"been tested with {what} parallelism (the sequence split would have to travel "
                "through the token dispatch); use one of the two",
                path=f["cp"],
            )
    if degrees["ep"] > 1 and degrees["etp"] not in (1, degrees["tp"]):
        raise ConfigError(
            f"{degrees['etp']} is invalid with {f['ep']}={degrees['ep']}: it must be 1 or "
            f"{f['tp']} ({degrees['tp']})",
            path=f["etp"],
        )


@dataclass
class ParallelDims:
    dp_replicate: int = 1
    dp_shard: int = 1
    cp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    etp: int = 1
    ulysses_degree: Optional[int] = None
    world_size: int = 1
    num_pp_microbatches: int = 1
    """Pipeline micro-batches of a step (``parallelism.num_pp_microbatches``)."""
    _device_mesh: Any = field(default=None, init=False, repr=False, compare=False)
    _alias_meshes: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_config(cls, accelerator: Any, world_size: int) -> "ParallelDims":
        """Build from a ``train.accelerator`` section (legacy ``dp`` falls back into ``dp_shard``)."""
        dp_shard = accelerator.dp_shard
        if dp_shard is None:
            dp_shard = accelerator.dp if getattr(accelerator, "dp", None) is not None else 1
        return cls(
            dp_replicate=accelerator.dp_replicate,
            dp_shard=dp_shard,
            cp=accelerator.cp,
            tp=accelerator.tp,
            pp=accelerator.pp,
            ep=accelerator.ep,
            etp=getattr(accelerator, "etp", accelerator.tp),
            ulysses_degree=getattr(accelerator, "ulysses_degree", None),
            world_size=world_size,
            num_pp_microbatches=getattr(accelerator, "pp_micro_batch_num", 1),
        )

    @classmethod
    def from_parallelism(cls, parallelism: Any, world_size: int) -> "ParallelDims":
        """Build from the new tree's ``parallelism`` section (``data_parallel_shard_degree``
        unset means 1).

        A layout that does not fit ``world_size`` is a :class:`ConfigError` naming the
        ``parallelism`` field to change (``ConfigError.path``), e.g.
        ``parallelism.tensor_parallel_degree`` when that degree does not divide the world.
        """
        degrees = parallelism_degrees(parallelism)
        _check_parallelism(degrees, world_size)
        return cls(
            **degrees, world_size=world_size,
            num_pp_microbatches=getattr(parallelism, "num_pp_microbatches", 1),
        )

    def __post_init__(self) -> None:
        for name in ("dp_replicate", "cp", "tp", "pp", "ep", "etp", "world_size"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name}={value} is invalid: it must be >= 1")
        if self.dp_shard != -1 and self.dp_shard < 1:
            raise ValueError(
                f"dp_shard={self.dp_shard} is invalid: it must be >= 1, or -1 to infer it from "
                "the world size"
            )
        others = self.dp_replicate * self.cp * self.tp * self.pp * self.ep
        if self.dp_shard == -1:
            if self.world_size % others:
                raise ValueError(
                    f"cannot infer dp_shard: world_size({self.world_size}) is not divisible by "
                    f"dp_replicate*cp*tp*pp*ep = {others}; change the other degrees or the "
                    "number of processes"
                )
            self.dp_shard = self.world_size // others
        product = others * self.dp_shard
        if product != self.world_size:
            raise ValueError(
                f"dp_replicate({self.dp_replicate}) * dp_shard({self.dp_shard}) * cp({self.cp}) "
                f"* tp({self.tp}) * pp({self.pp}) * ep({self.ep}) = {product} != "
                f"world_size({self.world_size}). Set dp_shard=-1 to auto-infer, or launch "
                f"{product} processes"
            )
        if self.ep > 1 and self.etp not in (1, self.tp):
            raise ValueError(f"etp={self.etp} is invalid with ep>1: it must be 1 or tp ({self.tp})")
        if self.ulysses_degree is not None and self.cp > 1:
            if self.ulysses_degree < 1 or self.cp % self.ulysses_degree:
                raise ValueError(
                    f"ulysses_degree={self.ulysses_degree} must be >= 1 and divide cp={self.cp}"
                )

    # ------------------------------------------------------------------ sizes and switches

    @property
    def dp_size(self) -> int:
        return self.dp_replicate * self.dp_shard

    @property
    def non_dp_size(self) -> int:
        return self.tp * self.cp * self.pp * self.ep

    @property
    def batch_split(self) -> int:
        """How many ranks split the rows of one data-parallel rank's batch: the expert-parallel
        ranks (they load the same batch, then each trains on its own ``1/ep`` of the rows)."""
        return self.ep

    @property
    def seq_split(self) -> int:
        """How many ranks split every sequence of one data-parallel rank's batch: the
        context-parallel ranks (each trains on its own contiguous ``1/cp`` of the positions)."""
        return self.cp

    @property
    def batch_sharers(self) -> int:
        """Ranks that load one data-parallel rank's batch and each train on a part of it (its
        rows, its positions): ``batch_split * seq_split``."""
        return self.batch_split * self.seq_split

    @property
    def grad_average_size(self) -> int:
        """Ranks whose gradients FSDP averages for a dense parameter: every rank that trains on
        different tokens (``dp_size * batch_sharers``)."""
        return self.dp_size * self.batch_sharers

    @property
    def seq_divisor(self) -> int:
        """Sequence lengths must be a multiple of this (``cp * tp``)."""
        return self.cp * self.tp

    @property
    def dp_replicate_enabled(self) -> bool:
        return self.dp_replicate > 1

    @property
    def dp_shard_enabled(self) -> bool:
        return self.dp_shard > 1

    @property
    def fsdp_enabled(self) -> bool:
        return self.dp_shard > 1 or self.dp_replicate > 1

    @property
    def tp_enabled(self) -> bool:
        return self.tp > 1

    @property
    def cp_enabled(self) -> bool:
        return self.cp > 1

    @property
    def pp_enabled(self) -> bool:
        return self.pp > 1

    @property
    def ep_enabled(self) -> bool:
        return self.ep > 1

    def summary(self) -> str:
        return (
            f"dp_replicate={self.dp_replicate} dp_shard={self.dp_shard} cp={self.cp} "
            f"tp={self.tp} pp={self.pp} ep={self.ep} etp={self.etp} | "
            f"dp={self.dp_size} world={self.world_size}"
        )

    # ------------------------------------------------------------------ model checks

    def validate_against_model(self, model: Any, seq_len: int) -> None:
        """Check that the model's head counts and ``seq_len`` split evenly over the mesh.

        Each failure is a :class:`ConfigError` naming the field to change
        (``parallelism.tensor_parallel_degree``, ``parallelism.expert_parallel_degree``,
        ``training.seq_len``)."""
        config = getattr(model, "config", None)
        if config is None:
            return
        checks = [
            ("num_attention_heads", self.tp, "tp"),
            ("num_key_value_heads", self.tp, "tp"),
            ("linear_num_key_heads", self.tp, "tp"),
            ("linear_num_value_heads", self.tp, "tp"),
            ("num_experts", self.ep, "ep"),
        ]
        for attr, degree, degree_name in checks:
            value = getattr(config, attr, None)
            if value is not None and degree > 1 and value % degree:
                field = PARALLELISM_FIELDS[degree_name]
                raise ConfigError(
                    f"model {attr}={value} is not divisible by {degree_name}={degree}; choose a "
                    f"{field} that divides it",
                    path=field,
                )
        self._check_seq_len(seq_len)

    def validate_training(self, training: Any) -> None:
        """Check the ``training`` section against this layout, before anything is built:

        * ``global_batch_size`` is a multiple of ``local_batch_size`` x the data-parallel size
          (gradient accumulation fills the rest; nothing is silently dropped);
        * ``seq_len`` is a multiple of ``cp * tp`` (the sequence is split over them);
        * ``steps * global_batch_size`` samples can be counted (the dummy dataset holds that
          many; a dataset length must fit an index).

        Each failure is a :class:`ConfigError` naming the ``training`` field to change."""
        gbs, lbs = training.global_batch_size, training.local_batch_size
        per_step = lbs * self.dp_size
        if gbs % per_step:
            lower = gbs // per_step * per_step
            options = ([lower] if lower else []) + [lower + per_step]
            raise ConfigError(
                f"{gbs} is not divisible by training.local_batch_size x the data-parallel size "
                f"= {lbs} x {self.dp_size} = {per_step}; set it to a multiple of {per_step} "
                f"(e.g. {' or '.join(map(str, options))}) or change training.local_batch_size",
                path="training.global_batch_size",
            )
        if lbs % self.batch_split:
            raise ConfigError(
                f"{lbs} is not divisible by parallelism.expert_parallel_degree={self.ep}: the "
                "expert-parallel ranks split each micro-batch's rows between them; use a "
                f"multiple of {self.ep}",
                path="training.local_batch_size",
            )
        self._check_seq_len(training.seq_len)
        if self.pp > 1:
            self._check_pipeline_batch(training)
        if training.steps * gbs > MAX_SAMPLES:
            raise ConfigError(
                f"{training.steps} steps x training.global_batch_size {gbs} = "
                f"{training.steps * gbs} samples is more than a dataset can index "
                f"({MAX_SAMPLES}); lower training.steps or training.global_batch_size",
                path="training.steps",
            )

    def _check_pipeline_batch(self, training: Any) -> None:
        """Under pipeline parallelism a step's rows on one data-parallel rank (every
        accumulation micro-batch's, each split over the expert-parallel ranks) are split into
        ``num_pp_microbatches`` pipeline micro-batches, which must divide them (the legacy
        rule)."""
        micro = self.num_pp_microbatches
        rows = training.global_batch_size // self.dp_size // self.batch_split
        if rows % micro:
            divisors = [d for d in range(1, rows + 1) if rows % d == 0]
            raise ConfigError(
                f"{micro} does not divide the {rows} rows of a step on one data-parallel rank "
                f"(training.global_batch_size {training.global_batch_size} / data-parallel size "
                f"{self.dp_size}" + (f" / expert-parallel degree {self.ep}" if self.ep > 1 else "")
                + f"); choose one of {divisors}, or change the batch",
                path="parallelism.num_pp_microbatches",
            )

    def _check_seq_len(self, seq_len: int) -> None:
        if self.seq_divisor > 1 and seq_len % self.seq_divisor:
            raise ConfigError(
                f"{seq_len} is not divisible by cp*tp={self.seq_divisor} "
                f"(parallelism.context_parallel_degree x parallelism.tensor_parallel_degree); "
                f"use a multiple of {self.seq_divisor}",
                path="training.seq_len",
            )

    # ------------------------------------------------------------------ mesh

    def mesh_dims(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """``(names, sizes)`` of the base mesh in canonical order."""
        sizes = {
            "dp_replicate": self.dp_replicate,
            "dp_shard": self.dp_shard,
            "ep": self.ep,
            "cp": self.cp,
            "tp": self.tp,
            "pp": self.pp,
        }
        names = tuple(n for n in BASE_DIM_ORDER if sizes[n] > 1)
        if not names:
            return ("dp_shard",), (self.world_size,)
        if names == ("pp",) or names == ("tp", "pp"):
            # Each pipeline stage is then trained by one data-parallel rank, as a one-rank job
            # is: a dp_shard axis of size 1 is what FSDP2 wraps it over for its mixed-precision
            # and CPU-offload policies (and what the dp / loss groups are).
            names = ("dp_shard", *names)
        return names, tuple(sizes[n] for n in names)

    def alias_dims(self) -> dict[str, tuple[str, ...]]:
        """Flattened aliases -> the base dims they cover (only those that exist)."""
        names, _ = self.mesh_dims()
        present = set(names)
        dp = tuple(n for n in ("dp_replicate", "dp_shard") if n in present)
        aliases: dict[str, tuple[str, ...]] = {}
        if "dp_shard" in present:
            aliases["fsdp"] = ("dp_shard",)
        if dp:
            aliases["dp"] = dp
        loss = dp + tuple(n for n in ("ep", "cp") if n in present)
        if loss:
            aliases["loss"] = loss
        if "dp_shard" in present and "ep" in present:
            aliases["dp_shard_ep"] = ("dp_shard", "ep")
        if "dp_shard" in present and "cp" in present:
            aliases["dp_shard_cp"] = ("dp_shard", "cp")
        return aliases

    def build_mesh(self, device_type: str):
        """Create (once) the device mesh with its flattened aliases."""
        if self._device_mesh is not None:
            return self._device_mesh
        from torch.distributed.device_mesh import init_device_mesh

        names, sizes = self.mesh_dims()
        mesh = init_device_mesh(device_type, sizes, mesh_dim_names=names)
        for alias, dims in self.alias_dims().items():
            # Keep the flattened meshes ourselves: slicing a flattened dim back out of the root
            # mesh is deprecated in torch.
            self._alias_meshes[alias] = mesh[dims]._flatten(alias)
        self._device_mesh = mesh
        return mesh

    def get_mesh(self, name: str):
        """The 1-D mesh of a base dim or alias (``dp_shard``, ``tp``, ``fsdp``, ``dp``, ``loss``).

        Raises ``KeyError`` listing the available names when ``name`` is not in this job's mesh.
        """
        mesh = self.world_mesh
        if name in self._alias_meshes:
            return self._alias_meshes[name]
        if name in (mesh.mesh_dim_names or ()):
            return mesh[name]
        available = list(mesh.mesh_dim_names or ()) + list(self._alias_meshes)
        raise KeyError(f"mesh has no dim {name!r}; available: {', '.join(available)}")

    def has_mesh(self, name: str) -> bool:
        mesh = self.world_mesh
        return name in self._alias_meshes or name in (mesh.mesh_dim_names or ())

    @property
    def world_mesh(self):
        if self._device_mesh is None:
            raise RuntimeError("build_mesh(device_type) must be called first")
        return self._device_mesh
