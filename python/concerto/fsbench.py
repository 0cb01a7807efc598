"""``concerto bench fs``: the real file system measured as its users
measure one — fio and a metadata loop through the FUSE mount — beside the
local file system and any other mounted file systems given, in one run.

Each measurement runs on every file system back to back, in an order that
rotates from measurement to measurement and round to round, so that a
machine whose speed drifts (this one does) favours none; every figure is
the median over the rounds, and each ratio is Concerto's median over the
other's. The rows:

- fio, sequential write of 1 MiB blocks, ``--size`` in all, fsync at the end;
- fio, sequential read of the same, the page cache dropped first;
- fio, sequential 4 KiB buffered reads of the same, the page cache dropped
  first (cold), and read again from the page cache (warm);
- fio, sequential 4 KiB buffered writes of a quarter of ``--size``, fsync;
- IOR's ``-w -r`` file per process: four jobs write their files (a quarter
  of ``--size`` each), then read them back at once (caches kept);
- fio, 4 KiB random reads and writes with O_DIRECT (``--runtime`` each);
- fio, four jobs each writing a quarter of ``--size`` in 1 MiB blocks;
- creates, stats, ``ls -l`` and unlinks of ``--files`` files in one
  directory by one process, as mdtest's phases (the kernel's caches
  dropped before the stats and the listing, so that they reach the file
  system; the unlinks follow);

and, on a four-server cluster throttled like HDDs, IOR's shared-file
pattern (``-t 64k -b 64k -s 1024``) by one and by four processes through
the mount, with writes behind (the default) and written through.

Needs root (mounts, ``drop_caches``) and fio.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from concerto import cluster as local

ROWS = [
    ("seq_write", "fio seq write 1 MiB, fsync", "MiB/s"),
    ("seq_read", "fio seq read 1 MiB, caches dropped", "MiB/s"),
    ("read4k_cold", "fio seq read 4 KiB, buffered, caches dropped", "MiB/s"),
    ("read4k_warm", "fio seq read 4 KiB, buffered, cached", "MiB/s"),
    ("write4k", "fio seq write 4 KiB, buffered, fsync", "MiB/s"),
    ("read_after_write", "4 jobs write then read their files", "MiB/s"),
    ("rand_read", "fio 4 KiB random read, direct", "IOPS"),
    ("rand_write", "fio 4 KiB random write, direct", "IOPS"),
    ("jobs4_write", "fio 4 jobs write 1 MiB, fsync", "MiB/s"),
    ("create", "create, per s", "ops/s"),
    ("stat", "stat, per s", "ops/s"),
    ("unlink", "unlink, per s", "ops/s"),
    ("ls_l", "ls -l of --files files, caches dropped", "entries/s"),
]


# The name of the Concerto cluster measured with a MAC on every frame.
INTEGRITY = "concerto-integrity"


class BenchProblem(RuntimeError):
    """What stops the benchmark (a missing tool, a mount that fails); the message says what."""


@dataclass
class Settings:
    size_mib: int = 1024
    runtime_s: int = 5
    files: int = 2000
    rounds: int = 3
    # IOR's -s for the shared file, and its rounds.
    segments: int = 1024
    shared_rounds: int = 3
    # Also measure a second Concerto cluster whose servers require a MAC on
    # every frame (`integrity = "always"`), beside the first, in the same rounds.
    integrity: bool = False

    @staticmethod
    def quick() -> Settings:
        """A run of a minute that shows the shape, not figures to quote."""
        return Settings(size_mib=64, runtime_s=1, files=100, rounds=1, segments=64, shared_rounds=1)


def _drop_caches(what: int) -> None:
    subprocess.run(["sync"], check=False)
    Path("/proc/sys/vm/drop_caches").write_text(str(what))


def _fio(directory: Path, *args: str) -> dict:
    r = subprocess.run(["fio", "--name=bench", f"--directory={directory}", "--ioengine=psync",
                        "--output-format=json", *args], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise BenchProblem(f"fio {' '.join(args)} in {directory}: {r.stderr.strip() or r.stdout.strip()}")
    report = json.loads(r.stdout[r.stdout.index("{"):])
    return report["jobs"][0]


MIB = float(1 << 20)


def _remove(directory: Path, prefix: str = "bench.") -> None:
    for f in directory.iterdir():
        if f.name.startswith(prefix):
            f.unlink()


def _seq_write(directory: Path, s: Settings) -> float:
    job = _fio(directory, "--rw=write", "--bs=1m", f"--size={s.size_mib}m", "--end_fsync=1")
    _remove(directory)
    return job["write"]["bw_bytes"] / MIB


def _laid_out(directory: Path, s: Settings) -> None:
    """The file the read rows read (fio's own name for it), written and synced."""
    _fio(directory, "--rw=write", "--bs=1m", f"--size={s.size_mib}m", "--end_fsync=1")


def _seq_read(directory: Path, s: Settings, bs: str = "1m") -> float:
    _laid_out(directory, s)
    _drop_caches(3)
    job = _fio(directory, "--rw=read", f"--bs={bs}", f"--size={s.size_mib}m")
    _remove(directory)
    return job["read"]["bw_bytes"] / MIB


def _read4k_warm(directory: Path, s: Settings) -> float:
    _laid_out(directory, s)
    # Read once (what warms the cache), then again without fio's own
    # dropping of the file's cached pages before it starts.
    _fio(directory, "--rw=read", "--bs=1m", f"--size={s.size_mib}m")
    job = _fio(directory, "--rw=read", "--bs=4k", f"--size={s.size_mib}m", "--invalidate=0")
    _remove(directory)
    return job["read"]["bw_bytes"] / MIB


def _write4k(directory: Path, s: Settings) -> float:
    job = _fio(directory, "--rw=write", "--bs=4k", f"--size={max(s.size_mib // 4, 1)}m", "--end_fsync=1")
    _remove(directory)
    return job["write"]["bw_bytes"] / MIB


def _read_after_write(directory: Path, s: Settings) -> float:
    """IOR ``-w -r`` file per process: four jobs write their files, then read them back at once."""
    each = f"{max(s.size_mib // 4, 1)}m"
    jobs = ("--bs=1m", f"--size={each}", "--numjobs=4", "--group_reporting")
    _fio(directory, "--rw=write", *jobs, "--end_fsync=1")
    job = _fio(directory, "--rw=read", *jobs, "--invalidate=0")
    _remove(directory)
    return job["read"]["bw_bytes"] / MIB


def _random(directory: Path, s: Settings, rw: str) -> float:
    timed = ["--bs=4k", "--direct=1", "--size=256m", f"--runtime={s.runtime_s}", "--time_based"]
    job = _fio(directory, f"--rw={rw}", *timed)
    _remove(directory)
    return job["read" if rw == "randread" else "write"]["iops"]


def _jobs4_write(directory: Path, s: Settings) -> float:
    job = _fio(directory, "--rw=write", "--bs=1m", f"--size={max(s.size_mib // 4, 1)}m", "--numjobs=4",
               "--group_reporting", "--end_fsync=1")
    _remove(directory)
    return job["write"]["bw_bytes"] / MIB


def _metadata_rows(directory: Path, s: Settings) -> dict[str, float]:
    d = directory / f"meta-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    names = [str(d / f"f{i:06d}") for i in range(s.files)]

    def rate(op) -> float:
        t = time.perf_counter()
        for p in names:
            op(p)
        return len(names) / (time.perf_counter() - t)

    out = {"create": rate(lambda p: os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)))}
    _drop_caches(2)
    out["stat"] = rate(os.stat)
    _drop_caches(3)
    t = time.perf_counter()
    listed = subprocess.run(["ls", "-l", d], capture_output=True, check=True).stdout.count(b"\n") - 1
    out["ls_l"] = listed / (time.perf_counter() - t)
    # The names were just looked up, as in mdtest's removal phase.
    out["unlink"] = rate(os.unlink)
    d.rmdir()
    return out


# Each measurement: its rows' names and what measures them on one file
# system (leaving nothing behind). Rotated separately, so that every file
# system is measured first as often as any other for each.
MEASUREMENTS = [
    (("seq_write",), lambda d, s: {"seq_write": _seq_write(d, s)}),
    (("seq_read",), lambda d, s: {"seq_read": _seq_read(d, s)}),
    (("read4k_cold",), lambda d, s: {"read4k_cold": _seq_read(d, s, bs="4k")}),
    (("read4k_warm",), lambda d, s: {"read4k_warm": _read4k_warm(d, s)}),
    (("write4k",), lambda d, s: {"write4k": _write4k(d, s)}),
    (("read_after_write",), lambda d, s: {"read_after_write": _read_after_write(d, s)}),
    (("rand_read",), lambda d, s: {"rand_read": _random(d, s, "randread")}),
    (("rand_write",), lambda d, s: {"rand_write": _random(d, s, "randwrite")}),
    (("jobs4_write",), lambda d, s: {"jobs4_write": _jobs4_write(d, s)}),
    (("create", "stat", "ls_l", "unlink"), _metadata_rows),
]


def measure(targets: dict[str, Path], s: Settings, say=print) -> dict[str, dict[str, list[float]]]:
    """Every row on every target, ``s.rounds`` times: each measurement runs
    on every target back to back, in an order rotated from measurement to
    measurement and from round to round (a load that changes meanwhile
    then lands on every file system alike, not on one's block of rows)."""
    results: dict[str, dict[str, list[float]]] = {t: {k: [] for k, _, _ in ROWS} for t in targets}
    names = list(targets)
    turn = 0
    for r in range(s.rounds):
        for rows, run in MEASUREMENTS:
            order = names[turn % len(names):] + names[:turn % len(names)]
            turn += 1
            for t in order:
                say(f"round {r + 1}/{s.rounds}: {', '.join(rows)} on {t}")
                for k, v in run(targets[t], s).items():
                    results[t][k].append(v)
    return results


def summary(results: dict[str, dict[str, list[float]]]) -> dict:
    """Medians per target and row, and Concerto's ratio to every other target."""
    medians = {t: {k: statistics.median(v) for k, v in rows.items() if v} for t, rows in results.items()}
    ours = medians.get("concerto", {})
    ratios = {t: {k: ours[k] / v for k, v in m.items() if k in ours and v > 0}
              for t, m in medians.items() if t != "concerto"}
    return {"medians": medians, "ratios": ratios, "runs": results}


def _strided_rank(path: str, rank: int, ranks: int, segments: int, block: int, start, q) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    buf = bytes([rank + 1]) * block
    start.wait()
    t = time.perf_counter()
    for s in range(segments):
        os.pwrite(fd, buf, (s * ranks + rank) * block)
    os.fsync(fd)
    os.close(fd)
    q.put(time.perf_counter() - t)


def shared_file_rate(path: Path, ranks: int, segments: int = 1024, block: int = 64 << 10) -> float:
    """IOR ``-t 64k -b 64k -s SEGMENTS`` by ``ranks`` processes on one file: MiB/s, the slowest rank's time."""
    path.unlink(missing_ok=True)
    ctx = mp.get_context("spawn")
    start, q = ctx.Barrier(ranks), ctx.Queue()
    procs = [ctx.Process(target=_strided_rank, args=(str(path), r, ranks, segments, block, start, q))
             for r in range(ranks)]
    for p in procs:
        p.start()
    times = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
        if p.exitcode != 0:
            raise BenchProblem(f"a writer of {path} failed (exit code {p.exitcode})")
    return ranks * segments * block / max(times) / (1 << 20)


@contextmanager
def mounted_cluster(directory: Path, spec: local.ClusterSpec, write_behind: str = "16MiB"):
    """A local cluster and its FUSE mount, both gone at the end (even on failure)."""
    cluster_file = local.up(directory / "cluster", spec)
    mnt = directory / "mnt"
    mnt.mkdir(exist_ok=True)
    ready = directory / "mount.json"
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "concerto", "mount", "--cluster", str(cluster_file), str(mnt),
                             "--ready-file", str(ready), "--write-behind", write_behind],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if proc.poll() is not None:
                raise BenchProblem(f"the mount did not come up: {proc.stderr.read().strip()}")
            if time.monotonic() > deadline:
                raise BenchProblem("the mount did not come up within a minute")
            time.sleep(0.05)
        yield mnt
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        local.down(directory / "cluster")


def shared_file(out: Path, s: Settings, say=print) -> dict:
    """One and four processes' strided writes to one file, on HDD-class servers, with and without write-behind."""
    rows: dict[str, dict[str, list[float]]] = {}
    for mode, write_behind in (("write-behind", "16MiB"), ("write-through", "0")):
        with mounted_cluster(out / f"hdd-{mode}", local.ClusterSpec(servers=4, policy="fifo", throttle="hdd",
                                                                       stripe_unit=64 << 10), write_behind) as mnt:
            for r in range(s.shared_rounds):
                for ranks in (1, 4):
                    say(f"shared file, {mode}, {ranks} process{'es' if ranks > 1 else ''}, round {r + 1}/{s.shared_rounds}")
                    rate = shared_file_rate(mnt / "ior", ranks, s.segments)
                    rows.setdefault(mode, {}).setdefault(str(ranks), []).append(rate)
    return {mode: {ranks: statistics.median(v) for ranks, v in by.items()} | {"runs": by}
            for mode, by in rows.items()}


def run(out: Path, compare: dict[str, Path], s: Settings, say=print) -> dict:
    """The whole benchmark; writes ``out/fsbench.json`` and returns what it holds."""
    if shutil.which("fio") is None:
        raise BenchProblem("fio is not installed (apt-get install fio)")
    if os.geteuid() != 0:
        raise BenchProblem("the file-system benchmark mounts and drops caches: run it as root")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="concerto-fsbench-", dir=out) as work:
        work = Path(work)
        local_dir = work / "local"
        local_dir.mkdir()
        with contextlib.ExitStack() as mounts:
            mnt = mounts.enter_context(mounted_cluster(work / "concerto", local.ClusterSpec(servers=4, policy="fifo")))
            targets = {"concerto": mnt, "local": local_dir} | compare
            if s.integrity:
                targets[INTEGRITY] = mounts.enter_context(mounted_cluster(
                    work / INTEGRITY, local.ClusterSpec(servers=4, policy="fifo", integrity="always")))
            result = summary(measure(targets, s, say))
        result["shared_file"] = shared_file(work, s, say)
    result["settings"] = s.__dict__
    (out / "fsbench.json").write_text(json.dumps(result, indent=1))
    return result
