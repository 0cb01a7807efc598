"""IOR's MPI-IO patterns through Concerto's MPI-IO library beside plain
``mpirun`` on the FUSE mount (Open MPI's OMPIO and ROMIO), four ranks on
four HDD-class servers, every way back to back in each round with the
order rotated; prints each way's median write MiB/s per pattern
(docs/performance.md, "IOR's patterns"). Needs root (the mount).

    .venv/bin/python benches/mpiio/ior_patterns.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from concerto import cluster as local
from concerto.fsbench import mounted_cluster

HERE = Path(__file__).resolve().parent
# (name, iorlike's arguments: transfer, block, segments, independent|collective)
PATTERNS = {
    "-t 1m -b 16m": ["1048576", "16777216", "1", "independent"],
    "-c -t 64k -b 64k -s 64": ["65536", "65536", "64", "collective"],
    "-t 64k -b 64k -s 64": ["65536", "65536", "64", "independent"],
}
RANKS = "4"
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def write_rate(command: list[str]) -> float:
    r = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{r.stdout}{r.stderr}")
    return float(r.stdout.split()[1])


def main(rounds: int) -> None:
    rates: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="concerto-ior-patterns-") as tmp:
        program = Path(tmp) / "iorlike"
        subprocess.run(["mpicc.openmpi", "-O2", "-o", str(program), str(HERE / "iorlike.c")], check=True)
        spec = local.ClusterSpec(servers=4, throttle="hdd", stripe_unit=64 << 10, depth=8, policy="fifo")
        with mounted_cluster(Path(tmp) / "fs", spec) as mnt:
            cluster = str(Path(tmp) / "fs" / "cluster" / "cluster.toml")
            k = 0
            for r in range(rounds):
                for name, args in PATTERNS.items():
                    ways = {
                        "library": [sys.executable, "-m", "concerto", "mpirun", "--cluster", cluster,
                                    "--launcher", "mpirun.openmpi", "-n", RANKS, str(program), f"concerto:/f{k}",
                                    *args],
                        "OMPIO on the mount": ["mpirun.openmpi", "--mca", "io", "ompio", "-n", RANKS, str(program),
                                               str(mnt / f"o{k}"), *args],
                        "ROMIO on the mount": ["mpirun.openmpi", "--mca", "io", "romio321", "-n", RANKS,
                                               str(program), str(mnt / f"r{k}"), *args],
                    }
                    order = list(ways)[r % 3:] + list(ways)[:r % 3]
                    for way in order:
                        k += 1
                        rates.setdefault((name, way), []).append(write_rate(ways[way]))
    for (name, way), values in rates.items():
        print(f"{name:24s} {way:20s} median {statistics.median(values):7.1f}  runs {[round(v) for v in values]}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
