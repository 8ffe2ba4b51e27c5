"""Fuzzing scenario files (Hypothesis, fixed budget: tests/robustness/fuzzing.py):
`conformance.scenario.parser.read` returns a Scenario or ClusterScenario or raises a
ScenarioError whose message starts with the file's path."""

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from conformance.scenario import parser as scenario_parser

from fuzzing import CORPUS, INPUTS, budget, byte_mutations, read_or_refusal


SEED_SCENARIOS = [path.read_bytes() for path in sorted((CORPUS / "scenarios").glob("*.scenario"))[::8]]
HOSTILE_TOKENS = {  # a token of the scenario language -> hostile ones of its kind
    rb"-?\b[0-9]+\b": [b"18446744073709551616", b"18446744073709551615", b"-9223372036854775809", b"9" * 5000, b"-1"],
    rb'"[^"\n]*"': [b'"../../x"', b'"a/b"', b'""', b'".hidden"', b'"\\u0000"', b'"\\ud800"', b'"' + b"n" * 300 + b'"'],
    rb"e-?[0-9]+\[[0-9]+\.\.[0-9]+\]": [b"e1[0..100000000]", b"e1[0..18446744073709551616]", b"e99999999999999999999[0..1]", b"e1[5..2]"],
    rb"\[": [b"[" * 3000],
}


@st.composite
def scenario_mutations(draw) -> bytes:
    """A library scenario with a few tokens replaced by hostile ones of the same kind (numbers
    beyond 64 bits, huge epoch ranges, names that are paths, lone surrogates, deep nesting), so
    that most still parse up to them; or its bytes mutated."""
    seed = draw(st.sampled_from(SEED_SCENARIOS))
    if draw(st.booleans()):
        return draw(byte_mutations(seed))
    for _ in range(draw(st.integers(1, 3))):
        pattern = draw(st.sampled_from(sorted(HOSTILE_TOKENS)))
        found = list(re.finditer(pattern, seed))
        if found:
            token = found[draw(st.integers(0, len(found) - 1))]
            seed = seed[: token.start()] + draw(st.sampled_from(HOSTILE_TOKENS[pattern])) + seed[token.end() :]
    return seed


def check_scenario_contract(path: Path, data: bytes) -> None:
    """read: a Scenario or ClusterScenario, or a ScenarioError starting with the path; nothing else."""
    INPUTS["scenario"] += 1
    path.write_bytes(data)
    read_or_refusal(scenario_parser.read, path, scenario_parser.ScenarioError, (scenario_parser.Scenario, scenario_parser.ClusterScenario))


@budget(300)
@given(data=scenario_mutations())
def test_scenario_mutations(workdir, data):
    check_scenario_contract(workdir / "mutated.scenario", data)


@budget(100)
@given(data=st.binary(max_size=512))
def test_scenario_random_bytes(workdir, data):
    check_scenario_contract(workdir / "random.scenario", data)


def test_scenario_seeds_are_valid(workdir):
    """The mutations start from scenarios that parse (else they would only test the first check)."""
    for number, seed in enumerate(SEED_SCENARIOS):
        (workdir / f"seed{number}.scenario").write_bytes(seed)
        assert isinstance(scenario_parser.read(workdir / f"seed{number}.scenario"), (scenario_parser.Scenario, scenario_parser.ClusterScenario))
