"""The arena on real bytes (`concerto reproduce arena --real`): a local
cluster runs the policies beside the simulator's twin on the same device,
and mClock's reservation and limit are judged in each world."""

from __future__ import annotations

import copy
import json

from conftest import concerto

from concerto.reproduce import arena_real
from concerto.reproduce.arena_real import BACKLOGGED, LIMIT_MBPS, RESERVATION_MBPS, evaluate

CLAIMS = {f"arena-{world}-mclock-{what}" for world in ("real", "simulated") for what in ("reservation", "limit")}


def test_arena_real_runs_dmclock_beside_weights_alone_in_both_worlds(tmp_path):
    # The reservation workload with dmclock (and sfq-d, its comparison) on
    # a real cluster. What a busy host cannot change is asserted: the
    # simulator's claims (deterministic), the limit (a ceiling: load only
    # slows the job), and the reservation met unless the job's own client
    # left the servers without its requests (then the client was measured).
    out = tmp_path / "arena"
    r = concerto("reproduce", "arena", "--real", "--policies", "dmclock", "--workload", "reservation-mix",
                 "--out", str(out))
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())}
    assert set(claims) == CLAIMS, r.stdout + r.stderr
    assert claims["arena-simulated-mclock-reservation"]["status"] == "reproduced", claims
    assert claims["arena-simulated-mclock-limit"]["status"] == "reproduced", claims
    assert claims["arena-real-mclock-limit"]["status"] == "reproduced", claims
    results = json.loads((out / "results.json").read_text())["results"]
    assert set(results) == {"reservation-mix"}
    assert set(results["reservation-mix"]) == {"dmclock", "sfq-d"}
    real = results["reservation-mix"]["dmclock"]["real"]
    assert real["reserved_mbps"] >= 0.95 * RESERVATION_MBPS or real["reserved_backlogged"] < BACKLOGGED, real
    for policy, worlds in results["reservation-mix"].items():
        for world in ("real", "simulated"):
            row = worlds[world]
            assert row["max_stretch"] >= row["io_slowdown"] > 0, (policy, world, row)
            assert row["throughput_MBps"] > 0 and row["p99_ms"] > 0, (policy, world, row)
    report = (out / "report.md").read_text()
    assert "| dmclock |" in report and "| sfq-d |" in report


def _results(reserved: float, backlogged: float, worst: float) -> dict:
    row = {"reserved_mbps": reserved, "reserved_backlogged": backlogged, "limited_worst_mbps": worst}
    both = {"real": dict(row), "simulated": dict(row)}
    return {"reservation-mix": {"dmclock": both, "sfq-d": copy.deepcopy(both)}}


def _status(results: dict, claim: str) -> str:
    return next(c.status for c in evaluate(results) if c.id == claim)


def test_arena_real_tolerances_fail_past_either_side():
    ok = LIMIT_MBPS
    for world in ("real", "simulated"):
        reservation, limit = f"arena-{world}-mclock-reservation", f"arena-{world}-mclock-limit"
        assert _status(_results(0.96 * RESERVATION_MBPS, 1.0, ok), reservation) == "reproduced"
        assert _status(_results(0.94 * RESERVATION_MBPS, 1.0, ok), reservation) == "failed"
        assert _status(_results(RESERVATION_MBPS, 1.0, 1.04 * LIMIT_MBPS), limit) == "reproduced"
        assert _status(_results(RESERVATION_MBPS, 1.0, 1.06 * LIMIT_MBPS), limit) == "failed"
    # A missed reservation whose job did not keep requests waiting says so
    # (and still fails: the claim was not measured).
    starved = evaluate(_results(0.5 * RESERVATION_MBPS, BACKLOGGED - 0.1, ok))
    real = next(c for c in starved if c.id == "arena-real-mclock-reservation")
    assert real.status == "failed" and "client-bound" in real.measured


def test_worst_second_is_taken_over_the_span_that_surely_holds_the_bytes():
    # Two samples a second apart by their requests, 1.05 s by the second's
    # reply: 10.5 MB moved reads as 10 MB/s, not 10.5.
    samples = [(0.0, 0.01, [{7: (0, 0.0)}]), (1.0, 1.05, [{7: (10_500_000, 0.0)}])]
    assert abs(arena_real.worst_span_mbps(samples, 7) - 10.0) < 1e-9


def test_arena_real_options_are_checked_and_named():
    r = concerto("reproduce", "arena", "--real", "--policies", "nope")
    assert r.returncode == 2 and "--policies" in r.stderr and "no policy nope" in r.stderr
    r = concerto("reproduce", "arena", "--real", "--workload", "nope")
    assert r.returncode == 2 and "--workload" in r.stderr and "no workload nope" in r.stderr
    r = concerto("reproduce", "arena", "--policies", "dmclock")
    assert r.returncode == 2 and "--real" in r.stderr
