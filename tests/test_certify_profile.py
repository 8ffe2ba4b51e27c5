"""`certify --profile`: the shipped corpus of a model profile; the profile a corpus was generated
under, in every report; `--reproducible` reports, the same bytes for any --jobs."""

import json
import shutil
import xml.etree.ElementTree as ElementTree

import pytest

from conformance import cli
from conformance.certify.replay import trace_files
from conformance.corpus.generate import DEFAULT_CORPUS, shipped_corpora
from conformance.corpus.manifest import generated_profiles
from spec import trace as traces

ROOT = DEFAULT_CORPUS.parent
KAFKA_39 = DEFAULT_CORPUS / "kafka-3.9"
KAFKA_43 = DEFAULT_CORPUS / "kafka-4.3"
SHIPPED_LIST = (
    "the profiles with a shipped corpus are: kip595 (traces); kafka-3.7 (traces/kafka-3.7); kafka-3.8 (traces/kafka-3.8); "
    "kafka-3.9 (traces/kafka-3.9); kafka-4.0 (traces/kafka-4.0); kafka-4.3 (traces/kafka-4.3)"
)


@pytest.fixture(autouse=True)
def at_the_root(monkeypatch):
    """As the README runs it: from the repository's root, where shipped corpora are named relative to it."""
    monkeypatch.chdir(ROOT)


def certify(capsys, *args: str) -> tuple[int, dict | None, str]:
    code = cli.main(["certify", "--adapter", "reference", *args, "--json"])
    printed = capsys.readouterr()
    return code, (json.loads(printed.out) if printed.out else None), printed.err


def test_the_shipped_corpora_are_kip595s_and_kafkas():
    kafka = ("kafka-3.7", "kafka-3.8", "kafka-3.9", "kafka-4.0", "kafka-4.3")
    assert shipped_corpora() == {"kip595": DEFAULT_CORPUS} | {profile: DEFAULT_CORPUS / profile for profile in kafka}
    assert (KAFKA_39, KAFKA_43) == (DEFAULT_CORPUS / "kafka-3.9", DEFAULT_CORPUS / "kafka-4.3")
    assert generated_profiles(DEFAULT_CORPUS) == ("kip595",)
    for profile in kafka:
        assert generated_profiles(DEFAULT_CORPUS / profile) == (profile,)


def test_profile_replays_that_profiles_shipped_corpus_and_every_report_names_it(tmp_path, capsys):
    out = tmp_path / "out"
    code, summary, _ = certify(capsys, "--profile", "kafka-3.9", "--out", str(out))
    expected = [f"traces/kafka-3.9/{path.name}" for path in trace_files(KAFKA_39)]
    assert code in (0, 1) and (summary["corpus"], summary["profile"], summary["traces"]) == ("traces/kafka-3.9", "kafka-3.9", len(expected))
    stored = json.loads((out / "report.json").read_text())
    assert (stored["corpus"], stored["profile"]) == ("traces/kafka-3.9", "kafka-3.9")
    assert [result["trace"] for result in stored["results"]] == expected
    assert "; corpus `traces/kafka-3.9`, generated under the model profile kafka-3.9. Rules: " in (out / "report.md").read_text()
    suite = ElementTree.parse(out / "junit.xml").getroot()
    assert {p.get("name"): p.get("value") for p in suite.findall("properties/property")} == {"corpus": "traces/kafka-3.9", "profile": "kafka-3.9"}
    assert "<td><code>traces/kafka-3.9</code>, generated under the model profile kafka-3.9</td>" in (out / "report.html").read_text()


def test_profile_kip595_is_the_default_corpus(tmp_path, capsys):
    """The same report bytes with --profile kip595 and with no corpus option (ISR replicas only, to be quick)."""
    published = []
    for option in (["--profile", "kip595"], []):
        out = tmp_path / f"out{len(published)}"
        code, summary, _ = certify(capsys, *option, "--system", "isr", "--reproducible", "--out", str(out))
        assert code == 0 and (summary["corpus"], summary["profile"]) == ("traces", "kip595")
        published.append({name: (out / name).read_bytes() for name in ("report.md", "report.json", "junit.xml", "report.html")})
    assert published[0] == published[1]
    assert b"; corpus `traces`, generated under the model profile kip595. Rules: " in published[0]["report.md"]


def test_profile_and_corpus_together_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["certify", "--adapter", "reference", "--profile", "kafka-3.9", "--corpus", "traces", "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    assert "kraftcheck certify: error: argument --corpus: not allowed with argument --profile" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("profile", "reason"),
    [
        ("nope", "unknown profile 'nope'"),
        (
            "kip595-literal-diverging",
            "profile 'kip595-literal-diverging' has no shipped corpus (make one with `kraftcheck traces generate --profile "
            "kip595-literal-diverging --out DIR`, then pass --corpus DIR)",
        ),
    ],
)
def test_a_profile_without_a_shipped_corpus_is_refused_naming_those_with_one(tmp_path, capsys, profile, reason):
    code, summary, err = certify(capsys, "--profile", profile, "--out", str(tmp_path / "out"))
    assert (code, summary) == (2, None)
    assert err == f"kraftcheck: invalid configuration: --profile: {reason}; {SHIPPED_LIST}\n"
    assert not (tmp_path / "out").exists()


def test_the_profile_comes_from_the_manifest_whatever_the_corpus_option(tmp_path, capsys):
    one = trace_files(KAFKA_39)[0]
    code, summary, _ = certify(capsys, "--corpus", str(one), "--out", str(tmp_path / "one"))
    assert (code, summary["traces"], summary["profile"]) == (0, 1, "kafka-3.9")  # a file its directory's manifest lists
    code, summary, _ = certify(capsys, "--corpus", str(KAFKA_39), "--out", str(tmp_path / "absolute"))
    assert (summary["corpus"], summary["profile"]) == (str(KAFKA_39), "kafka-3.9")  # --corpus is written as given
    isr = tmp_path / "isr-only"  # no manifest: the traces' headers say, and ISR replicas have no profile
    isr.mkdir()
    for path in [p for p in trace_files(DEFAULT_CORPUS) if p.name.startswith("corpus-isr-cell-")][:2]:
        shutil.copy(path, isr)
    code, summary, _ = certify(capsys, "--corpus", str(isr), "--out", str(tmp_path / "isr"))
    assert (code, summary["traces"], summary["profile"]) == (0, 2, "")
    assert "generated under no model profile (ISR replicas only)" in (tmp_path / "isr" / "report.md").read_text()


def test_reproducible_reports_are_the_same_bytes_for_any_jobs_and_carry_no_wall_time(tmp_path, capsys):
    corpus = tmp_path / "corpus"  # no manifest: the profile comes from the headers
    corpus.mkdir()
    for path in trace_files(KAFKA_39)[::40]:
        shutil.copy(path, corpus)
    published = []
    for jobs in ("1", "2", "1"):
        out = tmp_path / "out"  # the same place each time: the reports name their own files
        code = cli.main(["certify", "--adapter", "mutant:hw-any-epoch", "--corpus", str(corpus), "--jobs", jobs, "--reproducible", "--out", str(out), "--json"])
        summary = json.loads(capsys.readouterr().out)
        assert code in (0, 1) and summary["profile"] == "kafka-3.9" and summary["seconds"] > 0  # the summary still says how long it took
        published.append(sorted((p.relative_to(out).as_posix(), p.read_bytes()) for p in out.rglob("*") if p.is_file()))
    assert published[0] == published[1] == published[2]
    files = dict(published[0])
    stored = json.loads(files["report.json"])
    assert stored["seconds"] is None and {result["seconds"] for result in stored["results"]} == {None}
    assert b" time=" not in files["junit.xml"] and b"<td>seconds</td>" not in files["report.html"]
    assert f"{len(list(corpus.iterdir()))} in all (steps matched: ".encode() in files["report.md"] and b" s; corpus " not in files["report.md"]
    assert all(traces.read_header(p).cluster.profile == "kafka-3.9" for p in corpus.iterdir())


def test_every_kafka_version_profile_is_a_tested_version_with_a_shipped_corpus():
    """scripts/certify-kafka certifies each version under its profile (VERSION_PROFILES), the
    tested ones under kip595 too."""
    from adapters.kafka_build import TESTED_VERSIONS, VERSION_PROFILES

    assert set(TESTED_VERSIONS) <= set(VERSION_PROFILES)
    assert all(profile in shipped_corpora() and profile != "kip595" for profile in VERSION_PROFILES.values())
