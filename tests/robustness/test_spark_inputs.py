"""A hostile but realistic user of the Spark engine: a --spark-dir that is no usable directory,
a --spark-master nobody listens on. Each is refused in a line that names it and why, exit 2,
before Spark starts, within seconds, and nothing of the user's is changed. None needs Java."""

import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest
from test_hostile_inputs import ROOT, kraftcheck, no_traceback

from conformance.spark.session import SparkUnavailable, check_master_reachable

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


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_an_unreachable_master_is_named_within_seconds(tmp_path):
    """Spark's own client tries to register three times, 20 s apart, and then names a consequence."""
    master = f"spark://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    done = kraftcheck(*on_spark("check", tmp_path, "--spark-master", master), timeout=60)
    assert time.monotonic() - started < 15
    no_traceback(done)
    assert done.returncode == 2 and done.stderr == f"kraftcheck: cannot reach the Spark master {master}: connection refused\n", done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_master_is_reachable_if_any_of_its_addresses_is_and_other_masters_are_left_to_spark():
    with socket.socket() as master:
        master.bind(("127.0.0.1", 0))
        master.listen()
        listening, closed, other = master.getsockname()[1], closed_port(), closed_port()
        check_master_reachable(f"spark://127.0.0.1:{closed},127.0.0.1:{listening}")
        unreachable = f"spark://127.0.0.1:{closed},127.0.0.1:{other}"
        expected = f"cannot reach the Spark master {unreachable}: 127.0.0.1:{closed}: connection refused; 127.0.0.1:{other}: connection refused"
        with pytest.raises(SparkUnavailable, match=re.escape(expected)):
            check_master_reachable(unreachable)
    for master in ["local[4]", "local[*]", "local-cluster[2,1,1024]", "yarn", "k8s://https://127.0.0.1:1"]:
        check_master_reachable(master)  # k8s's port 1 is closed: not probed
