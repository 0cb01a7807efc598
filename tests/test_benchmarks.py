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
    ("-c -t 1m", "ior -c: collective I/O is not what the ior workload models"),
    ("-a HDF5", "ior -a HDF5: only POSIX and MPIIO"),
    ("-b 3m -t 2m", "the block size must be a whole, non-zero number of transfers"),
    ("-t 1x", "ior -t 1x: not a size"),
    ("-s 0", "ior -s 0: must be at least 1"),
    ("-i 5", "repetitions are the simulator's --reps"),
    ("--posix.odirect", "ior --posix.odirect: not an option the simulator models"),
    ("-t", "ior -t: needs a value"),
    ("-N 4", "ior -N 4 and --processes 2 disagree"),
    ("-o 'unclosed", "ior command line: No closing quotation"),
])
def test_ior_options_it_cannot_model_are_named(args, message):
    with pytest.raises(benchmarks.BenchmarkArgsError, match=re.escape(message)):
        benchmarks.from_ior(args, processes=2 if "-N" in args else None)


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
    app = benchmarks.from_mdtest("mdtest -n 100 -u -w 4096 -e 4096 -C -T -r -d /scratch/md", processes=4)
    assert app == {"name": "mdtest", "workload": "md-test", "processes": 4, "items": 100,
                   "md_steps": ["mktestdir", "create", "write", "stat", "rm", "rmtestdir"], "request_size": 4096}
    # No phase chosen: all of them; no sizes: no data moved, the read is a stat.
    app = benchmarks.from_mdtest("-n 10 -u -N 2")
    assert app["md_steps"] == ["mktestdir", "create", "stat", "stat", "rm", "rmtestdir"]
    assert "request_size" not in app
    a = run(benchmarks.from_mdtest("-n 50 -u -w 4k -e 4k", processes=3))
    assert [p["phase"] for p in a["mdtest"]] == ["mktestdir", "create", "write", "stat", "read", "rm", "rmtestdir"]
    assert [p["items"] for p in a["mdtest"]] == [3, 150, 150, 150, 150, 150, 3]
    assert a["bytes"] == 2 * 150 * 4096, "each file written once and read once"


@pytest.mark.parametrize("args, message", [
    ("-u", "mdtest: -n (items per task) is required"),
    ("-n 10", "mdtest without -u"),
    ("-n 10 -u -z 3", "mdtest -z: a directory tree"),
    ("-n 10 -u -D", "mdtest -D: directories only is not modelled"),
    ("-n 10 -u -w 4k -e 8k", "the md-test workload reads what it wrote"),
    ("-n x -u", "mdtest -n x: not a whole number"),
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

