"""The coordinator (IO-SETS) on a cluster started the way users start one
(`concerto cluster up --coordinator`), with real processes: their I/O
phases never overlap inside one set, `cluster stats` shows who holds the
set, and a coordinator that is killed leaves programs running ungated with
a warning."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from concerto import cluster as local
from concerto import fs
from conftest import concerto, mounted_at

# One job's program: three I/O phases, each writing 1 MiB and holding the
# phase a little, with the monotonic clock's readings at entry and exit.
JOB = """
import json, sys, time
from concerto import fs
client = fs.connect(sys.argv[1])
f = client.create(f"/job{client.app}", exclusive=False)
spans = []
for k in range(3):
    with client.io_phase() as phase:
        start = time.monotonic()
        f.write(k << 20, bytes(1 << 20))
        f.fsync()
        time.sleep(0.1)
        spans.append((start, time.monotonic(), phase.priority))
f.close()
print(json.dumps(spans))
"""


def _run_jobs(cluster: Path, apps: list[int]) -> dict[int, list]:
    procs = {app: subprocess.Popen([sys.executable, "-c", JOB, str(cluster)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True,
                                   env=os.environ | {"CONCERTO_APP_ID": str(app)}) for app in apps}
    out = {}
    for app, p in procs.items():
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        out[app] = (json.loads(stdout), stderr)
    return out


def test_phases_of_jobs_in_one_set_never_overlap(tmp_path):
    cluster = local.up(tmp_path / "c", local.ClusterSpec(servers=2, policy="sfq-d-plus",
                                                         coordinator={"sets": {"kind": "exclusive-fcfs"}}))
    try:
        runs = _run_jobs(cluster, [11, 12, 13])
        spans = sorted(s for spans, _ in runs.values() for s in spans)
        assert len(spans) == 9
        assert all(p == 1.0 for _, _, p in spans), spans
        for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
            assert end <= start, f"two phases at once: {spans}"
        stats = fs.connect(cluster).server_stats()
        c = [s["coordinator"] for s in stats if s.get("coordinator")]
        assert len(c) == 1 and c[0]["grants_total"] == 9 and c[0]["leases_expired"] == 0, c
        shown = concerto("cluster", "stats", "--cluster", str(cluster))
        assert shown.returncode == 0, shown.stderr
        assert "coordinator (exclusive-fcfs; 9 grants" in shown.stdout.replace("\n", " ")
    finally:
        local.down(tmp_path / "c")


def test_a_killed_coordinator_leaves_jobs_running_ungated_with_a_warning(tmp_path):
    cluster = local.up(tmp_path / "c", local.ClusterSpec(servers=1, coordinator={"sets": {"kind": "set10"}}))
    try:
        info = local.read_cluster(cluster)
        coordinator = next(s for s in info["servers"] if s["roles"] == ["coordinator"])
        os.kill(coordinator["pid"], signal.SIGKILL)
        (spans, stderr), = _run_jobs(cluster, [21]).values()
        assert [p for _, _, p in spans] == [None, None, None]
        assert stderr.count("I/O phases run ungated") == 1, stderr
        assert fs.connect(cluster).stat("/job21").size == 3 << 20
    finally:
        local.down(tmp_path / "c")


def test_cluster_up_with_a_coordinator_and_its_mistakes(tmp_path):
    r = concerto("cluster", "up", "--dir", str(tmp_path / "c"), "--servers", "1", "--lease", "5s")
    assert r.returncode != 0 and "--lease" in r.stderr and "only with --coordinator" in r.stderr
    r = concerto("cluster", "up", "--dir", str(tmp_path / "c"), "--servers", "1", "--coordinator", "set10",
                 "--lease", "1ms")
    assert r.returncode != 0
    assert "coordinator.lease: 1ms: must be from 300ms" in r.stderr, r.stderr
    r = concerto("cluster", "up", "--dir", str(tmp_path / "c"), "--servers", "1", "--coordinator", "set11")
    assert r.returncode == 2 and "set11" in r.stderr


# A periodic program that knows nothing of Concerto: every PERIOD seconds
# it writes 8 MiB to its file through the mount, then computes (sleeps),
# quiet for at least GAP seconds after each write however long the write
# took (on a busy host a write can eat the period, and two writes with no
# quiet spell between them are one phase); it prints when each write began.
PERIODIC = """
import json, os, sys, time
path, period, gap, rounds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
start, began, ended = time.monotonic(), [], None
for k in range(rounds):
    wake = start + k * period if ended is None else max(start + k * period, ended + gap)
    time.sleep(max(0.0, wake - time.monotonic()))
    began.append(time.monotonic())
    with open(path, "wb") as f:
        for _ in range(8):
            f.write(bytes(1 << 20))
    ended = time.monotonic()
print(json.dumps(began))
"""


def test_the_mount_finds_an_unmodified_programs_phases_and_its_period(tmp_path):
    # SET-10 on the coordinator; the mount detects the program's phases in
    # its write stream, and the coordinator's measured w_iter is within 10%
    # of the program's period as the program itself saw it (2.5 s on a quiet
    # host; longer when a busy host stretches its writes past the period).
    cluster = local.up(tmp_path / "c", local.ClusterSpec(servers=2, policy="sfq-d-plus",
                                                         coordinator={"sets": {"kind": "set10"}}))
    mnt = tmp_path / "mnt"
    try:
        with mounted_at(cluster, mnt):
            # The gap is past the detector's threshold (half the phase so
            # far, at least 1 s) for writes of up to 4 s.
            period, gap, rounds = 2.5, 2.0, 6
            run = subprocess.run([sys.executable, "-c", PERIODIC, str(mnt / "periodic"), str(period), str(gap),
                                  str(rounds)],
                                 env=os.environ | {"CONCERTO_APP_ID": "41"}, capture_output=True, text=True,
                                 timeout=120)
            assert run.returncode == 0, run.stderr
            began = json.loads(run.stdout)
            true_period = (began[-1] - began[0]) / (rounds - 1)

            def job() -> dict | None:
                for s in fs.connect(cluster).server_stats():
                    for m in (s.get("coordinator") or {}).get("measured", []):
                        if m["app"] == 41:
                            return m
                return None

            deadline = time.monotonic() + 30
            while (m := job()) is None or m["phases"] < rounds:
                assert time.monotonic() < deadline, f"the coordinator saw {m}; the program began at {began}"
                time.sleep(0.1)
            print(f"measured {m} for a period of {true_period} s")
            assert m["phases"] == rounds, m
            assert abs(m["w_iter_s"] / true_period - 1) <= 0.10, (m, true_period)
    finally:
        local.down(tmp_path / "c")


def test_cluster_sets_switches_the_rule_live_and_names_mistakes(tmp_path):
    cluster = local.up(tmp_path / "c", local.ClusterSpec(servers=1, coordinator={"sets": {"kind": "exclusive-fcfs"}}))
    try:
        r = concerto("cluster", "sets", "fair-share", "--cluster", str(cluster))
        assert r.returncode == 0, r.stderr
        policy = [s["coordinator"]["policy"] for s in fs.connect(cluster).server_stats() if s.get("coordinator")]
        assert policy == ["fair-share"]
        r = concerto("cluster", "sets", "--cluster", str(cluster))
        assert r.returncode == 2 and "give a RULE or --file FILE" in r.stderr
        bad = tmp_path / "rule.toml"
        bad.write_text('kind = "thresholds"\nbounds = ["1s", "10s"]\npriorities = [1.0]\n')
        r = concerto("cluster", "sets", "--file", str(bad), "--cluster", str(cluster))
        assert r.returncode != 0
        assert f"{bad}: " in r.stderr and "sets.priorities: 2 bounds make 3 sets, but 1 priorities" in r.stderr, r.stderr
    finally:
        local.down(tmp_path / "c")
