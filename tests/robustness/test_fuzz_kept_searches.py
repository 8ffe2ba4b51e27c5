"""Fuzzing kept searches (Hypothesis, fixed budget: tests/robustness/fuzzing.py): `check --resume`
of a kept smoke search with one of its files mutated resumes to the exact count (873 with one
worker and the default reading, 1,041 with two and every choice) or says "damaged: FILE", exit 2;
never a traceback, never another count."""

import contextlib
import functools
import io
import json
import re
import shutil
from pathlib import Path

from hypothesis import event, given
from hypothesis import strategies as st

from conformance import cli
from conformance.explore.kept import LOCK

from fuzzing import INPUTS, budget, byte_mutations


# Per worker count: smoke's options and its states (tests/test_check_configs.py).
KEPT_SMOKE = {1: (["--no-every-choice"], 873), 2: ([], 1_041)}


@functools.cache
def kept_smoke(workdir: Path, workers: int) -> Path:
    """Smoke kept on disk, stopped by --max-states between levels: a search to resume."""
    options, _states = KEPT_SMOKE[workers]
    kept = workdir / f"kept-{workers}"
    argv = ["check", "--config", "smoke", *options, "--workers", str(workers), "--max-states", "300", "--state-dir", str(kept), "--out", str(workdir), "--json"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(argv) == 0
    return kept


def check_kept_contract(workdir: Path, workers: int, name: str, data: bytes) -> None:
    """check --resume with `name` holding `data`: the exact count, or "damaged: FILE" and exit 2."""
    INPUTS["kept"] += 1
    kept = workdir / "kept-mutated"
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(kept_smoke(workdir, workers), kept)
    (kept / name).write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["check", "--resume", str(kept), "--json", "--out", str(workdir)])
    if code == 0:
        summary = json.loads(out.getvalue())
        assert summary["complete"] and summary["distinct_states"] == KEPT_SMOKE[workers][1], (name, summary["distinct_states"])
        event("resumed to the exact count")
        return
    assert code == 2 and not out.getvalue(), (name, code, err.getvalue()[-500:])
    assert err.getvalue().startswith("kraftcheck: damaged: ") and len(err.getvalue().strip().splitlines()) == 1, (name, err.getvalue()[-500:])
    event(f"damaged: {kind_of(name)}")


def kind_of(name: str) -> str:
    """A kept file's kind: its name without numbers (seen-N-N.fps.npy, states-N.bin, ...)."""
    return re.sub(r"[0-9]+", "N", Path(name).name)


@budget(150)
@given(data=st.data())
def test_kept_search_mutations(workdir, data):
    """A kind of file first, then one of that kind: a table's 32 files would crowd out the rest."""
    workers = data.draw(st.sampled_from(sorted(KEPT_SMOKE)))
    original = kept_smoke(workdir, workers)
    names = sorted(str(path.relative_to(original)) for path in original.rglob("*") if path.is_file() and path.name != LOCK)
    kind = data.draw(st.sampled_from(sorted({kind_of(name) for name in names})))
    name = data.draw(st.sampled_from([name for name in names if kind_of(name) == kind]))
    check_kept_contract(workdir, workers, name, data.draw(byte_mutations((original / name).read_bytes())))
