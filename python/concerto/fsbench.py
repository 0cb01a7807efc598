"""``concerto bench fs``: the real file system measured as its users
measure one — fio and a metadata loop through the FUSE mount — beside the
local file system and any other mounted file systems given, in one run.

Rounds rotate the order of the file systems, so that a machine whose speed
drifts (this one does) favours none; every figure is the median over the
rounds, and each ratio is Concerto's median over the other's. The rows:

- fio, sequential write of 1 MiB blocks, ``--size`` in all, fsync at the end;
- fio, sequential read of the same, the page cache dropped first;
- fio, 4 KiB random reads and writes with O_DIRECT (``--runtime`` each);
- fio, four jobs each writing a quarter of ``--size`` in 1 MiB blocks;
- creates, stats and unlinks of ``--files`` files in one directory by one
  process, as mdtest's phases (the kernel's name cache dropped before the
  stats, so that each one reaches the file system; the unlinks follow);

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
    ("rand_read", "fio 4 KiB random read, direct", "IOPS"),
    ("rand_write", "fio 4 KiB random write, direct", "IOPS"),
    ("jobs4_write", "fio 4 jobs write 1 MiB, fsync", "MiB/s"),
    ("create", "create, per s", "ops/s"),
    ("stat", "stat, per s", "ops/s"),
    ("unlink", "unlink, per s", "ops/s"),
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


def _fio_rows(directory: Path, s: Settings) -> dict[str, float]:
    mib = float(1 << 20)
    size = f"{s.size_mib}m"
    out = {}
    job = _fio(directory, "--rw=write", "--bs=1m", f"--size={size}", "--end_fsync=1")
    out["seq_write"] = job["write"]["bw_bytes"] / mib
    _drop_caches(3)
    job = _fio(directory, "--rw=read", "--bs=1m", f"--size={size}")
    out["seq_read"] = job["read"]["bw_bytes"] / mib
    timed = ["--bs=4k", "--direct=1", "--size=256m", f"--runtime={s.runtime_s}", "--time_based"]
    out["rand_read"] = _fio(directory, "--rw=randread", *timed)["read"]["iops"]
    out["rand_write"] = _fio(directory, "--rw=randwrite", *timed)["write"]["iops"]
    job = _fio(directory, "--rw=write", "--bs=1m", f"--size={s.size_mib // 4}m", "--numjobs=4",
               "--group_reporting", "--end_fsync=1")
    out["jobs4_write"] = job["write"]["bw_bytes"] / mib
    for f in directory.iterdir():
        if f.name.startswith("bench."):
            f.unlink()
    return out


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
    # The names were just looked up, as in mdtest's removal phase.
    out["unlink"] = rate(os.unlink)
    d.rmdir()
    return out


def measure(targets: dict[str, Path], s: Settings, say=print) -> dict[str, dict[str, list[float]]]:
    """Every row on every target, ``s.rounds`` times, the order rotated each round."""
    results: dict[str, dict[str, list[float]]] = {t: {k: [] for k, _, _ in ROWS} for t in targets}
    names = list(targets)
    for r in range(s.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for t in order:
            say(f"round {r + 1}/{s.rounds}: {t}")
            row = _fio_rows(targets[t], s) | _metadata_rows(targets[t], s)
            for k, v in row.items():
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
