"""``BaseLoss`` and ``CrossEntropyLoss``: the training loss as a Configurable.

A loss here is what :func:`hyper_parallel.runtime.step.train_step` needs (its ``TokenLoss``
protocol): the *sum* of token losses of a micro-batch and its token count, plus a
:class:`~hyper_parallel.runtime.loss.LossScaler` that turns those sums into the backward tensor
and the reported loss according to ``aggregation``. ``CrossEntropyLoss`` calls the legacy
trainer's helpers (:func:`~hyper_parallel.runtime.loss.token_loss_sum`,
:func:`~hyper_parallel.runtime.loss.count_tokens`), so ``train_step(..., loss_fn=loss)`` is
bit-identical to the legacy ``train_step(..., loss_aggregation=...)``.

Defaults equal the legacy ones: ``aggregation`` = ``train.optimizer.loss_aggregation``
(``token_weighted``), ``ignore_index`` = -100 (the label padding of the data pipeline).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyper_parallel.components._validate import one_of, require
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.utils.choices import IGNORE_INDEX, LOSS_AGGREGATIONS, LossAggregation

if TYPE_CHECKING:
    import torch

    from hyper_parallel.runtime.loss import LossScaler


class BaseLoss(Configurable, abc.ABC):
    """A token-level loss with its aggregation over micro-batches and data-parallel ranks.

    Subclasses implement :meth:`loss_sum` and :meth:`count_tokens`; ``BaseLoss`` itself is
    abstract (building ``BaseLoss.Config()`` is a ``TypeError``: pick a concrete loss such as
    ``CrossEntropyLoss.Config()``).
    """

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        aggregation: LossAggregation = "token_weighted"
        """``token_weighted``: the step loss is the mean over every label token of the global
        batch; ``rank_average``: each rank averages its micro-batch means, then ranks are
        averaged with equal weight (legacy ``train.optimizer.loss_aggregation``)."""

        def __post_init__(self) -> None:
            one_of(self, "aggregation", LOSS_AGGREGATIONS)

    def __init__(self, config: Config) -> None:
        self.config = config

    @property
    def aggregation(self) -> str:
        return self.config.aggregation

    @abc.abstractmethod
    def loss_sum(
        self, logits: torch.Tensor, labels: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sum of token losses in fp32, number of counted tokens)`` of one micro-batch."""

    @abc.abstractmethod
    def count_tokens(self, labels: torch.Tensor) -> int:
        """Tokens of ``labels`` that contribute to the loss."""

    def scaler(
        self, *, global_tokens: int, num_micro_batches: int, dp_size: int, split: int = 1
    ) -> LossScaler:
        """The :class:`LossScaler` of one step (``global_tokens`` over the DP group; ``split``
        ranks share each data-parallel rank's batch)."""
        from hyper_parallel.runtime.loss import LossScaler

        return LossScaler(
            self.config.aggregation, global_tokens, num_micro_batches, dp_size, split
        )

    def __call__(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean token loss of one batch (for evaluation and quick checks; training uses the
        sums through :meth:`scaler`)."""
        total, tokens = self.loss_sum(logits, labels)
        return total / tokens.clamp(min=1)


class CrossEntropyLoss(BaseLoss):
    """Next-token cross-entropy in fp32: position ``t`` predicts ``labels[t + 1]``, labels equal
    to ``ignore_index`` (and the last position) do not count."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseLoss.Config):
        ignore_index: int = IGNORE_INDEX
        """Label value excluded from the loss and the token counts. Only -100 is supported: the
        data pipeline pads labels (and the shift pads the last position) with -100."""

        def __post_init__(self) -> None:
            BaseLoss.Config.__post_init__(self)
            require(
                self.ignore_index == IGNORE_INDEX and not isinstance(self.ignore_index, bool),
                self,
                "ignore_index",
                f"only {IGNORE_INDEX} is supported (collate pads labels and the next-token "
                f"shift pads the last position with {IGNORE_INDEX}); remove the setting",
            )

    def __init__(self, config: Config) -> None:
        BaseLoss.__init__(self, config)
        # The torch helpers are bound where the loss is built (the Config imports no torch),
        # not imported per call: ``loss_sum`` may be compiled.
        from hyper_parallel.runtime.loss import count_tokens, token_loss_sum

        self._token_loss_sum = token_loss_sum
        self._count_tokens = count_tokens

    def loss_sum(
        self, logits: torch.Tensor, labels: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._token_loss_sum(logits, labels)

    def count_tokens(self, labels: torch.Tensor) -> int:
        return self._count_tokens(labels)


__all__ = ["BaseLoss", "CrossEntropyLoss"]
