"""Parallelisation of Qwen3.5 from the new config sections: CP -> TP -> AC -> compile -> FSDP.

:func:`parallelize_qwen3_5_v2` is the v2 ``ModelSpec.parallelize_fn`` (torchtitan's signature) and the only parallelisation entry of Qwen3.5: the engine calls it and
nothing else. It composes the building blocks of ``hyper_parallel.models.qwen3_5.parallelize``
-- ``apply_tp``, ``apply_ac``, ``apply_fsdp``, ``build_mp_policy`` -- plus :func:`apply_compile`;
torchrun tests check every layout against an unsharded reference.

Inputs (the attribute names of the generated sections; anything with those attributes works):

* ``parallel_dims``: ``tp``, ``cp``, ``pp``, ``ep`` (degrees), ``world_mesh`` (its dim names say
  which axes exist) and ``get_mesh(name)``.
* ``training.mixed_precision_param`` / ``mixed_precision_reduce`` / ``mixed_precision_output``
  (dtype names; ``output`` may be absent = ``None``) and ``training.enable_cpu_offload``
  (absent = off).
* ``parallelism.reshard_after_forward``, ``parallelism.fsdp_forward_prefetch`` /
  ``fsdp_backward_prefetch`` (absent = 0; :func:`fsdp_prefetch_depths`).
* ``activation_checkpoint.mode``: ``off`` / ``none`` / ``full`` / ``selective``;
  ``activation_checkpoint.num_layers`` (absent = every layer; ``activation_checkpoint.ac_depth``).
* ``compile.enable``, ``compile.backend`` (default ``inductor``), ``compile.components``
  (the model is compiled only when it lists ``model``; absent = ``["model"]``).
* ``dump_folder``: unused (accepted for the torchtitan signature; nothing here writes files).

**Mixed precision, "off".** The new tree has no ``enabled`` switch: a policy whose three dtypes
are all ``float32`` or unset (``mixed_precision_param="float32"``, ``mixed_precision_reduce=
"float32"``, ``mixed_precision_output=None`` -- the section defaults) casts nothing (parameters
are float32 masters), so it means *no* ``MixedPrecisionPolicy`` at all: exactly the legacy
``train.mixed_precision.enabled: false`` (``hyper_parallel.config.transforms`` converts the two
that way). Any other combination is the legacy ``enabled: true`` with those dtypes, built by
``build_mp_policy``. Mixed precision is FSDP's policy, so a real one on a mesh without a
data-parallel axis (pure TP) is an error rather than silently ignored. ``mixed_precision_output``
is the dtype of the logits (e.g. ``float32`` logits from ``bfloat16`` compute): it is applied at
the root FSDP unit only, never between decoder layers.

**Compile.** ``compile.enable`` compiles every decoder layer separately, after AC and before
FSDP (torchtitan's order), *in place* with ``nn.Module.compile(backend=..., fullgraph=True)``.
In place rather than ``torch.compile(layer)``: the ``OptimizedModule`` wrapper would insert
``_orig_mod`` into every parameter and state-dict key, so checkpoints and HF exports of a
compiled run would not load into an eager one. All layers of one mixer type share a graph
(parameters are graph inputs), so an N-layer model compiles two graphs, not N. The ``aot_eager``
debug backend fails in the Gated DeltaNet backward with torch 2.13 on CPU (eager
``softplus_backward`` returns strides that AOT autograd did not predict, and a ``view`` then
fails); ``inductor`` and ``eager`` work.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy

from hyper_parallel.models.qwen3_5.activation_checkpoint import ac_depth
from hyper_parallel.models.qwen3_5.context_parallel import apply_cp
from hyper_parallel.models.qwen3_5.context_parallel_rules import (
    check_cp_heads,
    context_parallel_modes,
)
from hyper_parallel.models.qwen3_5.parallelize import (
    DEFAULT_DTYPE_MAP,
    apply_ac,
    apply_fsdp,
    apply_tp,
    build_mp_policy,
    normalize_ac_mode,
)
from hyper_parallel.utils.choices import AC_MODES
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import did_you_mean

logger = logging.getLogger(__name__)

__all__ = [
    "apply_compile",
    "compiled_layers",
    "data_parallel_mesh",
    "fsdp_prefetch_depths",
    "mp_policy_from_training",
    "parallelize_qwen3_5_v2",
]

_UNSUPPORTED = (
    ("ep", "expert_parallel_degree", "expert parallelism (the dense model has no experts)"),
)
_NO_CAST = (None, "float32")


# ====================================================================== settings -> objects
def _dtype_name(field: str, value: Any) -> str | None:
    """Canonical dtype name of ``training.<field>`` (``None`` stays ``None``)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text not in DEFAULT_DTYPE_MAP:
        raise ValueError(
            f"training.{field}={value!r} is not a known dtype"
            f"{did_you_mean(text, DEFAULT_DTYPE_MAP)}; valid names: "
            f"{', '.join(DEFAULT_DTYPE_MAP)}"
        )
    return str(DEFAULT_DTYPE_MAP[text]).removeprefix("torch.")


def mp_policy_from_training(training: Any) -> MixedPrecisionPolicy | None:
    """The FSDP2 mixed-precision policy of the ``training`` section; ``None`` means "off".

    Off when ``mixed_precision_param``, ``mixed_precision_reduce`` and ``mixed_precision_output``
    are each ``float32`` or unset (see the module docstring); otherwise the legacy
    ``build_mp_policy`` of ``enabled=True`` with these three dtypes. ``mixed_precision_output``
    is the dtype of the model's outputs (the logits): ``apply_fsdp`` applies it at the root unit
    only, so the decoder layers keep handing ``mixed_precision_param`` activations to each other
    and to the final norm / ``lm_head`` (``parallelize.split_mp_policy``).
    """
    param = _dtype_name("mixed_precision_param", getattr(training, "mixed_precision_param", None))
    reduce = _dtype_name(
        "mixed_precision_reduce", getattr(training, "mixed_precision_reduce", None)
    )
    output = _dtype_name(
        "mixed_precision_output", getattr(training, "mixed_precision_output", None)
    )
    if param in _NO_CAST and reduce in _NO_CAST and output in _NO_CAST:
        return None
    return build_mp_policy(
        SimpleNamespace(
            enabled=True,
            param_dtype=param or "float32",
            reduce_dtype=reduce or "float32",
            output_dtype=output,
        )
    )


def _ac_mode(activation_checkpoint: Any) -> str:
    mode = getattr(activation_checkpoint, "mode", "off") if activation_checkpoint else "off"
    try:
        return normalize_ac_mode(mode)
    except ValueError:
        raise ValueError(
            f"activation_checkpoint.mode={mode!r} is not a valid mode"
            f"{did_you_mean(str(mode), AC_MODES)}; valid modes: {', '.join(AC_MODES)}"
        ) from None


def _mesh_names(parallel_dims: Any) -> tuple[str, ...]:
    return tuple(parallel_dims.world_mesh.mesh_dim_names or ())


def data_parallel_mesh(parallel_dims: Any) -> DeviceMesh | None:
    """The mesh FSDP shards over, the one choice every layout goes through.

    The shard axis is ``dp_shard``, joined by ``cp`` under context parallelism (its ranks
    train on different positions, so their gradients are summed: ``dp_shard_cp``, or ``cp``
    alone). ``(dp_replicate, <shard axis>)`` (HSDP, 2-D) when both exist, else the shard axis,
    else ``dp_replicate`` (sharding over the replicas averages the same gradients with less
    memory); ``None`` for a mesh without a data-parallel axis (pure TP). A job without
    parallelism has a 1-D ``dp_shard`` mesh of the world size (see :func:`needs_fsdp` for one
    rank).
    """
    names = _mesh_names(parallel_dims)
    shard = next((alias for alias, present in (
        ("dp_shard_cp", "dp_shard" in names and "cp" in names),
        ("dp_shard", "dp_shard" in names),
        ("cp", "cp" in names),
    ) if present), None)
    if "dp_replicate" in names and shard is not None:
        return parallel_dims.world_mesh[("dp_replicate", shard)]
    if shard is not None:
        return parallel_dims.get_mesh(shard)
    if "dp_replicate" in names:
        return parallel_dims.get_mesh("dp_replicate")
    return None


#: The recipe fields :func:`refuse_without_data_axis` names, by what they ask of FSDP2.
MIXED_PRECISION_FIELD = "training.mixed_precision_param"
CPU_OFFLOAD_FIELD = "training.enable_cpu_offload"


def refuse_without_data_axis(request: str, names: tuple[str, ...], field: str) -> None:
    """A ``ConfigError`` naming ``field``: ``request`` (mixed precision, CPU offload) is a
    policy of FSDP2, and the mesh ``names`` has no axis FSDP runs over (pure tensor
    parallelism)."""
    raise ConfigError(
        f"{request}, which is FSDP2's policy, but the mesh {names} has no dp_shard / "
        "dp_replicate axis (pure tensor parallel); turn it off (mixed precision: float32 / "
        "float32 / unset) or give the mesh a data-parallel axis",
        path=field,
    )


#: The recipe fields of FSDP2's explicit prefetching, forward then backward.
PREFETCH_FIELDS = ("parallelism.fsdp_forward_prefetch", "parallelism.fsdp_backward_prefetch")


def fsdp_prefetch_depths(parallelism: Any, *, fsdp: bool, names: tuple[str, ...]) -> tuple[int, int]:
    """``(forward, backward)`` prefetch depths of ``parallelism`` (absent = 0), refused with a
    ``ConfigError`` naming the field where they would do nothing: without FSDP (``fsdp``
    false: one rank without mixed precision or CPU offload, or a mesh ``names`` without a
    data-parallel axis) nothing is gathered, and with ``reshard_after_forward`` false the
    parameters stay gathered into the backward."""
    depths = tuple(getattr(parallelism, f.rpartition(".")[2], 0) or 0 for f in PREFETCH_FIELDS)
    for field, depth in zip(PREFETCH_FIELDS, depths):
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
            raise ConfigError(f"{depth!r}: a prefetch depth is a number of layers >= 0",
                              path=field)
        if depth and not fsdp:
            raise ConfigError(
                f"{depth}: the model is not wrapped in FSDP2 on this layout (the mesh {names} "
                "shards over no data-parallel rank but this one, and neither mixed precision "
                "nor CPU offload asks for FSDP), so there is no all-gather to prefetch; set it "
                "to 0",
                path=field,
            )
    if depths[1] and not getattr(parallelism, "reshard_after_forward", True):
        raise ConfigError(
            f"{depths[1]}: with parallelism.reshard_after_forward false the parameters stay "
            "gathered from the forward to the backward, so there is no all-gather to "
            "prefetch; set it to 0",
            path=PREFETCH_FIELDS[1],
        )
    return depths


def needs_fsdp(
    dp_mesh: DeviceMesh | None, mp_policy: MixedPrecisionPolicy | None, cpu_offload: bool
) -> bool:
    """Whether FSDP2 is applied over ``dp_mesh``.

    Always over more than one rank. Over one rank FSDP shards nothing, and wrapping costs:
    every parameter becomes a DTensor, so each AdamW and clipping op is a DTensor dispatch
    (about 5 % of a CPU step on the debug model), and each unit gathers a second copy of its
    parameters for its forward. So one rank is wrapped only for what FSDP2 then does: its
    mixed-precision policy (the bf16 golden losses are FSDP's casts) or its CPU offload.
    Unwrapped, an fp32 step computes the same losses bit for bit, and its DCP checkpoints load
    on any layout.
    """
    if dp_mesh is None:
        return False
    return dp_mesh.size() > 1 or mp_policy is not None or cpu_offload


def _check_layout(parallel_dims: Any) -> None:
    """ep > 1 is not supported (pp > 1 reaches here one stage at a time, from the
    spec's ``pipelining_fn``); the mesh's tp axis must match ``parallel_dims.tp``."""
    for attr, field, what in _UNSUPPORTED:
        degree = getattr(parallel_dims, attr, 1) or 1
        if degree > 1:
            raise NotImplementedError(
                f"parallelism.{field}={degree}: {what} is not supported by qwen3_5_v2 yet; set "
                f"parallelism.{field}=1"
            )
    names = _mesh_names(parallel_dims)
    tp = getattr(parallel_dims, "tp", 1) or 1
    mesh_tp = parallel_dims.get_mesh("tp").size() if "tp" in names else 1
    if tp != mesh_tp:
        raise ValueError(
            f"parallel_dims.tp={tp} but the device mesh {names} has a tp axis of size {mesh_tp}; "
            "build the mesh from the same parallel_dims (parallel_dims.build_mesh)"
        )


# ====================================================================== compile
def apply_compile(model: nn.Module, *, backend: str = "inductor", fullgraph: bool = True) -> int:
    """``torch.compile`` every decoder layer of ``model`` in place; returns how many.

    Each entry of ``model.model.layers`` (a decoder layer, or its activation-checkpoint wrapper)
    gets ``layer.compile(backend=backend, fullgraph=fullgraph)``: the module object, its
    parameter names and its state-dict keys stay the same. Run it after AC and before FSDP.
    """
    if not isinstance(backend, str) or not backend.strip():
        raise ValueError(f"compile.backend must be a non-empty string, got {backend!r}")
    layers = model.model.layers
    done = compiled_layers(model)
    if done:
        raise RuntimeError(f"model.layers {done} are already compiled; apply_compile must run once")
    for layer in layers:
        layer.compile(backend=backend, fullgraph=fullgraph)
    return len(layers)


def compiled_layers(model: nn.Module) -> list[int]:
    """Indices of the decoder layers compiled in place (``nn.Module.compile``)."""
    return [
        i
        for i, layer in enumerate(model.model.layers)
        if getattr(layer, "_compiled_call_impl", None) is not None
    ]


def _compile_model_requested(compile_section: Any) -> bool:
    if compile_section is None or not getattr(compile_section, "enable", False):
        return False
    components = getattr(compile_section, "components", None)
    return components is None or "model" in components


# ====================================================================== the v2 entry
def parallelize_qwen3_5_v2(
    model: nn.Module,
    parallel_dims: Any,
    *,
    training: Any,
    parallelism: Any,
    activation_checkpoint: Any,
    compile: Any,
    dump_folder: str | None = None,
) -> nn.Module:
    """CP -> TP -> AC -> compile -> FSDP on ``model`` (in place, usually on ``meta``); returns it.

    * CP over ``parallel_dims.get_mesh("cp")`` when its degree is above 1
      (:func:`context_parallel_modes`: Ulysses or all-gather attention, Ulysses or state-passing
      Gated DeltaNet; the head counts checked against both degrees). EP > 1 is
      ``NotImplementedError`` (the dense model has no experts). Under PP ``model`` is one
      pipeline stage (``models.pipelining`` calls this once per stage).
    * TP over ``parallel_dims.get_mesh("tp")`` when the mesh has a ``tp`` axis
      (the legacy ``apply_tp``: Megatron-style, replicated activations between blocks).
    * AC: ``activation_checkpoint.mode`` on every decoder layer, or the first
      ``activation_checkpoint.num_layers`` of the stage (legacy ``apply_ac``).
    * compile: when ``compile.enable`` (and ``compile.components`` lists ``model``), every
      decoder layer, in place (:func:`apply_compile`).
    * FSDP over :func:`data_parallel_mesh` (skipped on a pure-TP mesh, and on one rank unless
      mixed precision or CPU offload asks for it: :func:`needs_fsdp`) with the policy of
      :func:`mp_policy_from_training` and ``parallelism.reshard_after_forward`` (legacy
      ``apply_fsdp``: every decoder layer, then the root), and the decoder layers' explicit
      prefetching (:func:`fsdp_prefetch_depths`).

    Everything is validated before the model is touched.
    """
    _check_layout(parallel_dims)
    cp = getattr(parallel_dims, "cp", 1) or 1
    cp_modes = context_parallel_modes(parallelism, cp)
    if cp_modes is not None:
        check_cp_heads(model.config, cp, getattr(parallel_dims, "tp", 1) or 1, *cp_modes[:2])
    mp_policy = mp_policy_from_training(training)
    ac_mode = _ac_mode(activation_checkpoint)
    compile_model = _compile_model_requested(compile)
    backend = getattr(compile, "backend", None) or "inductor"
    reshard = bool(getattr(parallelism, "reshard_after_forward", True))
    cpu_offload = bool(getattr(training, "enable_cpu_offload", False))
    dp_mesh = data_parallel_mesh(parallel_dims)
    names = _mesh_names(parallel_dims)
    if dp_mesh is None and mp_policy is not None:
        refuse_without_data_axis(
            "training.mixed_precision_param / _reduce / _output ask for mixed precision "
            f"({mp_policy})", names, MIXED_PRECISION_FIELD)
    fsdp = needs_fsdp(dp_mesh, mp_policy, cpu_offload)
    prefetch = fsdp_prefetch_depths(parallelism, fsdp=fsdp, names=names)
    ac_layers = getattr(activation_checkpoint, "num_layers", None)
    ac_depth(model, ac_mode, ac_layers)

    if cp_modes is not None:
        attention, linear, async_comm = cp_modes
        apply_cp(model, parallel_dims.get_mesh("cp"), attention=attention, linear=linear,
                 async_comm=async_comm)
    if "tp" in names:
        apply_tp(model, parallel_dims.get_mesh("tp"))
    apply_ac(model, ac_mode, ac_layers)
    if compile_model:
        apply_compile(model, backend=backend)
    if fsdp:
        apply_fsdp(model, dp_mesh, mp_policy=mp_policy, reshard_after_forward=reshard,
                   cpu_offload=cpu_offload, forward_prefetch=prefetch[0],
                   backward_prefetch=prefetch[1])
    elif cpu_offload:
        refuse_without_data_axis("training.enable_cpu_offload asks for CPU offload", names,
                                 CPU_OFFLOAD_FIELD)
    logger.info(
        "qwen3_5_v2 parallelized: mesh dims=%s cp=%s tp=%s ac=%s compile=%s fsdp=%s mp=%s "
        "reshard=%s cpu_offload=%s prefetch=%s",
        names,
        f"{cp} (attention {cp_modes[0]}, linear {cp_modes[1]}, async {cp_modes[2]})"
        if cp_modes else 1,
        getattr(parallel_dims, "tp", 1),
        ac_mode if ac_layers is None else f"{ac_mode} (num_layers={ac_layers})",
        backend if compile_model else None,
        dp_mesh.mesh_dim_names if fsdp else None,
        mp_policy,
        reshard,
        cpu_offload,
        prefetch,
    )
    return model
