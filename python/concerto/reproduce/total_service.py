"""Total-service sharing (vPFS claim v7) on a real cluster and in the simulator, side by side.

Four data servers on loopback, each throttled to the same emulated device
(``experiments/vpfs/uneven_real.toml``). Two applications with equal
weights write without pause: "narrow" stripes over two servers, "wide" over
all four. Under per-server SFQ(D)+ each server is fair on its own, so wide
gets about twice narrow's total service; under ``service-sync`` the real
servers exchange service reports peer to peer and charge what an
application received elsewhere, which brings the totals to the weights.

Service is counted up to the moment the first application has finished,
while both compete: on the real cluster from the servers' per-application
statistics, in the simulator from the applications' service timelines.
"""

from __future__ import annotations

import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Callable

from rich.table import Table

from concerto import cluster as local
from concerto import fs, terminal
from concerto.reproduce import Claim, counts_line, experiments_dir
from concerto.report import markdown_table, write_json
from concerto.sweep import load_sweep, run_sweep

# How close to the weight ratio (1) service-sync must bring wide/narrow, and
# how close to 2 (wide's share of servers) per-server fairness leaves it.
SHARE_TOLERANCE = 0.05
PER_SERVER_RATIO = 2.0
PER_SERVER_TOLERANCE = 0.15


def run_real(sc: dict, policy: dict, calls: int, directory: Path) -> dict:
    """One run on a fresh real cluster (``sc``: the scenario table): the
    applications write until the first one is done."""
    dev = sc["cluster"]["device"]
    unit = sc["cluster"]["stripe_unit"]
    spec = local.ClusterSpec(servers=sc["cluster"]["servers"], policy=policy["kind"],
                             policy_params={k: v for k, v in policy.items() if k != "kind"},
                             device={k: v for k, v in dev.items() if k != "kind"}, stripe_unit=unit, timeout_s=60.0)
    path = local.up(directory, spec)
    try:
        admin = fs.connect(path, app=999)
        apps = sc["apps"]
        for a in apps:
            admin.create(f"/{a['name']}", unit=unit, count=a["stripe_count"]).close()
        stop = threading.Event()
        finished = {a["name"]: 0 for a in apps}
        first_done = threading.Event()
        lock = threading.Lock()
        errors: list[BaseException] = []

        def rank(app_index: int, r: int) -> None:
            a = apps[app_index]
            size = a["request_size"]
            client = fs.connect(path, app=app_index + 1, rank=r)
            f = client.open(f"/{a['name']}", write=True)
            block = bytes([r + 1]) * size
            try:
                for k in range(calls):
                    if stop.is_set():
                        return
                    f.write((k * a["processes"] + r) * size, block)
            except BaseException as e:  # reported after the run
                errors.append(e)
                first_done.set()
                return
            with lock:
                finished[a["name"]] += 1
                if finished[a["name"]] == a["processes"]:
                    first_done.set()

        threads = [threading.Thread(target=rank, args=(i, r)) for i, a in enumerate(apps) for r in range(a["processes"])]
        for t in threads:
            t.start()
        first_done.wait()
        stats = admin.server_stats()
        stop.set()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    finally:
        local.down(directory)
    served = {a["name"]: sum(x["write_bytes"] for s in stats for x in s["apps"] if x["app"] == i + 1)
              for i, a in enumerate(apps)}
    return {"narrow_MB": served["narrow"] / 1e6, "wide_MB": served["wide"] / 1e6,
            "ratio": served["wide"] / served["narrow"],
            "reports": sum(s["reports"]["sent"] for s in stats)}


def evaluate(results: dict) -> list[Claim]:
    claims = []
    for world in ("real", "simulated"):
        plain, sync = results["sfq-d-plus"][world], results["service-sync"][world]
        claims.append(Claim(
            f"v7-{world}-total-service",
            f"{world.capitalize()}: with applications striped over 2 and 4 of 4 servers, per-server SFQ(D)+ gives the "
            "wide one about twice the narrow one's total service; service-sync brings it within 5% of the weights",
            f"SFQ(D)+ wide/narrow within {PER_SERVER_TOLERANCE:.0%} of {PER_SERVER_RATIO:g}; service-sync within "
            f"{SHARE_TOLERANCE:.0%} of 1, with reports exchanged",
            f"SFQ(D)+ {plain['ratio']:.3f}; service-sync {sync['ratio']:.3f} ({sync['reports']} reports)",
            abs(plain["ratio"] / PER_SERVER_RATIO - 1) <= PER_SERVER_TOLERANCE
            and abs(sync["ratio"] - 1) <= SHARE_TOLERANCE and sync["reports"] > 0,
        ))
    return claims


def table(results: dict) -> Table:
    t = Table(title="Uneven placement (narrow: 2 servers, wide: 4), equal weights: wide/narrow total service, "
                    "real cluster vs simulator", title_justify="left")
    for col in ("policy", "real wide/narrow", "simulated", "real narrow MB", "real wide MB", "real reports",
                "simulated reports"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for policy, r in results.items():
        real, sim = r["real"], r["simulated"]
        t.add_row(policy, f"{real['ratio']:.3f}", f"{sim['ratio']:.3f}", f"{real['narrow_MB']:.1f}",
                  f"{real['wide_MB']:.1f}", str(real["reports"]), str(sim["reports"]))
    return t


def run(out: Path, quick: bool, seed: int | None = None, status: Callable[[str], None] = print,
        workers: int = 1, dask: str | None = None) -> list[Claim]:
    sweep = load_sweep(experiments_dir() / "vpfs" / "uneven_real.toml", quick=quick)
    if seed is not None:
        sweep.seed = seed
    (point,) = sweep.points
    sc = tomllib.loads(sweep.text)["scenario"]
    calls = point.params.get("apps[0].requests", sc["apps"][0]["requests"])
    status("simulator ...")
    sweep.measure = "concerto.reproduce.vpfs:uneven_metrics"
    simulated = {r["policy"]: r for r in run_sweep(sweep, out=out / "sweeps" / sweep.id, workers=workers, dask=dask,
                                                   fresh=True).rows}
    results: dict[str, dict] = {}
    out.mkdir(parents=True, exist_ok=True)
    for name in sweep.policies:
        # The real servers run the very policy table the simulated run took.
        policy = point.policy_table(name)
        status(f"{name}: real cluster ...")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="concerto-total-service-") as tmp:
            real = run_real(sc, policy, calls, Path(tmp))
        real["wall_s"] = time.monotonic() - started
        sim = simulated[name]
        results[name] = {"real": real, "simulated": {k: sim[k] for k in ("narrow_MB", "wide_MB", "ratio", "reports")}}
    claims = evaluate(results)
    terminal.console(stderr=True).print(table(results))
    write_json(out / "results.json", results)
    write_json(out / "claims.json", [c.as_json() for c in claims])
    rows = [[p, f"{r['real']['ratio']:.3f}", f"{r['simulated']['ratio']:.3f}", f"{r['real']['narrow_MB']:.1f}",
             f"{r['real']['wide_MB']:.1f}", r["real"]["reports"], r["simulated"]["reports"]] for p, r in results.items()]
    report = ["# Total-service sharing on a real cluster and in the simulator", "",
              f"Mode: {'quick' if quick else 'full'}.", "",
              markdown_table(["policy", "real wide/narrow", "simulated", "real narrow MB", "real wide MB",
                              "real reports", "simulated reports"], rows), "", "## Claims", "",
              counts_line(claims) + ".", ""]
    report += [f"- **{c.status}** {c.id}: {c.claim}. Expected: {c.expected}. "
               f"Measured: {c.measured}." for c in claims]
    (out / "report.md").write_text("\n".join(report) + "\n")
    return claims
