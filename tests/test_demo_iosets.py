"""`concerto demo iosets`: IO-SETS on a real cluster with a coordinator
beside the fluid and request-level simulators, measured by one function."""

from __future__ import annotations

import csv
import json
import math

import pytest

from rich.console import Console

from concerto import _native, fluid
from concerto import demo_iosets


def test_real_phases_are_measured_as_the_fluid_mode_measures_its_own(tmp_path):
    # The fluid run's own phases, given back as if they had run on the
    # cluster, give the fluid run's metrics: the real side is measured by
    # the same function, not a copy of it.
    load = demo_iosets.workload(demo_iosets.QUICK, 100e6)
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(load))
    window = demo_iosets.QUICK.window
    ran = fluid.run(path, "set10", window)
    index = {a["name"]: i for i, a in enumerate(load["apps"])}
    phases = [{k: p[k] for k in ("phase", "request_s", "start_s", "end_s", "bytes", "priority")} | {"app": index[p["app"]]}
              for p in ran["phases"]]
    again = _native.fluid_phase_metrics(load, phases, *window)
    for k in demo_iosets.METRICS:
        assert again[k] == ran["metrics"][k], k
    bad = [phases[0] | {"app": 99}]
    try:
        _native.fluid_phase_metrics(load, bad, *window)
    except _native.ConfigError as e:
        assert "phases[0].app: 99 is not one of the workload's 6 applications" in str(e)
    else:
        raise AssertionError("an application out of range was accepted")


def test_demo_iosets_runs_every_policy_in_both_worlds(tmp_path):
    plan = demo_iosets.Plan(groups=((1, 1.0), (2, 3.0)), io_share=0.15, duration_s=8.0, window=(3.5, 7.5))
    doc = demo_iosets.run(tmp_path, True, Console(file=open(tmp_path / "log.txt", "w")), plan=plan)
    assert json.loads((tmp_path / "iosets.json").read_text()) == json.loads(json.dumps(doc))
    assert sorted(doc["policies"]) == ["exclusive-fcfs", "fair-share", "set10"]
    for policy, worlds in doc["policies"].items():
        assert sorted(worlds) == ["fluid", "real", "request"], policy
        for world, m in worlds.items():
            assert sorted(m) == ["io_slowdown", "max_stretch", "utilization"], (policy, world)
            assert 0 < m["utilization"] <= 1 and m["max_stretch"] >= 1 and m["io_slowdown"] >= 1, (policy, world, m)
        assert (tmp_path / f"iosets-{policy}.png").stat().st_size > 0
    # Under EXCLUSIVE-FCFS the real phases took turns: none overlaps another.
    rows = list(csv.DictReader(open(tmp_path / "phases-exclusive-fcfs.csv")))
    spans = sorted((float(r["start_s"]), float(r["end_s"])) for r in rows)
    assert len({r["app"] for r in rows}) == 3 and len(spans) >= 6
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans
    # Under SET-10 every phase ran at a power of ten (10^-set); the fast
    # application's (w_iter 1 s, set 0) at 1 once its period was measured,
    # its first at the unknown set's 1e-4.
    rows = list(csv.DictReader(open(tmp_path / "phases-set10.csv")))
    assert all(math.log10(float(r["priority"])).is_integer() for r in rows), rows
    fast = [float(r["priority"]) for r in rows if r["app"] == "0"]
    assert fast[0] == 1e-4 and set(fast[1:]) == {1.0}, fast


@pytest.mark.parametrize("measured_MBps", [97.6, 60.0, 30.0])
def test_the_request_level_simulator_runs_the_platform_whose_alone_is_the_measured_b(measured_MBps):
    # issue 58: "alone" means one thing in every column. A busy host's B
    # (60, 30 MB/s) and a quiet one's (97.6, about the throttle's device)
    # each give a device rate at which the simulated application alone
    # writes at B.
    rate, alone = demo_iosets.matched_device(measured_MBps * 1e6, 64 << 20)
    assert alone == pytest.approx(measured_MBps * 1e6, rel=0.01), (rate, alone)
    nominal = demo_iosets.simulated_alone(demo_iosets.cluster_table(), 64 << 20)
    assert (rate < 100e6) == (measured_MBps * 1e6 < nominal)
