"""IOR's MPI-IO patterns (``concerto bench mpiio``'s second part):
Concerto's MPI-IO library beside plain ``mpirun`` on the FUSE mount of the
same cluster, under Open MPI (its OMPIO and its ROMIO, both named) and
MPICH (ROMIO), with 1, 2 and 4 ranks, on four HDD-class servers.

The program is ``benches/mpiio/iorlike.c`` (IOR is not packaged): one
shared file, IOR's offsets, each phase timed as IOR times it, from a
barrier before the open to the last rank's close, the write phase synced
before it closes (IOR's ``-e``). Every way of one (library, ranks,
pattern) runs back to back in each round, the order rotated round by
round: single runs swing 2-5x on a busy two-core machine, the ratio of
interleaved rounds much less. The write rates are compared; the read that
follows on the mount is served from the node's page cache (all ranks are
on one node), so it is recorded, not compared.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from concerto import cluster as local
from concerto.mpiio_bench import BenchProblem, compile_program, job_env
from concerto.report import write_json

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "benches" / "mpiio" / "iorlike.c"
SERVERS, STRIPE_UNIT, DEPTH = 4, 64 * 1024, 8
# IOR's command line -> iorlike's arguments (transfer, block, segments, how).
PATTERNS = {
    "-t 1m -b 16m": ("1048576", "16777216", "1", "independent"),
    "-c -t 64k -b 64k -s 64": ("65536", "65536", "64", "collective"),
    "-t 64k -b 64k -s 64": ("65536", "65536", "64", "independent"),
}
LIBRARY = "library"


@dataclass(frozen=True)
class Mpi:
    """One MPI library: how to build and launch, and its own MPI-IO on the mount."""

    compiler: str
    launcher: str
    # way name -> the environment that selects that MPI-IO component
    on_mount: dict[str, dict[str, str]]


MPIS = {
    "openmpi": Mpi("mpicc.openmpi", "mpirun.openmpi",
                   {"OMPIO on the mount": {"OMPI_MCA_io": "ompio"},
                    "ROMIO on the mount": {"OMPI_MCA_io": "romio321"}}),
    "mpich": Mpi("mpicc.mpich", "mpirun.mpich", {"ROMIO on the mount": {}}),
}


def _rates(command: list[str], env: dict[str, str], what: str) -> tuple[float, float]:
    """iorlike's "write MIB_S read MIB_S"."""
    try:
        r = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    except subprocess.TimeoutExpired as e:
        raise BenchProblem(f"{what} did not finish within 10 minutes") from e
    if r.returncode != 0:
        raise BenchProblem(f"{what} failed (exit {r.returncode}): {(r.stdout + r.stderr).strip()[-2000:]}")
    words = r.stdout.split()
    if len(words) < 4 or words[0] != "write" or words[2] != "read":
        raise BenchProblem(f"{what} printed no rates: {r.stdout!r}")
    return float(words[1]), float(words[3])


def build(mpi: str, directory: Path) -> Path:
    return compile_program(MPIS[mpi].compiler, PROGRAM, directory / f"iorlike-{mpi}")


def _commands(mpi: str, program: Path, cluster: Path, mnt: Path, ranks: int, args: tuple[str, ...],
              name: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Every way of one run: the library, and each of the MPI library's own MPI-IO on the mount."""
    m = MPIS[mpi]
    ways = {LIBRARY: ([sys.executable, "-m", "concerto", "mpirun", "--cluster", str(cluster), "--launcher",
                       m.launcher, "-n", str(ranks), str(program), f"concerto:/{name}-lib", *args], job_env())}
    for way, extra in m.on_mount.items():
        tag = way.split()[0].lower()
        ways[way] = ([m.launcher, "-n", str(ranks), str(program), str(mnt / f"{name}-{tag}"), *args], job_env(extra))
    return ways


def run(out: Path, mpis: list[str], ranks: list[int], rounds: int, say: Callable[[str], None] = print) -> dict:
    """Every (MPI library, ranks, pattern, way), ``rounds`` rounds with the ways rotated; the medians."""
    from concerto.fsbench import BenchProblem as MountProblem
    from concerto.fsbench import mounted_cluster

    runs: dict[tuple[str, int, str, str], list[tuple[float, float]]] = {}
    spec = local.ClusterSpec(servers=SERVERS, policy="fifo", throttle="hdd", stripe_unit=STRIPE_UNIT, depth=DEPTH)
    with tempfile.TemporaryDirectory(prefix="concerto-mpiio-ior-") as tmp:
        programs = {mpi: build(mpi, Path(tmp)) for mpi in mpis}
        try:
            # The mount as `concerto mount` starts it (16 MiB write-behind),
            # as the library's default holds writes behind too.
            with mounted_cluster(Path(tmp), spec) as mnt:
                cluster = Path(tmp) / "cluster" / "cluster.toml"
                k = 0
                for rnd in range(rounds):
                    for mpi in mpis:
                        for n in ranks:
                            for pattern, args in PATTERNS.items():
                                k += 1
                                ways = _commands(mpi, programs[mpi], cluster, mnt, n, args, f"f{k}")
                                order = list(ways)[rnd % len(ways):] + list(ways)[:rnd % len(ways)]
                                for way in order:
                                    say(f"round {rnd + 1}/{rounds}: {mpi}, {n} ranks, {pattern}, {way}")
                                    command, env = ways[way]
                                    rates = _rates(command, env, f"{mpi} {n} ranks {pattern} {way}")
                                    runs.setdefault((mpi, n, pattern, way), []).append(rates)
        except MountProblem as e:
            raise BenchProblem(str(e)) from e
    result = {"servers": SERVERS, "stripe_unit": STRIPE_UNIT, "throttle": "hdd", "rounds": rounds,
              "program": "benches/mpiio/iorlike.c", "rows": rows_of(runs)}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "mpiio-ior.json", result)
    return result


def rows_of(runs: dict[tuple[str, int, str, str], list[tuple[float, float]]]) -> list[dict]:
    """One row per (MPI library, ranks, pattern): each way's median write and read, and the
    library's write over the best MPI-IO on the mount."""
    rows: dict[tuple[str, int, str], dict] = {}
    for (mpi, n, pattern, way), rates in runs.items():
        row = rows.setdefault((mpi, n, pattern), {"mpi": mpi, "ranks": n, "pattern": pattern, "ways": {}})
        row["ways"][way] = {"write_MiBps": statistics.median(w for w, _ in rates),
                            "read_MiBps": statistics.median(r for _, r in rates),
                            "runs_write_MiBps": [w for w, _ in rates]}
    for row in rows.values():
        others = {w: v["write_MiBps"] for w, v in row["ways"].items() if w != LIBRARY}
        best = max(others, key=others.get) if others else None
        row["best_on_mount"] = best
        lib = row["ways"].get(LIBRARY)
        row["library_over_best"] = lib["write_MiBps"] / others[best] if lib and best and others[best] else None
    return list(rows.values())
