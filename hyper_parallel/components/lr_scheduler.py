"""``LRSchedulersContainer``: one LR scheduler per optimizer of an ``OptimizersContainer``.

Each scheduler is built by the legacy trainer's helper
:func:`hyper_parallel.runtime.optim.build_lr_scheduler` (a ``LambdaLR`` over
:class:`~hyper_parallel.runtime.optim.LRFactor`: linear warmup from 0, then ``cosine``, ``linear``
or ``constant`` decay to ``lr_min``), so the LR of every step equals the legacy one for the same
settings.

**Warmup in steps, not as a ratio.** The legacy config has ``train.optimizer.lr_warmup_ratio``
(warmup steps = ``ceil(max_steps * ratio)``); this Config has ``warmup_steps``. The default, 10,
is what the legacy defaults give (``ceil(100 * 0.1)``). A legacy config with ratio ``r`` and
``max_steps`` ``T`` maps to ``warmup_steps = hyper_parallel.runtime.optim.warmup_steps_from_ratio(T,
r)``; the two then agree for every step. A ratio is at most 1, so the legacy warmup never exceeds
the run; a ``warmup_steps`` larger than ``training_steps`` is therefore clamped to it (with a
warning), which is exactly the legacy ratio 1.0.

**lr_min is absolute** (legacy ``train.optimizer.lr_min``, default 1e-5): the decay floor is the
factor ``lr_min / lr`` of each optimizer's own peak ``lr`` (0 when that ``lr`` is 0). A floor above
the peak would make the decay *raise* the learning rate, so ``cosine`` / ``linear`` refuse
``lr_min > lr`` (``Config.check_lr_min``; building the container checks every optimizer).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyper_parallel.components._validate import at_least, integer_at_least, one_of
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.utils.choices import DECAY_STYLES, DecayStyle
from hyper_parallel.utils.errors import ConfigError

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


class LRSchedulersContainer(Configurable):
    """``LambdaLR`` schedulers (one per optimizer) stepped together.

    All schedulers follow the same factor, so ``state_dict()`` is the first one's (what the
    legacy trainer saves) and ``load_state_dict`` restores it into each of them.
    """

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        warmup_steps: int = 10
        """Linear warmup length in optimizer steps; the first step runs at LR 0. The default
        equals the legacy ``ceil(max_steps 100 x lr_warmup_ratio 0.1)``. Clamped to the
        number of training steps."""

        decay_style: DecayStyle = "cosine"
        """LR shape after warmup: ``cosine`` or ``linear`` decay from ``lr`` to ``lr_min`` at
        the last training step, or ``constant``."""

        lr_min: float = 1e-5
        """Final (absolute) learning rate of the ``cosine`` and ``linear`` decays; the floor
        factor is ``lr_min / lr`` of the optimizer. At most ``optimizer.lr`` (checked when the
        schedule is built)."""

        def __post_init__(self) -> None:
            # Unbounded above: a warmup longer than the run is clamped to it (and a legacy
            # train.max_steps too large to count converts to a warmup that large; the error
            # must then name training.steps, not this field).
            integer_at_least(self, "warmup_steps", 0, maximum=None)
            one_of(self, "decay_style", DECAY_STYLES)
            at_least(self, "lr_min", 0.0)

        def check_lr_min(self, lr: float) -> None:
            """``ConfigError`` (``lr_scheduler.lr_min``) when the decay floor is above the peak
            learning rate ``lr`` (``optimizer.lr``): the decay would then raise the learning
            rate after warmup. ``constant`` never reads ``lr_min``, and an ``lr`` of 0 has no
            floor (the factor is 0), so neither is refused. Cheap: a trainer calls it before
            building anything."""
            if self.decay_style == "constant" or not lr > 0 or self.lr_min <= lr:
                return
            raise ConfigError(
                f"{self.lr_min!r} is above the peak learning rate optimizer.lr={lr!r}: the "
                f"{self.decay_style} decay would raise the learning rate after warmup instead of "
                "lowering it; set it to at most optimizer.lr (or lr_scheduler.decay_style="
                "constant)",
                path="lr_scheduler.lr_min",
            )

    def __init__(
        self,
        config: Config,
        *,
        optimizers: Iterable[torch.optim.Optimizer] | torch.optim.Optimizer,
        training_steps: int,
    ) -> None:
        # The runtime (torch) is imported here, where schedulers are built: the Config above is
        # configuration and must import without it.
        import torch

        from hyper_parallel.runtime.optim import build_lr_scheduler

        if not isinstance(training_steps, int) or isinstance(training_steps, bool) or training_steps < 1:
            raise ValueError(
                f"LRSchedulersContainer needs training_steps >= 1 (the schedule horizon), got "
                f"{training_steps!r}"
            )
        opts = [optimizers] if isinstance(optimizers, torch.optim.Optimizer) else list(optimizers)
        if not opts or not all(isinstance(o, torch.optim.Optimizer) for o in opts):
            raise TypeError(
                "LRSchedulersContainer needs optimizers= an OptimizersContainer (or torch "
                f"optimizers), got {optimizers!r}"
            )
        for opt in opts:
            config.check_lr_min(opt.defaults["lr"])
        self.config = config
        self.training_steps = training_steps
        self.warmup_steps = min(config.warmup_steps, training_steps)
        if self.warmup_steps != config.warmup_steps:
            logger.warning(
                "LRSchedulersContainer.Config.warmup_steps=%d exceeds the %d training steps; "
                "warming up over all %d steps instead",
                config.warmup_steps,
                training_steps,
                training_steps,
            )
        self.schedulers: list[torch.optim.lr_scheduler.LambdaLR] = [
            build_lr_scheduler(
                opt,
                total_steps=training_steps,
                warmup_steps=self.warmup_steps,
                decay_style=config.decay_style,
                lr=opt.defaults["lr"],
                lr_min=config.lr_min,
            )
            for opt in opts
        ]

    def __iter__(self) -> Iterator[torch.optim.lr_scheduler.LambdaLR]:
        return iter(self.schedulers)

    def __len__(self) -> int:
        return len(self.schedulers)

    def step(self) -> None:
        for scheduler in self.schedulers:
            scheduler.step()

    def get_last_lr(self) -> list[float]:
        """LRs of the first optimizer's groups after the last step (``LambdaLR.get_last_lr``)."""
        return self.schedulers[0].get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        return self.schedulers[0].state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # A copy per scheduler: LambdaLR keeps references into the dict it loads.
        for scheduler in self.schedulers:
            scheduler.load_state_dict(copy.deepcopy(state_dict))


__all__ = ["LRSchedulersContainer"]
