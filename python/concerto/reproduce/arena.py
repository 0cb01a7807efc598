"""The arena: every server policy Concerto runs on one suite of workloads,
scored on the same metrics, in the simulator.

The workloads are what shared parallel file systems see (a checkpoint
beside a metadata-heavy job, many small jobs beside a large one, a job
with a reservation beside two heavy ones, IO-SETS' generator of periodic
applications at two I/O stresses); each application also runs
alone on the same cluster, which its stretch is measured against. The
metrics: utilization (the data servers' busy fraction), max stretch and
I/O slowdown (the mean stretch), Jain's index over the applications'
speeds (alone time over shared time), the p99 of the request pieces'
latency (arrival at a server to done), and, for the workload that sets
them, reservations missed and limits overshot (the worst second).

Writes report.md (the parameters, one table per workload), arena.png and
results.json. Its claims are the anchors' defining properties that the
suite shows: mClock meets the reservation while heavy neighbours run, and
keeps the limit.
"""

from __future__ import annotations

import csv
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import tomli_w

from concerto import _native
from concerto.report import markdown_table, write_json
from concerto.reproduce import Claim, judged, report_head

SERVERS = 4
STRIPE = "64KiB"
DEVICE = {"kind": "hdd"}
MB = 1e6

# The reservation workload's service level, per server (dmclock's rates
# are a server's): the reading job is promised 5 MB/s on each, the second
# heavy job may take at most 10 MB/s on each. Alone, on these HDD-class
# servers, the reads (eight processes, 256 KiB, each in its own region)
# move 9.6 MB/s per server and a heavy job 29; beside the two heavy jobs
# under FIFO the reads get 3.8.
RESERVATION_MBPS = 5
LIMIT_MBPS = 10
# dmclock runs with one request in service: a scheduler orders only what
# it holds, and a reserved request that arrives behind D requests already
# in the device waits for them whatever its tag (D = 14, the default, gave
# the reads 4.2 MB/s per server, D = 4 4.8-5.0, D = 1 5.9; seeds 1, 2024).
DMCLOCK_DEPTH = 1
# GIFT and AdapTBF run with four requests in service: their throttles act
# on what waits in their queues, and with the default 14 slots the
# applications' requests here all go to the device at once (both then
# served exactly as sfq-d; seed 1, the bursty workload). With 4 the steady
# job's and the bursty job's requests wait in the policy's queue.
EPOCH_POLICY_DEPTH = 4
# ThemisIO's jobs: a four-node and a one-node job, whose shares the paper
# gives as 50/50 job- and user-fair and 80/20 size-fair.
THEMIS_JOBS = (50, 51)
THEMIS_SHARES = {"job": 0.5, "user": 0.5, "size": 0.8}
# mClock's claims hold within 5%: a reservation met to 95%, a limit passed
# by at most 5% in any second.
TOLERANCE = 0.05


def _app(name: str, app_id: int, **keys: Any) -> dict:
    return {"name": name, "app_id": app_id, **keys}


# IO-SETS' workload generator (io-sets.txt Section V-B) at two I/O stresses:
# two groups of two periodic applications each (w_iter about 0.5 s and
# 1.5 s), released at random within their first period, on a platform of
# this bandwidth (about what the four servers deliver to large writes).
# Generated with a seed of its own, so the suite is the same at every
# seed the simulator runs at.
IOSETS_STRESSES = (0.4, 0.8)
IOSETS_BANDWIDTH = "100MB/s"
IOSETS_SEED = 1


def iosets_apps(stress: float, horizon_s: float, first_id: int) -> list[dict]:
    """The generator's applications as request-level ``phases``
    applications: four processes writing each phase's bytes in 1 MiB
    requests after its compute time, starting at the release time."""
    import json

    spec = tomli_w.dumps({
        "horizon_s": horizon_s, "io_stress": stress, "bandwidth": IOSETS_BANDWIDTH, "release": True,
        "groups": [{"count": 2, "mu_s": 0.5, "sigma_s": 0.1}, {"count": 2, "mu_s": 1.5, "sigma_s": 0.2}],
    })
    generated = json.loads(_native.fluid_generate(spec, IOSETS_SEED))["apps"]
    return [_app(g["name"], first_id + i, workload="phases", processes=4, op="write", request_size="1MiB",
                 phases=[[c, round(b)] for c, b in g["phases"]], start=f"{g['release_s'] * 1e3:.3f}ms")
            for i, g in enumerate(generated)]


def workloads(quick: bool) -> dict[str, list[dict]]:
    """The suite: each workload's applications (scenario tables)."""
    n = 1 if quick else 3  # how much longer the full run's jobs are
    return {
        "checkpoint-and-metadata": [
            _app("checkpoint", 1, workload="ior", processes=8, requests=8 * n, request_size="1MiB",
                 op="write"),
            _app("mdtest", 2, workload="md-test", processes=4, items=40 * n, request_size="4KiB"),
        ],
        "small-jobs-beside-a-large-one": [
            _app("large", 10, workload="ior", processes=16, requests=8 * n, request_size="1MiB", op="write"),
            *[_app(f"small{i}", 11 + i, workload="ior", processes=1, requests=16 * n, request_size="64KiB",
                   op="read", start=f"{50 * i}ms") for i in range(4)],
        ],
        "reservation-mix": [
            _app("reserved", 20, workload="ior", processes=8, requests=48 * n, request_size="256KiB", op="read"),
            _app("heavy", 21, workload="ior", processes=8, requests=32 * n, request_size="1MiB", op="write"),
            _app("limited", 22, workload="ior", processes=8, requests=32 * n, request_size="1MiB", op="write"),
        ],
        # ThemisIO's headline experiment: a job on four nodes beside a job on
        # one (eight processes a node), each writing 128 MiB (384 in the full run).
        "four-node-beside-one-node": themis_apps(3 * n),
        # A steady job beside a bursty one (16 MiB phases after 0.4 s of
        # computation): the bursty job's share, unused while it computes, is
        # what GIFT gives away for coupons and AdapTBF lends.
        "bursty-beside-steady": [
            _app("steady", 40, workload="ior", processes=8, requests=24 * n, request_size="1MiB", op="write"),
            _app("bursty", 41, workload="phases", processes=4, op="write", request_size="1MiB",
                 phases=[[0.4, 16 << 20]] * (3 * n), start="0ms"),
        ],
        **iosets_workloads(4.0 * n),
    }


def themis_apps(n: int) -> list[dict]:
    """ThemisIO's two jobs (Karrels et al., SC 2023, Section 5): four nodes
    and one, as different users, writing the same amount."""
    return [
        _app("four-node", THEMIS_JOBS[0], workload="ior", processes=32, processes_per_node=8, requests=4 * n,
             request_size="1MiB", op="write", user=1001),
        _app("one-node", THEMIS_JOBS[1], workload="ior", processes=8, processes_per_node=8, requests=16 * n,
             request_size="1MiB", op="write", user=1002),
    ]


def themis_policies() -> dict[str, dict]:
    """ThemisIO's three sharings of the two jobs, one request in service (a
    scheduler draws only among what it holds; with 14 slots both jobs'
    requests mostly go to the device undrawn)."""
    base = {"kind": "themisio", "depth": 1}
    return {
        "job": {**base, "fairness": "job"},
        "user": {**base, "fairness": "user"},
        "size": {**base, "fairness": "size", "jobs": [{"app": THEMIS_JOBS[0], "nodes": 4},
                                                       {"app": THEMIS_JOBS[1], "nodes": 1}]},
    }


def contended_share(pieces: list[dict], app_index: int = 0) -> float:
    """Of the bytes a server started while both applications had a request
    waiting there, the fraction application ``app_index``'s: ThemisIO's
    split, which holds among the jobs that compete (a job with nothing
    waiting leaves its share to the other: opportunity fairness)."""
    by_server: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)
    for p in pieces:
        app, size = int(p["app"]), int(p["bytes"])
        by_server[p["server"]] += [(int(p["arrive_ns"]), 0, app, size), (int(p["start_ns"]), 1, app, size)]
    won = [0, 0]
    for events in by_server.values():
        waiting = [0, 0]
        for _, started, app, size in sorted(events):
            if started:
                if all(waiting):
                    won[app] += size
                waiting[app] -= 1
            else:
                waiting[app] += 1
    return won[app_index] / sum(won) if sum(won) else 0.0


def themis_splits(apps: list[dict], seed: int, detail: Path) -> dict[str, float]:
    """The four-node job's contended share under each of ThemisIO's sharings."""
    splits = {}
    for fairness, policy in themis_policies().items():
        _simulate(scenario(f"themisio-{fairness}", apps, policy, seed), detail)
        splits[fairness] = contended_share(_pieces(detail))
    return splits


def iosets_workloads(horizon_s: float) -> dict[str, list[dict]]:
    """IO-SETS' generator at each stress, over ``horizon_s`` seconds."""
    return {f"iosets-stress-{stress}": iosets_apps(stress, horizon_s, 30 + 10 * k)
            for k, stress in enumerate(IOSETS_STRESSES)}


def policies() -> dict[str, dict]:
    """Every registered policy with the parameters the arena runs it with:
    its defaults, and for dmclock the reservation workload's service level
    (the other workloads' applications have no row: weight 1) and one
    request in service (``DMCLOCK_DEPTH``); GIFT and AdapTBF with
    ``EPOCH_POLICY_DEPTH``."""
    table: dict[str, dict] = {name: {"kind": name} for name in _native.policy_names()}
    table["dmclock"] = {
        "kind": "dmclock",
        "depth": DMCLOCK_DEPTH,
        "apps": [
            {"app": 20, "reservation": f"{RESERVATION_MBPS}MB/s"},
            {"app": 22, "limit": f"{LIMIT_MBPS}MB/s"},
        ],
    }
    for name in ("gift", "adaptbf"):
        table[name] = {"kind": name, "depth": EPOCH_POLICY_DEPTH}
    return table


def scenario(name: str, apps: list[dict], policy: dict, seed: int) -> str:
    """A scenario's text: the arena's cluster, ``policy``, ``apps``."""
    return tomli_w.dumps({
        "name": name, "seed": seed, "app_ids": {"rule": "explicit"},
        "cluster": {"servers": SERVERS, "stripe_unit": STRIPE, "device": DEVICE},
        "policy": policy, "apps": apps,
    })


def _simulate(text: str, detail: Path | None = None) -> dict:
    from concerto.sim import ScenarioSource, simulate

    return simulate(ScenarioSource(text=text, label="arena"), detail_csv=detail)["runs"][0]


def _pieces(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def p99_latency_ms(pieces: list[dict]) -> float:
    """The 99th percentile of arrival-to-done over every request piece."""
    lat = sorted((int(p["done_ns"]) - int(p["arrive_ns"])) / 1e6 for p in pieces)
    return lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else 0.0


def worst_second_mbps(pieces: list[dict], app_index: int) -> float:
    """The most one application moved through one server in any window of
    one second (sliding, by completion time), MB/s."""
    done: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p in pieces:
        if int(p["app"]) == app_index:
            done[p["server"]].append((int(p["done_ns"]), int(p["bytes"])))
    worst = 0
    for xs in done.values():
        xs.sort()
        first = held = 0
        for t, b in xs:
            held += b
            while xs[first][0] <= t - 1_000_000_000:
                held -= xs[first][1]
                first += 1
            worst = max(worst, held)
    return worst / MB


def jain(xs: list[float]) -> float:
    """Jain's fairness index: 1 when every value is the same, 1/n when one has it all."""
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs and any(xs) else 0.0


def stretch_metrics(durations: dict[str, float], alone: dict[str, float]) -> dict:
    """Max stretch, I/O slowdown (the mean stretch) and Jain's index over
    the applications' speeds, from their times together and alone: the
    metrics both worlds compute the same way."""
    stretch = {name: durations[name] / alone[name] for name in durations}
    return {
        "max_stretch": max(stretch.values()),
        "io_slowdown": sum(stretch.values()) / len(stretch),
        "jain": jain([1 / s for s in stretch.values()]),
        "stretch": stretch,
    }


def score(run: dict, alone: dict[str, float], pieces: list[dict]) -> dict:
    """One policy on one workload, on the arena's metrics."""
    durations = {a["name"]: a["end_s"] - a["start_s"] for a in run["apps"]}
    data = [s for s in run["servers"] if s["role"] != "metadata"] or run["servers"]
    row = {
        "utilization": sum(s["utilization"] for s in data) / len(data),
        **stretch_metrics(durations, alone),
        "p99_ms": p99_latency_ms(pieces),
    }
    names = [a["name"] for a in run["apps"]]
    if "reserved" in names:
        i = names.index("reserved")
        a = run["apps"][i]
        per_server = a["bytes"] / (a["end_s"] - a["start_s"]) / SERVERS / MB
        row["reserved_mbps"] = per_server
        row["reservation_missed"] = per_server < (1 - TOLERANCE) * RESERVATION_MBPS
    if "limited" in names:
        worst = worst_second_mbps(pieces, names.index("limited"))
        row["limited_worst_mbps"] = worst
        row["limit_overshoot"] = max(0.0, worst / LIMIT_MBPS - 1)
    return row


def run(out: Path, quick: bool, seed: int | None = None, status: Callable[[str], None] = print,
        **_sweep_opts: Any) -> list[Claim]:
    seed = 1 if seed is None else seed
    out.mkdir(parents=True, exist_ok=True)
    suite, table = workloads(quick), policies()
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        detail = Path(tmp) / "pieces.csv"
        for wname, apps in suite.items():
            status(f"arena: {wname}: each application alone, then {len(table)} policies")
            alone = {}
            for a in apps:
                solo = _simulate(scenario(f"{wname}-{a['name']}-alone", [{**a, "start": "0ms"}],
                                          {"kind": "fifo"}, seed))
                alone[a["name"]] = solo["apps"][0]["end_s"] - solo["apps"][0]["start_s"]
            results[wname] = {}
            for pname, policy in table.items():
                r = _simulate(scenario(wname, apps, policy, seed), detail)
                results[wname][pname] = score(r, alone, _pieces(detail))
        themis = results["four-node-beside-one-node"]["themisio"]
        themis["splits"] = themis_splits(suite["four-node-beside-one-node"], seed, detail)
    claims = evaluate(results)
    write_outputs(out, results, table, suite, claims, quick, seed)
    return claims


def evaluate(results: dict[str, dict[str, dict]]) -> list[Claim]:
    mix = results["reservation-mix"]["dmclock"]
    weights_only = results["reservation-mix"]["sfq-d"]
    got, worst = mix["reserved_mbps"], mix["limited_worst_mbps"]
    return [
        Claim(
            "arena-mclock-reservation",
            "mClock meets a reservation while heavy neighbours run (Gulati et al., OSDI 2010)",
            f"the reserved job moves at least {1 - TOLERANCE:.0%} of its {RESERVATION_MBPS} MB/s per server "
            "under dmclock",
            f"{got:.1f} MB/s per server under dmclock; {weights_only['reserved_mbps']:.1f} under sfq-d (weights only)",
            **judged(got >= (1 - TOLERANCE) * RESERVATION_MBPS, False)),
        Claim(
            "arena-mclock-limit",
            "mClock keeps a limit, even with the device free to give more",
            f"the limited job moves at most {1 + TOLERANCE:.0%} of its {LIMIT_MBPS} MB/s through a server in any "
            "second under dmclock",
            f"worst second {worst:.1f} MB/s under dmclock; {weights_only['limited_worst_mbps']:.1f} under sfq-d",
            **judged(worst <= (1 + TOLERANCE) * LIMIT_MBPS, False)),
        *epoch_policy_claims(results["bursty-beside-steady"]),
        *themis_claims(results["four-node-beside-one-node"]["themisio"]["splits"]),
    ]


def themis_claims(splits: dict[str, float]) -> list[Claim]:
    """ThemisIO's three splits, each within 5% of its share."""
    claims = []
    for fairness, share in THEMIS_SHARES.items():
        got = splits[fairness]
        claims.append(Claim(
            f"arena-themisio-{fairness}-fair",
            f"ThemisIO shares a four-node and a one-node job {share:.0%}/{1 - share:.0%} {fairness}-fair "
            "(Karrels et al., SC 2023)",
            f"the four-node job's share of what the servers start while both wait is within {TOLERANCE:.0%} of "
            f"{share:.0%}",
            f"{got:.1%} ({', '.join(f'{k} {v:.1%}' for k, v in splits.items())})",
            **judged(abs(got / share - 1) <= TOLERANCE, False)))
    return claims


def epoch_policy_claims(bursty: dict[str, dict]) -> list[Claim]:
    """GIFT's and AdapTBF's headline properties on the bursty workload:
    the device as busy as with no control at all (FIFO), within 5%, and
    (GIFT) no application stretched more than under FIFO (its coupons give
    the bursty job back what it gave up). Capped, the static
    non-work-conserving share, is shown beside them."""
    fifo, static = bursty["fifo"], bursty["capped"]

    def beside(p: str) -> str:
        r = bursty[p]
        return (f"utilization {r['utilization']:.1%} under {p}, {fifo['utilization']:.1%} under fifo, "
                f"{static['utilization']:.1%} under capped (static shares); max stretch {r['max_stretch']:.2f}, "
                f"{fifo['max_stretch']:.2f}, {static['max_stretch']:.2f}")

    gift, adapt = bursty["gift"], bursty["adaptbf"]
    return [
        Claim(
            "arena-gift-efficiency-and-fairness",
            "GIFT throttles and rewards without losing the device's time (Patel et al., FAST 2020)",
            f"beside a bursty job, utilization at least {1 - TOLERANCE:.0%} of FIFO's and max stretch no more "
            "than FIFO's",
            beside("gift"),
            **judged(gift["utilization"] >= (1 - TOLERANCE) * fifo["utilization"]
                     and gift["max_stretch"] <= fifo["max_stretch"], False)),
        Claim(
            "arena-adaptbf-utilization",
            "AdapTBF's lending keeps the device as busy as no control (Rashid and Dai, 2026)",
            f"beside a bursty job, utilization at least {1 - TOLERANCE:.0%} of FIFO's",
            beside("adaptbf"),
            **judged(adapt["utilization"] >= (1 - TOLERANCE) * fifo["utilization"], False)),
    ]


METRICS = [
    ("utilization", "utilization", "{:.0%}"),
    ("max_stretch", "max stretch", "{:.2f}"),
    ("io_slowdown", "I/O slowdown", "{:.2f}"),
    ("jain", "Jain's index", "{:.3f}"),
    ("p99_ms", "p99 latency (ms)", "{:.1f}"),
]


def parameters_section(table: dict[str, dict]) -> list[str]:
    """report.md's lines stating every policy's parameters."""
    return ["## Parameters", "", markdown_table(["policy", "parameters"], [
        [name, ", ".join(f"{k} = {v}" for k, v in p.items() if k != "kind") or "defaults"]
        for name, p in table.items()]), ""]


def apps_line(apps: list[dict]) -> str:
    """A workload's applications in one line: name (processes x calls kind op size)."""
    def one(a: dict) -> str:
        if a["workload"] == "phases":
            mean = sum(b for _, b in a["phases"]) / len(a["phases"]) / 1e6
            phases = f"{len(a['phases'])} phase{'s' if len(a['phases']) > 1 else ''}"
            return (f"{a['name']} ({a['processes']} processes, {phases} of {mean:.1f} MB "
                    f"{a['op']} in {a['request_size']} requests, from {a['start']})")
        return (f"{a['name']} ({a['processes']} x {a.get('requests', a.get('items'))} {a['workload']} "
                f"{a.get('op', '')} {a['request_size']})")

    return ", ".join(map(one, apps)) + "."


def write_outputs(out: Path, results: dict, table: dict, suite: dict, claims: list[Claim], quick: bool,
                  seed: int) -> None:
    about = (f"Simulator only, seed {seed}: {SERVERS} HDD-class servers, {STRIPE} stripes; every policy with its "
             "defaults except dmclock, given the reservation workload's service level (below). Stretch is an "
             "application's time beside the others over its time alone on the same cluster (FIFO).")
    lines = report_head("the arena", "arena", quick, about, claims) + parameters_section(table)
    for wname, by_policy in results.items():
        apps = apps_line(suite[wname])
        extra = []
        if wname == "reservation-mix":
            extra = [("reserved_mbps", f"reserved MB/s/server (>= {RESERVATION_MBPS})", "{:.1f}"),
                     ("limited_worst_mbps", f"limited worst s MB/s/server (<= {LIMIT_MBPS})", "{:.1f}")]
        cols = METRICS + extra
        rows = [[p] + [fmt.format(r[key]) for key, _, fmt in cols] for p, r in by_policy.items()]
        lines += [f"## {wname}", "", apps, "", markdown_table(["policy"] + [h for _, h, _ in cols], rows), ""]
    lines += ["![arena](arena.png)", ""]
    (out / "report.md").write_text("\n".join(lines))
    write_json(out / "results.json", {"seed": seed, "quick": quick, "policies": table, "results": results})
    write_json(out / "claims.json", [c.as_json() for c in claims])
    plot(results, out / "arena.png")


def plot(results: dict, path: Path) -> None:
    """Max stretch and Jain's index, every policy on every workload."""
    from concerto.report import policy_colour, pyplot, save

    plt = pyplot()
    names = list(next(iter(results.values())))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(names)
    for ax, (key, title) in zip(axes, [("max_stretch", "max stretch (lower is better)"),
                                      ("jain", "Jain's index over speeds (higher is fairer)")]):
        for i, p in enumerate(names):
            xs = [w + (i - len(names) / 2) * width for w in range(len(results))]
            ax.bar(xs, [results[w][p][key] for w in results], width, label=p, color=policy_colour(p, i))
        ax.set_xticks(range(len(results)), list(results), fontsize=8)
        ax.set_title(title)
    axes[1].legend(fontsize=7, ncol=2)
    save(fig, path)
