"""``concerto reproduce vpfs``: proportional sharing with SFQ(D)+ (vPFS+).

Runs the scenarios in ``experiments/vpfs/``: BTIO Class A and Class C
against IOR under native (FIFO), SFQ(D), SFQ(D)+ and the non-work-conserving
Capped scheduler, the slot-cost sweep, and total-service sharing across
servers with ``service-sync``. Writes ``report.md``, plots, ``results.json``
and ``claims.json``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Callable

from concerto.report import markdown_table, save, write_json
from concerto.reproduce import Claim, experiments_dir
from concerto.sim import ScenarioSource, simulate

POLICIES = ["fifo", "sfq-d", "sfq-d-plus", "capped"]
PAPER_BTIO_A = {"sfq-d-plus": 1.20, "sfq-d": 2.53, "fifo": 3.29}
L_SWEEP = [1, 2, 3, 5, 7, 10, 14]
PROFILED_L = 5
SHARE_TOLERANCE = 0.05  # claim 7: total service within 5% of the weight ratio
CLOSE = 0.05  # claim 3: "within a few percent"
PEAK_TOLERANCE = 0.05  # claim 5: "at its peak"


def _load(name: str) -> tuple[ScenarioSource, dict]:
    path = experiments_dir() / "vpfs" / name
    text = path.read_text()
    return ScenarioSource(text=text, label=str(path), table="scenario"), tomllib.loads(text)


def _sets(table: dict) -> list[str]:
    """A TOML table of key paths -> values as ``--set`` assignments."""
    out = []
    for k, v in table.items():
        value = f'"{v}"' if isinstance(v, str) else ("true" if v is True else "false" if v is False else str(v))
        out.append(f"{k}={value}")
    return out


def _policy(kind: str, extra: dict | None = None) -> str:
    fields = [f'kind = "{kind}"'] + [f'{k} = {v!r}'.replace("'", '"') for k, v in (extra or {}).items()]
    return "policy={ " + ", ".join(fields) + " }"


def _served_until(app: dict, end_s: float) -> int:
    tl = app["timeline"]
    return sum(tl["bytes"][: int(end_s / tl["bin_s"])])


def _btio_run(src: ScenarioSource, sets: list[str], seed: int | None) -> dict:
    run = simulate(src.with_overrides(*sets), seed=seed)["runs"][0]
    btio, ior = run["apps"]
    end = btio["end_s"]
    ior_bytes = _served_until(ior, end)
    return {
        "btio_runtime_s": end,
        "btio_latency_ms": btio["completion_s"]["mean"] * 1e3,
        "btio_MBps": btio["bytes"] / end / 1e6,
        # IOR's throughput while BTIO ran, and the two together.
        "ior_MBps": ior_bytes / end / 1e6,
        "total_MBps": (btio["bytes"] + ior_bytes) / end / 1e6,
    }


def _btio_case(src: ScenarioSource, doc: dict, variant: list[str], seed: int | None) -> dict[str, dict]:
    alone_sets = [*variant, "apps[1].processes=1", "apps[1].requests=1"]
    rows = {"standalone": _btio_run(src, alone_sets, seed)}
    for p in POLICIES:
        extra = doc.get("capped", {}) if p == "capped" else None
        rows[p] = _btio_run(src, [*variant, _policy(p, extra)], seed)
    base = rows["standalone"]["btio_runtime_s"]
    for r in rows.values():
        r["relative_runtime"] = r["btio_runtime_s"] / base
    return rows


def run(out: Path, quick: bool, seed: int | None = None, status: Callable[[str], None] = print) -> list[Claim]:
    btio_src, btio_doc = _load("btio_ior.toml")
    quick_sets = _sets(btio_doc.get("quick", {})) if quick else []
    status("BTIO Class A vs IOR")
    results: dict = {"btio_a": _btio_case(btio_src, btio_doc, quick_sets, seed)}
    status("BTIO Class C vs IOR")
    results["btio_c"] = _btio_case(btio_src, btio_doc, [*quick_sets, *_sets(btio_doc["variants"]["btio-c"])], seed)
    status("slot-cost sweep (L)")
    results["l_sweep"] = {
        L: _btio_run(btio_src, [*quick_sets, _policy("sfq-d-plus", {"large_slots": L})], seed) for L in L_SWEEP
    }
    uneven_src, uneven_doc = _load("uneven.toml")
    uq = _sets(uneven_doc.get("quick", {})) if quick else []
    status("total-service sharing across servers")
    results["uneven"] = {"sfq-d-plus": _uneven_run(uneven_src, uq, seed)}
    for t in uneven_doc["sweep"]["thresholds"]:
        results["uneven"][t] = _uneven_run(uneven_src, [*uq, _policy("service-sync", {"threshold": t})], seed)
    claims = evaluate(results, uneven_doc["sweep"]["thresholds"])
    write_outputs(out, results, claims, quick)
    return claims


def _uneven_run(src: ScenarioSource, sets: list[str], seed: int | None) -> dict:
    run = simulate(src.with_overrides(*sets), seed=seed)["runs"][0]
    narrow, wide = run["apps"]
    end = min(narrow["end_s"], wide["end_s"])
    n, w = _served_until(narrow, end), _served_until(wide, end)
    return {"narrow_MB": n / 1e6, "wide_MB": w / 1e6, "ratio": w / n if n else float("inf"),
            "reports": sum(s["service_reports"] for s in run["servers"])}


def evaluate(results: dict, thresholds: list[str]) -> list[Claim]:
    claims = []
    a = results["btio_a"]
    rel = {p: a[p]["relative_runtime"] for p in POLICIES}
    claims.append(Claim(
        "v1-btio-a-isolation",
        "Under IOR contention, BTIO Class A's runtime relative to standalone is closest to 1 with SFQ(D)+, then SFQ(D), "
        "then native",
        "SFQ(D)+ < SFQ(D) < native (paper: 1.20, 2.53, 3.29)",
        ", ".join(f"{p} {rel[p]:.2f}" for p in ("sfq-d-plus", "sfq-d", "fifo")),
        rel["sfq-d-plus"] < rel["sfq-d"] < rel["fifo"],
    ))
    ratio = a["sfq-d-plus"]["total_MBps"] / a["capped"]["total_MBps"]
    slower = rel["sfq-d-plus"] / rel["capped"]
    claims.append(Claim(
        "v2-work-conserving-pays",
        "SFQ(D)+'s total throughput is many times Capped's, while BTIO Class A is only moderately slower than under Capped",
        "total throughput ratio >= 5 and BTIO runtime under SFQ(D)+ <= 1.3x Capped's (paper: 13.81x and 1.18x)",
        f"throughput {a['sfq-d-plus']['total_MBps']:.1f} vs {a['capped']['total_MBps']:.1f} MB/s ({ratio:.1f}x); "
        f"BTIO runtime {slower:.2f}x Capped's",
        ratio >= 5 and slower <= 1.3,
    ))
    c = results["btio_c"]
    diff = abs(c["sfq-d-plus"]["btio_runtime_s"] / c["sfq-d"]["btio_runtime_s"] - 1)
    claims.append(Claim(
        "v3-btio-c-same",
        "For BTIO Class C, whose I/Os are as large as IOR's, SFQ(D)+ and SFQ(D) perform within a few percent",
        f"BTIO-C runtimes within {CLOSE:.0%}",
        f"SFQ(D)+ {c['sfq-d-plus']['btio_runtime_s']:.2f} s, SFQ(D) {c['sfq-d']['btio_runtime_s']:.2f} s ({diff:.1%})",
        diff <= CLOSE,
        deviation=None if diff <= CLOSE else (
            "Known deviation: with every request large, SFQ(D)+ admits floor(D/L) = 2 of them at once where SFQ(D) "
            "admits 14, and the model's device queues the extra ones on its channel, so BTIO-C waits less behind IOR "
            "under SFQ(D)+. The paper measured no difference. Open work (issue 3)."
        ),
    ))
    # The paper's Figure 8 shows combined throughput peaking at the profiled
    # L. In the model a small L keeps the device just as busy (IOR saturates
    # it either way), so the curve is flat up to L and falls after it; the
    # claim is checked in that form: the profiled L is the largest L that
    # keeps combined throughput within PEAK_TOLERANCE of the peak, and it
    # serves the small-I/O application better than L = 1 (SFQ(D)).
    sweep = results["l_sweep"]
    peak = max(r["total_MBps"] for r in sweep.values())
    near_peak = [L for L in sweep if sweep[L]["total_MBps"] >= (1 - PEAK_TOLERANCE) * peak]
    largest = max(near_peak)
    claims.append(Claim(
        "v5-l-sweep",
        "Over the slot-cost sweep, the L chosen by profiling gives the best trade-off: the largest L (most protection "
        "for small I/Os) that keeps combined throughput at its peak",
        f"largest L within {PEAK_TOLERANCE:.0%} of peak throughput within one sweep step of {PROFILED_L} (L values "
        "with the same floor(D/L) admit the same large I/Os), and BTIO's throughput at L=5 above L=1's",
        ", ".join(f"L={L}: {sweep[L]['total_MBps']:.1f} MB/s (BTIO {sweep[L]['btio_MBps']:.3f})" for L in sweep)
        + f"; largest L near the peak: {largest}",
        abs(L_SWEEP.index(largest) - L_SWEEP.index(PROFILED_L)) <= 1
        and sweep[PROFILED_L]["btio_MBps"] > sweep[1]["btio_MBps"],
    ))
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "claims.json", [c.as_json() for c in claims])
    write_json(out / "results.json", {k: {str(kk): vv for kk, vv in v.items()} for k, v in results.items()})

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, case in zip(axes, ("btio_a", "btio_c")):
        names = ["standalone", *POLICIES]
        vals = [results[case][n]["relative_runtime"] for n in names]
        ax.bar(names, vals, color=["#888", "#c44", "#e93", "#3a7", "#57b"])
        for i, v in enumerate(vals):
            ax.text(i, v, f"{v:.2f}", ha="center", va="bottom")
        ax.set_title(f"BTIO {'Class A' if case == 'btio_a' else 'Class C'} with IOR")
        ax.set_ylabel("runtime relative to standalone")
    save(fig, out / "btio_runtime")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    sweep = results["l_sweep"]
    ax.plot(list(sweep), [sweep[L]["total_MBps"] for L in sweep], marker="o", label="combined")
    ax.plot(list(sweep), [sweep[L]["ior_MBps"] for L in sweep], marker="s", label="IOR")
    ax.set_xlabel("slot cost of large I/Os (L)")
    ax.set_ylabel("throughput while BTIO runs (MB/s)")
    ax.legend()
    ax.set_title("SFQ(D)+ slot-cost sweep")
    save(fig, out / "l_sweep")
    plt.close(fig)

    lines = [
        "# Reproduction: vPFS+ (SFQ(D)+ and total-service sharing)",
        "",
        f"Mode: {'quick' if quick else 'full'}. Produced by `concerto reproduce vpfs{' --quick' if quick else ''}`. "
        "Times are simulated; scenarios in `experiments/vpfs/`.",
        "",
        "## Claims",
        "",
        markdown_table(["", "claim", "expected", "measured"],
                       [["PASS" if c.passed else ("DEVIATION" if c.deviation else "FAIL"), c.claim, c.expected,
                         c.measured] for c in claims]),
        "",
    ]
    lines += [f"**{c.id}**: {c.deviation}\n" for c in claims if c.deviation and not c.passed]
    for case, title in (("btio_a", "BTIO Class A with IOR"), ("btio_c", "BTIO Class C with IOR")):
        rows = [[n, f"{r['btio_runtime_s']:.2f}", f"{r['relative_runtime']:.2f}", f"{r['btio_latency_ms']:.2f}",
                 f"{r['ior_MBps']:.1f}", f"{r['total_MBps']:.1f}"] for n, r in results[case].items()]
        lines += [f"## {title}", "", markdown_table(
            ["run", "BTIO runtime (s)", "vs standalone", "BTIO mean I/O time (ms)", "IOR MB/s while BTIO runs",
             "total MB/s"], rows), ""]
    lines += ["![btio runtime](btio_runtime.png)", "", "## Slot-cost sweep", "",
              markdown_table(["L", "BTIO runtime (s)", "IOR MB/s", "total MB/s"],
                             [[L, f"{r['btio_runtime_s']:.2f}", f"{r['ior_MBps']:.1f}", f"{r['total_MBps']:.1f}"]
                              for L, r in results["l_sweep"].items()]),
              "", "![L sweep](l_sweep.png)", "", "## Uneven placement", "",
              markdown_table(["policy / threshold", "narrow MB", "wide MB", "wide / narrow", "reports"],
                             [[k, f"{r['narrow_MB']:.1f}", f"{r['wide_MB']:.1f}", f"{r['ratio']:.3f}", r["reports"]]
                              for k, r in results["uneven"].items()]), ""]
    (out / "report.md").write_text("\n".join(lines))
