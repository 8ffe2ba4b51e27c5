"""Search limits: --max-states and --max-seconds end a search between two levels, so the
summary covers every state up to a depth, whatever engine ran it."""

import functools
import json

import pytest

from conformance import cli
from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import explore
from conformance.explore.sharded import explore_sharded

FAULTS = resolve("faults", {})


@pytest.mark.parametrize("workers", [1, 2])
def test_a_time_budget_ends_the_search_at_a_level_boundary(workers):
    if workers == 1:
        timed = explore(system_for(FAULTS), max_seconds=1.0)
    else:
        timed = explore_sharded(functools.partial(system_for, FAULTS), workers, max_seconds=1.0)
    assert timed.stopped == "max-seconds" and not timed.complete and timed.depth > 3
    # The same boundary reached by a state bound: every level up to timed.depth, nothing of the next.
    bounded = explore(system_for(FAULTS), max_states=timed.distinct)
    assert bounded.stopped == "max-states"
    assert (bounded.distinct, bounded.generated, bounded.depth) == (timed.distinct, timed.generated, timed.depth)


def test_no_limit_reached_leaves_stopped_empty():
    result = explore(system_for(resolve("smoke", {})), max_seconds=600.0, max_states=10**9)
    assert result.complete and result.stopped is None and result.distinct == 1_041


def test_max_seconds_on_the_command_line(tmp_path, capsys):
    code = cli.main(["check", "--config", "faults", "--max-seconds", "1", "--workers", "1", "--json", "--out", str(tmp_path)])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["complete"] is False and summary["stopped_by"] == "max-seconds"
    assert set(summary["properties"].values()) == {"not violated so far"}
    assert cli.main(["check", "--config", "faults", "--max-seconds", "1", "--workers", "1", "--out", str(tmp_path)]) == 0
    assert "no (stopped early: --max-seconds reached)" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf"])
def test_a_budget_that_is_not_a_positive_number_is_refused(tmp_path, capsys, value):
    assert cli.main(["check", "--config", "smoke", "--max-seconds", value, "--out", str(tmp_path)]) == 2
    assert "--max-seconds must be a positive number of seconds" in capsys.readouterr().err
