"""The reproductions' claims as checks that can fail: each quick reproduction
holds for a second seed of the documented set, and every two-sided
tolerance turns a result moved past either side into a failed claim (or,
where the claim states the model's bound beyond the paper's tolerance, into
"not reproduced" inside the bound and "failed" past it).

The first seed of the set (1, the default) is run by the tests of each
reproduction's command (test_cli, test_plan, test_sweep); these run 2024.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest
from conftest import ROOT, concerto

SECOND_SEED = "2024"


def _reproduce(paper: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp(paper)
    r = concerto("reproduce", paper, "--quick", "--seed", SECOND_SEED, "--out", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    claims = json.loads((out / "claims.json").read_text())
    assert not [c for c in claims if c["status"] == "failed"]
    return {"claims": {c["id"]: c["status"] for c in claims}, "results": json.loads((out / "results.json").read_text()),
            "stdout": r.stdout}


@pytest.fixture(scope="module")
def coordination(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _reproduce("coordination", tmp_path_factory)


@pytest.fixture(scope="module")
def resonance(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _reproduce("resonance", tmp_path_factory)


@pytest.fixture(scope="module")
def iosets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _reproduce("iosets", tmp_path_factory)


@pytest.fixture(scope="module")
def clusterfile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _reproduce("clusterfile", tmp_path_factory)


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _reproduce("arena", tmp_path_factory)


def _status(evaluate: Callable[[Any], list], results: dict, claim: str, change: Callable[[dict], None]) -> str:
    """The claim's state once ``change`` has moved a copy of the results."""
    moved = copy.deepcopy(results)
    change(moved)
    return {c.id: c.status for c in evaluate(moved)}[claim]


def test_coordination_holds_for_a_second_seed(coordination: dict) -> None:
    assert coordination["claims"] == {
        "c1-lower-completion": "reproduced", "c2a-grows-with-applications": "reproduced",
        "c2b-servers": "not reproduced", "c3-finish-spread": "reproduced", "c3-fifo-spread": "not reproduced",
        "c3-completion-reduction": "reproduced", "c4-analytical-model": "reproduced",
        "c5-bandwidth-comparable": "reproduced", "c6-every-window": "reproduced",
        "c7-best-window": "not reproduced"}
    assert "claims: 7 reproduced, 3 not reproduced, 0 failed" in coordination["stdout"]


def test_coordination_tolerances_fail_past_either_side(coordination: dict) -> None:
    from concerto.reproduce.coordination import evaluate

    results = coordination["results"]

    def spread(policy: str, kind: str, value: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            for row in m["fig3_5"]:
                if row["policy"] == policy and row["params"]["cluster.device.kind"] == kind:
                    row["finish_spread"] = value
        return change

    def both(*changes: Callable[[dict], None]) -> Callable[[dict], None]:
        return lambda m: [c(m) for c in changes]

    # FIFO's spread: the paper's within a factor 1.5 is reproduced, up to
    # 1.1x the independent orders' (6.97) not reproduced, past it or below
    # the paper's failed.
    def fifo(hdd: float, ssd: float) -> str:
        return _status(evaluate, results, "c3-fifo-spread", both(spread("fifo", "hdd", hdd), spread("fifo", "ssd", ssd)))

    assert fifo(4.4, 3.1) == "reproduced"
    assert fifo(6.0, 4.0) == "reproduced"
    assert fifo(7.0, 6.5) == "not reproduced"
    assert fifo(8.0, 6.5) == "failed"
    assert fifo(2.5, 3.1) == "failed"
    # Coordinated spread between 1 and 1.6.
    assert _status(evaluate, results, "c3-finish-spread", spread("coordinated", "hdd", 1.7)) == "failed"
    assert _status(evaluate, results, "c3-finish-spread", spread("coordinated", "ssd", 0.9)) == "failed"

    def reduction(kind: str, share: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            fifo_s = next(r["avg_completion_s"] for r in m["fig3_5"]
                          if r["policy"] == "fifo" and r["params"]["cluster.device.kind"] == kind)
            for row in m["fig3_5"]:
                if row["policy"] == "coordinated" and row["params"]["cluster.device.kind"] == kind:
                    row["avg_completion_s"] = fifo_s * (1 - share)
        return change

    # The completion reduction: 29.8% / 19.5% within a factor 1.5, else
    # between 0 and formula (3)'s rate for 10 applications on 8 servers (41%).
    assert _status(evaluate, results, "c3-completion-reduction", reduction("ssd", 0.20)) == "reproduced"
    assert _status(evaluate, results, "c3-completion-reduction", reduction("ssd", 0.10)) == "not reproduced"
    assert _status(evaluate, results, "c3-completion-reduction", reduction("ssd", -0.05)) == "failed"
    assert _status(evaluate, results, "c3-completion-reduction", reduction("hdd", 0.46)) == "failed"

    # The best window: the paper's (1000 ms on HDD, 250 ms on SSD) best in
    # most process counts is reproduced; else a longer window more than 2%
    # slower than a shorter one fails the model's bound.
    def windows(hdd: dict[str, float], ssd: dict[str, float]) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            for row in m["fig8"]:
                if row["policy"] == "coordinated":
                    by = hdd if row["params"]["cluster.device.kind"] == "hdd" else ssd
                    row["avg_completion_s"] = by[row["params"]["policy.window"]]
        return change

    flat = {"250ms": 1.0, "500ms": 1.0, "1000ms": 1.0, "2000ms": 1.0}
    assert _status(evaluate, results, "c7-best-window", windows(
        {**flat, "1000ms": 0.9}, {**flat, "2000ms": 1.01, "1000ms": 1.01, "500ms": 1.01, "250ms": 0.95})) == "reproduced"
    assert _status(evaluate, results, "c7-best-window", windows(flat, {**flat, "2000ms": 0.99})) == "not reproduced"
    assert _status(evaluate, results, "c7-best-window", windows({**flat, "2000ms": 1.03}, flat)) == "failed"

    def servers(at_fewest: float, at_most: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            fig7 = m["fig7"]
            fewest = min(r["params"]["cluster.servers"] for r in fig7)
            most = max(r["params"]["cluster.servers"] for r in fig7 if r["params"]["cluster.device.kind"] == "hdd")
            for row in fig7:
                n = row["params"]["cluster.servers"]
                if row["policy"] != "coordinated" or n not in (fewest, most):
                    continue
                fifo_s = next(r["avg_completion_s"] for r in fig7 if r["policy"] == "fifo" and r["params"] == row["params"])
                row["avg_completion_s"] = fifo_s * (1 - (at_fewest if n == fewest else at_most))
        return change

    # Growth with servers: the paper's 10% -> 46% within 10 points is
    # reproduced; else between formula (3) at 2 servers (23.1%) and its
    # limit (45%).
    assert _status(evaluate, results, "c2b-servers", servers(0.12, 0.44)) == "reproduced"
    assert _status(evaluate, results, "c2b-servers", servers(0.38, 0.40)) == "not reproduced"
    assert _status(evaluate, results, "c2b-servers", servers(0.38, 0.47)) == "failed"
    assert _status(evaluate, results, "c2b-servers", servers(0.21, 0.30)) == "failed"

    # Formulas (1) and (2): 3% off in either direction fails.
    for factor in (0.97, 1.03):
        def off(m: dict, factor: float = factor) -> None:
            m["formula"][0]["avg_completion_s"] = m["formula"][0]["formula_s"] * factor
        assert _status(evaluate, results, "c4-analytical-model", off) == "failed"


def test_resonance_holds_for_a_second_seed(resonance: dict) -> None:
    assert resonance["claims"]["c2b-mpi-io-test-gain"] == "not reproduced"
    assert resonance["claims"]["c3-relative-to-alone"] == "not reproduced"
    assert all(resonance["claims"][c] == "reproduced" for c in (
        "c1-independent-io-resonates", "c2a-resonant-at-least-two-phase",
        "c2b-resonant-gains-where-the-paper-has-them", "c3-resonant-above-two-phase-under-interference",
        "c4-timed-groups"))


def test_resonance_tolerances_fail_past_either_side(resonance: dict) -> None:
    from concerto.reproduce.resonance import evaluate

    results = resonance["results"]

    def scale(section: str, where: dict, factor: float, key: str = "MBps") -> Callable[[dict], None]:
        def change(m: dict) -> None:
            for c in m[section]:
                if all(c.get(k) == v for k, v in where.items()):
                    c[key] *= factor
        return change

    # Demonstration program, 4 processes at 64 KiB: resonant's gain over
    # two-phase within a factor 2 of the paper's +151% either way.
    demo4 = {"workload": "demo", "procs": 4, "x": 65536, "strategy": "resonant"}
    assert _status(evaluate, results, "c2b-resonant-gains-where-the-paper-has-them",
                   scale("demo", demo4, 2.0)) == "failed"
    assert _status(evaluate, results, "c2b-resonant-gains-where-the-paper-has-them",
                   scale("demo", demo4, 0.3)) == "failed"

    # mpi-io-test's gain: reproduced near +61%, not reproduced above the
    # factor while resonant stays within the disks' streaming rate, failed
    # below the paper's gain outside the factor or past the streaming rate.
    def mpi_gain(gain: float, resonant_MBps: float | None = None) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            two = {(c["op"], c["x"]): c["MBps"] for c in m["benchmarks"]
                   if (c["workload"], c["strategy"]) == ("mpi-io-test", "two-phase")}
            for c in m["benchmarks"]:
                if (c["workload"], c["strategy"]) == ("mpi-io-test", "resonant"):
                    c["MBps"] = two[(c["op"], c["x"])] * (1 + gain)
            if resonant_MBps is not None:
                next(c for c in m["benchmarks"] if (c["workload"], c["strategy"]) == ("mpi-io-test", "resonant")
                     )["MBps"] = resonant_MBps
        return change

    assert _status(evaluate, results, "c2b-mpi-io-test-gain", mpi_gain(0.61)) == "reproduced"
    assert _status(evaluate, results, "c2b-mpi-io-test-gain", mpi_gain(1.5)) == "not reproduced"
    assert _status(evaluate, results, "c2b-mpi-io-test-gain", mpi_gain(0.2)) == "failed"
    limit = results["streaming_limit_MBps"]
    assert _status(evaluate, results, "c2b-mpi-io-test-gain", mpi_gain(1.5, limit * 1.1)) == "failed"

    # Under interference: resonant / two-phase within a factor 1.5 of 2.18
    # (1.45 to 3.27) reproduced, from 1.05 up not reproduced, else failed.
    def interference(ratio: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            at = {c["strategy"]: c for c in m["interference"] if c["compute"] == "0s"}
            at["resonant"]["demo_MBps"] = at["two-phase"]["demo_MBps"] * ratio
        return change

    claim = "c3-resonant-above-two-phase-under-interference"
    assert [_status(evaluate, results, claim, interference(r)) for r in (2.18, 1.2, 1.0, 3.5)] == [
        "reproduced", "not reproduced", "failed", "failed"]

    # Shares kept under interference: two-phase keeping less than resonant
    # breaks the bound; the paper's shares are reproduced.
    def shares(resonant: float, two_phase: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            alone = {c["strategy"]: c["demo_MBps"] for c in m["interference"] if c["compute"] == "alone"}
            for c in m["interference"]:
                if c["compute"] == "0s":
                    c["demo_MBps"] = alone[c["strategy"]] * (resonant if c["strategy"] == "resonant" else two_phase)
        return change

    assert _status(evaluate, results, "c3-relative-to-alone", shares(0.43, 0.47)) == "reproduced"
    assert _status(evaluate, results, "c3-relative-to-alone", shares(0.2, 0.8)) == "not reproduced"
    assert _status(evaluate, results, "c3-relative-to-alone", shares(0.8, 0.2)) == "failed"

    # Independent over two-phase at the resonant point, factor 1.5 of 4.17.
    ind4 = {"workload": "demo", "procs": 4, "x": 65536, "strategy": "independent"}
    assert _status(evaluate, results, "c1-independent-io-resonates", scale("demo", ind4, 2.0)) == "failed"
    assert _status(evaluate, results, "c1-independent-io-resonates", scale("demo", ind4, 0.5)) == "failed"


def test_iosets_holds_for_a_second_seed(iosets: dict) -> None:
    assert {c for c, s in iosets["claims"].items() if s == "not reproduced"} == {
        "c2b-utilization-gain", "c2d-sigma-spread"}


def test_iosets_tolerances_fail_past_either_side(iosets: dict) -> None:
    from concerto.reproduce import iosets as module
    from concerto.sweep import load_sweep

    sweeps = {name: load_sweep(ROOT / "experiments" / "iosets" / f"{name}.toml", quick=True) for name in module.SWEEPS}
    results = iosets["results"]

    def evaluate(moved: dict) -> list:
        return module.evaluate(sweeps, moved)

    def set10(name: str, point: int, key: str, fair_share_times: float) -> Callable[[dict], None]:
        """SET-10's value at the point set to FAIR-SHARE's times a factor."""
        def change(m: dict) -> None:
            cells = {c["policy"]: c for c in m[name]["cells"] if c["point"] == point}
            cells["set10"][key] = cells["fair-share"][key] * fair_share_times
        return change

    # The utilization gain at nH = 0 (point 0): +4.41% within a factor 1.5
    # is reproduced, positive below it not reproduced, none or too much failed.
    gain = "c2b-utilization-gain"
    assert _status(evaluate, results, gain, set10("periodic_stress_08", 0, "utilization", 1.0441)) == "reproduced"
    assert _status(evaluate, results, gain, set10("periodic_stress_08", 0, "utilization", 1.08)) == "failed"
    # sigma/mu = 0.05 (point 0): 0.94 +- 0.02.
    assert _status(evaluate, results, "c2d-sigma-well-defined", set10("sigma", 0, "max_stretch", 0.97)) == "failed"
    assert _status(evaluate, results, "c2d-sigma-well-defined", set10("sigma", 0, "max_stretch", 0.91)) == "failed"
    # sigma/mu = 1 (the last point): 0.98 +- 0.02 reproduced, up to 1.02 not
    # reproduced, past it or below the tolerance failed.
    last = len(sweeps["sigma"].points) - 1
    spread = "c2d-sigma-spread"
    assert [_status(evaluate, results, spread, set10("sigma", last, "max_stretch", r)) for r in (0.98, 1.01, 1.03, 0.95)
            ] == ["reproduced", "not reproduced", "failed", "failed"]


def test_clusterfile_holds_for_a_second_seed(clusterfile: dict) -> None:
    assert {c for c, s in clusterfile["claims"].items() if s == "not reproduced"} == {"c4-hcdf-over-hdf"}


def test_clusterfile_tolerances_fail_past_either_side(clusterfile: dict) -> None:
    from concerto.reproduce.clusterfile import evaluate

    results = clusterfile["results"]

    def first_ios_at_largest(factor: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            cells = [c for c in m["throughput"]["synthetic"] if (c["op"], c["ordering"]) == ("write", "first-ios")]
            largest = max(cells, key=lambda c: c["b"])
            hashed = next(c for c in m["throughput"]["synthetic"]
                          if (c["op"], c["ordering"], c["b"]) == ("write", "hash-ios", largest["b"]))
            largest["throughput_MBps"] = hashed["throughput_MBps"] / factor
        return change

    # hash-IOS / first-IOS at the largest b: 1.86 within a factor 1.25.
    claim = "c1a-hash-ios-beats-first-ios-at-large-b"
    assert [_status(evaluate, results, claim, first_ios_at_largest(r)) for r in (1.86, 1.3, 2.5)] == [
        "reproduced", "failed", "failed"]

    # HCDF ahead of HDF by more than 0.1 Δ on a family: reproduced; behind
    # by as much: failed; the measured tie: not reproduced.
    def hcdf(by: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            family = m["graphs"]["families"][0]
            family["hcdf_ratio"] = family["hdf_ratio"] - by
        return change

    assert [_status(evaluate, results, "c4-hcdf-over-hdf", hcdf(d)) for d in (0.15, 0.0, -0.15)] == [
        "reproduced", "not reproduced", "failed"]

    # The contiguous write spread: within a factor 2 of the paper's 86%.
    def spread(factor: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            cells = [c for c in m["throughput"]["synthetic"] if c["op"] == "write"]
            best = max(cells, key=lambda c: c["throughput_MBps"])
            worst = min(cells, key=lambda c: c["throughput_MBps"])
            best["throughput_MBps"] = worst["throughput_MBps"] * (1 + 0.86 * factor)
        return change

    assert _status(evaluate, results, "c1c-contiguous-write-spread", spread(1.0)) == "reproduced"
    assert _status(evaluate, results, "c1c-contiguous-write-spread", spread(2.5)) == "failed"


def test_a_result_reproduced_only_with_a_model_option_is_counted_and_shown_apart() -> None:
    from concerto.reproduce import Claim, counts_line

    plain = Claim("a", "x", "e", "m", passed=True)
    optioned = Claim("b", "x", "e", "m", passed=True, model_option="cluster.device.overload = { after = 4, loss = 0.03 }")
    refuted = Claim("c", "x", "e", "m", passed=True, reproduced=False, model_option="cluster.device.overload = {}")
    assert counts_line([plain, optioned, refuted]) == (
        "2 reproduced (1 only with a model option), 1 not reproduced, 0 failed")
    assert counts_line([plain, refuted]) == "1 reproduced, 1 not reproduced, 0 failed"
    assert optioned.shown_status == "reproduced with cluster.device.overload = { after = 4, loss = 0.03 }"
    assert refuted.shown_status == "not reproduced" and plain.shown_status == "reproduced"
    assert optioned.as_json()["model_option"].startswith("cluster.device.overload")


def test_clusterfile_real_counts_reading_clients_that_meet_at_a_server() -> None:
    # Arrival logs of two servers on a 1 MB/s link (a 64 KB read takes
    # 64 ms on it): at server 0, rank 1 reaches it 10 ms after rank 0 (they
    # met), then rank 2 40 ms later (past half a block: apart); rank 2's own
    # second read and the write are not pairs of two clients' reads; the
    # arrival after the cell's end is left out.
    from concerto.reproduce.clusterfile_real import read_meetings

    ms = 1_000_000
    read = lambda at, rank: {"op": "read", "at_ns": at * ms, "rank": rank, "bytes": 64_000}  # noqa: E731
    logs = [
        [read(0, 0), read(10, 1), read(50, 2), read(51, 2), {**read(52, 3), "op": "write"}, read(500, 3)],
        [read(100, 3), read(200, 0)],
    ]
    assert read_meetings(logs, 0, 300 * ms, 1e6) == (1, 3)
    with pytest.raises(RuntimeError, match="server 1's arrival log: no key"):
        read_meetings([[], {"error": "no key"}], 0, 1, 1e6)


def test_clusterfile_real_twin_holds_hash_ios_to_the_tolerance_only_where_its_clients_kept_apart() -> None:
    # One block size, every cell at the simulator's rate but hash-IOS reads
    # at 0.7 of it: not reproduced with the bound holding when the logs
    # show those readers met (at 20% of reads), failed when they kept apart
    # (2%); a hash-IOS write as far off fails whatever the logs say.
    from concerto.reproduce.clusterfile_real import ORDERINGS, evaluate

    def results(read_hash: float, write_hash: float, met: int) -> dict:
        sim, real = [], []
        for o in ORDERINGS:
            for op in ("write", "read"):
                sim.append({"op": op, "ordering": o, "block": 65536, "throughput_Bps": 40e6})
                factor = {"read": read_hash, "write": write_hash}[op] if o == "hash-ios" else 1.0
                cell = {"op": op, "ordering": o, "block": 65536, "rep": 0, "throughput_Bps": 40e6 * factor}
                real.append(cell | ({"meetings": met, "read_pairs": 100} if op == "read" else {}))
        return {"links": {"rate_Bps": 12e6}, "real": real, "simulated": sim}

    def twin(r: dict) -> str:
        return next(c for c in evaluate(r) if c.id == "cf-real-twin").status

    assert twin(results(0.7, 1.0, met=20)) == "not reproduced"
    assert twin(results(0.7, 1.0, met=2)) == "failed"
    assert twin(results(1.0, 0.7, met=20)) == "failed"
    assert twin(results(1.0, 1.0, met=20)) == "reproduced"


def test_the_arena_runs_every_policy_on_every_workload_and_holds_for_a_second_seed(arena: dict) -> None:
    from concerto import _native

    assert arena["claims"] == {"arena-mclock-reservation": "reproduced", "arena-mclock-limit": "reproduced",
                               "arena-gift-efficiency-and-fairness": "reproduced",
                               "arena-adaptbf-utilization": "reproduced",
                               "arena-themisio-job-fair": "reproduced", "arena-themisio-user-fair": "reproduced",
                               "arena-themisio-size-fair": "reproduced"}
    table = arena["results"]["results"]
    assert set(table) == {"checkpoint-and-metadata", "small-jobs-beside-a-large-one", "reservation-mix",
                          "four-node-beside-one-node", "bursty-beside-steady", "iosets-stress-0.4",
                          "iosets-stress-0.8"}
    # ThemisIO's sharings split the two jobs differently, as the policy says.
    splits = table["four-node-beside-one-node"]["themisio"]["splits"]
    assert splits["size"] > splits["job"] + 0.2, splits
    for workload, by_policy in table.items():
        assert set(by_policy) == set(_native.policy_names()), workload
        for policy, row in by_policy.items():
            apps = len(row["stretch"])
            assert 0 < row["utilization"] <= 1, (workload, policy, row)
            assert 1 / apps - 1e-9 <= row["jain"] <= 1 + 1e-9, (workload, policy, row)
            assert row["max_stretch"] >= row["io_slowdown"] > 0, (workload, policy, row)
            assert row["p99_ms"] > 0, (workload, policy, row)
    # IO-SETS' generator at twice the I/O stress keeps the servers busier
    # under every policy.
    for policy in table["iosets-stress-0.4"]:
        assert (table["iosets-stress-0.8"][policy]["utilization"]
                > 1.5 * table["iosets-stress-0.4"][policy]["utilization"]), policy
    # What the anchors predict, beside the baseline: weights alone do not
    # give the reading job its reservation, and FIFO lets the limited job
    # past its limit.
    mix = table["reservation-mix"]
    assert mix["fifo"]["reservation_missed"] and not mix["dmclock"]["reservation_missed"]
    assert mix["fifo"]["limit_overshoot"] > 0.05 >= mix["dmclock"]["limit_overshoot"]


def test_arena_tolerances_fail_past_either_side(arena: dict) -> None:
    from concerto.reproduce.arena import LIMIT_MBPS, RESERVATION_MBPS, evaluate

    results = arena["results"]["results"]

    def set_to(key: str, value: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            m["reservation-mix"]["dmclock"][key] = value
        return change

    # A reservation met to 95% or more; a limit passed by 5% at most.
    reservation = "arena-mclock-reservation"
    assert _status(evaluate, results, reservation, set_to("reserved_mbps", 0.96 * RESERVATION_MBPS)) == "reproduced"
    assert _status(evaluate, results, reservation, set_to("reserved_mbps", 0.94 * RESERVATION_MBPS)) == "failed"
    limit = "arena-mclock-limit"
    assert _status(evaluate, results, limit, set_to("limited_worst_mbps", 1.04 * LIMIT_MBPS)) == "reproduced"
    assert _status(evaluate, results, limit, set_to("limited_worst_mbps", 1.06 * LIMIT_MBPS)) == "failed"

    # GIFT and AdapTBF: utilization at least 95% of FIFO's; GIFT's max
    # stretch no more than FIFO's.
    def bursty(policy: str, key: str, times_fifo: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            w = m["bursty-beside-steady"]
            w[policy][key] = times_fifo * w["fifo"][key]
        return change

    for policy, claim in (("gift", "arena-gift-efficiency-and-fairness"), ("adaptbf", "arena-adaptbf-utilization")):
        assert _status(evaluate, results, claim, bursty(policy, "utilization", 0.96)) == "reproduced", policy
        assert _status(evaluate, results, claim, bursty(policy, "utilization", 0.94)) == "failed", policy
    # ThemisIO: each split within 5% of its share, both sides.
    def split(fairness: str, value: float) -> Callable[[dict], None]:
        def change(m: dict) -> None:
            m["four-node-beside-one-node"]["themisio"]["splits"][fairness] = value
        return change

    for fairness, share in (("job", 0.5), ("user", 0.5), ("size", 0.8)):
        claim = f"arena-themisio-{fairness}-fair"
        for inside in (0.96 * share, 1.04 * share):
            assert _status(evaluate, results, claim, split(fairness, inside)) == "reproduced", (fairness, inside)
        for outside in (0.94 * share, 1.06 * share):
            assert _status(evaluate, results, claim, split(fairness, outside)) == "failed", (fairness, outside)
    gift = "arena-gift-efficiency-and-fairness"
    assert _status(evaluate, results, gift, bursty("gift", "max_stretch", 0.99)) == "reproduced"
    assert _status(evaluate, results, gift, bursty("gift", "max_stretch", 1.01)) == "failed"
