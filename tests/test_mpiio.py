"""MPI-IO for unmodified MPI programs (crates/concerto-mpiio): programs of
our own in C (tests/mpi/), compiled against Debian's Open MPI and MPICH and
parallel HDF5, run through `concerto mpirun` against a local cluster.
Every run has a deadline: a collective call that hangs fails the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from concerto import cluster as local
from concerto import fs
from conftest import ROOT, mounted_at

MPI_DIR = ROOT / "tests" / "mpi"
FLAVOURS = {"openmpi": ("mpicc.openmpi", "mpirun.openmpi"), "mpich": ("mpicc.mpich", "mpiexec.mpich")}
STRATEGIES = ("independent", "two-phase", "resonant")
PATTERNS = ("contiguous", "vector", "subarray", "darray", "noncontig")


def value(k: int) -> int:
    """Byte k of every file the pattern program writes (as in patterns.c)."""
    return (k * 131 + 7) % 251


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    """The test programs, built for each MPI library (HDF5's for Open MPI, whose build Debian ships)."""
    out = tmp_path_factory.mktemp("mpi-programs")
    built = {}
    for flavour, (cc, _) in FLAVOURS.items():
        for name in ("patterns", "errors", "calls"):
            exe = out / f"{name}-{flavour}"
            subprocess.run([cc, "-O2", "-Wall", "-o", str(exe), str(MPI_DIR / f"{name}.c")], check=True)
            built[f"{name}-{flavour}"] = exe
        exe = out / f"fortran-{flavour}"
        subprocess.run([f"mpif90.{flavour}", "-O2", "-o", str(exe), str(MPI_DIR / "fortran.f90")], check=True,
                       cwd=out)
        built[f"fortran-{flavour}"] = exe
    exe = out / "hdf5-openmpi"
    # h5pcc leaves its object file in the working directory: the build's own.
    subprocess.run(["h5pcc.openmpi", "-O2", "-o", str(exe), str(MPI_DIR / "hdf5.c")], check=True, cwd=out)
    built["hdf5-openmpi"] = exe
    return built


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("mpiio-cluster")
    path = local.up(directory, local.ClusterSpec(servers=4, stripe_unit=65536))
    try:
        yield path
    finally:
        local.down(directory)


def job_env() -> dict[str, str]:
    """Several ranks as root on a small machine (Open MPI refuses both by default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CONCERTO_APP_ID", "CONCERTO_CLUSTER")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def mpirun(cluster: Path, flavour: str, ranks: int, *argv: str | Path, timeout: int = 120,
           env: dict[str, str] | None = None):
    """`concerto mpirun` with that MPI library's launcher (and `env` added to
    the job's environment); fails the test past the deadline."""
    launcher = FLAVOURS[flavour][1]
    command = [sys.executable, "-m", "concerto", "mpirun", "--cluster", str(cluster), "--launcher", launcher,
               "-n", str(ranks), *map(str, argv)]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=job_env() | (env or {}))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung past {timeout}s: {' '.join(command)}\n{e.stderr}")


# Each pattern written with one strategy and read back with another, so
# every strategy writes and reads some pattern at each rank count.
CASES = [(flavour, ranks, pattern, STRATEGIES[i % 3], STRATEGIES[(i + 1 + ranks) % 3])
         for flavour in FLAVOURS for ranks in (4, 3) for i, pattern in enumerate(PATTERNS)]


@pytest.mark.parametrize("flavour,ranks,pattern,writer,reader", CASES)
def test_collective_writes_read_back_byte_exact_with_another_strategy(programs, cluster, flavour, ranks,
                                                                      pattern, writer, reader):
    name = f"concerto:/{pattern}-{flavour}-{ranks}-{writer}-{reader}"
    run = mpirun(cluster, flavour, ranks, programs[f"patterns-{flavour}"], name, pattern, writer, reader)
    assert run.returncode == 0, run.stderr
    assert f"ok {pattern} {writer}->{reader} {ranks} ranks" in run.stdout
    # and the file is in the cluster's namespace, with the layout the hints asked for
    st = fs.connect(cluster).stat(name.removeprefix("concerto:"))
    assert st.stripe_unit == 65536 and len(st.servers) == 4


def test_files_written_through_mpiio_read_the_same_through_the_mount(programs, cluster, tmp_path):
    run = mpirun(cluster, "openmpi", 4, programs["patterns-openmpi"], "concerto:/via-mount", "noncontig",
                 "resonant", "two-phase")
    assert run.returncode == 0, run.stderr
    with mounted_at(cluster, tmp_path / "mnt") as _:
        data = (tmp_path / "mnt" / "via-mount").read_bytes()
    assert len(data) == 4 * 262144
    assert all(b == value(k) for k, b in enumerate(data)), "a byte read through the mount differs"


def test_files_under_a_concerto_mount_are_served_by_concerto_not_the_mpi_library(programs, cluster, tmp_path):
    # Atomic mode is the MPI library's, not Concerto's: a file under the
    # mount refusing it is a file Concerto serves.
    mnt = tmp_path / "mnt"
    with mounted_at(cluster, mnt):
        run = mpirun(cluster, "openmpi", 2, programs["errors-openmpi"], mnt / "under-mount", "unserved")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("atomic mode is not served") == 2, run.stdout


def test_a_file_under_another_clusters_mount_lands_on_that_cluster_not_the_configured_one(programs, cluster,
                                                                                            tmp_path):
    # CONCERTO_CLUSTER names `cluster`; the path is under the mount of a
    # second cluster. The library must not serve it from the first (the
    # data would land on the wrong file system): the MPI library writes it
    # through the second cluster's mount, and it is there, byte-exact.
    other = local.up(tmp_path / "other", local.ClusterSpec(servers=2, stripe_unit=65536))
    try:
        mnt = tmp_path / "other-mnt"
        with mounted_at(other, mnt):
            run = mpirun(cluster, "openmpi", 2, programs["patterns-openmpi"], mnt / "elsewhere", "contiguous",
                         "independent", "independent")
            assert run.returncode == 0, run.stdout + run.stderr
            assert "ok contiguous" in run.stdout, run.stdout
        theirs = fs.connect(other)
        data = theirs.open("/elsewhere").read(0, theirs.stat("/elsewhere").size)
        assert data and all(b == value(k) for k, b in enumerate(data)), "the second cluster's file differs"
        with pytest.raises(FileNotFoundError):
            fs.connect(cluster).stat("/elsewhere")
    finally:
        local.down(tmp_path / "other")


def test_resonant_writes_reach_each_server_from_one_agent_in_ascending_offsets(programs, cluster):
    client = fs.connect(cluster)
    after = [max((a["seq"] for a in log), default=0) if isinstance(log, list) else 0
             for log in client.arrivals()]
    # interleaved pieces of every rank on every server: the agents' case
    run = mpirun(cluster, "mpich", 4, programs["patterns-mpich"], "concerto:/agents", "vector", "resonant",
                 "resonant")
    assert run.returncode == 0, run.stderr
    inode = client.stat("/agents").inode
    servers_seen = 0
    for log, since in zip(client.arrivals(), after):
        assert isinstance(log, list), log
        writes = [a for a in log if a["seq"] > since and a["object"] == inode and a["op"] == "write"]
        if not writes:
            continue
        servers_seen += 1
        assert len({a["rank"] for a in writes}) == 1, f"agents of one server: {[a['rank'] for a in writes]}"
        offsets = [a["offset"] for a in writes]
        assert offsets == sorted(offsets), f"offsets out of order: {offsets}"
    assert servers_seen == 4


@pytest.mark.parametrize("ranks,rows", [(4, 64), (3, 33)])
def test_an_hdf5_program_writes_and_reads_chunked_and_contiguous_datasets_collectively(programs, cluster,
                                                                                      tmp_path, ranks, rows):
    name = f"/data-{ranks}.h5"
    run = mpirun(cluster, "openmpi", ranks, programs["hdf5-openmpi"], f"concerto:{name}", str(rows))
    assert run.returncode == 0, run.stderr
    assert f"ok hdf5 {ranks} ranks, {ranks * rows} rows" in run.stdout
    # h5dump, a serial HDF5 program, reads the file copied out: value (r, c) = r * 10000 + c (+1 if chunked)
    local_copy = tmp_path / "copy.h5"
    with fs.connect(cluster).open(name) as f, open(local_copy, "wb") as out:
        out.write(f.read(0, f.size))
    last = ranks * rows - 1
    dump = subprocess.run(["h5dump", "-m", "%.1f", "-d", "/chunked", "-s", f"{last},1023", "-c", "1,1", str(local_copy)],
                          capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0, dump.stderr
    assert f"({last},1023): {last * 10000 + 1023 + 1}.0" in dump.stdout


def test_files_outside_concerto_pass_through_to_the_mpi_library(programs, cluster, tmp_path):
    for flavour in FLAVOURS:
        path = tmp_path / f"local-{flavour}.bin"
        run = mpirun(cluster, flavour, 3, programs[f"patterns-{flavour}"], path, "vector", "resonant", "two-phase")
        assert run.returncode == 0, run.stderr
        data = path.read_bytes()
        assert len(data) == 3 * 262144 and all(b == value(k) for k, b in enumerate(data))
    names = {e.name for e in fs.connect(cluster).listdir("/")}
    assert not any(n.startswith("local-") for n in names)


MISTAKES = {
    "missing": "no such file",
    "bad-hint": 'unknown strategy "fastest"',
    "unknown-hint": 'unknown hint "concerto_stratgy"',
    "bad-view": "displacements decrease",
    "datarep": '"external32" is not served',
    "mismatch": "mismatched collective calls",
    "unserved": "atomic mode is not served",
    "different-hints": "have different hints on this file",
}


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_every_mistake_fails_on_every_rank_without_hanging(programs, cluster, flavour, mistake):
    run = mpirun(cluster, flavour, 3, programs[f"errors-{flavour}"], f"concerto:/mistake-{mistake}-{flavour}",
                 mistake, timeout=60)
    assert run.returncode == 0, f"some rank got no error:\n{run.stdout}\n{run.stderr}"
    for rank in range(3):
        line = next((ln for ln in run.stdout.splitlines() if ln.startswith(f"rank {rank}: {mistake}: error:")), None)
        assert line is not None, run.stdout
        # the rank that made the mistake names it; the others say which rank failed, and why
        assert MISTAKES[mistake] in line, line
    # Returned to a program that handles it (MPI_ERRORS_RETURN), an error
    # is the program's to print, not the library's.
    assert "concerto:" not in run.stderr, run.stderr


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_an_error_the_program_handles_is_printed_only_when_asked(programs, cluster, flavour):
    # IOR opens a file to see whether it is there: a "no such file" it
    # expects and handles, which printed a line on every run.
    name = f"concerto:/probe-{flavour}"
    quiet = mpirun(cluster, flavour, 2, programs[f"errors-{flavour}"], name, "missing", timeout=60)
    assert quiet.returncode == 0 and "concerto:" not in quiet.stderr, quiet.stderr
    loud = mpirun(cluster, flavour, 2, programs[f"errors-{flavour}"], name, "missing", timeout=60,
                  env={"CONCERTO_MPIIO_PRINT_ERRORS": "1"})
    assert loud.returncode == 0, loud.stderr
    printed = [ln for ln in loud.stderr.splitlines() if "concerto: MPI_File_open" in ln]
    # Each rank's own failure (the open is collective: rank 0's own, rank 1 told by rank 0).
    assert any(ln.startswith("rank 0: concerto: MPI_File_open:") and "no such file" in ln for ln in printed), \
        loud.stderr


def test_every_mpi4_large_count_call_is_served_and_reads_back_byte_exact(programs, cluster):
    # MPICH 4's mpi.h is MPI 4.0: IOR built against it calls the `_c`
    # variants, which MPICH got the library's handle for (Invalid file
    # handle, MPI_Abort). Open MPI 4's is MPI 3.1 and has none.
    run = mpirun(cluster, "mpich", 3, programs["calls-mpich"], "concerto:/large-count", "large-count", timeout=60)
    assert run.returncode == 0 and "ok large-count" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_a_fortran_program_writes_and_reads_a_concerto_file_through_a_subarray_view(programs, cluster, flavour):
    # `use mpi`: Open MPI's own Fortran bindings call PMPI_File_* past the
    # C entry points (the open reached ROMIO and failed, ierr 42); MPICH's
    # converted the handle with a c2f that knew nothing of Concerto's.
    name = f"/fortran-{flavour}"
    run = mpirun(cluster, flavour, 3, programs[f"fortran-{flavour}"], f"concerto:{name}", timeout=60)
    assert run.returncode == 0 and "ok fortran" in run.stdout, run.stdout + run.stderr
    assert fs.connect(cluster).stat(name).size == 64 * 16 * 3 * 4, "the file is the cluster's"


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_a_concerto_files_fortran_handle_converts_back_to_it_and_is_no_other_files(programs, cluster, flavour):
    run = mpirun(cluster, flavour, 2, programs[f"calls-{flavour}"], f"concerto:/handles-{flavour}", "handles",
                 timeout=60)
    assert run.returncode == 0 and "ok handles" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
@pytest.mark.parametrize("case", ["nonblocking", "shared"])
def test_nonblocking_split_and_shared_pointer_calls_leave_what_the_same_calls_leave_on_a_plain_file(
        programs, cluster, flavour, case):
    # Each call's reads checked byte for byte, every request's status, the
    # shared pointer's position after each step; then the Concerto file
    # and a plain file the MPI library served the same calls on must hold
    # the same bytes (write_shared's blocks in any order).
    run = mpirun(cluster, flavour, 3, programs[f"calls-{flavour}"], f"concerto:/{case}-{flavour}", case,
                 timeout=90)
    assert run.returncode == 0 and f"ok {case}" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_every_rank_sees_a_collective_writes_size_at_once_and_a_cut_is_not_undone_by_held_writes(
        programs, cluster, flavour):
    # Writes held behind (the library's default): a collective write whose
    # ranks share no stripe unit runs as each rank's held write, yet every
    # rank's MPI_File_get_size right after is the call's end; independent
    # writes held past a collective cut land before it, not after.
    run = mpirun(cluster, flavour, 3, programs[f"calls-{flavour}"], f"concerto:/sizes-{flavour}", "sizes",
                 timeout=60)
    assert run.returncode == 0 and "ok sizes" in run.stdout, run.stdout + run.stderr
    assert fs.connect(cluster).stat(f"/sizes-{flavour}").size == 4096


def test_concerto_mpirun_runs_the_readmes_four_ranks_under_open_mpi_without_its_variables(programs, cluster):
    # The README's line, as a new user runs it: root, two cores, no OMPI_* set.
    env = {k: v for k, v in job_env().items() if not k.startswith("OMPI_")}
    command = [sys.executable, "-m", "concerto", "mpirun", "--cluster", str(cluster), "--launcher", "mpirun.openmpi",
               "-n", "4", str(programs["patterns-openmpi"]), "concerto:/readme-line", "vector", "resonant",
               "two-phase"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0 and "ok vector resonant->two-phase 4 ranks" in run.stdout, run.stdout + run.stderr


def test_open_mpi_defaults_leave_placement_and_set_variables_to_the_user(monkeypatch):
    from concerto.mpirun import openmpi_defaults

    monkeypatch.delenv("OMPI_MCA_rmaps_base_oversubscribe", raising=False)
    monkeypatch.delenv("OMPI_ALLOW_RUN_AS_ROOT", raising=False)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    assert openmpi_defaults(["-n", "4", "prog"]) == ["--oversubscribe", *root]
    assert openmpi_defaults(["--hostfile", "h", "-n", "4", "prog"]) == root
    assert openmpi_defaults(["--map-by=node", "prog"]) == root
    monkeypatch.setenv("OMPI_MCA_rmaps_base_oversubscribe", "0")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    assert openmpi_defaults(["-n", "4", "prog"]) == []


def test_concerto_mpirun_bad_input_is_named(cluster, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "concerto", "mpirun", *args], capture_output=True, text=True,
                              timeout=60, env=job_env(), cwd=tmp_path)

    r = run("--cluster", str(cluster), "--launcher", "no-such-mpirun", "-n", "2", "true")
    assert r.returncode == 2 and "no-such-mpirun not found" in r.stderr
    r = run("-n", "2", "true")
    assert r.returncode == 2 and "no cluster file at concerto-cluster/cluster.toml" in r.stderr
    fake = tmp_path / "fake-mpirun"
    fake.write_text("#!/bin/sh\necho 'some other launcher 1.0'\n")
    fake.chmod(0o755)
    r = run("--cluster", str(cluster), "--launcher", str(fake), "-n", "2", "true")
    assert r.returncode == 2 and "neither Open MPI's nor MPICH's" in r.stderr


def test_the_library_is_built_for_both_mpi_libraries_and_exports_only_mpi_names():
    from concerto.binaries import find_library

    for flavour in FLAVOURS:
        library = find_library(f"libconcerto-mpiio-{flavour}.so")
        symbols = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True,
                                 check=True).stdout.split("\n")
        names = [line.split()[-1] for line in symbols if line.strip()]
        assert "MPI_File_open" in names and "MPI_File_write_at_all" in names
        # and the Fortran bindings, in every compiler's spelling
        assert {"mpi_file_open_", "mpi_file_open__", "mpi_file_open", "MPI_FILE_OPEN"} <= set(names)
        ours = ("MPI_File_", "mpi_file_", "MPI_FILE_")
        assert all(n.startswith(ours) for n in names), [n for n in names if not n.startswith(ours)]



MPI4PY = """
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
info = MPI.Info.Create()
info.Set("concerto_strategy", "resonant")
fh = MPI.File.Open(comm, "concerto:/from-mpi4py", MPI.MODE_CREATE | MPI.MODE_RDWR, info)
block = bytearray([rank + 1]) * 65536
fh.Write_at_all(rank * len(block), block)
back = bytearray(len(block))
fh.Read_at_all(((rank + 1) % comm.Get_size()) * len(block), back)
assert back == bytearray([(rank + 1) % comm.Get_size() + 1]) * len(block)
assert fh.Get_info().Get("concerto_strategy") == "resonant"
fh.Close()
"""


def test_an_mpi4py_program_reaches_concerto_through_mpi_file(cluster, tmp_path):
    script = tmp_path / "mpi4py_job.py"
    script.write_text(MPI4PY)
    run = mpirun(cluster, "openmpi", 3, sys.executable, script)
    assert run.returncode == 0, run.stderr
    f = fs.connect(cluster).open("/from-mpi4py")
    assert f.read(0, f.size) == b"".join(bytes([r + 1]) * 65536 for r in range(3))


def test_bench_mpiio_measures_every_way_beside_the_simulator(tmp_path):
    # The quick run's figures say nothing; that every (pattern, op, way) is
    # measured, each of Concerto's ways with the simulator's prediction, is
    # what is checked — and that nothing is left behind.
    from concerto.mpiio_bench import PATTERNS, ROMIO, WAYS
    from conftest import concerto

    r = concerto("bench", "mpiio", "--quick", "--part", "resonance", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "mpiio.json").read_text())
    rows = {(row["pattern"], row["op"], row["way"]): row for row in result["rows"]}
    assert set(rows) == {(p, op, w) for p in PATTERNS for op in ("write", "read") for w in (*WAYS, ROMIO)}
    for (_, _, way), row in rows.items():
        assert row["real_MBps"] > 0
        assert (row["sim_MBps"] is None) == (way == ROMIO)
    assert "resonant / two-phase, demo write: real" in r.stdout
    assert "concerto-mpiio-" not in open("/proc/self/mounts").read()


def test_bench_mpiio_runs_iors_patterns_through_the_library_beside_mpich_on_the_mount(tmp_path):
    # The quick run's figures say nothing; that every pattern ran both ways
    # under MPICH (the library and MPICH's ROMIO through the mount), with
    # the ratio, is what is checked — and that nothing is left behind.
    from concerto.mpiio_ior_bench import LIBRARY, PATTERNS
    from conftest import concerto

    r = concerto("bench", "mpiio", "--quick", "--part", "ior", "--mpi", "mpich", "--ranks", "2",
                 "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    rows = json.loads((tmp_path / "mpiio-ior.json").read_text())["rows"]
    assert {(row["mpi"], row["ranks"], row["pattern"]) for row in rows} == {("mpich", 2, p) for p in PATTERNS}
    for row in rows:
        assert set(row["ways"]) == {LIBRARY, "ROMIO on the mount"}
        assert all(w["write_MiBps"] > 0 for w in row["ways"].values())
        assert row["library_over_best"] > 0
    assert "library/best" in r.stdout
    assert "concerto-mpiio-ior-" not in open("/proc/self/mounts").read()


def test_bench_mpiio_names_a_bad_rank_count():
    from conftest import concerto

    r = concerto("bench", "mpiio", "--part", "ior", "--ranks", "2,x")
    assert r.returncode != 0 and "--ranks '2,x'" in r.stderr, r.stderr
