"""The benchmarks run and print what they measure: the model-checking benchmark writes its table and a
plot of its throughput beside it; the judging benchmark finds the same with and without its shortcut."""

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from matplotlib import image

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(out: Path, *options: str) -> str:
    command = [sys.executable, str(ROOT / "benchmarks" / "check_tlc_kraft.py"), "--config", "smoke", "--out", str(out), *options]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_benchmark_writes_its_table_and_a_throughput_plot(tmp_path):
    printed = run_benchmark(tmp_path)
    table = (tmp_path / "check-smoke.txt").read_text()
    assert table.strip() == printed.strip()
    assert "identical counts across runs: yes" in table and table.count("873") >= 1
    pixels = image.imread(tmp_path / "check-smoke-throughput.png")
    assert pixels.shape[0] >= 400 and pixels.shape[1] >= 700
    assert (pixels[:, :, :3] < 0.9).any(axis=2).mean() > 0.01  # axes, lines and labels, not a blank image


def test_the_plot_can_be_svg(tmp_path):
    run_benchmark(tmp_path, "--plot-format", "svg")
    root = ElementTree.parse(tmp_path / "check-smoke-throughput.svg").getroot()
    legend = "".join(root.itertext())
    assert root.tag.endswith("svg") and "in-process, 1 worker" in legend


def test_the_replay_benchmark_replays_the_whole_corpus_in_process_and_a_sample_through_subprocess_and_kafka():
    command = [sys.executable, str(ROOT / "benchmarks" / "replay_throughput.py"), "--sample", "100", "--repeat", "1", "--kafka-sample", "100"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    corpus = sorted((ROOT / "traces").glob("*.jsonl"))
    lines = result.stdout.splitlines()
    rows = {line.split("  ")[0]: line.split() for line in lines[2:]}
    assert int(rows["reference, in-process"][-5]) == len(corpus)
    assert int(rows["example node via subprocess:, a process per trace"][-5]) == len(corpus[::100])
    assert int(rows["example node via subprocess:, one process, reset between traces"][-5]) == len(corpus[::100])
    if shutil.which("java") is None:
        assert "kafka:3.9.1 skipped: java" in result.stdout
        return
    kafka = [line.split() for line in lines[2:] if line.startswith("kafka:3.9.1 on traces/kafka-3.9/, one JVM per job") and "job:" not in line and "jobs:" not in line]
    sample = len(sorted((ROOT / "traces" / "kafka-3.9").glob("*.jsonl"))[::100])
    assert [(row[-6], row[-5]) for row in kafka] == [("1", str(sample)), ("2", str(sample))]  # jobs, traces
    assert all(int(row[-4]) > 0 and float(row[-2].replace(",", "")) > 0 for row in kafka)  # steps, steps/s


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH: Spark cannot start (scripts/bootstrap installs it)")
def test_the_spark_benchmark_compares_the_engines_on_pinned_cores(tmp_path):
    command = [sys.executable, str(ROOT / "benchmarks" / "spark_scaling.py"), "--config", "smoke", "--runs", "in-process,sharded,local[1]", "--out", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "smoke:"
    rows = {line.split("  ")[0]: line.split() for line in result.stdout.splitlines()[3:6]}
    assert rows["in-process"][1:5] == ["1", "1,041", "2,246", "21"]  # cores, distinct, generated, depth
    assert rows["sharded"][1:5] == ["2", "1,041", "2,246", "21"]
    assert rows["Spark local[1]"][2:6] == ["1", "1,041", "2,246", "21"]
    assert "identical counts across runs: yes" in result.stdout
    assert "Spark per core / in-process: " in result.stdout
    assert (tmp_path / "spark-smoke.txt").read_text() == result.stdout


def test_the_in_flight_growth_benchmark_names_the_bound_from_which_counts_stop_growing():
    command = [sys.executable, str(ROOT / "benchmarks" / "in_flight_growth.py"), "--config", "smoke", "--bounds", "3", "4", "6", "--runs", "1", "2:disk"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()[2:8]]
    assert [tuple(row[:5]) for row in rows] == [
        ("3", "1", "memory", "yes", "1,041"),
        ("3", "2", "disk", "yes", "1,041"),
        ("4", "1", "memory", "yes", "1,251"),
        ("4", "2", "disk", "yes", "1,251"),
        ("6", "1", "memory", "yes", "1,251"),
        ("6", "2", "disk", "yes", "1,251"),
    ]
    assert all(row[-1] == "-" for row in rows[::2]) and all(row[-1].replace(",", "").isdigit() for row in rows[1::2])  # disk MiB
    assert result.stdout.splitlines()[-1] == "counts equal at N and N + 2 (the bound no longer binds) from: 4"


def test_the_judging_benchmark_finds_the_same_with_and_without_judging_only_where_a_reading_may_differ():
    command = [sys.executable, str(ROOT / "benchmarks" / "judging.py"), "--step", "24"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()[2:]]
    assert [row[0] for row in rows] == ["deviation", "mutants"]
    assert all(row[-1] == "yes" and float(row[-4]) > 0 and float(row[-3]) > 0 for row in rows), result.stdout


@pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None, reason="no JDK or Maven on PATH: a real Kafka quorum cannot run")
def test_the_cluster_benchmark_runs_a_real_quorum_and_times_its_checks(tmp_path):
    """Seed 5 on 4.3.1 for 5 s: its first fault, a partition, starts at 2.9 s; the run's history
    then checked again and again, faster than once a second."""
    command = [sys.executable, str(ROOT / "benchmarks" / "cluster_faults.py"), "--time", "5", "--seed", "5", "--out", str(tmp_path / "run")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in result.stdout.splitlines()[2:]}
    assert rows["faults injected"] == "1 (1 partition)" and rows["violations"] == "0"
    assert int(rows["writes acknowledged"].split()[0].replace(",", "")) > 0
    assert float(rows["histories checked a second"].replace(",", "")) > 1


def test_the_log_validation_benchmark_prints_speed_and_the_edits_caught():
    command = [sys.executable, str(ROOT / "benchmarks" / "validate_logs.py"), "--edits", "6", "--seed", "1", "--walks", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in result.stdout.split("\n\n")[0].splitlines()[2:]}
    assert rows["unexplained"] == "none" and rows["observations"] == "5,285"
    assert float(rows["observations a second, one core"].replace(",", "")) > 0
    counts = [int(rows[name]) for name in ("caught at the line edited", "caught at another line", "not caught")]
    assert sum(counts) == 6 and counts[0] >= 1
    mutants = [line for line in result.stdout.split("\n\n")[-1].splitlines()[2:]]
    assert len(mutants) >= 20 and not any("VALIDATED" in line for line in mutants)
    assert sum("no state" in line for line in mutants) >= 8  # the mutants that depart within two walks each, caught


def test_the_liveness_benchmark_sets_the_liveness_check_beside_the_safety_search(tmp_path):
    command = [sys.executable, str(ROOT / "benchmarks" / "liveness.py"), "--config", "smoke", "--profile", "kip595", "--out", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    table = (tmp_path / "liveness.txt").read_text()
    assert table.strip() == result.stdout.strip()
    (row,) = [line for line in table.splitlines() if line.startswith("smoke") and " kip595 " in line]
    assert "1,041" in row and "2,075" in row and " yes " in row  # smoke's pinned counts; the unreduced search and the liveness graph agree
    assert "LIVE-2 holds;" in row
    mutants = {line.split()[1]: line for line in table.splitlines() if "faulty-" in line}
    assert sorted(mutants) == ["faulty-candidate-never-backs-off", "faulty-leader-never-resigns", "faulty-prospective-never-gives-up"]
    assert "LIVE-1 violated" in mutants["faulty-candidate-never-backs-off"] and "LIVE-5 violated" in mutants["faulty-leader-never-resigns"]
    assert (tmp_path / "lasso-live-zombie-faulty-leader-never-resigns-LIVE-5.svg").is_file()
    assert not list(tmp_path.glob("lasso-*-kip595-*"))  # the correct model has none
    assert (tmp_path / "liveness.md").read_text().startswith("| config")
