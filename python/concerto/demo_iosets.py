"""``concerto demo iosets``: IO-SETS in both worlds, side by side.

A time-compressed version of io-sets.txt Section VI-A on a local cluster of
four HDD-class servers (the throttle's ``hdd`` preset, SFQ(D)+ on every
data server) and a coordinator: periodic applications from two profile
groups — real processes, computing as sleeps and writing their I/O phases
through the client library, each phase inside ``client.io_phase()`` — run
under FAIR-SHARE, EXCLUSIVE-FCFS and SET-10 (a fresh cluster for each).
The platform's bandwidth B is measured first, by one application writing
alone as every phase writes. The same workload, exported as the explicit
JSON workload (``workload.json``), then runs in the fluid and the
request-level simulators, and all three are measured by one function
(concerto-sim's ``window_metrics``) over the same window. B measured once is
a lower bound: a phase that ran faster than it (the host was busier while B
was measured) raises it to that phase's rate, so that no application's I/O
counts as faster than alone.

Writes ``DIR/iosets.json`` — ``{"policies": {POLICY: {"real": M, "fluid": M,
"request": M}}, ...}`` with each M ``{"utilization", "max_stretch",
"io_slowdown"}`` — the workload, every real phase (``phases-POLICY.csv``)
and a timeline per policy (``iosets-POLICY.png``): every application's I/O
phases, real above simulated.
"""

from __future__ import annotations

import contextlib
import csv
import math
import multiprocessing as mp
import random
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from concerto import _native
from concerto import cluster as local
from concerto import fluid, fs
from concerto.demo import emulated_cluster_toml
from concerto.report import pyplot, write_json
from concerto.sim import ScenarioSource, simulate

POLICIES = ["fair-share", "exclusive-fcfs", "set10"]
METRICS = ["utilization", "max_stretch", "io_slowdown"]
SERVERS = 4
STRIPE_UNIT = 256 * 1024
CALL = 1 << 20  # bytes per write call
WRITERS = 4  # threads writing one application's phase
DEPTH = 8  # requests in flight per server, in both worlds
SEED = 7


@dataclass(frozen=True)
class Plan:
    """The compressed experiment: groups of (applications, w_iter seconds),
    the I/O share of an iteration when alone, how long it runs, the window."""
    groups: tuple[tuple[int, float], ...]
    io_share: float
    duration_s: float
    window: tuple[float, float]


# Full: 8 applications, periods 1.5 s and 12 s (SET-10 sets 0 and 1), I/O
# 10% of an iteration when alone (the platform loaded at 0.8), a minute
# each, measured once SET-10 has estimated every period (two phase starts
# of the slow group).
FULL = Plan(groups=((4, 1.5), (4, 12.0)), io_share=0.1, duration_s=60.0, window=(26.0, 58.0))
QUICK = Plan(groups=((3, 1.0), (3, 6.0)), io_share=0.12, duration_s=30.0, window=(14.0, 29.0))


def workload(plan: Plan, bandwidth: float, seed: int = SEED) -> dict:
    """The explicit JSON workload: per application, its release and its
    [compute seconds, I/O bytes] phases, enough to run past the window."""
    rng = random.Random(seed)
    apps = []
    for g, (count, w_iter) in enumerate(plan.groups):
        io_s = plan.io_share * w_iter
        iterations = math.ceil(plan.duration_s / w_iter) + 2
        for k in range(count):
            apps.append({
                "name": f"g{g}-{len(apps)}", "w_iter_s": w_iter, "group": g, "group_w_iter_s": w_iter,
                "release_s": round(rng.uniform(0, w_iter), 3),
                "phases": [[round(w_iter - io_s, 6), float(round(io_s * bandwidth))]] * iterations,
            })
    return {"bandwidth": bandwidth, "apps": apps,
            "source": {"demo": "iosets", "groups": [list(g) for g in plan.groups], "io_share": plan.io_share}}


def _write_phase(f: fs.File, nbytes: int) -> None:
    """One I/O phase: ``nbytes`` in ``CALL``-byte writes by ``WRITERS`` threads,
    each its own contiguous share of the file, as the request-level
    simulator's ``phases`` workload with ``WRITERS`` processes writes. No
    fsync: the simulators have none, and on the throttled disks it costs
    a seek on every server (13 ms a phase, measured)."""
    share, extra = divmod(nbytes, WRITERS)
    data = bytes(CALL)

    def writer(t: int) -> None:
        offset = t * share + min(t, extra)
        end = offset + share + (t < extra)
        while offset < end:
            n = min(CALL, end - offset)
            f.write(offset, data if n == CALL else data[:n])
            offset += n

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _app(cluster: str, index: int, app: dict, t0: float, stop_at: float, out: mp.Queue) -> None:
    """One application: compute (a sleep), then an I/O phase at the coordinator's grant, repeated
    until it has asked for a phase after ``stop_at`` (the window's end)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops everyone
    client = fs.connect(cluster, app=100 + index, rank=0)
    f = client.create(f"/iosets/{app['name']}", exclusive=False)
    records = []
    try:
        time.sleep(max(0.0, t0 + app["release_s"] - time.monotonic()))
        for k, (compute_s, nbytes) in enumerate(app["phases"]):
            time.sleep(compute_s)
            request = time.monotonic() - t0
            with client.io_phase() as phase:
                start = time.monotonic() - t0
                _write_phase(f, int(nbytes))
                end = time.monotonic() - t0
            records.append({"app": index, "phase": k, "request_s": request, "start_s": start, "end_s": end,
                            "bytes": nbytes, "priority": phase.priority})
            # Past the window: this phase's request ends the compute phase
            # before it, which the window counts; nothing after it counts.
            if request > stop_at:
                break
    finally:
        f.close()
        out.put(records)


def measure_bandwidth(cluster: Path, nbytes: int) -> float:
    """B: what one application writing alone as the phases write gets, bytes per second."""
    client = fs.connect(cluster, app=99, rank=0)
    f = client.create("/iosets/bandwidth", exclusive=False)
    _write_phase(f, nbytes // 4)  # the servers' files and connections warm
    start = time.monotonic()
    _write_phase(f, nbytes)
    elapsed = time.monotonic() - start
    f.close()
    return nbytes / elapsed


def run_real(cluster: Path, load: dict, plan: Plan) -> list[dict]:
    """Every application as its own process; returns their phases."""
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    t0 = time.monotonic() + 2.0  # every process started and connected by then
    procs = [ctx.Process(target=_app, args=(str(cluster), i, a, t0, plan.window[1], out))
             for i, a in enumerate(load["apps"])]
    for p in procs:
        p.start()
    phases = []
    try:
        for _ in procs:
            phases.extend(out.get(timeout=plan.duration_s * 10 + 60))
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    return sorted(phases, key=lambda r: (r["app"], r["phase"]))


def cluster_table(bandwidth_Bps: float | None = None) -> str:
    """The real cluster for the request-level simulator: the throttle's
    device model, at ``bandwidth_Bps`` when given (the platform matched to
    the B the real side measured, ``matched_device``)."""
    return (emulated_cluster_toml(SERVERS, STRIPE_UNIT, DEPTH, bandwidth_Bps=bandwidth_Bps)
            + '[policy]\nkind = "sfq-d-plus"\n')


def simulated_alone(table: str, nbytes: int) -> float:
    """B in the request-level simulator on the cluster ``table``: one
    application writing ``nbytes`` alone as every phase writes (``WRITERS``
    processes, ``CALL``-byte requests), bytes per second."""
    scenario = table + f"""[[apps]]
name = "alone"
workload = "phases"
op = "write"
processes = {WRITERS}
request_size = "{CALL // 1024}KiB"
phases = [[0.0, {nbytes}.0]]
"""
    (run,) = simulate(ScenarioSource(text=scenario, label="iosets-alone"), reps=1)["runs"]
    app = run["apps"][0]
    return app["bytes"] / (app["end_s"] - app["start_s"])


#: The most the matched device's streaming rate may differ from the throttle's, either way.
MAX_DEVICE_SCALE = 20.0


def matched_device(measured_Bps: float, nbytes: int) -> tuple[float, float]:
    """The throttle's device at the streaming rate with which one
    application alone gets ``measured_Bps`` (the B the real side measured)
    in the request-level simulator, so that "alone" means one thing in
    every column; returns the rate and the B the simulator then gives.
    A phase's time there is a fixed part (latencies, seeks) and its bytes
    over the rate, T(s) = a + b / s at s times the throttle's rate: the
    last two runs give a and b, and the next rate is where they put B,
    until the simulator's B is within 0.5% (at most five runs more). A B
    beyond what a rate within ``MAX_DEVICE_SCALE`` reaches takes the bound
    (the simulator's B then says how far it stays)."""
    nominal = _native.emulation_preset("hdd")["bandwidth_Bps"]
    target = nbytes / measured_Bps

    def phase_time(scale: float) -> float:
        return nbytes / simulated_alone(cluster_table(nominal * scale), nbytes)

    runs = [(1.0, phase_time(1.0)), (2.0, phase_time(2.0))]
    for _ in range(5):
        (s1, t1), (s2, t2) = runs[-2:]
        if abs(t2 - target) <= 0.005 * target:
            break
        per_rate = (t1 - t2) / (1 / s1 - 1 / s2) if s1 != s2 else 0.0
        fixed = t2 - per_rate / s2
        scale = per_rate / (target - fixed) if per_rate > 0 and target > fixed else MAX_DEVICE_SCALE
        scale = min(MAX_DEVICE_SCALE, max(1 / MAX_DEVICE_SCALE, scale))
        if scale == s2:
            break
        runs.append((scale, phase_time(scale)))
    scale, t = min(runs, key=lambda r: abs(r[1] - target))
    return nominal * scale, nbytes / t



def simulated(workload_file: Path, cluster_file: Path, policy: str, window: tuple[float, float]) -> dict:
    """The same workload in the fluid and the request-level simulators."""
    fluid_run = fluid.run(workload_file, policy, window)
    scenario = fluid.request_level_scenario(workload_file, cluster_file, policy, window, WRITERS,
                                            f"{CALL // 1024}KiB")
    request = simulate(ScenarioSource(text=scenario, label=f"iosets-{policy}"), reps=1)
    return {"fluid": fluid_run, "request": request["runs"][0]["job"]["metrics"]}


def _metrics(m: dict) -> dict:
    return {k: m[k] for k in METRICS}


def table(results: dict) -> Table:
    t = Table(title="IO-SETS, real against simulated (window metrics)")
    t.add_column("policy")
    t.add_column("metric")
    for col in ("real", "request-level", "fluid", "real / request"):
        t.add_column(col, justify="right")
    for policy, r in results.items():
        for k in METRICS:
            real, req, flu = r["real"][k], r["request"][k], r["fluid"][k]
            t.add_row(policy, k, f"{real:.3f}", f"{req:.3f}", f"{flu:.3f}", f"{real / req:.3f}")
    return t


def plot(policy: str, load: dict, real: list[dict], fluid_phases: list[dict], path: Path,
         window: tuple[float, float]) -> None:
    """Every application's I/O phases: real above, the fluid simulator below
    (a thin bar from request to grant, a thick one from grant to end)."""
    plt = pyplot()
    names = [a["name"] for a in load["apps"]]
    fig, axes = plt.subplots(2, 1, figsize=(10, 1.2 + 0.45 * len(names) * 2), sharex=True)
    by_name = {n: i for i, n in enumerate(names)}
    for ax, title, phases in ((axes[0], "real cluster", real), (axes[1], "fluid simulator", fluid_phases)):
        for p in phases:
            row = p["app"] if isinstance(p["app"], int) else by_name[p["app"]]
            ax.plot([p["request_s"], p["start_s"]], [row, row], color="0.7", linewidth=1)
            ax.plot([p["start_s"], p["end_s"]], [row, row], color=f"C{row % 10}", linewidth=6, solid_capstyle="butt")
        ax.axvspan(*window, color="0.95", zorder=0)
        ax.set_yticks(range(len(names)), names)
        ax.set_title(f"{policy}: {title}")
    axes[1].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _write_csv(phases: list[dict], path: Path) -> None:
    fields = ["app", "phase", "request_s", "start_s", "end_s", "bytes", "priority"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(phases)


def run(out: Path, quick: bool, console: Console, cluster_dir: Path | None = None, plan: Plan | None = None) -> dict:
    """The demo; ``plan`` replaces the full or quick one (tests run a smaller one)."""
    plan = plan or (QUICK if quick else FULL)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    load = None
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for policy in POLICIES:
            with contextlib.ExitStack() as stack:
                base = cluster_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="concerto-iosets-")))
                directory = base / policy
                spec = local.ClusterSpec(servers=SERVERS, policy="sfq-d-plus", throttle="hdd", stripe_unit=STRIPE_UNIT,
                                         timeout_s=30.0, depth=DEPTH, coordinator={"sets": {"kind": policy}})
                cluster = local.up(directory, spec)
                stack.callback(local.down, directory)
                fs.connect(cluster, app=99).mkdir("/iosets")
                if load is None:
                    probe = 64 << 20 if plan.duration_s < 30 else 128 << 20
                    b = measure_bandwidth(cluster, probe)
                    device_Bps, simulated_b = matched_device(b, probe)
                    console.print(f"B, one application writing alone: {b / 1e6:.1f} MB/s; the request-level "
                                  f"simulator's device streams {device_Bps / 1e6:.1f} MB/s (the throttle's "
                                  f"{_native.emulation_preset('hdd')['bandwidth_Bps'] / 1e6:.0f}), where one "
                                  f"application alone gets {simulated_b / 1e6:.1f}")
                    load = workload(plan, b)
                    write_json(out / "workload.json", load)
                console.print(f"  {policy}: {len(load['apps'])} applications on the real cluster ...", end="")
                real = run_real(cluster, load, plan)
            console.print(" simulators ...", end="")
            (out / "cluster.toml").write_text(cluster_table(device_Bps))
            sims = simulated(out / "workload.json", out / "cluster.toml", policy, plan.window)
            real_m = _native.fluid_phase_metrics(load, real, *plan.window)
            if real_m["alone_bandwidth"] > load["bandwidth"]:
                # A phase ran faster than B was measured (the host busier then than now): B is at least that.
                console.print(f" (B taken as {real_m['alone_bandwidth'] / 1e6:.1f} MB/s, a phase's rate) ...", end="")
            results[policy] = {"real": _metrics(real_m), "fluid": _metrics(sims["fluid"]["metrics"]),
                               "request": _metrics(sims["request"])}
            _write_csv(real, out / f"phases-{policy}.csv")
            plot(policy, load, real, sims["fluid"]["phases"], out / f"iosets-{policy}.png", plan.window)
            console.print(" done")
    finally:
        signal.signal(signal.SIGTERM, previous)
    doc = {"policies": results, "bandwidth_Bps": load["bandwidth"] if load else None,
           "simulated_device_Bps": device_Bps if load else None,
           "simulated_alone_Bps": simulated_b if load else None,
           "window_s": list(plan.window), "quick": quick,
           "plan": {"groups": [list(g) for g in plan.groups], "io_share": plan.io_share,
                    "duration_s": plan.duration_s}}
    write_json(out / "iosets.json", doc)
    console.print(table(results))
    console.print(f"wrote {out / 'iosets.json'} and the timelines iosets-POLICY.png")
    return doc
