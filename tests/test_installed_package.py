"""kraftcheck as pip installs it: a wheel built from this checkout, installed in a new virtual
environment (its dependencies from PyPI), certifies from an empty directory with the corpora it
carries, and gives the verdicts the checkout gives on the same corpora.

Slow (a build, a download, whole-corpus runs): the timeouts bound each step, not the whole.
"""

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from conformance import cli
from conformance.corpus.generate import DEFAULT_CORPUS, DEFAULT_PROFILE, shipped_corpora
from conformance.corpus.manifest import MANIFEST, listing

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
PACKAGES = ("spec", "model", "adapters", "conformance")
INSTALLED_CORPORA = "conformance/traces"  # where the wheel carries the repository's traces/
BUILD_TIMEOUT = 600  # seconds, a build with its build environment
INSTALL_TIMEOUT = 1800  # seconds; the first install downloads and builds pyspark (about 300 MB)
RUN_TIMEOUT = 600  # seconds, one command over a whole corpus (a few seconds each on two cores)
COMPARED = ("profile", "traces", "passed", "failed", "verdicts", "lacks", "readings", "steps", "rules_failed", "rules_conforming", "rules_not_exercised")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pip") is None, reason="pip is not installed with this Python, so no wheel can be built")


def run(command: list[str | Path], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """A command in an environment that cannot reach this checkout's packages (no PYTHONPATH, no virtual environment)."""
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def outcome(done: subprocess.CompletedProcess[str]) -> str:
    """A command's exit status and the ends of its output, for a failed assertion."""
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout: a build writes build/ and kraftcheck.egg-info/ beside the sources."""
    copy = tmp_path_factory.mktemp("source") / "kraftcheck"
    ignored = shutil.ignore_patterns(".git", ".venv", "out", "runs", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis")
    shutil.copytree(ROOT, copy, ignore=ignored)
    return copy


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds, in a build environment of pyproject.toml's build requirements."""
    out = tmp_path_factory.mktemp("wheel")
    done = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", source, "-w", out], cwd=out, timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    return out / f"kraftcheck-{VERSION}-py3-none-any.whl"


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment holding the wheel and its dependencies only."""
    where = tmp_path_factory.mktemp("venv")
    done = run([sys.executable, "-m", "venv", where], cwd=where, timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    done = run([where / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", wheel], cwd=where, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    return where


def installed_corpus(venv: Path, shipped: Path) -> Path:
    """Where the installed package holds a shipped corpus of the checkout."""
    (site_packages,) = (venv / "lib").glob("python3*/site-packages")
    return site_packages / INSTALLED_CORPORA / shipped.relative_to(DEFAULT_CORPUS)


def checkout_summary(capsys: pytest.CaptureFixture[str], adapter: str, corpus: Path, out: Path) -> dict:
    """What this checkout's certify says of the same corpus."""
    assert cli.main(["certify", "--adapter", adapter, "--corpus", str(corpus), "--out", str(out), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def installed_certify(venv: Path, cwd: Path, *args: str) -> dict:
    """`kraftcheck certify ARGS --json` of the installed package, run in `cwd`: exit 0, its summary."""
    done = run([venv / "bin" / "kraftcheck", "certify", *args, "--json"], cwd=cwd, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    return json.loads(done.stdout)


def test_the_wheel_holds_the_packages_and_the_shipped_corpora_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        manifests = {name: archive.read(name) for name in names if name.endswith(f"/{MANIFEST}")}
    assert {name.split("/")[0] for name in names} == {*PACKAGES, f"kraftcheck-{VERSION}.dist-info"}  # no tests/, benchmarks/, scripts/, docs/
    packages = {init.parent.relative_to(ROOT).as_posix() for package in PACKAGES for init in (ROOT / package).rglob("__init__.py")}
    assert {f"{package}/__init__.py" for package in packages} <= names, "a package of the checkout is missing from pyproject.toml's list"
    expected = set()
    for shipped in shipped_corpora().values():
        inside = f"{INSTALLED_CORPORA}/{shipped.relative_to(DEFAULT_CORPUS).as_posix()}".removesuffix("/.")
        assert manifests[f"{inside}/{MANIFEST}"] == (shipped / MANIFEST).read_bytes()
        expected |= {f"{inside}/{MANIFEST}", *(f"{inside}/{name}" for name in listing(shipped))}
    assert {name for name in names if name.startswith(f"{INSTALLED_CORPORA}/")} == expected  # each manifest and what it lists, nothing else


def test_the_sdist_holds_the_corpora_the_guide_and_no_tests(source: Path, tmp_path: Path) -> None:
    """Built as `python -m build --sdist` would, with pyproject.toml's build requirements in an environment of their own."""
    builder = tmp_path / "build-env"
    done = run([sys.executable, "-m", "venv", builder], cwd=tmp_path, timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    done = run([builder / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", *PYPROJECT["build-system"]["requires"]], cwd=tmp_path, timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    hook = "import sys, setuptools.build_meta as backend; print(backend.build_sdist(sys.argv[1]))"
    done = run([builder / "bin" / "python", "-c", hook, tmp_path], cwd=source, timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    top = f"kraftcheck-{VERSION}"
    with tarfile.open(tmp_path / done.stdout.split()[-1]) as sdist:
        names = {name.removeprefix(f"{top}/") for name in sdist.getnames()}
    guide = {path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").rglob("*.md")}
    assert guide and guide <= names
    assert {path.relative_to(ROOT).as_posix() for path in (ROOT / "spec").glob("*.md")} <= names
    for shipped in shipped_corpora().values():
        corpus = shipped.relative_to(ROOT).as_posix()
        assert {f"{corpus}/{MANIFEST}", *(f"{corpus}/{name}" for name in listing(shipped))} <= names
    assert not [name for name in names if name.split("/")[0] in ("tests", "benchmarks", "scripts", ".venv")]


def test_version_is_the_projects(venv: Path, tmp_path: Path) -> None:
    done = run([venv / "bin" / "kraftcheck", "--version"], cwd=tmp_path, timeout=RUN_TIMEOUT)
    assert (done.returncode, done.stdout) == (0, f"kraftcheck {VERSION}\n"), outcome(done)


@pytest.mark.parametrize("profile", sorted(shipped_corpora()))
def test_reference_certifies_every_shipped_corpus_from_an_empty_directory(venv: Path, profile: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kraftcheck certify --adapter reference [--profile P]` with the packaged corpus, as the checkout's certify judges it."""
    shipped = shipped_corpora()[profile]
    empty = tmp_path / "empty"
    empty.mkdir()
    summary = installed_certify(venv, empty, "--adapter", "reference", *(() if profile == DEFAULT_PROFILE else ("--profile", profile)))
    assert Path(summary["corpus"]) == installed_corpus(venv, shipped)
    assert (empty / "out" / "certify-reference" / "report.json").is_file()
    expected = checkout_summary(capsys, "reference", shipped, tmp_path / "checkout")
    assert {key: summary[key] for key in COMPARED} == {key: expected[key] for key in COMPARED}
    assert summary["verdicts"]["departs"] == summary["verdicts"]["error"] == 0 and summary["traces"] == len(listing(shipped))


def test_the_example_node_certifies_through_the_subprocess_adapter(venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole kip595 corpus through `python -m adapters.example_node` of the installed package."""
    empty = tmp_path / "empty"
    empty.mkdir()
    summary = installed_certify(venv, empty, "--adapter", f"subprocess:{shlex.quote(str(venv / 'bin' / 'python'))} -m adapters.example_node")
    assert Path(summary["corpus"]) == installed_corpus(venv, DEFAULT_CORPUS)
    expected = checkout_summary(capsys, f"subprocess:{shlex.quote(sys.executable)} -m adapters.example_node", DEFAULT_CORPUS, tmp_path / "checkout")
    assert {key: summary[key] for key in COMPARED} == {key: expected[key] for key in COMPARED}
    assert summary["verdicts"]["conforms"] == summary["traces"] == len(listing(DEFAULT_CORPUS))


def test_the_installed_corpus_is_verified_against_its_manifest(venv: Path, tmp_path: Path) -> None:
    """A changed trace errs and an unlisted one stops certify, as in a checkout; the installed corpus is left as it was."""
    corpus = installed_corpus(venv, DEFAULT_CORPUS)
    changed = sorted(corpus.glob("corpus-isr-*.jsonl"))[0]
    original = changed.read_bytes()
    stray = corpus / "stray.jsonl"
    try:
        changed.write_bytes(original.replace(b"\n", b" \n", 1))  # the same trace, other bytes
        done = run([venv / "bin" / "kraftcheck", "certify", "--adapter", "reference", "--system", "isr", "--json"], cwd=tmp_path, timeout=RUN_TIMEOUT)
        assert done.returncode == 1 and json.loads(done.stdout)["verdicts"]["error"] == 1, outcome(done)
        report = json.loads((tmp_path / "out" / "certify-reference" / "report.json").read_text())
        assert [result["failure"] for result in report["results"] if result["verdict"] == "error"] == [
            f"invalid trace: {changed}: changed since the corpus was generated (its hash differs from the manifest's)"
        ]
        changed.write_bytes(original)
        stray.write_bytes(original)
        done = run([venv / "bin" / "kraftcheck", "certify", "--adapter", "reference", "--system", "isr"], cwd=tmp_path, timeout=RUN_TIMEOUT)
        assert done.returncode == 2 and "the corpus does not match its manifest: 1 trace files are not listed (first: stray.jsonl)" in done.stderr, outcome(done)
    finally:
        changed.write_bytes(original)
        stray.unlink(missing_ok=True)


def test_the_pytest_plugin_runs_the_packaged_corpus_beside_a_projects_own_tests(venv: Path, tmp_path: Path) -> None:
    """An implementer's CI: pytest installed next to kraftcheck, a test file of its own, the traces added as items."""
    done = run([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", "pytest"], cwd=tmp_path, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    (tmp_path / "test_own.py").write_text("def test_own():\n    assert True\n")
    done = run([venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kraftcheck-adapter=reference"], cwd=tmp_path, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, outcome(done)
    assert re.search(rf"^{len(listing(DEFAULT_CORPUS)) + 1} passed in ", done.stdout, re.MULTILINE), outcome(done)
