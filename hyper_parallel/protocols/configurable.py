"""``Configurable``: a class that is built from its own nested ``Config`` dataclass.

The pattern::

    class Linear(Configurable):
        @dataclass(kw_only=True, slots=True)
        class Config(Configurable.Config):
            in_features: int
            out_features: int
            bias: bool = True

        def __init__(self, config: Config, *, device=None):  # runtime objects are keyword-only
            self.config = config

    layer = Linear.Config(in_features=4, out_features=2).build(device="cpu")

A run is described by one tree of such configs; ``build(**runtime_objects)`` turns a node into
its owner. Settings live in the Config; ``build`` keyword arguments are only for objects that
exist at run time (model parts, a tokenizer, a device mesh, ...).

Rules, enforced when the *owner* class is defined (``__init_subclass__`` runs on the outer class
because ``slots=True`` makes ``@dataclass`` return a new class, so a hook on ``Config`` itself
would only see the discarded pre-decorator class):

* A ``Config`` declared in a ``Configurable`` must be decorated with
  ``@dataclass(kw_only=True, slots=True)`` (``TypeError`` otherwise). ``kw_only`` keeps configs
  readable and lets subclasses add required fields after defaulted ones; ``slots`` makes a typo
  such as ``cfg.leraning_rate = 1`` an ``AttributeError`` instead of a silently ignored value.
* It must subclass the ``Config`` of every ``Configurable`` base, so a field typed
  ``Parent.Config`` can hold it and the parent's fields are never dropped.
* ``Config._owner`` is set to the outer class: that is what ``build`` constructs.

**Subclass-without-Config rule (decided: wire it).** A ``Configurable`` subclass that does not
declare its own ``Config`` gets one automatically, equivalent to::

    @dataclass(kw_only=True, slots=True)
    class Config(Parent.Config):
        pass

owned by the subclass. So ``Child.Config(...).build()`` builds a ``Child``, never the parent
(torchtitan silently builds the parent here; that is a bug magnet: the wrong class is built and
nothing fails). We wire rather than raise because an empty redeclaration carries no information
a human should have to type, and every Configurable -- including classes created dynamically by
libraries, such as FSDP2's ``FSDP<Model>`` wrappers -- stays buildable. When the bases' Configs
cannot be merged automatically (several ``Configurable`` bases with unrelated Configs) the
subclass must declare ``Config`` itself, and a ``TypeError`` says so.

A ``Config`` subclass defined *outside* any ``Configurable`` (for example a preset that only
changes defaults) keeps its parent's owner, so it builds the parent's class.

**``super()`` inside Config methods.** ``slots=True`` replaces the class, so the ``__class__``
cell that zero-argument ``super()`` reads still points at the discarded class and Python < 3.14
raises ``TypeError: super(type, obj): obj must be an instance or subtype of type``. For a
``Config`` nested in a ``Configurable`` the cells are repointed at definition time (what
CPython 3.14 does itself), so ``super().__post_init__()`` works there. Methods of a ``Config``
defined outside a ``Configurable``, and functions hidden behind decorators, are not repaired:
call the parent explicitly there (``Parent.Config.__post_init__(self)``). Library code in this
package calls parents explicitly either way.

This module imports no deep-learning framework.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

logger = logging.getLogger(__name__)

_PRIMITIVES = (str, int, float, bool, type(None))


class Configurable:
    """Base of every class built from a nested ``Config``; see the module docstring."""

    @dataclasses.dataclass(kw_only=True, slots=True)
    class Config:
        """Base of every ``Config``: ``build``, ``to_dict`` and ``traverse``. Has no fields."""

        _owner: ClassVar[type | None] = None
        """The class ``build`` constructs; set by ``Configurable.__init_subclass__``."""

        written_name: ClassVar[str | None] = None
        """How users write this class, when it is not its ``__qualname__`` (the root Config is
        written ``HyperTrainer.Config``); messages name a Config by :func:`config_name`."""

        def build(self, **kwargs: Any) -> Any:
            """Construct the owner as ``Owner(config=<shallow copy of self>, **kwargs)``.

            The copy is made with ``dataclasses.replace``, so ``__post_init__`` (validation and
            normalisation) runs again on the values as they are now, and the built object's
            ``config`` is not the caller's object: later edits to either side do not leak. The
            copy is *shallow*: nested configs and lists are shared with the caller. Fields
            declared with ``init=False`` are not copied: ``__post_init__`` (or their default)
            computes them again.

            ``kwargs`` are runtime objects only. A name that is a field of this Config is a
            ``ValueError`` (the value belongs in the Config), and so is ``config``.
            """
            cls = type(self)
            owner = cls._owner
            if owner is None:
                raise NotImplementedError(
                    f"{cls.__qualname__} has no owner class, so it cannot be built. Declare it "
                    "inside a Configurable subclass:\n"
                    "    class MyThing(Configurable):\n"
                    "        @dataclass(kw_only=True, slots=True)\n"
                    "        class Config(Configurable.Config):\n"
                    "            ...\n"
                    "        def __init__(self, config, *, <runtime objects>): ...\n"
                    "and build it with MyThing.Config(...).build()"
                )
            name = cls.__qualname__
            if "config" in kwargs:
                raise ValueError(
                    f"{name}.build() got a 'config' keyword argument: build() passes the config "
                    f"itself (a copy of this {name}) as `config`; do not pass one"
                )
            clashes = sorted(set(kwargs) & {f.name for f in dataclasses.fields(self)})
            if clashes:
                raise ValueError(
                    f"{name}.build() got keyword argument(s) {clashes} that are fields of "
                    f"{name}. Put these values in the Config (e.g. {name}({clashes[0]}=...) or "
                    f"`cfg.{clashes[0]} = ...`), not in build() kwargs: build() kwargs are for "
                    "runtime objects only."
                )
            return owner(config=dataclasses.replace(self), **kwargs)

        def to_dict(self) -> dict[str, Any]:
            """A JSON-friendly dict of the fields, for logging and bookkeeping (one-way, lossy).

            Fields whose names start with ``_`` are skipped. Nested values with a ``to_dict`` use
            it, other dataclasses become dicts, lists / tuples become lists, dicts recurse, enums
            become their value, callables (functions, classes) become their ``repr``; anything
            else is ``repr``'d with a warning. The result cannot be loaded back.
            """
            return {
                f.name: to_plain(getattr(self, f.name), f"{type(self).__qualname__}.{f.name}")
                for f in dataclasses.fields(self)
                if not f.name.startswith("_")
            }

        def traverse(
            self,
            config_cls: type | tuple[type, ...],
            *,
            recurse: bool = False,
            _prefix: str = "",
        ) -> Iterator[tuple[str, Any, Any, str | int | None]]:
            """Yield ``(fqn, config, parent, field_name)`` for each node that is a ``config_cls``.

            ``fqn`` is the dotted attribute path from this config (``layers.0.ffn``; list and
            tuple items by index, dict items by key). ``(parent, field_name)`` is where the node
            lives: ``setattr(parent, field_name, new)`` replaces a field, ``parent[field_name] =
            new`` a list item (``field_name`` is then the ``int`` index) or a dict entry (the
            key); tuple items are reported but cannot be replaced in place. This config itself,
            when it matches, is yielded as ``("", self, None, None)``: the root has no slot to
            replace. A match is not descended into unless ``recurse=True``.

            Fields whose names start with ``_`` are not walked. A value that is not a Config but
            has a ``traverse`` method (e.g. ``ModelSpec``) is delegated to with
            ``traverse(config_cls, recurse=recurse, _prefix=<its fqn>)``; it yields the matches
            *below* itself.
            """
            return traverse_value(self, config_cls, recurse=recurse, fqn=_prefix)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "Config" in cls.__dict__:
            config_cls = cls.__dict__["Config"]
            _check_config(cls, config_cls)
            _repair_super_cells(config_cls)
        else:
            config_cls = _derive_config(cls)
            cls.Config = config_cls  # type: ignore[misc]
        config_cls._owner = cls


# ---------------------------------------------------------------------- definition-time checks


def _configurable_bases(cls: type) -> list[type]:
    return [b for b in cls.__bases__ if isinstance(b, type) and issubclass(b, Configurable)]


def _check_config(owner: type, config_cls: Any) -> None:
    """The rules of the module docstring for a ``Config`` declared in ``owner``'s body."""
    name = f"{owner.__qualname__}.Config"
    if not isinstance(config_cls, type) or not issubclass(config_cls, Configurable.Config):
        raise TypeError(
            f"{name} must be a class that subclasses Configurable.Config (or a parent's Config), "
            f"got {config_cls!r}"
        )
    for base in _configurable_bases(owner):
        if not issubclass(config_cls, base.Config):
            raise TypeError(
                f"{name} must subclass {base.__qualname__}.Config: write "
                f"`class Config({base.__qualname__}.Config)`, so that a field typed "
                f"{base.__qualname__}.Config can hold it and the parent's fields are kept"
            )
    decorator_fix = f"decorate {name} with @dataclass(kw_only=True, slots=True)"
    if "__dataclass_fields__" not in config_cls.__dict__:
        raise TypeError(f"{name} is not a dataclass of its own: {decorator_fix}")
    if "__slots__" not in config_cls.__dict__:
        raise TypeError(
            f"{name} is not slotted (a misspelt attribute would be silently accepted): "
            f"{decorator_fix}"
        )
    positional = [f.name for f in dataclasses.fields(config_cls) if f.init and not f.kw_only]
    if positional:
        raise TypeError(
            f"{name} has positional field(s) {positional}: {decorator_fix} so that every field "
            "is keyword-only"
        )


def _derive_config(owner: type) -> type:
    """The automatic ``class Config(Parent.Config): pass`` for a subclass that declares none."""
    inherited = owner.Config  # the MRO's choice
    bases = _configurable_bases(owner)
    unmerged = [b for b in bases if not issubclass(inherited, b.Config)]
    if unmerged:
        names = ", ".join(f"{b.__qualname__}.Config" for b in bases)
        raise TypeError(
            f"{owner.__qualname__} inherits from several Configurable classes whose Configs "
            f"({names}) cannot be merged automatically: declare "
            f"`@dataclass(kw_only=True, slots=True) class Config(...)` in {owner.__qualname__} "
            "explicitly"
        )
    namespace = {
        "__module__": owner.__module__,
        "__qualname__": f"{owner.__qualname__}.Config",
        "__doc__": (
            f"Config of {owner.__qualname__}: the fields of {inherited.__qualname__} "
            "(created automatically because the class declares no Config of its own)."
        ),
    }
    return dataclasses.dataclass(kw_only=True, slots=True)(type("Config", (inherited,), namespace))


def _repair_super_cells(config_cls: type) -> None:
    """Point the ``__class__`` cells of ``config_cls``'s methods at the slotted class.

    ``@dataclass(slots=True)`` builds a new class from the body of the original one; functions
    defined in that body still close over the original through ``__class__``, which zero-argument
    ``super()`` reads. The original is recognisable: same qualname and module, same bases, no
    ``__slots__`` of its own.
    """

    def is_discarded_original(candidate: Any) -> bool:
        return (
            isinstance(candidate, type)
            and candidate is not config_cls
            and candidate.__qualname__ == config_cls.__qualname__
            and candidate.__module__ == config_cls.__module__
            and candidate.__bases__ == config_cls.__bases__
            and "__slots__" not in candidate.__dict__
        )

    for member in config_cls.__dict__.values():
        if isinstance(member, (classmethod, staticmethod)):
            functions = [member.__func__]
        elif isinstance(member, property):
            functions = [member.fget, member.fset, member.fdel]
        else:
            functions = [member]
        for fn in functions:
            code = getattr(fn, "__code__", None)
            if code is None or "__class__" not in code.co_freevars or fn.__closure__ is None:
                continue
            cell = fn.__closure__[code.co_freevars.index("__class__")]
            try:
                contents = cell.cell_contents
            except ValueError:  # empty cell
                continue
            if is_discarded_original(contents):
                cell.cell_contents = config_cls


# ---------------------------------------------------------------------- to_dict and traverse


def to_plain(value: Any, where: str = "value") -> Any:
    """``value`` as JSON-friendly data (the rules of ``Configurable.Config.to_dict``).

    ``where`` names the value in the warning for an unknown type.
    """
    if isinstance(value, enum.Enum):
        return value.value if isinstance(value.value, _PRIMITIVES) else repr(value)
    if isinstance(value, _PRIMITIVES):
        return value
    if not isinstance(value, type) and callable(getattr(value, "to_dict", None)):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_plain(getattr(value, f.name), f"{where}.{f.name}")
            for f in dataclasses.fields(value)
            if not f.name.startswith("_")
        }
    if isinstance(value, (list, tuple)):
        return [to_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: to_plain(v, f"{where}[{k!r}]") for k, v in value.items()}
    if callable(value):
        return repr(value)
    logger.warning(
        "to_dict: %s holds a %s, which may not be JSON serializable; writing its repr",
        where,
        type(value).__qualname__,
    )
    return repr(value)


def _join(prefix: str, part: str | int) -> str:
    return f"{prefix}.{part}" if prefix else str(part)


def traverse_value(
    value: Any,
    config_cls: type | tuple[type, ...],
    *,
    recurse: bool = False,
    fqn: str = "",
    parent: Any = None,
    attr: str | int | None = None,
) -> Iterator[tuple[str, Any, Any, str | int | None]]:
    """Walk ``value`` (a Config, list, tuple, dict, or anything with ``traverse``).

    The engine behind ``Configurable.Config.traverse``; ``fqn``, ``parent`` and ``attr`` say
    where ``value`` itself sits. Objects that bridge into a config tree (``ModelSpec``) call it
    from their own ``traverse`` for each field they expose.
    """
    if isinstance(value, config_cls):
        yield fqn, value, parent, attr
        if not recurse:
            return
    if isinstance(value, Configurable.Config):
        for f in dataclasses.fields(value):
            if f.name.startswith("_"):
                continue
            yield from traverse_value(
                getattr(value, f.name),
                config_cls,
                recurse=recurse,
                fqn=_join(fqn, f.name),
                parent=value,
                attr=f.name,
            )
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from traverse_value(
                item, config_cls, recurse=recurse, fqn=_join(fqn, index), parent=value, attr=index
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from traverse_value(
                item, config_cls, recurse=recurse, fqn=_join(fqn, key), parent=value, attr=key
            )
    elif not isinstance(value, type) and callable(getattr(value, "traverse", None)):
        yield from value.traverse(config_cls, recurse=recurse, _prefix=fqn)


def config_name(cls: type) -> str:
    """The name messages give a Config class: its ``written_name``, else its ``__qualname__``."""
    return getattr(cls, "written_name", None) or cls.__qualname__


__all__ = ["Configurable", "config_name", "to_plain", "traverse_value"]
