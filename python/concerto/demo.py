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

With ``netns``, the servers and the applications are each in a network
namespace of their own (an application's processes share one client
group, as ranks on one node share its NIC), every link limited by tbf;
the simulator's network is the links as measured first. Both worlds also
count the calls whose pieces reach the servers in different orders: the
phenomenon coordination exists for.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import itertools
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
from concerto import fs, netns
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
# Each way on every link with --netns: an application's 1 MiB call takes
# about 40 ms through its client group's link, half a FIFO call's time on
# the disks, so the network shapes when pieces arrive without being the
# bottleneck (the disks are: about 36 MB/s for the three applications).
LINK_RATE = 25e6


def _rank(cluster: str, path: str, app: int, rank: int, start: mp.Barrier, app_barrier: mp.Barrier,
          results: mp.Queue, namespace: str | None) -> None:
    """One process of one application: ``CALLS`` synchronized strided writes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops everyone
    if namespace is not None:
        netns.join(namespace)
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


def run_real(client: fs.Client, cluster_file: Path, policy: str, net: netns.Network | None = None) -> dict:
    """The policy's run on the cluster; with ``net``, application k's
    processes in client group k-1's namespace."""
    ctx = mp.get_context("spawn")
    logged = [log[-1]["seq"] if log else 0 for log in _arrival_logs(client)]
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
                namespace = net.namespace("c", app - 1) if net else None
                args = (str(cluster_file), path, app, rank, start, barriers[app - 1], results, namespace)
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
    logs = _arrival_logs(client)
    arrivals = [(call, server, at) for server, log in enumerate(logs)
                for call, at in _calls_arrived([a for a in log if a["seq"] > logged[server]])]
    return _summary(per_app) | {"out_of_order": out_of_order_share(arrivals)}


def _arrival_logs(client: fs.Client) -> list[list[dict]]:
    logs = client.arrivals()
    for server, log in enumerate(logs):
        if isinstance(log, dict):
            raise RuntimeError(f"server {server}'s arrival log: {log['error']}")
    return logs


def _calls_arrived(log: list[dict]) -> list[tuple[tuple[int, int, int], int]]:
    """One server's arrivals of the applications' writes as ``((app, rank,
    call), at_ns)``: a call puts one piece on every server, so a rank's
    k-th piece here by offset is its call k."""
    pieces: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for a in log:
        if a["op"] == "write" and 1 <= a["app"] <= APPS:
            pieces.setdefault((a["app"], a["rank"]), []).append((a["offset"], a["at_ns"]))
    return [((app, rank, k), at) for (app, rank), ps in pieces.items() for k, (_, at) in enumerate(sorted(ps))]


def out_of_order_share(arrivals: list[tuple[tuple[int, int, int], int, float]]) -> float:
    """The share of calls whose pieces reach the servers in different
    orders: ``arrivals`` holds ``((app, rank, call), server, time)`` per
    piece, and a call counts when a call of another application reaches
    one of its servers before it and another of its servers after it (the
    disorder coordination removes; ties in time are one order, the same
    everywhere)."""
    position: dict[int, dict[tuple, int]] = {}
    for server in sorted({s for _, s, _ in arrivals}):
        here = sorted((t, call) for call, s, t in arrivals if s == server)
        position[server] = {call: i for i, (_, call) in enumerate(here)}
    calls = sorted({call for call, _, _ in arrivals})
    disordered = set()
    for a, b in itertools.combinations(calls, 2):
        if a[0] == b[0]:
            continue
        orders = {pos[a] < pos[b] for pos in position.values() if a in pos and b in pos}
        if len(orders) == 2:
            disordered |= {a, b}
    return len(disordered) / len(calls) if calls else 0.0


def _summary(per_app: list[dict]) -> dict:
    return {
        "apps": per_app,
        "avg_completion_s": statistics.mean(a["avg_completion_s"] for a in per_app),
        "bandwidth_Bps": sum(a["bandwidth_Bps"] for a in per_app),
        # Jain's index over the applications' bandwidths (equal weights).
        "jain": _native.jain_index([a["bandwidth_Bps"] for a in per_app], [1.0] * len(per_app)),
    }


def emulated_cluster_toml(servers: int, stripe_unit: int, depth: int, preset: str = "hdd",
                          client_overhead_ns: int = 0, metadata_costs_ns: dict[str, int] | None = None,
                          server_data_overhead_ns: int = 0, write_behind: str = "0",
                          read_ahead: bool = False, bandwidth_Bps: float | None = None,
                          page_cache_Bps: float | None = None, client_overhead_spread_ns: int = 0) -> str:
    """A scenario's ``[cluster]`` of ``servers`` on the ``emulated`` device the
    throttle preset enforces on a real cluster: the simulator's twin of a
    ``cluster up --throttle PRESET``: the throttle's device, and its
    metadata service as the local cluster has it (one server, server 0,
    every operation costing what the throttle charges it, or what
    ``concerto calibrate`` measured the servers take), and the clients'
    overhead per step (and how much of it varies) and the servers' per
    data request when they were measured; the clients' write-behind, read-ahead and page cache as the
    mount's (``write_behind`` "0", no read-ahead, no page cache: each transfer goes as the
    program issued it)."""
    dev = _native.emulation_preset(preset)
    if bandwidth_Bps is not None:
        # A platform matched to what was measured (demo iosets): the preset's device at another streaming rate.
        dev = {**dev, "bandwidth_Bps": bandwidth_Bps}
    measured = metadata_costs_ns or {}
    costs = ", ".join(f'{op} = "{measured.get(op, dev["metadata_ns"])}ns"' for op in METADATA_OPERATIONS)
    page_cache = "" if page_cache_Bps is None else f'page_cache = "{page_cache_Bps / 1e6:.1f}MB/s"\n'
    return f"""[cluster]
servers = {servers}
stripe_unit = {stripe_unit}
depth = {depth}
client_overhead = "{client_overhead_ns}ns"
client_overhead_spread = "{client_overhead_spread_ns}ns"
server_data_overhead = "{server_data_overhead_ns}ns"
write_behind = "{write_behind}"
read_ahead = {"true" if read_ahead else "false"}
{page_cache}[cluster.device]
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


def scenario_toml(policy: str, network: str = "") -> str:
    """The same workload for the simulator, on the throttle's device model
    (and ``network``, a ``[cluster.network]`` table, if given)."""
    return f"""
name = "demo-{policy}"
seed = 1
app_ids = {{ rule = "sequential", start = 1 }}
{emulated_cluster_toml(SERVERS, STRIPE_UNIT, DEPTH)}
{network}
[policy]
kind = "{policy}"
[[apps]]
name = "ior"
workload = "ior"
instances = {APPS}
processes = {PROCESSES}
processes_per_node = {PROCESSES if network else 1}
requests = {CALLS}
request_size = {REQUEST}
pattern = "strided"
op = "write"
"""


def run_simulated(policy: str, network: str = "") -> dict:
    with tempfile.TemporaryDirectory(prefix="concerto-demo-sim-") as tmp:
        detail = Path(tmp) / "pieces.csv"
        result = simulate(ScenarioSource(text=scenario_toml(policy, network), label=f"demo-{policy}"), reps=SIM_SEEDS,
                          detail_csv=detail)
        with detail.open() as f:
            pieces = [r for r in csv.DictReader(f) if r["op"] == "write"]
    runs = result["runs"]
    per_app = []
    for i, a in enumerate(runs[0]["apps"]):
        per_app.append({
            "app": a["app_id"],
            "avg_completion_s": statistics.mean(r["apps"][i]["completion_s"]["mean"] for r in runs),
            "bandwidth_Bps": statistics.mean(r["apps"][i]["bandwidth_Bps"] for r in runs),
        })
    # The simulator numbers applications from 0; the real servers from 1.
    shares = [out_of_order_share([((int(p["app"]) + 1, int(p["rank"]), int(p["call"])), int(p["server"]),
                                   int(p["arrive_ns"])) for p in pieces if p["seed"] == seed])
              for seed in sorted({p["seed"] for p in pieces})]
    return _summary(per_app) | {"out_of_order": statistics.mean(shares)}


def table(results: dict, where: str = "on loopback") -> Table:
    # Units in the headers and a caption for what they mean: the cells stay
    # short enough for an 80-column terminal (and for a log without one).
    t = Table(title=f"{APPS} applications x {PROCESSES} processes, {CALLS} synchronized 256 KiB calls each, "
                    f"{SERVERS} HDD-class servers {where}: real cluster vs simulator", title_justify="left",
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


def disorder_table(results: dict) -> Table:
    t = Table(title="Calls whose pieces reach the servers in different orders (what coordination is for)",
              title_justify="left", caption="a call counts when a call of another application reaches one of its "
                                            "servers before it and another after it", caption_justify="left",
              box=box.SIMPLE_HEAD)
    for col in ("policy", "share real", "share sim"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for policy, r in results.items():
        t.add_row(policy, f"{r['real']['out_of_order']:.0%}", f"{r['simulated']['out_of_order']:.0%}")
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


def run_demo(out: Path, console: Console, cluster_dir: Path | None = None, in_namespaces: bool = False,
             link_rate: float = LINK_RATE) -> dict:
    where = (f"in network namespaces, links of {link_rate / 1e6:g} MB/s" if in_namespaces else "on loopback")
    console.print(f"[bold]Concerto demo[/]: starting {SERVERS} HDD-class servers {where} ...")
    results: dict[str, dict] = {}
    network, made = "", {}
    # SIGTERM ends the demo like Ctrl-C does, so the servers are stopped either way.
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with contextlib.ExitStack() as stack:
        if cluster_dir is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="concerto-demo-")))
        else:
            directory = cluster_dir
        try:
            spec = local.ClusterSpec(servers=SERVERS, policy="fifo", throttle="hdd", stripe_unit=STRIPE_UNIT,
                                     timeout_s=30.0, depth=DEPTH)
            if in_namespaces:
                spec = dataclasses.replace(spec, netns=True, clients=APPS, link_rate=link_rate)
            cluster_file = local.up(directory, spec)
            net = netns.load(directory)
            if net is not None:
                made = net.identities()
                links = netns.measure_links(net)
                network = netns.network_toml(links)
                console.print(f"  links measured: {links['rate_Bps'] / 1e6:.2f} MB/s, one way "
                              f"{links['latency_s'] * 1e6:.0f} us + up to {links['jitter_s'] * 1e6:.0f} us")
            client = fs.connect(cluster_file, app=999)
            client.mkdir("/demo")
            for policy in POLICIES:
                client.set_policy(local.policy_toml(policy, {}))
                console.print(f"  {policy}: real cluster ...", end="")
                real = run_real(client, cluster_file, policy, net)
                console.print(" simulator ...", end="")
                results[policy] = {"real": real, "simulated": run_simulated(policy, network)}
                console.print(" done")
        finally:
            # Before cluster.toml exists, `up` stops what it started itself.
            if (directory / "cluster.toml").exists():
                console.print(f"stopped {local.down(directory)} servers")
            signal.signal(signal.SIGTERM, previous)
    console.print(table(results, where))
    console.print(disorder_table(results))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "demo.json", results)
    if in_namespaces:
        # With the namespaces it made (name: identity), which are gone now.
        write_json(out / "network.json", {**links, "namespaces": made})
    plot(results, out / "demo")
    console.print(f"wrote {out / 'demo.json'} and {out / 'demo.png'}")
    return results
