"""Fuzzing the command line (Hypothesis, fixed budget: tests/robustness/fuzzing.py):
`build_parser().parse_args` returns a Namespace or exits with argparse's usage error (2), and
`check`'s configuration layer (`configs.resolve`) returns a config or raises ConfigError.
Commands are parsed, never run."""

import argparse
import contextlib
import io
import re
from collections.abc import Callable

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from conformance.cli import build_parser
from conformance.commands import check as check_command
from conformance.explore import configs
from model.config import ConfigError

from fuzzing import INPUTS, budget, outcome


SUBCOMMANDS = [["rules"], ["check"], ["check"], ["check"], ["simulate"], ["traces", "generate"], ["traces", "schema"], ["traces", "show"], ["certify"], ["mutants"], ["traces"], []]


def parser_actions() -> dict[tuple[str, ...], list[argparse.Action]]:
    """The optional arguments of every sub-command, as the parser itself declares them (help aside)."""
    found: dict[tuple[str, ...], list[argparse.Action]] = {}

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        found[prefix] = [action for action in parser._actions if action.option_strings and not isinstance(action, argparse._HelpAction)]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*prefix, name))

    walk(build_parser(), ())
    return found


ACTIONS = parser_actions()
ALL_OPTIONS = sorted({option for actions in ACTIONS.values() for action in actions for option in action.option_strings})
CONFIG_NAMES = sorted(configs.named_configs())
VALUES = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["0", "1", "-1", "2", "3", "16", "17", "-0", "nan", "NaN", "inf", "-inf", "infinity", "1e9", "1e400", "0x10", "1_000", " 3", "3 ", "", "-", "--", "=", "abc", "∞", "３", "٣", "\x00", "\ud800", "9" * 5000]),
    st.sampled_from(CONFIG_NAMES + ["smoke", "custom", "nope"]),
    st.sampled_from(["kip595", "kip595-literal-diverging", "faulty-forget-vote", "kraft", "isr", "hw", "epoch", "reference", "mutant:x", "subprocess:true", "traces/", "/nonexistent"]),
    st.text(max_size=12),
)


@st.composite
def option_value(draw, action: argparse.Action, typed: bool = False) -> str:
    """A value for an option: one of its type (or choices), or (unless typed) sometimes anything."""
    if not typed and draw(st.integers(0, 3)) == 0:
        return draw(VALUES)
    if action.choices:
        return draw(st.sampled_from(sorted(action.choices)))
    if action.type is int:
        return str(draw(st.integers(-3, 20) | st.integers()))
    if action.type is float:
        return draw(st.floats().map(repr) | st.sampled_from(["nan", "inf", "-inf", "0", "3600", "3601", "1e-9"]))
    return draw(VALUES)


@st.composite
def argvs(draw) -> list[str]:
    """A sub-command, its required options, then options of it (values of their type; unless
    the argv is a clean one, also any values), options of other commands, `--opt=value` forms,
    stray values and noise."""
    argv = list(draw(st.sampled_from(SUBCOMMANDS)))
    clean = draw(st.booleans())  # only the sub-command's own options, with values of their type
    actions = ACTIONS.get(tuple(argv), [])
    for action in actions:
        if action.required and draw(st.integers(0, 5)):
            argv += [draw(st.sampled_from(action.option_strings)), draw(option_value(action, clean))]
    if argv == ["traces", "show"] and draw(st.integers(0, 5)):
        argv.append(draw(VALUES))  # its positional FILE
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["own", "joined"] if clean else ["own", "own", "own", "own", "value", "joined", "foreign", "noise"]))
        if kind in ("own", "joined") and actions:
            action = draw(st.sampled_from(actions))
            option = draw(st.sampled_from(action.option_strings))
            if action.nargs == 0 and (clean or draw(st.integers(0, 5))):
                argv.append(option)
            elif kind == "joined":
                argv.append(f"{option}={draw(option_value(action, clean))}")
            else:
                argv += [option, draw(option_value(action, clean))]
        elif kind == "foreign":
            argv.append(draw(st.sampled_from(ALL_OPTIONS)))
        elif kind == "noise":
            argv.append(draw(st.text(max_size=8)))
        else:
            argv.append(draw(VALUES))
    return argv


def asks_for_help(argv: list[str]) -> bool:
    """Whether a token is -h or an abbreviation of --help (argparse then exits 0 after printing help)."""
    for token in argv:
        if token.startswith("-h") or (len(token) >= 3 and "--help".startswith(token.split("=")[0])):
            return True
    return False


def asks_for_version(argv: list[str]) -> bool:
    """Whether a token is --version or an abbreviation of it (argparse then prints it and exits 0)."""
    return any(len(token) >= 3 and "--version".startswith(token.split("=")[0]) for token in argv)


def check_resolve_contract(resolve: Callable[[], object], shown: str) -> None:
    """resolve: a config, or ConfigError; nothing else."""
    INPUTS["config"] += 1
    try:
        config = resolve()
    except ConfigError as error:
        event(f"ConfigError {outcome(error)}")
        return
    except Exception as error:
        raise AssertionError(f"{shown} raised {type(error).__name__} (not ConfigError): {error}") from error
    if isinstance(config, tuple):  # (name, config), as the command resolves it
        config = config[1]
    assert isinstance(config, configs.CheckConfig | configs.IsrCheckConfig)
    event("config accepted")


@budget(600)
@given(argv=argvs())
def test_command_line(argv):
    INPUTS["cli"] += 1
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit as exit:
        event(f"exit {exit.code}")
        if exit.code == 0:
            helped = asks_for_help(argv) and out.getvalue().startswith("usage:")
            versioned = asks_for_version(argv) and re.fullmatch(r"kraftcheck \S+\n", out.getvalue()) is not None
            assert helped or versioned, (argv, out.getvalue()[:200])
        else:
            assert exit.code == 2, (argv, exit.code, err.getvalue()[-300:])
            assert "error:" in err.getvalue(), (argv, err.getvalue()[-300:])
        return
    except Exception as error:
        raise AssertionError(f"parse_args({argv!r}) raised {type(error).__name__} (not SystemExit): {error}") from error
    assert isinstance(args, argparse.Namespace) and callable(args.run)
    event(f"parsed: {args.command}")
    if args.command == "check":  # as the command resolves it, without running the check
        check_resolve_contract(lambda: check_command.configuration(args), f"configuration({argv!r})")


OVERRIDE_VALUES = {
    # the values argparse can hand over: int options, string options, BooleanOptionalAction flags
    **{key: st.none() | st.integers() | st.integers(-(2**70), 2**70) | st.sampled_from([0, 1, 16, 17, -1, 2**63]) for key in
       ("voters", "observers", "client_values", "max_epoch", "max_in_flight", "max_elections", "fetch_max_records", "max_crashes", "replicas", "min_isr")},
    **{key: st.none() | st.booleans() for key in ("loss", "duplication", "resign", "retries", "symmetry", "unflushed_loss")},
    "profile": st.none() | st.sampled_from(["kip595", "kip595-literal-diverging", "faulty-hw-any-epoch", "isr"]) | st.text(max_size=10),
    "truncation": st.none() | st.sampled_from(["hw", "epoch", "", "EPOCH"]) | st.text(max_size=6),
}


@budget(500)
@given(
    name=st.none() | st.sampled_from(CONFIG_NAMES) | st.text(max_size=10),
    overrides=st.fixed_dictionaries({}, optional=OVERRIDE_VALUES),
)
def test_check_configuration(name, overrides):
    check_resolve_contract(lambda: configs.resolve(name, overrides), f"resolve({name!r}, {overrides!r})")


@pytest.mark.parametrize(
    "overrides",
    [{"voters": "3"}, {"voters": 3.5}, {"min_isr": "1"}, {"loss": "yes"}, {"voters": True}],
    ids=["voters-str", "voters-float", "min_isr-str", "loss-str", "voters-bool"],
)
def test_check_configuration_of_the_wrong_type(overrides):
    with pytest.raises(ConfigError, match="Expected `(int|bool)`"):
        configs.resolve(None, overrides)
