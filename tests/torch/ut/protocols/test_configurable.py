"""Configurable / Config: definition-time rules, build, the subclass rule, to_dict, traverse."""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import pickle
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from hyper_parallel.protocols import Configurable, Function

# ---------------------------------------------------------------------- a small component tree
# Module level on purpose: pickling a Config needs its class to be importable by qualname.


class Leaf(Configurable):
    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        size: int = 1
        tags: list[str] = field(default_factory=list)

        def __post_init__(self) -> None:
            if self.size < 1:
                raise ValueError(f"Leaf.Config.size must be >= 1, got {self.size}")

        def describe(self) -> str:
            return f"size={self.size}"

    def __init__(self, config: Config, *, device: str | None = None) -> None:
        self.config = config
        self.device = device


class Special(Leaf):
    """Declares no Config: gets an automatic ``Special.Config(Leaf.Config)``."""


class MoreSpecial(Special):
    """Two levels of automatic Configs."""


class Block(Configurable):
    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        a: Leaf.Config = field(default_factory=Leaf.Config)
        b: Leaf.Config = field(default_factory=Leaf.Config)

    def __init__(self, config: Config) -> None:
        self.config = config


class Net(Configurable):
    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        head: Leaf.Config = field(default_factory=Leaf.Config)
        blocks: list[Block.Config] = field(default_factory=list)
        extras: dict[str, Leaf.Config] = field(default_factory=dict)
        pair: tuple[Leaf.Config, ...] = ()
        _cache: Leaf.Config | None = None

    def __init__(self, config: Config) -> None:
        self.config = config


def make_net() -> Net.Config:
    return Net.Config(
        blocks=[Block.Config(), Block.Config(b=Special.Config(size=3))],
        extras={"aux": Leaf.Config()},
        _cache=Leaf.Config(),
    )


# ---------------------------------------------------------------------- build


def test_build_constructs_the_owner_with_a_copy_and_runtime_kwargs():
    cfg = Leaf.Config(size=4)
    leaf = cfg.build(device="cpu")
    assert type(leaf) is Leaf
    assert leaf.device == "cpu"
    assert leaf.config == cfg
    assert leaf.config is not cfg


def test_clone_isolation_after_build():
    cfg = Leaf.Config(size=2, tags=["x"])
    leaf = cfg.build()
    leaf.config.size = 7
    assert cfg.size == 2
    cfg.size = 5
    assert leaf.config.size == 7
    # Documented: the copy is shallow, so mutable field values are shared.
    leaf.config.tags.append("y")
    assert cfg.tags == ["x", "y"]


def test_nested_configs_are_shared_by_the_shallow_copy():
    net_cfg = make_net()
    net = net_cfg.build()
    assert net.config is not net_cfg
    assert net.config.head is net_cfg.head
    assert net.config.blocks is net_cfg.blocks


def test_build_reruns_validation():
    cfg = Leaf.Config(size=1)
    cfg.size = 0  # attribute assignment bypasses __post_init__ ...
    with pytest.raises(ValueError, match="size must be >= 1, got 0"):
        cfg.build()  # ... build validates again


def test_build_kwarg_that_is_a_field_is_rejected():
    with pytest.raises(ValueError) as info:
        Leaf.Config().build(size=3, device="cpu")
    message = str(info.value)
    assert "['size']" in message
    assert "Put these values in the Config" in message
    assert "Leaf.Config(size=...)" in message


def test_build_kwarg_config_is_reserved():
    with pytest.raises(ValueError, match="'config' keyword argument"):
        Leaf.Config().build(config=Leaf.Config())


def test_config_without_owner_explains_how_to_define_one():
    with pytest.raises(NotImplementedError, match="inside a Configurable subclass"):
        Configurable.Config().build()

    @dataclass(kw_only=True, slots=True)
    class Loose(Configurable.Config):
        x: int = 0

    with pytest.raises(NotImplementedError, match=r"(?s)Loose has no owner class.*class MyThing"):
        Loose().build()


def test_slots_make_misspelt_attributes_an_error():
    cfg = Leaf.Config()
    with pytest.raises(AttributeError):
        cfg.sise = 3  # type: ignore[attr-defined]


def test_fields_are_keyword_only():
    with pytest.raises(TypeError):
        Leaf.Config(3)  # type: ignore[misc]


def test_config_pickles_and_deep_copies():
    cfg = make_net()
    clone = pickle.loads(pickle.dumps(cfg))
    assert clone == cfg
    assert type(clone.blocks[1].b) is Special.Config


# ---------------------------------------------------------------------- definition-time errors


def test_undecorated_config_is_a_type_error_naming_class_and_fix():
    with pytest.raises(TypeError, match=r"Bad\.Config is not a dataclass of its own.*"
                       r"@dataclass\(kw_only=True, slots=True\)"):

        class Bad(Configurable):
            class Config(Configurable.Config):
                x: int = 0


def test_config_without_slots_is_a_type_error():
    with pytest.raises(TypeError, match=r"Bad\.Config is not slotted.*slots=True"):

        class Bad(Configurable):
            @dataclass(kw_only=True)
            class Config(Configurable.Config):
                x: int = 0


def test_config_without_kw_only_is_a_type_error():
    with pytest.raises(TypeError, match=r"Bad\.Config has positional field\(s\) \['x'\]"):

        class Bad(Configurable):
            @dataclass(slots=True)
            class Config(Configurable.Config):
                x: int = 0


def test_config_must_subclass_the_parents_config():
    with pytest.raises(TypeError, match=r"Bad\.Config must subclass Leaf\.Config"):

        class Bad(Leaf):
            @dataclass(kw_only=True, slots=True)
            class Config(Configurable.Config):
                y: int = 0


def test_config_must_be_a_configurable_config():
    with pytest.raises(TypeError, match=r"Bad\.Config must be a class that subclasses"):

        class Bad(Configurable):
            @dataclass(kw_only=True, slots=True)
            class Config:
                x: int = 0


def test_a_correct_declaration_is_wired():
    class Good(Leaf):
        @dataclass(kw_only=True, slots=True)
        class Config(Leaf.Config):
            extra: int = 2

    assert Good.Config._owner is Good
    built = Good.Config(size=3, extra=4).build()
    assert type(built) is Good and built.config.extra == 4 and built.config.size == 3


# ---------------------------------------------------------------------- subclass-without-Config


def test_subclass_without_config_gets_its_own_wired_config():
    assert Special.Config is not Leaf.Config
    assert issubclass(Special.Config, Leaf.Config)
    assert Special.Config._owner is Special
    assert Leaf.Config._owner is Leaf
    assert Special.Config.__qualname__ == "Special.Config"
    assert "__slots__" in Special.Config.__dict__
    assert all(f.kw_only for f in dataclasses.fields(Special.Config))
    # The subclass builds itself, never its parent, and the parent still builds the parent.
    assert type(Special.Config(size=2).build()) is Special
    assert type(Leaf.Config().build()) is Leaf
    assert type(MoreSpecial.Config().build()) is MoreSpecial
    assert issubclass(MoreSpecial.Config, Special.Config)
    # Validation is inherited.
    with pytest.raises(ValueError, match="size must be >= 1"):
        Special.Config(size=0)


def test_subclass_without_config_of_unrelated_configurables_must_declare_one():
    class Other(Configurable):
        @dataclass(kw_only=True, slots=True)
        class Config(Configurable.Config):
            z: int = 0

        def __init__(self, config):
            self.config = config

    with pytest.raises(TypeError, match=r"Both inherits from several Configurable classes.*"
                       r"declare .*class Config"):

        class Both(Leaf, Other):
            pass


def test_preset_config_outside_a_configurable_builds_the_parents_owner():
    @dataclass(kw_only=True, slots=True)
    class BigLeaf(Leaf.Config):
        size: int = 64

    built = BigLeaf().build()
    assert type(built) is Leaf and built.config.size == 64


# ---------------------------------------------------------------------- super() in slotted Configs


def test_zero_arg_super_works_in_nested_config_methods():
    class Checked(Leaf):
        @dataclass(kw_only=True, slots=True)
        class Config(Leaf.Config):
            limit: int = 10

            def __post_init__(self) -> None:
                super().__post_init__()  # Leaf.Config's check
                if self.size > self.limit:
                    raise ValueError("size > limit")

            def describe(self) -> str:
                return super().describe() + f" limit={self.limit}"

    assert Checked.Config(size=5).describe() == "size=5 limit=10"
    with pytest.raises(ValueError, match="size must be >= 1"):
        Checked.Config(size=0)
    with pytest.raises(ValueError, match="size > limit"):
        Checked.Config(size=11)


# ---------------------------------------------------------------------- to_dict


class Color(enum.Enum):
    RED = "red"


def _double(x):
    return 2 * x


def test_to_dict_is_recursive_and_skips_private_fields():
    cfg = make_net()
    assert cfg.to_dict() == {
        "head": {"size": 1, "tags": []},
        "blocks": [
            {"a": {"size": 1, "tags": []}, "b": {"size": 1, "tags": []}},
            {"a": {"size": 1, "tags": []}, "b": {"size": 3, "tags": []}},
        ],
        "extras": {"aux": {"size": 1, "tags": []}},
        "pair": [],
    }


def test_to_dict_handles_enums_callables_dataclasses_and_unknown_values(caplog):
    @dataclass
    class Plain:
        x: int = 1
        _hidden: int = 2

    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    class Holder(Configurable):
        @dataclass(kw_only=True, slots=True)
        class Config(Configurable.Config):
            color: Color = Color.RED
            fn: object = _double
            kind: object = int
            plain: Plain = field(default_factory=Plain)
            opaque: object = field(default_factory=Opaque)
            fn_node: Function.Config = field(default_factory=lambda: Function.Config(fn=_double))
            pair: tuple = (1, "a", None, 2.5, True)

    with caplog.at_level(logging.WARNING, logger="hyper_parallel.protocols.configurable"):
        out = Holder.Config().to_dict()
    assert out["color"] == "red"
    assert out["fn"] == repr(_double)
    assert out["kind"] == repr(int)
    assert out["plain"] == {"x": 1}
    assert out["opaque"] == "<opaque>"
    assert out["fn_node"] == {"fn": repr(_double)}
    assert out["pair"] == [1, "a", None, 2.5, True]
    assert "Holder.Config.opaque" in caplog.text and "JSON serializable" in caplog.text


# ---------------------------------------------------------------------- traverse


def fqns(items):
    return [fqn for fqn, *_ in items]


def test_traverse_exact_paths():
    root = make_net()
    assert fqns(root.traverse(Leaf.Config)) == [
        "head",
        "blocks.0.a",
        "blocks.0.b",
        "blocks.1.a",
        "blocks.1.b",
        "extras.aux",
    ]  # `_cache` is private: not walked
    assert fqns(root.traverse(Special.Config)) == ["blocks.1.b"]
    assert fqns(root.traverse(Block.Config)) == ["blocks.0", "blocks.1"]


def test_traverse_root_and_recurse():
    root = make_net()
    assert list(root.traverse(Net.Config)) == [("", root, None, None)]
    assert fqns(root.traverse(Configurable.Config)) == [""]  # the root match is not entered
    assert fqns(root.traverse(Configurable.Config, recurse=True)) == [
        "",
        "head",
        "blocks.0",
        "blocks.0.a",
        "blocks.0.b",
        "blocks.1",
        "blocks.1.a",
        "blocks.1.b",
        "extras.aux",
    ]
    assert fqns(root.traverse((Block.Config, Leaf.Config), recurse=True)) == [
        "head",
        "blocks.0",
        "blocks.0.a",
        "blocks.0.b",
        "blocks.1",
        "blocks.1.a",
        "blocks.1.b",
        "extras.aux",
    ]


def test_traverse_tuple_items_are_indexed():
    root = Net.Config(pair=(Leaf.Config(), Leaf.Config(size=2)))
    assert [(f, p is root.pair, a) for f, _, p, a in root.traverse(Leaf.Config)][1:] == [
        ("pair.0", True, 0),
        ("pair.1", True, 1),
    ]


def test_traverse_parent_and_field_allow_in_place_replacement():
    root = make_net()
    found = list(root.traverse(Leaf.Config))
    head = found[0]
    assert head[2] is root and head[3] == "head"
    block1_b = found[4]
    assert block1_b[2] is root.blocks[1] and block1_b[3] == "b"
    aux = found[5]
    assert aux[2] is root.extras and aux[3] == "aux"
    for _, cfg, parent, attr in found:
        replacement = Leaf.Config(size=cfg.size + 10)
        if isinstance(attr, str) and not isinstance(parent, dict):
            setattr(parent, attr, replacement)
        else:
            parent[attr] = replacement
    assert [c.size for _, c, *_ in root.traverse(Leaf.Config)] == [11, 11, 11, 11, 13, 11]

    list_root = Net.Config(blocks=[Block.Config()])
    _, _, parent, index = next(list_root.traverse(Block.Config))
    assert parent is list_root.blocks and index == 0
    parent[index] = Block.Config(a=Leaf.Config(size=9))
    assert list_root.blocks[0].a.size == 9


def test_traverse_delegates_to_values_with_a_traverse_method():
    class Bridge:
        """Not a Config: exposes one config under the name ``inner``."""

        def __init__(self, inner):
            self.inner = inner

        def traverse(self, config_cls, *, recurse=False, _prefix=""):
            from hyper_parallel.protocols import traverse_value

            return traverse_value(
                self.inner, config_cls, recurse=recurse, fqn=f"{_prefix}.inner", parent=self,
                attr="inner",
            )

    class Holder(Configurable):
        @dataclass(kw_only=True, slots=True)
        class Config(Configurable.Config):
            bridge: object = None

    bridge = Bridge(Block.Config())
    root = Holder.Config(bridge=bridge)
    assert fqns(root.traverse(Leaf.Config)) == ["bridge.inner.a", "bridge.inner.b"]
    (_, _, parent, attr), = root.traverse(Block.Config)
    assert parent is bridge and attr == "inner"


# ---------------------------------------------------------------------- Function


def test_function_wraps_a_callable():
    fn = Function.Config(fn=functools.partial(_double)).build()
    assert isinstance(fn, Function)
    assert fn(21) == 42
    with pytest.raises(TypeError, match="Function.Config.fn must be callable, got int"):
        Function.Config(fn=3)


# ---------------------------------------------------------------------- no framework import


def test_framework_free_modules_import_no_torch():
    code = (
        "import sys\n"
        "import hyper_parallel.protocols.configurable, hyper_parallel.protocols.function\n"
        "import hyper_parallel.protocols.model_spec, hyper_parallel.protocols.types\n"
        "import hyper_parallel.protocols as p\n"
        "assert p.Configurable and p.ModelSpec and p.MeshAxisName\n"
        "bad = [m for m in ('torch', 'mindspore') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "p.Module  # lazy: now the platform's framework is imported\n"
        "assert 'torch' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
