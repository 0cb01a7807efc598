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
from concerto.reproduce import Claim, experiments_dir, report_head, run_paper_sweep
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
# c2b's bound on the model (which does not reproduce the growth with
# servers): at every server count the reduction within [-SERVERS_BELOW,
# +SERVERS_ABOVE] points of its 2-server value, and above the floor.
SERVERS_BELOW = 0.03
SERVERS_ABOVE = 0.10
SERVERS_FLOOR = 0.25
FORMULA_TOLERANCE = 0.02
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
    # barely does (docs/reproductions.md says why, with measurements). What
    # the model must still do: stay where it is, so that a regression shows.
    by_group: dict[tuple, list[tuple[Any, float]]] = defaultdict(list)
    for p, f, c in _pairs(results["fig7"]):
        by_group[(p["cluster.device.kind"], p["apps[0].processes"])].append((p["cluster.servers"], reduction(f, c)))
    flat_ok, flat_notes = True, []
    for (kind, procs), pts in sorted(by_group.items(), key=str):
        pts.sort()
        at_two = pts[0][1]
        moves = [r - at_two for _, r in pts]
        low = min(r for _, r in pts)
        flat_ok &= -SERVERS_BELOW <= min(moves) and max(moves) <= SERVERS_ABOVE and low >= SERVERS_FLOOR
        flat_notes.append(f"{kind} {procs} processes: " + ", ".join(f"{r:.1%}" for _, r in pts)
                          + f" at {pts[0][0]}-{pts[-1][0]} servers")
    claims.append(Claim(
        "c2b-servers-model-bound",
        "Not reproduced: the paper's reduction grows with the number of servers (Figure 7, ~10% at 2 to 46% at "
        "64 on HDD); the model's grows by a few points at most. The bound it must meet instead",
        f"for every device and process count, the reduction at every server count between {SERVERS_BELOW:.0%} "
        f"(points) below and {SERVERS_ABOVE:.0%} above its value at 2 servers, and at least {SERVERS_FLOOR:.0%}",
        "; ".join(flat_notes),
        flat_ok,
        reproduced=False,
    ))

    # 3. Finish-time spread across servers drops sharply.
    spread_notes, spread_ok = [], True
    paper = {"hdd": "4.4 -> 1.3", "ssd": "3.1 -> 1.2"}
    for p, f, c in _pairs(results["fig3_5"]):
        dev = p["cluster.device.kind"]
        fs, cs = f["finish_spread"], c["finish_spread"]
        spread_notes.append(f"{dev}: {fs:.2f} -> {cs:.2f} (paper {paper.get(dev, '?')})")
        spread_ok &= cs <= 1.6 and fs >= 2.0 * cs
    claims.append(Claim(
        "c3-finish-spread",
        "The max/min ratio of an application's per-server finish times drops sharply under coordination (Figures 3 and 5)",
        "coordinated ratio <= 1.6 and FIFO ratio >= 2x the coordinated one, on HDD and SSD",
        "; ".join(spread_notes),
        spread_ok,
    ))

    # 4. Formulas (1) and (2).
    f_notes, f_ok = [], True
    for r in results["formula"]:
        err = abs(r["avg_completion_s"] - r["formula_s"]) / r["formula_s"]
        f_ok &= err <= FORMULA_TOLERANCE
        f_notes.append(f"{r['policy']} m={r['m']} n={r['n']}: {r['avg_completion_s'] * 1e3:.2f} ms vs {r['formula_s'] * 1e3:.2f} ms ({err:.2%})")
    reps = results["formula"][0]["reps"]
    claims.append(Claim(
        "c4-analytical-model",
        "With a fixed service time and all pieces arriving at once in independent random orders, the simulated average "
        "completion time matches formula (1) for FIFO and formula (2) for coordination",
        f"within {FORMULA_TOLERANCE:.0%} for every (m, n), {reps} repetitions each",
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
    return claims


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
