"""Next-token cross-entropy and the two ways of aggregating it over micro-batches and ranks.

``token_weighted``: the loss of a step is the mean over every label token of the global batch,
whatever the rank or micro-batch it lives on. ``rank_average``: every rank averages its
micro-batch means, then ranks are averaged with equal weight.

The backward scale accounts for FSDP averaging gradients over the ``dp_size`` data-parallel
ranks. Tokens are counted over the DP group only — never over tensor-parallel ranks, which see
the same batch (the legacy pure-TP double count). Ranks that split one data-parallel rank's
batch (``split``: the expert-parallel ranks, each on its own rows) are data-parallel for FSDP
and for the token count, but one "rank" for ``rank_average``: its micro-batch mean is over the
rows of all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hyper_parallel.utils.choices import IGNORE_INDEX, LOSS_AGGREGATIONS
from hyper_parallel.utils.errors import ConfigError


def shift_labels(labels: torch.Tensor) -> torch.Tensor:
    """Targets aligned with logits: position t predicts ``labels[t + 1]``; the last is ignored."""
    return F.pad(labels[:, 1:], (0, 1), value=IGNORE_INDEX)


def token_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sum of token losses in fp32, number of counted tokens)`` for one micro-batch.

    ``labels`` may run one position past the logits: a context-parallel shard carries the next
    shard's first label (:func:`hyper_parallel.data.split_sequence`), the target of its last
    position."""
    # Imported here, not at module level: ``torch.distributed.tensor`` costs ~0.6 s and the
    # config path imports this module; a DTensor argument means it is already loaded (free).
    from torch.distributed.tensor import DTensor

    if isinstance(logits, DTensor):
        logits = logits.full_tensor()
    targets = shift_labels(labels)[:, : logits.shape[1]]
    loss_sum = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )
    return loss_sum, (targets != IGNORE_INDEX).sum()


def count_tokens(labels: torch.Tensor) -> int:
    """Tokens that contribute to the loss of ``labels`` (after the shift; a context-parallel
    shard's extra label is counted as its last position's target, and nothing past it)."""
    return int((shift_labels(labels) != IGNORE_INDEX).sum())


@dataclass
class LossScaler:
    """How one step turns micro-batch loss sums into the tensor to backpropagate."""

    aggregation: str
    global_tokens: int
    """Label tokens of the whole step over the DP group."""
    num_micro_batches: int
    dp_size: int
    """Ranks FSDP averages gradients over (the split ranks included)."""
    split: int = 1
    """Ranks that split one data-parallel rank's batch; ``tokens`` passed to the methods are
    then that whole batch's micro-batch tokens (summed over them)."""

    def __post_init__(self) -> None:
        if self.aggregation not in LOSS_AGGREGATIONS:
            raise ConfigError(
                f"{self.aggregation!r} is not supported; choose one of: "
                f"{', '.join(LOSS_AGGREGATIONS)}",
                path="loss.aggregation",
            )

    def backward_loss(self, loss_sum: torch.Tensor, tokens: int) -> torch.Tensor:
        if self.aggregation == "token_weighted":
            # FSDP averages gradients over dp_size ranks; multiplying by dp_size makes the
            # reduced gradient that of sum(all token losses) / global_tokens.
            return loss_sum * (self.dp_size / max(self.global_tokens, 1))
        # The split ranks' shares add up to their batch's mean; FSDP's average over them is
        # undone by the factor ``split``.
        return loss_sum * self.split / max(tokens, 1) / self.num_micro_batches

    def local_report(self, loss_sum: torch.Tensor, tokens: int) -> torch.Tensor:
        """This micro-batch's share of the reported loss before the DP all-reduce."""
        if self.aggregation == "token_weighted":
            return loss_sum.detach() / max(self.global_tokens, 1)
        ranks = self.dp_size // self.split  # the data-parallel ranks, each one batch
        return loss_sum.detach() / max(tokens, 1) / self.num_micro_batches / ranks
