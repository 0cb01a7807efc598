"""``concerto demo``: one workload, three policies, two worlds.

A local cluster of four HDD-class servers (the throttle's ``hdd`` preset)
serves three applications of four processes each. Every process writes
256 KiB per call to its application's shared file (IOR's strided pattern),
and the processes of an application wait for each other after every call,
so a call completes only when every server has served its part. The
servers switch policy live between runs: FIFO, coordinated, SFQ(D)+.

The same scenario then runs in the simulator, whose ``emulated`` device is
the model the throttle enforces, and the two are printed side by side.
Every server the demo starts is stopped when it ends, also on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import signal
import statistics
import tempfile
import time
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from concerto import _native
from concerto import cluster as local
from concerto import fs
from concerto.report import pyplot, write_json
from concerto.sim import ScenarioSource, simulate

POLICIES = ["fifo", "coordinated", "sfq-d-plus"]
SERVERS = 4
STRIPE_UNIT = 64 * 1024
APPS = 3
PROCESSES = 4
CALLS = 10
REQUEST = 256 * 1024
SIM_SEEDS = 3
# One request at a time on each disk, as the coordination paper's servers
# do: the order is then the policy's, not the storage threads'.
DEPTH = 1


def _rank(cluster: str, path: str, app: int, rank: int, start: mp.Barrier, app_barrier: mp.Barrier,
          results: mp.Queue) -> None:
    """One process of one application: ``CALLS`` synchronized strided writes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops everyone
    client = fs.connect(cluster, app=app, rank=rank)
    f = client.open(path, write=True)
    data = bytes([app]) * REQUEST
    durations = []
    start.wait()
    first = time.monotonic()
    for k in range(CALLS):
        app_barrier.wait()
        t0 = time.monotonic()
        f.write((k * PROCESSES + rank) * REQUEST, data)
        app_barrier.wait()
        durations.append(time.monotonic() - t0)
    if rank == 0:
        results.put({"app": app, "durations": durations, "elapsed": time.monotonic() - first})
    f.close()


def run_real(client: fs.Client, cluster_file: Path, policy: str) -> dict:
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(APPS * PROCESSES)
    results = ctx.Queue()
    procs = []
    # Each process starts as soon as it is made: a spawned child rebuilds its
    # barriers from their names, which must still exist when it does.
    barriers = [ctx.Barrier(PROCESSES) for _ in range(APPS)]
    try:
        for app in range(1, APPS + 1):
            path = f"/demo/{policy}-app{app}"
            client.create(path, unit=STRIPE_UNIT, count=SERVERS).close()
            for rank in range(PROCESSES):
                args = (str(cluster_file), path, app, rank, start, barriers[app - 1], results)
                procs.append(ctx.Process(target=_rank, args=args))
                procs[-1].start()
        apps = [results.get(timeout=300) for _ in range(APPS)]
        for p in procs:
            p.join(30)
            if p.exitcode != 0:
                raise RuntimeError(f"a demo process failed (exit code {p.exitcode})")
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
    apps.sort(key=lambda a: a["app"])
    per_app = []
    for a in apps:
        moved = CALLS * PROCESSES * REQUEST
        per_app.append({"app": a["app"], "avg_completion_s": statistics.mean(a["durations"]),
                        "bandwidth_Bps": moved / a["elapsed"]})
    return _summary(per_app)


def _summary(per_app: list[dict]) -> dict:
    return {
        "apps": per_app,
        "avg_completion_s": statistics.mean(a["avg_completion_s"] for a in per_app),
        "bandwidth_Bps": sum(a["bandwidth_Bps"] for a in per_app),
        # Jain's index over the applications' bandwidths (equal weights).
        "jain": _native.jain_index([a["bandwidth_Bps"] for a in per_app], [1.0] * len(per_app)),
    }


def emulated_cluster_toml(servers: int, stripe_unit: int, depth: int, preset: str = "hdd",
                          client_overhead_ns: int = 0, metadata_costs_ns: dict[str, int] | None = None) -> str:
    """A scenario's ``[cluster]`` of ``servers`` on the ``emulated`` device the
    throttle preset enforces on a real cluster: the simulator's twin of a
    ``cluster up --throttle PRESET``: the throttle's device, and its
    metadata service as the local cluster has it (one server, server 0,
    every operation costing what the throttle charges it, or what
    ``concerto calibrate`` measured the servers take), and the clients'
    overhead per step when one was measured."""
    dev = json.loads(_native.emulation_preset(preset))
    measured = metadata_costs_ns or {}
    costs = ", ".join(f'{op} = "{measured.get(op, dev["metadata_ns"])}ns"' for op in METADATA_OPERATIONS)
    return f"""[cluster]
servers = {servers}
stripe_unit = {stripe_unit}
depth = {depth}
client_overhead = "{client_overhead_ns}ns"
[cluster.device]
kind = "emulated"
bandwidth = {dev["bandwidth_Bps"]}
latency = "{dev["latency_ns"]}ns"
seek = "{dev["seek_ns"]}ns"
parallelism = {dev["parallelism"]}
[cluster.metadata]
servers = 1
costs = {{ {costs} }}
"""


#: The simulator's metadata operations (`[cluster.metadata] costs`; fsync:
#: a data server's, which the throttle charges as one).
METADATA_OPERATIONS = ("mkdir", "create", "getattr", "readdir", "remove", "rmdir", "rename", "setattr", "fsync")


def scenario_toml(policy: str) -> str:
    """The same workload for the simulator, on the throttle's device model."""
    return f"""
name = "demo-{policy}"
seed = 1
app_ids = {{ rule = "sequential", start = 1 }}
{emulated_cluster_toml(SERVERS, STRIPE_UNIT, DEPTH)}
[policy]
kind = "{policy}"
[[apps]]
name = "ior"
workload = "ior"
instances = {APPS}
processes = {PROCESSES}
requests = {CALLS}
request_size = {REQUEST}
pattern = "strided"
"""


def run_simulated(policy: str) -> dict:
    result = simulate(ScenarioSource(text=scenario_toml(policy), label=f"demo-{policy}"), reps=SIM_SEEDS)
    runs = result["runs"]
    per_app = []
    for i, a in enumerate(runs[0]["apps"]):
        per_app.append({
            "app": a["app_id"],
            "avg_completion_s": statistics.mean(r["apps"][i]["completion_s"]["mean"] for r in runs),
            "bandwidth_Bps": statistics.mean(r["apps"][i]["bandwidth_Bps"] for r in runs),
        })
    return _summary(per_app)


def table(results: dict) -> Table:
    # Units in the headers and a caption for what they mean: the cells stay
    # short enough for an 80-column terminal (and for a log without one).
    t = Table(title=f"{APPS} applications x {PROCESSES} processes, {CALLS} synchronized 256 KiB calls each, "
                    f"{SERVERS} HDD-class servers: real cluster vs simulator", title_justify="left",
              caption="ms: average call completion; MB/s: aggregate bandwidth; Jain: fairness index over the "
                      f"applications' bandwidths (1 = equal); sim: the simulator, mean of {SIM_SEEDS} seeds",
              caption_justify="left", box=box.SIMPLE_HEAD)
    for col in ("policy", "ms real", "ms sim", "MB/s real", "MB/s sim", "Jain real", "Jain sim"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for policy, r in results.items():
        real, sim = r["real"], r["simulated"]
        t.add_row(policy, f"{real['avg_completion_s'] * 1e3:.1f}", f"{sim['avg_completion_s'] * 1e3:.1f}",
                  f"{real['bandwidth_Bps'] / 1e6:.1f}", f"{sim['bandwidth_Bps'] / 1e6:.1f}",
                  f"{real['jain']:.3f}", f"{sim['jain']:.3f}")
    return t


def plot(results: dict, base: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    policies = list(results)
    width = 0.8 / (2 * APPS)
    for i, p in enumerate(policies):
        for world_i, world in enumerate(("real", "simulated")):
            for a_i, a in enumerate(results[p][world]["apps"]):
                x = i + (world_i * APPS + a_i) * width
                ax.bar(x, a["avg_completion_s"] * 1e3, width, color=f"C{a_i}", alpha=1.0 if world == "real" else 0.5,
                       label=f"app {a['app']} ({world})" if i == 0 else None)
    ax.set_xticks([i + width * (2 * APPS - 1) / 2 for i in range(len(policies))], policies)
    ax.set_ylabel("average call completion (ms)")
    ax.set_title("Per-application completion: real cluster (solid) vs simulator (light)")
    # Beside the bars, not over them.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(base.with_suffix(f".{ext}"))
    plt.close(fig)


def run_demo(out: Path, console: Console, cluster_dir: Path | None = None) -> dict:
    console.print(f"[bold]Concerto demo[/]: starting {SERVERS} HDD-class servers on loopback ...")
    results: dict[str, dict] = {}
    # SIGTERM ends the demo like Ctrl-C does, so the servers are stopped either way.
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with contextlib.ExitStack() as stack:
        if cluster_dir is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="concerto-demo-")))
        else:
            directory = cluster_dir
        try:
            cluster_file = local.up(directory, local.ClusterSpec(servers=SERVERS, policy="fifo", throttle="hdd",
                                                                 stripe_unit=STRIPE_UNIT, timeout_s=30.0, depth=DEPTH))
            client = fs.connect(cluster_file, app=999)
            client.mkdir("/demo")
            for policy in POLICIES:
                client.set_policy(local.policy_toml(policy, {}))
                console.print(f"  {policy}: real cluster ...", end="")
                real = run_real(client, cluster_file, policy)
                console.print(" simulator ...", end="")
                results[policy] = {"real": real, "simulated": run_simulated(policy)}
                console.print(" done")
        finally:
            # Before cluster.toml exists, `up` stops what it started itself.
            if (directory / "cluster.toml").exists():
                console.print(f"stopped {local.down(directory)} servers")
            signal.signal(signal.SIGTERM, previous)
    console.print(table(results))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "demo.json", results)
    plot(results, out / "demo")
    console.print(f"wrote {out / 'demo.json'} and {out / 'demo.png'}")
    return results
