"""Benchmark: `kraftcheck validate` on real Kafka logs, its speed and its power.

Validates a run's node logs (default: the Kafka 4.3.1 run under faults in tests/data/validate/)
a few times and prints observations, wall time and observations per second on one core. Then
edits one line at a time, --edits times (seeded): a number in a message, a transition, an append
or a log end moved by one, or a vote's grant flipped, in a field kraftcheck reads; and counts the edits the validation
catches at the very line edited (by the model search or by the message links), elsewhere, or
not at all, listing the ones not caught at their line. Last, the seeded bugs (adapters/mutants.py): for each, random walks of
the cluster model with one node stepping as the mutant, written as Kafka logs
(tests/kafka_logs.py), until the mutant takes a step the model does not allow; the line it
departs at and the first line the validation does not explain.

    .venv/bin/python benchmarks/validate_logs.py [--run DIR] [--profile P] [--edits N] [--seed N] [--walks N]
"""

import argparse
import gzip
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from adapters.mutants import MUTANTS
from conformance.validate import observations
from conformance.validate.validation import node_logs, open_log, run_profile, validate_logs
from model.config import ClusterConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from kafka_logs import walk  # noqa: E402 (a test helper: model runs written as Kafka logs)
DEFAULT_RUN = ROOT / "tests" / "data" / "validate" / "kafka-4.3.1-faults"
READ_KINDS = ("Completed transition to", "Received inbound message", "Sent response", "Sent outbound request", "Leader appended records", "Follower end offset updated")
NUMBERS = re.compile(r"\b(epoch|leaderEpoch|candidateEpoch|replicaEpoch|currentLeaderEpoch|leaderId|fetchOffset|lastFetchedEpoch|lastOffsetEpoch|lastOffset|highWatermark|offset|errorCode)=(-?\d+)")
FLAGS = re.compile(r"\b(voteGranted|preVote)=(true|false)")
# Fields kraftcheck does not read, left alone: a snapshot id (no snapshots in the model), a Fetch's
# broker epoch (KIP-903's ReplicaState), the high watermark a state's toString shows, and the
# code of an error a node's own network client made up (each such code is handled alike).
UNREAD = re.compile(r"(SnapshotId|ReplicaState|LogOffsetMetadata)\([^()]*$")
WIRE_CODES = ("7", "8", "13")


def edit(line: str, rng: random.Random) -> tuple[str, str] | None:
    """The line with one field changed, and what was changed; None if it has none to change."""
    places = [("number", m) for m in NUMBERS.finditer(line) if not UNREAD.search(line[: m.start()]) and not (m[1] == "errorCode" and m[2] in WIRE_CODES)]
    places += [("flag", m) for m in FLAGS.finditer(line)]
    if not places:
        return None
    kind, found = rng.choice(places)
    if kind == "number":
        new = str(int(found[2]) + rng.choice((1, -1)) if int(found[2]) > 0 else int(found[2]) + 1)
    else:
        new = "false" if found[2] == "true" else "true"
    return line[: found.start(2)] + new + line[found.end(2) :], f"{found[1]} {found[2]} -> {new}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=DEFAULT_RUN)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--walks", type=int, default=12, help="seeds tried per mutant, each with the mutant at each node (default 12)")
    args = parser.parse_args()
    profile = args.profile or run_profile([args.run]) or "kafka-4.3"
    timings = []
    for _ in range(3):
        observations.clear_caches()  # each run reads every line afresh
        started = time.perf_counter()
        validation = validate_logs([args.run], profile)
        timings.append(time.perf_counter() - started)
    best = min(timings)
    rows = [
        ("profile", profile),
        ("observations", f"{validation.observations:,}"),
        ("explained", f"{validation.explained:,} (+{validation.outside:,} outside the model)"),
        ("unexplained", "none" if validation.valid else f"node {validation.first.node}, line {validation.first.line}" if validation.first else f"{len(validation.unlinked)} unlinked"),
        ("messages linked", f"{validation.linked:,}"),
        ("seconds (best of 3)", f"{best:.3f}"),
        ("observations a second, one core", f"{validation.observations / best:,.0f}"),
    ]
    logs = node_logs([args.run])
    lines = {node: open_log(path).read().splitlines(keepends=True) for node, path in logs.items()}
    candidates = [(node, index) for node, text in lines.items() for index, line in enumerate(text) if any(kind in line for kind in READ_KINDS)]
    rng = random.Random(args.seed)
    at_line = elsewhere = missed = 0
    not_at_line = []
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.edits):
            while True:
                node, index = rng.choice(candidates)
                changed = edit(lines[node][index], rng)
                if changed:
                    break
            copy = Path(scratch) / "run"
            shutil.rmtree(copy, ignore_errors=True)
            for other, text in lines.items():
                (copy / f"node-{other}").mkdir(parents=True)
                body = text[:index] + [changed[0]] + text[index + 1 :] if other == node else text
                with gzip.open(copy / f"node-{other}" / "server.log.gz", "wt", compresslevel=1) as out:
                    out.write("".join(body))
            result = validate_logs([copy], profile)
            named = {(u.node, u.line) for u in result.unlinked} | ({(result.first.node, result.first.line)} if result.first else set())
            if (node, index + 1) in named:
                at_line += 1
            else:
                elsewhere += not result.valid
                missed += result.valid
                not_at_line.append((node, index + 1, changed[1], "elsewhere" if not result.valid else "validated", lines[node][index][120:220].strip()))
    rows += [
        ("line edits", args.edits),
        ("caught at the line edited", at_line),
        ("caught at another line", elsewhere),
        ("not caught", missed),
    ]
    print(tabulate(rows, tablefmt="github", headers=("", "")))
    if not_at_line:
        print()
        print(tabulate(not_at_line, headers=("node", "line", "edit", "verdict", "the line"), tablefmt="github"))
    print()
    print(tabulate(mutant_walks(args.walks), headers=("mutant", "walk (seed, node)", "departs at line", "first unexplained"), tablefmt="github"))
    return 0


def mutant_walks(walks: int) -> list[tuple]:
    """Per KRaft mutant, the first walk it departs in, where, and what the validation says."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, mutant in MUTANTS.items():
            if mutant.system != "kraft":
                continue
            row = (name, "-", "-", "never departs in these walks")
            for seed, node in ((seed, node) for seed in range(walks) for node in (1, 2, 3)):
                run = Path(scratch) / f"{name}-{seed}-{node}"
                walked = walk(ClusterConfig(voters=(1, 2, 3)), run, seed, 200, odd=(node, mutant.step))
                if walked.departed_at is None:
                    continue
                validation = validate_logs([run], "kip595")
                first = validation.first
                said = "VALIDATED" if validation.valid else f"node {first.node}, line {first.line}: {first.why}" if first else "received but never sent"
                row = (name, f"{seed}, {node}", walked.line, said)
                break
            rows.append(row)
    return rows


if __name__ == "__main__":
    sys.exit(main())
