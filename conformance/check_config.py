"""Exploration configurations: named ones from configs.toml, overridable from the command line."""

import functools
import tomllib
from pathlib import Path

import msgspec

from model.cluster import Bounds
from model.config import ClusterConfig, ConfigError

CONFIGS_PATH = Path(__file__).parent / "configs.toml"


class CheckConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Everything that fixes a state space: the cluster, the profile, the bounds, the faults."""

    description: str = ""
    voters: int = 3
    observers: int = 0
    profile: str = "kip595"
    client_values: int = 1
    max_epoch: int = 2
    max_elections: int | None = None  # candidacies in a whole run (the TLA+ spec's MaxElections)
    max_in_flight: int = 4
    fetch_max_records: int = 0  # records per Fetch response; 0 = all
    max_crashes: int = 0
    loss: bool = True
    duplication: bool = False
    resign: bool = False
    retries: bool = False
    progress_timeouts: bool = True
    symmetry: bool = True

    def __post_init__(self) -> None:
        for name in ("voters", "max_epoch", "max_in_flight"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("observers", "client_values", "max_crashes"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must not be negative, got {getattr(self, name)}")

    def cluster(self) -> ClusterConfig:
        """Voters are numbered 1..N, observers N+1..N+M."""
        voters = tuple(range(1, self.voters + 1))
        observers = tuple(range(self.voters + 1, self.voters + self.observers + 1))
        return ClusterConfig(voters=voters, observers=observers, profile=self.profile, fetch_max_records=self.fetch_max_records)

    def faults(self) -> Bounds:
        return Bounds(
            client_values=self.client_values,
            max_crashes=self.max_crashes,
            loss=self.loss,
            duplication=self.duplication,
            resign=self.resign,
            retries=self.retries,
            progress_timeouts=self.progress_timeouts,
        )


@functools.cache
def named_configs() -> dict[str, CheckConfig]:
    with CONFIGS_PATH.open("rb") as handle:
        raw = tomllib.load(handle)
    try:
        return {name: msgspec.convert(values, CheckConfig) for name, values in raw.items()}
    except msgspec.ValidationError as error:
        raise ConfigError(f"{CONFIGS_PATH}: {error}") from None


def resolve(name: str | None, overrides: dict[str, object]) -> CheckConfig:
    """A named configuration (or the defaults) with the given keys replaced."""
    base = CheckConfig()
    if name is not None:
        configs = named_configs()
        if name not in configs:
            raise ConfigError(f"unknown configuration {name!r}; named configurations: {', '.join(configs)}")
        base = configs[name]
    changes = {k: v for k, v in overrides.items() if v is not None}
    if changes:
        base = msgspec.structs.replace(base, description=base.description and f"{base.description} (overridden: {', '.join(sorted(changes))})", **changes)
    base.cluster()  # validates profile and members
    return base
