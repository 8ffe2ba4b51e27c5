"""A hostile but realistic user of the Spark engine: a --spark-dir that is no usable directory.
It is refused in a line that names it and why, exit 2, before Spark starts, and nothing of the
user's is changed. None needs Java."""

import os
import shutil
import subprocess
import sys

import pytest
from test_hostile_inputs import ROOT, kraftcheck, no_traceback

# Every command that runs on Spark, writing (if at all) under tmp_path / "out".
SPARK_COMMANDS = {
    "check": ["check", "--config", "smoke", "--out", "{out}"],
    "simulate": ["simulate", "--runs", "10"],
    "traces-generate": ["traces", "generate", "--config", "smoke", "--out", "{out}"],
    "certify": ["certify", "--adapter", "reference", "--out", "{out}"],
}


def on_spark(command: str, tmp_path, *options: str) -> list[str]:
    return [argument.format(out=tmp_path / "out") for argument in SPARK_COMMANDS[command]] + ["--engine", "spark", *options]


@pytest.mark.parametrize("command", SPARK_COMMANDS)
def test_every_spark_command_refuses_dev_null_as_spark_dir(tmp_path, command):
    done = kraftcheck(*on_spark(command, tmp_path, "--spark-dir", "/dev/null"), timeout=60)
    no_traceback(done)
    assert done.returncode == 2 and done.stderr == "kraftcheck: --spark-dir /dev/null: not a directory\n", done.stderr
    assert not (tmp_path / "out").exists()


def test_a_file_or_a_path_under_it_is_no_spark_dir_and_the_file_stays(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    before = notes.stat()
    for directory, why in [(notes, "not a directory"), (notes / "spark", f"cannot be created ({notes}: not a directory)"), (f"file://{notes}", "not a directory")]:
        done = kraftcheck(*on_spark("check", tmp_path, "--spark-dir", str(directory)), timeout=60)
        no_traceback(done)
        assert done.returncode == 2 and done.stderr == f"kraftcheck: --spark-dir {directory}: {why}\n", done.stderr
    assert notes.read_text() == "mine\n" and notes.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def as_an_ordinary_user() -> list[str]:
    """The prefix that runs a command under file permissions: root's override of them dropped
    (util-linux setpriv), since root writes in any directory."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, and no setpriv to drop root's override of file permissions")
    return ["setpriv", "--inh-caps=-dac_override", "--bounding-set=-dac_override", "--"]


def test_an_unwritable_directory_is_no_spark_dir_and_stays_as_it_was(tmp_path):
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    (read_only / "data").write_text("mine\n")
    read_only.chmod(0o555)
    for directory, why in [(read_only, "not writable"), (read_only / "spark", f"cannot be created ({read_only}: not writable)")]:
        command = [*as_an_ordinary_user(), sys.executable, "-m", "conformance.cli", *on_spark("check", tmp_path, "--spark-dir", str(directory))]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)
        no_traceback(done)
        assert done.returncode == 2 and done.stderr == f"kraftcheck: --spark-dir {directory}: {why}\n", done.stderr
    assert sorted(p.name for p in read_only.iterdir()) == ["data"] and (read_only / "data").read_text() == "mine\n"
