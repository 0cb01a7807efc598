"""The arena on real bytes (``concerto reproduce arena --real``): the
arena's suite, in a short version, on a local cluster whose servers run
every policy in turn, beside the simulator running the same suite on the
device the servers' throttle enforces, as ``concerto demo`` puts the two
worlds side by side.

The cluster is four servers throttled to the ``hdd`` preset (the
``emulated`` device core models for both worlds), server 0 also the
metadata server, eight slots each. Every application is a process of its
own whose ranks are threads with a client each, and they run the
workload's calls as the simulator's workload kinds define them (IOR's
contiguous pattern, md-test's eight phases), a barrier across the ranks
after every call. Each application also runs alone, under FIFO, on the
same cluster, which its stretch is measured against; the servers switch
policy live between runs.

The metrics are the arena's, computed the same way in both worlds where
both can: max stretch, I/O slowdown, Jain's index, the delivered
throughput (the applications' bytes over the run's span: the real servers
do not count their device's busy time, so the simulator's utilization has
no real counterpart), the p99 of the servers' latency from arrival to
reply (the real servers' histograms, at their bucket bounds), the reserved
job's rate and the limited job's worst second through a server (the real
one from the servers' counters sampled every 50 ms: the most in any span
of one second to 1.1 s between samples; the simulator's from completions
in whole seconds).

The claims are mClock's two, in each world: a reservation met while heavy
neighbours run, a limit kept. A limit is a ceiling a busy host cannot
raise; a reservation needs the reserved job to keep requests waiting, which
a busy host's clients may not do, so the real reservation counts only when
the job had requests waiting at the servers for most of its run (else the
claim says the client, not the scheduler, was measured).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import tomli_w

from concerto import _native
from concerto import cluster as local
from concerto import fs
from concerto.demo import emulated_cluster_toml
from concerto.report import markdown_table, write_json
from concerto.reproduce import Claim, judged, report_head
from concerto.reproduce import arena

SERVERS = arena.SERVERS
QUICK_HORIZON_S = 4.0  # the quick suite's IO-SETS horizon
STRIPE_UNIT = 64 * 1024
PRESET = "hdd"
DEPTH = 8
MB = 1e6
# The reservation workload's service level on this device, per server: the
# reading job is promised RESERVATION_MBPS, the second heavy job held to
# LIMIT_MBPS (chosen from the simulator's twin: alone the reads move about
# 3.4 MB/s per server, beside the heavy jobs under FIFO 1.7).
RESERVATION_MBPS = 4
LIMIT_MBPS = 12
# The reserved job counts as backlogged when it had requests waiting at
# every server for at least this share of its run (a starved client moves
# its own rate by up to the share it left empty, so at most half the
# tolerance).
BACKLOGGED = 1 - arena.TOLERANCE / 2
# The servers' counters are sampled this often for the limit's worst second,
# which is measured over spans of one second to WORST_SPAN_S[1].
SAMPLE_S = 0.05
WORST_SPAN_S = (1.0, 1.1)


def suite() -> dict[str, list[dict]]:
    """The arena's quick suite at half its length (every count halved, IO-SETS'
    generator over half the horizon): the same applications, short enough
    for a real cluster."""
    half = lambda n: max(1, n // 2)  # noqa: E731
    quick = arena.workloads(quick=True)
    table = {w: [{**a, **{k: half(a[k]) for k in ("requests", "items") if k in a}} for a in apps]
             for w, apps in quick.items()}
    return table | arena.iosets_workloads(QUICK_HORIZON_S / 2)


def policies(names: list[str] | None = None) -> dict[str, dict]:
    """The arena's policies (``names`` of them, default all), dmclock with
    this device's service level."""
    table = arena.policies()
    table["dmclock"] = {**table["dmclock"], "depth": arena.DMCLOCK_DEPTH, "apps": [
        {"app": 20, "reservation": f"{RESERVATION_MBPS}MB/s"},
        {"app": 22, "limit": f"{LIMIT_MBPS}MB/s"},
    ]}
    if names is None:
        return table
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"no policy {', '.join(unknown)} (known: {', '.join(table)})")
    return {n: table[n] for n in names}


# ---- the simulator's twin ---------------------------------------------------

def twin_scenario(name: str, apps: list[dict], policy: dict, seed: int) -> str:
    head = tomli_w.dumps({"name": name, "seed": seed, "app_ids": {"rule": "explicit"}})
    body = tomli_w.dumps({"policy": policy, "apps": apps})
    return head + emulated_cluster_toml(SERVERS, STRIPE_UNIT, DEPTH, PRESET, read_ahead=True) + body


def _twin_run(apps: list[dict], policy: dict, seed: int) -> tuple[dict, list[dict]]:
    """The twin's run of ``apps`` under ``policy`` and its request pieces."""
    with tempfile.TemporaryDirectory(prefix="concerto-arena-") as tmp:
        detail = Path(tmp) / "pieces.csv"
        run = arena._simulate(twin_scenario("arena-twin", apps, policy, seed), detail)
        return run, arena._pieces(detail)


def simulate_alone(app: dict, seed: int) -> float:
    """The twin's time for ``app`` alone under FIFO."""
    run, _ = _twin_run([{**app, "start": "0ms"}], {"kind": "fifo"}, seed)
    a = run["apps"][0]
    return a["end_s"] - a["start_s"]


def simulate(apps: list[dict], policy: dict, seed: int, alone: dict[str, float]) -> dict:
    """The twin's row for ``apps`` under ``policy``, stretches against ``alone``."""
    run, pieces = _twin_run(apps, policy, seed)
    durations = {a["name"]: a["end_s"] - a["start_s"] for a in run["apps"]}
    span = max(a["end_s"] for a in run["apps"]) - min(a["start_s"] for a in run["apps"])
    row = {**arena.stretch_metrics(durations, alone), "throughput_MBps": sum(map(_moved, apps)) / span / MB,
           "p99_ms": arena.p99_latency_ms(pieces)}
    names = [a["name"] for a in run["apps"]]
    if "reserved" in names:
        i = names.index("reserved")
        row["reserved_mbps"] = _moved(apps[i]) / durations["reserved"] / SERVERS / MB
        fetched = sum(int(p["bytes"]) for p in pieces if int(p["app"]) == i)
        row["reserved_fetched"] = fetched / _moved(apps[i])
    if "limited" in names:
        row["limited_worst_mbps"] = arena.worst_second_mbps(pieces, names.index("limited"))
    return row


# ---- the real cluster ------------------------------------------------------

def _size(app: dict) -> int:
    return _native.parse_size(str(app["request_size"])) if "request_size" in app else 0


def _ior_rank(f: fs.File, app: dict, rank: int, barrier: threading.Barrier) -> None:
    """IOR's contiguous pattern: rank r owns block r (its calls) and walks it."""
    size, calls = _size(app), app.get("requests", 1)
    data = bytes([app["app_id"] % 251 + 1]) * size
    for k in range(calls):
        offset = (rank * calls + k) * size
        if app["op"] == "write":
            f.write(offset, data)
        else:
            got = f.read(offset, size)
            if len(got) != size:
                raise RuntimeError(f"{app['name']} rank {rank}: read {len(got)} of {size} bytes at {offset}")
        barrier.wait()


def _phases_rank(f: fs.File, app: dict, rank: int, barrier: threading.Barrier) -> None:
    """Explicit phases: each computes (the phase's first number, seconds),
    then the ranks write the phase's bytes in equal contiguous shares over
    the same region, in requests of at most ``request_size``; a barrier
    after each, as the simulator's ``phases`` workload."""
    chunk, procs = _size(app), app["processes"]
    for compute, phase_bytes in app["phases"]:
        time.sleep(compute)  # the program's compute, as the workload states it
        total = round(phase_bytes)
        share, extra = divmod(total, procs)
        offset = rank * share + min(rank, extra)
        end = offset + share + (rank < extra)
        while offset < end:
            n = min(chunk, end - offset)
            f.write(offset, bytes(n))
            offset += n
        barrier.wait()


def _mdtest_rank(c: fs.Client, root: str, app: dict, rank: int, barrier: threading.Barrier) -> None:
    """md-test's eight phases in the rank's own directory, a barrier after each."""
    here, size = f"{root}/r{rank}", _size(app)
    names = [f"{here}/f{i}" for i in range(app["items"])]
    data = bytes([rank + 1]) * size
    c.mkdir(here)
    barrier.wait()
    files = [c.create(n) for n in names]
    barrier.wait()
    for f in files if size else []:
        f.write(0, data)
    barrier.wait()
    c.listdir(here)
    barrier.wait()
    for f in files:
        if size and len(f.read(0, size)) != size:
            raise RuntimeError(f"{app['name']} rank {rank}: short read of {f.path}")
    barrier.wait()
    for n in names:
        c.stat(n)
    barrier.wait()
    for f in files:
        f.close()
    barrier.wait()
    for n in names:
        c.unlink(n)
    barrier.wait()
    c.rmdir(here)
    barrier.wait()


def _application(cluster: str, app: dict, path: str, ready, go, go_at, results) -> None:
    """One application in a process of its own: its ranks are threads with a
    client each; it starts at ``go_at`` plus its ``start`` and reports its span."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops everyone
    n = app["processes"]
    try:
        clients = [fs.connect(cluster, app=app["app_id"], rank=r) for r in range(n)]
        files = ([c.open(path, write=app["op"] == "write") for c in clients] if app["workload"] != "md-test"
                 else [None] * n)
        barrier = threading.Barrier(n)
        errors: list[str] = []

        def rank(r: int) -> None:
            try:
                if app["workload"] == "ior":
                    _ior_rank(files[r], app, r, barrier)
                elif app["workload"] == "phases":
                    _phases_rank(files[r], app, r, barrier)
                else:
                    _mdtest_rank(clients[r], path, app, r, barrier)
            except Exception as e:  # noqa: BLE001 - reported to the parent with the rank
                errors.append(f"{app['name']} rank {r}: {e}")
                barrier.abort()

        ready.release()
        go.wait()
        start = go_at.value + _native.parse_duration(str(app.get("start", "0ms")))
        time.sleep(max(0.0, start - time.monotonic()))
        began = time.monotonic()
        threads = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ended = time.monotonic()
        for f in files:
            if f is not None:
                f.close()
        results.put({"name": app["name"], "start_s": began - go_at.value, "end_s": ended - go_at.value,
                     "error": "; ".join(errors) or None})
    except Exception as e:  # noqa: BLE001 - the parent reports it
        ready.release()
        results.put({"name": app["name"], "error": f"{app['name']}: {e}"})


class Sampler:
    """The servers' per-application counters every SAMPLE_S, in a thread:
    ``(asked, answered, counters)`` with, per server, each application's
    bytes served and seconds with requests waiting so far."""

    def __init__(self, client: fs.Client):
        self.client, self.samples, self._stop = client, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            asked = time.monotonic()
            counters = _app_counters(self.client.server_stats())
            self.samples.append((asked, time.monotonic(), counters))
            self._stop.wait(max(0.0, SAMPLE_S - (time.monotonic() - asked)))

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join()
        return self.samples


Sample = tuple[float, float, list[dict[int, tuple[int, float]]]]


def _app_counters(stats: list[dict]) -> list[dict[int, tuple[int, float]]]:
    """Per server: each application's bytes served and time with requests waiting, so far."""
    out = []
    for i, s in enumerate(stats):
        if "error" in s:
            raise RuntimeError(f"server {i}'s statistics: {s['error']}")
        out.append({a["app"]: (a["read_bytes"] + a["write_bytes"], a["waiting_s"]) for a in s["apps"]})
    return out


def worst_span_mbps(samples: list[Sample], app: int) -> float:
    """The most ``app`` moved through one server between two samples of
    the counters, over the span that surely holds what they differ by:
    from the first sample's request to the second's reply, of at least one
    second (and at most WORST_SPAN_S[1]), MB/s."""
    worst = 0.0
    for i, (asked0, _, c0) in enumerate(samples):
        for _, answered1, c1 in samples[i + 1:]:
            span = answered1 - asked0
            if span > WORST_SPAN_S[1]:
                break
            if span >= WORST_SPAN_S[0]:
                for s0, s1 in zip(c0, c1):
                    moved = s1.get(app, (0, 0.0))[0] - s0.get(app, (0, 0.0))[0]
                    worst = max(worst, moved / span / MB)
    return worst


def waiting_share(samples: list[Sample], app: int, begin: float, end: float) -> float:
    """The least share, over the data servers, of the samples' span within
    [begin, end] (monotonic seconds) in which ``app`` had requests waiting:
    whether it kept the servers busy with its requests while it ran (not
    after: its client's read-ahead may still fetch then)."""
    inside = [s for s in samples if s[0] >= begin and s[1] <= end]
    if len(inside) < 2:
        return 0.0
    (asked0, _, c0), (_, answered1, c1) = inside[0], inside[-1]
    waited = [s1.get(app, (0, 0.0))[1] - s0.get(app, (0, 0.0))[1] for s0, s1 in zip(c0, c1)]
    return min(waited) / (answered1 - asked0)


def p99_from_histograms(before: list[dict], after: list[dict]) -> float:
    """The p99 of every request's arrival-to-reply latency at the data
    servers between two statistics snapshots, ms (a bucket's upper bound)."""
    counts: list[int] = []
    bounds: list[float] = []
    for s0, s1 in zip(before, after):
        then = {h["op"]: h["counts"] for h in s0["latency"]}
        for h in s1["latency"]:
            bounds = h["bounds_s"]
            delta = [c - p for c, p in zip(h["counts"], then.get(h["op"], [0] * len(h["counts"])))]
            counts = [a + b for a, b in zip(counts, delta)] if counts else delta
    total = sum(counts)
    if not total:
        return 0.0
    seen = 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= 0.99 * total:
            return (bounds[i] if i < len(bounds) else float("inf")) * 1e3
    return float("inf")


def _wait_ready(ready, procs: list, apps: list[dict], timeout_s: float = 120.0) -> None:
    """Until every application process is ready; one that died first is named."""
    deadline, started = time.monotonic() + timeout_s, 0
    while started < len(procs):
        if ready.acquire(timeout=0.2):
            started += 1
            continue
        dead = [(a["name"], p.exitcode) for a, p in zip(apps, procs) if p.exitcode is not None]
        if dead:
            raise RuntimeError("arena application " + ", ".join(f"{n} exited with code {c}" for n, c in dead)
                               + " before it started")
        if time.monotonic() > deadline:
            raise RuntimeError(f"an arena application did not start within {timeout_s:.0f} s")


def run_real_apps(client: fs.Client, cluster: Path, apps: list[dict], paths: dict[str, str]) -> dict:
    """``apps`` together on the cluster: each one's span, the servers'
    statistics before and after, and the byte counters' samples."""
    ctx = mp.get_context("spawn")
    ready, go, go_at, results = ctx.Semaphore(0), ctx.Event(), ctx.Value("d", 0.0), ctx.Queue()
    procs = [ctx.Process(target=_application, args=(str(cluster), a, paths[a["name"]], ready, go, go_at, results))
             for a in apps]
    try:
        for p in procs:
            p.start()
        _wait_ready(ready, procs, apps)
        before = client.server_stats()
        sampler = Sampler(client)
        go_at.value = time.monotonic() + 0.1
        go.set()
        spans = [results.get(timeout=600) for _ in procs]
        samples = sampler.stop()
        after = client.server_stats()
        for p in procs:
            p.join(30)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    failed = [s["error"] for s in spans if s.get("error")]
    if failed:
        raise RuntimeError("; ".join(failed))
    return {"spans": {s["name"]: s for s in spans}, "before": before, "after": after, "samples": samples,
            "go_at": go_at.value}


def _fill(client: fs.Client, path: str, app: dict) -> str:
    """A reading application's file, filled once with what its ranks read."""
    f = client.create(path, unit=STRIPE_UNIT, count=SERVERS)
    size, chunk = _moved(app), 4 << 20
    for off in range(0, size, chunk):
        f.write(off, bytes([app["app_id"] % 251 + 1]) * min(chunk, size - off))
    f.close()
    return path


def _prepare(client: fs.Client, root: str, apps: list[dict], filled: dict[str, str]) -> dict[str, str]:
    """Each application's path for one run: a fresh file under ``root`` for
    IOR writers, a fresh directory for md-test, the ``filled`` file for
    readers (reads change nothing, so every run reads the same one)."""
    client.mkdir(root, parents=True)
    paths = {}
    for a in apps:
        path = paths[a["name"]] = filled.get(a["name"], f"{root}/{a['name']}")
        if a["workload"] == "md-test":
            client.mkdir(path)
        elif a["op"] == "write":
            client.create(path, unit=STRIPE_UNIT, count=SERVERS).close()
    return paths


def score_real(run: dict, apps: list[dict], alone: dict[str, float]) -> dict:
    spans = run["spans"]
    durations = {n: s["end_s"] - s["start_s"] for n, s in spans.items()}
    moved = sum(map(_moved, apps))
    span = max(s["end_s"] for s in spans.values()) - min(s["start_s"] for s in spans.values())
    row = {**arena.stretch_metrics(durations, alone), "throughput_MBps": moved / span / MB,
           "p99_ms": p99_from_histograms(run["before"], run["after"])}
    by_name = {a["name"]: a for a in apps}
    if "reserved" in by_name:
        a = by_name["reserved"]
        row["reserved_mbps"] = _moved(a) / durations["reserved"] / SERVERS / MB
        first, last = run["samples"][0][2], run["samples"][-1][2]
        fetched = sum(c1.get(a["app_id"], (0, 0.0))[0] - c0.get(a["app_id"], (0, 0.0))[0]
                      for c0, c1 in zip(first, last))
        row["reserved_fetched"] = fetched / _moved(a)
        span = spans["reserved"]
        row["reserved_backlogged"] = waiting_share(run["samples"], a["app_id"], run["go_at"] + span["start_s"],
                                                   run["go_at"] + span["end_s"])
    if "limited" in by_name:
        row["limited_worst_mbps"] = worst_span_mbps(run["samples"], by_name["limited"]["app_id"])
    return row


def _moved(app: dict) -> int:
    """The data bytes an application moves (md-test: its write and read phases)."""
    if app["workload"] == "md-test":
        return 2 * _size(app) * app["items"] * app["processes"]
    if app["workload"] == "phases":
        return sum(round(b) for _, b in app["phases"])
    return _size(app) * app["requests"] * app["processes"]


def run_workload(client: fs.Client, cluster: Path, wname: str, apps: list[dict], table: dict[str, dict],
                 seed: int, status: Callable[[str], None]) -> dict[str, dict]:
    """One workload in both worlds: each application alone (FIFO), then
    every policy with the applications together."""
    client.mkdir(f"/arena/{wname}/data", parents=True)
    filled = {a["name"]: _fill(client, f"/arena/{wname}/data/{a['name']}", a)
              for a in apps if a["workload"] == "ior" and a["op"] == "read"}
    client.set_policy(tomli_w.dumps({"kind": "fifo"}))
    alone_real, alone_sim = {}, {}
    for a in apps:
        solo = {**a, "start": "0ms"}
        paths = _prepare(client, f"/arena/{wname}/alone", [solo], filled)
        span = run_real_apps(client, cluster, [solo], paths)["spans"][a["name"]]
        alone_real[a["name"]] = span["end_s"] - span["start_s"]
        alone_sim[a["name"]] = simulate_alone(a, seed)
    rows = {}
    for pname, policy in table.items():
        status(f"arena --real: {wname}: {pname}")
        client.set_policy(tomli_w.dumps(policy))
        paths = _prepare(client, f"/arena/{wname}/{pname}", apps, filled)
        real = score_real(run_real_apps(client, cluster, apps, paths), apps, alone_real)
        sim = simulate(apps, policy, seed, alone_sim)
        rows[pname] = {"real": real, "simulated": sim}
    return rows


def run(out: Path, quick: bool, seed: int | None = None, status: Callable[[str], None] = print,
        policy_names: list[str] | None = None, workload_names: list[str] | None = None,
        **_opts: Any) -> list[Claim]:
    del quick  # the real arena is always the short suite
    out.mkdir(parents=True, exist_ok=True)
    seed = 1 if seed is None else seed
    table, workloads = policies(policy_names), suite()
    if workload_names is not None:
        unknown = [w for w in workload_names if w not in workloads]
        if unknown:
            raise ValueError(f"no workload {', '.join(unknown)} (known: {', '.join(workloads)})")
        workloads = {w: workloads[w] for w in workload_names}
    if policy_names is not None and "dmclock" in table:
        # The claims compare dmclock with weights alone: sfq-d runs too.
        table.setdefault("sfq-d", arena.policies()["sfq-d"])
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="concerto-arena-real-") as tmp:
        directory = Path(tmp) / "cluster"
        spec = local.ClusterSpec(servers=SERVERS, throttle=PRESET, stripe_unit=STRIPE_UNIT, depth=DEPTH,
                                 timeout_s=60.0)
        status(f"arena --real: a {SERVERS}-server cluster ({PRESET} throttle), {len(table)} policies")
        cluster = local.up(directory, spec)
        try:
            client = fs.connect(cluster)
            for wname, apps in workloads.items():
                results[wname] = run_workload(client, cluster, wname, apps, table, seed, status)
        finally:
            local.down(directory)
    claims = evaluate(results)
    write_outputs(out, results, table, workloads, claims, seed)
    return claims


def evaluate(results: dict[str, dict[str, dict]]) -> list[Claim]:
    mix = results.get("reservation-mix", {})
    claims: list[Claim] = []
    if "dmclock" not in mix:
        return claims
    for world in ("real", "simulated"):
        d, w = mix["dmclock"][world], mix.get("sfq-d", {}).get(world, {})
        got, worst = d["reserved_mbps"], d["limited_worst_mbps"]
        versus = f"; {w['reserved_mbps']:.2f} under sfq-d (weights only)" if w else ""
        measured = f"{got:.2f} MB/s per server under dmclock{versus}"
        met = got >= (1 - arena.TOLERANCE) * RESERVATION_MBPS
        expected = (f"the reserved job moves at least {1 - arena.TOLERANCE:.0%} of its {RESERVATION_MBPS} MB/s per "
                    "server under dmclock")
        if world == "real":
            backlog = d["reserved_backlogged"]
            measured += f"; requests waiting at every server {backlog:.0%} of its run"
            expected += (f", counted when it had requests waiting at every server at least {BACKLOGGED:.1%} of its "
                         "run (else its client, not the scheduler, was measured)")
            if not met and backlog < BACKLOGGED:
                measured += " (client-bound: not measured)"
        claims.append(Claim(f"arena-{world}-mclock-reservation",
                            f"{world.capitalize()}: mClock meets a reservation while heavy neighbours run",
                            expected, measured, **judged(met, False)))
        versus = f"; {w['limited_worst_mbps']:.1f} under sfq-d" if w else ""
        claims.append(Claim(
            f"arena-{world}-mclock-limit", f"{world.capitalize()}: mClock keeps a limit, even with the device free",
            f"the limited job moves at most {1 + arena.TOLERANCE:.0%} of its {LIMIT_MBPS} MB/s through a server in "
            "any second under dmclock",
            f"worst second {worst:.1f} MB/s under dmclock{versus}",
            **judged(worst <= (1 + arena.TOLERANCE) * LIMIT_MBPS, False)))
    return claims


COLUMNS = [
    ("max_stretch", "max stretch", "{:.2f}"),
    ("io_slowdown", "I/O slowdown", "{:.2f}"),
    ("jain", "Jain", "{:.3f}"),
    ("throughput_MBps", "MB/s", "{:.0f}"),
    ("p99_ms", "p99 ms", "{:.0f}"),
    ("reserved_mbps", "reserved MB/s/server", "{:.2f}"),
    ("reserved_fetched", "reserved fetched / read", "{:.2f}"),
    ("limited_worst_mbps", "limited worst s", "{:.1f}"),
]


def write_outputs(out: Path, results: dict, table: dict, workloads: dict, claims: list[Claim],
                  seed: int) -> None:
    about = (f"A real {SERVERS}-server cluster throttled to the `{PRESET}` preset beside the simulator on the same "
             f"device (seed {seed}); the arena's quick suite at half length. Each cell: simulated / real / "
             "real over simulated. Throughput is the applications' bytes over the run's span; p99 the servers' "
             "arrival-to-reply latency (real: the histograms' bucket bound).")
    lines = report_head("the arena on real bytes", "arena --real", True, about, claims)
    lines += arena.parameters_section(table)
    for wname, by_policy in results.items():
        cols = [c for c in COLUMNS if c[0] in next(iter(by_policy.values()))["real"]]
        rows = []
        for p, r in by_policy.items():
            cells = []
            for key, _, fmt in cols:
                s, x = r["simulated"][key], r["real"][key]
                ratio = f"{x / s:.2f}" if s else "-"
                cells.append(f"{fmt.format(s)} / {fmt.format(x)} / {ratio}")
            rows.append([p] + cells)
        lines += [f"## {wname}", "", arena.apps_line(workloads[wname]), "",
                  markdown_table(["policy"] + [h for _, h, _ in cols], rows), ""]
    (out / "report.md").write_text("\n".join(lines))
    write_json(out / "results.json", {"policies": table, "workloads": workloads, "results": results})
    write_json(out / "claims.json", [c.as_json() for c in claims])
