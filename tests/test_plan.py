"""`concerto plan transfers`: the Clusterfile scheduling problem from the
command line: heuristics against the optimum, and bad input named."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import concerto


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
