"""``concerto calibrate``: what the simulator's twin of a throttled cluster
needs that the throttle does not give it, measured on the real cluster.

The throttle gives the device model (the simulator's ``emulated`` device).
What it does not give:

- **What each metadata operation costs a server.** The throttle charges
  every operation a fixed time on the device, but the server's own work
  (its database, its scheduler, its storage executor) comes on top. One
  client of the library makes ``items`` operations of each kind, one at a
  time, and the metadata server's own statistics (arrival to reply, no
  queue since there is one request at a time) give each kind's latency;
  the data servers' give an fsync's. What every request takes beyond the
  device overlaps with other requests ([split_latency]); the rest is each
  operation's device cost, the simulator's ``[cluster.metadata] costs``.
- **What a request costs before it reaches a server**: the system call,
  the kernel, FUSE and the client library. One task stats ``items`` files
  through the mount; the simulator runs the same probe with the measured
  costs and no client overhead; the difference per stat is the client's
  overhead per step (``[cluster] client_overhead``).
- **What the mount's data path moves per second**: the kernel's and
  FUSE's copies, the mount and the sockets cost time per byte, which a
  stat (no data) does not show. One task writes through the mount with
  small and with large transfers (IOR's layout, a file striped over every
  server); the simulator runs the same with the costs and overhead above;
  what the real write takes beyond the simulated one grows with the
  transfer, and that growth per byte is the mount's cost
  ([mount_bandwidth_from]): the client node's link in the simulator
  (``[cluster.network] client_bandwidth``), which all the tasks of the one
  mount share. (Writes, which go through: a task's reads in order are
  served by the mount's read-ahead.)
- **What a server takes for a data request beyond its device**: its
  hand-offs to and from a storage thread and the throttle's late wake-up,
  which a metadata request pays less of. The library client writes
  ``items`` transfers of two sizes one at a time, and the data servers'
  latency beyond the device's time, less the handling every request pays
  (which the client overhead carries), is ``[cluster]
  server_data_overhead`` ([data_overhead_from]).

- **How much a step's cost varies** (drift): one process stats files
  whose names the kernel has forgotten, one at a time
  ([step_spread_probe]); how far the mean stat lies above the fastest
  tenth is the part of the client overhead that varies from step to step,
  ``[cluster] client_overhead_spread`` (the servers' part of the variation
  is counted in it too: it is what a task's steps vary by, wherever).

- **What the page cache gives a read of what was just written**: one
  process writes a file through the mount and reads it back
  ([page_cache_probe]), ``[cluster] page_cache``, which a calibrated
  scenario keeps and the twin's own side leaves out (its drivers drop the
  page cache before each read).

Written as a TOML file, the twin's ``[cluster]`` with these figures, that
``concerto twin --calibration`` takes, and any scenario (``[cluster]
calibration = "FILE"``, ``concerto sim run --calibration FILE``).
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Callable, Iterator

from concerto import benchmarks
from concerto.report import write_json
from concerto.twin import TwinProblem, TwinSpec, real_runs, simulated, twin_cluster_toml

#: The write-behind ``concerto mount`` starts with (TwinSpec's default).
DEFAULT_MOUNT_WRITE_BEHIND = TwinSpec.write_behind

#: The probe's operation whose latency is compared.
PROBE_ROW = "File stat"


def probe_app(items: int) -> dict:
    """One task creating, stating and removing ``items`` files."""
    return benchmarks.from_mdtest(f"-n {items} -u -F -C -T -r", processes=1, name="probe")


def stat_latency(figures: dict[str, float]) -> float:
    """Seconds per stat of one task, from its ``File stat`` rate."""
    rate = next((v for k, v in figures.items() if k.split(":", 1)[1] == PROBE_ROW), None)
    if not rate:
        raise TwinProblem(f"the probe has no {PROBE_ROW} figure: {figures}")
    return 1.0 / rate


#: The data probe's transfers (bytes): small, where a write's time is
#: its fixed costs, and large, where the bytes' cost shows.
DATA_PROBE_TRANSFERS = (16 << 10, 1 << 20)
#: Transfers each size's probe writes.
DATA_PROBE_CALLS = 128
#: The simulator's default client link (bytes per second), which the
#: uncalibrated twin's simulated writes already pay per byte.
DEFAULT_LINK_BPS = 1.25e9


def data_probe_app(transfer: int) -> dict:
    """One task writing ``DATA_PROBE_CALLS`` transfers of ``transfer`` bytes in order, a file of its own."""
    return benchmarks.from_ior(f"-t {transfer} -b {transfer * DATA_PROBE_CALLS} -s 1 -F -w", processes=1,
                               name="probe")


def write_latency(figures: dict[str, float], transfer: int) -> float:
    """Seconds per write of one task, from its write rate (MiB/s)."""
    rate = next((v for k, v in figures.items() if k.split(":", 1)[1] == "write"), None)
    if not rate:
        raise TwinProblem(f"the data probe has no write figure: {figures}")
    return transfer / (rate * (1 << 20))


def mount_bandwidth_from(excess_s: dict[int, float]) -> float | None:
    """The mount's bandwidth (bytes per second) from what a real write took
    beyond the simulated one at each transfer size: the excess's growth per
    byte between the smallest and the largest transfer, plus what the
    simulated side's default link already charged per byte. None when the
    excess does not grow with the transfer (the mount costs nothing per
    byte that the model does not already charge)."""
    small, large = min(excess_s), max(excess_s)
    per_byte = (excess_s[large] - excess_s[small]) / (large - small)
    if per_byte <= 0:
        return None
    return 1.0 / (per_byte + 1.0 / DEFAULT_LINK_BPS)


def overhead_from(real_latency_s: float, simulated_latency_s: float) -> float:
    """The client's overhead per step: what a real stat takes beyond what
    the simulator charges one with none (never below zero: a real client
    faster than the simulated network is no overhead)."""
    return max(0.0, real_latency_s - simulated_latency_s)


#: The operations whose server cost is measured, as ``[cluster.metadata]
#: costs`` names them (``fsync``: a data server's).
COSTED_OPERATIONS = ("mkdir", "readdir", "rmdir", "create", "setattr", "rename", "getattr", "fsync", "remove")


def _server_latency(stats: list[dict], op: str, servers: list[int]) -> tuple[int, float]:
    """Requests of class ``op`` (metadata, write, ...) the ``servers`` served, and their summed latency."""
    count, total = 0, 0.0
    for i in servers:
        s = stats[i]
        if "error" in s:
            raise TwinProblem(f"server {i} did not give its statistics: {s['error']}")
        h = next(h for h in s["latency"] if h["op"] == op)
        count, total = count + h["count"], total + h["sum_s"]
    return count, total


def server_costs(spec: TwinSpec, items: int, directory: Path, say: Callable[[str], None] = print) -> dict:
    """Each operation's cost at the server, in nanoseconds: one client of
    the library makes ``items`` operations of each kind, one at a time, on
    a cluster started for it in ``directory`` (and stopped after), and the
    servers' statistics say how long each took from arrival to reply (the
    metadata server's for metadata, the data servers' for an fsync).
    Every window holds only its own kind of request (a stat of a file open
    for writing would ask the data servers too: the files are closed
    first)."""
    from concerto import cluster as local
    from concerto.fs import Client

    cluster = local.ClusterSpec(servers=spec.servers, policy="fifo", throttle=spec.throttle,
                                stripe_unit=spec.stripe_unit, depth=spec.depth)
    meta, data = [0], list(range(spec.servers))
    costs: dict[str, int] = {}
    try:
        client = Client(local.up(directory, cluster))

        def measure(name: str, one: Callable[[int], object], kind: str = "metadata", servers=meta) -> None:
            # The median of the windows' means: a hiccup of the host (one
            # request in 300 held 10 ms moves a mean by 33 us) moves one
            # window's mean, not the figure.
            say(f"server cost: {name}, {items} one at a time")
            means = []
            for window in _windows(items):
                n0, t0 = _server_latency(client.server_stats(), kind, servers)
                for k in window:
                    one(k)
                n1, t1 = _server_latency(client.server_stats(), kind, servers)
                if n1 - n0 < len(window):
                    raise TwinProblem(f"the {name} probe reached the servers {n1 - n0} times for {len(window)} calls")
                means.append((t1 - t0) / (n1 - n0))
            costs[name] = round(statistics.median(means) * 1e9)

        client.mkdir("/calibrate")
        dirs = [f"/calibrate/d{i}" for i in range(items)]
        files = [f"/calibrate/f{i}" for i in range(items)]
        measure("mkdir", lambda k: client.mkdir(dirs[k]))
        measure("readdir", lambda k: client.listdir(dirs[k]))
        measure("rmdir", lambda k: client.rmdir(dirs[k]))
        handles = []
        measure("create", lambda k: handles.append(client.create(files[k])))
        for h in handles:
            h.write(0, b"c" * 4096)
        measure("fsync", lambda k: handles[k].fsync(), kind="write", servers=data)
        for h in handles:
            h.close()
        measure("setattr", lambda k: client.chmod(files[k], 0o600))
        measure("rename", lambda k: client.rename(files[k], files[k] + ".r"))
        files = [f + ".r" for f in files]
        measure("getattr", lambda k: client.stat(files[k]))
        measure("remove", lambda k: client.unlink(files[k]))
        for transfer in DATA_OVERHEAD_TRANSFERS:
            data_file = client.create(f"/calibrate/data.{transfer}")
            block = b"d" * transfer
            # The first stripe, unmeasured: each server's first access to
            # the file's object seeks (the device's head is elsewhere);
            # every measured write then continues where the last one on
            # its server ended.
            warm = spec.servers * max(1, spec.stripe_unit // transfer)
            for k in range(warm):
                data_file.write(k * transfer, block)
            measure(f"write-{transfer}", lambda k: data_file.write((warm + k) * transfer, block),
                    kind="write", servers=data)
            data_file.close()
    except (OSError, local.ClusterError) as e:
        raise TwinProblem(f"the server-cost probe: {e}") from e
    finally:
        local.down(directory)
    return costs


#: Windows each server-cost measure's calls are cut into.
COST_WINDOWS = 10


def _windows(items: int) -> list[range]:
    """``items`` calls cut into ``COST_WINDOWS`` windows in order (fewer
    when there are fewer calls), none empty."""
    n = max(1, min(COST_WINDOWS, items))
    bounds = [round(i * items / n) for i in range(n + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def median_costs(runs: list[dict[str, int]]) -> dict[str, int]:
    """Each operation's median over runs of the server-cost probe (one
    run's figures moved by a third from run to run here: the data
    requests' overhead measured 62, 115 and 161 us in three calibrations
    of one run each)."""
    return {op: round(statistics.median(run[op] for run in runs)) for op in runs[0]}


def throttle_charge_ns(throttle: str) -> int:
    """What the throttle charges a metadata operation (or an fsync) on the device."""

    from concerto import _native

    return _native.emulation_preset(throttle)["metadata_ns"]


#: The data writes whose latency at the server gives its overhead per data
#: request: each one piece (within a stripe unit), in order on its object
#: after a first stripe written unmeasured (no seek), of two sizes.
DATA_OVERHEAD_TRANSFERS = (16 << 10, 64 << 10)


def beyond_device_from(latencies: dict[str, int], throttle: str) -> int:
    """What a server takes for a data request beyond its device (ns): each
    probe write's latency at the server less the time the throttle's device
    gives it, the mean over the sizes (never below zero)."""
    from concerto import _native

    dev = _native.emulation_preset(throttle)
    beyond = [latencies[f"write-{t}"] - (dev["latency_ns"] + t / dev["bandwidth_Bps"] * 1e9)
              for t in DATA_OVERHEAD_TRANSFERS]
    return max(0, round(statistics.mean(beyond)))


def data_overhead_from(beyond_device_ns: int, fixed_ns: int) -> int:
    """The server's overhead per data request that the simulator charges
    (``[cluster] server_data_overhead``): what a data request takes at the
    server beyond its device, less the handling every request pays there
    (``fixed_ns``), which the client overhead already carries (the stat
    probe measures it with the client's)."""
    return max(0, beyond_device_ns - fixed_ns)


def split_latency(latencies: dict[str, int], charge_ns: int) -> tuple[dict[str, int], int]:
    """Each operation's cost on the device (what the simulator charges it)
    and the server's fixed time per request, from the latencies one at a
    time. A request's latency at the server is the device's time plus the
    server's own handling (its queue, its storage executor, the reply),
    and the second overlaps with other requests' device time: four tasks
    stat at the rate the device's 300 us allow, not at the 400 us one
    stat takes alone (measured: 3,300 stats/s). So the handling every
    request pays, the cheapest operation's latency beyond the throttle's
    charge, is not a device cost (the stat probe counts it with the
    client's overhead); what an operation takes beyond it is."""
    fixed = max(0, min(latencies.values()) - charge_ns)
    return {op: max(charge_ns, ns - fixed) for op, ns in latencies.items()}, fixed


def steps(reps: int) -> int:
    """The steps ``calibrate`` tells it begins (``say``): per run, each
    server-cost measure, the stat probe's round and each data probe's; and
    the page cache's probe."""
    return reps * (len(COSTED_OPERATIONS) + len(DATA_OVERHEAD_TRANSFERS) + 1 + len(DATA_PROBE_TRANSFERS)) + 2


def calibrate(spec: TwinSpec, items: int, say: Callable[[str], None] = print) -> dict:
    """Measures each operation's server cost, then runs the stat probe on
    the real cluster (``spec.reps`` times, the median) and in the simulator
    (those costs, no client overhead); returns the figures, the costs and
    the overhead."""
    from concerto import host

    with host.watch() as pressure:
        result = _calibrate(spec, items, say)
    return {**result, "host": pressure.as_dict()}


def _calibrate(spec: TwinSpec, items: int, say: Callable[[str], None]) -> dict:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="concerto-calibrate-") as tmp:
        per_run = [server_costs(spec, items, Path(tmp) / f"cluster-{k}", say) for k in range(spec.reps)]
    server = server_figures(median_costs(per_run), spec.throttle)
    costs, data_overhead = server["costs"], server["data_overhead"]
    app = probe_app(items)
    # The probes time each write reaching its server, on both sides: the
    # mount writes through for them (a write held behind would time the copy).
    base = replace(spec, write_behind="0", client_overhead_ns=0, metadata_costs_ns=costs,
                   server_data_overhead_ns=data_overhead)
    simulated_s = stat_latency(simulated("mdtest", app, base))
    runs = real_runs("mdtest", app, base, say)
    real_rates = next(v for k, v in runs.items() if k.split(":", 1)[1] == PROBE_ROW)
    real_s = statistics.median(1.0 / r for r in real_rates)
    overhead = overhead_from(real_s, simulated_s)
    writes = data_probe(replace(base, client_overhead_ns=round(overhead * 1e9)), say)
    excess = {t: w["real_s"] - w["simulated_s"] for t, w in writes.items()}
    page_cache = page_cache_probe(spec, say)
    step_spreads = step_spread_probe(spec, say)
    # The varying part of a step is part of its overhead, never more.
    step_spread = min(statistics.median(step_spreads), overhead)
    return {"servers": spec.servers, "throttle": spec.throttle, "stripe_unit": spec.stripe_unit,
            "depth": spec.depth, "items": items, "reps": spec.reps, "real_stat_s": real_s,
            "real_stat_runs_s": [1.0 / r for r in real_rates], "simulated_stat_s": simulated_s,
            "client_overhead_ns": round(overhead * 1e9),
            "client_overhead_spread_ns": round(max(step_spread, 0.0) * 1e9),
            "server_latency_ns": server["latencies"],
            "server_fixed_ns": server["fixed"], "metadata_costs_ns": costs,
            "server_data_latency_ns": server["data_latency"],
            "server_data_beyond_device_ns": server["beyond_device"], "server_data_overhead_ns": data_overhead,
            "data_probe": {str(t): w for t, w in writes.items()},
            "mount_bandwidth_Bps": mount_bandwidth_from(excess),
            "page_cache_Bps": page_cache,
            "spread": {**spread(spec.throttle, per_run, [1.0 / r for r in real_rates], simulated_s, writes),
                       "client_overhead_spread_ns": [round(min(step_spreads) * 1e9), round(max(step_spreads) * 1e9)]}}


def server_figures(measured: dict[str, int], throttle: str) -> dict:
    """What the server-cost probe's latencies (ns by operation, the data
    writes as ``write-SIZE``) give: the metadata operations' latencies and
    device costs, the server's fixed time per request, the data writes'
    latencies, their time beyond the device and the data overhead."""
    data_latency = {op: ns for op, ns in measured.items() if op.startswith("write-")}
    latencies = {op: ns for op, ns in measured.items() if op not in data_latency}
    costs, fixed = split_latency(latencies, throttle_charge_ns(throttle))
    beyond_device = beyond_device_from(data_latency, throttle)
    return {"latencies": latencies, "costs": costs, "fixed": fixed, "data_latency": data_latency,
            "beyond_device": beyond_device, "data_overhead": data_overhead_from(beyond_device, fixed)}


def spread(throttle: str, per_run: list[dict[str, int]], real_stat_runs_s: list[float], simulated_stat_s: float,
           writes: dict[int, dict]) -> dict[str, list]:
    """Each figure the calibration writes, as each real run alone would
    give it: ``[lowest, highest]`` over the runs (the figure itself comes
    from the runs' medians). The mount's bandwidth pairs the data probe's
    runs by their order; a run whose excess does not grow gives None."""
    derived = [(f["costs"], f["data_overhead"]) for f in (server_figures(run, throttle) for run in per_run)]
    bandwidths = [mount_bandwidth_from({t: w["real_runs_s"][k] - w["simulated_s"] for t, w in writes.items()})
                  for k in range(min(len(w["real_runs_s"]) for w in writes.values()))]
    known = [b for b in bandwidths if b is not None]
    overheads = [round(overhead_from(s, simulated_stat_s) * 1e9) for s in real_stat_runs_s]
    return {"client_overhead_ns": [min(overheads), max(overheads)],
            "server_data_overhead_ns": [min(d for _, d in derived), max(d for _, d in derived)],
            "metadata_costs_ns": {op: [min(c[op] for c, _ in derived), max(c[op] for c, _ in derived)]
                                  for op in derived[0][0]},
            "mount_bandwidth_Bps": [min(known), max(known)] if known else None,
            "mount_bandwidth_runs_without_cost": len(bandwidths) - len(known)}


@contextmanager
def _probe_mount(spec: TwinSpec, probe: str) -> Iterator[Path]:
    """The mount of a cluster of ``spec``'s shape started for one probe, as
    ``concerto mount`` starts it (fifo), stopped after; a failure to start
    it or of the probe's own file operations is a TwinProblem naming the
    probe."""
    import tempfile

    from concerto import cluster as local
    from concerto.fsbench import BenchProblem, mounted_cluster

    cluster = local.ClusterSpec(servers=spec.servers, policy="fifo", throttle=spec.throttle,
                                stripe_unit=spec.stripe_unit, depth=spec.depth)
    with tempfile.TemporaryDirectory(prefix="concerto-calibrate-") as tmp:
        try:
            with mounted_cluster(Path(tmp), cluster) as mnt:
                yield mnt
        except (OSError, BenchProblem, local.ClusterError) as e:
            raise TwinProblem(f"the {probe} probe: {e}") from e


#: What the page cache's probe writes, then reads back (bytes), and how often it reads.
PAGE_CACHE_PROBE_BYTES = 64 << 20
PAGE_CACHE_PROBE_READS = 5


def page_cache_probe(spec: TwinSpec, say: Callable[[str], None] = print) -> float:
    """What one process reads per second through the mount, as
    ``concerto mount`` starts it, of a file it has just written: the
    kernel's page cache (``[cluster] page_cache``), the median of
    ``PAGE_CACHE_PROBE_READS`` reads of ``PAGE_CACHE_PROBE_BYTES`` in 1 MiB
    calls, on a cluster started for it."""
    say(f"page cache: {PAGE_CACHE_PROBE_BYTES >> 20} MiB written, read back {PAGE_CACHE_PROBE_READS} times")
    block = bytes(1 << 20)
    rates = []
    with _probe_mount(spec, "page cache's") as mnt:
        path = mnt / "page-cache"
        with open(path, "wb") as f:
            for _ in range(PAGE_CACHE_PROBE_BYTES >> 20):
                f.write(block)
        for _ in range(PAGE_CACHE_PROBE_READS):
            start = time.monotonic()
            with open(path, "rb", buffering=0) as f:
                while f.read(1 << 20):
                    pass
            rates.append(PAGE_CACHE_PROBE_BYTES / (time.monotonic() - start))
    return statistics.median(rates)


#: Rounds of the step spread's probe, and the stats in each.
STEP_SPREAD_ROUNDS = 3
STEP_SPREAD_STATS = 400


def step_spread_probe(spec: TwinSpec, say: Callable[[str], None] = print) -> list[float]:
    """Per round, seconds: how far one process's mean stat through the
    mount lies above the fastest tenth of its stats (``STEP_SPREAD_STATS``
    files, their names dropped from the kernel's cache first, so each stat
    asks the metadata server), on a cluster started for it. A shifted
    exponential's mean above its floor: the simulator's
    ``client_overhead_spread``."""
    import os

    from concerto.twin import forget_names

    say(f"step spread: {STEP_SPREAD_ROUNDS} rounds of {STEP_SPREAD_STATS} stats, one at a time")
    spreads = []
    with _probe_mount(spec, "step spread's") as mnt:
        names = [mnt / f"spread-{i}" for i in range(STEP_SPREAD_STATS)]
        for name in names:
            name.write_bytes(b"")
        for _ in range(STEP_SPREAD_ROUNDS):
            forget_names()
            took = []
            for name in names:
                start = time.perf_counter()
                os.stat(name)
                took.append(time.perf_counter() - start)
            spreads.append(spread_above_floor(took))
    return spreads


def spread_above_floor(latencies_s: list[float]) -> float:
    """The mean less the 10th percentile (nearest rank): a shifted
    exponential's mean above its floor, robust to the few slow outliers
    that a standard deviation would square."""
    ordered = sorted(latencies_s)
    floor = ordered[int(0.1 * (len(ordered) - 1))]
    return max(0.0, statistics.mean(ordered) - floor)


def data_probe(spec: TwinSpec, say: Callable[[str], None] = print) -> dict[int, dict[str, float]]:
    """Per transfer size of the data probe: one task's seconds per write,
    real (the median of ``spec.reps`` runs) and simulated (``spec``'s costs
    and overhead, the default network)."""
    out = {}
    for transfer in DATA_PROBE_TRANSFERS:
        app = data_probe_app(transfer)
        simulated_s = write_latency(simulated("ior", app, spec), transfer)
        rates = next(v for k, v in real_runs("ior", app, spec, say).items() if k.split(":", 1)[1] == "write")
        runs_s = [transfer / (r * (1 << 20)) for r in rates]
        out[transfer] = {"real_s": statistics.median(runs_s), "real_runs_s": runs_s, "simulated_s": simulated_s}
    return out


def write(result: dict, out: Path) -> Path:
    """``calibration.toml`` (and ``calibration.json``, every figure) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "calibration.json", result)
    path = out / "calibration.toml"
    path.write_text(
        f"# concerto calibrate, {date.today().isoformat()}: {result['servers']} {result['throttle']}-class servers, "
        f"one task stating {result['items']} files through the mount, {result['reps']} runs:\n"
        f"# a stat takes {result['real_stat_s'] * 1e6:.0f} us real, {result['simulated_stat_s'] * 1e6:.0f} us "
        "simulated with no client overhead.\n"
        f"# Each operation's cost on the server's device: its latency at the server, {result['items']} one at a "
        f"time, less the {result['server_fixed_ns'] / 1000:.0f} us every request takes there beyond the device.\n"
        f"# A data request's latency at the server beyond the device's time, one at a time: "
        f"{result['server_data_beyond_device_ns'] / 1000:.0f} us; less what every request takes there (the client "
        "overhead carries it), the server's overhead per data request.\n"
        + _network_comment(result)
        + _host_comment(result)
        + _page_cache_comment(result)
        + f"# The cluster's twin as `concerto mount` runs it ({DEFAULT_MOUNT_WRITE_BEHIND} written behind, read "
        "ahead, the page cache kept), for a scenario's [cluster] calibration = \"FILE\"; `concerto twin "
        "--calibration` takes its measured costs (its drivers drop the page cache before each read).\n"
        + twin_cluster_toml(spec_of(result), page_cache_Bps=result.get("page_cache_Bps")))
    return path


def _page_cache_comment(result: dict) -> str:
    """What the page cache's probe measured, as a comment."""
    rate = result.get("page_cache_Bps")
    if rate is None:
        return ""
    return (f"# One process read back through the mount what it had just written at {rate / 1e6:.0f} MB/s "
            "(cluster.page_cache).\n")


def _host_comment(result: dict) -> str:
    """How busy the host was while calibrating, as a comment (a file made on a busy host says so)."""
    from concerto.host import HostPressure

    h = result.get("host")
    if not h:
        return ""
    pressure = HostPressure.from_dict(h)
    return f"# The host while calibrating: {pressure.describe()}{' (BUSY)' if pressure.busy else ''}.\n"


def _network_comment(result: dict) -> str:
    """What the data probe measured of the mount's data path, as a comment."""
    bandwidth = result.get("mount_bandwidth_Bps")
    if bandwidth is None:
        return "# One task's writes through the mount cost nothing per byte beyond the model's.\n"
    probe = ", ".join(f"{int(t) >> 10} KiB {w['real_s'] * 1e6:.0f} us real, {w['simulated_s'] * 1e6:.0f} us simulated"
                      for t, w in result["data_probe"].items())
    return (f"# One task's writes through the mount ({probe}): the mount moves {bandwidth / 1e6:.1f} MB/s "
            "(cluster.network.client_bandwidth, which all the tasks of one mount share).\n")


def spec_of(result: dict) -> TwinSpec:
    """The twin a calibration's figures describe: its cluster, the mount as
    users start it, and what was measured."""
    return TwinSpec(servers=result["servers"], throttle=result["throttle"], stripe_unit=result["stripe_unit"],
                    depth=result["depth"], write_behind=DEFAULT_MOUNT_WRITE_BEHIND,
                    client_overhead_ns=result["client_overhead_ns"],
                    client_overhead_spread_ns=result.get("client_overhead_spread_ns", 0),
                    metadata_costs_ns=result["metadata_costs_ns"],
                    server_data_overhead_ns=result["server_data_overhead_ns"],
                    mount_bandwidth_Bps=result.get("mount_bandwidth_Bps"))


def read_calibration(path: Path, spec: TwinSpec) -> TwinSpec:
    """``spec`` with what a calibration file gives: the client overhead,
    the operations' server costs, a server's overhead per data request and
    the mount's bandwidth (a file written before one of them was measured
    leaves it as it was: the throttle's charge, none, the default network);
    an error names the file, the key and what is wrong."""
    import tomllib

    from concerto import _native

    try:
        table = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise TwinProblem(f"{path}: {e}") from e
    cluster = table.get("cluster")
    value = cluster.get("client_overhead") if isinstance(cluster, dict) else None
    if not isinstance(value, str):
        raise TwinProblem(f"{path}: no cluster.client_overhead (a duration, as `concerto calibrate` writes it)")

    def duration(key: str, value: object) -> int:
        try:
            if not isinstance(value, str):
                raise ValueError("not a duration string (e.g. \"450us\")")
            return round(_native.parse_duration(value) * 1e9)
        except ValueError as e:
            raise TwinProblem(f"{path}: {key} = {value!r}: {e}") from e

    spec = replace(spec, client_overhead_ns=duration("cluster.client_overhead", value),
                   mount_bandwidth_Bps=_mount_bandwidth(path, cluster.get("network")))
    if "client_overhead_spread" in cluster:
        spec = replace(spec, client_overhead_spread_ns=duration("cluster.client_overhead_spread",
                                                                cluster["client_overhead_spread"]))
    if "server_data_overhead" in cluster:
        spec = replace(spec, server_data_overhead_ns=duration("cluster.server_data_overhead",
                                                              cluster["server_data_overhead"]))
    table_costs = cluster.get("metadata", {}).get("costs") if isinstance(cluster.get("metadata"), dict) else None
    if table_costs is None:
        return spec
    if not isinstance(table_costs, dict):
        raise TwinProblem(f"{path}: cluster.metadata.costs is not a table")
    unknown = sorted(set(table_costs) - set(COSTED_OPERATIONS))
    if unknown:
        raise TwinProblem(f"{path}: cluster.metadata.costs.{unknown[0]}: not an operation "
                          f"(one of {', '.join(COSTED_OPERATIONS)})")
    return replace(spec, metadata_costs_ns={op: duration(f"cluster.metadata.costs.{op}", v)
                                            for op, v in table_costs.items()})


def _mount_bandwidth(path: Path, network: object) -> float | None:
    """``cluster.network.client_bandwidth`` of a calibration file, bytes per second."""
    from concerto import _native

    if network is None:
        return None
    value = network.get("client_bandwidth") if isinstance(network, dict) else None
    if not isinstance(value, str):
        raise TwinProblem(f"{path}: cluster.network needs client_bandwidth (a rate, e.g. \"250MB/s\", as "
                          "`concerto calibrate` writes it)")
    try:
        return _native.parse_bandwidth(value)
    except ValueError as e:
        raise TwinProblem(f"{path}: cluster.network.client_bandwidth = {value!r}: {e}") from e
