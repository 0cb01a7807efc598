"""The CLI as a user meets it: outputs, determinism, and errors on bad input."""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT, concerto, log_env

from concerto import cluster as local


def test_sim_run_writes_results(small_scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = concerto("sim", "run", str(small_scenario), "--out", str(out), "--reps", "2", "--detail")
    assert r.returncode == 0, r.stderr
    data = json.loads((out / "results.json").read_text())
    assert data["seeds"] == [1, 2]
    run = data["runs"][0]
    assert len(run["apps"]) == 3 and len(run["servers"]) == 4
    assert all(a["operations"] == 3 for a in run["apps"])
    assert run["summary"]["bytes"] == 3 * 4 * 3 * 64 * 1024
    assert data["aggregate"]["avg_completion_s"]["mean"] > 0
    rows = list(csv.DictReader((out / "requests.csv").open()))
    # 2 reps x 3 apps x 4 processes x 3 calls x 4 servers (64 KiB over 4 KiB stripes touches all).
    assert len(rows) == 2 * 3 * 4 * 3 * 4
    assert all(int(r["response_ns"]) >= int(r["done_ns"]) >= int(r["start_ns"]) >= int(r["arrive_ns"]) >= int(r["issue_ns"]) for r in rows)


def test_same_seed_same_json(small_scenario: Path, tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / f"o{i}"
        assert concerto("sim", "run", str(small_scenario), "--out", str(out), "--seed", "9").returncode == 0
        outs.append((out / "results.json").read_text())
    assert outs[0] == outs[1]


def test_compare_runs_every_policy(small_scenario: Path, tmp_path: Path) -> None:
    r = concerto("sim", "compare", str(small_scenario), "--policies", "fifo,per-object,coordinated", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "compare.json").read_text())
    assert list(data) == ["fifo", "per-object", "coordinated"]
    assert data["coordinated"]["policy"]["kind"] == "coordinated"
    assert data["coordinated"]["policy"]["window"] == 1_000_000_000  # HDD default, in ns
    assert (tmp_path / "compare.png").stat().st_size > 0


def test_tables_printed_to_a_file_are_laid_out_whole(small_scenario: Path) -> None:
    """A batch job's log is not a terminal: its tables take the width they
    need instead of rich's 80 columns, which cut names short ("coordin…");
    COLUMNS, when set, still rules."""

    def compare_table(env: dict[str, str]) -> list[str]:
        r = concerto("sim", "compare", str(small_scenario), "--policies", "fifo,coordinated", env=env)
        assert r.returncode == 0, r.stderr
        # The header's and the rows' lines (rich draws the header's borders heavier).
        return [line for line in r.stdout.splitlines() if line.count("┃") > 2 or line.count("│") > 2]

    env = log_env()
    header, *rows = compare_table(env)
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "policy", "avg completion", "vs first", "p95 completion", "bandwidth", "makespan", "finish spread"]
    assert [row.split("│")[1].strip() for row in rows] == ["fifo", "coordinated"]
    narrow = compare_table({**env, "COLUMNS": "60"})
    assert max(len(line) for line in narrow) <= 60


def test_run_summary_stays_on_one_line_in_a_file(small_scenario: Path) -> None:
    """`sim run`'s summary under its table (policy, seed, average completion,
    bandwidth, makespan) is one line in a log, not wrapped at the table's
    width with the makespan's figure cut from its name."""
    r = concerto("sim", "run", str(small_scenario))
    assert r.returncode == 0, r.stderr
    summary = [line for line in r.stdout.splitlines() if line.startswith("policy ")]
    assert len(summary) == 1, r.stdout
    assert "average completion" in summary[0] and re.search(r"makespan \d", summary[0]), summary[0]


def test_bad_input_gives_clear_errors(small_scenario: Path, tmp_path: Path) -> None:
    cases = [
        (["sim", "run", str(small_scenario), "--set", "apps[0].request_size=0"], "apps[0].request_size: must be > 0"),
        (["sim", "run", str(small_scenario), "--set", "cluster.stripe_count=9"], "cluster.stripe_count: 9 is larger"),
        (["sim", "run", str(small_scenario), "--set", "policy.kind=lottery"], "policy.kind: unknown variant"),
        (["sim", "run", str(small_scenario), "--set", "cluster.device.prefetch=128KiB"],
         "cluster.device.prefetch: 131072 bytes of read-ahead"),
        (["sim", "run", str(tmp_path / "missing.toml")], "cannot read scenario"),
        (["sim", "run", str(small_scenario), "--set", "nonsense"], "expected key.path=value"),
        (["sim", "run", str(small_scenario), "--detail"], "--detail needs --out"),
        (["sim", "compare", str(small_scenario), "--policies", "fifo,lottery"], "unknown policy 'lottery'"),
    ]
    for args, expected in cases:
        r = concerto(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert expected in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    # The file, the line and the column of a syntax error; the line of a bad value written in the file.
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster\nservers = 1")
    r = concerto("sim", "run", str(bad))
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "bad.toml: invalid TOML: line 1, column 9" in said, said
    small_scenario.write_text(small_scenario.read_text().replace('stripe_unit = "4KiB"', 'stripe_unit = "big"'))
    r = concerto("sim", "run", str(small_scenario))
    said = " ".join(r.stderr.split())
    line = next(i for i, t in enumerate(small_scenario.read_text().splitlines(), 1) if t.startswith("stripe_unit"))
    assert r.returncode == 2 and f"small.toml: line {line}, column 15: cluster.stripe_unit:" in said, said


def test_many_applications_are_summarised_and_listed_in_apps_csv(small_scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = concerto("sim", "run", str(small_scenario), "--set", "apps[0].instances=60", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "60 applications, by workload" in " ".join(r.stdout.split())
    rows = list(csv.DictReader((out / "apps.csv").open()))
    apps = json.loads((out / "results.json").read_text())["runs"][0]["apps"]
    assert [int(r["app_id"]) for r in rows] == [a["app_id"] for a in apps] and len(rows) == 60


def _server_pids(cluster_dir: Path) -> list[int]:
    """The server processes a demo started, from its own cluster file."""
    text = (cluster_dir / "cluster.toml").read_text()
    return [s["pid"] for s in tomllib.loads(text)["servers"]]


def _running(pids: list[int]) -> list[int]:
    return [pid for pid in pids if local.server_alive(pid)]


def test_demo_runs_real_and_simulated(tmp_path: Path) -> None:
    cluster_dir = tmp_path / "cluster"
    r = concerto("demo", "--out", str(tmp_path), "--cluster-dir", str(cluster_dir))
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "demo.json").read_text())
    assert list(data) == ["fifo", "coordinated", "sfq-d-plus"]
    for policy in data.values():
        for world in ("real", "simulated"):
            assert len(policy[world]["apps"]) == 3
            assert policy[world]["avg_completion_s"] > 0 and 0 < policy[world]["jain"] <= 1
    # Wall-clock figures are reported, not asserted; the simulated side is deterministic.
    assert data["coordinated"]["simulated"]["avg_completion_s"] < data["fifo"]["simulated"]["avg_completion_s"]
    assert (tmp_path / "demo.png").exists()
    assert "stopped 4 servers" in r.stdout
    # The table fits a terminal-less 80 columns: every policy's row is printed whole.
    rows: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():  # the first table's row; the disorder table's come after
        if line.strip():
            rows.setdefault(line.split()[0], line.split()[1:])
    for policy, result in data.items():
        assert rows[policy] == [f"{result['real']['avg_completion_s'] * 1e3:.1f}",
                                f"{result['simulated']['avg_completion_s'] * 1e3:.1f}",
                                f"{result['real']['bandwidth_Bps'] / 1e6:.1f}",
                                f"{result['simulated']['bandwidth_Bps'] / 1e6:.1f}",
                                f"{result['real']['jain']:.3f}", f"{result['simulated']['jain']:.3f}"]
    pids = _server_pids(cluster_dir)
    assert len(pids) == 4 and _running(pids) == []


def test_out_of_order_share_counts_calls_another_application_passes_at_one_server_only() -> None:
    from concerto.demo import out_of_order_share

    a, b, c = (1, 0, 0), (2, 0, 0), (2, 1, 0)
    # Servers 0 and 1 both see a before b: in order; c (b's application too)
    # is ahead of a at server 0 only: a and c are out of order, b is not.
    arrivals = [(a, 0, 1.0), (b, 0, 2.0), (c, 0, 0.5), (a, 1, 1.0), (b, 1, 3.0), (c, 1, 2.0)]
    assert out_of_order_share(arrivals) == 2 / 3
    # Calls of one application passing each other do not count.
    assert out_of_order_share([(b, 0, 1.0), (c, 0, 2.0), (b, 1, 2.0), (c, 1, 1.0)]) == 0.0
    # A tie is one order, the same on every server.
    assert out_of_order_share([(a, 0, 1.0), (b, 0, 1.0), (a, 1, 1.0), (b, 1, 1.0)]) == 0.0


def test_demo_link_rate_without_netns_or_unreadable_is_refused_by_name(tmp_path: Path) -> None:
    r = concerto("demo", "--netns", "--link-rate", "fast", "--out", str(tmp_path))
    assert r.returncode == 2 and "--link-rate" in r.stderr and "fast" in r.stderr, r.stderr
    r = concerto("demo", "--link-rate", "1MB/s", "--out", str(tmp_path))
    assert r.returncode == 2 and "--link-rate" in r.stderr and "--netns" in r.stderr, r.stderr


def test_bench_integrity_link_rate_is_a_rate_as_the_other_commands_take_it(tmp_path: Path) -> None:
    # A bare number is not a rate (the option once took bytes/s); a rate too
    # slow for the bench is refused by name before any namespace is made.
    r = concerto("bench", "integrity", "--link-rate", "100e6", "--out", str(tmp_path))
    assert r.returncode == 2 and "--link-rate" in r.stderr and "100MB/s" in r.stderr, r.stderr
    r = concerto("bench", "integrity", "--link-rate", "10kB/s", "--out", str(tmp_path))
    assert r.returncode != 0 and "--link-rate" in r.stderr and "100 kB/s" in r.stderr, r.stderr
    assert not any(tmp_path.iterdir())


def test_an_interrupted_demo_stops_its_servers(tmp_path: Path) -> None:
    cluster_dir = tmp_path / "cluster"
    p = subprocess.Popen([sys.executable, "-m", "concerto", "demo", "--out", str(tmp_path), "--cluster-dir",
                          str(cluster_dir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # The cluster file is written once every server answers; the demo is then running its first policy.
    deadline = time.monotonic() + 60
    while not (cluster_dir / "cluster.toml").exists():
        assert p.poll() is None, p.communicate()[0]
        assert time.monotonic() < deadline, "the demo started no cluster"
        time.sleep(0.05)
    pids = _server_pids(cluster_dir)
    assert len(_running(pids)) == 4
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    assert "stopped 4 servers" in out, out
    assert _running(pids) == []


@pytest.fixture(scope="module")
def coordination_quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`concerto reproduce coordination --quick`, run once for the tests that read it; it must pass."""
    out = tmp_path_factory.mktemp("coordination")
    r = concerto("reproduce", "coordination", "--quick", "--out", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def test_reproduce_coordination_quick(coordination_quick: Path) -> None:
    tmp_path = coordination_quick
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert {c["id"] for c in claims} >= {"c1-lower-completion", "c2a-grows-with-applications", "c3-finish-spread",
                                        "c4-analytical-model", "c5-bandwidth-comparable", "c6-every-window"}
    for c in claims:
        assert set(c) >= {"id", "claim", "expected", "measured", "pass", "status"}
        assert c["pass"] and "deviation" not in c, c
    assert [c["id"] for c in claims if c["status"] == "not reproduced"] == ["c2b-servers", "c3-fifo-spread",
                                                                            "c7-best-window"]
    report = (tmp_path / "report.md").read_text()
    assert "## Claims" in report and "formula" in report
    assert (tmp_path / "fig6_completion.png").exists() and (tmp_path / "fig8_bandwidth.svg").exists()
    assert (tmp_path / "fig3_5_finish.png").exists() and "![fig3_5_finish](fig3_5_finish.png)" in report


def test_coordination_claims_fail_when_the_model_regresses(coordination_quick: Path) -> None:
    """c1, c2a and c2b state bounds on the model; a regression past each
    must fail it: c2b when the gain at the most servers grows 20 points,
    c2a when the gain falls at the most applications, c1 when a Figure 6
    configuration leaves the paper's range."""
    import copy

    from concerto.reproduce.coordination import evaluate

    results = json.loads((coordination_quick / "results.json").read_text())
    assert all(c.passed for c in evaluate(results))

    def fails(claim: str, eid: str, where: dict, factor: float) -> bool:
        moved = copy.deepcopy(results)
        for row in moved[eid]:
            if row["policy"] == "coordinated" and all(row["params"].get(k) == v for k, v in where.items()):
                row["avg_completion_s"] *= factor
        return not {c.id: c.passed for c in evaluate(moved)}[claim]

    most_servers = max(row["params"]["cluster.servers"] for row in results["fig7"])
    assert fails("c2b-servers", "fig7", {"cluster.servers": most_servers}, 0.7)
    # Coordinated 15% slower at 16 applications: the reduction falls by about 10 points.
    assert fails("c2a-grows-with-applications", "fig6", {"apps[0].instances": 16}, 1.15)
    # Coordinated 20% faster everywhere on SSD: above the paper's 43% + 5 points.
    assert fails("c1-lower-completion", "fig6", {"cluster.device.kind": "ssd"}, 0.8)


@pytest.mark.parametrize("seed", [None, 77])
def test_reproduce_vpfs_quick(tmp_path: Path, seed: int | None) -> None:
    # Every claim holds for a second seed too (77 failed v6 once, before the
    # quick md-test pair ran long enough for its mean over bins).
    r = concerto("reproduce", "vpfs", "--quick", "--out", str(tmp_path),
                 *(["--seed", str(seed)] if seed is not None else []), cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    claims = {c["id"]: c for c in json.loads((tmp_path / "claims.json").read_text())}
    assert set(claims) == {"v1-btio-a-isolation", "v1-native", "v2-work-conserving-pays", "v3-btio-c-model-bound",
                           "v4-wrf-isolation", "v4-native", "v5-l-sweep", "v5-combined-gain-model-bound",
                           "v5-combined-gain-overloaded-device", "v6-metadata-shares", "v7-total-service"}
    for c in claims.values():
        assert c["pass"] and "deviation" not in c, c
    # The paper's results the model does not reach say so, in claims.json,
    # the report and the command's output, counted apart from the others.
    not_reproduced = {i for i, c in claims.items() if c["status"] == "not reproduced"}
    # The combined gain tried with a model option that then breaks the
    # paper's BTIO results: not reproduced, the option named.
    assert not_reproduced == {"v1-native", "v3-btio-c-model-bound", "v4-native", "v5-combined-gain-model-bound",
                              "v5-combined-gain-overloaded-device"}
    assert all(c["status"] == "reproduced" for i, c in claims.items() if i not in not_reproduced)
    assert claims["v5-combined-gain-overloaded-device"]["model_option"].startswith("cluster.device.overload")
    assert "claims: 6 reproduced, 5 not reproduced, 0 failed" in r.stdout
    report = (tmp_path / "report.md").read_text()
    assert "6 reproduced, 5 not reproduced, 0 failed." in report and "| not reproduced |" in report
    for plot in ("runtime.png", "l_sweep.svg", "mdtest.png"):
        assert (tmp_path / plot).exists(), plot


def test_vpfs_claims_fail_when_the_sizes_move(tmp_path: Path) -> None:
    """v1, v2, v4 and v5 check sizes against the paper's, not only orders:
    moving one measured value past its bound must fail the claim."""
    import copy

    from concerto.reproduce.vpfs import evaluate

    r = concerto("reproduce", "vpfs", "--quick", "--out", str(tmp_path), cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    results["l_sweep"] = {int(k): v for k, v in results["l_sweep"].items()}
    results["l_sweep_overloaded"] = {int(k): v for k, v in results["l_sweep_overloaded"].items()}
    results["profile"]["large_slots"] = int(results["profile"]["large_slots"])
    thresholds = [t for t in results["uneven"] if t != "sfq-d-plus"]
    assert all(c.passed for c in evaluate(results, thresholds))

    def fails(claim: str, change) -> bool:
        moved = copy.deepcopy(results)
        change(moved)
        return not {c.id: c.passed for c in evaluate(moved, thresholds)}[claim]

    # SFQ(D) twice as slow for BTIO-A: still in order, but off the paper's size.
    assert fails("v1-btio-a-isolation", lambda m: m["btio_a"]["sfq-d"].update(
        relative_runtime=2 * m["btio_a"]["sfq-d"]["relative_runtime"]))
    # Native's amount, two-sided: within a factor 1.5 of the paper's it is
    # reproduced; above, not reproduced (the model's harsher native); below
    # the paper's own, failed.
    from concerto.reproduce.vpfs import evaluate as again

    def native(value: float) -> str:
        moved = copy.deepcopy(results)
        moved["wrf"]["fifo"]["relative_runtime"] = value
        return {c.id: c.status for c in again(moved, thresholds)}["v4-native"]

    assert [native(v) for v in (4.0, 6.82, 10.0, 10.3, 20.0)] == [
        "failed", "reproduced", "reproduced", "not reproduced", "not reproduced"]
    # SFQ(D)+'s total throughput over Capped's: 13.81x within a factor 2,
    # either way; BTIO's runtime under SFQ(D)+ over Capped's: 1.18x within 1.2.
    def capped(total: float, slower: float) -> bool:
        def change(m: dict) -> None:
            m["btio_a"]["sfq-d-plus"]["total_MBps"] = total * m["btio_a"]["capped"]["total_MBps"]
            m["btio_a"]["sfq-d-plus"]["relative_runtime"] = slower * m["btio_a"]["capped"]["relative_runtime"]
        return fails("v2-work-conserving-pays", change)

    assert not capped(13.81, 1.18)
    assert capped(30.0, 1.18) and capped(6.0, 1.18)
    assert capped(13.81, 1.5) and capped(13.81, 0.95)
    # Capped no longer restores BTIO-A.
    assert fails("v2-work-conserving-pays", lambda m: m["btio_a"]["capped"].update(
        relative_runtime=1.2 * m["btio_a"]["capped"]["relative_runtime"]))
    # L = 1 serving WRF as well as the profiled L.
    assert fails("v5-l-sweep", lambda m: m["l_sweep"][1].update(app_MBps=m["l_sweep"][7]["app_MBps"]))
    # A not-reproduced claim's bound still guards: L = 1 20% above the profiled L fails it.
    assert fails("v5-combined-gain-model-bound",
                 lambda m: m["l_sweep"][1].update(total_MBps=1.2 * m["l_sweep"][7]["total_MBps"]))

    # With the overloaded device, the gain two-sided: +25% within a factor 1.5.
    def overloaded_gain(gain: float) -> bool:
        return fails("v5-combined-gain-overloaded-device", lambda m: m["l_sweep_overloaded"][1].update(
            total_MBps=m["l_sweep_overloaded"][7]["total_MBps"] / (1 + gain)))

    assert [overloaded_gain(g) for g in (0.15, 0.17, 0.25, 0.37, 0.40)] == [True, False, False, False, True]

    # Reproduced with the option only where the option also keeps the
    # paper's BTIO results (BTIO-C alike, BTIO-A's total lower under SFQ(D)+).
    def kept(m: dict) -> None:
        over = m["btio_overloaded"]
        over["btio_c"]["sfq-d"]["runtime_s"] = over["btio_c"]["sfq-d-plus"]["runtime_s"]
        over["btio_a"]["sfq-d-plus"]["total_MBps"] = 0.9 * over["btio_a"]["sfq-d"]["total_MBps"]

    moved = copy.deepcopy(results)
    kept(moved)
    claim = next(c for c in evaluate(moved, thresholds) if c.id == "v5-combined-gain-overloaded-device")
    assert claim.status == "reproduced"
    assert claim.shown_status == "reproduced with cluster.device.overload = { after = 4, loss = 0.03 }"


def test_policy_parameter_errors_name_the_key(small_scenario: Path) -> None:
    cases = [
        (["--set", "policy.kind=sfq-d-plus", "--set", "policy.large_slots=0"], "policy.large_slots: must be > 0"),
        (["--set", "policy.kind=service-sync", "--set", "policy.threshold=0"], "policy.threshold: must be > 0"),
        (["--set", "apps[0].weight=-1"], "apps[0].weight: must be a number > 0"),
    ]
    for sets, expected in cases:
        r = concerto("sim", "run", str(small_scenario), *sets)
        assert r.returncode == 2 and expected in r.stderr, (sets, r.stderr)
        assert "Traceback" not in r.stderr
    # A bad value written inside [policy] is named by its key and line, not
    # the table's header (serde reads a tagged table whole and loses the key).
    text = small_scenario.read_text() + '[policy]\nkind = "coordinated"\nwindow = "1000"\n'
    small_scenario.write_text(text)
    line = text.splitlines().index('window = "1000"') + 1
    r = concerto("sim", "run", str(small_scenario))
    assert r.returncode == 2, r.stderr
    assert f'line {line}, column 10: policy.window: "1000" has no unit' in r.stderr, r.stderr
    r = concerto("sim", "run", str(small_scenario), "--set", "policy.window=-3")
    assert r.returncode == 2 and "policy.window: " in r.stderr and "(as set by --set)" in r.stderr, r.stderr


def test_likely_mistakes_in_a_scenario_are_warned_once_with_their_line_and_the_fix(small_scenario: Path,
                                                                                   tmp_path: Path) -> None:
    text = small_scenario.read_text() + '[policy]\nkind = "coordinated"\nwindow = 1000\n'
    small_scenario.write_text(text)
    line = text.splitlines().index("window = 1000") + 1
    r = concerto("sim", "run", str(small_scenario), "--out", str(tmp_path / "a"))
    assert r.returncode == 0, r.stderr  # accepted as written: 1000 ns
    message = " ".join(r.stderr.split())
    expected = (f"warning: {small_scenario}: line {line}, column 10: policy.window: 1000 has no unit and is read "
                'as 1000 ns = 1 µs; write the unit: "1000ns" if that is meant, else e.g. "1000us" or "1000ms"')
    assert message.count(expected) == 1, r.stderr
    assert json.loads((tmp_path / "a" / "results.json").read_text())["config"]["policy"]["window"] == 1000
    # A decimal stripe unit, set on the command line: named as set there, with the binary unit.
    r = concerto("sim", "run", str(small_scenario), "--set", 'policy.window="1ms"', "--set", 'cluster.stripe_unit="4KB"',
                 "--out", str(tmp_path / "b"))
    message = " ".join(r.stderr.split())
    assert r.returncode == 0 and "policy.window" not in message, r.stderr
    assert ('warning: ' f'{small_scenario}: cluster.stripe_unit: "4KB" is 4000 bytes (KB, MB and GB are powers of '
            '1000), not a whole number of 4 KiB pages; for a stripe unit write "4KiB" (as set by --set)') in message, r.stderr
    # Written with units, nothing is said.
    r = concerto("sim", "run", str(small_scenario), "--set", 'policy.window="1ms"', "--out", str(tmp_path / "c"))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_a_policy_parameter_without_its_unit_is_warned_at_the_option(tmp_path: Path) -> None:
    # Warned before any server is asked (this cluster file does not exist).
    r = concerto("cluster", "policy", "coordinated", "--set", "window=1000", "--cluster", str(tmp_path / "none.toml"))
    message = " ".join(r.stderr.split())
    assert "warning: --set window=1000: 1000 has no unit and is read as 1000 ns = 1 µs" in message, r.stderr
    assert r.returncode != 0 and "none.toml" in message, r.stderr
    r = concerto("cluster", "policy", "coordinated", "--set", "window=1s", "--cluster", str(tmp_path / "none.toml"))
    assert "warning" not in r.stderr, r.stderr


def test_a_decimal_stripe_unit_is_refused_at_the_option_before_any_server_starts(tmp_path: Path) -> None:
    r = concerto("cluster", "up", "--servers", "1", "--dir", str(tmp_path / "c"), "--stripe-unit", "4KB")
    message = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stderr
    assert "Invalid value for '--stripe-unit': \"4KB\" is 4000 bytes" in message and 'write "4KiB"' in message, r.stderr
    assert not (tmp_path / "c").exists()
    # The simulated collective plan takes it, with the same warning.
    r = concerto("plan", "collective", "--pattern", "demo:segment=64KiB", "--procs", "2", "--servers", "2",
                 "--stripe", "4KB")
    assert r.returncode == 0, r.stderr
    assert 'warning: --stripe 4KB: "4KB" is 4000 bytes' in " ".join(r.stderr.split()), r.stderr


def test_profile_recommends_sfq_d_plus_parameters(tmp_path: Path) -> None:
    device = "kind=ssd,latency=2ms,bandwidth=120MB/s,parallelism=14"
    r = concerto("profile", "--device", device, "--count", "300", "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    p = json.loads((tmp_path / "profile.json").read_text())
    rec = p["recommendation"]
    # 14 units of 2 ms: small I/Os need all 14; 256 KiB pieces fill the channel at 2.
    assert (rec["depth"], rec["small_threshold"], rec["large_slots"]) == (14, 128 * 1024, 7)
    assert (tmp_path / "profile.png").exists()
    # The same device from a scenario file gives the same profile.
    r2 = concerto("profile", "--device", str(ROOT / "experiments/vpfs/wrf_ior.toml"), "--count", "300",
                  "--out", str(tmp_path / "again"))
    assert r2.returncode == 0, r2.stderr
    assert json.loads((tmp_path / "again" / "profile.json").read_text()) == p


def test_profile_of_a_local_directory(tmp_path: Path) -> None:
    r = concerto("profile", "--dir", str(tmp_path), "--working-set", "8MiB", "--sizes", "4KiB,64KiB", "--depths",
                 "1,4", "--count", "100", "--large-size", "64KiB", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    p = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert p["probe"]["kind"] == "directory" and p["probe"]["path"] == str(tmp_path)
    assert [s["size"] for s in p["sizes"]] == [4096, 65536]
    assert all(x["throughput_Bps"] > 0 for s in p["sizes"] for x in s["samples"])
    assert sorted(f.name for f in tmp_path.iterdir()) == ["out"], "the probe's file is removed"


def test_profile_sizes_without_a_large_size_take_a_profiled_one(tmp_path: Path) -> None:
    # The default large size (256 KiB) when it is among --sizes, else the largest of them.
    for sizes, large in (("4KiB,256KiB,1MiB", 256 << 10), ("4KiB,64KiB,1MiB", 1 << 20)):
        r = concerto("profile", "--device", "kind=ssd", "--sizes", sizes, "--count", "50", "--out", str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert json.loads((tmp_path / "profile.json").read_text())["recommendation"]["large_size"] == large


def test_profile_bad_input_names_the_problem(tmp_path: Path) -> None:
    cases = [
        (["--device", "kind=tape"], "device.kind: unknown variant `tape`"),
        (["--device", "latency=2ms"], "--device: say which kind of device"),
        (["--device", "kind=ssd,parallelism=0"], "device.parallelism: must be > 0"),
        (["--device", "kind=ssd", "--sizes", "4KiB,1KiB"], "profile.sizes: must be strictly ascending"),
        (["--device", "kind=ssd", "--large-size", "3KiB"], "profile.large_size: 3072 bytes is not one of"),
        (["--device", "kind=ssd", "--sizes", "4KiB,64KiB", "--large-size", "1MiB"],
         "--large-size 1MiB is not one of --sizes (4KiB,64KiB): give one of them, or add it to --sizes"),
        (["--device", "kind=ssd", "--sizes", "4KiB,lots"], '--sizes 4KiB,lots: "lots" does not start with a number'),
        (["--device", "kind=ssd", "--depths", "1,x"], "--depths: '1,x' is not a list of whole numbers"),
        (["--device", str(tmp_path / "missing.toml")], "cannot read"),
        ([], "say what to profile: --device, --dir, --server or --network"),
        (["--device", "kind=ssd", "--dir", str(tmp_path)],
         "give one of --device, --dir, --server, --network, not --device, --dir"),
        (["--network", str(tmp_path)], f"--network {tmp_path}: no cluster across namespaces"),
        (["--device", "kind=ssd", "--working-set", "1GiB"], "--working-set is for real storage"),
        (["--dir", str(tmp_path), "--cluster", "c.toml"], "--cluster goes with --server"),
        (["--dir", str(tmp_path / "nowhere")], "not a directory"),
        (["--dir", str(tmp_path), "--working-set", "1000"], "working set 1000 bytes: must be a whole number of MiB"),
        (["--server", "0", "--cluster", str(tmp_path / "none.toml")], "none.toml: cluster file"),
    ]
    for args, expected in cases:
        r = concerto("profile", *args, "--out", str(tmp_path / "p"))
        # The message is wrapped to the terminal's width.
        assert r.returncode == 2 and expected in " ".join(r.stderr.split()), (args, r.stderr)
        assert "Traceback" not in r.stderr


def test_a_claim_is_reproduced_not_reproduced_or_failed() -> None:
    from concerto.reproduce import Claim, counts, counts_line

    claims = [Claim("a", "x", "e", "m", True), Claim("b", "x", "e", "m", True, reproduced=False),
              Claim("c", "x", "e", "m", False), Claim("d", "x", "e", "m", False, reproduced=False)]
    assert [c.status for c in claims] == ["reproduced", "not reproduced", "failed", "failed"]
    assert counts(claims) == {"reproduced": 1, "not reproduced": 1, "failed": 2}
    assert counts_line(claims) == "1 reproduced, 1 not reproduced, 2 failed"
    assert claims[1].as_json()["status"] == "not reproduced" and claims[1].as_json()["pass"] is True



def test_the_coordination_formulas_take_the_service_time_from_the_scenario(tmp_path: Path) -> None:
    # Formulas (1) and (2) scale with t: the check reads t from the formula
    # sweep's device, so a scenario with another t is checked against it.
    from concerto.reproduce.coordination import _formula_rows, service_time_s
    from concerto.sweep import load_sweep

    text = (ROOT / "experiments/coordination/formula.toml").read_text()
    slow = tmp_path / "formula.toml"
    slow.write_text(text.replace('service_time = "10ms"', 'service_time = "25ms"'))
    assert service_time_s(load_sweep(slow, True)) == pytest.approx(0.025)
    rows = [{"policy": p, "params": {"apps[0].instances": 4, "cluster.servers": 4}} for p in ("fifo", "coordinated")]
    at = {t: [r["formula_s"] for r in _formula_rows(json.loads(json.dumps(rows)), t)] for t in (0.010, 0.025)}
    assert at[0.025] == pytest.approx([x * 2.5 for x in at[0.010]])
    hdd = tmp_path / "hdd.toml"
    hdd.write_text(text.replace('kind = "fixed"\nservice_time = "10ms"', 'kind = "hdd"'))
    from concerto import _native
    with pytest.raises(_native.ConfigError, match="needs a fixed device with a service_time"):
        service_time_s(load_sweep(hdd, True))


def test_sizes_are_printed_by_one_formatter_over_humanize() -> None:
    from concerto.terminal import exact_size, size

    assert [size(n) for n in (0, 512, 4096, 1536 * 1024, 3 << 30)] == ["0 B", "512 B", "4.0 KiB", "1.5 MiB",
                                                                      "3.0 GiB"]
    assert [exact_size(n) for n in (0, 3000, 4096, 65536, 1536 * 1024)] == ["0 B", "3000 B", "4 KiB", "64 KiB",
                                                                           "1.5 MiB"]


def test_tables_in_an_80_column_terminal_keep_their_names_whole(small_scenario: Path) -> None:
    env = {**log_env(), "COLUMNS": "80"}
    r = concerto("sim", "compare", str(small_scenario), "--policies", "fifo,coordinated,sfq-d-plus", env=env)
    assert r.returncode == 0, r.stderr
    assert "coordinated" in r.stdout and "sfq-d-plus" in r.stdout, r.stdout
    assert "…" not in r.stdout, r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80


def test_option_values_are_read_as_the_native_side_reads_set_values() -> None:
    # One reader for `cluster up --set`, `profile --device` and `sim --set`:
    # a TOML value when the text is one, else the text itself.
    from concerto import profile, tomlvalue
    from concerto.cluster import policy_table

    assert [tomlvalue.read(t) for t in ("32", "1e3", "true", '"x"', "[1, 2]", "250ms", "ssd")] == [
        32, 1000.0, True, "x", [1, 2], "250ms", "ssd"]
    device = tomllib.loads(profile.device_toml("kind=fixed,service_time=2ms,channels=4,bandwidth=1e8,seek=true"))
    assert device == {"kind": "fixed", "service_time": "2ms", "channels": 4, "bandwidth": 1e8, "seek": True}
    assert policy_table("sfq-d-plus", {"backfill": "false", "depth": "14"}) == {
        "kind": "sfq-d-plus", "backfill": False, "depth": 14}
