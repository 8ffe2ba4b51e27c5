"""A kept search (check --state-dir, --resume) cannot lie: one run holds its directory at a time;
every file a resume reads is verified first, and one that does not verify is "damaged: FILE",
exit 2, never a verdict; a worker that dies is one line naming it and its signal, exit 2, and the
search stays resumable; a full disk is a message, not a SIGBUS. Each kept search here is smoke's
(873 states), stopped between levels by --max-states, so that a resume must end at exactly 873."""

import contextlib
import functools
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance import cli
from conformance.explore import check as check_module
from conformance.explore.check import system_for
from conformance.explore.kept import locked
from conformance.explore.visited import Table
from conformance.explore.workspace import read_checkpoint

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ["--config", "smoke", "--no-every-choice"]
SMOKE_STATES = 873


def keep_smoke(directory: Path, workers: int) -> Path:
    """Smoke kept in `directory`, stopped after a few levels: a search to resume."""
    argv = ["check", *SMOKE, "--workers", str(workers), "--max-states", "300", "--state-dir", str(directory), "--out", str(directory.parent)]
    assert cli.main(argv) == 0
    return directory


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[int, Path]:
    base = tmp_path_factory.mktemp("kept")
    return {workers: keep_smoke(base / f"workers-{workers}", workers) for workers in (1, 2)}


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-workers"])
def kept(request, originals, tmp_path) -> Path:
    """A copy of a kept smoke search, this test's to damage."""
    return Path(shutil.copytree(originals[request.param], tmp_path / "kept"))


def resume(kept: Path, capsys) -> tuple[int, dict | None, str]:
    """check --resume: its exit code, its JSON summary if it printed one, and its stderr."""
    code = cli.main(["check", "--resume", str(kept), "--json", "--out", str(kept.parent)])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def files(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()}


def frontier(kept: Path) -> Path:
    """The states file a resume expands first (a worker's, when sharded)."""
    place = kept / "worker-1" if (kept / "worker-1").exists() else kept
    return place / f"states-{read_checkpoint(kept).completed - 1}.bin"


def flip(path: Path, at: int, count: int = 8) -> Path:
    data = bytearray(path.read_bytes())
    data[at : at + count] = bytes(b ^ 0xFF for b in data[at : at + count])
    path.write_bytes(bytes(data))
    return path


def occupied_slot(kept: Path, segment: str) -> int:
    fps = np.load(kept / f"{segment}.fps.npy")
    return int(np.flatnonzero(fps)[0])


def state_fingerprint_flipped(kept: Path) -> Path:
    """A state's fingerprint in a table (after its 128-byte .npy header) no longer the one seen."""
    return flip(kept / "seen-03-4096.fps.npy", 128 + 8 * occupied_slot(kept, "seen-03-4096"))


def relevel(kept: Path) -> Path:
    """An occupied slot of a table labelled with another completed level."""
    path = kept / "seen-02-4096.levels.npy"
    levels = np.load(path)
    levels[occupied_slot(kept, "seen-02-4096")] ^= 1
    np.save(path, levels)
    return path


def another_configuration(kept: Path) -> Path:
    """check.json as another configuration's search would have it."""
    path = kept / "check.json"
    saved = json.loads(path.read_bytes())
    saved["config"]["max_epoch"] += 1
    path.write_text(json.dumps(saved))
    return path


def manifest_edited(kept: Path) -> Path:
    path = kept / "search.json"
    path.write_text(path.read_text().replace('"distinct":', '"distinct":1', 1))
    return path


def emptied(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def flipped(path: Path) -> Path:
    return flip(path, path.stat().st_size // 2)


DAMAGES = {
    "frontier states emptied": lambda kept: emptied(frontier(kept)),
    "frontier states flipped": lambda kept: flipped(frontier(kept)),
    "seen fingerprints flipped": lambda kept: flipped(kept / "seen-07-4096.fps.npy"),
    "seen fingerprint of a state flipped": state_fingerprint_flipped,
    "seen levels changed": relevel,
    "seen file emptied": lambda kept: emptied(kept / "seen-05-4096.fps.npy"),
    "seen header flipped": lambda kept: flip(kept / "seen-09-4096.levels.npy", 20, 4),
    "parts emptied": lambda kept: emptied(frontier(kept).parent / "parts.bin"),
    "parts flipped": lambda kept: flipped(frontier(kept).parent / "parts.bin"),
    "parent links flipped": lambda kept: flipped(frontier(kept).parent / "parents-3.npy"),
    "another configuration's check.json": another_configuration,
    "the manifest edited": manifest_edited,
    "the manifest emptied": lambda kept: emptied(kept / "search.json"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_file_is_named_and_nothing_is_concluded(kept, capsys, damage):
    victim = DAMAGES[damage](kept)
    code, summary, err = resume(kept, capsys)
    assert (code, summary) == (2, None), err
    assert err.startswith(f"kraftcheck: damaged: {victim.parent}/") and victim.name in err  # a table's two files are named together
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_an_undamaged_kept_search_resumes_to_the_exact_count(kept, capsys):
    code, summary, err = resume(kept, capsys)
    assert code == 0, err
    assert summary["complete"] and summary["distinct_states"] == SMOKE_STATES


def test_a_second_run_on_a_kept_search_is_refused_at_once_and_changes_nothing(kept, capsys):
    before = files(kept)
    with locked(kept):  # a first run, resuming
        code, summary, err = resume(kept, capsys)
        assert (code, summary) == (2, None)
        assert f"{kept}: in use by another kraftcheck run" in err and "Traceback" not in err
        assert files(kept) == before
    assert resume(kept, capsys)[1]["distinct_states"] == SMOKE_STATES  # once it has ended


def test_a_new_state_dir_held_by_another_run_is_refused(tmp_path, capsys):
    claimed = tmp_path / "claimed"
    claimed.mkdir()
    with locked(claimed):
        assert cli.main(["check", *SMOKE, "--workers", "1", "--state-dir", str(claimed), "--out", str(tmp_path)]) == 2
    assert f"{claimed}: in use by another kraftcheck run" in capsys.readouterr().err
    assert [path.name for path in claimed.iterdir()] == ["lock"]


def test_the_lock_is_held_by_another_process_too(kept):
    """flock, as another kraftcheck run would meet it: refused in a process of its own."""
    with locked(kept):
        run = subprocess.run([sys.executable, "-m", "conformance.cli", "check", "--resume", str(kept)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "in use by another kraftcheck run" in run.stderr and not run.stdout


def dying_system(config, marker: Path, after: int):
    """The configuration's system, whose process kills itself (SIGKILL) at its `after`-th
    expansion if it is the first to get there (it creates `marker`)."""
    system = system_for(config)
    expand, calls = system.expand, itertools.count(1)

    def expand_or_die(state):
        if next(calls) == after:
            with contextlib.suppress(FileExistsError):
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
                os.kill(os.getpid(), signal.SIGKILL)
        return expand(state)

    system.expand = expand_or_die
    return system


def test_a_killed_worker_is_one_line_naming_it_and_its_signal_and_the_search_resumes(tmp_path, capsys, monkeypatch):
    kept = tmp_path / "kept"
    monkeypatch.setattr(check_module, "system_for", functools.partial(dying_system, marker=tmp_path / "died", after=150))
    assert cli.main(["check", *SMOKE, "--workers", "2", "--state-dir", str(kept), "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert not out and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("kraftcheck: worker ") and "was killed by SIGKILL" in line and f"kraftcheck check --resume {kept}" in line
    monkeypatch.undo()
    code, summary, err = resume(kept, capsys)
    assert code == 0, err
    assert summary["complete"] and summary["distinct_states"] == SMOKE_STATES


def allocated(directory: Path) -> bool:
    return all(path.stat().st_blocks * 512 >= path.stat().st_size for path in directory.glob("seen-*.npy"))


def test_the_tables_files_are_allocated_before_they_are_mapped(tmp_path):
    """Blocks allocated when a table file is made, and when it grows: on a full disk that is an
    OSError, where writing a page of a sparse mapping is a SIGBUS."""
    table = Table(tmp_path, on_disk=True, capacity=1 << 14)
    assert allocated(tmp_path)
    table.offer(np.arange(1, 200_000, dtype=np.int64) * 0x9E3779B97F4A7C1, level=0)  # every segment grows
    assert not list(tmp_path.glob("seen-*-16384.*")) and allocated(tmp_path)


# A table made on a small disk that then fills up: its states still go in (its blocks are its
# own), and growing it is an OSError.
FILLED_DISK = """
import errno, sys
import numpy as np
from pathlib import Path
from conformance.explore.visited import Table
disk = Path(sys.argv[1])
table = Table(disk, on_disk=True)
with open(disk / "filler", "wb", buffering=0) as filler:
    try:
        while True:
            filler.write(bytes(4096))
    except OSError:
        pass
keys = np.arange(1, 200_000, dtype=np.int64) * 0x9E3779B97F4A7C1
table.offer(keys[:1000], level=0)
try:
    table.offer(keys, level=0)
except OSError as error:
    print(errno.errorcode[error.errno])
"""


def in_a_small_disk(disk: Path, command: list[str], size: str = "256k") -> list[str]:
    """The command run with a tmpfs of `size` mounted on `disk` (in a user and mount namespace of its own)."""
    mount = f'mount -t tmpfs -o size={size} none "$0" && exec "$@"'
    return ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount, str(disk), *command]


def small_disk(tmp_path: Path) -> Path:
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("unshare") is None or subprocess.run(in_a_small_disk(disk, ["true"]), capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (unshare, user namespaces)")
    return disk


def test_a_table_on_a_disk_that_fills_up_is_never_a_sigbus(tmp_path):
    disk = small_disk(tmp_path)
    run = subprocess.run(in_a_small_disk(disk, [sys.executable, "-c", FILLED_DISK, str(disk)], size="1m"), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout.strip()) == (0, "ENOSPC"), run.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_full_disk_is_a_message_and_exit_2(tmp_path, workers):
    disk = small_disk(tmp_path)
    command = [sys.executable, "-m", "conformance.cli", "check", *SMOKE, "--workers", workers, "--state-dir", str(disk / "kept"), "--out", str(tmp_path)]
    run = subprocess.run(in_a_small_disk(disk, command), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and not run.stdout, run.stderr
    assert "the search cannot keep its files: [Errno 28] No space left on device" in run.stderr and "Traceback" not in run.stderr
