"""Client-side plans from the command line: `concerto plan transfers` (the
Clusterfile scheduling problem: heuristics against the optimum, bad input
named), `concerto reproduce clusterfile` (the paper's claims, which can
fail), `concerto plan collective` (resonant I/O's planners) and
`concerto reproduce resonance` (their claims, which can fail)."""

from __future__ import annotations

import json
from pathlib import Path

import copy

import pytest
from conftest import ROOT, concerto

from concerto.reproduce import clusterfile, resonance


def _plan(*args: str) -> dict:
    r = concerto("plan", "transfers", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_figure_1_fcfs_takes_three_steps_where_the_optimum_takes_two(tmp_path: Path) -> None:
    m = tmp_path / "fig1.txt"
    m.write_text("# P1 -> D1, D3; P2 -> D2, D3\n1 0 1\n0 1 1\n")
    plan = _plan("--matrix", str(m), "--show", "optimal")
    lengths = {s["name"]: s["length"] for s in plan["schedules"]}
    assert plan["delta"] == 2 and lengths["optimal"] == 2
    assert lengths["fcfs"] == 3 and lengths["hcdf"] == 2
    assert all(s["valid"] for s in plan["schedules"])
    (opt,) = [s for s in plan["schedules"] if s["name"] == "optimal"]
    assert sorted(tuple(e) for step in opt["steps"] for e in step) == [(0, 0), (0, 2), (1, 1), (1, 2)]


def test_random_instances_never_beat_the_optimum_and_the_optimum_is_delta() -> None:
    for density in ("0.2", "0.6", "1.0"):
        plan = _plan("--random", f"clients=24,servers=6,density={density},max=3,seed=4")
        lengths = {s["name"]: s["length"] for s in plan["schedules"]}
        assert lengths["optimal"] == plan["delta"]
        assert all(v >= plan["delta"] for v in lengths.values())


def test_weighted_transfers_are_reported_against_the_load_bound(tmp_path: Path) -> None:
    m = tmp_path / "sizes.csv"
    m.write_text("4096, 0, 8192\n0, 4096, 4096\n")
    plan = _plan("--matrix", str(m), "--weighted", "--unit", "4KiB")
    assert plan["unit"] == 4096 and plan["load_bound"] == 12288  # server 2 takes 8 KiB + 4 KiB
    assert plan["delta"] == 3 and plan["transfers"] == 5


def test_bad_matrices_and_specs_name_the_problem(tmp_path: Path) -> None:
    def err(path_text: str | None, *args: str) -> str:
        extra = list(args)
        if path_text is not None:
            m = tmp_path / "m.txt"
            m.write_text(path_text)
            extra = ["--matrix", str(m), *extra]
        r = concerto("plan", "transfers", *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        return " ".join(r.stderr.split())

    assert 'row 2, column 2: "-4" is not a whole number >= 0' in err("1 2\n3 -4\n")
    assert 'row 1, column 3: "x" is not a whole number >= 0' in err("1 2 x\n")
    assert "row 2: has 1 columns, the first row has 2" in err("1 2\n3\n")
    assert "no rows or no columns" in err("# nothing\n")
    assert "give one of --matrix FILE or --random SPEC" in err(None)
    assert "--random: give servers, density, max" in err(None, "--random", "clients=4")
    assert "--random: clients='x' is not a whole number" in err(None, "--random", "clients=x,servers=2,density=1,max=1")
    assert 'unknown schedule "lifo"' in err("1 1\n", "--show", "lifo")
    assert "'--unit': \"abc\" does not start with a number" in err("1 1\n", "--weighted", "--unit", "abc")
    assert "--unit: must be at least 1 byte" in err("1 1\n", "--weighted", "--unit", "0")


def _reproduce_quick(paper: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs `concerto reproduce PAPER --quick` into a fresh folder; it must pass."""
    out = tmp_path_factory.mktemp(paper)
    r = concerto("reproduce", paper, "--quick", "--out", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.fixture(scope="module")
def clusterfile_quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reproduce_quick("clusterfile", tmp_path_factory)


def test_reproduce_clusterfile_quick_passes_every_claim(clusterfile_quick: Path) -> None:
    claims = {c["id"]: c for c in json.loads((clusterfile_quick / "claims.json").read_text())}
    assert set(claims) == {"c1a-hash-ios-beats-first-ios-at-large-b", "c1b-first-ios-falls-as-b-grows",
                           "c1c-contiguous-write-spread", "c1d-contiguous-read-spread",
                           "c2a-optimal-schedule-has-delta-steps", "c2b-figure-1",
                           "c3-btio-span-smaller-but-material", "c4-informed-heuristics-against-the-optimum",
                           "c4-hcdf-over-hdf"}
    assert all(c["pass"] and "deviation" not in c for c in claims.values()), claims
    assert [i for i, c in claims.items() if c["status"] == "not reproduced"] == ["c4-hcdf-over-hdf"]
    report = (clusterfile_quick / "report.md").read_text()
    assert "## Claims" in report and "![synthetic](synthetic.png)" in report
    for f in ("synthetic.png", "btio_c.svg", "heuristics.png", "synthetic/runs.csv", "btio_c/runs.csv"):
        assert (clusterfile_quick / f).exists(), f


def _failing(results: dict) -> set[str]:
    return {c.id for c in clusterfile.evaluate(results) if not c.passed}


def test_clusterfile_claims_fail_when_the_shapes_are_wrong(clusterfile_quick: Path) -> None:
    results = json.loads((clusterfile_quick / "results.json").read_text())
    assert _failing(results) == set()

    # hash-IOS no better than first-IOS, and first-IOS flat in b: c1a, c1b and the write spread fail.
    flat = copy.deepcopy(results)
    for c in flat["throughput"]["synthetic"]:
        if c["op"] == "write":
            c["throughput_MBps"] = 500.0
    assert _failing(flat) >= {"c1a-hash-ios-beats-first-ios-at-large-b", "c1b-first-ios-falls-as-b-grows",
                              "c1c-contiguous-write-spread"}

    # A spread far beyond the paper's fails too, not only one too small.
    wide = copy.deepcopy(results)
    worst = min((c for c in wide["throughput"]["synthetic"] if c["op"] == "read"), key=lambda c: c["throughput_MBps"])
    worst["throughput_MBps"] /= 10
    assert "c1d-contiguous-read-spread" in _failing(wide)

    # BTIO spanning as much as contiguous access fails c3.
    same = copy.deepcopy(results)
    same["throughput"]["btio_c"] = copy.deepcopy(results["throughput"]["synthetic"])
    assert "c3-btio-span-smaller-but-material" in _failing(same)

    # An optimum above Δ (on a random or a d-regular graph), or an
    # uninformed heuristic beating an informed one, fails c2a and c4.
    broken = copy.deepcopy(results)
    broken["graphs"]["densities"][0]["optimal_is_delta"] = False
    d = broken["graphs"]["densities"][-1]
    d["hdf_ratio"], d["fcfs_ratio"] = d["fcfs_ratio"] + 0.01, d["hdf_ratio"]
    broken["graphs"]["figure_1"]["hcdf"] = 3
    assert _failing(broken) == {"c2a-optimal-schedule-has-delta-steps", "c2b-figure-1",
                                "c4-informed-heuristics-against-the-optimum"}
    regular = copy.deepcopy(results)
    regular["graphs"]["families"][0]["optimal_is_delta"] = False
    f = regular["graphs"]["families"][1]
    f["m-passes_ratio"] = f["uar_ratio"] + 0.01
    assert _failing(regular) == {"c2a-optimal-schedule-has-delta-steps", "c4-informed-heuristics-against-the-optimum"}


def _collective(*args: str) -> dict:
    r = concerto("plan", "collective", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_plan_collective_resonant_gives_each_server_one_agent_and_two_phase_exchanges() -> None:
    args = ("--pattern", "demo:segment=64KiB", "--procs", "4", "--servers", "4")
    resonant = _collective(*args, "--strategy", "resonant")
    assert resonant["plan"]["agents"] == [[0, [0]], [1, [1]], [2, [2]], [3, [3]]]
    assert resonant["exchanged_bytes"] == 0 and resonant["io_bytes"] == resonant["requested_bytes"] == 1 << 20
    # Agent 2's one request touches only server 2, from 128 KiB on.
    assert resonant["touches"][2][0][0] == [[2, 131072, 262144]]
    two_phase = _collective(*args, "--strategy", "two-phase")
    assert two_phase["exchanged_bytes"] == 3 * 4 * 65536
    assert two_phase["plan"]["agents"] == []
    table = concerto("plan", "collective", *args, "--strategy", "two-phase")
    assert table.returncode == 0 and "exchanges between processes" in table.stdout, table.stdout
    written = _collective("--pattern", "noncontig:elmtcount=16,call=1MiB", "--procs", "4", "--servers", "4", "--write")
    assert written["plan"]["direction"] == "write" and written["exchanged_bytes"] > 0


def test_plan_collective_bad_arguments_name_the_problem() -> None:
    cases = [
        (["--pattern", "tilez", "--procs", "4", "--servers", "4"], "--pattern: unknown pattern"),
        (["--pattern", "demo:segment=0", "--procs", "4", "--servers", "4"], "segment must be > 0"),
        (["--pattern", "demo", "--procs", "4", "--servers", "4"], "demo: give segment"),
        (["--pattern", "demo:segment=1KiB", "--procs", "4", "--servers", "4", "--stripe", "0"], "--servers/--stripe"),
        (["--pattern", "demo:segment=1KiB", "--procs", "4", "--servers", "4", "--stripe", "abc"],
         "'--stripe': \"abc\""),
        (["--pattern", "demo:segment=1KiB", "--procs", "4", "--servers", "4", "--strategy", "two-phase",
          "--cb-buffer-size", "0"], "--cb-buffer-size: must be at least 1 byte"),
        (["--pattern", "demo:segment=1KiB", "--procs", "0", "--servers", "4"], "--procs"),
        (["--pattern", "demo:segment=1KiB", "--procs", "4", "--servers", "4", "--strategy", "resonant",
          "--cb-nodes", "2"], '--cb-nodes does not apply to strategy "resonant"'),
        (["--pattern", "demo:segment=1KiB", "--procs", "4", "--servers", "4", "--strategy", "independent",
          "--agents-per-server", "2"], '--agents-per-server does not apply to strategy "independent"'),
    ]
    for args, says in cases:
        r = concerto("plan", "collective", *args)
        assert r.returncode != 0 and says in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def resonance_quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reproduce_quick("resonance", tmp_path_factory)


def test_reproduce_resonance_quick_passes_every_claim(resonance_quick: Path) -> None:
    claims = {c["id"]: c for c in json.loads((resonance_quick / "claims.json").read_text())}
    assert set(claims) == {"c1-independent-io-resonates", "c2a-resonant-at-least-two-phase",
                           "c2b-resonant-gains-where-the-paper-has-them", "c2b-mpi-io-test-gain",
                           "c3-resonant-above-two-phase-under-interference", "c3-relative-to-alone",
                           "c4-timed-groups"}
    assert all(c["pass"] for c in claims.values()), [c for c in claims.values() if not c["pass"]]
    assert {i for i, c in claims.items() if c["status"] == "not reproduced"} == {
        "c2b-mpi-io-test-gain", "c3-relative-to-alone"}
    report = (resonance_quick / "report.md").read_text()
    assert "Where the model and the paper differ" in report
    for f in ("demo.png", "mpi-io-test.png", "noncontig.png", "ior-mpi-io.png", "hpio.png", "coll-perf.png",
              "demo/runs.csv", "benchmarks/runs.csv", "interference/runs.csv"):
        assert (resonance_quick / f).exists(), f


def _resonance_failing(results: dict) -> set[str]:
    return {c.id for c in resonance.evaluate(results) if not c.passed}


def test_resonance_claims_fail_when_the_shapes_are_wrong(resonance_quick: Path) -> None:
    results = json.loads((resonance_quick / "results.json").read_text())
    assert _resonance_failing(results) == set()

    # Independent I/O without its peak (flat over the segment size): c1 fails.
    flat = copy.deepcopy(results)
    for c in flat["demo"]:
        if c["strategy"] == "independent":
            c["MBps"] = 60.0
    assert "c1-independent-io-resonates" in _resonance_failing(flat)

    # Resonant I/O 10% below two-phase at one point fails c2a; no gains fail c2b and c4.
    worse = copy.deepcopy(results)
    by = {(c["workload"], c["op"], c["procs"], c["x"], c["strategy"]): c for c in worse["benchmarks"]}
    by[("hpio", "read", 4, 65536, "resonant")]["MBps"] = 0.9 * by[("hpio", "read", 4, 65536, "two-phase")]["MBps"]
    assert _resonance_failing(worse) == {"c2a-resonant-at-least-two-phase"}
    same = copy.deepcopy(results)
    for cells in (same["demo"], same["benchmarks"]):
        tp = {(c["workload"], c["op"], c["procs"], c["x"]): c["MBps"] for c in cells if c["strategy"] == "two-phase"}
        for c in cells:
            if c["strategy"] == "resonant":
                c["MBps"] = tp[(c["workload"], c["op"], c["procs"], c["x"])]
    assert {"c2b-resonant-gains-where-the-paper-has-them", "c2b-mpi-io-test-gain",
            "c4-timed-groups"} <= _resonance_failing(same)

    # Under interference resonant I/O no better than two-phase: c3 fails.
    even = copy.deepcopy(results)
    tp = next(c for c in even["interference"] if c["strategy"] == "two-phase" and c["compute"] == "0s")
    for c in even["interference"]:
        if c["strategy"] == "resonant" and c["compute"] == "0s":
            c["demo_MBps"] = tp["demo_MBps"]
    assert _resonance_failing(even) == {"c3-resonant-above-two-phase-under-interference"}
