"""Reports: terminal tables (rich), plots (matplotlib), Markdown and JSON files."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from rich.table import Table


def pyplot():
    """matplotlib's pyplot, drawing to files only (never needs a display).
    Imported on first use: it costs about a second of start-up that a
    command drawing nothing (``sim run``) must not pay."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def fmt_bw(bps: float) -> str:
    return f"{bps / 1e6:.1f} MB/s"


# Above this many applications, `runset_table` shows one row per workload
# (its instances summarised) instead of one per instance: printing costs
# milliseconds a row, more than simulating them.
TABLE_ROWS = 40


def runset_table(runset: dict, title: str, max_rows: int = TABLE_ROWS) -> Table:
    """Per-application figures of the first run, with the run set's aggregate in the caption."""
    run = runset["runs"][0]
    if len(run["apps"]) > max_rows:
        return _summary_table(runset, title)
    t = Table(title=title, title_justify="left", caption_justify="left")
    for col in ["app", "app id", "procs", "ops", "avg completion", "p95", "bandwidth", "finish spread"]:
        t.add_column(col, justify="right" if col != "app" else "left")
    for a in run["apps"]:
        spread = a.get("finish_spread")
        t.add_row(
            f"{a['name']}#{a['instance']}",
            str(a["app_id"]),
            str(a["processes"]),
            str(a["operations"]),
            fmt_time(a["completion_s"]["mean"]),
            fmt_time(a["completion_s"]["p95"]),
            fmt_bw(a["bandwidth_Bps"]),
            f"{spread:.2f}" if spread is not None else "-",
        )
    _set_caption(t, _caption(runset))
    return t


def benchmark_tables(runset: dict) -> list[Table]:
    """For applications run as IOR or mdtest (``block_size``, md-test), their first run's operations the way
    those benchmarks print them: IOR's bandwidth in MiB/s, mdtest's rates in operations per second."""
    tables = []
    for a in runset["runs"][0]["apps"]:
        if a.get("ior"):
            t = Table(title=f"{a['name']}#{a['instance']} as IOR reports it", title_justify="left")
            for col in ["access", "bw(MiB/s)", "total(MiB)", "time(s)"]:
                t.add_column(col, justify="right" if col != "access" else "left")
            for op in a["ior"]:
                t.add_row(op["access"], f"{op['bandwidth_MiBps']:.2f}", f"{op['bytes'] / (1 << 20):.2f}",
                          f"{op['seconds']:.4f}")
            tables.append(t)
        if a.get("mdtest"):
            t = Table(title=f"{a['name']}#{a['instance']} as mdtest reports it", title_justify="left")
            for col in ["operation", "items", "rate (ops/s)", "time(s)"]:
                t.add_column(col, justify="right" if col != "operation" else "left")
            for op, items, seconds in mdtest_rows(a["mdtest"]):
                t.add_row(op, str(items), f"{items / seconds if seconds > 0 else 0:.1f}", f"{seconds:.4f}")
            tables.append(t)
    return tables


def mdtest_rows(phases: list[dict]) -> list[tuple[str, int, float]]:
    """The md-test phases as mdtest's summary rows: (operation, items,
    seconds); a write right after the create is part of mdtest's "File
    creation" (their times added); a phase mdtest has no row for keeps its
    own name, in brackets."""
    rows: list[tuple[str, int, float]] = []
    for ph in phases:
        op = ph.get("operation") or f"({ph['phase']})"
        if ph["phase"] == "write" and rows and rows[-1][0] == op:
            rows[-1] = (op, rows[-1][1], rows[-1][2] + ph["seconds"])
        else:
            rows.append((op, ph["items"], ph["seconds"]))
    return rows


def _summary_table(runset: dict, title: str) -> Table:
    """One row per workload (the apps sharing a name): its instances' figures summarised."""
    run = runset["runs"][0]
    groups: dict[str, list[dict]] = defaultdict(list)
    for a in run["apps"]:
        groups[a["name"]].append(a)
    t = Table(title=f"{title}: {len(run['apps'])} applications, by workload", title_justify="left",
              caption_justify="left")
    for col in ["app", "instances", "ops", "avg completion (mean)", "p95 (worst)", "bandwidth (sum)",
                "finish spread (worst)"]:
        t.add_column(col, justify="right" if col != "app" else "left")
    for name, apps in groups.items():
        ops = sum(a["operations"] for a in apps)
        mean = sum(a["completion_s"]["mean"] * a["operations"] for a in apps) / ops if ops else 0.0
        spreads = [a["finish_spread"] for a in apps if a.get("finish_spread") is not None]
        t.add_row(name, str(len(apps)), str(ops), fmt_time(mean),
                  fmt_time(max(a["completion_s"]["p95"] for a in apps)),
                  fmt_bw(sum(a["bandwidth_Bps"] for a in apps)),
                  f"{max(spreads):.2f}" if spreads else "-")
    _set_caption(t, _caption(runset) + "; every application: --out DIR (results.json, apps.csv)")
    return t


def _set_caption(t: Table, caption: str) -> None:
    """A caption no narrower than its table: where the console has room, the table widens to keep the
    caption on one line rather than wrapping it mid-figure."""
    t.caption = caption
    t.min_width = len(caption)


def apps_csv(runset: dict, path: Path) -> None:
    """The first run's per-application figures, one row per application."""
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["app", "instance", "app_id", "processes", "operations", "avg_completion_s", "p95_completion_s",
                    "bandwidth_Bps", "finish_spread"])
        for a in runset["runs"][0]["apps"]:
            w.writerow([a["name"], a["instance"], a["app_id"], a["processes"], a["operations"],
                        a["completion_s"]["mean"], a["completion_s"]["p95"], a["bandwidth_Bps"],
                        "" if a.get("finish_spread") is None else a["finish_spread"]])


def _caption(runset: dict) -> str:
    """The run set's aggregate figures."""
    run = runset["runs"][0]
    agg = runset["aggregate"]
    n = len(runset["runs"])
    return (
        f"policy {run['policy']['kind']}, seed{'s' if n > 1 else ''} {runset['seeds'][0]}"
        + (f"..{runset['seeds'][-1]}" if n > 1 else "")
        + f": average completion {fmt_time(agg['avg_completion_s']['mean'])}"
        + (f" ± {fmt_time(agg['avg_completion_s']['sd'])}" if n > 1 else "")
        + f", aggregate bandwidth {fmt_bw(agg['aggregate_bandwidth_Bps']['mean'])}"
        + f", makespan {fmt_time(agg['makespan_s']['mean'])}"
    )


def compare_table(results: dict[str, dict], title: str) -> Table:
    """Policies side by side (one run set each)."""
    t = Table(title=title, title_justify="left")
    for col in ["policy", "avg completion", "vs first", "p95 completion", "bandwidth", "makespan", "finish spread"]:
        t.add_column(col, justify="left" if col == "policy" else "right")
    base = None
    for policy, rs in results.items():
        agg = rs["aggregate"]
        avg = agg["avg_completion_s"]["mean"]
        base = base or avg
        spread = agg.get("finish_spread", {}).get("mean")
        t.add_row(
            policy,
            fmt_time(avg),
            f"{(avg / base - 1) * 100:+.1f}%",
            fmt_time(agg["p95_completion_s"]["mean"]),
            fmt_bw(agg["aggregate_bandwidth_Bps"]["mean"]),
            fmt_time(agg["makespan_s"]["mean"]),
            f"{spread:.2f}" if spread is not None else "-",
        )
    return t


def compare_plot(results: dict[str, dict], path: Path, title: str) -> None:
    """Per-application average completion time under each policy."""
    policies = list(results)
    apps = [f"{a['name']}#{a['instance']}" for a in results[policies[0]]["runs"][0]["apps"]]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(apps) * len(policies)), 4))
    width = 0.8 / len(policies)
    for i, p in enumerate(policies):
        ys = [a["completion_s"]["mean"] * 1e3 for a in results[p]["runs"][0]["apps"]]
        ax.bar([x + i * width for x in range(len(apps))], ys, width, label=p)
    ax.set_xticks([x + width * (len(policies) - 1) / 2 for x in range(len(apps))], apps, rotation=45, ha="right")
    ax.set_ylabel("average completion time (ms)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    save(fig, path)


def save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path.with_suffix(".png"), dpi=110)
    fig.savefig(path.with_suffix(".svg"))
    pyplot().close(fig)


def _natural(value: Any) -> tuple:
    """Sort key: numbers by value (8 before 16), then text."""
    parts = str(value).split(" ")
    key = []
    for part in parts:
        try:
            key.append((0, float(part), ""))
        except ValueError:
            key.append((1, 0.0, part))
    return tuple(key)


# One colour per policy in every figure Concerto draws.
POLICY_COLOURS = {
    "standalone": "#7f7f7f",
    "fifo": "#d62728",
    "per-object": "#8c564b",
    "coordinated": "#1f77b4",
    "sfq": "#bcbd22",
    "sfq-d": "#ff7f0e",
    "sfq-d-plus": "#2ca02c",
    "capped": "#9467bd",
    "service-sync": "#17becf",
    "dmclock": "#e377c2",
    "crr-n": "#aec7e8",
    "orr": "#98df8a",
}
MARKERS = ["o", "s", "^", "D", "v", "P"]
LINESTYLES = ["-", "--", ":", "-."]


def policy_colour(policy: str, index: int) -> str:
    """The colour of ``policy`` in every figure; a name Concerto does not
    know (a set rule of the job level) takes matplotlib's ``index``-th."""
    return POLICY_COLOURS.get(policy, f"C{index % 10}")


def line_plot(
    rows: Iterable[dict[str, Any]],
    *,
    x: str,
    y: str,
    series: list[str],
    facet: str | None,
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    scale: float = 1.0,
    logx: bool = False,
) -> None:
    """y against params[x], one line per (series values), one panel per
    params[facet]. Where a row has ``<y>_sd`` (the repetitions' standard
    deviation) the point gets an error bar. When ``policy`` is a series key
    it picks the colour (the same policy has the same colour in every
    figure, see POLICY_COLOURS) and the other keys pick the marker and line
    style; otherwise each series keeps one colour in every panel. Legends
    are titled by the series keys, in numeric order, and placed where they
    cover the fewest points."""
    rows = list(rows)
    facets = sorted({r["params"].get(facet) if facet else None for r in rows}, key=_natural)
    value = lambda r, s: r["params"].get(s, r.get(s))  # noqa: E731
    label_of = lambda r: " ".join(str(value(r, s)) for s in series)  # noqa: E731
    labels = sorted({label_of(r) for r in rows}, key=_natural)
    plt = pyplot()
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    style_of = lambda r: " ".join(str(value(r, s)) for s in series if s != "policy")  # noqa: E731
    styles = sorted({style_of(r) for r in rows}, key=_natural)
    policies = sorted({str(value(r, "policy")) for r in rows}, key=_natural)
    look: dict[str, dict[str, Any]] = {}
    for i, label in enumerate(labels):
        if "policy" not in series:
            look[label] = {"color": cycle[i % len(cycle)], "marker": "o"}
            continue
        r = next(r for r in rows if label_of(r) == label)
        policy, k = str(value(r, "policy")), styles.index(style_of(r))
        look[label] = {"color": policy_colour(policy, policies.index(policy)), "marker": MARKERS[k % len(MARKERS)],
                       "linestyle": LINESTYLES[k % len(LINESTYLES)]}
    fig, axes = plt.subplots(1, len(facets), figsize=(5.5 * len(facets), 4), squeeze=False)
    for ax, fv in zip(axes[0], facets):
        lines: dict[str, list[tuple[Any, float, float]]] = defaultdict(list)
        for r in rows:
            if facet and r["params"].get(facet) != fv:
                continue
            sd = r.get(f"{y}_sd")
            lines[label_of(r)].append((r["params"][x], r[y] * scale, (sd or 0.0) * scale))
        for label in labels:
            pts = sorted(lines.get(label, []))
            if not pts:
                continue
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], markersize=4, capsize=3,
                        label=label, **look[label])
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title} ({fv})" if facet else title)
        ax.legend(fontsize=7, title=", ".join(s.split(".")[-1] for s in series), title_fontsize=7, loc="best",
                  framealpha=0.8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, path)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def fsbench_tables(result: dict) -> list[Table]:
    """``concerto bench fs``'s figures: every row on every file system, Concerto's ratios, the shared file."""
    from concerto.fsbench import ROWS

    med, ratios = result["medians"], result["ratios"]
    names = list(med)
    t = Table(title="median of the rounds; x NAME = Concerto / NAME", title_justify="left")
    t.add_column("row")
    for n in names:
        t.add_column(n, justify="right")
    for n in ratios:
        t.add_column(f"x {n}", justify="right")
    for key, label, unit in ROWS:
        t.add_row(f"{label} ({unit})", *[f"{med[n].get(key, float('nan')):,.0f}" for n in names],
                  *[f"{ratios[n].get(key, float('nan')):.2f}" for n in ratios])
    tables = [t]
    shared = result.get("shared_file")
    if shared:
        t = Table(title="one shared file, IOR -t 64k -b 64k -s 1024, HDD-class servers (MiB/s)", title_justify="left")
        for col in ("writes", "1 process", "4 processes", "4 / 1"):
            t.add_column(col, justify="right")
        for mode, row in shared.items():
            t.add_row(mode, f"{row['1']:.1f}", f"{row['4']:.1f}", f"{row['4'] / row['1']:.2f}")
        tables.append(t)
    return tables
