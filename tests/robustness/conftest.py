"""Fixtures of the robustness tests: a working directory per fuzzing file, and what each fuzzing
file tried."""

import tempfile
from pathlib import Path

import pytest

from fuzzing import INPUTS


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="kraftcheck-fuzz-") as directory:
        yield Path(directory)


@pytest.fixture(scope="module", autouse=True)
def inputs_tried(request):
    """After a fuzzing file: how many inputs each of its targets got in this run (INPUTS), printed
    past pytest's capture (seen where the run's output is, `scripts/test -n 0`)."""
    before = INPUTS.copy()
    yield
    tried = INPUTS - before
    if tried:
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print(f"\n{request.module.__name__}: fuzz inputs per target: " + ", ".join(f"{target} {count}" for target, count in sorted(tried.items())))
