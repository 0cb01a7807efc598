"""Workloads from the real world: explicit request traces run by the
simulator, and Darshan logs (the ones PyPI's darshan ships for its own
tests) as traces (DXT) or phases (counters), checked against pydarshan's
own totals."""

from __future__ import annotations

import json
from pathlib import Path

import darshan
import pytest

from concerto import darshan_import
from concerto.sim import ScenarioSource, simulate
from conftest import concerto

LOGS = Path(darshan.__file__).parent / "tests" / "input"
DXT_LOG = LOGS / "sample-dxt-simple.darshan"
COUNTER_LOGS = [LOGS / "sample.darshan", LOGS / "sample-goodost.darshan"]

# One server, one request at a time, each exactly 10 ms, and a network too
# fast to matter: a trace's timing can be worked out by hand.
FIXED = """
name = "traced"
[cluster]
servers = 1
stripe_unit = "1MiB"
[cluster.device]
kind = "fixed"
service_time = "10ms"
[cluster.network]
latency = "0us"
jitter = "0us"
"""


def scenario(trace: Path, extra: str = "") -> ScenarioSource:
    text = FIXED + f'[[apps]]\nworkload = "trace"\ntrace = "{trace}"\n{extra}'
    return ScenarioSource(text=text, label="traced")


def write_trace(path: Path, ranks: list[list[dict]], name: str = "t") -> Path:
    path.write_text(json.dumps({"format": "concerto-trace", "version": 1,
                                "apps": [{"name": name, "files": ["f"], "ranks": ranks}]}))
    return path


def test_a_trace_replays_each_rank_in_order_with_its_times(tmp_path):
    w = {"op": "write", "file": 0, "length": 4096}
    trace = write_trace(tmp_path / "t.json", [
        [dict(w, offset=0), dict(w, offset=4096, compute=0.05), dict(w, offset=8192, at=1.0)],
        [dict(w, offset=1 << 20, op="read")],
    ])
    run = simulate(scenario(trace), reps=1)["runs"][0]
    app = run["apps"][0]
    assert (app["name"], app["processes"], app["operations"]) == ("t", 2, 4)
    assert app["bytes"] == 4 * 4096
    # Rank 0: 10 ms, 50 ms of compute, 10 ms, then it waits for t = 1 s; rank
    # 1's read shares the device at the start. The app ends with rank 0's
    # third request, issued at 1 s and served in 10 ms.
    assert app["end_s"] == pytest.approx(1.010, abs=1e-3)


def test_bad_traces_are_named_with_the_record(tmp_path):
    cases = [
        ({"format": "other", "version": 1, "apps": []}, 'format: "other" is not "concerto-trace"'),
        ({"format": "concerto-trace", "version": 2, "apps": []}, "version: 2 is not a version"),
        ({"format": "concerto-trace", "version": 1, "apps": [{"name": "a", "ranks": [[
            {"op": "write", "file": 0, "offset": 0, "length": 0}]]}]}, "apps[0].ranks[0][0].length: must be > 0"),
        ({"format": "concerto-trace", "version": 1, "apps": [{"name": "a", "ranks": [[
            {"op": "fly", "file": 0, "offset": 0, "length": 1}]]}]}, "apps[0].ranks[0][0].op: unknown variant"),
        ({"format": "concerto-trace", "version": 1, "apps": [{"name": "a", "ranks": [[
            {"op": "read", "file": 0, "offset": 0, "length": 1, "at": -1}]]}]}, "apps[0].ranks[0][0].at: -1"),
    ]
    for doc, expected in cases:
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(doc))
        r = concerto("sim", "run", str(_scenario_file(tmp_path, path)))
        assert r.returncode == 2 and expected in " ".join(r.stderr.split()), (doc, r.stderr)
    r = concerto("sim", "run", str(_scenario_file(tmp_path, tmp_path / "missing.json")))
    assert r.returncode == 2 and "missing.json: cannot read" in " ".join(r.stderr.split()), r.stderr
    two = write_trace(tmp_path / "two.json", [[{"op": "read", "file": 0, "offset": 0, "length": 1}]], "a")
    doc = json.loads(two.read_text())
    doc["apps"].append(dict(doc["apps"][0], name="b"))
    two.write_text(json.dumps(doc))
    r = concerto("sim", "run", str(_scenario_file(tmp_path, two)))
    assert r.returncode == 2 and "holds 2 applications: say which (a, b)" in " ".join(r.stderr.split()), r.stderr


def _scenario_file(tmp_path: Path, trace: Path) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(FIXED + f'[[apps]]\nworkload = "trace"\ntrace = "{trace}"\n')
    return p


def _trace_totals(trace: dict) -> dict[int, dict[str, int]]:
    out = {}
    for rank, reqs in enumerate(trace["apps"][0]["ranks"]):
        t = {"bytes_read": 0, "bytes_written": 0, "reads": 0, "writes": 0}
        for q in reqs:
            kind = "read" if q["op"] == "read" else "written"
            t[f"bytes_{kind}"] += q["length"]
            t["reads" if q["op"] == "read" else "writes"] += 1
        out[rank] = t
    return out


def test_a_dxt_log_becomes_a_trace_with_pydarshans_totals_and_runs(tmp_path):
    trace = darshan_import.to_trace(DXT_LOG)
    assert trace["apps"][0]["files"], "file names come from the log"
    ours = _trace_totals(trace)
    theirs = darshan_import.totals(DXT_LOG)
    assert -1 not in theirs, "this log has no shared-file records to spread"
    for rank, t in theirs.items():
        assert ours[rank] == t, (rank, ours[rank], t)
    for rank, t in ours.items():
        if any(t.values()):
            assert theirs[rank] == t
    # The CLI prints the same trace, and the simulator runs it.
    r = concerto("sim", "workload", "from-darshan", str(DXT_LOG))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["apps"] == trace["apps"]
    path = tmp_path / "dxt.json"
    path.write_text(r.stdout)
    app = simulate(scenario(path), reps=1)["runs"][0]["apps"][0]
    moved = sum(t["bytes_read"] + t["bytes_written"] for t in ours.values())
    assert app["bytes"] == moved and app["processes"] == trace["source"]["nprocs"]


@pytest.mark.parametrize("log", COUNTER_LOGS, ids=lambda p: p.name)
def test_counters_become_phases_that_move_what_the_log_says(log, tmp_path):
    assert not darshan_import.has_dxt(log)
    w = darshan_import.to_phases(log, 1e9)
    phases = w["apps"][0]["phases"]
    theirs = darshan_import.totals(log)
    assert sum(p[1] for p in phases) == sum(t["bytes_read"] + t["bytes_written"] for t in theirs.values())
    assert all(p[0] >= 0 for p in phases)
    r = concerto("sim", "workload", "from-darshan", str(log), "--bandwidth", "1GB/s")
    assert r.returncode == 0, r.stderr
    path = tmp_path / "w.json"
    path.write_text(r.stdout)
    ran = concerto("sim", "run", "--workload", str(path))
    assert ran.returncode == 0, ran.stderr


def test_bad_darshan_input_is_named(tmp_path):
    junk = tmp_path / "junk.darshan"
    junk.write_bytes(b"not a log at all")
    # Damaged copies of a real log: cut short, and four bytes flipped (which
    # crashes Darshan's C reader: it is read in a child process first).
    log = DXT_LOG.read_bytes()
    (tmp_path / "cut.darshan").write_bytes(log[:3000])
    (tmp_path / "flipped.darshan").write_bytes(log[:1200] + b"\xff" * 4 + log[1204:])
    cases = [
        ([str(junk)], "junk.darshan: not a Darshan log pydarshan can read"),
        ([str(tmp_path / "cut.darshan")], "cut.darshan: a damaged Darshan log: read only in part (the reader says:"),
        ([str(tmp_path / "flipped.darshan")], "flipped.darshan: a damaged Darshan log: the reader crashed on it"),
        ([str(tmp_path / "none.darshan")], "none.darshan: no such file"),
        ([str(COUNTER_LOGS[0])], "no DXT records, so a workload of phases: give the platform's --bandwidth"),
        ([str(COUNTER_LOGS[0]), "--bandwidth", "fast"], "fast"),
        ([str(DXT_LOG), "--bandwidth", "1GB/s"], "--bandwidth goes with --phases"),
    ]
    for args, expected in cases:
        r = concerto("sim", "workload", "from-darshan", *args)
        assert r.returncode == 2 and expected in " ".join(r.stderr.split()), (args, r.stderr)
        assert "Traceback" not in r.stderr
