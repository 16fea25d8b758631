"""Which implementation the Gated DeltaNet layers compute with: the torch path or CUDA kernels.

``model.kernels`` (:data:`~hyper_parallel.utils.choices.KERNEL_CHOICES`) is resolved
per layer, against the device its parameters are on, by :func:`select_gdn_kernels`:

* ``torch`` -- the plain torch path: :func:`causal_depthwise_conv_silu` and
  :func:`~hyper_parallel.models.qwen3_5.delta_rule.chunk_gated_delta_rule`. It runs anywhere
  and is the reference (CPU golden losses are computed with it).
* ``fla`` -- fla-core's Triton kernels (the library transformers itself prefers for this
  model): ``fla.ops.gated_delta_rule.chunk_gated_delta_rule`` for the recurrence and, for the
  short convolution, ``causal_conv1d.causal_conv1d_fn`` when the ``causal-conv1d`` package
  imports, else fla-core's ``causal_conv1d`` (``fla.modules.causal_conv1d`` from 0.6,
  ``fla.modules.convolution`` before). It needs a CUDA device and the
  package (the ``gpu`` extra); asked for where either is missing it is a ``ConfigError``
  naming ``model.kernels``, the reason and the fix.
* ``auto`` -- ``fla`` when the parameters are on CUDA and fla-core imports, ``torch`` otherwise
  (fla is not even imported for a model on the CPU).

The mapping onto fla's API (both take ``[B, T, H, D]`` tensors, no head-first layout):

=====================  =====================================================================
ours (torch path)      fla-core
=====================  =====================================================================
q, k (B,T,Hk,Dk)       repeated to Hv heads with ``repeat_interleave`` when Hk < Hv (key head
                       h serves value heads h*G .. h*G+G-1, as in the torch path)
l2norm(q), l2norm(k)   ``use_qk_l2norm_in_kernel=True`` (the same ``x * rsqrt(sum x^2 + 1e-6)``)
q * Dk**-0.5           ``scale=Dk ** -0.5`` (what fla defaults to, passed explicitly)
g (B,T,Hv), log decay  ``g`` (fp32, ``<= 0``: ``-exp(A_log) * softplus(a + dt_bias)``)
beta (B,T,Hv)          ``beta`` (already ``sigmoid(b)``)
zero initial state     ``initial_state=None, output_final_state=False``
document_starts        the rows flattened to batch 1 with ``cu_seqlens`` (int64) and, where
                       fla takes it, ``cu_seqlens_cpu`` (block_causal: packed documents)
conv weight (C,1,K)    ``weight[:, 0, :]`` (C, K); ``activation="silu"``; causal-conv1d takes
                       x channel-first (B, C, T), fla's conv (B, T, C)
=====================  =====================================================================

Both kernel paths compute in the weights' dtype like the torch path (the conv input is cast to
it); the delta-rule output comes back in the dtype of ``v``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

from hyper_parallel.utils.choices import KERNEL_CHOICES
from hyper_parallel.utils.documents import Documents, DocumentShard
from hyper_parallel.utils.errors import ConfigError

from .delta_rule import DEFAULT_CHUNK_SIZE, chunk_gated_delta_rule

__all__ = [
    "TORCH_KERNELS",
    "GdnKernels",
    "causal_depthwise_conv_silu",
    "log_kernel_choice",
    "select_gdn_kernels",
]

logger = logging.getLogger(__name__)

KERNELS_PATH = "model.kernels"
"""The field a kernel choice comes from (named by every error here)."""

_GPU_EXTRA = "pip install 'hyper_parallel[gpu]'"

#: The function behind each ``GdnKernels.conv_name`` (for the log line).
_CONV_FUNCTIONS = {
    "torch": "torch.nn.functional.conv1d",
    "causal-conv1d": "causal-conv1d causal_conv1d_fn",
    "fla": "fla-core causal_conv1d",
}


@dataclass(frozen=True)
class GdnKernels:
    """The two functions a Gated DeltaNet layer computes with, and what they are.

    ``conv(x, weight)``: SiLU of the causal depthwise convolution, ``x`` ``(B, S, C)``,
    ``weight`` ``(C, 1, K)``, result ``(B, S, C)`` in ``x``'s dtype.
    ``delta_rule(q, k, v, g, beta, documents=None)``: the chunked gated delta rule from a zero
    state (q / k L2-normalised and q scaled inside), ``(B, S, Hv, Dv)``; with ``documents``
    (:class:`~hyper_parallel.utils.documents.Documents` on the device) the state restarts at
    each document's start (the torch path's ``document_starts``, fla's ``cu_seqlens``).
    ``delta_rule_with_state(q, k, v, g, beta, initial_state)``: the same from ``initial_state``
    ``(B, Hv, Dk, Dv)`` (fp32), returning ``(out, final_state)`` (context parallelism's state
    passing); with ``documents`` (a shard's
    :class:`~hyper_parallel.utils.documents.DocumentShard`) the state restarts at the shard's
    document starts, ``initial_state`` dropped where one begins at its first token.
    """

    name: str
    """``torch`` or ``fla``: the recurrence's implementation."""
    conv_name: str
    """``torch``, ``causal-conv1d`` or ``fla``: the short convolution's implementation."""
    conv: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    delta_rule: Callable[..., torch.Tensor]
    delta_rule_with_state: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    device_type: str = "cpu"
    """The device type this choice was made for (a layer moved elsewhere chooses again)."""
    reason: str = ""
    """Why ``auto`` chose this (empty when the choice was forced)."""

    def describe(self) -> str:
        """One line for the log: the recurrence's and the convolution's implementation."""
        if self.name == "torch":
            return "torch (chunked gated delta rule and depthwise conv1d in plain torch)"
        conv = _CONV_FUNCTIONS[self.conv_name]
        return f"fla (fla-core chunk_gated_delta_rule, short convolution: {conv})"


# ------------------------------------------------------------------------------ torch path
def causal_depthwise_conv_silu(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """SiLU(causal depthwise conv) over the sequence; ``x`` ``(B, S, C)``, ``weight`` ``(C, 1, K)``.

    Left-pads ``K - 1`` steps so position ``t`` sees ``t-K+1 .. t``. Computed in the weight's dtype.
    """
    seq, channels = x.shape[1], x.shape[2]
    _check_channels(x, weight)
    kernel = weight.shape[-1]
    y = F.conv1d(x.transpose(1, 2).to(weight.dtype), weight, padding=kernel - 1, groups=channels)[
        ..., :seq
    ]
    return F.silu(y).transpose(1, 2).to(x.dtype)


def _check_channels(x: torch.Tensor, weight: torch.Tensor) -> None:
    if weight.shape[0] != x.shape[2]:
        raise ValueError(
            f"conv weight has {weight.shape[0]} channels but the input has {x.shape[2]}; under "
            "tensor parallelism shard the conv weight like the projection feeding it."
        )


def _torch_delta_rule(q, k, v, g, beta, documents: Documents | None = None) -> torch.Tensor:
    if documents is None:
        return chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=DEFAULT_CHUNK_SIZE)[0]
    return chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=DEFAULT_CHUNK_SIZE,
                                  document_starts=documents.starts)[0]


def _torch_delta_rule_with_state(q, k, v, g, beta, initial_state,
                                 documents: DocumentShard | None = None):
    starts = None if documents is None else documents.starts
    return chunk_gated_delta_rule(
        q, k, v, g, beta, chunk_size=DEFAULT_CHUNK_SIZE, initial_state=initial_state,
        output_final_state=True, document_starts=starts,
    )


TORCH_KERNELS = GdnKernels(
    name="torch",
    conv_name="torch",
    conv=causal_depthwise_conv_silu,
    delta_rule=_torch_delta_rule,
    delta_rule_with_state=_torch_delta_rule_with_state,
)
"""The plain torch path (any device)."""


# ------------------------------------------------------------------------------ fla-core
@functools.cache
def _load_fla() -> tuple[Callable, Callable] | str:
    """fla-core's ``(chunk_gated_delta_rule, causal_conv1d)``, or why they do not import."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk

        try:  # fla-core >= 0.6
            from fla.modules.causal_conv1d import causal_conv1d
        except ImportError:  # fla-core 0.4 / 0.5
            from fla.modules.convolution import causal_conv1d
    except Exception as exc:  # noqa: BLE001 - a broken triton install fails in many ways
        return f"{type(exc).__name__}: {exc}"
    return fla_chunk, causal_conv1d


@functools.cache
def _load_causal_conv1d() -> Callable | None:
    """``causal_conv1d.causal_conv1d_fn`` (a CUDA extension), or None where it does not import."""
    try:
        from causal_conv1d import causal_conv1d_fn
    except Exception:  # noqa: BLE001 - an extension built for another torch fails to load
        return None
    return causal_conv1d_fn


def _fla_delta_rule_with_state(fla_chunk: Callable) -> Callable[..., tuple]:
    def delta_rule_with_state(q, k, v, g, beta, initial_state=None, **offsets):
        groups = v.shape[2] // k.shape[2]
        if groups > 1:  # same grouping as the torch path (and HF's fallback)
            q = q.repeat_interleave(groups, dim=2)
            k = k.repeat_interleave(groups, dim=2)
        return fla_chunk(
            q,
            k,
            v,
            g,
            beta,
            scale=q.shape[-1] ** -0.5,
            initial_state=initial_state,
            output_final_state=initial_state is not None,
            use_qk_l2norm_in_kernel=True,
            **offsets,
        )

    return delta_rule_with_state


def _fla_delta_rule_with_shard_state(fla_chunk: Callable) -> Callable[..., tuple]:
    """``delta_rule_with_state`` that also takes a context-parallel shard's documents
    (:class:`~hyper_parallel.utils.documents.DocumentShard`): fla's varlen form over the
    shard's segments, each row's incoming state the initial state of its first segment where
    the row continues its document (zeros where one begins there, and for every later
    segment), each row's final state its last segment's."""
    with_state = _fla_delta_rule_with_state(fla_chunk)
    takes_host_offsets = "cu_seqlens_cpu" in _parameters(fla_chunk)

    def delta_rule_with_state(q, k, v, g, beta, initial_state,
                              documents: DocumentShard | None = None):
        if documents is None:
            return with_state(q, k, v, g, beta, initial_state)
        batch, seq = q.shape[:2]
        segments = documents.segments()
        flat = [t.reshape(1, batch * seq, *t.shape[2:]) for t in (q, k, v, g, beta)]
        offsets = {"cu_seqlens": segments.cu_seqlens.long()}
        if takes_host_offsets:
            offsets["cu_seqlens_cpu"] = segments.cu_seqlens_host.long()
        # Segment index of each row's first and last segment (host ints, no device read).
        row_starts = (segments.cu_seqlens_host[:-1] % seq == 0).nonzero().squeeze(1).tolist()
        firsts = torch.tensor(row_starts, device=q.device)
        lasts = torch.tensor([*row_starts[1:], segments.count], device=q.device) - 1
        keep = torch.tensor(documents.continues, device=q.device)
        initial = initial_state.new_zeros(segments.count, *initial_state.shape[1:])
        initial = initial.index_copy(0, firsts, initial_state * keep[:, None, None, None])
        out, final = with_state(*flat, initial, **offsets)
        return out.reshape(batch, seq, *out.shape[2:]), final.index_select(0, lasts)

    return delta_rule_with_state


def _fla_delta_rule(fla_chunk: Callable) -> Callable[..., torch.Tensor]:
    with_state = _fla_delta_rule_with_state(fla_chunk)
    takes_host_offsets = "cu_seqlens_cpu" in _parameters(fla_chunk)

    def delta_rule(q, k, v, g, beta, documents: Documents | None = None) -> torch.Tensor:
        if documents is None:
            return with_state(q, k, v, g, beta)[0]
        # fla's varlen form: the rows flattened to one (batch 1, its contract with cu_seqlens)
        # and the documents' offsets, the state restarting at each; where this fla takes the
        # host copy of the offsets, it sizes its launch from them without reading the device.
        batch, seq = q.shape[:2]
        flat = [t.reshape(1, batch * seq, *t.shape[2:]) for t in (q, k, v, g, beta)]
        offsets = {"cu_seqlens": documents.cu_seqlens.long()}
        if takes_host_offsets:
            offsets["cu_seqlens_cpu"] = documents.cu_seqlens_host.long()
        out = with_state(*flat, **offsets)[0]
        return out.reshape(batch, seq, *out.shape[2:])

    return delta_rule


def _parameters(fn: Callable) -> frozenset[str]:
    """The parameter names of ``fn`` (empty where its signature cannot be read)."""
    try:
        return frozenset(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return frozenset()


def _fla_conv(fla_conv1d: Callable) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def conv(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        _check_channels(x, weight)
        out = fla_conv1d(x=x.to(weight.dtype), weight=weight[:, 0, :], activation="silu")
        if isinstance(out, tuple):  # fla-core >= 0.4 returns (y, final_state)
            out = out[0]
        return out.to(x.dtype)

    return conv


def _causal_conv1d_conv(conv_fn: Callable) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def conv(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        _check_channels(x, weight)
        # (B, C, T) with the channels contiguous: the layout HF passes (its channel-last path).
        y = conv_fn(x.to(weight.dtype).transpose(1, 2), weight[:, 0, :], None, activation="silu")
        return y.transpose(1, 2).to(x.dtype)

    return conv


@functools.cache
def _fla_kernels(
    fla: tuple[Callable, Callable], conv_fn: Callable | None, device_type: str, reason: str
) -> GdnKernels:
    """One object (and one set of functions) per choice, shared by every layer: a compiled
    layer guards on the functions it calls, so per-layer copies would recompile per layer."""
    fla_chunk, fla_conv1d = fla
    if conv_fn is not None:
        conv, conv_name = _causal_conv1d_conv(conv_fn), "causal-conv1d"
    else:
        conv, conv_name = _fla_conv(fla_conv1d), "fla"
    return GdnKernels(
        name="fla",
        conv_name=conv_name,
        conv=conv,
        delta_rule=_fla_delta_rule(fla_chunk),
        delta_rule_with_state=_fla_delta_rule_with_shard_state(fla_chunk),
        device_type=device_type,
        reason=reason,
    )


# ------------------------------------------------------------------------------ the choice
def select_gdn_kernels(requested: str, device_type: str) -> GdnKernels:
    """The kernels for ``model.kernels == requested`` and parameters on ``device_type``.

    Raises :class:`ConfigError` (path ``model.kernels``) for an unknown choice, and for ``fla``
    on a device other than CUDA or where fla-core does not import -- with the fix. The same
    arguments give the same object (fla-core's import is tried once per process).
    """
    if requested not in KERNEL_CHOICES:
        raise ConfigError(
            f"{requested!r} is not a kernel choice; choose one of: {', '.join(KERNEL_CHOICES)}",
            path=KERNELS_PATH,
        )
    if requested == "torch":
        return _torch_for(device_type, "")
    if device_type != "cuda":
        if requested == "auto":
            return _torch_for(device_type, f"the parameters are on {device_type}")
        raise ConfigError(
            f"'fla' runs fla-core's CUDA kernels, but the model's parameters are on "
            f"{device_type}; train on a CUDA device, or set {KERNELS_PATH} to 'auto' (fla on "
            "CUDA, the torch path elsewhere) or 'torch'",
            path=KERNELS_PATH,
        )
    fla = _load_fla()
    if isinstance(fla, str):
        if requested == "auto":
            return _torch_for(device_type, f"fla-core does not import ({fla})")
        raise ConfigError(
            f"'fla' needs the fla-core package, which does not import here ({fla}); install "
            f"the gpu extra ({_GPU_EXTRA}), or set {KERNELS_PATH} to 'auto' or 'torch'",
            path=KERNELS_PATH,
        )
    reason = "on CUDA with fla-core" if requested == "auto" else ""
    return _fla_kernels(fla, _load_causal_conv1d(), device_type, reason)


@functools.cache
def _torch_for(device_type: str, reason: str) -> GdnKernels:
    """The torch path, recorded as chosen for ``device_type`` (because of ``reason``); one
    object per choice, like :func:`_fla_kernels`."""
    return dataclasses.replace(TORCH_KERNELS, device_type=device_type, reason=reason)


def log_kernel_choice(requested: str, selected: GdnKernels) -> None:
    """Log what ``model.kernels == requested`` resolved to (on rank 0 only, when distributed).

    The model calls this once per choice it makes, not per layer or step.
    """
    if dist.is_available() and dist.is_initialized() and dist.get_rank() != 0:
        return
    why = f": {selected.reason}" if selected.reason else ""
    logger.info("Gated DeltaNet kernels: %s [%s=%r%s]", selected.describe(), KERNELS_PATH,
                requested, why)
