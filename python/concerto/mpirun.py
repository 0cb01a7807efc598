"""``concerto mpirun``: an MPI job whose MPI-IO on Concerto files is served
by Concerto (crates/concerto-mpiio).

It runs the installed ``mpirun`` with the MPI-IO library of that MPI
(Open MPI or MPICH: their libraries differ) preloaded in every rank, and
the cluster file and credential passed to every rank, so an unmodified
program's ``MPI_File_*`` calls on ``concerto:/PATH`` files (or files under
a Concerto mount) run core's collective plans over the client library.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from concerto.binaries import find_library
from concerto.fs import cluster_path

FLAVOURS = ("openmpi", "mpich")


class LaunchProblem(Exception):
    """``concerto mpirun`` cannot start the job; the message says why."""


def flavour_of(launcher: str) -> str:
    """Which MPI library a launcher belongs to (``openmpi`` or ``mpich``), from its ``--version``."""
    try:
        out = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchProblem(f"{launcher} --version: {e}") from e
    text = out.stdout + out.stderr
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if "HYDRA" in text or "MPICH" in text:
        return "mpich"
    raise LaunchProblem(f"{launcher} is neither Open MPI's nor MPICH's launcher "
                        f"(its --version says: {text.strip()[:200]!r})")


def command(args: list[str], *, launcher: str = "mpirun", cluster: Path | None = None) -> list[str]:
    """The launcher's command line for ``concerto mpirun ARGS``."""
    path = shutil.which(launcher)
    if path is None:
        raise LaunchProblem(f"{launcher} not found on PATH; install Open MPI or MPICH "
                            "(`make build` does on Debian)")
    flavour = flavour_of(path)
    library = find_library(f"libconcerto-mpiio-{flavour}.so")
    cluster_file = cluster_path(cluster)
    if not cluster_file.is_file():
        raise LaunchProblem(f"no cluster file at {cluster_file} (give --cluster, or set CONCERTO_CLUSTER)")
    env = {"LD_PRELOAD": library, "CONCERTO_CLUSTER": str(cluster_file.resolve())}
    credential = os.environ.get("CONCERTO_CREDENTIAL")
    if credential:
        env["CONCERTO_CREDENTIAL"] = str(Path(credential).resolve())
    passed: list[str] = openmpi_defaults(args) if flavour == "openmpi" else []
    for key, value in env.items():
        # Open MPI forwards -x VAR=VALUE; MPICH's Hydra -genv VAR VALUE.
        passed += ["-x", f"{key}={value}"] if flavour == "openmpi" else ["-genv", key, value]
    return [path, *passed, *args]


#: Options that say where the ranks go: with one, Open MPI's slots are the user's to manage.
PLACEMENT_OPTIONS = ("-H", "--host", "-host", "--hostfile", "-hostfile", "--machinefile", "-machinefile",
                     "--default-hostfile", "--oversubscribe", "--nooversubscribe", "--map-by", "-map-by")


def openmpi_defaults(args: list[str]) -> list[str]:
    """What Open MPI needs to run a job here as MPICH would: more ranks
    than cores on this node (Open MPI refuses past its slots unless told,
    and a local run's slots are the cores: `concerto mpirun -n 4` failed
    on two cores), unless the command line places the ranks itself; and,
    run by root, root's ranks (Open MPI refuses them unless told)."""
    out = []
    options = {a.split("=", 1)[0] for a in args}
    env = os.environ
    if not options & set(PLACEMENT_OPTIONS) and "OMPI_MCA_rmaps_base_oversubscribe" not in env:
        out.append("--oversubscribe")
    if os.geteuid() == 0 and "OMPI_ALLOW_RUN_AS_ROOT" not in env and "--allow-run-as-root" not in options:
        out.append("--allow-run-as-root")
    return out


def run(args: list[str], *, launcher: str = "mpirun", cluster: Path | None = None) -> None:
    """Replaces this process with the launcher (its exit status is the job's)."""
    argv = command(args, launcher=launcher, cluster=cluster)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)
