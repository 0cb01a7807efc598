"""``concerto twin``: one IOR or mdtest command line, or several
applications at once (``--apps``, an ``[[apps]]`` file), run in both worlds.

The real side runs on a local cluster of throttled servers (``cluster up
--throttle hdd|ssd``) through its FUSE mount, by the project's own IOR-like
and mdtest-like drivers (IOR and mdtest themselves are not installable
from the package registries): one process per task, IOR's layout written
and read with ``pwrite``/``pread`` of ``-t`` bytes, mdtest's phases as its
loops. The simulated side runs the same command line, imported as
``concerto sim workload from-ior/from-mdtest`` does, on the cluster's twin:
the throttle's device model, the same servers, stripe unit, depth, policy,
and one co-located metadata server (the local cluster's server 0) whose
operations cost what the throttle charges them, asked what the FUSE mount
asks (``posix_mount``: the kernel's lookups before creates, an open before
a read). Each
operation's figure is IOR's or mdtest's own: the bytes (items) all tasks
moved over the time from the operation's start to its last task's end.

The mount is the one ``concerto mount`` starts: it writes behind
(``write_behind = "16MiB"``, coalescing a task's writes into stripe-aligned
requests) and reads ahead, and the simulated clients run the same two
policies (``concerto-core``'s ``client::write_behind`` and
``client::readahead``, the simulator's ``cluster.write_behind`` and
``cluster.read_ahead``). ``--write-behind 0`` compares the write-through
mount, each write a request when it returns. An IOR write operation ends
with each task's fsync and an mdtest file's close flushes it, so that
every write has reached the servers when its operation ends, whatever
the mode. The page cache is dropped before each IOR read, so that it
reaches the servers.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import mmap
import os
import queue
import shlex
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from concerto import benchmarks
from concerto import cluster as local
from concerto.demo import emulated_cluster_toml
from concerto.report import mdtest_rows, write_json
from concerto.sim import ScenarioSource, simulate

#: Throttles with a device model the simulator can be given.
THROTTLES = ("hdd", "ssd")
#: How long one operation of the real side may take before the run is called stuck.
OPERATION_TIMEOUT_S = 600


class TwinProblem(RuntimeError):
    """What stops a twin run (a command line it cannot run, a cluster that
    does not come up); the message says what."""


@dataclass
class TwinSpec:
    """The cluster both sides run on, and how often."""

    servers: int = 4
    throttle: str = "hdd"
    stripe_unit: int = 64 * 1024
    depth: int = 8
    policy: str = "fifo"
    #: Real repetitions (the median is reported) and simulator seeds (the mean).
    reps: int = 3
    #: The mount's write-behind ("0": writes go through), as ``concerto
    #: mount`` starts it by default; the simulated clients hold as much.
    write_behind: str = "16MiB"
    #: What each step costs a client before it leaves, as ``concerto
    #: calibrate`` measured it (nanoseconds; 0: none).
    client_overhead_ns: int = 0
    #: How much of it varies from step to step, as ``concerto calibrate``
    #: measured it (nanoseconds; 0: every step costs the same).
    client_overhead_spread_ns: int = 0
    #: What each operation costs a server, as ``concerto calibrate``
    #: measured it (nanoseconds by ``[cluster.metadata] costs`` name; None:
    #: what the throttle charges).
    metadata_costs_ns: dict[str, int] | None = None
    #: What a server takes for each data request beyond its device, as
    #: ``concerto calibrate`` measured it (nanoseconds; 0: none).
    server_data_overhead_ns: int = 0
    #: The bytes per second the mount's data path moves (the kernel's and
    #: FUSE's copies, the mount, the sockets), as ``concerto calibrate``
    #: measured it: the link of the one client node the simulated tasks
    #: share (the one mount) moves that much. None: the simulator's
    #: default network.
    mount_bandwidth_Bps: float | None = None


def program_of(command: str) -> str:
    """``ior`` or ``mdtest``: the benchmark the command line runs (after a
    launcher, if any)."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise TwinProblem(f"command line: {e}") from None
    for w in words:
        name = w.rsplit("/", 1)[-1]
        if name in ("ior", "mdtest"):
            return name
    raise TwinProblem(f"{command!r}: no ior or mdtest on the command line (write the program's name, "
                      "e.g. \"mpirun -np 4 ior -t 1m -b 4m -F\")")


def imported(command: str, processes: int | None) -> tuple[str, dict]:
    """The benchmark and its ``[[apps]]`` entry; a command line the
    simulator cannot model, or the drivers cannot run, is refused."""
    program = program_of(command)
    convert = benchmarks.from_ior if program == "ior" else benchmarks.from_mdtest
    try:
        app = convert(command, processes, program)
    except benchmarks.BenchmarkArgsError as e:
        raise TwinProblem(str(e)) from e
    if app["workload"] == "collective":
        raise TwinProblem("ior -c: the twin's drivers do POSIX I/O; collective I/O on real servers beside the "
                          "simulator is `concerto bench mpiio`")
    return program, app


#: One application of a twin run: what its real side runs (``ior``, ``mdtest`` or ``trace``) and its ``[[apps]]`` entry.
TwinApp = tuple[str, dict]


def sim_scenario(apps: list[TwinApp], spec: TwinSpec) -> str:
    """The simulated side: the apps, at once, on the throttled cluster's twin."""
    return f"""name = "twin-{apps[0][1]['name']}"
app_ids = {{ rule = "sequential", start = 1 }}
{twin_cluster_toml(spec)}[policy]
kind = "{spec.policy}"
{"".join(benchmarks.apps_toml(_as_simulated(program, app, spec)) for program, app in apps)}"""


def twin_cluster_toml(spec: TwinSpec, page_cache_Bps: float | None = None) -> str:
    """The ``[cluster]`` of the throttled cluster's twin as its mount runs
    it: the throttle's device, the mount's write-behind and read-ahead, the
    kernel's lookups (``posix_mount``), and what was measured of the spec
    (``concerto calibrate`` writes this table as its calibration, with the
    page cache's rate, which the twin's own side leaves out: its drivers
    drop the page cache before each read)."""
    return (emulated_cluster_toml(spec.servers, spec.stripe_unit, spec.depth, spec.throttle,
                                  spec.client_overhead_ns, spec.metadata_costs_ns, spec.server_data_overhead_ns,
                                  spec.write_behind, read_ahead=True, page_cache_Bps=page_cache_Bps,
                                  client_overhead_spread_ns=spec.client_overhead_spread_ns)
            + "posix_mount = true\n" + _mount_network(spec))


def _mount_network(spec: TwinSpec) -> str:
    """The client node's link, when the mount's bandwidth was measured (to 1 kB/s)."""
    if spec.mount_bandwidth_Bps is None:
        return ""
    return f"[cluster.network]\nclient_bandwidth = \"{spec.mount_bandwidth_Bps / 1e6:.3f}MB/s\"\n"


def _as_simulated(program: str, app: dict, spec: TwinSpec) -> dict:
    """The entry the simulator reads: a trace's processes are its ranks;
    an application's tasks are on one client node, as the real tasks share
    one mount: one kernel (its locks on a file and a directory) and, with
    a measured mount, one link of its bandwidth."""
    entry = {k: v for k, v in app.items() if not (program == "trace" and k == "processes")}
    if program != "trace":
        entry["processes_per_node"] = app["processes"]
    return entry


def simulated_apps(apps: list[TwinApp], spec: TwinSpec) -> list[dict[str, float]]:
    """Per app, per operation (numbered), the simulator's figure (MiB/s or
    operations per second), the mean over ``spec.reps`` seeds."""
    result = simulate(ScenarioSource(text=sim_scenario(apps, spec), label=f"twin-{apps[0][0]}"), reps=spec.reps)
    figures: list[dict[str, list[float]]] = [{} for _ in apps]
    for run in result["runs"]:
        for k, (program, _) in enumerate(apps):
            a = run["apps"][k]
            if program == "ior":
                rows = [(op["access"], op["bandwidth_MiBps"]) for op in a["ior"]]
            elif program == "trace":
                span = a["end_s"] - a["start_s"]
                rows = [("trace", a["bytes"] / span / (1 << 20) if span > 0 else 0.0)]
            else:
                rows = [(op, items / seconds if seconds > 0 else 0.0)
                        for op, items, seconds in mdtest_rows(a["mdtest"])]
            for i, (name, value) in enumerate(rows):
                figures[k].setdefault(f"{i}:{name}", []).append(value)
    return [{key: statistics.mean(v) for key, v in f.items()} for f in figures]


def simulated(program: str, app: dict, spec: TwinSpec) -> dict[str, float]:
    """One app's figures per operation, simulated alone."""
    return simulated_apps([(program, app)], spec)[0]


# ------------------------------------------------------------------ drivers

def _drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3")


def forget_names() -> None:
    """The kernel's names and attributes forgotten (not the page cache)."""
    Path("/proc/sys/vm/drop_caches").write_text("2")


class _Starts:
    """When a task's phases begin: each once every task of its application
    is there (and rank 0 has dropped what the phase must not find cached),
    the first one also once every task of every application is, so that
    applications run together from their first phase, as the simulator
    starts them all at time zero. (Without it, a second application
    started as late as its tasks took to spawn: mdtest's mkdirs then came
    behind a checkpoint's writes at server 0, 11 ms each, where the
    simulator had them done before the writes began.)"""

    def __init__(self, application, everyone) -> None:
        self.application, self.everyone = application, everyone

    def begin(self, rank: int, drop: Callable[[], None] | None = None) -> None:
        self.application.wait()
        if drop is not None and rank == 0:
            drop()
        self.application.wait()
        if self.everyone is not None:
            self.everyone.wait()
            self.everyone = None


def _aligned(content: bytes) -> mmap.mmap:
    """``content`` in page-aligned memory (an anonymous mapping)."""
    buffer = mmap.mmap(-1, max(len(content), 1))
    buffer.write(content)
    return buffer


def _ior_rank(root: str, app: dict, rank: int, starts: _Starts, out, group: int) -> None:
    """One IOR task: each operation its blocks in IOR's layout, a transfer
    at a time; a write is fsynced before its file is closed (IOR's -e, and
    what makes it reach the servers through any cache).

    Its buffers are page-aligned, as IOR's are (``aligned_buffer_alloc``):
    through the mount's direct I/O the kernel sends one request per
    ``max_pages`` pages of the buffer, so a 1 MiB transfer from a buffer
    48 bytes into a page (Python's bytes) went as two requests, 1 MiB - 48
    bytes then 48 bytes, one after the other (measured in the servers'
    arrival logs): one more round trip per call than IOR makes."""
    tasks, transfer, block = app["processes"], app["request_size"], app["block_size"]
    per_process = app["file"] == "per-process"
    path = os.path.join(root, f"ior.{rank:08d}" if per_process else "ior")
    expected = bytes([rank % 251 + 1]) * transfer
    data, got = _aligned(expected), _aligned(bytes(transfer))
    for op in app["operations"]:
        starts.begin(rank, _drop_caches if op == "read" else None)
        start = time.monotonic()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT if op == "write" else os.O_RDONLY, 0o644)
        for s in range(app["segments"]):
            base = s * block if per_process else (s * tasks + rank) * block
            for k in range(block // transfer):
                if op == "write":
                    moved = os.pwrite(fd, data, base + k * transfer)
                else:
                    moved = os.preadv(fd, [got], base + k * transfer)
                    # A slice of the mapping is bytes, compared at memcmp's pace; a
                    # memoryview compares byte by byte (200 us per 64 KiB, which
                    # was a fifth of each read's time in the twin's table).
                    if got[:moved] != expected[:moved]:
                        raise RuntimeError(f"rank {rank}: {path} at {base + k * transfer} does not hold what "
                                           "was written")
                if moved != transfer:
                    raise RuntimeError(f"rank {rank}: a short {op} of {path} ({moved} of {transfer} bytes)")
        if op == "write":
            os.fsync(fd)
        os.close(fd)
        out.put((group, rank, start, time.monotonic()))


def trace_requests(app: dict) -> list[list[dict]]:
    """The requests of each rank of a trace application (``trace``, and
    ``trace_app`` when the file holds several)."""
    doc = json.loads(Path(app["trace"]).read_text())
    apps = doc["apps"]
    chosen = [a for a in apps if a["name"] == app["trace_app"]] if "trace_app" in app else apps[:1]
    return chosen[0]["ranks"]


def _trace_rank(root: str, app: dict, rank: int, starts: _Starts, out, group: int) -> None:
    """One rank of a trace: its requests one at a time, each when the
    previous one is done, after its ``compute`` and no earlier than its
    ``at`` (seconds from the application's start), as the simulator
    issues them; a write is fsynced at the end, so that it reached the
    servers when the rank's time ends."""
    requests = trace_requests(app)[rank]
    fds: dict[int, int] = {}
    starts.begin(rank)
    start = time.monotonic()
    for q in requests:
        if q.get("compute"):
            time.sleep(q["compute"])
        if q.get("at") is not None:
            time.sleep(max(0.0, start + q["at"] - time.monotonic()))
        fd = fds.get(q["file"])
        if fd is None:
            fd = fds[q["file"]] = os.open(os.path.join(root, f"trace.{q['file']}"), os.O_RDWR | os.O_CREAT, 0o644)
        if q["op"] == "write":
            moved = os.pwrite(fd, b"t" * q["length"], q["offset"])
        else:
            moved = len(os.pread(fd, q["length"], q["offset"]))
        if moved != q["length"]:
            raise RuntimeError(f"rank {rank}: a short {q['op']} of trace.{q['file']} at {q['offset']}")
    for fd in fds.values():
        os.fsync(fd)
        os.close(fd)
    out.put((group, rank, start, time.monotonic()))


def _prepare_trace(directory: Path, app: dict) -> None:
    """The files a trace reads, written before the run (not timed) as far
    as its reads reach, so that each read finds its bytes on the servers."""
    ends: dict[int, int] = {}
    for q in (q for rank in trace_requests(app) for q in rank if q["op"] == "read"):
        ends[q["file"]] = max(ends.get(q["file"], 0), q["offset"] + q["length"])
    for file, end in ends.items():
        with open(directory / f"trace.{file}", "wb") as f:
            for at in range(0, end, 1 << 20):
                f.write(b"p" * min(1 << 20, end - at))
            os.fsync(f.fileno())


def _md_item(step: str, directory: str, i: int, size: int) -> None:
    """What an md-test operation does to one item (file ``i`` of the task's directory)."""
    path = os.path.join(directory, f"file.mdtest.{i}")
    if step == "create":
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif step == "create+write":
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, b"m" * size)
        os.close(fd)
    elif step == "write":
        fd = os.open(path, os.O_WRONLY)
        os.write(fd, b"m" * size)
        os.close(fd)
    elif step == "stat":
        os.stat(path)
    elif step == "read":
        fd = os.open(path, os.O_RDONLY)
        if size and len(os.read(fd, size)) != size:
            raise RuntimeError(f"{path}: a short read")
        os.close(fd)
    elif step == "rm":
        os.unlink(path)


def md_operations(steps: list[str]) -> list[str]:
    """The steps as the real driver runs them: mdtest creates, writes and
    closes each file in one loop, so a ``create`` followed by ``write`` is
    one operation (``create+write``), as mdtest's "File creation" row."""
    ops: list[str] = []
    for step in steps:
        if step == "write" and ops and ops[-1] == "create":
            ops[-1] = "create+write"
        else:
            ops.append(step)
    return ops


def _md_rank(root: str, app: dict, rank: int, starts: _Starts, out, group: int) -> None:
    """One mdtest task (-u): its own directory, its items through the
    phases. The kernel's names and attributes are forgotten before each
    phase (as mdtest's -N stride does across nodes), so that each phase
    asks the servers what a cold client asks, whatever time passed since
    the last one: a lookup of each name, then the operation."""
    directory = os.path.join(root, f"mdtest_tree.{rank}")
    size = app.get("request_size", 0)
    for op in md_operations(app["md_steps"]):
        starts.begin(rank, forget_names)
        start = time.monotonic()
        if op == "mktestdir":
            os.mkdir(directory)
        elif op == "rmtestdir":
            os.rmdir(directory)
        elif op == "readdir":
            os.listdir(directory)
        elif op == "close":
            pass  # each item's descriptor is closed in its own phase; as in PVFS2, nothing is sent
        else:
            for i in range(app["items"]):
                _md_item(op, directory, i, size)
        out.put((group, rank, start, time.monotonic()))


def _next_mark(out, procs) -> tuple:
    """The next operation a task reports; a task that died (its error is
    on stderr) or an operation past ``OPERATION_TIMEOUT_S`` stops the run
    at once, rather than when the others give up waiting for it."""
    deadline = time.monotonic() + OPERATION_TIMEOUT_S
    while True:
        try:
            return out.get(timeout=0.5)
        except queue.Empty:
            failed = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if failed:
                raise TwinProblem(f"task {failed[0]} of the real run failed (exit code "
                                  f"{procs[failed[0]].exitcode}; its error is above)") from None
            if time.monotonic() > deadline:
                raise TwinProblem(f"an operation of the real run took over {OPERATION_TIMEOUT_S} s") from None


def _operations(program: str, app: dict) -> list[str]:
    """The operations the real driver runs, in order."""
    if program == "trace":
        return ["trace"]
    return list(app["operations"]) if program == "ior" else md_operations(app["md_steps"])


def _run_groups(apps: list[TwinApp], root: Path) -> list[list[tuple[float, float]]]:
    """Runs every app's ``processes`` tasks at once, each app as the
    servers' application ``k + 1`` (``CONCERTO_APP_ID``, which the mount
    reads from each task's environment) in a directory of its own under
    ``root``; per app, per operation, its start (the first task's) and end
    (the last task's)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs, barriers = [], [ctx.Barrier(sum(app["processes"] for _, app in apps), timeout=OPERATION_TIMEOUT_S)]
    saved = os.environ.get("CONCERTO_APP_ID")
    try:
        for k, (program, app) in enumerate(apps):
            target = {"ior": _ior_rank, "mdtest": _md_rank, "trace": _trace_rank}[program]
            directory = root / app["name"] if len(apps) > 1 else root
            directory.mkdir(exist_ok=True)
            if program == "trace":
                _prepare_trace(directory, app)
                _drop_caches()
            # Kept until the tasks are done: a spawned task opens its
            # barrier's semaphores by name, which go with the last reference here.
            barriers.append(ctx.Barrier(app["processes"], timeout=OPERATION_TIMEOUT_S))
            # A spawned task starts with the environment of this moment.
            os.environ["CONCERTO_APP_ID"] = str(k + 1)
            for r in range(app["processes"]):
                starts = _Starts(barriers[-1], barriers[0] if len(apps) > 1 else None)
                p = ctx.Process(target=target, args=(str(directory), app, r, starts, out, k), daemon=True)
                p.start()
                procs.append(p)
    finally:
        if saved is None:
            os.environ.pop("CONCERTO_APP_ID", None)
        else:
            os.environ["CONCERTO_APP_ID"] = saved
    try:
        marks: list[dict[int, list[tuple[float, float]]]] = [{} for _ in apps]
        seen: dict[tuple[int, int], int] = {}
        for _ in range(sum(app["processes"] * len(_operations(program, app)) for program, app in apps)):
            group, rank, start, end = _next_mark(out, procs)
            k = seen.get((group, rank), 0)
            seen[(group, rank)] = k + 1
            marks[group].setdefault(k, []).append((start, end))
        for p in procs:
            p.join(60)
            if p.exitcode != 0:
                raise TwinProblem(f"a task of the real run failed (exit code {p.exitcode})")
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    return [[(min(s for s, _ in m), max(e for _, e in m)) for _, m in sorted(by.items())] for by in marks]


def _figures(program: str, app: dict, spans: list[tuple[float, float]]) -> list[tuple[str, float]]:
    """Per operation of one app, its name and figure (MiB/s or operations per second)."""
    if program == "trace":
        moved = sum(q["length"] for rank in trace_requests(app) for q in rank)
        ((start, end),) = spans
        return [("trace", moved / (end - start) / (1 << 20))]
    if program == "ior":
        moved = app["processes"] * app["segments"] * app["block_size"]
        return [(op, moved / (end - start) / (1 << 20)) for op, (start, end) in zip(app["operations"], spans)]
    rows = []
    for op, (start, end) in zip(md_operations(app["md_steps"]), spans):
        items = app["processes"] if op in ("mktestdir", "rmtestdir", "readdir") else app["processes"] * app["items"]
        rows.append((_mdtest_row(op), items / (end - start) if end > start else 0.0))
    return rows


def _mdtest_row(op: str) -> str:
    """The row of mdtest's summary a real driver's operation counts under,
    as the simulator names it (``create+write`` is a create's row; a step
    without a row is shown in parentheses)."""
    from concerto import _native

    return _native.mdtest_row(op.split("+")[0]) or f"({op})"


def real_once(apps: list[TwinApp], root: Path) -> list[list[tuple[str, float]]]:
    """One real run of the apps at once under ``root`` (a directory of the
    mount): per app, per operation, its name and figure."""
    return [_figures(program, app, spans) for (program, app), spans in zip(apps, _run_groups(apps, root))]


def real_runs_apps(apps: list[TwinApp], spec: TwinSpec,
                   say: Callable[[str], None]) -> list[dict[str, list[float]]]:
    """``spec.reps`` real runs of the apps at once on a local cluster
    started and mounted for them (and taken down after): per app, per
    operation (numbered, as ``simulated_apps`` keys them), its figure in
    each run."""
    from concerto.fsbench import BenchProblem, mounted_cluster

    if spec.throttle not in THROTTLES:
        raise TwinProblem(f"--throttle {spec.throttle}: the simulator's twin needs a device model; give one of "
                          f"{', '.join(THROTTLES)}")
    if os.geteuid() != 0:
        raise TwinProblem("the real side mounts the cluster and drops the page cache: run as root")
    cluster = local.ClusterSpec(servers=spec.servers, policy=spec.policy, throttle=spec.throttle,
                                stripe_unit=spec.stripe_unit, depth=spec.depth)
    real: list[dict[str, list[float]]] = [{} for _ in apps]
    what = " + ".join(program for program, _ in apps)
    with tempfile.TemporaryDirectory(prefix="concerto-twin-") as tmp:
        try:
            with mounted_cluster(Path(tmp), cluster, write_behind=spec.write_behind) as mnt:
                for rep in range(spec.reps):
                    say(f"real cluster: {what}, round {rep + 1}/{spec.reps}")
                    root = mnt / f"round{rep}"
                    root.mkdir()
                    for k, rows in enumerate(real_once(apps, root)):
                        for i, (name, value) in enumerate(rows):
                            real[k].setdefault(f"{i}:{name}", []).append(value)
        except (BenchProblem, local.ClusterError) as e:
            raise TwinProblem(str(e)) from e
    return real


def real_runs(program: str, app: dict, spec: TwinSpec, say: Callable[[str], None]) -> dict[str, list[float]]:
    """One app's real runs, alone."""
    return real_runs_apps([(program, app)], spec, say)[0]


def run(command: str, spec: TwinSpec, out: Path, processes: int | None = None,
        say: Callable[[str], None] = print) -> dict:
    """Both sides of one command line; writes ``twin.json`` and returns it."""
    program, app = imported(command, processes)
    result = _both_sides([(program, app)], spec, out, say)
    rows = result.pop("apps")[0]["rows"]
    result = {"command": command, "program": program, "app": app, **result,
              "unit": "MiB/s" if program == "ior" else "ops/s", "rows": rows}
    write_json(out / "twin.json", result)
    return result


def run_imported(path: Path, spec: TwinSpec, out: Path, processes: int | None = None,
                 say: Callable[[str], None] = print) -> dict:
    """The real side read from a benchmark's own output (``twin_import``),
    the simulated side run from the command line it gives; writes
    ``twin.json`` and returns it. Rows the output has that the simulator
    does not model, and the reverse, are listed, not dropped silently."""
    from concerto import twin_import

    try:
        real = twin_import.read(path)
    except twin_import.ImportProblem as e:
        raise TwinProblem(str(e)) from e
    program, app = imported(real.command, processes or real.tasks)
    say(f"simulator: {program} of {path}, {app['processes']} tasks")
    sim = simulated(program, app, spec)
    rows, only_sim = [], []
    for key, value in sim.items():
        name = key.split(":", 1)[1]
        if name in real.figures:
            r = real.figures[name]
            rows.append({"operation": name, "real": r, "real_runs": [r], "sim": value,
                         "sim_over_real": value / r if r > 0 else None})
        else:
            only_sim.append(name)
    if not rows:
        raise TwinProblem(f"{path}: none of its operations ({', '.join(real.figures)}) is one the simulator "
                          f"reports for {real.command!r} ({', '.join(only_sim)})")
    named = {r["operation"] for r in rows}
    result = {"command": real.command, "program": program, "app": app, "real_from": str(path),
              "cluster": asdict(spec), "unit": "MiB/s" if program == "ior" else "ops/s", "rows": rows,
              "not_modelled": [name for name in real.figures if name not in named],
              "not_in_output": only_sim}
    write_json(out / "twin.json", result)
    return result


def apps_of(path: Path) -> list[TwinApp]:
    """The ``[[apps]]`` of a TOML file (what ``concerto sim workload
    from-ior/from-mdtest`` prints), each one the drivers can run: IOR's
    layout (``workload = "ior"`` with ``block_size``) or ``md-test``; an
    entry they cannot run is refused naming it."""
    import tomllib

    try:
        table = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise TwinProblem(f"{path}: {e}") from e
    entries = table.get("apps")
    if not isinstance(entries, list) or not entries or not all(isinstance(a, dict) for a in entries):
        raise TwinProblem(f"{path}: no [[apps]] tables")
    apps: list[TwinApp] = []
    for k, app in enumerate(entries):
        where = f"{path}: apps[{k}]"
        app.setdefault("name", f"app{k + 1}")
        if app.get("workload") == "ior" and "block_size" in app:
            program = "ior"
            app = {"processes": 1, "segments": 1, "operations": [app.get("op", "write")], "file": "shared", **app}
            for key in ("block_size", "request_size"):
                if key in app:
                    app[key] = _size(where, key, app[key])
            app.setdefault("request_size", app["block_size"])
            if app["block_size"] % app["request_size"]:
                raise TwinProblem(f"{where}: block_size is not a multiple of request_size")
        elif app.get("workload") == "trace":
            program = "trace"
            app = _trace_app(where, path, app)
        elif app.get("workload") == "md-test":
            program = "mdtest"
            app = {"processes": 1, "items": 1, "md_steps": ["mktestdir", "create", "stat", "rm", "rmtestdir"], **app}
            if "request_size" in app:
                app["request_size"] = _size(where, "request_size", app["request_size"])
        else:
            raise TwinProblem(f"{where}: workload {app.get('workload')!r}: the twin's drivers run IOR's layout "
                              "(workload = \"ior\" with block_size), md-test and trace")
        if app.get("instances", 1) != 1:
            raise TwinProblem(f"{where}: instances = {app['instances']}: give each application its own [[apps]]")
        apps.append((program, app))
    names = [app["name"] for _, app in apps]
    if len(set(names)) != len(names):
        raise TwinProblem(f"{path}: two [[apps]] are named alike ({names}): each needs a name of its own")
    return apps


def _trace_app(where: str, path: Path, app: dict) -> dict:
    """A trace entry with its file made absolute (relative to the apps
    file's directory, or where concerto runs, as the simulator reads it)
    and as many processes as the trace has ranks; its trace is checked by
    the simulator's own reader when the simulated side runs."""
    if not isinstance(app.get("trace"), str):
        raise TwinProblem(f"{where}: workload \"trace\" needs trace = \"FILE\" (a concerto-trace JSON file)")
    trace = Path(app["trace"])
    if not trace.is_absolute():
        trace = trace if trace.exists() else path.parent / trace
    app = {**app, "trace": str(trace.resolve())}
    try:
        app.setdefault("processes", len(trace_requests(app)))
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise TwinProblem(f"{where}.trace = {str(trace)!r}: not a trace the twin can replay ({e!r})") from e
    return app


def _size(where: str, key: str, value: object) -> int:
    """A size an [[apps]] entry gives (bytes, or a string such as "64KiB")."""
    from concerto import _native

    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    try:
        return _native.parse_size(str(value))
    except ValueError as e:
        raise TwinProblem(f"{where}.{key} = {value!r}: {e}") from e


def run_apps(path: Path, spec: TwinSpec, out: Path, say: Callable[[str], None] = print) -> dict:
    """Both sides of the [[apps]] of ``path``, run at once; writes ``twin.json`` and returns it."""
    apps = apps_of(path)
    result = {"apps_file": str(path), **_both_sides(apps, spec, out, say)}
    write_json(out / "twin.json", result)
    return result


def _both_sides(apps: list[TwinApp], spec: TwinSpec, out: Path, say: Callable[[str], None]) -> dict:
    """The simulator's figures and the real runs' of the apps, side by side, per app."""
    from concerto import _native

    names = [f"{app['name']} ({program}, {app['processes']} tasks)" for program, app in apps]
    say(f"simulator: {', '.join(names)}")

    try:
        sims = simulated_apps(apps, spec)
    except _native.ConfigError as e:
        raise TwinProblem(f"the simulator refused the applications: {e}") from e
    from concerto import host

    with host.watch() as pressure:
        reals = real_runs_apps(apps, spec, say)
    per_app = []
    for (program, app), sim, real in zip(apps, sims, reals):
        if list(real) != list(sim):
            raise TwinProblem(f"{app['name']}: the two sides ran different operations: real {list(real)}, "
                              f"simulated {list(sim)}")
        rows = []
        for key, runs in real.items():
            r = statistics.median(runs)
            rows.append({"operation": key.split(":", 1)[1], "real": r, "real_runs": runs, "sim": sim[key],
                         "sim_over_real": sim[key] / r if r > 0 else None})
        per_app.append({"name": app["name"], "program": program, "app": app,
                        "unit": "ops/s" if program == "mdtest" else "MiB/s", "rows": rows})
    # How busy the host was while the real side ran: a busy host's real
    # figures measure the host, not the model (the CLI says so instead of
    # a ratio).
    return {"cluster": asdict(spec), "host": pressure.as_dict(), "apps": per_app}
