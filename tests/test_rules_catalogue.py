"""The rule catalogue loads, holds the fixed IDs, and rejects broken catalogues clearly."""

from pathlib import Path

import pytest

from spec.rules import CatalogueError, Rule, load_rules, rule

RULE_COUNT = 121
SEEDS_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "seeds"

VALID_RULE = """\
[[rule]]
id = "VOTE-REQ-2"
title = "Vote: reject a stale candidate epoch"
text = "A Vote with a smaller CandidateEpoch is refused with FENCED_LEADER_EPOCH."
source = "kip-595-raft-metadata-quorum.ko.txt"
section = "Vote 요청 처리 (Handling Vote requests), step 2"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path) -> str:
    with pytest.raises(CatalogueError) as info:
        load_rules(path)
    assert info.value.path == path
    assert str(path) in str(info.value)
    return str(info.value)


def test_shipped_catalogue_loads_with_every_fixed_id() -> None:
    rules = load_rules()
    assert len(rules) == RULE_COUNT
    assert len({r.id for r in rules}) == RULE_COUNT
    assert rules[0].id == "COMMON-1"
    assert rules[-1].id == "ISR-SAFE-3"
    assert load_rules() is rules


@pytest.mark.parametrize(
    ("rule_id", "group"),
    [
        ("COMMON-3", "COMMON"),
        ("VOTER-ONLY-1", "VOTER-ONLY"),
        ("VOTE-REQ-3A", "VOTE-REQ"),
        ("VOTE-REQ-4B", "VOTE-REQ"),
        ("VOTE-LOG-1", "VOTE-LOG"),
        ("FETCH-REQ-2B", "FETCH-REQ"),
        ("FETCH-RESP-2", "FETCH-RESP"),
        ("HW-4", "HW"),
        ("DESCRIBE-RESP-3", "DESCRIBE-RESP"),
        ("K101-2", "K101"),
        ("SAFE-9", "SAFE"),
    ],
)
def test_specific_ids_and_groups(rule_id: str, group: str) -> None:
    assert rule(rule_id).group == group


def test_every_rule_is_filled_in() -> None:
    for item in load_rules():
        assert item.title.strip() and len(item.title) <= 60, item.id
        assert item.text.strip(), item.id
        assert item.section.strip(), item.id


def test_every_source_is_a_seed_file() -> None:
    if not SEEDS_DIR.is_dir():
        pytest.skip(f"{SEEDS_DIR} is not present")
    for item in load_rules():
        assert (SEEDS_DIR / item.source).is_file(), item.id


def test_rule_lookup() -> None:
    found = rule("VOTE-REQ-2")
    assert isinstance(found, Rule)
    assert found.id == "VOTE-REQ-2"
    assert "FENCED_LEADER_EPOCH" in found.text


def test_unknown_rule_suggests_close_ids() -> None:
    with pytest.raises(KeyError) as info:
        rule("VOTE-REQ-22")
    assert "VOTE-REQ-22" in str(info.value)
    assert "VOTE-REQ-2" in str(info.value).replace("VOTE-REQ-22", "")


def test_a_valid_catalogue_in_another_file_loads(tmp_path: Path) -> None:
    (item,) = load_rules(write(tmp_path, VALID_RULE))
    assert item.id == "VOTE-REQ-2"
    assert item.note == ""


def test_duplicate_id_is_reported(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, VALID_RULE + "\n" + VALID_RULE))
    assert "[[rule]] #2 (VOTE-REQ-2)" in message
    assert "duplicate id" in message
    assert "#1" in message


def test_bad_id_format_is_reported(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, VALID_RULE.replace('"VOTE-REQ-2"', '"vote-req-2"')))
    assert "vote-req-2" in message
    assert "id does not match" in message


def test_unknown_key_is_reported(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, VALID_RULE + 'severity = "high"\n'))
    assert "[[rule]] #1 (VOTE-REQ-2)" in message
    assert "unknown field `severity`" in message


def test_missing_key_is_reported(tmp_path: Path) -> None:
    text = "\n".join(line for line in VALID_RULE.splitlines() if not line.startswith("section"))
    message = load_error(write(tmp_path, text))
    assert "[[rule]] #1 (VOTE-REQ-2)" in message
    assert "missing required field `section`" in message


def test_unknown_source_is_reported(tmp_path: Path) -> None:
    text = VALID_RULE.replace("kip-595-raft-metadata-quorum.ko.txt", "kip-500.txt")
    message = load_error(write(tmp_path, text))
    assert "unknown source 'kip-500.txt'" in message
    assert "raft-paper-summary.ko.txt" in message


def test_toml_syntax_error_gives_the_line(tmp_path: Path) -> None:
    text = VALID_RULE.replace('title = "Vote: reject a stale candidate epoch"', "title = Vote")
    message = load_error(write(tmp_path, text))
    assert "TOML syntax error" in message
    assert "line 3" in message
