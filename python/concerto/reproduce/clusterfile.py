"""``concerto reproduce clusterfile``: client-side parallel I/O scheduling
(Isaila et al., the Clusterfile paper).

Runs the sweep files in ``experiments/clusterfile/`` at request level (the
synthetic benchmark of Section 7.1 and one BTIO class C I/O phase of
Section 7.2, each heuristic at each schedule block b, written and read
back), schedules random transfer graphs with every heuristic of Section 3
against the optimum (Δ, by bipartite edge colouring), checks the paper's
claims with stated tolerances, and writes ``report.md``, the plots, the
sweeps' tidy tables, ``results.json`` and ``claims.json``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from concerto import _native
from concerto.report import line_plot, markdown_table, pyplot, save, write_json
from concerto.reproduce import Claim, experiments_dir, judged, report_head, run_paper_sweep, within_factor
from concerto.sweep import Sweep, aggregate, load_sweep

OP, ORDERING, BLOCK = "apps[0].op", "apps[0].ordering", "apps[0].schedule_block"
ORDERINGS = ["first-ios", "random-ios", "hash-ios"]

# The paper's figures (Sections 7.1 and 7.2).
PAPER_SPREAD = {("synthetic", "write"): 0.86, ("synthetic", "read"): 8.04,
                ("btio_c", "write"): 0.53, ("btio_c", "read"): 1.73}
# A spread must come within this factor of the paper's, either way.
SPREAD_FACTOR = 2.0
# Writes at the largest b: the paper has hash-IOS at its peak (573 MB/s at
# 64 KiB, not degrading with b) and first-IOS at its lowest (308 MB/s), a
# ratio of 1.86; the model's within this factor of it, either way.
PAPER_HASH_OVER_FIRST = 573 / 308
HASH_OVER_FIRST_FACTOR = 1.25
# first-IOS's write throughput falls as b grows: no step up by more than
# 1% (the repetitions' noise), and at least this much lost from the stripe
# unit to the largest b.
FIRST_IOS_STEP = 0.01
FIRST_IOS_DROP = 0.30

# Random transfer graphs for claims 2 and 4.
GRAPH_CLIENTS = GRAPH_SERVERS = 16
GRAPH_MAX_PER_PAIR = 4
DENSITIES = [0.1, 0.25, 0.5, 0.75, 1.0]
HEURISTICS = ["fcfs", "hdf", "hcdf", "uar", "m-passes"]
# Families that discriminate between the degree-based heuristics (claim
# c4): d-regular multigraphs (n x n, degree d: every node ties on degree)
# and skewed destinations (16 clients x 16 servers, 6 transfers each, server
# k drawn with weight 1/(k+1)^e).
REGULAR = [(8, 4), (8, 8), (16, 4), (16, 8), (24, 4), (24, 8)]
SKEWED = [0.25, 0.5, 1.0]
# c4: HCDF ahead of HDF (Jain et al.) counts as reproduced where its mean is
# below HDF's by more than this share of Δ on some family, and the two tie
# (the model's bound) while every family's means are within it: less than
# half a step of a 4-regular graph's schedule (a step is Δ/4 there).
HEURISTIC_TIE = 0.10
# Graphs per family: the means move by a step over this many graphs.
FAMILY_INSTANCES = {"quick": 40, "full": 100}
# The paper's Figure 1, as a count matrix: T1 = P1 to D1, T2 = P2 to D2,
# T3 = P1 to D3, T4 = P2 to D3.
FIGURE_1 = [[1, 0, 1], [0, 1, 1]]


def run(out: Path, quick: bool, seed: int | None = None, status: Callable[[str], None] = print,
        workers: int = 1, dask: str | None = None) -> list[Claim]:
    folder = experiments_dir() / "clusterfile"
    sweeps: dict[str, Sweep] = {}
    cells: dict[str, list[dict]] = {}
    for name in ("synthetic", "btio_c"):
        sweep = load_sweep(folder / f"{name}.toml", quick=quick)
        sweeps[name] = sweep
        cells[name] = aggregate(sweep, run_paper_sweep(sweep, out / sweep.id, seed, status, workers, dask))
    status("transfer graphs: every heuristic against the optimum")
    graphs = transfer_graphs(instances=10 if quick else 40, seed=1 if seed is None else seed,
                             family_instances=FAMILY_INSTANCES["quick" if quick else "full"])
    results = {"throughput": {name: [_cell(c) for c in cs] for name, cs in cells.items()}, "graphs": graphs}
    claims = evaluate(results)
    write_outputs(out, sweeps, results, claims, quick)
    return claims


def _cell(c: dict) -> dict[str, Any]:
    """One (op, ordering, b) of a sweep: its mean throughput and phase time."""
    p = c["params"]
    return {"op": p[OP], "ordering": p[ORDERING], "b": p[BLOCK], "reps": c["reps"],
            "throughput_MBps": c["bandwidth_MBps"], "throughput_MBps_sd": c["bandwidth_MBps_sd"],
            "time_s": c["makespan_s"]}


def _schedule_lengths(matrices: list[list[list[int]]], seed: int) -> dict[str, Any]:
    """Every heuristic's and the optimum's schedule length over Δ on each
    matrix: means, worsts, how often HCDF is longer and shorter than HDF."""
    ratios: dict[str, list[float]] = {h: [] for h in [*HEURISTICS, "optimal"]}
    optimal_is_delta = valid = True
    hcdf_longer = hcdf_shorter = 0
    for k, rows in enumerate(matrices):
        plan = _native.plan_transfers(rows, 0, seed + k)
        length = {s["name"]: s["length"] / plan["delta"] for s in plan["schedules"]}
        for s in plan["schedules"]:
            ratios[s["name"]].append(length[s["name"]])
            valid &= s["valid"]
        optimal_is_delta &= length["optimal"] == 1
        hcdf_longer += length["hcdf"] > length["hdf"]
        hcdf_shorter += length["hcdf"] < length["hdf"]
    return {"instances": len(matrices), "optimal_is_delta": optimal_is_delta, "all_valid": valid,
            "hcdf_longer": hcdf_longer, "hcdf_shorter": hcdf_shorter,
            **{f"{h}_ratio": math.fsum(v) / len(v) for h, v in ratios.items()},
            **{f"{h}_worst": max(v) for h, v in ratios.items()}}


def transfer_graphs(instances: int, seed: int, family_instances: int) -> dict[str, Any]:
    """Each heuristic's schedule length over Δ on random 16 x 16 graphs at
    several densities, on d-regular and skewed families, and on the paper's
    Figure 1."""
    by_density = []
    for density in DENSITIES:
        drawn = [_native.random_transfer_matrix(GRAPH_CLIENTS, GRAPH_SERVERS, density, GRAPH_MAX_PER_PAIR,
                                                seed * 1_000_003 + k) for k in range(instances)]
        by_density.append({"density": density, **_schedule_lengths([m for m in drawn if any(map(any, m))], seed)})
    families = []
    for n, degree in REGULAR:
        drawn = [_native.regular_transfer_matrix(n, degree, seed * 1_000_003 + k) for k in range(family_instances)]
        families.append({"family": f"{degree}-regular {n} x {n}", **_schedule_lengths(drawn, seed)})
    for exponent in SKEWED:
        drawn = [_native.skewed_transfer_matrix(GRAPH_CLIENTS, GRAPH_SERVERS, 6, exponent, seed * 1_000_003 + k)
                 for k in range(family_instances)]
        families.append({"family": f"skewed e = {exponent:g}", **_schedule_lengths(drawn, seed)})
    fig1 = _native.plan_transfers(FIGURE_1)
    return {"clients": GRAPH_CLIENTS, "servers": GRAPH_SERVERS, "max_per_pair": GRAPH_MAX_PER_PAIR,
            "densities": by_density, "families": families,
            "figure_1": {"delta": fig1["delta"], **{s["name"]: s["length"] for s in fig1["schedules"]}}}


def _series(results: dict, name: str, op: str, ordering: str) -> list[tuple[int, float]]:
    """(b, mean throughput) of one heuristic, b ascending."""
    return sorted((c["b"], c["throughput_MBps"]) for c in results["throughput"][name]
                  if c["op"] == op and c["ordering"] == ordering)


def _spread(results: dict, name: str, op: str) -> tuple[float, dict, dict]:
    """Best over worst throughput minus one, over every heuristic and b; with the two cells."""
    cs = [c for c in results["throughput"][name] if c["op"] == op]
    best = max(cs, key=lambda c: c["throughput_MBps"])
    worst = min(cs, key=lambda c: c["throughput_MBps"])
    return best["throughput_MBps"] / worst["throughput_MBps"] - 1, best, worst


def _where(c: dict) -> str:
    return f"{c['ordering']} at b = {_kib(c['b'])} ({c['throughput_MBps']:.0f} MB/s)"


def _kib(b: int) -> str:
    return f"{b // 1048576} MiB" if b >= 1048576 else f"{b // 1024} KiB"


def evaluate(results: dict) -> list[Claim]:
    claims: list[Claim] = []

    # 1. Contiguous writes: hash-IOS ahead of first-IOS at large b; first-IOS falls as b grows; large spreads.
    first = _series(results, "synthetic", "write", "first-ios")
    hashed = dict(_series(results, "synthetic", "write", "hash-ios"))
    largest = first[-1][0]
    ratio = hashed[largest] / first[-1][1]
    claims.append(Claim(
        "c1a-hash-ios-beats-first-ios-at-large-b",
        "Contiguous writes: for large schedule blocks hash-IOS clearly outperforms first-IOS (Section 7.1, Figure 2)",
        f"at b = {_kib(largest)}: hash-IOS / first-IOS within a factor {HASH_OVER_FIRST_FACTOR:g} of the paper's "
        f"{PAPER_HASH_OVER_FIRST:.2f} (573 MB/s at hash-IOS's peak, which does not degrade with b, against "
        f"first-IOS's 308), either way: {PAPER_HASH_OVER_FIRST / HASH_OVER_FIRST_FACTOR:.2f} to "
        f"{PAPER_HASH_OVER_FIRST * HASH_OVER_FIRST_FACTOR:.2f}",
        f"hash-IOS {hashed[largest]:.0f} MB/s, first-IOS {first[-1][1]:.0f} MB/s: {ratio:.2f}",
        within_factor(ratio, PAPER_HASH_OVER_FIRST, HASH_OVER_FIRST_FACTOR),
    ))
    unit = 65536
    tail = [(b, v) for b, v in first if b >= unit]
    rises = [(b0, b1, v1 / v0 - 1) for (b0, v0), (b1, v1) in zip(tail, tail[1:]) if v1 > v0 * (1 + FIRST_IOS_STEP)]
    drop = 1 - tail[-1][1] / tail[0][1]
    below = ", ".join(f"{_kib(b)} {v:.0f}" for b, v in first if b < unit)
    claims.append(Claim(
        "c1b-first-ios-falls-as-b-grows",
        "Contiguous writes: first-IOS's aggregate throughput decreases as the schedule block grows (Section 7.1)",
        f"from the stripe unit (64 KiB) to {_kib(largest)}: no step up by more than {FIRST_IOS_STEP:.0%}, and at "
        f"least {FIRST_IOS_DROP:.0%} lost overall",
        "MB/s by b: " + ", ".join(f"{_kib(b)} {v:.0f}" for b, v in tail) + f"; lost {drop:.0%}"
        + ("; steps up: " + ", ".join(f"{_kib(a)} to {_kib(b)} +{r:.1%}" for a, b, r in rises) if rises else "")
        + f" (below the stripe unit, not claimed: {below})",
        not rises and drop >= FIRST_IOS_DROP,
    ))
    for op in ("write", "read"):
        spread, best, worst = _spread(results, "synthetic", op)
        paper = PAPER_SPREAD[("synthetic", op)]
        lo, hi = paper / SPREAD_FACTOR, paper * SPREAD_FACTOR
        claims.append(Claim(
            f"c1{'c' if op == 'write' else 'd'}-contiguous-{op}-spread",
            f"Contiguous {op}s: the heuristic and b change throughput by as much as {paper:.0%} (Section 7.1)",
            f"best / worst - 1 over every heuristic and b within a factor {SPREAD_FACTOR:g} of the paper's "
            f"{paper:.0%}: {lo:.0%} to {hi:.0%}",
            f"{spread:.0%}: best {_where(best)}, worst {_where(worst)}",
            lo <= spread <= hi,
        ))

    # 2. The optimum is Δ; Figure 1.
    g = results["graphs"]
    every = all(d["optimal_is_delta"] and d["all_valid"] for d in g["densities"] + g["families"])
    n = sum(d["instances"] for d in g["densities"] + g["families"])
    claims.append(Claim(
        "c2a-optimal-schedule-has-delta-steps",
        "An optimal schedule of unit transfers takes exactly Δ steps (König's theorem; bipartite edge colouring)",
        f"on every generated instance (random {g['clients']} x {g['servers']}, up to {g['max_per_pair']} transfers per "
        "pair, densities " + ", ".join(f"{d:g}" for d in DENSITIES) + "; d-regular and skewed families): the optimal "
        "schedule is valid and has Δ steps, and every heuristic's schedule is valid",
        f"{n} instances: " + ("all optimal at Δ, all schedules valid" if every else "FAILED on some instance"),
        every,
    ))
    f1 = g["figure_1"]
    claims.append(Claim(
        "c2b-figure-1",
        "Figure 1: FCFS in arrival order produces Schedule 1 (3 steps), HCDF only the optimal Schedule 2 (2 steps)",
        "FCFS 3, HCDF 2, optimum 2 = Δ",
        ", ".join(f"{k} {f1[k]}" for k in ("fcfs", "hdf", "hcdf", "uar", "m-passes", "optimal")) + f"; Δ = {f1['delta']}",
        f1["fcfs"] == 3 and f1["hcdf"] == 2 and f1["optimal"] == 2 == f1["delta"],
    ))

    # 3. BTIO class C: a smaller span than contiguous access, still material.
    ok3, measured = True, []
    for op in ("write", "read"):
        spread, best, worst = _spread(results, "btio_c", op)
        contiguous, _, _ = _spread(results, "synthetic", op)
        paper = PAPER_SPREAD[("btio_c", op)]
        lo, hi = paper / SPREAD_FACTOR, paper * SPREAD_FACTOR
        ok3 &= lo <= spread <= hi and spread < contiguous
        measured.append(f"{op}s {spread:.0%} (contiguous {contiguous:.0%}): best {_where(best)}, worst {_where(worst)}")
    claims.append(Claim(
        "c3-btio-span-smaller-but-material",
        "BTIO class C: heuristic and b change the I/O phase time much less than for contiguous access, yet still "
        "materially (Section 7.2: up to 53% for writing, 173% for reading)",
        f"for writes and reads: the span (slowest / fastest phase time - 1) is below the contiguous benchmark's and "
        f"within a factor {SPREAD_FACTOR:g} of the paper's (writes {0.53 / SPREAD_FACTOR:.0%} to "
        f"{0.53 * SPREAD_FACTOR:.0%}, reads {1.73 / SPREAD_FACTOR:.0%} to {1.73 * SPREAD_FACTOR:.0%})",
        "; ".join(measured),
        ok3,
    ))

    # 4. The related work's ordering of the heuristics, on graphs that discriminate.
    every = [(f"random density {d['density']:g}", d) for d in g["densities"]] + [(f["family"], f) for f in g["families"]]
    bad = []
    for label, d in every:
        r = {h: d[f"{h}_ratio"] for h in HEURISTICS}
        if not max(r["hdf"], r["hcdf"]) <= r["fcfs"]:
            bad.append(f"{label}: HDF {r['hdf']:.3f}, HCDF {r['hcdf']:.3f}, FCFS {r['fcfs']:.3f}")
        if not r["m-passes"] <= r["uar"]:
            bad.append(f"{label}: M-PASSES {r['m-passes']:.3f}, UAR {r['uar']:.3f}")
    claims.append(Claim(
        "c4-informed-heuristics-against-the-optimum",
        "The more informed heuristics do better: the degree-based HDF and HCDF before FCFS (Jain et al.), and "
        "M-PASSES before UAR (Durand et al.), each measured against the optimum Δ, on random, d-regular and skewed "
        "graphs",
        "on every family, the mean schedule length over Δ: HDF and HCDF <= FCFS and M-PASSES <= UAR",
        ("order broken: " + "; ".join(bad) + ". " if bad else "order holds on every family. ") + "Means: "
        + "; ".join(f"{label}: " + ", ".join(f"{h} {d[f'{h}_ratio']:.3f}" for h in HEURISTICS) for label, d in every),
        not bad,
    ))
    gaps = {label: d["hdf_ratio"] - d["hcdf_ratio"] for label, d in every}
    ahead = [label for label, gap in gaps.items() if gap > HEURISTIC_TIE]
    longer = sum(f["hcdf_longer"] for f in g["families"])
    shorter = sum(f["hcdf_shorter"] for f in g["families"])
    graphs = sum(f["instances"] for f in g["families"])
    widest = max(gaps.items(), key=lambda kv: abs(kv[1]))
    claims.append(Claim(
        "c4-hcdf-over-hdf",
        "HCDF, which weighs an edge by the sum of its ends' degrees, does better than HDF (Jain et al.'s simulation; "
        "the Clusterfile paper cites it without numbers). Reproduced where HCDF's mean is shorter by more than "
        f"{HEURISTIC_TIE:.0%} of Δ on some family. Otherwise not reproduced: on random graphs both reach Δ, and on "
        "d-regular graphs every node ties on degree, so both order by the same ties and neither leads; the bound is "
        f"that tie: on every family the two means within {HEURISTIC_TIE:.0%} of Δ",
        f"HDF - HCDF > {HEURISTIC_TIE:.2f} Δ on some family (reproduced), else |HDF - HCDF| <= {HEURISTIC_TIE:.2f} Δ "
        "on every family (the model's bound)",
        f"largest difference {widest[1]:+.3f} Δ ({widest[0]}); on the d-regular and skewed graphs HCDF longer on "
        f"{longer} of {graphs}, shorter on {shorter}",
        **judged(bool(ahead), all(abs(gap) <= HEURISTIC_TIE for gap in gaps.values())),
    ))
    return claims


def _ratio_plot(graphs: dict, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [d["density"] for d in graphs["densities"]]
    for h in HEURISTICS:
        ax.plot(xs, [d[f"{h}_ratio"] for d in graphs["densities"]], marker="o", label=h)
    ax.axhline(1.0, color="k", linewidth=0.8, label="optimal (Δ)")
    ax.set_xlabel("density (probability that a client-server pair has transfers)")
    ax.set_ylabel("schedule length / Δ (mean)")
    ax.set_title(f"Heuristics against the optimum, {graphs['clients']} x {graphs['servers']} random graphs")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, path)


def _throughput_table(cells: list[dict], time: bool) -> str:
    bs = sorted({c["b"] for c in cells})
    rows = []
    for op in ("write", "read"):
        for o in ORDERINGS:
            by_b = {c["b"]: c for c in cells if c["op"] == op and c["ordering"] == o}
            rows.append([op, o, *[f"{by_b[b]['time_s']:.3f}" if time else f"{by_b[b]['throughput_MBps']:.0f}"
                                  for b in bs]])
    return markdown_table(["op", "heuristic", *[_kib(b) for b in bs]], rows)


def write_outputs(out: Path, sweeps: dict[str, Sweep], results: dict, claims: list[Claim], quick: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "claims.json", [c.as_json() for c in claims])
    write_json(out / "results.json", results)
    for name, sweep in sweeps.items():
        rows = [{"params": {OP: c["op"], ORDERING: c["ordering"], BLOCK: c["b"]}, **c}
                for c in results["throughput"][name]]
        line_plot(rows, x=BLOCK, y="throughput_MBps" if name == "synthetic" else "time_s", series=[ORDERING],
                  facet=OP, path=out / name, title=sweep.title.split(":")[0],
                  xlabel="schedule block b (bytes)",
                  ylabel="aggregate throughput (MB/s)" if name == "synthetic" else "I/O phase time (s)", logx=True)
    _ratio_plot(results["graphs"], out / "heuristics")
    g = results["graphs"]
    lines = report_head(
        "Clusterfile's parallel I/O scheduling", "clusterfile", quick,
        "Request-level simulation with the network mode in which every node does one transfer at a time "
        "(`mode = \"exclusive\"`); each compute node sends its blocks one at a time in its heuristic's order "
        "(`ordering`, `schedule_block`). The cluster is in `experiments/clusterfile/synthetic.toml`; "
        "docs/reproductions.md says how it was calibrated and what the model leaves out.", claims) + [
        "## Where the model and the paper differ",
        "",
        "- Absolute throughput: the model's writes reach the network's limit (about 950 MB/s of 8 x 120) where the "
        "paper's stopped at 573 MB/s, and its reads peak near 600 MB/s where the paper's reached 817: a model client "
        "waits for each read block's data before asking for the next, so a read costs a round trip per block. The "
        "claims are on shapes and ratios, which do not depend on this.",
        "- Below the stripe unit, first-IOS's writes are not monotone in b (claim c1b reports them, and claims the "
        "fall from the stripe unit up only). All clients start at server 0; how fast that first convoy turns into a "
        "pipeline depends on how many blocks of one stripe unit each client sends in a row, and at b = 16 KiB it "
        "dissolves slowest. The paper's text says first-IOS falls with b without giving its values below 64 KiB.",
        "- HDF and HCDF both reach Δ on every random graph here, and on d-regular graphs (every node ties on degree) "
        "they tie within a few percent of Δ, each shorter on some graphs: HCDF's lead in Jain et al.'s simulation is "
        "not reproduced (claim c4-hcdf-over-hdf). On skewed graphs the hot servers' queues decide and every "
        "heuristic is within a few percent of Δ.",
        "",
        f"## {sweeps['synthetic'].title}",
        "",
        f"Mean aggregate throughput (MB/s) over {sweeps['synthetic'].reps} repetitions; every run in "
        "`synthetic/runs.csv`.",
        "",
        "![synthetic](synthetic.png)",
        "",
        _throughput_table(results["throughput"]["synthetic"], time=False),
        "",
        f"## {sweeps['btio_c'].title}",
        "",
        f"Mean I/O phase time (s) over {sweeps['btio_c'].reps} repetitions (the paper: writes 0.51 s to 0.78 s, reads "
        "0.42 s to 1.15 s); every run in `btio_c/runs.csv`.",
        "",
        "![btio_c](btio_c.png)",
        "",
        _throughput_table(results["throughput"]["btio_c"], time=True),
        "",
        "## Heuristics against the optimum",
        "",
        f"Random {g['clients']} x {g['servers']} transfer graphs: each client-server pair has 1 to "
        f"{g['max_per_pair']} unit transfers with probability `density`. Mean (and worst) schedule length over Δ.",
        "",
        "![heuristics](heuristics.png)",
        "",
        markdown_table(["density", "instances", *HEURISTICS],
                       [[f"{d['density']:g}", d["instances"],
                         *[f"{d[f'{h}_ratio']:.3f} ({d[f'{h}_worst']:.2f})" for h in HEURISTICS]]
                        for d in g["densities"]]),
        "",
        "d-regular multigraphs (sums of d random permutations) and skewed destinations (each client sends 6 "
        "transfers, to server k with weight 1/(k+1)^e); HCDF against HDF: on how many graphs it is longer / shorter.",
        "",
        markdown_table(["family", "instances", *HEURISTICS, "HCDF longer / shorter"],
                       [[f["family"], f["instances"],
                         *[f"{f[f'{h}_ratio']:.3f} ({f[f'{h}_worst']:.2f})" for h in HEURISTICS],
                         f"{f['hcdf_longer']} / {f['hcdf_shorter']}"]
                        for f in g["families"]]),
        "",
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")
