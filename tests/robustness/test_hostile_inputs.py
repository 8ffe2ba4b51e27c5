"""A hostile but realistic user: bad traces and replies, foreign output directories, damaged
corpora, absurd options. Every failure stays local and names its file or step; nothing of the
user's is deleted; every report set is whole and from one run; no traceback."""

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import msgspec
import pytest

from conformance.commands.certify import default_out
from conformance.corpus.generate import DEFAULT_CORPUS
from conformance.corpus.manifest import MANIFEST
from spec import trace as traces

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(DEFAULT_CORPUS.glob("*.jsonl"))
WITH_RESPONSE = next(DEFAULT_CORPUS.glob("corpus-cell-*-fetchresponse-observer-newer-fenced-leader-epoch-epoch-fetch.jsonl"))
CATCHES_HW_ANY_EPOCH = DEFAULT_CORPUS / "corpus-walk-0003-node2.jsonl"  # mutant:hw-any-epoch departs from it


def kraftcheck(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    """The installed command line, as a user runs it (its own process, its own exit code)."""
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr[-3000:]


def small_corpus(directory: Path, extra: dict[str, bytes]) -> Path:
    """Three shipped traces (the one with a response among them) plus the given files, no manifest."""
    directory.mkdir()
    for path in [WITH_RESPONSE, *SHIPPED[:2]]:
        (directory / path.name).write_bytes(path.read_bytes())
    for name, data in extra.items():
        (directory / name).write_bytes(data)
    return directory


# -- 1. traces generate never deletes what it does not own ------------------------------------


def test_generate_refuses_a_directory_that_is_not_a_corpus_and_deletes_nothing(tmp_path):
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    (project / ".git").mkdir()
    (project / "src" / "a.py").write_text("x\n")
    (project / "data.jsonl").write_text("{}\n")
    mode = project.stat().st_mode
    done = kraftcheck("traces", "generate", "--config", "smoke", "--max-states", "100", "--walks", "0", "--out", ".", cwd=project)
    no_traceback(done)
    assert done.returncode == 2
    assert "holds files kraftcheck did not write (.git, data.jsonl, src)" in done.stderr
    assert sorted(p.name for p in project.iterdir()) == [".git", "data.jsonl", "src"]
    assert (project / "src" / "a.py").read_text() == "x\n" and (project / "data.jsonl").read_text() == "{}\n"
    assert project.stat().st_mode == mode


def test_generate_refuses_a_file_as_out_and_leaves_it(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    done = kraftcheck("traces", "generate", "--config", "smoke", "--max-states", "100", "--walks", "0", "--out", str(target))
    no_traceback(done)
    assert done.returncode == 2 and f"{target}: not a directory" in done.stderr
    assert target.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_regenerating_a_corpus_replaces_only_its_own_files(tmp_path):
    out = tmp_path / "corpus"
    args = ("traces", "generate", "--config", "smoke", "--max-states", "300", "--walks", "1", "--walk-steps", "20", "--out", str(out))
    assert kraftcheck(*args).returncode == 0
    first = json.loads((out / MANIFEST).read_text())["files"]
    (out / "README.md").write_text("about these traces\n")
    smaller = ("traces", "generate", "--config", "smoke", "--max-states", "100", "--walks", "0", "--out", str(out))
    assert kraftcheck(*smaller).returncode == 0
    second = json.loads((out / MANIFEST).read_text())["files"]
    assert set(first) - set(second), "the smaller corpus must lack some traces of the first"
    assert sorted(p.name for p in out.iterdir()) == sorted([*second, MANIFEST, "README.md"])
    assert (out / "README.md").read_text() == "about these traces\n"


def test_a_new_corpus_and_its_files_follow_the_umask(tmp_path):
    out = tmp_path / "corpus"
    previous = os.umask(0o022)
    try:
        done = kraftcheck("traces", "generate", "--config", "smoke", "--max-states", "100", "--walks", "0", "--out", str(out))
    finally:
        os.umask(previous)
    assert done.returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert {stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {0o644}


# -- 2. one bad input fails alone ----------------------------------------------------------------


def bad_traces() -> dict[str, bytes]:
    good = WITH_RESPONSE.read_bytes()
    lines = good.split(b"\n")
    request = b'"request":{"type":"FetchRequest","ClusterId":"kraft-cluster","ReplicaId":4,"CurrentLeaderEpoch":'
    at = next(number for number, line in enumerate(lines) if request + b"0" in line)  # the step answering the node's Fetch
    big = lines[at].replace(request + b"0", request + b"1180591620717411303424", 1)
    flipped = bytearray(traces.to_msgpack(traces.read(WITH_RESPONSE)))
    flipped[40] ^= 0xFF
    return {
        "deep-header.jsonl": b'{"kind":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
        "bad-utf8-step.jsonl": b"\n".join([lines[0], lines[1].replace(b'"kraft-cluster"', b'"kraft-\xff"', 1), *lines[2:]]),
        "bit-flipped.msgpack": bytes(flipped),
        "huge-request-int.jsonl": b"\n".join([*lines[:at], big, *lines[at + 1 :]]),
    }


@pytest.mark.parametrize("name", sorted(bad_traces()))
def test_traces_show_names_the_bad_file_without_a_traceback(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(bad_traces()[name])
    done = kraftcheck("traces", "show", str(path))
    no_traceback(done)
    assert done.returncode == 2 and done.stderr.startswith(f"kraftcheck: {path}")


def test_bad_traces_fail_alone_and_the_run_reports(tmp_path):
    corpus = small_corpus(tmp_path / "corpus", bad_traces())
    out = tmp_path / "out"
    done = kraftcheck("certify", "--adapter", "mutant:hw-any-epoch", "--corpus", str(corpus), "--out", str(out), "--json")
    no_traceback(done)
    summary = json.loads(done.stdout)
    assert done.returncode == 1 and summary["traces"] == 7
    report = json.loads((out / "report.json").read_text())
    failures = {Path(r["trace"]).name: r["failure"] or "" for r in report["results"] if not r["passed"]}
    assert {"deep-header.jsonl", "bad-utf8-step.jsonl", "bit-flipped.msgpack", "huge-request-int.jsonl"} <= set(failures)
    assert "out of range" in failures["huge-request-int.jsonl"]
    assert failures["bad-utf8-step.jsonl"].startswith(f"invalid trace: {corpus / 'bad-utf8-step.jsonl'}:2:")


def test_mutation_score_survives_a_bad_trace(tmp_path):
    corpus = small_corpus(tmp_path / "corpus", {"deep-header.jsonl": bad_traces()["deep-header.jsonl"]})
    done = kraftcheck("mutants", "--score", "--corpus", str(corpus), "--json")
    no_traceback(done)
    assert done.returncode in (0, 1) and json.loads(done.stdout)["mutants"] > 0


def test_mutation_score_of_a_corpus_with_no_readable_trace_fails_plainly(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "deep-header.jsonl").write_bytes(bad_traces()["deep-header.jsonl"])
    done = kraftcheck("mutants", "--score", "--no-verify", "--corpus", str(corpus))
    no_traceback(done)
    assert done.returncode == 1 and "mutation score: 0/0 (the corpus has no readable trace)" in done.stdout


def hostile_node(tmp_path: Path, reply: str, start: str = "b'{\"ok\":true}\\n'") -> str:
    """A subprocess implementation that answers `start` with `start` (properly, by default) and
    every later command with `reply` (each Python source of bytes)."""
    script = tmp_path / "node.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            first = True
            for line in sys.stdin.buffer:
                if b'"stop"' in line:
                    break
                sys.stdout.buffer.write({start} if first else {reply})
                sys.stdout.buffer.flush()
                first = False
            """
        )
    )
    return f"subprocess:{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


@pytest.mark.parametrize(
    "reply, complaint",
    [
        (r"b'{\"ok\":true,\"response\":\"\xff\"}\n'", "utf-8"),  # msgspec 0.23 on: not JSON (Invalid UTF-8 ...); before: undecodable (UnicodeDecodeError: 'utf-8' ...)
        (r"b'{\"ok\":true,\"response\":' + b'[' * 100000 + b']' * 100000 + b'}\n'", "nested too deeply"),
        (r"b'{\"ok\":false,\"error\":\"\\u001b[31mboom\\u001b[0m\\u0000' + b'x' * 5000000 + b'\"}\n'", "refused"),
    ],
)
def test_a_hostile_reply_fails_its_trace_and_the_reports_stay_valid(tmp_path, reply, complaint):
    corpus = small_corpus(tmp_path / "corpus", {})
    out = tmp_path / "out"
    done = kraftcheck("certify", "--adapter", hostile_node(tmp_path, reply), "--corpus", str(corpus), "--out", str(out), "--shorten-budget", "0")
    no_traceback(done)
    assert done.returncode == 1
    suite = ElementTree.parse(out / "junit.xml").getroot()  # valid XML despite escape codes and NULs
    failures = [case.find("error").get("message") for case in suite.findall("testcase")]  # the adapter failed: an error, not a departure
    assert len(failures) == 3 and all(complaint in message.lower() for message in failures), failures[0][:300]
    assert all(len(message) < 3000 for message in failures)
    assert all("\x1b" not in message and "\x00" not in message for message in failures)
    assert (out / "junit.xml").stat().st_size < 50_000


HOSTILE_TEXT = "<script>alert(1)</script><img src=x onerror=alert(2)> | # [x](javascript:alert(3)) ``` ~~~~ \u202eevil\n# injected heading"


def test_text_from_an_implementation_is_escaped_in_every_report_format(tmp_path):
    start = repr(json.dumps({"ok": True, "implementation": HOSTILE_TEXT}).encode() + b"\n")
    refusal = repr(json.dumps({"ok": False, "error": HOSTILE_TEXT}).encode() + b"\n")
    adapter = hostile_node(tmp_path, refusal, start)
    corpus = small_corpus(tmp_path / "corpus", {})
    out = tmp_path / "out"
    done = kraftcheck("certify", "--adapter", adapter, "--corpus", str(corpus), "--out", str(out), "--shorten-budget", "0")
    no_traceback(done)
    assert done.returncode == 1
    markdown = (out / "report.md").read_text()
    for raw in ("<script>", "<img", "](javascript", "```", "~~~~"):
        assert not re.search(r"(?<!\\)" + re.escape(raw), markdown), raw  # each only backslash-escaped
    assert "\u202e" not in markdown and "\n# injected" not in markdown
    assert "Implementation: \\<script\\>alert(1)\\</script\\>\\<img src=x onerror=alert(2)\\> \\| # \\[x\\](javascript:alert(3)) \\`\\`\\` \\~\\~\\~\\~ \\\\u202eevil<br># injected heading" in markdown
    html = (out / "report.html").read_text()
    assert "<script>alert" not in html and "<img src=x" not in html and "\u202e" not in html
    assert "\u202e" not in (out / "junit.xml").read_text() and "\u202e" not in done.stdout + done.stderr


# -- 7. a report set is whole and from one run ----------------------------------------------------


def test_a_later_report_set_replaces_the_earlier_one_whole(tmp_path):
    out = tmp_path / "out"
    assert kraftcheck("certify", "--adapter", "mutant:hw-any-epoch", "--out", str(out), "--no-deviations").returncode == 1
    assert list((out / "divergences").iterdir())
    assert kraftcheck("certify", "--adapter", "reference", "--out", str(out)).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.html", "report.json", "report.md"]
    assert json.loads((out / "report.json").read_text())["adapter"] == "reference"
    assert ElementTree.parse(out / "junit.xml").getroot().get("failures") == "0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "no staging directory is left behind"


def test_concurrent_runs_into_one_out_leave_one_whole_set(tmp_path):
    out = tmp_path / "out"
    runs = [
        subprocess.Popen([sys.executable, "-m", "conformance.cli", "certify", "--adapter", adapter, "--out", str(out), "--no-deviations"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
        for adapter in ("reference", "mutant:vote-grant-twice", "mutant:hw-any-epoch")
    ]
    codes = [run.wait(timeout=300) for run in runs]
    assert codes == [0, 1, 1]
    adapter = json.loads((out / "report.json").read_text())["adapter"]
    assert ElementTree.parse(out / "junit.xml").getroot().get("name") == f"kraftcheck certify {adapter}"
    assert (out / "report.md").read_text().startswith(f"# kraftcheck certification: `{adapter}`")
    divergences = sorted(p.name for p in (out / "divergences").iterdir()) if (out / "divergences").exists() else []
    shortened = sorted(Path(p).name for p in json.loads((out / "report.json").read_text())["shortened"].values())
    assert divergences == shortened
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_symlinked_out_is_written_through_and_the_link_kept(tmp_path):
    target = tmp_path / "reports"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    corpus = small_corpus(tmp_path / "corpus", {CATCHES_HW_ANY_EPOCH.name: CATCHES_HW_ANY_EPOCH.read_bytes()})
    for adapter, code in (("mutant:hw-any-epoch", 1), ("reference", 0)):
        done = kraftcheck("certify", "--adapter", adapter, "--corpus", str(corpus), "--out", str(link), "--shorten-budget", "0")
        no_traceback(done)
        assert done.returncode == code
        assert link.is_symlink() and link.resolve() == target
        assert json.loads((target / "report.json").read_text())["adapter"] == adapter
        assert (target / "divergences").exists() == (code == 1)
    assert sorted(p.name for p in target.iterdir()) == ["junit.xml", "report.html", "report.json", "report.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "link", "reports"], "no staging directory is left behind"


def mounted(tmp_path: Path, runs: list[list[str]]) -> subprocess.CompletedProcess:
    """Each kraftcheck run in a private mount namespace where tmp_path/tmpfs is a tmpfs and
    tmp_path/bind a bind mount: both mounts end with the namespace."""
    commands = "; ".join(shlex.join([sys.executable, "-m", "conformance.cli", *argv]) + " > /dev/null; echo exit=$?" for argv in runs)
    script = f"set -e; mount -t tmpfs kraftcheck-test {tmp_path / 'tmpfs'}; mount --bind {tmp_path / 'bind.src'} {tmp_path / 'bind'}; set +e; {commands}; ls -A {tmp_path / 'tmpfs'} {tmp_path / 'bind'}"
    return subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_an_out_that_is_a_mount_point_gets_the_set_swapped_in_entry_by_entry(tmp_path):
    for name in ("tmpfs", "bind", "bind.src"):
        (tmp_path / name).mkdir()
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount -t tmpfs kraftcheck-probe {tmp_path / 'tmpfs'}"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"this machine does not let a test mount a file system in a namespace of its own: {probe.stderr.strip()}")
    corpus = small_corpus(tmp_path / "corpus", {CATCHES_HW_ANY_EPOCH.name: CATCHES_HW_ANY_EPOCH.read_bytes()})
    runs = [
        ["certify", "--adapter", adapter, "--corpus", str(corpus), "--out", str(tmp_path / out), "--shorten-budget", "1"]
        for out in ("tmpfs", "bind")
        for adapter in ("mutant:hw-any-epoch", "reference")
    ]
    done = mounted(tmp_path, runs)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.split("\n")[:4] == ["exit=1", "exit=0", "exit=1", "exit=0"], done.stdout + done.stderr
    listing = "\n".join(done.stdout.split("\n")[4:])
    report_set = "junit.xml\nreport.html\nreport.json\nreport.md"
    assert listing == f"{tmp_path / 'bind'}:\n{report_set}\n\n{tmp_path / 'tmpfs'}:\n{report_set}\n", "the earlier set's divergences are gone, no staging directory is left"


def test_a_killed_runs_staging_directory_is_cleared_by_the_next_run(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    leftover = tmp_path / f".kraftcheck-staging-{dead}-abc"
    leftover.mkdir()
    (leftover / "report.json").write_text("{}")
    assert kraftcheck("certify", "--adapter", "reference", "--out", str(tmp_path / "out")).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_reports_follow_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        assert kraftcheck("certify", "--adapter", "reference", "--out", str(tmp_path / "out")).returncode == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "out").iterdir()} == {0o644}


# -- 8, 10. an unusable --out is refused before the work ------------------------------------------


def test_certify_refuses_an_unusable_out_before_replaying(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("mine\n")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work\n")
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    cases = {
        str(a_file): "not a directory",
        "/dev/null": "not a directory",
        str(foreign): "holds files kraftcheck did not write (thesis.tex)",
        str(DEFAULT_CORPUS / "out"): "inside the corpus",
    }
    if os.geteuid() != 0:  # root writes anywhere
        cases[str(read_only / "out")] = "cannot be created"
    for out, complaint in cases.items():
        done = kraftcheck("certify", "--adapter", "mutant:hw-any-epoch", "--out", out)
        no_traceback(done)
        assert done.returncode == 2 and complaint in done.stderr, (out, done.stderr)
        assert "traces" not in done.stdout, "nothing was replayed"
    assert a_file.read_text() == "mine\n" and (foreign / "thesis.tex").read_text() == "years of work\n"
    assert not (DEFAULT_CORPUS / "out").exists()


# -- 9. the manifest is checked ---------------------------------------------------------------------


def copied_corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in DEFAULT_CORPUS.iterdir():
        if path.is_file():  # the KIP-595 corpus; a profile's corpus beside it is a directory of its own
            (corpus / path.name).write_bytes(path.read_bytes())
    return corpus


def test_a_corpus_missing_traces_is_refused(tmp_path):
    corpus = copied_corpus(tmp_path)
    for path in sorted(corpus.glob("*.jsonl"))[: 3 * len(SHIPPED) // 4]:
        path.unlink()
    done = kraftcheck("certify", "--adapter", "reference", "--corpus", str(corpus), "--out", str(tmp_path / "out"))
    no_traceback(done)
    assert done.returncode == 2 and f"{3 * len(SHIPPED) // 4} of {len(SHIPPED)} listed traces are missing" in done.stderr
    done = kraftcheck("certify", "--adapter", "reference", "--corpus", str(corpus), "--out", str(tmp_path / "out"), "--no-verify", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["traces"] == len(SHIPPED) - 3 * len(SHIPPED) // 4


def test_a_tampered_trace_fails_alone_blamed_on_the_corpus_not_the_adapter(tmp_path):
    corpus = copied_corpus(tmp_path)
    victim = corpus / WITH_RESPONSE.name
    victim.write_bytes(victim.read_bytes().replace(b'"PartitionErrorCode":74', b'"PartitionErrorCode":75', 1))
    done = kraftcheck("certify", "--adapter", "reference", "--corpus", str(corpus), "--out", str(tmp_path / "out"), "--json")
    no_traceback(done)
    assert done.returncode == 1 and json.loads(done.stdout)["failed"] == 1
    failed = [r for r in json.loads((tmp_path / "out" / "report.json").read_text())["results"] if not r["passed"]]
    assert [r["failure"] for r in failed] == [f"invalid trace: {victim}: changed since the corpus was generated (its hash differs from the manifest's)"]
    assert failed[0]["rules_failed"] == [] and failed[0]["divergence"] is None
    done = kraftcheck("certify", "--adapter", "reference", "--corpus", str(corpus), "--out", str(tmp_path / "out"), "--no-verify", "--json")
    assert done.returncode == 1, "unverified, the changed trace is still checked against the specification's model"
    failed = [r for r in json.loads((tmp_path / "out" / "report.json").read_text())["results"] if not r["passed"]]
    assert [(r["verdict"], r["failure"]) for r in failed] == [
        ("error", "invalid trace: step 3: the rules are recorded as FETCH-RESP-1 OBS-2, the specification's model cites COMMON-3 OBS-2")
    ]


def test_an_added_trace_is_refused_and_the_previous_out_is_not_replayed(tmp_path):
    corpus = copied_corpus(tmp_path)
    (corpus / "out" / "divergences").mkdir(parents=True)
    (corpus / "out" / "divergences" / WITH_RESPONSE.name).write_bytes(WITH_RESPONSE.read_bytes())
    done = kraftcheck("certify", "--adapter", "reference", "--corpus", str(corpus), "--out", str(tmp_path / "out"))
    no_traceback(done)
    assert done.returncode == 2 and "1 trace files are not listed (first: out/divergences/" in done.stderr


# -- 11, 12, 13, 14 --------------------------------------------------------------------------------


def test_traces_show_cuts_a_huge_field(tmp_path):
    built = traces.read(WITH_RESPONSE)
    huge = msgspec.structs.replace(built.steps[0], note="x" * 1_000_000)
    path = tmp_path / "huge.jsonl"
    traces.write(path, msgspec.structs.replace(built, steps=(huge, *built.steps[1:])))
    done = kraftcheck("traces", "show", str(path), timeout=60)
    assert done.returncode == 0 and "more characters)" in done.stdout and len(done.stdout) < 20_000


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e9"])
def test_step_timeout_must_be_a_sane_number_of_seconds(tmp_path, value):
    done = kraftcheck("certify", "--adapter", "reference", "--out", str(tmp_path / "out"), f"--step-timeout={value}")
    no_traceback(done)
    assert done.returncode == 2 and "step timeout must be a number of seconds above 0 and at most 3600" in done.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_the_pytest_plugin_refuses_such_a_step_timeout(value):
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--kraftcheck-adapter=reference", f"--kraftcheck-step-timeout={value}", "--co", "-q", str(ROOT / "tests" / "rules" / "test_log.py")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 4 and "step timeout must be a number of seconds above 0" in done.stderr


def test_the_shortening_budget_bounds_the_processes_started(tmp_path):
    starts = tmp_path / "starts"
    counting = tmp_path / "counting_node.py"
    # The example node, counting the traces it starts, and wrong about its role at the walk's
    # last step only, so no shorter trace reproduces the departure.
    walk = DEFAULT_CORPUS / "corpus-walk-0000-node1.jsonl"
    length = len(traces.read(walk).steps)
    assert length >= 40  # a long walk: shortening has much to try
    counting.write_text(
        f"from adapters import example_node\n"
        "honest, handle = example_node.Node.observed, example_node.Node.handle\ncalls = []\n"
        f"def observed(node):\n    calls.append(1)\n    state = honest(node)\n    return dict(state, role='leader') if len(calls) == {length} else state\n"
        f"def counted(node, line):\n    if b'\"command\":\"start\"' in line:\n        calls.clear()\n        open({str(starts)!r}, 'a').write('x')\n    return handle(node, line)\n"
        "example_node.Node.observed, example_node.Node.handle = observed, counted\nexample_node.main()\n"
    )
    node = f"subprocess:{shlex.quote(sys.executable)} {shlex.quote(str(counting))}"
    corpus = small_corpus(tmp_path / "corpus", {"walk.jsonl": walk.read_bytes()})
    done = kraftcheck("certify", "--adapter", node, "--corpus", str(corpus), "--out", str(tmp_path / "out"), "--shorten-budget", "2")
    no_traceback(done)
    assert done.returncode == 1
    assert 4 <= len(starts.read_text()) <= 4 + 2, "a start per trace, and at most the budget's candidates (one that answers a request it dropped is not replayed)"
    shortened = traces.read(tmp_path / "out" / "divergences" / "walk.jsonl")
    assert length - 2 <= len(shortened.steps) <= length


def test_shortening_budget_must_not_be_negative(tmp_path):
    done = kraftcheck("certify", "--adapter", "reference", "--out", str(tmp_path / "out"), "--shorten-budget", "-1")
    assert done.returncode == 2 and "--shorten-budget must not be negative" in done.stderr


def test_a_closed_stdout_ends_quietly():
    done = subprocess.run(f"{shlex.quote(sys.executable)} -m conformance.cli rules | head -1", shell=True, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.startswith("rule") and done.stderr == ""


def test_default_out_names_are_distinct_for_long_or_alike_commands():
    long_a = "subprocess:java -cp " + "x" * 80 + " NodeA"
    long_b = "subprocess:java -cp " + "x" * 80 + " NodeB"
    names = {default_out(a) for a in (long_a, long_b, "subprocess:a b", "subprocess:a/b")}
    assert len(names) == 4 and all(len(n.name) <= 70 for n in names)
    assert default_out("mutant:hw-any-epoch") == Path("out/certify-mutant_hw-any-epoch")
