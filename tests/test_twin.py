"""`concerto twin`: an IOR or mdtest command line run by the project's own
drivers on a local throttled cluster through the mount, and in the
simulator on the cluster's twin, side by side. Needs root and /dev/fuse,
as CI has."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from concerto import benchmarks, twin
from concerto.sim import ScenarioSource, simulate
from conftest import concerto

IOR = ["mpirun", "-np", "2", "ior", "-t", "256k", "-b", "1m", "-s", "2", "-F"]


def _twin(tmp_path: Path, name: str, *args: str, reps: int = 1) -> dict:
    out = tmp_path / name
    r = concerto("twin", *args, "--reps", str(reps), "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sim / real" in r.stdout
    assert (out / "twin.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "every twin run draws its plot"
    return json.loads((out / "twin.json").read_text())


def test_the_plot_draws_each_operations_real_range_median_and_simulated_value(tmp_path):
    from concerto import twin_plot

    figures = {"unit": "ops/s", "rows": [
        {"operation": "Tree creation", "real": 12.0, "real_runs": [9.0, 12.0, 15.0], "sim": 40.0},
        {"operation": "File stat", "real": 3000.0, "real_runs": [3000.0], "sim": 2900.0}]}
    assert twin_plot.points(figures) == [
        {"operation": "Tree creation", "low": 9.0, "median": 12.0, "high": 15.0, "sim": 40.0},
        {"operation": "File stat", "low": 3000.0, "median": 3000.0, "high": 3000.0, "sim": 2900.0}]
    path = twin_plot.plot([("mdtest", figures), ("ior", {"unit": "MiB/s", "rows": [
        {"operation": "write", "real": 80.0, "real_runs": [70.0, 80.0], "sim": 86.0}]})], tmp_path / "p.png")
    assert path.stat().st_size > 10_000


def test_twin_runs_ior_on_both_sides_and_each_row_is_its_sides_figures(tmp_path):
    result = _twin(tmp_path, "ior", *IOR, "-w", "-r")
    assert result["unit"] == "MiB/s" and result["app"]["processes"] == 2
    rows = result["rows"]
    assert [r["operation"] for r in rows] == ["write", "read"]
    for r in rows:
        assert r["real"] > 0 and r["sim"] > 0
        assert r["sim_over_real"] == pytest.approx(r["sim"] / r["real"])
    # The simulated side is the simulator's for the same command line.
    app = benchmarks.from_ior(" ".join(IOR + ["-w", "-r"]))
    expected = twin.simulated("ior", {**app, "name": "ior"}, twin.TwinSpec(reps=1))
    assert [r["sim"] for r in rows] == pytest.approx(list(expected.values()))


def test_the_real_side_of_an_ior_write_never_beats_the_throttles_device_by_more_than_15_percent(tmp_path):
    # The throttle enforces the device model the simulator is given, so the
    # real side can be no faster than that device allows, beyond the
    # issue's 15%, however busy the host. What the device allows is its
    # time without seeks: on the HDD class a seek (8 ms) costs as much as
    # 0.8 MB, and how many the servers pay depends on the order in which
    # the two tasks' requests arrive, which the host's scheduler decides.
    # The simulated figure with seeks is no bound: a fresh clone's CI
    # measured 107 MiB/s against its 86.7 (one seek fewer on a 46 ms run;
    # 72-92 here, quiet or beside two busy loops). How close the real side
    # comes to the simulated figure is the test after this one, in `make
    # check-full`.
    (row,) = _twin(tmp_path, "bound", *IOR, "-w", reps=1)["rows"]
    best = _seek_free_write(twin.TwinSpec(reps=1))
    assert best > row["sim"], (best, row)
    assert row["real"] <= 1.15 * best, (row, best)


def _seek_free_write(spec: twin.TwinSpec) -> float:
    """The simulated write figure (MiB/s) of ``IOR -w`` on the twin of
    ``spec``, its device seeking for free: the fastest the throttle lets
    the real side go, whatever the order its requests arrive in."""
    app = {**benchmarks.from_ior(" ".join(IOR + ["-w"])), "name": "ior"}
    with_seeks = twin.sim_scenario([("ior", app)], spec)
    assert re.search(r'^seek = "[1-9]\d*ns"$', with_seeks, re.MULTILINE), with_seeks
    seek_free = re.sub(r'^seek = "\d+ns"$', 'seek = "0ns"', with_seeks, flags=re.MULTILINE)
    ((op,),) = [run["apps"][0]["ior"] for run in
                simulate(ScenarioSource(text=seek_free, label="seek-free"), reps=1)["runs"]]
    return op["bandwidth_MiBps"]


@pytest.mark.quiet_machine
def test_ior_file_per_process_writes_agree_within_15_percent_on_hdd_class_servers(tmp_path):
    # Both sides of the 15%, two-sided, on a quiet machine (`make
    # check-full` records the host's load beside it). The real side is the
    # median of three runs: one run (4 MiB, a sixth of a second) read 1.21
    # once on a loaded CI machine, where it reads 1.06-1.08 here; a busy
    # host (load 6-16) took the real side to 0.35-0.6 of the model.
    #
    # Written through: uncalibrated, the simulator has no cost for the
    # mount's copy of a held write (docs/reproductions.md, "The twin on the
    # default mount").
    (row,) = _twin(tmp_path, "agree", *IOR, "-w", "--write-behind", "0", reps=3)["rows"]
    assert 0.85 <= row["sim_over_real"] <= 1.15, row


def test_the_table_shows_the_real_runs_range_beside_their_median(tmp_path):
    out = tmp_path / "spread"
    r = concerto("twin", *IOR, "-w", "--reps", "2", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads((out / "twin.json").read_text())["rows"]
    assert len(row["real_runs"]) == 2
    assert "real runs" in r.stdout
    assert f"{min(row['real_runs']):.1f}-{max(row['real_runs']):.1f}" in r.stdout, r.stdout


def test_a_faster_throttle_moves_both_sides_of_the_table(tmp_path):
    # Written through, so that the real side waits on its throttle: with
    # the mount's write-behind (the twin's default) the HDD class's writes
    # are coalesced and the SSD class's CPU-bound, and at load 7 one SSD
    # run wrote 17 MiB/s against the HDD's 64.
    hdd = _twin(tmp_path, "hdd", *IOR, "-w", "--throttle", "hdd", "--write-behind", "0")["rows"][0]
    ssd = _twin(tmp_path, "ssd", *IOR, "-w", "--throttle", "ssd", "--write-behind", "0")["rows"][0]
    # The HDD class seeks 8 ms between the two tasks' files; the SSD class
    # does not and has 5x the bandwidth. The simulator says so by far more
    # than noise; the real side moves the same way. By how much it moves is
    # what the host has to spare: quiet, more than 2x (the next test, in
    # `make check-full`); with the cores busy the SSD class is CPU-bound
    # (34 against 20 MiB/s at load 6-16), while the HDD class waits on its
    # throttle and can never beat its device, seeking for free, by more
    # than the tolerance (the simulated figure with seeks is no bound: the
    # test before this one says why).
    assert ssd["sim"] > 2 * hdd["sim"], (hdd, ssd)
    assert ssd["real"] > hdd["real"], (hdd, ssd)
    assert hdd["real"] <= 1.15 * _seek_free_write(twin.TwinSpec(reps=1, write_behind="0")), hdd


@pytest.mark.quiet_machine
def test_a_faster_throttle_moves_the_real_side_as_far_as_the_simulated_one_on_a_quiet_machine(tmp_path):
    hdd = _twin(tmp_path, "hdd", *IOR, "-w", "--throttle", "hdd", "--write-behind", "0")["rows"][0]
    ssd = _twin(tmp_path, "ssd", *IOR, "-w", "--throttle", "ssd", "--write-behind", "0")["rows"][0]
    assert ssd["real"] > 2 * hdd["real"], (hdd, ssd)


def test_twin_runs_mdtest_phases_under_mdtests_names(tmp_path):
    result = _twin(tmp_path, "md", "srun", "-n", "2", "mdtest", "-n", "20", "-u", "-F", "-w", "4k", "-e", "4k")
    assert result["unit"] == "ops/s"
    assert [r["operation"] for r in result["rows"]] == [
        "Tree creation", "File creation", "File stat", "File read", "File removal", "Tree removal"]
    for r in result["rows"]:
        assert r["real"] > 0 and r["sim"] > 0


@pytest.mark.parametrize("options", ["-n 5 -u -F -w 4k -e 4k", "-n 5 -u -F -C -T -r", "-n 5 -u -F -C -E -e 4k"])
def test_the_real_sides_mdtest_rows_are_named_as_the_simulator_names_them(options):
    app = benchmarks.from_mdtest(options, processes=2)
    spans = [(0.0, 1.0)] * len(twin.md_operations(app["md_steps"]))
    real = [name for name, _ in twin._figures("mdtest", app, spans)]
    simulated = [key.split(":", 1)[1] for key in twin.simulated("mdtest", app, twin.TwinSpec())]
    assert [name for name in real if not name.startswith("(")] == simulated


@pytest.mark.parametrize("args, message", [
    (["mpirun", "-np", "2", "ior", "-a", "MPIIO", "-c", "-w"], "collective I/O on real servers"),
    (["mpirun", "-np", "2", "a.out"], "no ior or mdtest on the command line"),
    (["ior", "-z"], "ior -z: random offsets are not modelled"),
    (["mdtest", "-n", "5", "-u"], "mdtest without -F"),
    (["ior", "-w", "--write-behind", "lots"], "--write-behind lots"),
])
def test_a_command_line_twin_cannot_run_is_refused_by_name(tmp_path, args, message):
    r = concerto("twin", *args, "--out", str(tmp_path))
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_the_calibration_probe_recovers_a_known_client_overhead_from_a_known_truth():
    # The probe's inversion, with the simulator itself as the "real" side
    # whose client overhead is known: what calibrate computes is it, within 10%.
    from concerto import calibrate

    app = calibrate.probe_app(50)
    none = calibrate.stat_latency(twin.simulated("mdtest", app, twin.TwinSpec(reps=2)))
    for truth_ns in (40_000, 250_000):
        truth = calibrate.stat_latency(twin.simulated("mdtest", app, twin.TwinSpec(reps=2,
                                                                                  client_overhead_ns=truth_ns)))
        assert calibrate.overhead_from(truth, none) == pytest.approx(truth_ns * 1e-9, rel=0.10)
    assert calibrate.overhead_from(0.001, 0.002) == 0.0, "a client faster than the model costs nothing"


def test_the_data_probe_recovers_a_known_mount_bandwidth_from_a_known_truth():
    # The data probe's inversion, with the simulator itself as the "real"
    # side whose mount (its client node's link) is known: what calibrate
    # computes from the two transfer sizes is it, within 10%.
    from concerto import calibrate

    def per_write(spec: twin.TwinSpec) -> dict[int, float]:
        return {t: calibrate.write_latency(twin.simulated("ior", calibrate.data_probe_app(t), spec), t)
                for t in calibrate.DATA_PROBE_TRANSFERS}

    # Written through, as calibrate's probe writes (`calibrate.calibrate`).
    none = per_write(twin.TwinSpec(reps=2, write_behind="0"))
    for truth in (150e6, 400e6):
        real = per_write(twin.TwinSpec(reps=2, write_behind="0", mount_bandwidth_Bps=truth))
        found = calibrate.mount_bandwidth_from({t: real[t] - none[t] for t in none})
        assert found == pytest.approx(truth, rel=0.10), (truth, real, none)
    assert calibrate.mount_bandwidth_from({16384: 0.002, 262144: 0.001}) is None, \
        "an excess that shrinks with the transfer is no cost per byte"


def test_calibrate_measures_the_client_overhead_and_the_twin_charges_it(tmp_path):
    r = concerto("calibrate", "--items", "100", "--reps", "1", "--out", str(tmp_path / "cal"))
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert result["real_stat_s"] > 0 and result["simulated_stat_s"] > 0
    assert result["client_overhead_ns"] == round(max(0.0, result["real_stat_s"] - result["simulated_stat_s"]) * 1e9)
    calibration = tmp_path / "cal" / "calibration.toml"
    from concerto.calibrate import (
        COSTED_OPERATIONS,
        DATA_OVERHEAD_TRANSFERS,
        DATA_PROBE_TRANSFERS,
        beyond_device_from,
        mount_bandwidth_from,
        read_calibration,
        throttle_charge_ns,
    )

    read = read_calibration(calibration, twin.TwinSpec())
    overhead, costs, bandwidth = read.client_overhead_ns, read.metadata_costs_ns, read.mount_bandwidth_Bps
    # The page cache's rate: what one process read back through the mount
    # of what it wrote, in the file's [cluster] (the twin's side leaves it out).
    assert result["page_cache_Bps"] > 0
    assert f'page_cache = "{result["page_cache_Bps"] / 1e6:.1f}MB/s"' in calibration.read_text()
    assert overhead == result["client_overhead_ns"] and costs == result["metadata_costs_ns"]
    # How much a step varies: measured, part of the overhead, in the file.
    assert 0 <= result["client_overhead_spread_ns"] <= overhead
    assert read.client_overhead_spread_ns == result["client_overhead_spread_ns"]
    # A data request's latency at the server beyond the throttle's device
    # time, measured at two sizes (each one piece, no seek), less the
    # handling any request pays there (the client overhead carries it), is
    # the server's overhead per data request, and the twin charges it.
    assert set(result["server_data_latency_ns"]) == {f"write-{t}" for t in DATA_OVERHEAD_TRANSFERS}
    beyond = result["server_data_beyond_device_ns"]
    assert beyond == beyond_device_from(result["server_data_latency_ns"], "hdd")
    assert result["server_data_overhead_ns"] == max(0, beyond - result["server_fixed_ns"])
    assert read.server_data_overhead_ns == result["server_data_overhead_ns"]
    # The data probe's two sizes were written on both sides; the mount's
    # bandwidth is what their difference says (to the file's 1 kB/s).
    assert set(result["data_probe"]) == {str(t) for t in DATA_PROBE_TRANSFERS}
    excess = {int(t): w["real_s"] - w["simulated_s"] for t, w in result["data_probe"].items()}
    expected = mount_bandwidth_from(excess)
    assert (bandwidth is None) == (expected is None)
    if expected is not None:
        assert bandwidth == pytest.approx(expected, abs=1e3)
    # Every operation was measured at the server, and none took less than
    # the device time the throttle charges it (300 us; 5% for the clock's
    # rounding): the probe sees the server's real work, not a guess.
    charge = throttle_charge_ns("hdd")
    assert set(result["server_latency_ns"]) == set(COSTED_OPERATIONS)
    assert min(result["server_latency_ns"].values()) >= 0.95 * charge, result["server_latency_ns"]
    assert min(costs.values()) == charge
    # The twin given the file charges that overhead on its simulated side:
    # a simulated stat takes what it took with none plus the overhead. How
    # close that lands to the real side of this second run is a measurement
    # of two timed runs on a shared machine (docs/reproductions.md reports
    # it, with its command), not something a test can assert.
    out = _twin(tmp_path, "calibrated", "mdtest", "-n", "100", "-u", "-F", "-C", "-T", "-r", "--processes", "1",
                "--calibration", str(calibration))
    stat = next(r for r in out["rows"] if r["operation"] == "File stat")
    assert stat["real"] > 0
    charged_s = result["simulated_stat_s"] + result["client_overhead_ns"] * 1e-9
    assert 1.0 / stat["sim"] == pytest.approx(charged_s, rel=0.10), stat


def test_the_servers_handling_of_any_request_is_not_charged_as_device_time():
    from concerto.calibrate import split_latency

    costs, fixed = split_latency({"getattr": 410_000, "create": 520_000, "fsync": 400_000}, 300_000)
    assert fixed == 100_000
    assert costs == {"getattr": 310_000, "create": 420_000, "fsync": 300_000}
    # A server faster than the throttle's charge still costs the charge.
    assert split_latency({"getattr": 250_000}, 300_000) == ({"getattr": 300_000}, 0)


@pytest.mark.parametrize("network, message", [
    ('[cluster.network]\nclient_bandwidth = "fast"\n', "cluster.network.client_bandwidth = 'fast'"),
    ('[cluster.network]\nlatency = "50us"\n', "cluster.network needs client_bandwidth"),
])
def test_a_calibration_file_with_a_bad_mount_bandwidth_is_refused_naming_the_key(tmp_path, network, message):
    bad = tmp_path / "calibration.toml"
    bad.write_text('[cluster]\nclient_overhead = "70us"\n' + network)
    r = concerto("twin", "ior", "-w", "--calibration", str(bad), "--out", str(tmp_path))
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_a_calibration_file_with_a_bad_cost_is_refused_naming_the_key(tmp_path):
    bad = tmp_path / "calibration.toml"
    bad.write_text('[cluster]\nclient_overhead = "70us"\n[cluster.metadata.costs]\nlookup = "300us"\n')
    r = concerto("twin", "ior", "-w", "--calibration", str(bad), "--out", str(tmp_path))
    assert r.returncode == 2 and "cluster.metadata.costs.lookup: not an operation" in r.stderr, r.stderr
    bad.write_text('[cluster]\nclient_overhead = "70us"\n[cluster.metadata.costs]\ncreate = 300\n')
    r = concerto("twin", "ior", "-w", "--calibration", str(bad), "--out", str(tmp_path))
    assert r.returncode == 2 and "cluster.metadata.costs.create = 300" in r.stderr, r.stderr


def test_a_calibration_file_without_the_overhead_is_refused_naming_it(tmp_path):
    bad = tmp_path / "calibration.toml"
    bad.write_text("[cluster]\nservers = 4\n")
    r = concerto("twin", "ior", "-w", "--calibration", str(bad), "--out", str(tmp_path))
    assert r.returncode == 2 and f"{bad}: no cluster.client_overhead" in r.stderr, r.stderr
    bad.write_text("[cluster]\nclient_overhead = \"soon\"\n")
    r = concerto("twin", "ior", "-w", "--calibration", str(bad), "--out", str(tmp_path))
    assert r.returncode == 2 and "cluster.client_overhead = 'soon'" in r.stderr, r.stderr


def test_a_task_that_dies_stops_the_real_run_at_once_naming_it():
    # Not after OPERATION_TIMEOUT_S of waiting for a report it will never send.
    import multiprocessing as mp
    import os

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    alive = ctx.Event()
    procs = [ctx.Process(target=alive.wait, daemon=True), ctx.Process(target=os._exit, args=(3,), daemon=True)]
    for p in procs:
        p.start()
    try:
        with pytest.raises(twin.TwinProblem, match=r"task 1 of the real run failed \(exit code 3"):
            twin._next_mark(out, procs)
    finally:
        alive.set()
        for p in procs:
            p.join(10)


APPS = """
[[apps]]
name = "ckpt"
workload = "ior"
processes = 2
request_size = "256KiB"
block_size = "1MiB"
segments = 2
operations = ["write", "read"]
file = "per-process"

[[apps]]
name = "md"
workload = "md-test"
processes = 2
items = 10
md_steps = ["mktestdir", "create", "write", "stat", "rm", "rmtestdir"]
request_size = 4096
"""


def test_twin_runs_an_apps_file_at_once_on_both_sides(tmp_path):
    apps = tmp_path / "apps.toml"
    apps.write_text(APPS)
    out = tmp_path / "out"
    r = concerto("twin", "--apps", str(apps), "--reps", "1", "--policy", "sfq-d-plus", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ckpt (ior, 2 tasks)" in r.stdout and "md (mdtest, 2 tasks)" in r.stdout
    result = json.loads((out / "twin.json").read_text())
    ckpt, md = result["apps"]
    assert [row["operation"] for row in ckpt["rows"]] == ["write", "read"] and ckpt["unit"] == "MiB/s"
    assert [row["operation"] for row in md["rows"]] == [
        "Tree creation", "File creation", "File stat", "File removal", "Tree removal"]
    for row in ckpt["rows"] + md["rows"]:
        assert row["real"] > 0 and row["sim"] > 0
    # The simulated side is the two applications in one simulation, sharing the servers.
    spec = twin.TwinSpec(policy="sfq-d-plus", reps=1)
    expected = twin.simulated_apps(twin.apps_of(apps), spec)
    assert [row["sim"] for row in ckpt["rows"]] == pytest.approx(list(expected[0].values()))
    assert [row["sim"] for row in md["rows"]] == pytest.approx(list(expected[1].values()))
    alone = twin.simulated("ior", twin.apps_of(apps)[0][1], spec)
    assert list(alone.values())[0] > expected[0]["0:write"], "sharing the servers slows the checkpoint down"


def test_each_application_of_an_apps_file_is_its_own_application_at_the_servers(tmp_path):
    from concerto import cluster as local
    from concerto.fs import Client
    from concerto.fsbench import mounted_cluster

    apps_file = tmp_path / "apps.toml"
    apps_file.write_text(APPS)
    apps = twin.apps_of(apps_file)
    with mounted_cluster(tmp_path / "real", local.ClusterSpec(servers=2, throttle="ssd"), write_behind="0") as mnt:
        root = mnt / "r"
        root.mkdir()
        twin.real_once(apps, root)
        stats = Client(tmp_path / "real" / "cluster" / "cluster.toml").server_stats()
    data = {}
    for server in stats:
        for a in server["apps"]:
            data[a["app"]] = data.get(a["app"], 0) + a["data_ops"]
    # The checkpoint (application 1) wrote and read 2 x 2 MiB in 256 KiB
    # transfers; mdtest (application 2) wrote ten 4 KiB files per task.
    assert data.get(1, 0) >= 2 * 16 and data.get(2, 0) >= 20, data


@pytest.mark.parametrize("text, message", [
    ('[[apps]]\nworkload = "btio"\n', "apps[0]: workload 'btio': the twin's drivers run"),
    ('[[apps]]\nname = "a"\nworkload = "md-test"\n[[apps]]\nname = "a"\nworkload = "md-test"\n', "named alike"),
    ('[[apps]]\nworkload = "ior"\nblock_size = "1MiB"\nrequest_size = "300KiB"\n', "not a multiple"),
    ('[[apps]]\nworkload = "ior"\nblock_size = "lots"\n', "apps[0].block_size = 'lots'"),
    ('name = "x"\n', "no [[apps]] tables"),
])
def test_an_apps_file_the_drivers_cannot_run_is_refused_naming_the_entry(tmp_path, text, message):
    assert message in _refused(tmp_path, "--apps", text)


def _refused(tmp_path: Path, option: str, text: str) -> str:
    """What twin says of a file of ``text`` given to ``option``; it must refuse it."""
    given = tmp_path / "given"
    given.write_text(text)
    r = concerto("twin", option, str(given), "--out", str(tmp_path))
    assert r.returncode == 2, r.stdout + r.stderr
    return r.stderr


def test_twin_takes_one_of_a_command_line_an_apps_file_or_a_benchmarks_output(tmp_path):
    apps = tmp_path / "apps.toml"
    apps.write_text(APPS)
    r = concerto("twin", "ior", "-w", "--apps", str(apps), "--out", str(tmp_path))
    assert r.returncode == 2 and "(one of them)" in r.stderr, r.stderr
    r = concerto("twin", "--out", str(tmp_path))
    assert r.returncode == 2 and "give an IOR or mdtest command line, --apps FILE or --real-from FILE" in r.stderr, r.stderr


DATA = Path(__file__).parent / "data" / "twin"


def test_an_ior_json_summary_is_the_real_side_beside_the_simulator_running_its_command(tmp_path):
    out = tmp_path / "out"
    r = concerto("twin", "--real-from", str(DATA / "ior-summary.json"), "--reps", "1", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "twin.json").read_text())
    assert result["command"] == "ior -t 256k -b 1m -s 2 -F -w -r -i 3 -O summaryFormat=JSON"
    assert result["app"]["processes"] == 2, "numTasks when the command line has no launcher"
    assert [(row["operation"], row["real"]) for row in result["rows"]] == [("write", 26.59), ("read", 50.15)]
    app = benchmarks.from_ior("mpirun -np 2 ior -t 256k -b 1m -s 2 -F -w -r")
    expected = twin.simulated("ior", {**app, "name": "ior"}, twin.TwinSpec(reps=1))
    assert [row["sim"] for row in result["rows"]] == pytest.approx(list(expected.values()))


@pytest.mark.parametrize("output", ["mdtest.txt", "mdtest4.txt"])
def test_mdtest_output_is_the_real_side_under_its_own_phase_names(tmp_path, output):
    # mdtest 3.3 writes "File creation :  301.112 ..."; mdtest 4 drops the
    # colon and quotes each argument of its command line.
    out = tmp_path / "out"
    r = concerto("twin", "--real-from", str(DATA / output), "--reps", "1", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "twin.json").read_text())
    assert result["app"]["processes"] == 4, "the tasks mdtest says it was launched with"
    rows = {row["operation"]: row for row in result["rows"]}
    assert rows["File creation"]["real"] == 301.112 and rows["File stat"]["real"] == 3298.451
    assert set(rows) == {"Tree creation", "File creation", "File stat", "File read", "File removal", "Tree removal"}
    assert result["not_modelled"] == [] and result["not_in_output"] == []


@pytest.mark.parametrize("output, tasks, figures", [
    ("ior4.txt", 2, {"write": 97.02, "read": 2837.22}),
    ("ior4-summary.json", 2, None),
    ("mdtest4-real.txt", 4, {"File creation": 311.005, "File stat": 3325.616, "Tree removal": 235.741}),
])
def test_the_outputs_of_ior_and_mdtest_4_built_from_their_sources_import(output, tasks, figures):
    # Made by IOR 4.0.0 and mdtest 4.0.0 themselves on a Concerto mount
    # (tests/data/twin/README.md says how): their command lines, with the
    # binary's path and -o/-d, their task counts and their figures.
    from concerto import twin_import

    real = twin_import.read(DATA / output)
    assert real.tasks == tasks
    assert real.program == ("mdtest" if output.startswith("mdtest") else "ior")
    program, app = twin.imported(real.command, real.tasks)
    assert program == real.program and app["processes"] == tasks
    if figures is None:
        assert set(real.figures) == {"write", "read"} and all(v > 0 for v in real.figures.values())
    else:
        assert {k: real.figures[k] for k in figures} == figures


def test_an_mdtest_output_with_phases_the_simulator_does_not_report_lists_them(tmp_path):
    text = (DATA / "mdtest.txt").read_text().replace(
        "   File removal ", "   Directory creation        :         10.000         10.000         10.000          0.000\n"
        "   File removal ")
    (tmp_path / "md.txt").write_text(text)
    r = concerto("twin", "--real-from", str(tmp_path / "md.txt"), "--reps", "1", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "in the output, not modelled: Directory creation" in r.stdout


@pytest.mark.parametrize("text, message", [
    ("hello\n", "neither IOR's output"),
    ("Summary of all tests:\nOperation Max(MiB)\n", 'no "Command line        :"'),
    ("Command line        : ior -w\nSummary of all tests:\nOperation Max(MiB)\n", "no Operation and Mean(MiB)"),
    ("Command line        : ior -w\nSummary of all tests:\nOperation Mean(MiB)\n", "no operation rows"),
    ('{"summary": []}', 'no "Command line"'),
    ('{"Command line": "ior -w", "summary": [{"operation": "write"}]}', "summary[0] has no operation and bwMeanMIB"),
    ("SUMMARY rate: (of 1 iterations)\n   File stat : 1 1 1 0\n", 'no "Command line used:"'),
    ("Command line used: mdtest -n 5 -u -F\n", 'no "SUMMARY rate" table'),
    ('{"Command line": "ior -z -w", "summary": [{"operation": "write", "bwMeanMIB": 5}]}', "ior -z"),
])
def test_a_benchmark_output_twin_cannot_read_is_refused_naming_the_file_and_what_is_missing(tmp_path, text, message):
    stderr = _refused(tmp_path, "--real-from", text)
    assert message in stderr, stderr
    if message != "ior -z":
        assert str(tmp_path / "given") in stderr, stderr


def test_twin_replays_a_trace_on_the_real_side_beside_the_simulator(tmp_path):
    ranks = [[{"op": "write", "file": 0, "offset": (k * 2 + r) * 65536, "length": 65536} for k in range(4)]
             + [{"op": "read", "file": 1, "offset": r * 262144 + k * 65536, "length": 65536} for k in range(4)]
             for r in range(2)]
    (tmp_path / "job.json").write_text(json.dumps({"format": "concerto-trace", "version": 1,
                                                   "apps": [{"name": "job", "ranks": ranks}]}))
    apps = tmp_path / "apps.toml"
    apps.write_text('[[apps]]\nname = "job"\nworkload = "trace"\ntrace = "job.json"\n')
    out = tmp_path / "out"
    r = concerto("twin", "--apps", str(apps), "--reps", "1", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    (job,) = json.loads((out / "twin.json").read_text())["apps"]
    assert job["program"] == "trace" and job["app"]["processes"] == 2 and job["unit"] == "MiB/s"
    (row,) = job["rows"]
    assert row["operation"] == "trace" and row["real"] > 0 and row["sim"] > 0
    expected = twin.simulated_apps(twin.apps_of(apps), twin.TwinSpec(reps=1))[0]["0:trace"]
    assert row["sim"] == pytest.approx(expected)


def test_a_trace_entry_without_its_file_is_refused_naming_it(tmp_path):
    apps = tmp_path / "apps.toml"
    apps.write_text('[[apps]]\nworkload = "trace"\n')
    r = concerto("twin", "--apps", str(apps), "--out", str(tmp_path))
    assert r.returncode == 2 and 'apps[0]: workload "trace" needs trace = "FILE"' in r.stderr, r.stderr
    apps.write_text('[[apps]]\nworkload = "trace"\ntrace = "nowhere.json"\n')
    r = concerto("twin", "--apps", str(apps), "--out", str(tmp_path))
    assert r.returncode == 2 and "apps[0].trace = " in r.stderr and "nowhere.json" in r.stderr, r.stderr


def test_a_users_scenario_given_a_calibration_is_simulated_as_the_twin_simulates_it(tmp_path):
    # issue 58: a user's own scenario (from-ior's [[apps]], nothing else)
    # gets the calibrated model with `sim run --calibration`: the twin's
    # cluster as the mount runs it, with every measured figure. The
    # figures here are made up (no real cluster is needed to read a file);
    # the calibration test above makes a real one.
    from concerto import calibrate

    figures = {"servers": 4, "throttle": "hdd", "stripe_unit": 65536, "depth": 8, "items": 100, "reps": 1,
               "real_stat_s": 9e-4, "simulated_stat_s": 7e-4, "server_fixed_ns": 100_000,
               "server_data_beyond_device_ns": 150_000, "client_overhead_ns": 200_000,
               "metadata_costs_ns": {"create": 450_000, "getattr": 320_000}, "server_data_overhead_ns": 50_000,
               "mount_bandwidth_Bps": 400e6,
               "data_probe": {"16384": {"real_s": 1e-3, "simulated_s": 8e-4},
                              "262144": {"real_s": 4e-3, "simulated_s": 3e-3}}}
    calibration = calibrate.write(figures, tmp_path / "cal")
    command = " ".join(IOR + ["-w", "-r"])
    scenario = tmp_path / "ior.toml"
    r = concerto("sim", "workload", "from-ior", command)
    assert r.returncode == 0, r.stderr
    scenario.write_text(r.stdout)
    # The two tasks share one mount, the node whose link is the mount's
    # measured bandwidth (docs/workloads.md says so); the twin runs fifo.
    r = concerto("sim", "run", str(scenario), "--calibration", str(calibration), "--set", "policy.kind=fifo",
                 "--set", "apps[0].processes_per_node=2", "--out", str(tmp_path / "sim"))
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads((tmp_path / "sim" / "results.json").read_text())
    assert run["config"]["cluster"]["network"]["client_bandwidth"] == pytest.approx(400e6)
    mine = [op["bandwidth_MiBps"] for op in run["runs"][0]["apps"][0]["ior"]]
    spec = calibrate.read_calibration(calibration, twin.TwinSpec(reps=1))
    twins = twin.simulated("ior", {**benchmarks.from_ior(command), "name": "ior"}, spec)
    assert mine == pytest.approx(list(twins.values()), rel=1e-9)
    # A calibration with the page cache's rate: the node reads back from
    # memory what its tasks wrote, where the twin's side (its drivers drop
    # the cache) reads from the servers; the write is the same.
    cached = calibrate.write({**figures, "page_cache_Bps": 1.5e9}, tmp_path / "cached")
    r = concerto("sim", "run", str(scenario), "--calibration", str(cached), "--set", "policy.kind=fifo",
                 "--set", "apps[0].processes_per_node=2", "--out", str(tmp_path / "sim-cached"))
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads((tmp_path / "sim-cached" / "results.json").read_text())
    assert run["config"]["cluster"]["page_cache"] == pytest.approx(1.5e9)
    write, read = [op["bandwidth_MiBps"] for op in run["runs"][0]["apps"][0]["ior"]]
    assert write == pytest.approx(mine[0], rel=1e-9) and read > 5 * mine[1], (write, read, mine)
    # Without the calibration the same scenario has no cluster at all.
    r = concerto("sim", "run", str(scenario))
    assert r.returncode != 0 and "cluster" in r.stderr, r.stderr
    # A calibration that is not there is named, with the option or the key it came by.
    r = concerto("sim", "run", str(scenario), "--calibration", str(tmp_path / "none.toml"))
    assert r.returncode == 2 and "--calibration" in r.stderr and "none.toml" in r.stderr, r.stderr
    named = tmp_path / "named.toml"
    named.write_text(f'[cluster]\ncalibration = "{tmp_path / "none.toml"}"\n' + scenario.read_text())
    r = concerto("sim", "run", str(named))
    assert r.returncode != 0 and "line 2" in r.stderr and "cluster.calibration: cannot read" in r.stderr, r.stderr


def test_progress_tells_each_step_with_the_time_the_steps_so_far_say_is_left():
    from concerto.terminal import StepClock

    told, now = [], [100.0]
    clock = StepClock(3, told.append, is_step=lambda m: m.startswith("real"), clock=lambda: now[0])
    clock("simulator: ior")
    clock("real cluster: round 1/3")
    now[0] += 20.0
    clock("real cluster: round 2/3")
    now[0] += 40.0
    clock("real cluster: round 3/3")
    assert told == ["simulator: ior", "[1/3] real cluster: round 1/3",
                    "[2/3] real cluster: round 2/3, about 40 seconds left",
                    "[3/3] real cluster: round 3/3, about 30 seconds left"]


def test_calibrate_tells_as_many_steps_as_it_counts(tmp_path, monkeypatch):
    # The estimate is only as good as the count of steps: calibrate's own
    # count is what a run says it begins (server costs and real rounds
    # stubbed, the simulator real).
    from concerto import calibrate

    said: list[str] = []
    spec = twin.TwinSpec(reps=2)

    def server_costs(spec, items, directory, say):
        for op in (*calibrate.COSTED_OPERATIONS, *(f"write-{t}" for t in calibrate.DATA_OVERHEAD_TRANSFERS)):
            say(f"server cost: {op}")
        dev = {op: 400_000 for op in calibrate.COSTED_OPERATIONS}
        return {**dev, **{f"write-{t}": 400_000 for t in calibrate.DATA_OVERHEAD_TRANSFERS}}

    def real_runs(program, app, spec, say):
        for rep in range(spec.reps):
            say(f"real cluster: {program}, round {rep + 1}/{spec.reps}")
        row = calibrate.PROBE_ROW if program == "mdtest" else "write"
        return {f"1:{row}": [1000.0] * spec.reps}

    def page_cache_probe(spec, say):
        say("page cache: stubbed")
        return 1.5e9

    monkeypatch.setattr(calibrate, "server_costs", server_costs)
    monkeypatch.setattr(calibrate, "real_runs", real_runs)
    def step_spread_probe(spec, say):
        say("step spread: stubbed")
        return [100e-6, 120e-6, 5.0]

    monkeypatch.setattr(calibrate, "page_cache_probe", page_cache_probe)
    monkeypatch.setattr(calibrate, "step_spread_probe", step_spread_probe)
    result = calibrate.calibrate(spec, 20, say=said.append)
    assert len(said) == calibrate.steps(spec.reps), said
    # The rounds' median, never more than the overhead it is part of.
    assert result["client_overhead_spread_ns"] == min(120_000, result["client_overhead_ns"]), result
    assert result["spread"]["client_overhead_spread_ns"] == [100_000, 5_000_000_000]


def test_a_steps_spread_is_the_mean_above_the_fastest_tenth():
    from concerto import calibrate

    # Ten stats at 600 us and one slow one: the floor is 600 us, the mean 100 us above it.
    took = [600e-6] * 10 + [1700e-6]
    assert calibrate.spread_above_floor(took) == pytest.approx(100e-6)
    assert calibrate.spread_above_floor([5e-4] * 7) == 0.0


def test_a_calibrations_step_spread_reaches_the_simulated_cluster(tmp_path):
    from concerto import calibrate

    path = tmp_path / "calibration.toml"
    path.write_text('[cluster]\nclient_overhead = "150us"\nclient_overhead_spread = "40us"\n')
    spec = calibrate.read_calibration(path, twin.TwinSpec())
    assert spec.client_overhead_spread_ns == 40_000
    assert 'client_overhead_spread = "40000ns"' in twin.twin_cluster_toml(spec)


def test_the_host_counts_as_busy_when_other_processes_took_over_a_quarter_of_its_cores(tmp_path):
    from concerto import host

    pressure_file = tmp_path / "cpu"
    now = [50.0]

    def span(others_s: float, own_s: float, stalled_s: float):
        # 10 s on 2 cores: the host's busy CPU seconds are ours plus the others'.
        pressure_file.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n"
                                 "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        cpu = iter([(1000.0, 10.0), (1000.0 + own_s + others_s, 10.0 + own_s)])
        with host.watch(pressure_file, clock=lambda: now[0], cpu=lambda: next(cpu)) as pressure:
            pressure.cores = 2
            now[0] += 10.0
            pressure_file.write_text(f"some avg10=0 avg60=0 avg300=0 total={1000000 + round(stalled_s * 1e6)}\n")
        return pressure

    quiet, busy = span(0.6, 3.0, 0.5), span(11.8, 8.0, 5.9)
    assert quiet.other_cpu_share == pytest.approx(0.03) and not quiet.busy
    assert busy.other_cpu_share == pytest.approx(0.59) and busy.busy
    assert "other processes took 59% of the cores" in busy.describe()
    # The real side's own demand is no busy host, however long its tasks
    # waited for each other's cores (a 4-task run on 2 cores).
    own = span(0.4, 19.6, 4.0)
    assert own.cpu_stall_share == pytest.approx(0.4) and not own.busy
    # A kernel that does not say judges nothing.
    unknown_cpu = iter([(None, 0.0), (None, 1.0)])
    with host.watch(tmp_path / "absent", cpu=lambda: next(unknown_cpu)) as unknown:
        pass
    assert unknown.other_cpu_share is None and not unknown.busy and "unknown" in unknown.describe()
    # This host's own figures: its CPU time grows, and ours is part of it.
    with host.watch() as here:
        sum(i * i for i in range(200_000))
    assert here.other_cpu_share is not None and 0.0 <= here.other_cpu_share <= 1.0


def test_a_twin_run_on_a_busy_host_says_so_instead_of_printing_ratios(tmp_path, monkeypatch):
    # The real side stubbed (its figures fixed) and the host's pressure
    # fixed: what the command prints is what is checked.
    from click.testing import CliRunner

    from concerto import host
    from concerto.twincli import twin_cmd

    class Busy(host.watch):
        def __exit__(self, *_exc):
            self.pressure.other_cpu_share, self.pressure.seconds = 0.6, 12.0

    monkeypatch.setattr(host, "watch", Busy)
    monkeypatch.setattr(twin, "real_runs_apps", lambda apps, spec, say: [{"0:write": [50.0, 60.0]}])
    r = CliRunner().invoke(twin_cmd, [*IOR, "-w", "--reps", "2", "--out", str(tmp_path / "busy")])
    assert r.exit_code == 0, r.output
    # The console may wrap lines at its width: read the words.
    said = " ".join(r.output.split())
    assert "the host was busy while the real side ran" in said and "took 60% of the cores" in said, r.output
    row = next(line for line in r.output.splitlines() if line.strip().startswith("write"))
    assert row.split()[-1] == "busy", row
    saved = json.loads((tmp_path / "busy" / "twin.json").read_text())
    assert saved["host"]["busy"] and saved["rows"][0]["sim_over_real"] == pytest.approx(saved["rows"][0]["sim"] / 55.0)

