"""Adapters by name: `reference`, `reference:OPTIONS`, `mutant:NAME`, `subprocess:COMMAND`, `kafka`, `kafka:VERSION`."""

import math
import shlex
from collections.abc import Callable

from typing import TYPE_CHECKING

from adapters.contract import Adapter
from adapters.model_adapter import ModelAdapter
from model.choices import parse_picks
from model.config import ConfigError, profile
from spec.trace import CAPABILITIES

if TYPE_CHECKING:
    from adapters.subprocess_adapter import SessionPool

DEFAULT_STEP_TIMEOUT = 10.0
MAX_STEP_TIMEOUT = 3600.0


class AdapterOptionError(ValueError):
    """An adapter option kraftcheck cannot use (a name, a step timeout); the message says what it takes."""


class UnknownAdapter(AdapterOptionError):
    """An adapter name kraftcheck does not know; the message lists the known forms."""


class AdapterBuildError(AdapterOptionError):
    """An adapter kraftcheck builds on first use (`kafka`) could not be built; the message says why
    and what to do. An option error, so every command that takes an adapter reports it as one."""


class AdapterFactory:
    """Makes a fresh adapter per trace (call it); `close` releases what the adapters of a run
    share: a subprocess adapter's idle processes. Use it as a context manager. `origin`, the
    arguments of `adapter_factory` that made it, lets another process make the same adapters."""

    def __init__(self, make: Callable[[], Adapter], pool: "SessionPool | None" = None) -> None:
        self.make = make
        self.pool = pool
        self.origin: tuple[str, float] | None = None

    def __call__(self) -> Adapter:
        return self.make()

    @property
    def implementation(self) -> str:
        """What a subprocess implementation said it is in its reply to start ("" if nothing)."""
        return self.pool.implementation if self.pool is not None else ""

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def __enter__(self) -> "AdapterFactory":
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()


def adapter_factory(spec: str, step_timeout: float = DEFAULT_STEP_TIMEOUT) -> AdapterFactory:
    """The factory of fresh adapters per trace, for an adapter name as the command line takes it."""
    if not (math.isfinite(step_timeout) and 0 < step_timeout <= MAX_STEP_TIMEOUT):
        raise AdapterOptionError(f"the step timeout must be a number of seconds above 0 and at most {MAX_STEP_TIMEOUT:g}, not {step_timeout}")
    factory = _named_factory(spec, step_timeout)
    factory.origin = (spec, step_timeout)
    return factory


def _named_factory(spec: str, step_timeout: float) -> AdapterFactory:
    if spec == "reference":
        return AdapterFactory(lambda: ModelAdapter("reference"))
    kind, separator, argument = spec.partition(":")
    if kind == "reference" and argument:
        options = reference_options(argument)
        return AdapterFactory(lambda: ModelAdapter(spec, **options))
    if kind == "mutant" and argument:
        from adapters.mutants import MUTANTS, mutant_adapter

        if argument not in MUTANTS:
            raise UnknownAdapter(f"unknown mutant {argument!r}; `kraftcheck mutants` lists them: {', '.join(MUTANTS)}")
        return AdapterFactory(lambda: mutant_adapter(argument))
    if kind == "subprocess" and argument.strip():
        return subprocess_factory(argument, step_timeout)
    if kind == "kafka":
        from adapters.kafka_build import DEFAULT_VERSION, adapter_command, kafka_argument

        return subprocess_factory(shlex.join(adapter_command(*kafka_argument(argument if separator else DEFAULT_VERSION))), step_timeout)
    raise UnknownAdapter(
        f"unknown adapter {spec!r}; use reference, reference:OPTIONS, mutant:NAME (see `kraftcheck mutants`), subprocess:COMMAND, "
        "kafka or kafka:VERSION[,timeouts=kafka|long] (see `kraftcheck adapters list`)"
    )


def subprocess_factory(command: str, step_timeout: float) -> AdapterFactory:
    """Adapters running `command`, sharing one pool: a process that speaks protocol 2 serves trace after trace."""
    from adapters.subprocess_adapter import SessionPool, SubprocessAdapter

    pool = SessionPool()
    return AdapterFactory(lambda: SubprocessAdapter(command, step_timeout=step_timeout, pool=pool), pool)


def reference_options(text: str) -> dict:
    """`reference:` options, comma-separated: CHOICE=ALTERNATIVE (`kraftcheck choices` lists them),
    random=SEED (every choice point drawn at random: a one-way point once per trace, an each-time point at each step), lacks=CAPABILITY[+CAPABILITY],
    profile=NAME (the model read under that profile whatever the trace's: an implementation of it)."""
    picks, random_seed, lacks, under = [], None, frozenset(), None
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, equals, value = item.partition("=")
        if not equals or not value:
            raise AdapterOptionError(f"reference option {item!r} is not KEY=VALUE (CHOICE=ALTERNATIVE, random=SEED, lacks=CAPABILITY or profile=NAME)")
        if key == "profile":
            try:
                profile(value)
            except ConfigError as error:
                raise AdapterOptionError(f"profile={value!r}: {error}") from None
            under = value
        elif key == "random":
            if not value.isdigit():
                raise AdapterOptionError(f"random={value!r}: the seed is a non-negative integer")
            random_seed = int(value)
        elif key == "lacks":
            lacks = frozenset(value.split("+"))
            unknown = sorted(lacks - set(CAPABILITIES))
            if unknown:
                raise AdapterOptionError(f"lacks={value!r}: unknown capabilities {', '.join(unknown)}; optional ones are {', '.join(CAPABILITIES)}")
        else:
            picks.append(item)
    try:
        fixed = parse_picks(",".join(picks))
    except ValueError as error:
        raise AdapterOptionError(str(error)) from None
    return {"picks": fixed, "random_seed": random_seed, "lacks": lacks, "profile": under}
