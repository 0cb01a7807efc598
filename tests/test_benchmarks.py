"""IOR and mdtest command lines as scenario applications: the option
mapping, the refusals, and the imported applications run by the simulator
moving what IOR and mdtest would."""

from __future__ import annotations

import re
import tomllib

import pytest

from concerto import benchmarks
from concerto.sim import ScenarioSource, simulate
from conftest import concerto

CLUSTER = """
name = "imported"
[cluster]
servers = 4
stripe_unit = "64KiB"
[cluster.device]
kind = "ssd"
"""


def run(app: dict) -> dict:
    text = CLUSTER + benchmarks.apps_toml(app)
    return simulate(ScenarioSource(text=text, label="imported"), reps=1)["runs"][0]["apps"][0]


def test_ior_options_map_to_iors_layout():
    app = benchmarks.from_ior("ior -a POSIX -t 1m -b 16m -s 4 -F -w -r -C -e -k -o /scratch/f", processes=8)
    assert app == {"name": "ior", "workload": "ior", "processes": 8, "op": "write", "request_size": 1 << 20,
                   "block_size": 16 << 20, "segments": 4, "operations": ["write", "read"], "file": "per-process"}
    # Neither -w nor -r: IOR does both. -N names the tasks; sizes in IOR's units.
    app = benchmarks.from_ior("-t 64k -b 256k -N 3")
    assert (app["operations"], app["processes"], app["request_size"], app["block_size"], app["file"]) == (
        ["write", "read"], 3, 65536, 262144, "shared")
    assert benchmarks.from_ior("-r -t1k -b 2k")["operations"] == ["read"]


@pytest.mark.parametrize("args, message", [
    ("-z", "ior -z: random offsets are not modelled"),
    ("-c -t 1m", "ior -c: collective I/O goes through MPI-IO; add -a MPIIO"),
    ("-a MPIIO -c -F -w", "ior -c with -F"),
    ("-a MPIIO -c", "ior -c with both -w and -r"),
    ("-a HDF5", "ior -a HDF5: only POSIX and MPIIO"),
    ("-b 3m -t 2m", "the block size must be a whole, non-zero number of transfers"),
    ("-t 1x", "ior -t 1x: not a size"),
    ("-s 0", "ior -s 0: must be at least 1"),
    ("-i 0", "ior -i 0: must be at least 1"),
    ("-O stoneWallingWearOut=1", "ior -O stoneWallingWearOut=1: not modelled (accepted: summaryFormat"),
    ("--posix.odirect", "ior --posix.odirect: not an option the simulator models"),
    ("-t", "ior -t: needs a value"),
    ("-N 4", "ior -N 4: more tasks than the 2 ranks --processes 2 starts"),
    ("mpirun -np 8 ior -N 16", "ior -N 16: more tasks than the 8 ranks mpirun -np 8 starts"),
    ("mpirun -np 4 ior -w", "mpirun -np 4 and --processes 2 disagree"),
    ("mpirun -np 4 -n 8 ior", "mpirun -np 4 and mpirun -n 8 disagree"),
    ("mpirun -np 4 ./a.out -w", "mpirun: no ior on the command line after it"),
    ("srun -n many ior", "srun -n many: not a whole number"),
    ("srun --ntasks-per-node=2 ior", "srun --ntasks-per-node 2: ranks per node, and how many nodes is the "
     "allocation's; give the rank count (-N (nodes) or -n)"),
    ("srun -N 2-4 ior", "srun -N 2-4: a range of nodes leaves the rank count to the allocation"),
    ("mpirun -npernode 2 ior", "mpirun -npernode 2: ranks per node"),
    ("mpirun --map-by ppr:2:node ior", "mpirun --map-by ppr:2:node: ranks per node"),
    ("mpiexec -ppn 4 ior", "mpiexec -ppn 4: ranks per node"),
    ("aprun -N 4 ior", "aprun -N 4: ranks per node"),
    ("-o 'unclosed", "ior command line: No closing quotation"),
])
def test_ior_options_it_cannot_model_are_named(args, message):
    processes = 2 if args in ("-N 4", "mpirun -np 4 ior -w") else None
    with pytest.raises(benchmarks.BenchmarkArgsError, match=re.escape(message)):
        benchmarks.from_ior(args, processes=processes)


def test_a_pasted_launcher_line_gives_the_ranks_and_its_own_options_are_ignored():
    for line, tasks in [
        ("mpirun -np 4 ior -t 1m -b 4m -w", 4),
        ("OMP_NUM_THREADS=1 /usr/bin/mpirun --hostfile hosts --map-by node -n 6 --bind-to core "
         "/opt/ior/bin/ior -t 1m -b 4m -w", 6),
        ("mpiexec -n12 ior -t 1m -b 4m -w", 12),
        ("srun -N 2 --ntasks=16 --cpu-bind=cores ior -t 1m -b 4m -w", 16),
        ("srun --ntasks 3 ior -t 1m -b 4m -w", 3),
        ("mpirun -np 8 ior -N 4 -t 1m -b 4m -w", 4),  # IOR's -N: that many of the ranks
        # Nodes times tasks per node; Slurm's default is one task per node.
        ("srun -N 2 --ntasks-per-node=2 ior -t 1m -b 4m -w", 4),
        ("srun --nodes=3 --ntasks-per-node 4 ior -t 1m -b 4m -w", 12),
        ("srun -N2 ior -t 1m -b 4m -w", 2),
        ("srun -N 2 -c 8 ior -t 1m -b 4m -w", 2),  # srun's -c: CPUs per task
        # Open MPI's -c is its rank count; per node beside a total: the total.
        ("mpirun -c 4 ior -t 1m -b 4m -w", 4),
        ("mpirun -npernode 2 -np 6 ior -t 1m -b 4m -w", 6),
        ("aprun -n 8 -N 4 ior -t 1m -b 4m -w", 8),
    ]:
        app = benchmarks.from_ior(line)
        assert (app["processes"], app["request_size"], app["operations"]) == (tasks, 1 << 20, ["write"]), line
    # The launcher agrees with --processes: accepted.
    assert benchmarks.from_ior("mpirun -np 4 ior -w", processes=4)["processes"] == 4
    assert benchmarks.from_mdtest("srun -n 5 mdtest -n 10 -u -F")["processes"] == 5


def test_a_launchers_ranks_per_node_place_the_simulated_ranks_on_nodes():
    # Ranks that share a node share its link in the simulator
    # (processes_per_node); a launcher that does not say leaves the
    # simulator's default, a node per rank.
    for line, per_node in [
        ("srun -N 2 --ntasks-per-node=2 ior -t 1m -b 4m -w", 2),
        ("srun -N 2 -n 7 ior -t 1m -b 4m -w", 4),  # Slurm's blocks: 4 and 3
        ("srun -N 1 -n 4 ior -t 1m -b 4m -w", 4),
        ("mpirun -npernode 2 -np 6 ior -t 1m -b 4m -w", 2),
        ("mpirun -np 8 --map-by ppr:4:node ior -t 1m -b 4m -w", 4),
        ("mpiexec -n 4 -ppn 8 ior -t 1m -b 4m -w", 4),  # more per node than ranks: one node
        ("aprun -n 8 -N 4 ior -a MPIIO -c -t 64k -b 64k -w", 4),
        ("mpirun -np 4 ior -t 1m -b 4m -w", None),
        ("mpirun -np 8 --map-by ppr:2:socket ior -t 1m -b 4m -w", None),
    ]:
        app = benchmarks.from_ior(line)
        assert app.get("processes_per_node") == per_node, line
    assert benchmarks.from_mdtest("srun -N 2 -n 4 mdtest -n 10 -u -F")["processes_per_node"] == 2
    with pytest.raises(benchmarks.BenchmarkArgsError, match=re.escape("mpirun -npernode x: not a whole number")):
        benchmarks.from_ior("mpirun -np 4 -npernode x ior -w")


def test_verification_and_reporting_options_are_accepted_with_no_effect():
    plain = benchmarks.from_ior("-a POSIX -t 1m -b 16m -s 2 -w -r", processes=4)
    pasted = benchmarks.from_ior(
        "mpirun -np 4 ior -a POSIX -t 1m -b 16m -s 2 -w -r -W -R -C -Q 1 -Z -X 7 -e -g -k -K -E -u -m -i 3 -d 1 "
        "-G 11 -l timestamp -j 5 -H -vv -q -o /scratch/f -O summaryFormat=JSON -O summaryFile=/tmp/s.json")
    assert pasted == plain
    md_plain = benchmarks.from_mdtest("-n 100 -u -F -w 4k -e 4k", processes=4)
    md_pasted = benchmarks.from_mdtest(
        "mpirun -np 4 mdtest -n 100 -u -F -w 4k -e 4k -N 1 -i 3 -d /scratch/md -X --verify-read --verify-write "
        "-P -Y -y -v -V 2 -G 5 -a POSIX --print-all-procs --showRankStatistics --saveRankPerformanceDetails=r.csv")
    assert md_pasted == md_plain


def test_ior_collective_maps_to_the_collective_workload_with_iors_layout():
    app = benchmarks.from_ior("mpirun -np 4 ior -a MPIIO -c -w -t 256k -b 1m -s 3")
    assert app == {"name": "ior", "workload": "collective", "processes": 4, "op": "write", "requests": 12,
                   "access": "ior:block=1048576,transfer=262144",
                   "collective": {"strategy": "two-phase", "romio_cb": "automatic"}}
    a = run(app)
    assert a["bytes"] == 4 * 3 * (1 << 20), "every task's blocks of every segment, once"
    read = run(benchmarks.from_ior("-a MPIIO -c -r -t 1m -b 1m", processes=2))
    assert read["bytes"] == 2 << 20


def test_an_imported_ior_run_moves_what_ior_would_and_reports_it_as_ior_does():
    app = benchmarks.from_ior("-t 256k -b 1m -s 3 -w -r", processes=4)
    a = run(app)
    per_op = 4 * 3 * (1 << 20)  # tasks x segments x block
    assert a["bytes"] == 2 * per_op
    assert [op["access"] for op in a["ior"]] == ["write", "read"]
    for op in a["ior"]:
        assert op["bytes"] == per_op
        assert op["bandwidth_MiBps"] == pytest.approx(per_op / op["seconds"] / (1 << 20))
    # The operations follow each other: the makespan is their sum.
    assert a["end_s"] - a["start_s"] == pytest.approx(sum(op["seconds"] for op in a["ior"]), rel=1e-6)


def test_mdtest_options_choose_the_phases():
    app = benchmarks.from_mdtest("mdtest -n 100 -u -F -w 4096 -e 4096 -C -T -r -d /scratch/md", processes=4)
    assert app == {"name": "mdtest", "workload": "md-test", "processes": 4, "items": 100,
                   "md_steps": ["mktestdir", "create", "write", "stat", "rm", "rmtestdir"], "request_size": 4096}
    # No phase chosen: all of them; no sizes: no data moved, the read is a
    # stat. mdtest's -N is a stride against the client cache, not the tasks.
    app = benchmarks.from_mdtest("-n 10 -u -F -N 2")
    assert app["md_steps"] == ["mktestdir", "create", "stat", "stat", "rm", "rmtestdir"]
    assert "request_size" not in app and app["processes"] == 1
    a = run(benchmarks.from_mdtest("-n 50 -u -F -w 4k -e 4k", processes=3))
    assert [p["phase"] for p in a["mdtest"]] == ["mktestdir", "create", "write", "stat", "read", "rm", "rmtestdir"]
    assert [p["items"] for p in a["mdtest"]] == [3, 150, 150, 150, 150, 150, 3]
    assert a["bytes"] == 2 * 150 * 4096, "each file written once and read once"


def test_mdtest_phases_are_reported_under_mdtests_own_operation_names():
    from concerto.report import mdtest_rows

    a = run(benchmarks.from_mdtest("-n 50 -u -F -w 4k -e 4k", processes=3))
    assert [p["operation"] for p in a["mdtest"]] == ["Tree creation", "File creation", "File creation",
                                                      "File stat", "File read", "File removal", "Tree removal"]
    rows = mdtest_rows(a["mdtest"])
    assert [r[0] for r in rows] == ["Tree creation", "File creation", "File stat", "File read", "File removal",
                                    "Tree removal"]
    create, write = a["mdtest"][1], a["mdtest"][2]
    assert rows[1] == ("File creation", 150, pytest.approx(create["seconds"] + write["seconds"]))
    # A phase mdtest has no row for keeps its own name.
    assert mdtest_rows([{"phase": "readdir", "operation": None, "items": 3, "seconds": 1.0}]) == [
        ("(readdir)", 3, 1.0)]


@pytest.mark.parametrize("args, message", [
    ("-u", "mdtest: -n (items per task) is required"),
    ("-n 10", "mdtest without -u"),
    ("-n 10 -u -z 3", "mdtest -z: a directory tree"),
    ("-n 10 -u -D", "mdtest -D: directories only: the md-test workload's items are files"),
    ("-n 10 -u -F -w 4k -e 8k", "the md-test workload reads what it wrote"),
    ("-n x -u -F", "mdtest -n x: not a whole number"),
    ("-n 10 -u", "mdtest without -F runs its directory phases too (Directory creation, stat, removal)"),
    ("-n 10 -u -F -W 5", "mdtest -W: a stonewall deadline is not modelled"),
    ("-n 10 -u -F -f 2 -l 8 -s 2", "mdtest -f: a sweep of task counts"),
    ("-n 10 -u -F -a DFS", "mdtest -a DFS: only POSIX is modelled"),
    ("-n 10 -u -F -i 0", "mdtest -i 0: must be at least 1"),
    ("mpirun -n 4 mdtest -n 10 -u -F -N x", "mdtest -N x: not a whole number"),
])
def test_mdtest_options_it_cannot_model_are_named(args, message):
    with pytest.raises(benchmarks.BenchmarkArgsError, match=re.escape(message)):
        benchmarks.from_mdtest(args)


def test_the_cli_prints_an_apps_table_and_names_bad_options(tmp_path):
    r = concerto("sim", "workload", "from-ior", "-t 1m -b 4m -F", "--processes", "4", "--name", "ckpt")
    assert r.returncode == 0, r.stderr
    app = tomllib.loads(r.stdout)["apps"][0]
    assert (app["name"], app["processes"], app["file"]) == ("ckpt", 4, "per-process")
    scenario = tmp_path / "s.toml"
    scenario.write_text(CLUSTER + r.stdout)
    ran = concerto("sim", "run", str(scenario))
    assert ran.returncode == 0, ran.stderr
    assert "as IOR reports it" in ran.stdout and "bw(MiB/s)" in ran.stdout
    bad = concerto("sim", "workload", "from-mdtest", "-n 5")
    assert bad.returncode == 2 and "mdtest without -u" in bad.stderr
    # A command line pasted unquoted, launcher and all.
    pasted = concerto("sim", "workload", "from-ior", "mpirun", "-np", "4", "ior", "-a", "MPIIO", "-c", "-w",
                      "-t", "1m", "-b", "4m", "-W", "-O", "summaryFormat=JSON")
    assert pasted.returncode == 0, pasted.stderr
    app = tomllib.loads(pasted.stdout)["apps"][0]
    assert (app["workload"], app["processes"], app["requests"]) == ("collective", 4, 4)
    md = concerto("sim", "workload", "from-mdtest", "srun", "-n", "3", "mdtest", "-n", "20", "-u", "-F")
    assert md.returncode == 0, md.stderr
    scenario.write_text(CLUSTER + md.stdout)
    ran = concerto("sim", "run", str(scenario))
    assert ran.returncode == 0, ran.stderr
    assert "as mdtest reports it" in ran.stdout and "File creation" in ran.stdout and "Tree removal" in ran.stdout

