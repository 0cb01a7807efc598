"""Darshan logs as simulator workloads (``concerto sim workload from-darshan``).

A log with DXT records (``DXT_POSIX``, else ``DXT_MPIIO``) becomes a
request trace (docs/workloads.md): every traced read and write of every
rank, with its file, offset, length and start time, in the order the rank
issued them. A log with counters only becomes a job-level workload of
phases: the job's I/O intervals (where its files were being read or
written, from the POSIX counters' timestamps), each with the bytes moved in
it and the compute time before it.

The log is read with PyPI's ``darshan`` (pydarshan); nothing of Darshan's
format is parsed here.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path


class DarshanImportError(ValueError):
    """A log that cannot become a workload; the message says which log and why."""


@contextlib.contextmanager
def _report(path: Path):
    """The log, read whole, closed on leaving. Closed here and not left to
    the garbage collector: pydarshan closes a report it finalizes through
    cffi, and a finalizer that runs while cffi is parsing a type for
    another report deadlocks on cffi's lock (seen in the test suite)."""
    try:
        import darshan
    except ImportError as e:  # the environment is broken, not the log
        raise DarshanImportError(f"reading Darshan logs needs PyPI's darshan package ({e})") from e
    if not Path(path).is_file():
        raise DarshanImportError(f"{path}: no such file")
    _check_readable(Path(path))
    try:
        report = darshan.DarshanReport(str(path), read_all=True)
    except Exception as e:  # pydarshan raises bare RuntimeErrors and worse for a damaged log
        raise DarshanImportError(f"{path}: not a Darshan log pydarshan can read ({e})") from e
    with report:
        yield report


# Reads a log whole in a child process (see _check_readable).
_PROBE = "import sys, darshan\nwith darshan.DarshanReport(sys.argv[1], read_all=True):\n    pass\n"


def _check_readable(path: Path) -> None:
    """Reads the log once in a child process first: Darshan's C reader
    crashes on some damaged logs (a flipped byte: a segmentation fault) and
    reads others in part, saying so only on standard error. Either is a
    damaged log, named as one, and never takes this process down."""
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise DarshanImportError(f"{path}: a damaged Darshan log: the reader did not finish in 300 s") from None
    complaints = [line.removeprefix("Error:").strip() for line in r.stderr.splitlines() if line.startswith("Error:")]
    said = f" (the reader says: {'; '.join(complaints[:3])})" if complaints else ""
    if r.returncode < 0:
        raise DarshanImportError(f"{path}: a damaged Darshan log: the reader crashed on it "
                                 f"({signal.Signals(-r.returncode).name}){said}")
    if r.returncode != 0:
        last = r.stderr.strip().splitlines()[-1:]
        raise DarshanImportError(f"{path}: not a Darshan log pydarshan can read"
                                 f"{said or (' (' + last[0] + ')' if last else '')}")
    if complaints:
        raise DarshanImportError(f"{path}: a damaged Darshan log: read only in part{said}")


def _dxt_module(report) -> str | None:
    for module in ("DXT_POSIX", "DXT_MPIIO"):
        if module in report.records and len(report.records[module]) > 0:
            return module
    return None


def has_dxt(path: Path) -> bool:
    with _report(path) as report:
        return _dxt_module(report) is not None


def to_trace(path: Path, name: str | None = None) -> dict:
    """The log's DXT records as a trace (one application, one rank per process)."""
    with _report(path) as report:
        return _trace(path, report, name)


def _trace(path: Path, report, name: str | None) -> dict:
    module = _dxt_module(report)
    if module is None:
        raise DarshanImportError(f"{path}: no DXT records (the job ran without DXT tracing): use --phases for "
                                 "a workload from its counters")
    nprocs = int(report.metadata["job"]["nprocs"])
    files: list[str] = []
    index: dict[int, int] = {}
    per_rank: list[list[tuple[float, int, dict]]] = [[] for _ in range(nprocs)]
    for n, rec in enumerate(report.records[module].to_df()):
        rank = int(rec["rank"])
        if not 0 <= rank < nprocs:
            raise DarshanImportError(f"{path}: {module} record {n} is of rank {rank}, outside the job's "
                                     f"{nprocs} processes")
        file_id = rec["id"]
        if file_id not in index:
            index[file_id] = len(files)
            files.append(report.name_records.get(file_id, str(file_id)))
        for op, segments in (("write", rec["write_segments"]), ("read", rec["read_segments"])):
            if len(segments) == 0:  # pydarshan's empty frame has no columns
                continue
            for offset, length, start in zip(segments["offset"], segments["length"], segments["start_time"]):
                if int(length) <= 0:
                    continue  # a zero-byte call moves nothing
                per_rank[rank].append((float(start), len(per_rank[rank]), {
                    "op": op, "file": index[file_id], "offset": int(offset), "length": int(length),
                    "at": round(max(float(start), 0.0), 9)}))
    ranks = [[req for _, _, req in sorted(rank)] for rank in per_rank]
    if not any(ranks):
        raise DarshanImportError(f"{path}: the {module} records hold no read or write of any byte")
    job = report.metadata["job"]
    return {
        "format": "concerto-trace",
        "version": 1,
        "source": {"darshan_log": str(path), "module": module, "jobid": job.get("jobid"), "nprocs": nprocs},
        "apps": [{"name": name or f"job{job.get('jobid', 0)}", "files": files, "ranks": ranks}],
    }


def totals(path: Path) -> dict[int, dict[str, int]]:
    """Bytes and operations per rank that pydarshan's POSIX counters report
    (rank -1, a file shared by all, spread over none: kept as -1)."""
    with _report(path) as report:
        if "POSIX" not in report.records:
            raise DarshanImportError(f"{path}: no POSIX records")
        c = report.records["POSIX"].to_df()["counters"]
    out: dict[int, dict[str, int]] = {}
    for rank, read, written, reads, writes in zip(c["rank"], c["POSIX_BYTES_READ"], c["POSIX_BYTES_WRITTEN"],
                                                  c["POSIX_READS"], c["POSIX_WRITES"]):
        t = out.setdefault(int(rank), {"bytes_read": 0, "bytes_written": 0, "reads": 0, "writes": 0})
        t["bytes_read"] += int(read)
        t["bytes_written"] += int(written)
        t["reads"] += int(reads)
        t["writes"] += int(writes)
    return out


def to_phases(path: Path, bandwidth: float, name: str | None = None) -> dict:
    """The log's POSIX counters as a job-level workload (the fluid mode's
    format): each interval in which some file was being read or written is
    one I/O phase with the bytes moved in it; the time between intervals
    (and before the first) is compute."""
    if not bandwidth > 0:
        raise DarshanImportError("--bandwidth: the platform's bandwidth must be > 0")
    with _report(path) as report:
        if "POSIX" not in report.records or len(report.records["POSIX"]) == 0:
            raise DarshanImportError(f"{path}: no POSIX records to take phases from")
        df = report.records["POSIX"].to_df()
        job = dict(report.metadata["job"])
    c, f = df["counters"], df["fcounters"]
    spans = []
    for i in range(len(c)):
        moved = int(c["POSIX_BYTES_READ"].iloc[i]) + int(c["POSIX_BYTES_WRITTEN"].iloc[i])
        if moved <= 0:
            continue
        starts = [float(f[k].iloc[i]) for k in ("POSIX_F_READ_START_TIMESTAMP", "POSIX_F_WRITE_START_TIMESTAMP")
                  if float(f[k].iloc[i]) > 0]
        ends = [float(f[k].iloc[i]) for k in ("POSIX_F_READ_END_TIMESTAMP", "POSIX_F_WRITE_END_TIMESTAMP")
                if float(f[k].iloc[i]) > 0]
        if not starts or not ends:
            raise DarshanImportError(f"{path}: POSIX record {i} moved {moved} bytes but has no read or write "
                                     "timestamps")
        spans.append((min(starts), max(ends), moved))
    if not spans:
        raise DarshanImportError(f"{path}: the POSIX counters show no byte read or written")
    spans.sort()
    phases: list[list[float]] = []
    begin, end, moved = spans[0]
    last_end = 0.0
    for s, e, b in spans[1:]:
        if s <= end:  # overlapping: the same phase
            end, moved = max(end, e), moved + b
        else:
            phases.append([max(begin - last_end, 0.0), float(moved)])
            last_end = end
            begin, end, moved = s, e, b
    phases.append([max(begin - last_end, 0.0), float(moved)])
    return {
        "bandwidth": float(bandwidth),
        "source": {"darshan_log": str(path), "jobid": job.get("jobid"), "nprocs": int(job["nprocs"])},
        "apps": [{"name": name or f"job{job.get('jobid', 0)}", "release_s": 0.0, "phases": phases}],
    }
