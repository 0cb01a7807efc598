"""``concerto twin``: one IOR or mdtest command line run in both worlds.

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

The mount writes through by default (``write_behind = "0"``), so that
each write the program makes is a request to the servers when it returns,
as the simulator's client sends it: the simulator models neither the
mount's write-behind, which gathers a task's writes into larger requests,
nor its read-ahead (a gap the twin shows; docs/reproductions.md). An IOR
write operation ends with each task's fsync and an mdtest file's close
flushes it, so that every write has reached the servers when its
operation ends, whatever the mode. The page cache is dropped before each
IOR read, so that it reaches the servers.
"""

from __future__ import annotations

import multiprocessing as mp
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
    #: The mount's write-behind ("0": writes go through).
    write_behind: str = "0"
    #: What each step costs a client before it leaves, as ``concerto
    #: calibrate`` measured it (nanoseconds; 0: none).
    client_overhead_ns: int = 0
    #: What each operation costs a server, as ``concerto calibrate``
    #: measured it (nanoseconds by ``[cluster.metadata] costs`` name; None:
    #: what the throttle charges).
    metadata_costs_ns: dict[str, int] | None = None


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


def sim_scenario(app: dict, spec: TwinSpec) -> str:
    """The simulated side: the app on the throttled cluster's twin."""
    return f"""name = "twin-{app['name']}"
{emulated_cluster_toml(spec.servers, spec.stripe_unit, spec.depth, spec.throttle,
                       spec.client_overhead_ns, spec.metadata_costs_ns)}posix_mount = true
[policy]
kind = "{spec.policy}"
{benchmarks.apps_toml(app)}"""


def simulated(program: str, app: dict, spec: TwinSpec) -> dict[str, float]:
    """Per operation, the simulator's figure (MiB/s or operations per
    second), the mean over ``spec.reps`` seeds."""
    result = simulate(ScenarioSource(text=sim_scenario(app, spec), label=f"twin-{program}"), reps=spec.reps)
    figures: dict[str, list[float]] = {}
    for run in result["runs"]:
        a = run["apps"][0]
        if program == "ior":
            rows = [(op["access"], op["bandwidth_MiBps"]) for op in a["ior"]]
        else:
            rows = [(op, items / seconds if seconds > 0 else 0.0) for op, items, seconds in mdtest_rows(a["mdtest"])]
        for i, (name, value) in enumerate(rows):
            figures.setdefault(f"{i}:{name}", []).append(value)
    return {k: statistics.mean(v) for k, v in figures.items()}


# ------------------------------------------------------------------ drivers

def _drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3")


def _ior_rank(root: str, app: dict, rank: int, barrier, out) -> None:
    """One IOR task: each operation its blocks in IOR's layout, a transfer
    at a time; a write is fsynced before its file is closed (IOR's -e, and
    what makes it reach the servers through any cache)."""
    tasks, transfer, block = app["processes"], app["request_size"], app["block_size"]
    per_process = app["file"] == "per-process"
    path = os.path.join(root, f"ior.{rank:08d}" if per_process else "ior")
    data = bytes([rank % 251 + 1]) * transfer
    for op in app["operations"]:
        barrier.wait()
        if op == "read" and rank == 0:
            _drop_caches()
        barrier.wait()
        start = time.monotonic()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT if op == "write" else os.O_RDONLY, 0o644)
        for s in range(app["segments"]):
            base = s * block if per_process else (s * tasks + rank) * block
            for k in range(block // transfer):
                if op == "write":
                    moved = os.pwrite(fd, data, base + k * transfer)
                else:
                    got = os.pread(fd, transfer, base + k * transfer)
                    if got != data:
                        raise RuntimeError(f"rank {rank}: {path} at {base + k * transfer} does not hold what "
                                           "was written")
                    moved = len(got)
                if moved != transfer:
                    raise RuntimeError(f"rank {rank}: a short {op} of {path} ({moved} of {transfer} bytes)")
        if op == "write":
            os.fsync(fd)
        os.close(fd)
        out.put((rank, op, start, time.monotonic()))


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


def _md_rank(root: str, app: dict, rank: int, barrier, out) -> None:
    """One mdtest task (-u): its own directory, its items through the
    phases. The kernel's names and attributes are forgotten before each
    phase (as mdtest's -N stride does across nodes), so that each phase
    asks the servers what a cold client asks, whatever time passed since
    the last one: a lookup of each name, then the operation."""
    directory = os.path.join(root, f"mdtest_tree.{rank}")
    size = app.get("request_size", 0)
    for op in md_operations(app["md_steps"]):
        barrier.wait()
        if rank == 0:
            Path("/proc/sys/vm/drop_caches").write_text("2")
        barrier.wait()
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
        out.put((rank, op, start, time.monotonic()))


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


def _run_tasks(target, root: Path, app: dict, operations: int) -> list[tuple[float, float]]:
    """Runs ``app["processes"]`` tasks of ``target``; per operation, its
    start (the first task's) and end (the last task's)."""
    tasks = app["processes"]
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(tasks, timeout=OPERATION_TIMEOUT_S), ctx.Queue()
    procs = [ctx.Process(target=target, args=(str(root), app, r, barrier, out), daemon=True) for r in range(tasks)]
    for p in procs:
        p.start()
    try:
        marks: dict[int, list[tuple[float, float]]] = {}
        seen: dict[int, int] = {}
        for _ in range(tasks * operations):
            rank, _op, start, end = _next_mark(out, procs)
            k = seen.get(rank, 0)
            seen[rank] = k + 1
            marks.setdefault(k, []).append((start, end))
        for p in procs:
            p.join(60)
            if p.exitcode != 0:
                raise TwinProblem(f"a task of the real run failed (exit code {p.exitcode})")
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    return [(min(s for s, _ in m), max(e for _, e in m)) for _, m in sorted(marks.items())]


def real_once(program: str, app: dict, root: Path) -> list[tuple[str, float]]:
    """One real run under ``root`` (a directory of the mount): per
    operation, its name and figure (MiB/s or operations per second)."""
    if program == "ior":
        spans = _run_tasks(_ior_rank, root, app, len(app["operations"]))
        moved = app["processes"] * app["segments"] * app["block_size"]
        return [(op, moved / (end - start) / (1 << 20)) for op, (start, end) in zip(app["operations"], spans)]
    ops = md_operations(app["md_steps"])
    spans = _run_tasks(_md_rank, root, app, len(ops))
    names = {"mktestdir": "Tree creation", "create": "File creation", "create+write": "File creation",
             "write": "(write)", "stat": "File stat", "read": "File read", "rm": "File removal",
             "rmtestdir": "Tree removal", "readdir": "(readdir)", "close": "(close)"}
    rows = []
    for op, (start, end) in zip(ops, spans):
        items = app["processes"] if op in ("mktestdir", "rmtestdir", "readdir") else app["processes"] * app["items"]
        rows.append((names[op], items / (end - start) if end > start else 0.0))
    return rows


def real_runs(program: str, app: dict, spec: TwinSpec, say: Callable[[str], None]) -> dict[str, list[float]]:
    """``spec.reps`` real runs of the app on a local cluster started and
    mounted for them (and taken down after): per operation (numbered, as
    ``simulated`` keys them), its figure in each run."""
    from concerto.fsbench import BenchProblem, mounted_cluster

    if spec.throttle not in THROTTLES:
        raise TwinProblem(f"--throttle {spec.throttle}: the simulator's twin needs a device model; give one of "
                          f"{', '.join(THROTTLES)}")
    if os.geteuid() != 0:
        raise TwinProblem("the real side mounts the cluster and drops the page cache: run as root")
    cluster = local.ClusterSpec(servers=spec.servers, policy=spec.policy, throttle=spec.throttle,
                                stripe_unit=spec.stripe_unit, depth=spec.depth)
    real: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="concerto-twin-") as tmp:
        try:
            with mounted_cluster(Path(tmp), cluster, write_behind=spec.write_behind) as mnt:
                for rep in range(spec.reps):
                    say(f"real cluster: {program}, round {rep + 1}/{spec.reps}")
                    root = mnt / f"round{rep}"
                    root.mkdir()
                    for i, (name, value) in enumerate(real_once(program, app, root)):
                        real.setdefault(f"{i}:{name}", []).append(value)
        except (BenchProblem, local.ClusterError) as e:
            raise TwinProblem(str(e)) from e
    return real


def run(command: str, spec: TwinSpec, out: Path, processes: int | None = None,
        say: Callable[[str], None] = print) -> dict:
    """Both sides of one command line; writes ``twin.json`` and returns it."""
    program, app = imported(command, processes)
    say(f"simulator: {program}, {app['processes']} tasks")
    sim = simulated(program, app, spec)
    real = real_runs(program, app, spec, say)
    if list(real) != list(sim):
        raise TwinProblem(f"the two sides ran different operations: real {list(real)}, simulated {list(sim)}")
    rows = []
    for key, runs in real.items():
        r = statistics.median(runs)
        rows.append({"operation": key.split(":", 1)[1], "real": r, "real_runs": runs, "sim": sim[key],
                     "sim_over_real": sim[key] / r if r > 0 else None})
    result = {"command": command, "program": program, "app": app, "cluster": asdict(spec),
              "unit": "MiB/s" if program == "ior" else "ops/s", "rows": rows}
    write_json(out / "twin.json", result)
    return result
