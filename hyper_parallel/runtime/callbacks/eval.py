"""EvalCallback: every ``every`` (> 0) steps run ``trainer.evaluate()`` (``validation.freq``).

The trainer implements ``evaluate() -> float`` (mean eval loss, collective); the result is sent to
every callback as ``on_evaluate({"eval_loss": loss})`` (logged, written to metrics.jsonl and
TensorBoard by those callbacks). ``every = 0`` disables evaluation.
"""

from __future__ import annotations

from .base import Callback


class EvalCallback(Callback):
    def __init__(self, trainer, *, every: int) -> None:
        super().__init__(trainer)
        self.eval_steps = int(every)
        if self.eval_steps < 0:
            raise ValueError(f"EvalCallback: every must be >= 0 (0 disables), got {every}")
        if self.eval_steps > 0 and not callable(getattr(trainer, "evaluate", None)):
            raise ValueError(
                f"EvalCallback: every={self.eval_steps} but the trainer has no evaluate() method"
            )
        self.last_eval_step: int | None = None

    def run(self) -> dict[str, float]:
        metrics = {"eval_loss": float(self.trainer.evaluate())}
        self.last_eval_step = int(self.trainer.state.global_step)
        self.dispatch("on_evaluate", metrics)
        return metrics

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        if self.eval_steps > 0 and self.trainer.state.global_step % self.eval_steps == 0:
            self.run()
