"""``concerto reproduce vpfs``: proportional sharing with SFQ(D)+ (vPFS+).

Runs the scenarios in ``experiments/vpfs/``: BTIO Class A, BTIO Class C and
WRF against IOR under native (FIFO), SFQ(D), SFQ(D)+ and the
non-work-conserving Capped scheduler, the slot-cost sweep (WRF with IOR),
two md-test instances weighted 2:1 on shared metadata servers, and
total-service sharing across servers with ``service-sync``. Writes
``report.md``, plots, ``results.json`` and ``claims.json``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Callable

import tomli_w

from concerto import _native, profile
from concerto.report import markdown_table, policy_colour, pyplot, save, write_json
from concerto.reproduce import Claim, experiments_dir, judged, report_head, within_factor
from concerto.sweep import Sweep, load_sweep, parse_sweep, run_sweep

POLICIES = ["fifo", "sfq-d", "sfq-d-plus", "capped"]
CASES = {"btio_a": "BTIO Class A with IOR", "btio_c": "BTIO Class C with IOR", "wrf": "WRF with IOR"}
# Runtimes relative to standalone under IOR contention (Figures 6 and 7).
PAPER_BTIO_A = {"sfq-d-plus": 1.20, "sfq-d": 2.53, "fifo": 3.29}
PAPER_WRF = {"sfq-d-plus": 1.79, "sfq-d 16:1": 2.80, "fifo": 6.82}
# Claims 1 and 4: how far the model's sizes may be from the paper's (a
# factor, either way). The model's device and workloads are shaped like the
# paper's but not calibrated to its cluster (docs/reproductions.md).
SIZE_FACTOR = 1.5
L_SWEEP = [1, 2, 3, 5, 7, 10, 14]
PROFILE_COUNT = 500  # I/Os per profiling point
SHARE_TOLERANCE = 0.05  # claim 7: total service within 5% of the weight ratio
CAP_TOLERANCE = 0.01  # Capped's capacity: BTIO alone under it within 1% of standalone
CAPPED_NEAR = 0.05  # claim 2: Capped leaves BTIO-A within 5% of standalone ("the same level")
# Claim 2's sizes, the paper's: SFQ(D)+'s total throughput 13.81x Capped's,
# BTIO under SFQ(D)+ 1.18x its runtime under Capped. The throughput ratio
# within a factor 2 either way (it divides by Capped's small total), the
# runtime within SLOWER_FACTOR.
PAPER_THROUGHPUT_RATIO, THROUGHPUT_FACTOR = 13.81, 2.0
PAPER_SLOWER, SLOWER_FACTOR = 1.18, 1.2
CLOSE = 0.05  # claim 3: "within a few percent"
MODEL_CLOSE = 0.10  # claim 3's bound on the model, which differs (docs/reproductions.md)
PEAK_TOLERANCE = 0.05  # claim 5: "at its peak", "gains little"
# Claim 5's combined gain (SFQ(D)+ 25% above SFQ(D)), and the model option
# it is tried with: a device that loses throughput when overloaded, each
# channel transfer 3% longer per request in the device beyond 4 (the
# paper's Figure 2 saturates large I/Os below 5), so that with 14 in it the
# device moves 77% of its rate. The loss is the hypothesis's size, not a
# measurement: the paper's Figure 2 shows no such loss (docs/reproductions.md).
PAPER_COMBINED_GAIN, COMBINED_FACTOR = 0.25, 1.5
OVERLOAD = {"after": 4, "loss": 0.03}
OVERLOAD_OPTION = f"cluster.device.overload = {{ after = {OVERLOAD['after']}, loss = {OVERLOAD['loss']} }}"
L_GAIN = 1.5  # claim 5: "substantially reduced" at L = 1 (WRF at the profiled L at least 1.5x)
L_DROP = 0.10  # claim 5: "drops severely" at the largest L (at least 10%)
MD_WEIGHTS = 2.0  # claim 6: app1 : app2
MD_RATIO_TOLERANCE = 0.05  # claim 6: metadata throughput within 5% of 2:1
MD_JAIN = 0.95  # claim 6: mean Jain's fairness index while both are active
BACKLOGGED = 0.9  # a bin counts when both applications had requests waiting for 90% of it
MIN_BACKLOGGED_BINS = 5


def _served_until(app: dict, end_s: float) -> int:
    tl = app["timeline"]
    return sum(tl["bytes"][: int(end_s / tl["bin_s"])])


def pair_metrics(run: dict) -> dict:
    """An application (``apps[0]``) against IOR (``apps[1]``), measured while
    the application runs (a sweep's measure: see concerto.sweep.Task)."""
    app, ior = run["apps"]
    end = app["end_s"]
    ior_bytes = _served_until(ior, end)
    return {
        "runtime_s": end,
        "latency_ms": app["completion_s"]["mean"] * 1e3,
        "app_MBps": app["bytes"] / end / 1e6,
        # IOR's throughput while the application ran, and the two together.
        "ior_MBps": ior_bytes / end / 1e6,
        "total_MBps": (app["bytes"] + ior_bytes) / end / 1e6,
        # The paper's IOR writes throughout: contention must last as long as the application.
        "ior_end_s": ior["end_s"],
    }


def mdtest_metrics(run: dict) -> dict:
    """Metadata throughput of the two instances on the first metadata server,
    per bin, and which bins had both backlogged there."""
    server = next(s for s in run["servers"] if s["role"] in ("metadata", "data+metadata"))
    t1, t2 = server["timeline"]
    width = t1["bin_s"]
    n = max(len(t1["metadata_ops"]), len(t2["metadata_ops"]))

    def col(t: dict, key: str) -> list[float]:
        return [*t[key], *[0] * (n - len(t[key]))]

    ops1, ops2 = col(t1, "metadata_ops"), col(t2, "metadata_ops")
    wait1, wait2 = col(t1, "waiting_s"), col(t2, "waiting_s")
    backlogged = [w1 >= BACKLOGGED * width and w2 >= BACKLOGGED * width for w1, w2 in zip(wait1, wait2)]
    weights = [MD_WEIGHTS, 1.0]
    return {
        "server": server["index"],
        "bin_s": width,
        "app1_iops": [o / width for o in ops1],
        "app2_iops": [o / width for o in ops2],
        "backlogged": backlogged,
        "jain": [_native.jain_index([a, b], weights) if a + b > 0 else None for a, b in zip(ops1, ops2)],
        "app1_ops": sum(ops1),
        "app2_ops": sum(ops2),
    }


def uneven_metrics(run: dict) -> dict:
    narrow, wide = run["apps"]
    end = min(narrow["end_s"], wide["end_s"])
    n, w = _served_until(narrow, end), _served_until(wide, end)
    return {"narrow_MB": n / 1e6, "wide_MB": w / 1e6, "ratio": w / n if n else float("inf"),
            "reports": sum(s["service_reports"] for s in run["servers"])}


def _pick(swept: tuple[Sweep, list[dict]], policy: str, where: dict | None = None) -> dict:
    """The metrics of the one run under ``policy`` whose swept keys have the
    values in ``where`` (``None``: not swept at that point)."""
    sweep, rows = swept
    want = where or {}
    matches = [r for r in rows if r["policy"] == policy and all(r.get(k) == v for k, v in want.items())]
    # Points that differ only in policy keys this policy does not take
    # (capped's capacity, for fifo) share one run, named by the same overrides: count it once.
    runs = {(tuple(sweep.points[r["point"]].overrides(policy)), r["rep"]): r for r in matches}
    (row,) = runs.values()
    return sweep.metrics_of(row)


def _sweep(name: str, measure: Callable, quick: bool, seed: int | None, out: Path, workers: int,
           dask: str | None) -> tuple[Sweep, list[dict]]:
    return _run(load_sweep(experiments_dir() / "vpfs" / name, quick=quick), measure, seed, out, workers, dask)


def _run(sweep: Sweep, measure: Callable, seed: int | None, out: Path, workers: int,
         dask: str | None) -> tuple[Sweep, list[dict]]:
    """Runs one of the reproduction's sweeps afresh (the seed overridden when
    given), each run measured by ``measure``."""
    if seed is not None:
        sweep.seed = seed
    sweep.measure = f"{__name__}:{measure.__name__}"
    return sweep, run_sweep(sweep, out=out / "sweeps" / sweep.id, workers=workers, dask=dask, fresh=True).rows


def _capped_capacity(swept: tuple[Sweep, list[dict]], alone: dict) -> str:
    """The non-work-conserving baseline's capacity, chosen as the paper
    chose its cap: the smallest swept capacity under which BTIO alone runs
    within CAP_TOLERANCE of its FIFO standalone time, i.e. whose share
    covers BTIO's own demand (the largest if none does; claim v2 then
    fails)."""
    caps = list(dict.fromkeys(pt.params["policy.capacity"] for pt in swept[0].points))
    base = _pick(swept, "fifo", alone)["runtime_s"]
    for cap in caps:
        if _pick(swept, "capped", {**alone, "policy.capacity": cap})["runtime_s"] <= (1 + CAP_TOLERANCE) * base:
            return cap
    return caps[-1]


def _check_contention(results: dict) -> None:
    """The paper's IOR writes throughout; a run where it stopped before the
    application would understate the slowdown, so it is an error in the
    experiment's files, not a result. Native is the exception: its FIFO
    can starve the application until IOR is done, however long IOR runs;
    its slowdown is then a lower bound, which is all its claims use."""
    for case in ("btio_a", "btio_c", "wrf"):
        for name, r in results[case].items():
            if name not in ("standalone", "fifo") and r["ior_end_s"] < r["runtime_s"]:
                raise _native.ConfigError(
                    f"experiments/vpfs: {case} under {name}: IOR ended at {r['ior_end_s']:.2f} s, before the "
                    f"application ({r['runtime_s']:.2f} s); give IOR more requests")
    for L, r in results["l_sweep"].items():
        if r["ior_end_s"] < r["runtime_s"]:
            raise _native.ConfigError(f"experiments/vpfs: WRF at L = {L}: IOR ended before WRF; give IOR more requests")


def _relative(rows: dict[str, dict]) -> dict[str, dict]:
    base = rows["standalone"]["runtime_s"]
    for r in rows.values():
        r["relative_runtime"] = r["runtime_s"] / base
    return rows


def run(out: Path, quick: bool, seed: int | None = None, status: Callable[[str], None] = print,
        workers: int = 1, dask: str | None = None) -> list[Claim]:
    results: dict = {}
    status("BTIO Class A and C vs IOR")
    btio = _sweep("btio_ior.toml", pair_metrics, quick, seed, out, workers, dask)
    alone = {"apps[1].processes": 1}
    cap = _capped_capacity(btio, {"apps[0].subtype": "simple", **alone})
    results["capped_capacity"] = cap
    for case, subtype in (("btio_a", "simple"), ("btio_c", "full")):
        cls = {"apps[0].subtype": subtype}
        rows = {"standalone": _pick(btio, "fifo", {**cls, **alone})}
        rows |= {p: _pick(btio, p, {**cls, "apps[1].processes": None, **({"policy.capacity": cap} if p == "capped" else {})})
                 for p in POLICIES}
        results[case] = _relative(rows)
    status("WRF vs IOR, and over the slot cost L")
    wrf = _sweep("wrf_ior.toml", pair_metrics, quick, seed, out, workers, dask)
    default_l = {"policy.large_slots": 5}
    rows = {"standalone": _pick(wrf, "fifo", alone)}
    rows |= {p: _pick(wrf, p, default_l) for p in POLICIES}
    rows["sfq-d 16:1"] = _pick(wrf, "sfq-d", {"apps[0].weight": 16})
    results["wrf"] = _relative(rows)
    results["l_sweep"] = {L: _pick(wrf, "sfq-d-plus", {"policy.large_slots": L}) for L in L_SWEEP}
    _check_contention(results)
    status("profiling the device")
    prof = profile.profile(str(experiments_dir() / "vpfs" / "wrf_ior.toml"), {"count": PROFILE_COUNT})
    results["profile"] = prof["recommendation"]
    status("WRF and BTIO vs IOR on a device that loses throughput when overloaded (a model option)")
    profiled = results["profile"]["large_slots"]
    overloaded = _overloaded_sweep("wrf_ior.toml", ["sfq-d-plus"], [{"policy.large_slots": sorted({1, profiled})}],
                                   quick, seed, out, workers, dask)
    results["l_sweep_overloaded"] = {L: _pick(overloaded, "sfq-d-plus", {"policy.large_slots": L})
                                     for L in sorted({1, profiled})}
    # The hypothesis must keep the paper's BTIO results too (v2's total, v3).
    overloaded_btio = _overloaded_sweep("btio_ior.toml", ["sfq-d", "sfq-d-plus"], None, quick, seed, out, workers,
                                        dask)
    results["btio_overloaded"] = {
        case: {p: _pick(overloaded_btio, p, {"apps[0].subtype": subtype, "apps[1].processes": None})
               for p in ("sfq-d", "sfq-d-plus")}
        for case, subtype in (("btio_a", "simple"), ("btio_c", "full"))}
    status("two md-test instances, weights 2:1")
    md = _sweep("mdtest_pair.toml", mdtest_metrics, quick, seed, out, workers, dask)
    results["mdtest"] = _pick(md, "sfq-d-plus")
    status("total-service sharing across servers")
    uneven = _sweep("uneven.toml", uneven_metrics, quick, seed, out, workers, dask)
    thresholds = [pt.params["policy.threshold"] for pt in uneven[0].points]
    results["uneven"] = {"sfq-d-plus": _pick(uneven, "sfq-d-plus", {"policy.threshold": thresholds[0]})}
    for t in thresholds:
        results["uneven"][t] = _pick(uneven, "service-sync", {"policy.threshold": t})
    claims = evaluate(results, thresholds)
    write_outputs(out, results, claims, quick)
    return claims


def _overloaded_sweep(name: str, policies: list[str], cases: list[dict] | None, quick: bool, seed: int | None,
                      out: Path, workers: int, dask: str | None) -> tuple[Sweep, list[dict]]:
    """The sweep file ``name`` under ``policies`` (and ``cases`` instead of
    its own, when given), on its device with the model option OVERLOAD on."""
    path = experiments_dir() / "vpfs" / name
    doc = tomllib.loads(path.read_text())
    doc["scenario"]["cluster"]["device"]["overload"] = OVERLOAD
    doc["sweep"] |= {"id": f"{doc['sweep']['id']}-overloaded", "title": f"{doc['sweep']['title']}, overloaded device",
                     "policies": policies}
    if cases is not None:
        doc["sweep"]["cases"] = cases
    sweep = parse_sweep(tomli_w.dumps(doc), f"{path} with {OVERLOAD_OPTION}", quick=quick)
    return _run(sweep, pair_metrics, seed, out, workers, dask)


def _overload_claim(results: dict, profiled: int) -> Claim:
    """Claim 5's combined gain on the overloaded device (the model option
    OVERLOAD): reproduced with the option when the gain is within
    COMBINED_FACTOR of the paper's and the option keeps the paper's BTIO
    results (BTIO-C alike under SFQ(D)+ and SFQ(D), v3; BTIO-A's total
    throughput lower under SFQ(D)+, v2's "10.6% reduction"); else, not
    reproduced, the gain within its tolerance is the bound (what the
    option is for)."""
    over = results["l_sweep_overloaded"]
    over_small, over_at = over[1], over[profiled]
    gain = over_at["total_MBps"] / over_small["total_MBps"] - 1
    a, c = results["btio_overloaded"]["btio_a"], results["btio_overloaded"]["btio_c"]
    c_apart = abs(c["sfq-d-plus"]["runtime_s"] / c["sfq-d"]["runtime_s"] - 1)
    a_total = a["sfq-d-plus"]["total_MBps"] / a["sfq-d"]["total_MBps"] - 1
    consistent = c_apart <= CLOSE and a_total < 0
    gain_ok = within_factor(gain, PAPER_COMBINED_GAIN, COMBINED_FACTOR)
    return Claim(
        "v5-combined-gain-overloaded-device",
        "SFQ(D)+ at the profiled L gives combined throughput 25% above SFQ(D) (L = 1; paper, Figure 8), tried on "
        "the hypothesis that the paper's storage lost throughput with many large I/Os in flight: the device with "
        f"the model option {OVERLOAD_OPTION} (each transfer {OVERLOAD['loss']:.0%} longer per request beyond "
        f"{OVERLOAD['after']}, so 77% of its rate with 14 in it; the paper's Figure 2 shows no such loss). The "
        "hypothesis must keep the paper's BTIO results; where it does not, it is refuted and the claim is not "
        "reproduced, the gain it gives being the bound",
        f"the gain within a factor {COMBINED_FACTOR} of +{PAPER_COMBINED_GAIN:.0%}, either way; with the option, "
        f"BTIO-C's runtimes under SFQ(D)+ and SFQ(D) within {CLOSE:.0%} (v3) and BTIO-A's total throughput lower "
        "under SFQ(D)+ (paper: -10.6%)",
        f"L = 1: {over_small['total_MBps']:.1f} MB/s (WRF {over_small['app_MBps']:.1f}), L = {profiled}: "
        f"{over_at['total_MBps']:.1f} MB/s (WRF {over_at['app_MBps']:.1f}): {gain:+.1%}; BTIO-C "
        f"{c['sfq-d-plus']['runtime_s']:.2f} s vs {c['sfq-d']['runtime_s']:.2f} s ({c_apart:.1%} apart); BTIO-A's "
        f"total {a_total:+.1%} under SFQ(D)+",
        **judged(gain_ok and consistent, gain_ok),
        model_option=OVERLOAD_OPTION,
    )


def _within(measured: float, paper: float) -> bool:
    """Within a factor SIZE_FACTOR of the paper's, either way."""
    return within_factor(measured, paper, SIZE_FACTOR)


def _sized(measured: dict[str, float], paper: dict[str, float]) -> bool:
    """Each measured runtime (relative to standalone) but native's within a
    factor SIZE_FACTOR of the paper's, either way (native's is its own claim)."""
    return all(_within(measured[k], v) for k, v in paper.items() if k != "fifo")


def _sizes(measured: dict[str, float], paper: dict[str, float], native: dict) -> str:
    starved = native["ior_end_s"] < native["runtime_s"]
    return ", ".join(
        f"{k} {measured[k]:.2f}x ({measured[k] / v:.2f}x the paper's"
        + ("; IOR ended first, so at least this" if k == "fifo" and starved else "") + ")"
        for k, v in paper.items())


def _native_claim(cid: str, workload: str, measured: float, paper: float) -> Claim:
    """Native's runtime relative to standalone: reproduced within a factor
    SIZE_FACTOR of the paper's, either way. Above it, not reproduced: the
    model's native is one FIFO queue for every file where PVFS2 keeps one
    per file, so a small-I/O job waits behind all of IOR's requests, not
    its own file's; the bound is the physics of that difference — at least
    as slow as the paper's. Below the factor, failed."""
    return Claim(
        cid,
        f"Under IOR contention, {workload}'s runtime under native is {paper}x its standalone runtime (paper). "
        f"Within a factor {SIZE_FACTOR} either way it is reproduced; above, not reproduced — the model's native is "
        "one FIFO queue for every file where PVFS2 keeps one per file — and its bound is to be at least as slow as "
        "the paper's",
        f"{paper / SIZE_FACTOR:.2f}x to {paper * SIZE_FACTOR:.2f}x standalone (reproduced), else at least {paper}x "
        "(the model's bound)",
        f"{measured:.2f}x ({measured / paper:.2f}x the paper's)",
        measured >= paper / SIZE_FACTOR,
        reproduced=_within(measured, paper),
    )


def evaluate(results: dict, thresholds: list[str]) -> list[Claim]:
    claims = []
    a = results["btio_a"]
    rel = {p: a[p]["relative_runtime"] for p in POLICIES}
    claims.append(Claim(
        "v1-btio-a-isolation",
        "Under IOR contention, BTIO Class A's runtime relative to standalone is closest to 1 with SFQ(D)+, then SFQ(D), "
        "then native, SFQ(D)+'s and SFQ(D)'s by the paper's amounts (native's amount: v1-native)",
        f"SFQ(D)+ < SFQ(D) < native; SFQ(D)+ and SFQ(D) within a factor {SIZE_FACTOR} of the paper's (1.20, 2.53), "
        "either way",
        _sizes(rel, PAPER_BTIO_A, a["fifo"]),
        rel["sfq-d-plus"] < rel["sfq-d"] < rel["fifo"] and _sized(rel, PAPER_BTIO_A),
    ))
    claims.append(_native_claim("v1-native", "BTIO Class A", rel["fifo"], PAPER_BTIO_A["fifo"]))
    ratio = a["sfq-d-plus"]["total_MBps"] / a["capped"]["total_MBps"]
    slower = rel["sfq-d-plus"] / rel["capped"]
    claims.append(Claim(
        "v2-work-conserving-pays",
        "The non-work-conserving Capped scheduler restores BTIO Class A to its standalone runtime; SFQ(D)+'s total "
        "throughput is many times Capped's, while BTIO is only moderately slower than under Capped",
        f"Capped: BTIO within {CAPPED_NEAR:.0%} of standalone (paper: the same as alone); SFQ(D)+'s total throughput "
        f"over Capped's within a factor {THROUGHPUT_FACTOR:g} of the paper's {PAPER_THROUGHPUT_RATIO}x "
        f"({PAPER_THROUGHPUT_RATIO / THROUGHPUT_FACTOR:.1f}x to {PAPER_THROUGHPUT_RATIO * THROUGHPUT_FACTOR:.1f}x) "
        f"and BTIO's runtime under SFQ(D)+ over Capped's within a factor {SLOWER_FACTOR:g} of the paper's "
        f"{PAPER_SLOWER}x, either way. Capped's capacity: the smallest under "
        f"which BTIO alone runs within {CAP_TOLERANCE:.0%} of standalone ({results['capped_capacity']} per server)",
        f"Capped: BTIO {rel['capped']:.2f}x standalone; throughput {a['sfq-d-plus']['total_MBps']:.1f} vs "
        f"{a['capped']['total_MBps']:.1f} MB/s ({ratio:.1f}x); BTIO runtime under SFQ(D)+ {slower:.2f}x Capped's",
        rel["capped"] <= 1 + CAPPED_NEAR and within_factor(ratio, PAPER_THROUGHPUT_RATIO, THROUGHPUT_FACTOR)
        and within_factor(slower, PAPER_SLOWER, SLOWER_FACTOR),
    ))
    w = results["wrf"]
    wrel = {p: w[p]["relative_runtime"] for p in ("sfq-d-plus", "sfq-d 16:1", "fifo")}
    claims.append(Claim(
        "v4-wrf-isolation",
        "Under IOR contention, WRF (small I/Os and many getattrs) runs faster with SFQ(D)+ at 1:1 than with SFQ(D) at "
        "its best (16:1 favouring WRF) and native, SFQ(D)+'s and SFQ(D)'s by the paper's amounts (native's amount: "
        "v4-native)",
        f"SFQ(D)+ < SFQ(D) and SFQ(D)+ < native; SFQ(D)+ and SFQ(D) within a factor {SIZE_FACTOR} of the paper's "
        "(1.79x, 2.80x standalone), either way",
        _sizes(wrel, PAPER_WRF, w["fifo"]) + f"; SFQ(D) at 1:1 {w['sfq-d']['relative_runtime']:.2f}x",
        wrel["sfq-d-plus"] < wrel["sfq-d 16:1"] and wrel["sfq-d-plus"] < wrel["fifo"] and _sized(wrel, PAPER_WRF),
    ))
    claims.append(_native_claim("v4-native", "WRF", wrel["fifo"], PAPER_WRF["fifo"]))
    c = results["btio_c"]
    diff = abs(c["sfq-d-plus"]["runtime_s"] / c["sfq-d"]["runtime_s"] - 1)
    claims.append(Claim(
        "v3-btio-c-model-bound",
        "For BTIO Class C, whose I/Os are as large as IOR's, SFQ(D)+ and SFQ(D) perform alike (paper: the same). "
        f"The model differs by more than the paper's few percent ({CLOSE:.0%}: with every request large, SFQ(D)+ "
        "admits 2 at once where SFQ(D) admits 14); the bound it must meet",
        f"BTIO-C runtimes within {MODEL_CLOSE:.0%} of each other",
        f"SFQ(D)+ {c['sfq-d-plus']['runtime_s']:.2f} s, SFQ(D) {c['sfq-d']['runtime_s']:.2f} s ({diff:.1%})",
        diff <= MODEL_CLOSE,
        reproduced=False,
    ))
    # The paper's Figure 8 (WRF with IOR): too small an L starves WRF while
    # IOR gains little; too large an L idles the device, so IOR's and the
    # combined throughput drop while WRF gains little; the profiled L is
    # the best trade-off. The paper also reports SFQ(D)+ 25% above SFQ(D)
    # (L = 1) in combined throughput: the model cannot show that part, its
    # device losing no throughput with 14 large I/Os in flight
    # (docs/reproductions.md), so that part is checked as a bound.
    sweep = results["l_sweep"]
    profiled = results["profile"]["large_slots"]
    at = sweep[min(L_SWEEP, key=lambda L: abs(L - profiled))]
    small, large = sweep[L_SWEEP[0]], sweep[L_SWEEP[-1]]
    peak = max(r["total_MBps"] for r in sweep.values())
    measured = ", ".join(f"L={L}: {sweep[L]['total_MBps']:.1f} MB/s (WRF {sweep[L]['app_MBps']:.1f})"
                         for L in sweep)
    claims.append(Claim(
        "v5-l-sweep",
        "Over the slot-cost sweep (WRF with IOR), the L chosen by profiling is the best trade-off: at L = 1 WRF's "
        "throughput is substantially lower while IOR gains little; at the largest L combined throughput drops "
        "severely while WRF gains little; the profiled L keeps combined throughput at its peak",
        f"at the profiled L = {profiled} (`concerto profile`: D = {results['profile']['depth']}): WRF >= "
        f"{L_GAIN}x its L = 1 throughput, combined within {PEAK_TOLERANCE:.0%} of the sweep's peak; "
        f"L = {L_SWEEP[-1]}'s combined >= {L_DROP:.0%} below it and its WRF at most {PEAK_TOLERANCE:.0%} above it",
        measured,
        at["app_MBps"] >= L_GAIN * small["app_MBps"]
        and at["total_MBps"] >= (1 - PEAK_TOLERANCE) * peak
        and large["total_MBps"] <= (1 - L_DROP) * at["total_MBps"]
        and large["app_MBps"] <= (1 + PEAK_TOLERANCE) * at["app_MBps"],
    ))
    claims.append(Claim(
        "v5-combined-gain-model-bound",
        "Not reproduced: SFQ(D)+ at the profiled L gives combined throughput 25% above SFQ(D) (L = 1; paper, "
        "Figure 8). The model's device loses no throughput with 14 large I/Os in flight, so L = 1 loses nothing "
        "there; the bound it must meet instead",
        f"L = 1's combined at most {PEAK_TOLERANCE:.0%} above the profiled L = {profiled}'s (paper: 25% below)",
        f"L = 1: {small['total_MBps']:.1f} MB/s, L = {profiled}: {at['total_MBps']:.1f} MB/s "
        f"({small['total_MBps'] / at['total_MBps'] - 1:+.1%})",
        small["total_MBps"] <= (1 + PEAK_TOLERANCE) * at["total_MBps"],
        reproduced=False,
    ))
    claims.append(_overload_claim(results, profiled))
    md = results["mdtest"]
    both = [i for i, b in enumerate(md["backlogged"]) if b]
    ops1 = sum(md["app1_iops"][i] for i in both)
    ops2 = sum(md["app2_iops"][i] for i in both)
    md_ratio = ops1 / ops2 if ops2 else float("inf")
    # Jain's index over every bin where both issued metadata operations: the
    # paper's average excludes only the periods when one issued none.
    active = [i for i, (a1, a2) in enumerate(zip(md["app1_iops"], md["app2_iops"])) if a1 > 0 and a2 > 0]
    jains = [md["jain"][i] for i in active]
    mean_jain = sum(jains) / len(jains) if jains else 0.0
    claims.append(Claim(
        "v6-metadata-shares",
        "Two md-test instances weighted 2:1 on metadata servers co-located with data get metadata throughput within "
        "5% of 2:1 while both are backlogged, and Jain's fairness index above 0.95 on average while both are active",
        f"ratio within {MD_RATIO_TOLERANCE:.0%} of {MD_WEIGHTS:.0f} over the bins where both had requests waiting "
        f"{BACKLOGGED:.0%} of the time (at least {MIN_BACKLOGGED_BINS} such bins); mean Jain >= {MD_JAIN} over every "
        "bin where both issued metadata operations",
        f"server {md['server']}: {len(both)} backlogged bins of {md['bin_s'] * 1e3:.0f} ms, ratio {md_ratio:.3f}; "
        f"{len(active)} bins with both active, Jain mean {mean_jain:.4f} (min {min(jains, default=0):.4f})",
        len(both) >= MIN_BACKLOGGED_BINS
        and abs(md_ratio / MD_WEIGHTS - 1) <= MD_RATIO_TOLERANCE
        and mean_jain >= MD_JAIN,
    ))
    claims.sort(key=lambda c: c.id)
    u = results["uneven"]
    gaps = [abs(u[t]["ratio"] - 1) for t in thresholds]
    claims.append(Claim(
        "v7-total-service",
        "With applications hitting servers unevenly, service-sync brings total service within 5% of the weight ratio, "
        "where per-server SFQ(D)+ does not; the unfairness shrinks as the threshold shrinks",
        f"per-server ratio off by > {SHARE_TOLERANCE:.0%}; service-sync within {SHARE_TOLERANCE:.0%} at every threshold, "
        "not worse as the threshold shrinks",
        f"per-server SFQ(D)+ wide/narrow {u['sfq-d-plus']['ratio']:.3f}; "
        + ", ".join(f"threshold {t}: {u[t]['ratio']:.3f} ({u[t]['reports']} reports)" for t in thresholds),
        abs(u["sfq-d-plus"]["ratio"] - 1) > SHARE_TOLERANCE
        and all(g <= SHARE_TOLERANCE for g in gaps)
        and all(b <= a + 1e-3 for a, b in zip(gaps, gaps[1:])),
    ))
    return claims


def write_outputs(out: Path, results: dict, claims: list[Claim], quick: bool) -> None:
    plt = pyplot()
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "claims.json", [c.as_json() for c in claims])
    write_json(out / "results.json", {k: {str(kk): vv for kk, vv in v.items()} if isinstance(v, dict) else v
                                      for k, v in results.items()})
    r = results["profile"]

    fig, axes = plt.subplots(1, len(CASES), figsize=(5 * len(CASES), 4))
    for ax, (case, title) in zip(axes, CASES.items()):
        names = list(results[case])  # standalone, the policies, and WRF's SFQ(D) at 16:1
        vals = [results[case][n]["relative_runtime"] for n in names]
        # A policy's colour in every figure; a variant (SFQ(D) at 16:1) hatched.
        bars = ax.bar(names, vals, color=[policy_colour(n.split()[0], i) for i, n in enumerate(names)])
        for bar, n in zip(bars, names):
            if " " in n:
                bar.set_hatch("//")
        for i, v in enumerate(vals):
            ax.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
        ax.set_title(title)
        ax.set_ylabel("runtime relative to standalone")
        ax.tick_params(axis="x", labelsize=8, rotation=20)
    fig.tight_layout()
    save(fig, out / "runtime")
    plt.close(fig)

    md = results["mdtest"]
    t = [i * md["bin_s"] for i in range(len(md["app1_iops"]))]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(t, md["app1_iops"], label="app1 (weight 2)")
    ax.plot(t, md["app2_iops"], label="app2 (weight 1)")
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"metadata ops/s on server {md['server']}")
    right = ax.twinx()
    right.plot(t, [j if j is not None else float("nan") for j in md["jain"]], color="#888", linewidth=0.8,
               label="Jain's index")
    right.set_ylim(0, 1.05)
    right.set_ylabel("Jain's fairness index")
    # One legend for both axes (the Jain line is on the right one), outside the plot.
    lines, labels = ax.get_legend_handles_labels()
    right_lines, right_labels = right.get_legend_handles_labels()
    ax.legend(lines + right_lines, labels + right_labels, loc="upper left", bbox_to_anchor=(1.08, 1.0), fontsize=8)
    ax.set_title("md-test pair, weights 2:1")
    fig.tight_layout()
    save(fig, out / "mdtest")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    sweep = results["l_sweep"]
    ax.plot(list(sweep), [sweep[L]["total_MBps"] for L in sweep], marker="o", label="combined")
    ax.plot(list(sweep), [sweep[L]["ior_MBps"] for L in sweep], marker="s", label="IOR")
    ax.set_xlabel("slot cost of large I/Os (L)")
    ax.set_ylabel("throughput while WRF runs (MB/s)")
    ax.legend()
    ax.set_title("SFQ(D)+ slot-cost sweep")
    save(fig, out / "l_sweep")
    plt.close(fig)

    lines = report_head("vPFS+ (SFQ(D)+ and total-service sharing)", "vpfs", quick,
                        "Times are simulated; scenarios in `experiments/vpfs/`.", claims)
    for case, title in CASES.items():
        rows = [[n, f"{r['runtime_s']:.2f}", f"{r['relative_runtime']:.2f}", f"{r['latency_ms']:.2f}",
                 f"{r['ior_MBps']:.1f}", f"{r['total_MBps']:.1f}"] for n, r in results[case].items()]
        lines += [f"## {title}", "", markdown_table(
            ["run", "runtime (s)", "vs standalone", "mean call time (ms)", "IOR MB/s meanwhile", "total MB/s"],
            rows), ""]
    lines += ["![runtime](runtime.png)", "", "## Slot-cost sweep (WRF with IOR)", "",
              f"`concerto profile` on the scenarios' device recommends D = {r['depth']}, small I/Os below "
              f"{r['small_threshold'] // 1024} KiB, and L = {r['large_slots']} for {r['large_size'] // 1024} KiB "
              "I/Os; the contention runs above use the paper's D = 14, L = 5.", "",
              markdown_table(["L", "WRF runtime (s)", "WRF MB/s", "IOR MB/s", "total MB/s"],
                             [[L, f"{r['runtime_s']:.2f}", f"{r['app_MBps']:.1f}", f"{r['ior_MBps']:.1f}",
                               f"{r['total_MBps']:.1f}"] for L, r in results["l_sweep"].items()]),
              "", "![L sweep](l_sweep.png)", "", "## md-test pair (weights 2:1)", "",
              f"Metadata operations on metadata server {md['server']}: app1 {md['app1_ops']}, app2 {md['app2_ops']}; "
              f"{sum(md['backlogged'])} bins of {md['bin_s'] * 1e3:.0f} ms had both backlogged.", "",
              "![md-test](mdtest.png)", "", "## Uneven placement", "",
              markdown_table(["policy / threshold", "narrow MB", "wide MB", "wide / narrow", "reports"],
                             [[k, f"{r['narrow_MB']:.1f}", f"{r['wide_MB']:.1f}", f"{r['ratio']:.3f}", r["reports"]]
                              for k, r in results["uneven"].items()]), ""]
    (out / "report.md").write_text("\n".join(lines))
