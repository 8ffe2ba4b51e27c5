"""Adapters by name: `reference`, `mutant:NAME`, `subprocess:COMMAND`."""

import math
from collections.abc import Callable

from adapters.contract import Adapter
from adapters.model_adapter import ModelAdapter

DEFAULT_STEP_TIMEOUT = 10.0
MAX_STEP_TIMEOUT = 3600.0


class AdapterOptionError(ValueError):
    """An adapter option kraftcheck cannot use (a name, a step timeout); the message says what it takes."""


class UnknownAdapter(AdapterOptionError):
    """An adapter name kraftcheck does not know; the message lists the known forms."""


def adapter_factory(spec: str, step_timeout: float = DEFAULT_STEP_TIMEOUT) -> Callable[[], Adapter]:
    """A function making a fresh adapter per trace, for an adapter name as the command line takes it."""
    if not (math.isfinite(step_timeout) and 0 < step_timeout <= MAX_STEP_TIMEOUT):
        raise AdapterOptionError(f"the step timeout must be a number of seconds above 0 and at most {MAX_STEP_TIMEOUT:g}, not {step_timeout}")
    if spec == "reference":
        return lambda: ModelAdapter("reference")
    kind, _, argument = spec.partition(":")
    if kind == "mutant" and argument:
        from adapters.mutants import MUTANTS, mutant_adapter

        if argument not in MUTANTS:
            raise UnknownAdapter(f"unknown mutant {argument!r}; `kraftcheck mutants` lists them: {', '.join(MUTANTS)}")
        return lambda: mutant_adapter(argument)
    if kind == "subprocess" and argument.strip():
        from adapters.subprocess_adapter import SubprocessAdapter

        return lambda: SubprocessAdapter(argument, step_timeout=step_timeout)
    raise UnknownAdapter(f"unknown adapter {spec!r}; use reference, mutant:NAME (see `kraftcheck mutants`) or subprocess:COMMAND")
