"""Context parallelism for the Qwen3.5 hybrid decoder: one sequence over several ranks.

Each of the ``cp`` ranks holds a contiguous ``1/cp`` of every sequence (rank ``r`` positions
``[r S/cp, (r+1) S/cp)``). Everything position-wise (embedding, norms, projections, MLP, the
head and the loss) runs on that shard unchanged; only the two token mixers need the rest of the
sequence, and they get it here:

Full attention (``attention``):

* ``ulysses`` -- DeepSpeed-Ulysses: after the projections, q-/k-norm and RoPE (global
  positions), an all-to-all turns sequence shards into head shards (the full sequence, ``1/cp``
  of the heads), causal SDPA runs as on one rank, and a second all-to-all turns the output back.
  The query heads (per tensor-parallel rank) must divide by ``cp``; when the KV heads do not,
  each KV head is repeated just enough (``repeat_interleave``, which keeps the GQA grouping of
  every query head) -- the legacy code's rule.
* ``allgather`` -- K and V are all-gathered over the sequence (their gradients reduce-scattered
  back) and each rank attends its own queries with an explicit causal mask offset by its first
  position (``is_causal`` would align the mask to the wrong corner and leak later tokens).
  Costs the full K/V per rank; needs no head divisibility.

Gated DeltaNet (``linear``):

* ``ulysses`` -- the projected q / k / v / b / a go through the same all-to-all, so each rank
  holds every position of ``1/cp`` of the heads; the depthwise convolution's channels and the
  per-head ``A_log`` / ``dt_bias`` are sliced to those heads, and each head's recurrence runs
  over the whole sequence on one rank, exactly as on one rank. Key and value heads (per
  tensor-parallel rank) must divide by ``cp``.
* ``p2p`` -- state passing: each rank runs the recurrence over its own shard of every head from a
  zero state, and at the same time (extra value columns seeded with the identity) the affine map
  ``S -> M S + S_local`` its shard applies to an incoming state and the matrix ``A`` through
  which its outputs read that state. The maps are all-gathered, rank ``r`` folds those of ranks
  ``< r`` into its incoming state ``S_in`` and adds ``A S_in`` to its outputs. The short
  convolution gets the ``kernel - 1`` tokens before the shard from the previous rank. Any head
  count works; the fold costs ``cp`` small matrix products per head.

``async_comm`` (legacy ``async_cp``): the all-to-alls of a mixer are issued one per projection
as soon as it is computed (the collective runs while the next projection is computed) instead of
one fused all-to-all once all of them are; same results, different overlap and collective count.

Packed rows (``block_causal``): each rank's documents are a
:class:`~hyper_parallel.utils.documents.DocumentShard` (the whole rows' boundaries, made before
the split, and the shard's own): the Ulysses forms keep the whole rows' documents apart after
their all-to-all, the all-gather form attends each query to the keys of its own document, and
state passing resets the state (the identity's too, so the maps carry the resets) at the
shard's starts and reads the previous shard's tokens in the convolution only inside their
document. Documents may cross any shard boundary.

Every collective goes through ``torch.distributed._functional_collectives``' autograd variants,
so the backward is the transposed communication; activation checkpointing recomputes or saves
them like any op (``all_to_all_single`` is among the outputs ``selective`` AC saves).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh

from hyper_parallel.utils.choices import CP_ATTENTION_MODES, CP_LINEAR_ATTENTION_MODES
from hyper_parallel.utils.documents import DocumentShard

from .context_parallel_rules import kv_repeats
from .documents import block_causal_attention, conv_within_documents, shard_attention

__all__ = [
    "ContextParallel",
    "apply_cp",
    "attention_forward",
    "context_parallel_of",
    "shifted_conv",
    "state_passing_delta_rule",
]


@dataclass(eq=False)
class ContextParallel:
    """How the token mixers of one model exchange the sequence over a 1-D ``cp`` mesh."""

    mesh: DeviceMesh
    attention: str = "ulysses"
    """``ulysses`` or ``allgather`` (:data:`~hyper_parallel.utils.choices.CP_ATTENTION_MODES`)."""
    linear: str = "ulysses"
    """``ulysses`` or ``p2p`` (:data:`~hyper_parallel.utils.choices.CP_LINEAR_ATTENTION_MODES`)."""
    async_comm: bool = False
    """One all-to-all per projection, issued as soon as it exists (else one fused per mixer)."""
    collectives: int = field(default=0, compare=False)
    """Collectives issued so far (forward; recomputation counts again): what ``async_comm``
    changes, read by the field table's probe."""

    @property
    def size(self) -> int:
        return self.mesh.size()

    @property
    def rank(self) -> int:
        return self.mesh.get_local_rank()

    @property
    def group(self):
        return self.mesh.get_group()

    # ------------------------------------------------------------------ all-to-all
    def to_heads(self) -> _Exchange:
        """A batch of ``(B, s, H, D)`` sequence shards to turn into ``(B, S, H/cp, D)`` head
        shards (:class:`_Exchange`)."""
        return _Exchange(self, to_heads=True)

    def to_sequence(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, S, H/cp, D)`` head shard -> ``(B, s, H, D)`` sequence shard."""
        exchange = _Exchange(self, to_heads=False)
        exchange.put(x)
        return exchange.take()[0]

    def _all_to_all(self, packed: torch.Tensor, *, wait: bool = True) -> torch.Tensor:
        """``packed`` ``(cp, ...)``: slice ``j`` goes to rank ``j``; the result's slice ``j``
        came from rank ``j``. ``wait=False``: the result waits at its first use (an
        ``AsyncCollectiveTensor``), so the caller can compute meanwhile."""
        self.collectives += 1
        out = funcol.all_to_all_single_autograd(packed.contiguous(), None, None, self.group)
        return _waited(out) if wait else out

    # ------------------------------------------------------------------ all-gather
    def gather_sequence(self, x: torch.Tensor) -> torch.Tensor:
        """All-gather ``(B, s, ...)`` shards into ``(B, S, ...)`` (gradients reduce-scattered)."""
        self.collectives += 1
        out = funcol.all_gather_single_autograd(x.contiguous(), 1, self.group)
        return _waited(out)

    def gather_ranks(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's ``x`` stacked on a new leading dim (``(cp, *x.shape)``), in rank order."""
        self.collectives += 1
        out = funcol.all_gather_single_autograd(x.unsqueeze(0).contiguous(), 0, self.group)
        return _waited(out)

    # ------------------------------------------------------------------ positions
    def shard_start(self, local_len: int) -> int:
        """The global position of this rank's first token."""
        return self.rank * local_len

    def heads_of_rank(self, count: int) -> slice:
        """This rank's share of ``count`` (local) heads under Ulysses."""
        per = count // self.size
        return slice(self.rank * per, (self.rank + 1) * per)


def _waited(out: torch.Tensor) -> torch.Tensor:
    """A functional collective's result, waited for now (an ``AsyncCollectiveTensor`` would
    wait at its first use)."""
    return funcol.wait_tensor(out) if isinstance(out, funcol.AsyncCollectiveTensor) else out


class _Exchange:
    """Tensors sent through one direction of the Ulysses all-to-all.

    ``put`` each tensor as soon as it exists, ``take`` the results in order. Fused (the
    default) packs everything into one all-to-all at ``take``; with ``async_comm`` each ``put``
    issues its own right away and ``take`` waits for them, so each travels while the caller
    computes the next one.
    """

    def __init__(self, cp: ContextParallel, *, to_heads: bool) -> None:
        self.cp = cp
        self.to_heads = to_heads
        self.pending: list[torch.Tensor] = []
        self.in_flight: list[tuple[torch.Tensor, list[tuple[int, ...]]]] = []

    def put(self, x: torch.Tensor) -> None:
        if self.cp.async_comm:
            self._send([x], wait=False)
        else:
            self.pending.append(x)

    def take(self) -> list[torch.Tensor]:
        if self.pending:
            self._send(self.pending, wait=True)
            self.pending = []
        out = [t for received, shapes in self.in_flight for t in self._unpack(received, shapes)]
        self.in_flight = []
        return out

    def _send(self, tensors: list[torch.Tensor], *, wait: bool) -> None:
        """Pack ``tensors`` per destination rank into one all-to-all and issue it."""
        n = self.cp.size
        packed, shapes = [], []
        for x in tensors:
            b, length, heads, dim = x.shape
            if self.to_heads:
                if heads % n:
                    raise ValueError(f"Ulysses: {heads} heads do not split over cp={n}")
                # (B, s, H, D) -> (n, B, s, H/n * D): slice j holds head group j.
                part = x.reshape(b, length, n, heads // n * dim).permute(2, 0, 1, 3)
            else:
                if length % n:
                    raise ValueError(f"Ulysses: {length} positions do not split over cp={n}")
                # (B, S, h, D) -> (n, B, S/n, h * D): slice j holds sequence shard j.
                part = x.reshape(b, n, length // n, heads * dim).permute(1, 0, 2, 3)
            packed.append(part)
            shapes.append((b, length, heads, dim))
        received = self.cp._all_to_all(
            torch.cat(packed, dim=-1) if len(packed) > 1 else packed[0], wait=wait
        )
        self.in_flight.append((received, shapes))

    def _unpack(self, received: torch.Tensor, shapes: list[tuple[int, ...]]) -> list:
        """The tensors of one all-to-all's result (waiting for it, if it has not been)."""
        n = self.cp.size
        widths = [(heads // n if self.to_heads else heads) * dim for _, _, heads, dim in shapes]
        out = []
        for piece, (b, length, heads, dim) in zip(received.split(widths, dim=-1), shapes):
            if self.to_heads:
                # slice j = sequence shard j of my head group -> (B, S, H/n, D)
                out.append(piece.permute(1, 0, 2, 3).reshape(b, n * length, heads // n, dim))
            else:
                # slice j = head group j of my sequence shard -> (B, S/n, n*h, D)
                out.append(piece.permute(1, 2, 0, 3).reshape(b, length // n, n * heads, dim))
        return out


# ====================================================================== the token mixers
def attention_forward(
    cp: ContextParallel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
    exchange: _Exchange | None = None, documents: DocumentShard | None = None,
) -> torch.Tensor:
    """Causal GQA over the whole sequence from this rank's ``(B, s, H, D)`` q / k / v shards
    (RoPE already applied); returns this rank's ``(B, s, Hq, D)`` output.

    ``exchange``: the Ulysses exchange the caller already ``put`` q (and possibly k, v) into
    (so an async all-to-all of q overlaps the k / v projections); None: nothing sent yet.
    ``documents`` (a packed batch's, ``block_causal``): each token attends to the earlier
    tokens of its own document only -- Ulysses by the whole rows' documents once every
    position is there, the all-gather form by the shard's queries' documents.
    """
    if cp.attention == "allgather":
        k, v = cp.gather_sequence(k), cp.gather_sequence(v)
        if documents is not None:
            return shard_attention(q, k, v, scale, documents).unflatten(-1, (q.shape[2], -1))
        local = q.shape[1]
        start = cp.shard_start(local)
        query_pos = torch.arange(start, start + local, device=q.device)
        key_pos = torch.arange(k.shape[1], device=q.device)
        mask = key_pos.unsqueeze(0) <= query_pos.unsqueeze(1)  # (s, S): key <= query
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
            scale=scale, enable_gqa=q.shape[2] != k.shape[2],
        )
        return out.transpose(1, 2)
    if exchange is None:
        exchange = cp.to_heads()
        exchange.put(q)
    repeats = kv_repeats(q.shape[2], k.shape[2], cp.size)
    if repeats > 1:
        k = k.repeat_interleave(repeats, dim=2)
        v = v.repeat_interleave(repeats, dim=2)
    exchange.put(k)
    exchange.put(v)
    q, k, v = exchange.take()
    if documents is not None:  # every position of this rank's heads: the whole rows' documents
        out = block_causal_attention(q, k, v, scale, documents.whole)
        return cp.to_sequence(out.unflatten(-1, (q.shape[2], -1)))
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, scale=scale,
        enable_gqa=q.shape[2] != k.shape[2],
    )
    return cp.to_sequence(out.transpose(1, 2))


def shifted_conv(
    cp: ContextParallel, conv, x: torch.Tensor, weight: torch.Tensor,
    documents: DocumentShard | None = None,
) -> torch.Tensor:
    """``conv(x, weight)`` (causal depthwise, ``(B, s, C)``) of this rank's shard, with the
    ``kernel - 1`` positions before it taken from the previous rank (zeros on rank 0).

    ``documents`` (a packed batch's): the window stays inside each token's document -- the
    positions before the shard are read only where the shard's first tokens continue their
    document, and only as far back as it goes (cleared where a document begins at the
    shard's first token)."""
    halo = weight.shape[-1] - 1
    if halo == 0:
        return conv(x, weight)
    tails = cp.gather_ranks(x[:, x.shape[1] - halo:])  # (cp, B, halo, C)
    # Rank 0 reads zeros, but through the gather: its backward must join the gather's
    # reduce-scatter, which carries the gradient of its own tail back from rank 1.
    before = tails[cp.rank - 1] if cp.rank > 0 else tails[0].mul(0)
    extended = torch.cat([before, x], dim=1)
    if documents is not None:
        return conv_within_documents(conv, extended, weight, documents.with_halo(halo))[:, halo:]
    return conv(extended, weight)[:, halo:]


def state_passing_delta_rule(
    cp: ContextParallel, delta_rule_with_state, q: torch.Tensor, k: torch.Tensor,
    v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    documents: DocumentShard | None = None,
) -> torch.Tensor:
    """The gated delta rule over the whole sequence from this rank's ``(B, s, H, D)`` shard.

    The recurrence is linear in its state and independent per value column, so one run with
    ``Dk`` extra zero value columns whose initial state is the identity gives, besides the
    zero-state outputs ``O0`` and final state ``S_loc``, the map ``M`` (final state of the
    identity) and ``A`` (outputs' read of it): from an incoming state ``S_in`` the shard's
    outputs are ``O0 + A S_in`` and its final state ``M S_in + S_loc``.

    ``documents`` (a packed batch's): the run restarts the state at each of the shard's
    document starts, the identity's included, so the maps carry the documents' resets too:
    a row whose shard begins a document anywhere has ``M = 0`` (nothing passes through it)
    and ``S_loc`` its last document's state, and only the tokens before the shard's first
    start read ``S_in`` (``A`` is 0 after it; all of it where a document begins at the
    shard's first token). The fold below is then unchanged.
    """
    batch, _, heads, dv = v.shape
    dk = k.shape[-1]
    zeros = v.new_zeros(batch, v.shape[1], heads, dk)
    identity = torch.eye(dk, dtype=torch.float32, device=v.device).expand(batch, heads, dk, dk)
    initial = torch.cat(
        [torch.zeros(batch, heads, dk, dv, dtype=torch.float32, device=v.device), identity], -1
    )
    resets = {} if documents is None else {"documents": documents}
    out, final = delta_rule_with_state(q, k, torch.cat([v, zeros], -1), g, beta, initial,
                                       **resets)
    out0, reads = out[..., :dv], out[..., dv:]
    maps = cp.gather_ranks(final)  # (cp, B, H, Dk, Dv + Dk): [S_loc | M] of every rank
    incoming = None
    for j in range(cp.rank):
        s_loc, m = maps[j][..., :dv], maps[j][..., dv:]
        incoming = s_loc if incoming is None else m @ incoming + s_loc
    if incoming is None:
        # Rank 0 reads no state, but its backward must join the gather's reduce-scatter (its
        # final state feeds every later rank), so the gather stays in its graph (+0 exactly).
        return out0 + maps.sum().mul(0).to(out0.dtype)
    correction = torch.einsum("bthk,bhkv->bthv", reads.float(), incoming)
    return (out0.float() + correction).to(out0.dtype)


# ====================================================================== applying it
def apply_cp(
    model, cp_mesh: DeviceMesh, *, attention: str = "ulysses", linear: str = "ulysses",
    async_comm: bool = False,
) -> ContextParallel:
    """Give every token mixer of ``model`` (a Qwen3.5 LM, dense or MoE) the same
    :class:`ContextParallel` over the 1-D ``cp_mesh``; also kept as ``model.context_parallel``.

    Apply before tensor parallelism (it only sets attributes; head counts are read from the
    tensors at run time). The head-count rules are checked by the caller, which knows the
    field names (:func:`~.context_parallel_rules.check_context_parallel`)."""
    if attention not in CP_ATTENTION_MODES:
        raise ValueError(f"context-parallel attention {attention!r}: one of {CP_ATTENTION_MODES}")
    if linear not in CP_LINEAR_ATTENTION_MODES:
        raise ValueError(
            f"context-parallel linear attention {linear!r}: one of {CP_LINEAR_ATTENTION_MODES}"
        )
    plan = ContextParallel(cp_mesh, attention=attention, linear=linear, async_comm=async_comm)
    for module in model.modules():
        if hasattr(module, "context_parallel") and module is not model:
            module.context_parallel = plan
    model.context_parallel = plan
    return plan


def context_parallel_of(model) -> ContextParallel | None:
    """The plan :func:`apply_cp` gave ``model`` (None: no context parallelism)."""
    return getattr(model, "context_parallel", None)
