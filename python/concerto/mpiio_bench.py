"""``concerto bench mpiio``: resonant I/O on real servers.

The resonance paper's demonstration program and a noncontig pattern
(benches/mpiio/collbench.c, an MPI program of our own) run with four ranks
on a local cluster of four HDD-class servers (throttle ``hdd``: one request
at a time per disk, a seek whenever an access does not continue the
previous one, 64 KiB stripes), reading and writing:

- through Concerto's MPI-IO library (``concerto mpirun``), with each of
  core's planners: independent, two-phase (every rank an aggregator, and
  one aggregator as ROMIO chooses on one node) and resonant;
- through the FUSE mount with ROMIO's own two-phase collective I/O (Open
  MPI's ``romio321`` component, collective buffering enabled);
- in the simulator, on the device model the throttle enforces, with the
  same accesses (core's ``client::collective::patterns``) and planners.

Writes ``mpiio.json`` and prints the table, with each real rate over the
simulator's prediction.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from concerto import cluster as local
from concerto.demo import emulated_cluster_toml
from concerto.report import write_json
from concerto.sim import ScenarioSource, simulate

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "benches" / "mpiio" / "collbench.c"
SERVERS, PROCESSES, STRIPE_UNIT, DEPTH = 4, 4, 64 * 1024, 8
# Concerto's ways: a name, the strategy and hints (as the simulator's
# [apps.collective] keys). Two-phase with one aggregator is what ROMIO
# chooses when every rank is on one node (cb_nodes = the nodes), as here.
WAYS = {
    "independent": ("independent", {}),
    "two-phase": ("two-phase", {}),
    "two-phase-1": ("two-phase", {"cb_nodes": 1}),
    "resonant": ("resonant", {}),
}
# (pattern, its parameter, the simulator's access spec); calls per run
PATTERNS = {
    "demo": (65536, "demo:segment=64KiB"),
    "noncontig": (4096, "noncontig:elmtcount=4096,call=4MiB"),
}
CALLS = 16
# Open MPI: where ranks outnumber cores it yields while it waits (MPICH's
# ranks spin, and its collectives then cost tens of milliseconds here).
LAUNCHER = "mpirun.openmpi"
COMPILER = "mpicc.openmpi"
# The way that is not Concerto's: ROMIO through the mount.
ROMIO = "romio-on-mount"


class BenchProblem(Exception):
    """The benchmark cannot run; the message says why."""


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An MPI job's environment: no configured cluster (the command names
    it), Open MPI as root and oversubscribed, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("CONCERTO_CLUSTER",)}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", **(extra or {}))
    return env


def _rate(run: subprocess.CompletedProcess, what: str) -> float:
    if run.returncode != 0:
        raise BenchProblem(f"{what} failed: {run.stderr.strip()[-2000:]}")
    for line in run.stdout.splitlines():
        if line.startswith("MBps "):
            return float(line.split()[1])
    raise BenchProblem(f"{what} printed no rate: {run.stdout!r}")


def run_real(program: Path, cluster: Path, mnt: Path, pattern: str, op: str, how: str, rep: int,
             name: str | None = None) -> float:
    """One timed run: ``how`` is a strategy (Concerto's MPI-IO) or ``romio-on-mount``."""
    param = str(PATTERNS[pattern][0])
    env = job_env()
    if how == ROMIO:
        name = f"{pattern}-{op}-{how}-{rep}"
        if op == "read":
            # Written through Concerto's library first, so that no page of
            # it is in the mount's (kernel's) cache: the read goes to the servers.
            run_real(program, cluster, mnt, pattern, "write", "resonant", rep, name=name)
            op = "read-existing"
        env["OMPI_MCA_io"] = "romio321"
        command = [LAUNCHER, "-n", str(PROCESSES), str(program), str(mnt / name), pattern, param, str(CALLS), op]
    else:
        strategy, hints = WAYS[how]
        command = [sys.executable, "-m", "concerto", "mpirun", "--cluster", str(cluster), "--launcher", LAUNCHER,
                   "-n", str(PROCESSES), str(program), f"concerto:/{name or f'{pattern}-{op}-{how}-{rep}'}", pattern, param,
                   str(CALLS), op, strategy, *(f"{k}={v}" for k, v in hints.items())]
    return _rate(subprocess.run(command, capture_output=True, text=True, timeout=600, env=env),
                 f"{pattern} {op} {how}")


def sim_scenario(pattern: str, op: str, how: str) -> str:
    strategy, hints = WAYS[how]
    options = "".join(f"{k} = {v}\n" for k, v in hints.items())
    return f"""
name = "mpiio-{pattern}-{op}-{strategy}"
{emulated_cluster_toml(SERVERS, STRIPE_UNIT, DEPTH)}
[policy]
kind = "fifo"
[[apps]]
name = "{pattern}"
workload = "collective"
access = "{PATTERNS[pattern][1]}"
op = "{op}"
processes = {PROCESSES}
requests = {CALLS}
[apps.collective]
strategy = "{strategy}"
romio_cb = "automatic"
{options}"""


def run_sim(pattern: str, op: str, how: str, reps: int) -> float:
    """The simulator's prediction: the application's bandwidth in MB/s, mean over ``reps`` seeds."""
    result = simulate(ScenarioSource(text=sim_scenario(pattern, op, how), label=f"mpiio-{pattern}"),
                      reps=reps)
    return statistics.mean(r["apps"][0]["bandwidth_Bps"] for r in result["runs"]) / 1e6


def compile_program(compiler: str, source: Path, exe: Path) -> Path:
    """``source`` built with the MPI library's ``compiler`` into ``exe``."""
    try:
        subprocess.run([compiler, "-O2", "-o", str(exe), str(source)], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise BenchProblem(f"cannot build {source} with {compiler}: {getattr(e, 'stderr', e)}") from e
    return exe


def build(directory: Path) -> Path:
    return compile_program(COMPILER, PROGRAM, directory / "collbench")


def run(out: Path, quick: bool, say: Callable[[str], None] = print) -> dict:
    """Every (pattern, op, way) on the real cluster, ``reps`` rounds interleaved, and the simulator's
    prediction for each of Concerto's strategies; the medians, with real / simulated."""
    from concerto.fsbench import BenchProblem as MountProblem
    from concerto.fsbench import mounted_cluster

    reps = 1 if quick else 3
    ways = (*WAYS, ROMIO)
    runs: dict[tuple[str, str, str], list[float]] = {}
    spec = local.ClusterSpec(servers=SERVERS, policy="fifo", throttle="hdd", stripe_unit=STRIPE_UNIT, depth=DEPTH)
    with tempfile.TemporaryDirectory(prefix="concerto-mpiio-") as tmp:
        program = build(Path(tmp))
        try:
            # No write-behind: a write through the mount has reached the
            # servers when it returns, as one through the library has.
            with mounted_cluster(Path(tmp), spec, write_behind="0") as mnt:
                cluster = Path(tmp) / "cluster" / "cluster.toml"
                for rep in range(reps):
                    for pattern in PATTERNS:
                        for op in ("write", "read"):
                            for how in ways:
                                say(f"round {rep + 1}/{reps}: {pattern} {op}, {how}")
                                rate = run_real(program, cluster, mnt, pattern, op, how, rep)
                                runs.setdefault((pattern, op, how), []).append(rate)
        except MountProblem as e:
            raise BenchProblem(str(e)) from e
    rows = []
    for (pattern, op, how), rates in runs.items():
        sim = run_sim(pattern, op, how, 3) if how in WAYS else None
        real = statistics.median(rates)
        rows.append({"pattern": pattern, "op": op, "way": how, "real_MBps": real, "runs_MBps": rates,
                     "sim_MBps": sim, "real_over_sim": real / sim if sim else None})
    result = {"servers": SERVERS, "processes": PROCESSES, "stripe_unit": STRIPE_UNIT, "calls": CALLS,
              "throttle": "hdd", "launcher": LAUNCHER, "reps": reps,
              "patterns": {k: v[1] for k, v in PATTERNS.items()}, "rows": rows}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "mpiio.json", result)
    return result


def gains(result: dict) -> dict[tuple[str, str], dict[str, float]]:
    """Per (pattern, op): resonant over two-phase, real and simulated."""
    by = {(r["pattern"], r["op"], r["way"]): r for r in result["rows"]}
    out = {}
    for pattern in PATTERNS:
        for op in ("write", "read"):
            res, two = by.get((pattern, op, "resonant")), by.get((pattern, op, "two-phase"))
            if res and two:
                out[(pattern, op)] = {"real": res["real_MBps"] / two["real_MBps"],
                                      "sim": res["sim_MBps"] / two["sim_MBps"]}
    return out
