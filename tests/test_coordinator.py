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


# An unmodified program's long phase: 1 MiB writes every 0.25 s, then it
# closes its file and stays alive, idle. It writes the monotonic clock's
# readings of its first and last write and of the close to argv[2].
SLOW_WRITER = """
import json, sys, time
path, out, writes = sys.argv[1], sys.argv[2], int(sys.argv[3])
stamps = {}
with open(path, "wb", buffering=0) as f:
    for k in range(writes):
        f.write(bytes(1 << 20))
        stamps.setdefault("first", time.monotonic())
        if k == 0:
            open(out + ".started", "w").close()
        stamps["last"] = time.monotonic()
        time.sleep(0.25)
stamps["closed"] = time.monotonic()
open(out, "w").write(json.dumps(stamps))
time.sleep(120)
"""

# Another job's one write, and the monotonic clock once it went through.
ONE_WRITE = """
import sys, time
with open(sys.argv[1], "wb", buffering=0) as f:
    f.write(bytes(1 << 20))
    print(time.monotonic())
"""


def test_a_job_that_closes_its_files_hands_the_set_over_before_its_gap_threshold(tmp_path):
    # EXCLUSIVE-FCFS, both jobs unmodified programs through the mount. Job
    # 51's phase lasts about 4 s, so the gap rule could end it no sooner
    # than 2 s after its last write (half the phase); it then closes its
    # file and idles. Job 52, queued behind it, goes once the close is
    # seen: after 51's close, well before the gap rule's earliest end.
    cluster = local.up(tmp_path / "c", local.ClusterSpec(servers=2, policy="sfq-d-plus",
                                                         coordinator={"sets": {"kind": "exclusive-fcfs"}}))
    mnt, out, writes = tmp_path / "mnt", tmp_path / "slow.json", 16
    slow = None
    try:
        with mounted_at(cluster, mnt):
            slow = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(mnt / "slow"), str(out), str(writes)],
                                    env=os.environ | {"CONCERTO_APP_ID": "51"}, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while not Path(str(out) + ".started").exists():
                assert slow.poll() is None, slow.stderr.read()
                assert time.monotonic() < deadline, "the slow writer never wrote"
                time.sleep(0.05)
            other = subprocess.run([sys.executable, "-c", ONE_WRITE, str(mnt / "other")],
                                   env=os.environ | {"CONCERTO_APP_ID": "52"}, capture_output=True, text=True,
                                   timeout=120)
            assert other.returncode == 0, other.stderr
            went = float(other.stdout)
            stamps = json.loads(out.read_text())
            gap_rule_earliest = stamps["last"] + max(1.0, 0.5 * (stamps["last"] - stamps["first"]))
            print(f"job 51 {stamps}; job 52 went {went - stamps['closed']:.3f} s after the close, "
                  f"the gap rule at {gap_rule_earliest - stamps['closed']:.3f} s at the earliest")
            assert stamps["last"] - stamps["first"] >= 0.25 * (writes - 1) * 0.99, stamps
            assert stamps["closed"] < went < gap_rule_earliest, (stamps, went)
    finally:
        if slow is not None:
            slow.kill()
            slow.wait()
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
