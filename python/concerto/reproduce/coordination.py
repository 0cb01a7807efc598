"""``concerto reproduce coordination``: the server-side I/O coordination paper.

Runs the scenarios in ``experiments/coordination/`` under FIFO (the paper's
"original" PVFS2 order) and coordinated scheduling, checks the paper's
claims with stated tolerances, and writes ``report.md``, plots,
``results.json`` and ``claims.json``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from concerto import _native
from concerto.report import line_plot, markdown_table, write_json
from concerto.reproduce import Claim, experiments_dir, judged, report_head, run_paper_sweep, within_factor
from concerto.sweep import Sweep, aggregate, load_sweep

# Figure 6's reported reductions of average completion time, per device.
PAPER_FIG6 = {"hdd": (0.08, 0.42), "ssd": (0.11, 0.43)}
# c1: how far (points) a configuration may fall outside the paper's range;
# the paper gives only the ranges in its text (its per-point figures are
# plots), so each configuration is held to its device's range.
RANGE_TOLERANCE = 0.05
# c2a: the reduction must rise with the application count up to a plateau:
# no count below the best at fewer applications by more than this (points),
# and the most applications at least GROWTH above the fewest.
PLATEAU_TOLERANCE = 0.03
GROWTH = 0.10
# c2b: the paper's growth with the server count, ~10% at 2 servers to 46%
# at 64 (HDD), within GROWTH_POINTS of it at both ends.
PAPER_SERVERS = {"fewest": 0.10, "most": 0.46}
GROWTH_POINTS = 0.10
FORMULA_TOLERANCE = 0.02
# c4: a pair tells independent orders from one shared order only when
# formula (1) stands at least this far above formula (2).
FORMULA_DISCRIMINATES = 0.10
# c3: Figures 3 and 5's MAX/MIN of per-server finish times, FIFO -> coordinated.
PAPER_SPREAD = {"hdd": (4.4, 1.3), "ssd": (3.1, 1.2)}
# c3: coordinated at most this (the paper's 1.2-1.3 plus service-time noise;
# 1 is the least any order gives), FIFO at least this many times coordinated.
COORDINATED_SPREAD_MAX = 1.6
SPREAD_DROP = 2.0
# c3-fifo: the FIFO spread within this factor of the paper's, either way; the
# model's bound otherwise: from the paper's value up to this much above the
# spread of servers that order arrivals independently (service times vary).
FIFO_SPREAD_FACTOR = 1.5
INDEPENDENT_SPREAD_SLACK = 0.10
# c3-completion: Figures 3 and 5's reduction of the average completion time,
# within this factor of the paper's, either way.
PAPER_FIG3_5_REDUCTION = {"hdd": 0.298, "ssd": 0.195}
REDUCTION_FACTOR = 1.5
BANDWIDTH_TOLERANCE = 0.01  # "comparable or higher": at most 1% below FIFO


def _pairs(rows: list[dict]) -> list[tuple[dict, dict, dict]]:
    """(params, fifo row, coordinated row) per point."""
    by_point: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        key = repr(sorted((k, repr(v)) for k, v in r["params"].items() if not k.startswith("policy.")))
        if r["policy"] == "coordinated" and "policy.window" in r["params"]:
            key += r["params"]["policy.window"]
        by_point[key][r["policy"]] = r
    out = []
    fifo_by_base: dict[str, dict] = {}
    for key, d in by_point.items():
        if "fifo" in d:
            fifo_by_base[key] = d["fifo"]
    for key, d in by_point.items():
        if "coordinated" in d:
            base = key[: -len(d["coordinated"]["params"]["policy.window"])] if "policy.window" in d["coordinated"]["params"] else key
            fifo = fifo_by_base.get(base)
            if fifo:
                out.append((d["coordinated"]["params"], fifo, d["coordinated"]))
    return out


def _label(params: dict) -> str:
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in params.items() if not k.startswith("cluster.device.")
                     or k == "cluster.device.kind")


def reduction(fifo: dict, coord: dict) -> float:
    return 1.0 - coord["avg_completion_s"] / fifo["avg_completion_s"]


def service_time_s(sweep) -> float:
    """The fixed service time t of the analytical sweep's device, from its scenario."""
    device = json.loads(sweep.base).get("cluster", {}).get("device", {})
    if device.get("kind") != "fixed" or "service_time" not in device:
        raise _native.ConfigError(f"{sweep.label}: the formula sweep needs a fixed device with a service_time "
                                  f"(found {device})")
    t = device["service_time"]
    return _native.parse_duration(t) if isinstance(t, str) else t / 1e9


def _formula_rows(rows: list[dict], t: float) -> list[dict]:
    """The analytical experiment's means beside formulas (1) and (2) for service time ``t`` (seconds)."""
    for r in rows:
        m, n = r["params"]["apps[0].instances"], r["params"]["cluster.servers"]
        r["formula_s"] = (
            _native.fifo_expected_completion(m, n, t) if r["policy"] == "fifo" else _native.coordinated_expected_completion(m, t)
        )
        r["m"], r["n"] = m, n
    return rows


def _applications(sweep) -> int:
    """How many applications the sweep's scenario runs at once."""
    return sum(a.get("instances", 1) for a in json.loads(sweep.base)["apps"])


def _spread_rows(rows: list[dict], sweep) -> list[dict]:
    """Figures 3 and 5's rows with their shape (m applications on n servers,
    from the scenario) and the spread independent server orders give."""
    m, n = _applications(sweep), json.loads(sweep.base)["cluster"]["servers"]
    for r in rows:
        r["m"], r["n"] = m, n
        r["independent_spread"] = _native.independent_order_spread(m, n)
    return rows


def run(out: Path, quick: bool, seed: int | None = None, status: Callable[[str], None] = print,
        workers: int = 1, dask: str | None = None) -> list[Claim]:
    folder = experiments_dir() / "coordination"
    if not folder.is_dir():
        raise _native.ConfigError(f"{folder}: experiment folder not found (set CONCERTO_EXPERIMENTS)")
    sweeps = {s.id: s for s in (load_sweep(p, quick) for p in sorted(folder.glob("*.toml")))}
    for needed in ["fig3_5", "fig6", "fig7", "fig8", "formula"]:
        if needed not in sweeps:
            raise _native.ConfigError(f"{folder}: no sweep with id {needed!r}")
    results: dict[str, list[dict]] = {}
    for sid, sweep in sweeps.items():
        results[sid] = aggregate(sweep, run_paper_sweep(sweep, out / "sweeps" / sid, seed, status, workers, dask))
    results["formula"] = _formula_rows(results["formula"], service_time_s(sweeps["formula"]))
    results["fig3_5"] = _spread_rows(results["fig3_5"], sweeps["fig3_5"])
    for r in results["fig7"]:
        r["m"] = _applications(sweeps["fig7"])
    claims = evaluate(results)
    write_outputs(out, sweeps, results, claims, quick)
    return claims


def evaluate(results: dict[str, list[dict]]) -> list[Claim]:
    claims: list[Claim] = []

    # 1. Lower average completion time in every Figure 6 and 7
    # configuration; Figure 6's inside the paper's range for its device.
    fig6 = [(p, reduction(f, c)) for p, f, c in _pairs(results["fig6"])]
    fig7 = [(p, reduction(f, c)) for p, f, c in _pairs(results["fig7"])]
    def inside(p: dict, r: float) -> bool:
        lo, hi = PAPER_FIG6[p["cluster.device.kind"]]
        return lo - RANGE_TOLERANCE <= r <= hi + RANGE_TOLERANCE

    outside = [(p, r) for p, r in fig6 if not inside(p, r)]
    notes = []
    for dev, (lo, hi) in PAPER_FIG6.items():
        reds = [r for p, r in fig6 if p["cluster.device.kind"] == dev]
        notes.append(f"Figure 6 {dev}: {len(reds)} configurations, {min(reds):.1%} to {max(reds):.1%} "
                     f"(paper {lo:.0%}-{hi:.0%})")
    notes.append(f"Figure 7: {len(fig7)} configurations, {min(r for _, r in fig7):.1%} to "
                 f"{max(r for _, r in fig7):.1%}")
    notes += [f"outside: {_label(p)} {r:.1%}" for p, r in outside]
    claims.append(Claim(
        "c1-lower-completion",
        "Coordination lowers the average completion time against FIFO in every Figure 6 and 7 configuration; in "
        "Figure 6 by the paper's amounts (8-42% on HDD, 11-43% on SSD)",
        f"every Figure 6 configuration inside its device's range widened by {RANGE_TOLERANCE:.0%} (points); every "
        "Figure 7 configuration > 0 (its amounts are claim c2b's)",
        "; ".join(notes),
        not outside and all(r > 0 for _, r in fig7),
    ))

    # 2a. The reduction grows with the number of concurrent applications.
    groups: dict[tuple, list[tuple[int, float]]] = defaultdict(list)
    for p, f, c in _pairs(results["fig6"]):
        groups[(p["cluster.device.kind"], p["apps[0].processes"])].append((p["apps[0].instances"], reduction(f, c)))
    apps_ok, apps_notes = True, []
    for (dev, procs), pts in sorted(groups.items()):
        pts.sort()
        # The largest fall below the best reduction at fewer applications.
        fall = max((max(r for _, r in pts[:i]) - pts[i][1] for i in range(1, len(pts))), default=0.0)
        apps_ok &= fall <= PLATEAU_TOLERANCE and pts[-1][1] - pts[0][1] >= GROWTH
        apps_notes.append(f"{dev} {procs} processes: " + ", ".join(f"{r:.1%}" for _, r in pts)
                          + f" at {pts[0][0]}-{pts[-1][0]} applications (largest fall {max(fall, 0):.1%})")
    claims.append(Claim(
        "c2a-grows-with-applications",
        "The reduction grows with the number of concurrent applications (Figure 6)",
        f"for every device and process count, over every application count in order: never more than "
        f"{PLATEAU_TOLERANCE:.0%} (points) below the best reduction at fewer applications (a plateau, not a fall), "
        f"and at the most applications at least {GROWTH:.0%} above the fewest",
        "; ".join(apps_notes),
        apps_ok,
    ))
    # 2b. The paper's reduction grows with the server count; the model's
    # barely does (docs/reproductions.md says why, with measurements). The
    # bound is formula (3)'s: no more than serving the m applications one
    # after another gives, (m - 1) / (2m), and no less than independent
    # orders give at the fewest servers.
    by_group: dict[tuple, list[tuple[Any, float]]] = defaultdict(list)
    for p, f, c in _pairs(results["fig7"]):
        by_group[(p["cluster.device.kind"], p["apps[0].processes"])].append((p["cluster.servers"], reduction(f, c)))
    m = results["fig7"][0]["m"]
    fewest = min(n for pts in by_group.values() for n, _ in pts)
    floor = _native.expected_reduction_rate(m, fewest)
    ceiling = (m - 1) / (2 * m)
    grows = bound = True
    flat_notes = []
    for (kind, procs), pts in sorted(by_group.items(), key=str):
        pts.sort()
        if kind == "hdd":
            grows &= (abs(pts[0][1] - PAPER_SERVERS["fewest"]) <= GROWTH_POINTS
                      and abs(pts[-1][1] - PAPER_SERVERS["most"]) <= GROWTH_POINTS)
        bound &= all(floor <= r <= ceiling for _, r in pts)
        flat_notes.append(f"{kind} {procs} processes: " + ", ".join(f"{r:.1%}" for _, r in pts)
                          + f" at {pts[0][0]}-{pts[-1][0]} servers")
    claims.append(Claim(
        "c2b-servers",
        "The reduction grows with the number of servers (Figure 7, ~10% at 2 to 46% at 64 on HDD). Within "
        f"{GROWTH_POINTS:.0%} (points) of both ends it is reproduced. Otherwise not reproduced: the model's servers "
        "see FIFO orders that stay correlated across servers where the paper's diverged (docs/reproductions.md "
        "measures why), so its gain is mostly serving one application at a time, which does not grow with servers; "
        f"the bound is formula (3)'s for m = {m} applications: at most its limit (m - 1) / (2m), what serving "
        f"applications one after another gives, and at least its value at {fewest} servers",
        f"HDD: within {GROWTH_POINTS:.0%} of 10% at the fewest servers and of 46% at the most (reproduced), else every "
        f"reduction between {floor:.1%} and {ceiling:.1%} (the model's bound)",
        "; ".join(flat_notes),
        **judged(grows, bound),
    ))

    # 3. Finish-time spread across servers drops sharply; FIFO's by the paper's amount.
    spread_notes, fifo_notes, spread_ok, fifo_in, fifo_bound = [], [], True, True, True
    for p, f, c in _pairs(results["fig3_5"]):
        dev = p["cluster.device.kind"]
        fs, cs = f["finish_spread"], c["finish_spread"]
        paper_f, paper_c = PAPER_SPREAD[dev]
        spread_notes.append(f"{dev}: {fs:.2f} -> {cs:.2f} (paper {paper_f} -> {paper_c})")
        spread_ok &= 1.0 <= cs <= COORDINATED_SPREAD_MAX and fs >= SPREAD_DROP * cs
        independent = f["independent_spread"]
        fifo_in &= within_factor(fs, paper_f, FIFO_SPREAD_FACTOR)
        fifo_bound &= paper_f <= fs <= (1 + INDEPENDENT_SPREAD_SLACK) * independent
        fifo_notes.append(f"{dev}: {fs:.2f} ({fs / paper_f:.2f}x the paper's {paper_f}; independent orders "
                          f"{independent:.2f})")
    m, n = results["fig3_5"][0]["m"], results["fig3_5"][0]["n"]
    claims.append(Claim(
        "c3-finish-spread",
        "The max/min ratio of an application's per-server finish times drops sharply under coordination (Figures 3 "
        "and 5: 4.4 -> 1.3 on HDD, 3.1 -> 1.2 on SSD)",
        f"coordinated ratio between 1 (the least any order gives) and {COORDINATED_SPREAD_MAX} (the paper's 1.2-1.3 "
        f"with service-time noise), and FIFO's at least {SPREAD_DROP:g}x it, on HDD and SSD",
        "; ".join(spread_notes),
        spread_ok,
    ))
    claims.append(Claim(
        "c3-fifo-spread",
        f"Without coordination, an application's last per-server finish is 4.4 times its first on HDD and 3.1 times "
        f"on SSD (Figure 3; {m} applications, {n} servers). Within a factor {FIFO_SPREAD_FACTOR:g} either way it is "
        "reproduced. Above: not reproduced — the model's servers order simultaneous arrivals independently, so an "
        "application's positions are independent draws (expected MAX/MIN computed exactly, "
        "`concerto_core::analysis::independent_order_spread`), where the paper's servers saw the clients' requests in "
        "correlated orders; the bound is the physics of that: from the paper's value up to "
        f"{INDEPENDENT_SPREAD_SLACK:.0%} above the independent orders' spread",
        f"{1 / FIFO_SPREAD_FACTOR:.2f}x to {FIFO_SPREAD_FACTOR:.2f}x the paper's (reproduced), else between the paper's "
        f"and {1 + INDEPENDENT_SPREAD_SLACK:.2f}x the independent orders' (the model's bound)",
        "; ".join(fifo_notes),
        **judged(fifo_in, fifo_bound),
    ))

    red_notes, red_ok = [], True
    for p, f, c in _pairs(results["fig3_5"]):
        dev = p["cluster.device.kind"]
        red, paper_red = reduction(f, c), PAPER_FIG3_5_REDUCTION[dev]
        red_ok &= within_factor(red, paper_red, REDUCTION_FACTOR)
        red_notes.append(f"{dev}: {red:.1%} (paper {paper_red:.1%}, {red / paper_red:.2f}x)")
    ceiling = _native.expected_reduction_rate(m, n)
    claims.append(Claim(
        "c3-completion-reduction",
        "In the same experiment, coordination lowers the applications' average completion time by 29.8% on HDD and "
        f"19.5% on SSD (Section 5.2). Each within a factor {REDUCTION_FACTOR:g} either way is reproduced. Otherwise "
        "not reproduced (the model's SSD reduction sits at 0.67-0.73 of the paper's over the documented seeds; cause "
        f"not established), with formula (3) as the bound: above 0 and at most its rate for {m} applications on {n} "
        "servers",
        f"each {1 / REDUCTION_FACTOR:.2f}x to {REDUCTION_FACTOR:.2f}x the paper's (reproduced), else between 0 and "
        f"{ceiling:.1%} (the model's bound)",
        "; ".join(red_notes),
        **judged(red_ok, all(0 < reduction(f, c) <= ceiling for _, f, c in _pairs(results["fig3_5"]))),
    ))

    # 4. Formulas (1) and (2).
    f_notes, f_ok = [], True
    for r in results["formula"]:
        err = abs(r["avg_completion_s"] - r["formula_s"]) / r["formula_s"]
        f_ok &= err <= FORMULA_TOLERANCE
        # A pair where one shared order would also pass proves nothing.
        gap = _native.fifo_expected_completion(r["m"], r["n"], 1.0) / _native.coordinated_expected_completion(r["m"], 1.0)
        f_ok &= gap - 1 >= FORMULA_DISCRIMINATES
        f_notes.append(f"{r['policy']} m={r['m']} n={r['n']}: {r['avg_completion_s'] * 1e3:.2f} ms vs {r['formula_s'] * 1e3:.2f} ms ({err:.2%})")
    reps = results["formula"][0]["reps"]
    claims.append(Claim(
        "c4-analytical-model",
        "With a fixed service time and all pieces arriving at once in independent random orders, the simulated average "
        "completion time matches formula (1) for FIFO and formula (2) for coordination",
        f"within {FORMULA_TOLERANCE:.0%} for every (m, n), {reps} repetitions each; every pair one where formula (1) "
        f"stands at least {FORMULA_DISCRIMINATES:.0%} above formula (2), so a shared order would fail it",
        "; ".join(f_notes),
        f_ok,
    ))

    # 5. Bandwidth comparable at heavy load.
    bw_notes, bw_ok = [], True
    for eid in ("fig6", "fig8"):
        pairs = _pairs(results[eid])
        heaviest_procs = max(p.get("apps[0].processes", 0) for p, _, _ in pairs)
        heavy = [(p, f, c) for p, f, c in pairs if p.get("apps[0].processes") == heaviest_procs]
        if eid == "fig6":
            most = max(p["apps[0].instances"] for p, _, _ in heavy)
            heavy = [(p, f, c) for p, f, c in heavy if p["apps[0].instances"] == most]
        for p, f, c in heavy:
            ratio = c["bandwidth_MBps"] / f["bandwidth_MBps"]
            bw_ok &= ratio >= 1 - BANDWIDTH_TOLERANCE
            w = p.get("policy.window", "")
            bw_notes.append(f"{eid} {p['cluster.device.kind']} {w}: {c['bandwidth_MBps']:.1f} vs {f['bandwidth_MBps']:.1f} MB/s ({ratio - 1:+.1%})")
    claims.append(Claim(
        "c5-bandwidth-comparable",
        "At heavy load (most processes and applications) aggregate bandwidth under coordination is comparable to or "
        "higher than FIFO's",
        f"coordinated >= {1 - BANDWIDTH_TOLERANCE:.0%} of FIFO at 32 processes per application",
        "; ".join(bw_notes),
        bw_ok,
    ))

    # 6. Every window beats FIFO (Figure 8).
    w_notes, w_ok = [], True
    for p, f, c in _pairs(results["fig8"]):
        red = reduction(f, c)
        w_ok &= red > 0
        w_notes.append(f"{p['cluster.device.kind']} P={p['apps[0].processes']} {p['policy.window']}: {red:+.1%}")
    claims.append(Claim(
        "c6-every-window",
        "For every time window (250-2000 ms), coordination gives a lower average completion time than FIFO on the "
        "mixed workload (Figure 8)",
        "reduction > 0 for every window, device and process count",
        "; ".join(w_notes),
        w_ok,
    ))
    claims.append(best_window_claim(results["fig8"]))
    return claims


# The paper's best window per device (Figure 8: "1000ms results in the
# lowest completion time in almost all cases in the HDD tests, and the
# 250ms window size ... in SSD tests").
PAPER_BEST_WINDOW = {"hdd": "1000ms", "ssd": "250ms"}
# The model's bound: nothing in it makes a long window cost (no clock skew,
# no starvation beyond the batching a window is for), so coordination's
# completion time does not rise with the window by more than noise.
WINDOW_NOISE = 0.02


def best_window_claim(rows: list[dict]) -> Claim:
    """Claim c7: the window with the lowest coordinated completion time, per
    device and process count, is the paper's for the device in most process
    counts; else (not reproduced) the model's bound: completion never more
    than WINDOW_NOISE above its value at a shorter window."""
    by_case: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in rows:
        if r["policy"] == "coordinated":
            p = r["params"]
            by_case[(p["cluster.device.kind"], p["apps[0].processes"])][p["policy.window"]] = r["avg_completion_s"]
    best_counts: dict[str, int] = defaultdict(int)
    cases_per_device: dict[str, int] = defaultdict(int)
    notes, rises = [], []
    for (device, procs), by_window in sorted(by_case.items()):
        windows = sorted(by_window, key=lambda w: _native.parse_duration(w))
        best = min(windows, key=lambda w: by_window[w])
        cases_per_device[device] += 1
        best_counts[device] += best == PAPER_BEST_WINDOW[device]
        notes.append(f"{device} P={procs}: best {best} ("
                     + ", ".join(f"{w} {by_window[w] * 1e3:.1f} ms" for w in windows) + ")")
        rises += [by_window[later] / by_window[earlier] - 1
                  for i, earlier in enumerate(windows) for later in windows[i + 1:]]
    reproduced = all(2 * best_counts[d] > n for d, n in cases_per_device.items())
    worst_rise = max(rises, default=0.0)
    return Claim(
        "c7-best-window",
        "The best window: 1000 ms gives the lowest average completion time in almost all HDD cases, 250 ms in the "
        "SSD cases (Figure 8). Not reproduced when the model's best differs: nothing in the model makes a long "
        "window cost (no clock skew between clients, no starvation beyond the batching a window is for), so a "
        "longer window serves at least as well there; the bound it must meet instead",
        f"the paper's window best in most process counts on each device; else coordinated completion never more "
        f"than {WINDOW_NOISE:.0%} above its value at a shorter window",
        "; ".join(notes) + f"; largest rise with a longer window {worst_rise:+.1%}",
        **judged(reproduced, worst_rise <= WINDOW_NOISE),
    )


def finish_plot(sweep: Sweep, path: Path) -> None:
    """Figures 3 and 5: when each application's read finished on each
    server, under FIFO and coordinated, from one run (the sweep's first
    seed) per device and policy."""
    from concerto.report import pyplot, save
    from concerto.sim import simulate
    from concerto.sweep import policy_override

    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharey="row")
    for row, device in enumerate(("hdd", "ssd")):
        for col, policy in enumerate(("fifo", "coordinated")):
            source = sweep.source().with_overrides(f'cluster.device.kind="{device}"', policy_override(policy))
            run = simulate(source, seed=sweep.seed)["runs"][0]
            ax = axes[row][col]
            finish: dict[int, list[tuple[int, float]]] = defaultdict(list)
            for server in run["servers"]:
                for a in server["apps"]:
                    finish[a["app"]].append((server["index"], a["last_finish_s"] * 1e3))
            for app, pts in sorted(finish.items()):
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, linewidth=1,
                        label=f"app {app}")
            ax.set_title(f"{device}, {policy}")
            ax.set_xlabel("server")
            if col == 0:
                ax.set_ylabel("finish time of the application's read (ms)")
            ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=7, ncol=2)
    fig.suptitle("Per-server finish times of each application (Figures 3 and 5), seed "
                 f"{sweep.seed}")
    fig.tight_layout()
    save(fig, path)


def write_outputs(out: Path, exps: dict[str, Sweep], results: dict[str, list[dict]], claims: list[Claim], quick: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "claims.json", [c.as_json() for c in claims])
    write_json(out / "results.json", results)

    def with_reduction(eid: str) -> list[dict]:
        rows = []
        for p, f, c in _pairs(results[eid]):
            rows.append({"params": p, "reduction": reduction(f, c)})
        return rows

    for eid, x, facet, xlabel in [("fig6", "apps[0].instances", "cluster.device.kind", "concurrent applications"),
                                  ("fig7", "cluster.servers", "cluster.device.kind", "servers")]:
        line_plot(results[eid], x=x, y="avg_completion_s", series=["apps[0].processes", "policy"], facet=facet,
                  path=out / f"{eid}_completion", title=exps[eid].title.split(" (")[0], xlabel=xlabel,
                  ylabel="average completion time (ms)", scale=1e3, logx=eid == "fig7")
        line_plot(with_reduction(eid), x=x, y="reduction", series=["apps[0].processes"], facet=facet,
                  path=out / f"{eid}_reduction", title="reduction vs FIFO", xlabel=xlabel, ylabel="reduction (%)",
                  scale=100, logx=eid == "fig7")
    # FIFO has no window: its (one) run per point is drawn at every window, a flat baseline.
    fig8 = [dict(r, params={**r["params"], "window_ms": int(r["params"]["policy.window"][:-2])})
            for r in results["fig8"]]
    line_plot(fig8, x="window_ms", y="avg_completion_s", series=["apps[0].processes", "policy"],
              facet="cluster.device.kind", path=out / "fig8_completion", title="by window, against FIFO",
              xlabel="window (ms)", ylabel="average completion time (ms)", scale=1e3)
    line_plot(fig8, x="window_ms", y="bandwidth_MBps", series=["apps[0].processes", "policy"],
              facet="cluster.device.kind", path=out / "fig8_bandwidth", title="by window, against FIFO",
              xlabel="window (ms)", ylabel="bandwidth (MB/s)")

    finish_plot(exps["fig3_5"], out / "fig3_5_finish")

    lines = report_head("server-side I/O coordination", "coordination", quick,
                        "FIFO stands for the paper's \"original\" PVFS2 order; times are simulated.", claims)
    for eid in ("fig3_5", "fig6", "fig7", "fig8"):
        lines += [f"## {exps[eid].title}", ""]
        table = []
        for p, f, c in _pairs(results[eid]):
            label = ", ".join(f"{k}={v}" for k, v in p.items() if not k.startswith("apps[") or k.startswith("apps[0]"))
            spread = f" / {f.get('finish_spread', 0):.2f} -> {c.get('finish_spread', 0):.2f}" if "finish_spread" in f else ""
            table.append([label, f"{f['avg_completion_s'] * 1e3:.2f}", f"{c['avg_completion_s'] * 1e3:.2f}",
                          f"{reduction(f, c):.1%}", f"{f['bandwidth_MBps']:.1f}", f"{c['bandwidth_MBps']:.1f}" + spread])
        lines += [markdown_table(["configuration", "FIFO avg (ms)", "coordinated avg (ms)", "reduction",
                                  "FIFO MB/s", "coordinated MB/s" + (" / spread" if eid == "fig3_5" else "")], table), ""]
        for plot in sorted(out.glob(f"{eid}_*.png")):
            lines += [f"![{plot.stem}]({plot.name})", ""]
    lines += ["## Analytical model (formulas 1 and 2)", "",
              markdown_table(["policy", "m", "n", "simulated (ms)", "formula (ms)"],
                             [[r["policy"], r["m"], r["n"], f"{r['avg_completion_s'] * 1e3:.3f}", f"{r['formula_s'] * 1e3:.3f}"]
                              for r in results["formula"]]), ""]
    (out / "report.md").write_text("\n".join(lines))
