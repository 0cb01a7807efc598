"""The fluid mode from the command line: generate a workload, run it under
the IO-SETS rules, read the phases back; bad input is named."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from conftest import concerto

GENERATOR = """
horizon_s = 2000
io_stress = 0.8
bandwidth = "1GB/s"
[[groups]]
count = 4
mu_s = 10
sigma_s = 1
[[groups]]
count = 4
mu_s = 100
sigma_s = 10
"""


def _workload(tmp_path: Path) -> Path:
    spec = tmp_path / "gen.toml"
    spec.write_text(GENERATOR)
    r = concerto("sim", "workload", "generate", str(spec), "--seed", "5")
    assert r.returncode == 0, r.stderr
    w = tmp_path / "w.json"
    w.write_text(r.stdout)
    return w


def test_a_generated_workload_runs_under_every_preset_and_lists_its_phases(tmp_path: Path) -> None:
    w = _workload(tmp_path)
    doc = json.loads(w.read_text())
    assert len(doc["apps"]) == 8 and doc["bandwidth"] == 1e9
    stretch = {}
    for rule in ("fair-share", "exclusive-fcfs", "set10", "clairvoyant", "set-fair-share", "share-priority"):
        out = tmp_path / rule
        r = concerto("sim", "run", "--workload", str(w), "--rule", rule, "--window", "100:1500",
                     "--phases", str(tmp_path / f"{rule}.csv"), "--out", str(out))
        assert r.returncode == 0, r.stderr
        stretch[rule] = json.loads((out / "fluid.json").read_text())["metrics"]["max_stretch"]
        rows = list(csv.DictReader((tmp_path / f"{rule}.csv").open()))
        assert len(rows) == sum(len(a["phases"]) for a in doc["apps"])
        assert all(float(x["request_s"]) <= float(x["start_s"]) <= float(x["end_s"]) for x in rows)
    # One set for everyone: the two w_iter classes wait for each other.
    assert stretch["exclusive-fcfs"] > stretch["fair-share"]
    # SET-10 puts each class in its own set: never two of one class at a time.
    rows = list(csv.DictReader((tmp_path / "set10.csv").open()))
    assert {r["set"] for r in rows} == {"1", "2"}


def test_a_user_rule_file_is_read(tmp_path: Path) -> None:
    w = _workload(tmp_path)
    rule = tmp_path / "rule.toml"
    rule.write_text('kind = "thresholds"\nbounds = ["30s"]\npriorities = [1.0, 0.5]\n')
    r = concerto("sim", "run", "--workload", str(w), "--rule", str(rule), "--window", "100:1500")
    assert r.returncode == 0, r.stderr


def test_bad_fluid_input_is_named(tmp_path: Path) -> None:
    w = _workload(tmp_path)
    spec = tmp_path / "bad.toml"
    spec.write_text(GENERATOR.replace("io_stress = 0.8", "io_stress = -1"))
    cases = [
        (["sim", "workload", "generate", str(spec)], "bad.toml: io_stress: -1 must be a positive number"),
        (["sim", "run", "--workload", str(w), "--rule", "lottery"],
         "rule: line 1, column 8: kind: unknown variant `lottery`, expected one of `fair-share`"),
        (["sim", "run", "--workload", str(w), "--window", "9:1"], "--window '9:1'"),
        (["sim", "run", "--workload", str(tmp_path / "none.json")], "none.json"),
        (["sim", "run"], "give a SCENARIO file"),
    ]
    bad_rule = tmp_path / "rule.toml"
    bad_rule.write_text('kind = "log"\nbase = 1\n')
    cases.append((["sim", "run", "--workload", str(w), "--rule", str(bad_rule)], "rule.base: 1 must be a number above 1"))
    broken = tmp_path / "broken.json"
    doc = json.loads(w.read_text())
    doc["apps"][1]["phases"][0][1] = -5
    broken.write_text(json.dumps(doc))
    cases.append((["sim", "run", "--workload", str(broken)], "apps[1].phases[0][1]: -5 must be a finite number >= 0"))
    for args, expected in cases:
        r = concerto(*args)
        said = " ".join(r.stderr.split())
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert expected in said, (args, said)
        assert "Traceback" not in r.stderr


def test_a_workload_runs_in_both_modes_on_a_cluster(tmp_path: Path) -> None:
    """The same workload and rule in the fluid mode and at request level
    (the arbiter gating each application's operations on eight simulated
    servers of 1 GB/s in all): where priorities play no part (FAIR-SHARE,
    EXCLUSIVE-FCFS), the two modes agree within 3%."""
    w = _workload(tmp_path)
    cluster = Path(__file__).resolve().parents[1] / "experiments" / "iosets" / "cluster.toml"
    for rule in ("fair-share", "exclusive-fcfs"):
        out = tmp_path / rule
        r = concerto("sim", "run", "--workload", str(w), "--rule", rule, "--window", "100:1500",
                     "--cluster", str(cluster), "--out", str(out))
        assert r.returncode == 0, r.stderr
        assert "request-level" in r.stdout.replace("…", "") or "request-l" in r.stdout
        fluid = json.loads((out / "fluid.json").read_text())["metrics"]
        run = json.loads((out / "results.json").read_text())["runs"][0]
        job = run["job"]
        assert job["phases"] == sum(len(a["phases"]) for a in json.loads(w.read_text())["apps"])
        for metric in ("utilization", "max_stretch"):
            assert abs(job["metrics"][metric] / fluid[metric] - 1) < 0.03, (rule, metric, job["metrics"], fluid)
        # Every application wrote every phase's bytes.
        doc = json.loads(w.read_text())
        assert [a["bytes"] for a in run["apps"]] == [sum(round(p[1]) for p in a["phases"]) for a in doc["apps"]]
    bad = tmp_path / "cluster.toml"
    bad.write_text("[policy]\nkind = 'fifo'\n")
    r = concerto("sim", "run", "--workload", str(w), "--cluster", str(bad))
    assert r.returncode == 2 and "needs a [cluster] table" in r.stderr, r.stderr
