"""Exploration configurations: named ones from configs.toml, overridable from the command line."""

import functools
import os
import tomllib
from pathlib import Path

import msgspec

from model.choices import parse_picks
from model.cluster import Bounds
from model.config import ClusterConfig, ConfigError
from model.isr.config import IsrBounds, PartitionConfig

CONFIGS_PATH = Path(__file__).parent / "configs.toml"

# Explicit-state search of a larger cluster cannot get past its first few steps (16 voters
# without symmetry: depth 3 after 8,000 states), and every state holds every node's state.
MAX_NODES = 16


def check_bound(name: str, value: int, low: int, high: int | None = None) -> None:
    """Refuse a bound outside low..high, naming it and the limit it crosses: a bound out of range
    would otherwise give a smaller space (or none) and a verdict that proves nothing."""
    if value < low:
        limit = "not be negative" if low == 0 else f"be at least {low}"
        raise ConfigError(f"{name} must {limit}, got {value}")
    if high is not None and value > high:
        raise ConfigError(f"{name} must be at most {high}, got {value}")


MAX_WORKERS = 64  # worker processes a search may start


def worker_count(requested: int | None) -> int:
    """--workers as asked for, or one per core (at most MAX_WORKERS); refused outside 1..MAX_WORKERS."""
    workers = requested if requested is not None else min(os.cpu_count() or 1, MAX_WORKERS)
    check_bound("--workers", workers, 1, MAX_WORKERS)
    return workers


class CheckConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Everything that fixes a state space: the cluster, the profile, the bounds, the faults."""

    description: str = ""
    voters: int = 3
    observers: int = 0
    profile: str = "kip595"
    client_values: int = 1
    max_epoch: int = 2
    max_elections: int | None = None  # candidacies in a whole run (the TLA+ spec's MaxElections)
    max_in_flight: int = 4  # messages in flight at once; 0 = no bound
    fetch_max_records: int = 0  # records per Fetch response; 0 = all
    max_crashes: int = 0
    loss: bool = True
    duplication: bool = False
    resign: bool = False
    retries: bool = False
    progress_timeouts: bool = True
    # links a run may cut, one way each: partial partitions (each may heal). UNSET is none, and
    # leaves the key out of what the configuration encodes to (the corpus's manifest) as before cuts existed.
    max_cuts: int | msgspec.UnsetType = msgspec.UNSET
    symmetry: bool = True
    every_choice: bool = True  # every alternative the specification allows at a node's step; False: the model's default reading only
    corpus_max_states: int = 0  # the corpus search's budget where the cells it is for lie deeper than `traces generate --max-states` reaches; 0: that budget
    corpus_aimed_walks: int = 0  # the corpus's aimed walks where its searches reach too few places of a cell; 0: `traces generate --aimed-walks`
    corpus_walk_deliveries: float = 0.7  # the share of the corpus's walk steps that deliver a message where one is in flight: fewer, and more timers fire, so more elections
    choices: str = ""  # alternatives taken instead of the model's default reading where the profile leaves a point open, e.g. "OBS-2=one-voter:0"

    def __post_init__(self) -> None:
        check_bound("voters", self.voters, 1, MAX_NODES)
        check_bound("observers", self.observers, 0, MAX_NODES)
        check_bound("max_epoch", self.max_epoch, 1)
        for name in ("client_values", "max_crashes", "fetch_max_records", "max_in_flight"):
            check_bound(name, getattr(self, name), 0)
        if self.max_cuts is not msgspec.UNSET:
            check_bound("max_cuts", self.max_cuts, 0)
        if self.max_elections is not None:
            check_bound("max_elections", self.max_elections, 1)  # a run starts without a leader
        if not 0 <= self.corpus_walk_deliveries <= 1:
            raise ConfigError(f"corpus_walk_deliveries must be a share between 0 and 1, got {self.corpus_walk_deliveries}")
        try:
            parse_picks(self.choices)
        except ValueError as error:
            raise ConfigError(f"choices: {error}") from None
        if self.max_in_flight == 0 and (self.duplication or self.retries):
            # each duplicate delivery or re-send adds a message, so the space would have no end
            raise ConfigError("max_in_flight 0 (no bound) needs duplication and retries off: each duplicate delivery or re-send adds a message in flight")

    def cluster(self) -> ClusterConfig:
        """Voters are numbered 1..N, observers N+1..N+M."""
        voters = tuple(range(1, self.voters + 1))
        observers = tuple(range(self.voters + 1, self.voters + self.observers + 1))
        return ClusterConfig(voters=voters, observers=observers, profile=self.profile, fetch_max_records=self.fetch_max_records, choices=parse_picks(self.choices))

    def faults(self) -> Bounds:
        return Bounds(
            client_values=self.client_values,
            max_crashes=self.max_crashes,
            loss=self.loss,
            duplication=self.duplication,
            resign=self.resign,
            retries=self.retries,
            progress_timeouts=self.progress_timeouts,
            max_cuts=self.max_cuts or 0,
        )


class IsrCheckConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An ISR-replicated partition (`system = "isr"`): its replication settings, faults and bounds."""

    system: str = "isr"
    description: str = ""
    replicas: int = 2  # numbered 1..N; replica 1 leads epoch 0
    min_isr: int = 1
    truncation: str = "epoch"  # "hw" (before KIP-101) or "epoch" (KIP-101)
    unflushed_loss: bool = False  # one power failure of every replica, losing records not on disk
    client_values: int = 2
    max_crashes: int = 2
    max_elections: int = 1
    keep_going: bool = False  # explore everything and report every property's shortest counterexample

    def __post_init__(self) -> None:
        if self.system != "isr":
            raise ConfigError(f"system must be 'isr' for an ISR configuration, got {self.system!r}")
        check_bound("replicas", self.replicas, 1, MAX_NODES)
        for name in ("client_values", "max_crashes", "max_elections"):
            check_bound(name, getattr(self, name), 0)
        self.partition()  # validates min_isr and truncation

    def partition(self) -> PartitionConfig:
        return PartitionConfig(replicas=tuple(range(1, self.replicas + 1)), min_isr=self.min_isr, truncation=self.truncation)

    def bounds(self) -> IsrBounds:
        return IsrBounds(
            client_values=self.client_values,
            max_crashes=self.max_crashes,
            max_elections=self.max_elections,
            unflushed_loss=self.unflushed_loss,
        )


SYSTEMS: dict[str, type] = {"kraft": CheckConfig, "isr": IsrCheckConfig}


@functools.cache
def named_configs() -> dict[str, CheckConfig | IsrCheckConfig]:
    """The sections of configs.toml; `system` picks the kind (KRaft when absent)."""
    with CONFIGS_PATH.open("rb") as handle:
        raw = tomllib.load(handle)
    configs = {}
    for name, values in raw.items():
        system = values.get("system", "kraft")
        if system not in SYSTEMS:
            raise ConfigError(f"{CONFIGS_PATH} [{name}]: unknown system {system!r}; known: {', '.join(SYSTEMS)}")
        fields = values if system == "isr" else {k: v for k, v in values.items() if k != "system"}
        try:
            configs[name] = msgspec.convert(fields, SYSTEMS[system])
        except msgspec.ValidationError as error:
            raise ConfigError(f"{CONFIGS_PATH} [{name}]: {error}") from None
    return configs


def resolve(name: str | None, overrides: dict[str, object]) -> CheckConfig | IsrCheckConfig:
    """A named configuration (or the defaults) with the given keys replaced.

    Without a name, ISR-only keys (replicas, min_isr, truncation, unflushed_loss) select the ISR
    system's defaults; keys of the other system are refused.
    """
    changes = {k: v for k, v in overrides.items() if v is not None}
    isr_only = set(IsrCheckConfig.__struct_fields__) - set(CheckConfig.__struct_fields__)
    base = IsrCheckConfig() if isr_only & changes.keys() else CheckConfig()
    if name is not None:
        configs = named_configs()
        if name not in configs:
            raise ConfigError(f"unknown configuration {name!r}; named configurations: {', '.join(configs)}")
        base = configs[name]
    foreign = sorted(changes.keys() - set(type(base).__struct_fields__))
    if foreign:
        system = "an ISR" if isinstance(base, IsrCheckConfig) else "a KRaft"
        raise ConfigError(f"{', '.join(foreign)} cannot be set for {system} configuration")
    if changes:
        description = base.description and f"{base.description} (overridden: {', '.join(sorted(changes))})"
        try:  # convert, not replace: the overrides' types are checked as the named configurations' are
            given = {k: v for k, v in msgspec.structs.asdict(base).items() if v is not msgspec.UNSET}
            base = msgspec.convert(given | changes | {"description": description}, type(base))
        except msgspec.ValidationError as error:
            raise ConfigError(str(error)) from None
    if isinstance(base, CheckConfig):
        base.cluster()  # validates profile and members
    return base
