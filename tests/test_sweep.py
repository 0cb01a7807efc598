"""Sweep files: expansion, errors, the tidy table, resuming, and the same
rows from one process, several processes and a Dask cluster."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from conftest import ROOT, concerto
from concerto import ConfigError
from concerto.sweep import (Point, aggregate, expand, load_sweep, parse_sweep, policy_override, run_sweep,
                            toml_literal)


def test_cartesian_product_and_zipped_keys() -> None:
    pts = expand({"a": [1, 2], "b,c": [[3, "x"], [4, "y"]]}, n_apps=1, where="sweep")
    assert [p.params for p in pts] == [
        {"a": 1, "b": 3, "c": "x"}, {"a": 1, "b": 4, "c": "y"},
        {"a": 2, "b": 3, "c": "x"}, {"a": 2, "b": 4, "c": "y"},
    ]


def test_wildcard_applies_to_every_app() -> None:
    (p,) = expand({"apps[*].processes": [8]}, n_apps=3, where="sweep")
    assert p.params == {"apps[0].processes": 8, "apps[1].processes": 8, "apps[2].processes": 8}


def test_policy_parameters_only_reach_policies_that_take_them() -> None:
    p = Point({"policy.window": "250ms", "cluster.servers": 4})
    assert p.overrides("fifo") == ["cluster.servers=4", "policy.kind=fifo"]
    assert p.overrides("coordinated") == ['policy.window="250ms"', "cluster.servers=4", "policy.kind=coordinated"]
    assert p.overrides("fifo") == Point({"policy.window": "1s", "cluster.servers": 4}).overrides("fifo")


def test_sfq_parameters_reach_the_sfq_policies() -> None:
    # Sweeping L or D for SFQ(D)+ must run different points, not repeat one.
    p = Point({"policy.large_slots": 3, "policy.depth": 8})
    assert p.overrides("sfq-d-plus") == ["policy.large_slots=3", "policy.depth=8", "policy.kind=sfq-d-plus"]
    assert p.overrides("sfq-d") == ["policy.depth=8", "policy.kind=sfq-d"]


def test_bad_axes_are_reported() -> None:
    with pytest.raises(ConfigError, match="non-empty list"):
        expand({"a": 3}, n_apps=1, where="sweep.axes")
    with pytest.raises(ConfigError, match="list of 2 items"):
        expand({"a,b": [[1]]}, n_apps=1, where="sweep.axes")
    with pytest.raises(ConfigError, match="sweep value"):
        toml_literal(None)
    with pytest.raises(ConfigError, match="as a key"):
        toml_literal({"a b": 1})


def test_override_values_are_written_by_the_toml_library() -> None:
    # Quotes and backslashes survive (a hand-written writer broke on them).
    assert toml_literal('say "hi" \\ now') == '"say \\"hi\\" \\\\ now"'
    assert toml_literal([1, 2.5, True]) == "[\n    1,\n    2.5,\n    true,\n]"
    assert policy_override("sfq-d-plus", {"large_slots": 5, "note": 'a"b'}) == \
        'policy={ kind = "sfq-d-plus", large_slots = 5, note = "a\\"b" }'


def test_every_shipped_sweep_file_loads_full_and_quick() -> None:
    files = sorted((ROOT / "experiments").glob("*/*.toml"))
    assert len([f for f in files if f.parent.name == "iosets"]) >= 5
    for f in files:
        if "[sweep]" not in f.read_text():
            continue  # the vpfs scenario files are plain scenarios
        full, quick = load_sweep(f), load_sweep(f, quick=True)  # every point is checked against the base
        assert 0 < len(quick.points) <= len(full.points), f
        assert quick.reps <= full.reps, f


WORKLOAD_SWEEP = """
[sweep]
id = "tiny"
policies = ["fair-share", "exclusive-fcfs", "set10"]
reps = 3
seed = 7
window_s = [100, 900]
[sweep.axes]
io_stress = [0.4, 0.8]
"groups[0].count" = [2, 4]
[[sweep.plots]]
x = "io_stress"
y = "max_stretch"
style = "box"
[[sweep.plots]]
x = "groups[0].count"
y = "utilization"
relative_to = "fair-share"

[workload]
horizon_s = 2000
io_stress = 0.8
bandwidth = "1GB/s"
[[workload.groups]]
count = 3
mu_s = 10
sigma_s = 1
[[workload.groups]]
count = 3
mu_s = 100
sigma_s = 10
"""


def test_a_workload_sweep_makes_one_tidy_row_per_point_policy_and_repetition(tmp_path: Path) -> None:
    sweep = parse_sweep(WORKLOAD_SWEEP, "tiny.toml")
    result = run_sweep(sweep, out=tmp_path, progress=False)
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert len(rows) == len(result.rows) == 4 * 3 * 3
    assert {(r["io_stress"], r["groups[0].count"], r["policy"], r["seed"]) for r in rows} == {
        (s, c, p, str(seed)) for s in ("0.4", "0.8") for c in ("2", "4")
        for p in ("fair-share", "exclusive-fcfs", "set10") for seed in (7, 8, 9)}
    # Every rule saw the same drawn workload: FCFS never beats its own single set's stretch bound.
    assert all(float(r["max_stretch"]) >= 1.0 and 0 < float(r["utilization"]) <= 1 for r in rows)
    assert (tmp_path / "max_stretch_by_io_stress.png").exists()
    assert (tmp_path / "utilization_vs_fair-share_by_groups_0_count.png").exists()
    means = {(a["params"]["io_stress"], a["params"]["groups[0].count"], a["policy"]): a for a in aggregate(sweep, result.rows)}
    assert means[(0.8, 4, "exclusive-fcfs")]["max_stretch"] > means[(0.8, 4, "fair-share")]["max_stretch"]


def test_a_sweep_resumes_without_redoing_finished_runs(tmp_path: Path) -> None:
    sweep = parse_sweep(WORKLOAD_SWEEP, "tiny.toml")
    first = run_sweep(sweep, out=tmp_path, progress=False)
    log = tmp_path / "runs.jsonl"
    lines = log.read_text().splitlines()
    assert first.ran == len(lines) == 4 * 3 and first.reused == 0  # a task per point and repetition
    # A sweep that stopped part way: five tasks finished, the sixth line cut short by the crash.
    log.write_text("\n".join(lines[:5]) + "\n" + lines[5][: len(lines[5]) // 2])
    again = run_sweep(sweep, out=tmp_path, progress=False)
    assert (again.ran, again.reused) == (7, 5)
    assert again.rows == first.rows
    assert run_sweep(sweep, out=tmp_path, progress=False).ran == 0
    # More repetitions run only the new ones.
    more = run_sweep(parse_sweep(WORKLOAD_SWEEP.replace("reps = 3", "reps = 4"), "tiny.toml"), out=tmp_path,
                     progress=False)
    assert (more.ran, more.reused) == (4, 12)
    assert [r for r in more.rows if r["rep"] < 3] == first.rows


def test_two_worker_processes_give_the_rows_of_one(tmp_path: Path) -> None:
    sweep = parse_sweep(WORKLOAD_SWEEP, "tiny.toml")
    one = run_sweep(sweep, out=tmp_path / "one", workers=1, progress=False)
    two = run_sweep(sweep, out=tmp_path / "two", workers=2, progress=False)
    assert one.rows == two.rows
    assert (tmp_path / "one" / "runs.csv").read_text() == (tmp_path / "two" / "runs.csv").read_text()


def test_a_dask_local_cluster_gives_the_rows_of_one_process(tmp_path: Path) -> None:
    sweep = parse_sweep(WORKLOAD_SWEEP, "tiny.toml")
    local = run_sweep(sweep, workers=1, progress=False)
    dask = run_sweep(sweep, out=tmp_path, workers=2, dask="local", progress=False)
    assert dask.rows == local.rows


SCENARIO_SWEEP = """
[sweep]
id = "small"
policies = ["fifo", "coordinated"]
reps = 2
[sweep.axes]
"apps[0].instances" = [2, 3]
"policy.window" = ["250ms", "1s"]

[scenario]
name = "small"
seed = 3
[scenario.cluster]
servers = 2
stripe_unit = "4KiB"
[scenario.cluster.device]
kind = "hdd"
[[scenario.apps]]
workload = "ior"
instances = 2
processes = 2
requests = 2
request_size = "16KiB"
"""


def test_a_scenario_sweep_runs_each_distinct_run_once(tmp_path: Path) -> None:
    sweep = parse_sweep(SCENARIO_SWEEP, "small.toml")
    result = run_sweep(sweep, out=tmp_path, progress=False)
    # FIFO takes no window: its two window points are one run each.
    assert result.ran == 2 * (1 + 2) * 2
    assert len(result.rows) == 2 * 2 * 2 * 2
    assert {r["seed"] for r in result.rows} == {3, 4}
    fifo = [r for r in result.rows if r["policy"] == "fifo" and r["apps[0].instances"] == 2]
    assert fifo[0]["avg_completion_s"] == fifo[2]["avg_completion_s"] and fifo[0]["policy.window"] != fifo[2]["policy.window"]


@pytest.mark.parametrize("text, message", [
    ("[sweep]\n", "needs a \\[sweep\\] table and one base table"),
    (WORKLOAD_SWEEP.replace("reps = 3", "reps = 0"), "sweep.reps: 0 must be a whole number from 1 to 1,000,000"),
    (WORKLOAD_SWEEP.replace('"set10"]', '"set11"]'), "unknown variant `set11`"),
    (WORKLOAD_SWEEP.replace("io_stress = [0.4, 0.8]", "io_stress = [0.4, -1]"), "io_stress: -1 must be a positive number"),
    (WORKLOAD_SWEEP.replace('"groups[0].count" = [2, 4]', '"groups[5].count" = [2]'), "groups\\[5\\].count: index 5 is out of range"),
    (WORKLOAD_SWEEP.replace("window_s = [100, 900]", "window_s = [900, 100]"), "sweep.window_s"),
    (WORKLOAD_SWEEP.replace('style = "box"', 'style = "pie"'), "sweep.plots\\[0\\].style: 'pie' is not one of"),
    (WORKLOAD_SWEEP.replace('x = "io_stress"', 'x = "noise"'), "sweep.plots\\[0\\].x: 'noise' is not a swept key"),
    (WORKLOAD_SWEEP.replace("sigma_s = 10", "sigma_s = 10\nwidth = 3"), "unknown field `width`"),
    (SCENARIO_SWEEP.replace('"coordinated"]', '"lifo"]'), "sweep.policies: unknown policy 'lifo'"),
    (WORKLOAD_SWEEP.replace("reps = 3", "reps = 3\npolices = []"), "sweep.polices: unknown key"),
    (SCENARIO_SWEEP.replace('"apps[0].instances" = [2, 3]', '"apps[0].instances" = [0]'), "apps\\[0\\].instances"),
])
def test_bad_sweep_files_name_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        parse_sweep(text, "bad.toml")
    assert str(e.value).startswith("bad.toml")


def test_sim_sweep_from_the_command_line(tmp_path: Path) -> None:
    f = tmp_path / "tiny.toml"
    f.write_text(WORKLOAD_SWEEP)
    out = tmp_path / "out"
    r = concerto("sim", "sweep", str(f), "--reps", "2", "--workers", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "tiny" in r.stderr and "8/8" in r.stderr.replace(" ", "")  # the progress bar
    assert len(list(csv.DictReader((out / "runs.csv").open()))) == 4 * 3 * 2
    again = concerto("sim", "sweep", str(f), "--reps", "2", "--out", str(out))
    assert again.returncode == 0 and "8 tasks reused" in again.stdout, again.stdout
    bad = concerto("sim", "sweep", str(f), "--workers", "0")
    assert bad.returncode != 0 and "--workers" in bad.stderr
    unreachable = concerto("sim", "sweep", str(f), "--reps", "1", "--dask", "tcp://127.0.0.1:9")
    assert unreachable.returncode != 0 and "cannot reach the scheduler" in unreachable.stderr, unreachable.stderr


def test_reproduce_iosets_quick(tmp_path: Path) -> None:
    r = concerto("reproduce", "iosets", "--quick", "--out", str(tmp_path), cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    claims = {c["id"]: c for c in json.loads((tmp_path / "claims.json").read_text())}
    assert set(claims) == {"c1-exclusive-fcfs-worst-stretch", "c2a-set10-beats-fair-share-few-high-frequency",
                           "c2b-utilization-gain", "c2c-difference-disappears", "c2d-sigma-well-defined",
                           "c2d-sigma-spread", "c3-noise-no-effect", "c4-set10-close-to-clairvoyant",
                           "c5-fluid-hand-computation"}
    assert all(c["pass"] and "deviation" not in c for c in claims.values()), claims
    assert {i for i, c in claims.items() if c["status"] == "not reproduced"} == {
        "c2b-utilization-gain", "c2d-sigma-spread"}
    report = (tmp_path / "report.md").read_text()
    for sweep_id in ("periodic-0.8", "periodic-0.2", "noise", "sigma", "fourth-profile"):
        assert (tmp_path / sweep_id / "runs.csv").exists()
        assert f"({sweep_id}/" in report
    assert (tmp_path / "periodic-0.8" / "max_stretch.png").exists()


def test_a_sweep_file_is_checked_whole_even_when_sim_run_runs_its_base(tmp_path):
    from conftest import concerto

    base = ('[scenario]\nname = "s"\n[scenario.cluster]\nservers = 2\n[scenario.cluster.device]\nkind = "hdd"\n'
            '[[scenario.apps]]\nworkload = "ior"\nprocesses = 2\nrequests = 2\nrequest_size = "64KiB"\n')
    cases = [('bogus = 1\n[sweep]\nid = "x"\n', "bogus: unknown top-level key"),
             ('[sweep]\nid = "x"\nreps = 99999999999\n', "sweep.reps: 99999999999 must be a whole number from 1 to"),
             ('[sweep]\nid = "x"\nservers = 0\n', "sweep.servers: unknown key")]
    for head, message in cases:
        f = tmp_path / "s.toml"
        f.write_text(head + base)
        for command in (["sim", "run", str(f), "--out", str(tmp_path / "o")], ["sim", "sweep", str(f)]):
            r = concerto(*command)
            assert r.returncode == 2 and message in " ".join(r.stderr.split()), (command, r.stderr)


def test_a_bad_swept_value_is_named_with_its_line_in_the_sweep_file(tmp_path):
    from conftest import concerto

    f = tmp_path / "s.toml"
    f.write_text('[sweep]\nid = "x"\npolicies = ["fifo"]\n[sweep.axes]\n'
                 '"cluster.servers, apps[0].request_size" = [[2, "64KiB"], [2, "64KQ"]]\n'
                 '[scenario]\nname = "s"\n[scenario.cluster]\nservers = 2\n[scenario.cluster.device]\nkind = "hdd"\n'
                 '[[scenario.apps]]\nworkload = "ior"\nprocesses = 2\nrequests = 2\nrequest_size = "64KiB"\n')
    for command in (["sim", "sweep", str(f), "--out", str(tmp_path / "o")], ["sim", "run", str(f)]):
        r = concerto(*command)
        message = " ".join(r.stderr.split())
        assert r.returncode == 2 and 'apps[0].request_size: unknown size unit "KQ"' in message, r.stderr
        assert '(as set by the sweep\'s apps[0].request_size = "64KQ", line 5)' in message, r.stderr



def test_a_swept_duration_without_its_unit_is_warned_with_its_line_in_the_sweep_file(tmp_path):
    from conftest import concerto

    f = tmp_path / "s.toml"
    f.write_text('[sweep]\nid = "x"\npolicies = ["coordinated"]\n[sweep.axes]\n'
                 '"policy.window" = ["1ms", 250]\n'
                 '[scenario]\nname = "s"\n[scenario.cluster]\nservers = 2\n[scenario.cluster.device]\nkind = "hdd"\n'
                 '[[scenario.apps]]\nworkload = "ior"\nprocesses = 2\nrequests = 2\nrequest_size = "64KiB"\n')
    r = concerto("sim", "sweep", str(f), "--out", str(tmp_path / "o"))
    message = " ".join(r.stderr.split())
    assert r.returncode == 0, r.stderr
    assert message.count("warning: ") == 1, r.stderr
    assert (f"warning: {f}: policy.window: 250 has no unit and is read as 250 ns; write the unit: "
            '"250ns" if that is meant, else e.g. "250us" or "250ms" (as set by the sweep\'s policy.window = 250, line 5)'
            ) in message, r.stderr
