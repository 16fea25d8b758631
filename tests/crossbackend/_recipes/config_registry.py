"""A framework-free recipe registry: plain Config dataclasses, no torch anywhere."""

from dataclasses import dataclass, field

from hyper_parallel.protocols.configurable import Configurable


class Schedule(Configurable):
    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        steps: int = 10
        """Number of steps."""

        tags: list[str] = field(default_factory=list)
        """Comma-separated tags."""

        def __post_init__(self) -> None:
            if self.steps < 1:
                raise ValueError(f"steps must be >= 1, got {self.steps}")

    def __init__(self, config: "Schedule.Config") -> None:
        self.config = config


@dataclass(kw_only=True, slots=True)
class RunConfig:
    name: str = "run"
    """Run name."""

    dtype: str = "bfloat16"
    """Compute dtype name."""

    schedule: Schedule.Config = field(default_factory=Schedule.Config)
    """The schedule."""


def tiny_run() -> RunConfig:
    return RunConfig(name="tiny", schedule=Schedule.Config(steps=3))
