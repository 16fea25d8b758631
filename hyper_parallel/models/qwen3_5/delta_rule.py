"""Gated delta rule (Gated DeltaNet's recurrence) in plain torch, fp32 inside.

Per value head, with state ``S`` of shape ``(Dk, Dv)``, decay ``g_t <= 0`` (log space) and
learning rate ``beta_t`` in (0, 1):

    S_t = exp(g_t) * S_{t-1}
    S_t = S_t + k_t (beta_t * (v_t - S_t^T k_t))^T        # delta-rule write
    o_t = S_t^T q_t

``q`` and ``k`` are L2-normalised (eps 1e-6, ``x * rsqrt(sum(x*x) + eps)``) and ``q`` is scaled by
``1 / sqrt(Dk)``. When there are fewer key heads than value heads, key head ``h`` serves value
heads ``h * G ... h * G + G - 1`` (``repeat_interleave``), as in HF / FLA.

:func:`chunk_gated_delta_rule` is the training path: inside a chunk the sequential writes are
folded into one unit-lower-triangular solve (the UT / WY form), so the only Python loop runs over
chunks. :func:`recurrent_gated_delta_rule` is the token-by-token reference used by tests.

Chunk algebra (positions ``i, j`` inside a chunk, ``G_i`` = cumulative log decay from the chunk
start, ``S0`` the state entering the chunk):

    delta = T (beta*V) - T (beta*K*exp(G)) S0            T = (I + A)^-1,
    A_ij  = beta_i exp(G_i - G_j) k_i.k_j  for j < i      (strictly lower)
    O     = (Q*exp(G)) S0 + ((Q K^T) * exp(G_i - G_j))_{j<=i} delta
    S_end = exp(G_last) S0 + (K * exp(G_last - G))^T delta

The chunk loop is :func:`chunk_gated_delta_rule`'s ``loop`` argument: every chunk's step is
:func:`chunk_step` (the one definition of the recurrence across chunks) and the model's loop,
:func:`every_chunk`, runs it for each chunk. Preflight (``hyper_parallel/preflight/delta_rule.py``)
passes a loop that runs the first and the last chunks by :func:`chunk_step` and stands one
fake operator of the same bytes for those between: everything else it steps is this code. A
change to :func:`chunk_step` that makes, keeps or saves another tensor changes what that operator
must make (``tests/torch/ut/preflight/test_delta_rule_surrogate.py`` compares their bytes).
Resetting the state at document boundaries (packed rows: ``document_starts``) is here once, in
the operands made before the loop (:class:`_ChunkDocuments` masks them), which both loops step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

DEFAULT_CHUNK_SIZE = 64


def l2norm(x: torch.Tensor, dim: int = -1, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(sum(x*x) + eps)`` along ``dim`` (the FLA convention, not ``F.normalize``)."""
    return x * torch.rsqrt((x * x).sum(dim=dim, keepdim=True) + eps)


def _prepare(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    use_qk_l2norm: bool,
) -> tuple[torch.Tensor, ...]:
    """Validate shapes, cast to fp32, normalise and expand q/k heads; head-major layout out."""
    if query.dim() != 4 or key.shape != query.shape or value.dim() != 4:
        raise ValueError(
            "delta rule expects query/key (B, S, Hk, Dk) and value (B, S, Hv, Dv); got "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}."
        )
    batch, seq, hk, _ = key.shape
    hv = value.shape[2]
    if value.shape[:2] != (batch, seq) or hv % hk:
        raise ValueError(
            f"delta rule: value {tuple(value.shape)} must share (B, S) with key {tuple(key.shape)} "
            "and have a multiple of its head count."
        )
    if g.shape != (batch, seq, hv) or beta.shape != (batch, seq, hv):
        raise ValueError(
            f"delta rule: g {tuple(g.shape)} and beta {tuple(beta.shape)} must be (B, S, Hv) = "
            f"{(batch, seq, hv)}."
        )
    q, k, v, g, beta = (t.transpose(1, 2).float() for t in (query, key, value, g, beta))
    if use_qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    if hv != hk:
        q = q.repeat_interleave(hv // hk, dim=1)
        k = k.repeat_interleave(hv // hk, dim=1)
    q = q * (q.shape[-1] ** -0.5)
    return q, k, v.contiguous(), g.contiguous(), beta.contiguous()


def chunk_gated_delta_rule(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm: bool = True,
    loop: ChunkLoop | None = None,
    document_starts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Chunked gated delta rule.

    Args:
        query, key: ``(B, S, Hk, Dk)``. value: ``(B, S, Hv, Dv)``. g (log decay, <= 0) and beta:
            ``(B, S, Hv)``. initial_state: ``(B, Hv, Dk, Dv)`` or None (zeros).
        loop: how the chunks are stepped (:data:`ChunkLoop`); None is :func:`every_chunk`.
        document_starts: ``(B, S)`` bool, True where a document begins (packed rows): the state
            restarts from zero there, wherever the boundary falls in a chunk (see
            :class:`_ChunkDocuments`); a start at token 0 also drops ``initial_state``. None: one
            stream per row (the results and the work are exactly those without the argument).
    Returns:
        ``(out, final_state)``: out ``(B, S, Hv, Dv)`` in ``query.dtype``; final_state fp32
        ``(B, Hv, Dk, Dv)`` when ``output_final_state`` else None.
    """
    out_dtype = query.dtype
    seq = query.shape[1]
    q, k, v, g, beta = _prepare(query, key, value, g, beta, use_qk_l2norm)
    batch, heads, _, dk = k.shape
    dv = v.shape[-1]
    c = chunk_size
    pad = (-seq) % c
    if pad:
        # Zero padding at the end: g = 0, beta = 0 and k = v = q = 0 leave earlier outputs intact.
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        g, beta = (F.pad(t, (0, pad)) for t in (g, beta))
    n = (seq + pad) // c
    q, k, v = (t.reshape(batch, heads, n, c, t.shape[-1]) for t in (q, k, v))
    g, beta = g.reshape(batch, heads, n, c), beta.reshape(batch, heads, n, c)
    docs = None if document_starts is None else _ChunkDocuments.of(document_starts, pad, n, c)

    cum = g.cumsum(dim=-1)  # G_i: log decay from the chunk start up to and including i
    lower = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    if docs is not None:  # j's write reaches i only inside one document
        lower = lower & docs.together
    # exp(G_i - G_j) for j <= i; masked before exp so the (positive) upper part cannot overflow.
    pair_decay = (cum.unsqueeze(-1) - cum.unsqueeze(-2)).masked_fill(~lower, float("-inf")).exp()
    # Log decay from the entering state to i (-inf: the state entering the chunk does not
    # reach i, a document began in between).
    to_here = cum if docs is None else cum.masked_fill(~docs.continues, float("-inf"))

    k_beta = k * beta.unsqueeze(-1)
    # I + A with A strictly lower; unitriangular=True ignores the diagonal we also computed.
    system = (k_beta @ k.transpose(-1, -2)) * pair_decay
    new_values = torch.linalg.solve_triangular(
        system, v * beta.unsqueeze(-1), upper=False, unitriangular=True
    )
    state_read = torch.linalg.solve_triangular(
        system, k_beta * to_here.exp().unsqueeze(-1), upper=False, unitriangular=True
    )
    intra = (q @ k.transpose(-1, -2)) * pair_decay
    q_decayed = q * to_here.exp().unsqueeze(-1)
    k_to_end = k * _to_end(cum, docs).exp().unsqueeze(-1)
    chunk_decay = to_here[..., -1].exp()[..., None, None]  # (B, H, N, 1, 1)

    operands = ChunkOperands(new_values, state_read, q_decayed, intra, k_to_end, chunk_decay)
    # The loop's variables, held by nothing else (the entering state goes once the first chunk
    # replaces it), live until the return as a loop's locals would: the last delta and the
    # chunks' outputs are held through the stack (the bytes preflight measures).
    carry = Carry(q.new_zeros(batch, heads, dk, dv) if initial_state is None
                  else initial_state.to(device=q.device, dtype=torch.float32))
    out = (loop or every_chunk)(operands, carry)
    out = out.reshape(batch, heads, n * c, dv)[:, :, :seq]
    out = out.transpose(1, 2).contiguous().to(out_dtype)
    return out, (carry.state if output_final_state else None)


def _to_end(cum: torch.Tensor, docs: _ChunkDocuments | None) -> torch.Tensor:
    """Log decay from each token to its chunk's end (-inf where a document begins after the
    token: its write does not reach the state leaving the chunk)."""
    to_end = cum[..., -1:] - cum
    return to_end if docs is None else to_end.masked_fill(~docs.in_last, float("-inf"))


@dataclass(frozen=True)
class _ChunkDocuments:
    """Where a packed row's documents meet inside each chunk, ``(B, 1, N, c[, c])`` (one for
    every head), for :func:`chunk_gated_delta_rule`'s operands: a boundary anywhere in a chunk
    is exact, because every term of the chunk algebra that carries information from token
    ``j`` (or from the entering state) to token ``i`` is masked where a document begins in
    between -- the intra-chunk system and attention (``together``), the entering state's
    read and decay (``continues``), and the write into the state leaving the chunk
    (``in_last``). :func:`chunk_step` itself is unchanged: a chunk in which a document begins
    hands on a state made of its last document's tokens alone (``chunk_decay`` is 0)."""

    together: torch.Tensor  # (B, 1, N, c, c): i and j are tokens of one document
    continues: torch.Tensor  # (B, 1, N, c): no document begins between the chunk's start and i
    in_last: torch.Tensor  # (B, 1, N, c): i is in the chunk's last document

    @classmethod
    def of(cls, starts: torch.Tensor, pad: int, chunks: int, size: int) -> _ChunkDocuments:
        if starts.dim() != 2 or starts.dtype != torch.bool:
            raise ValueError(f"document_starts must be a (B, S) bool tensor, got {starts.dtype} "
                             f"{tuple(starts.shape)}")
        # The padding continues the last document (it writes nothing, and the final state is
        # the last document's).
        starts = F.pad(starts, (0, pad)).reshape(starts.shape[0], 1, chunks, size)
        begun = starts.cumsum(dim=-1)  # documents begun in the chunk up to and including i
        return cls(
            together=begun.unsqueeze(-1) == begun.unsqueeze(-2),
            continues=begun == 0,
            in_last=begun == begun[..., -1:],
        )


@dataclass(frozen=True)
class ChunkOperands:
    """What every chunk's step reads, ``(B, H, N, ...)`` with chunk ``i`` at ``[:, :, i]``, made
    once for all chunks before the loop (see the module docstring's chunk algebra)."""

    new_values: torch.Tensor  # T (beta*V): (B, H, N, c, Dv)
    state_read: torch.Tensor  # T (beta*K*exp(G)): (B, H, N, c, Dk)
    q_decayed: torch.Tensor  # Q*exp(G): (B, H, N, c, Dk)
    intra: torch.Tensor  # ((Q K^T) * exp(G_i - G_j))_{j<=i}: (B, H, N, c, c)
    k_to_end: torch.Tensor  # K * exp(G_last - G): (B, H, N, c, Dk)
    chunk_decay: torch.Tensor  # exp(G_last): (B, H, N, 1, 1)

    @property
    def count(self) -> int:
        """The number of chunks ``N``."""
        return self.new_values.shape[2]


@dataclass
class Carry:
    """The chunk loop's variables: the state entering the next chunk, the last chunk's ``delta``
    and the outputs of the chunks stepped so far, in order. Each is replaced only once its
    successor exists, as a loop's local is (so a step holds what the model's loop holds)."""

    state: torch.Tensor
    delta: torch.Tensor | None = None
    outs: list[torch.Tensor] = field(default_factory=list)


def chunk_step(operands: ChunkOperands, i: int, carry: Carry) -> None:
    """Chunk ``i``: its output appended to ``carry.outs``, the state leaving it and its
    ``delta`` into ``carry``."""
    carry.delta = operands.new_values[:, :, i] - operands.state_read[:, :, i] @ carry.state
    carry.outs.append(operands.q_decayed[:, :, i] @ carry.state
                      + operands.intra[:, :, i] @ carry.delta)
    carry.state = (carry.state * operands.chunk_decay[:, :, i]
                   + operands.k_to_end[:, :, i].transpose(-1, -2) @ carry.delta)


#: A way to step the chunks: ``loop(operands, carry)`` leaves the final state in ``carry`` and
#: returns the chunks' outputs as one ``(B, H, N, c, Dv)`` tensor (``carry.outs`` stays held
#: until the rule returns, whatever the loop keeps there).
ChunkLoop = Callable[[ChunkOperands, Carry], torch.Tensor]


def every_chunk(operands: ChunkOperands, carry: Carry) -> torch.Tensor:
    """The model's loop: :func:`chunk_step` for every chunk in turn, the outputs stacked."""
    for i in range(operands.count):
        chunk_step(operands, i, carry)
    return torch.stack(carry.outs, dim=2)


def recurrent_gated_delta_rule(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token-by-token reference of :func:`chunk_gated_delta_rule` (same arguments and results).

    Slow (a Python loop over the sequence): for tests and single-step decoding only.
    """
    out_dtype = query.dtype
    q, k, v, g, beta = _prepare(query, key, value, g, beta, use_qk_l2norm)
    batch, heads, seq, dk = k.shape
    dv = v.shape[-1]
    if initial_state is None:
        state = q.new_zeros(batch, heads, dk, dv)
    else:
        state = initial_state.to(device=q.device, dtype=torch.float32)
    outs = []
    for t in range(seq):
        state = state * g[:, :, t].exp()[..., None, None]
        k_t = k[:, :, t]
        predicted = (state * k_t.unsqueeze(-1)).sum(dim=-2)  # S^T k: (B, H, Dv)
        delta = (v[:, :, t] - predicted) * beta[:, :, t].unsqueeze(-1)
        state = state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)
        outs.append((state * q[:, :, t].unsqueeze(-1)).sum(dim=-2))
    out = torch.stack(outs, dim=1).to(out_dtype)  # (B, S, H, Dv)
    return out, (state if output_final_state else None)
