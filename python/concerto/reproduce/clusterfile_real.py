"""``concerto reproduce clusterfile --real``: Clusterfile's synthetic
benchmark (Section 7.1) on real bytes, across network namespaces, beside
the simulator given the same links.

Scaled to one machine: 4 client groups and 4 servers, each in a network
namespace of its own, every link limited by ``tbf`` (so the network, not
the machine's two cores, is the bottleneck, as the paper's 120 MB/s
network was); each client writes, then reads back, its own contiguous
region of one file striped in 64 KiB units over the 4 servers, cutting it
into blocks of at most b bytes of one server's data and sending them one
at a time in the order of its heuristic (the client library's transfer
ordering: concerto-core's ``client::ordering``, the simulator's code). The
simulator's network parameters come from a measurement of the links made
first (``netns.measure_links``: a TCP stream's rate and round trips).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from concerto import _native, fs, netns
from concerto import cluster as local
from concerto.report import line_plot, markdown_table, write_json
from concerto.reproduce import Claim, report_head

ORDERINGS = ["first-ios", "random-ios", "hash-ios"]
OPS = ["write", "read"]
SERVERS = CLIENTS = 4
UNIT = 64 << 10
# Each way on every link. Low enough that four clients cannot saturate the
# machine's cores, high enough that a run takes a second or two.
LINK_RATE = 12.5e6
# The simulator's twin must agree with the real run within this, cell by
# cell (throughput ratio real / simulated, either way).
TWIN_TOLERANCE = 0.25
# Two strategies whose simulated throughputs differ by less than this are a
# tie: their order on real bytes is not checked.
TIE = 0.10
# A spread (best / worst - 1 over the three strategies) on real bytes must
# come within this factor of the simulator's, either way.
SPREAD_FACTOR = 1.5
# The paper's spreads between strategies on its hardware (Section 7.1).
PAPER_SPREAD = {"write": 0.86, "read": 8.04}


def _grid(quick: bool) -> tuple[list[int], int, int]:
    """Schedule blocks b, repetitions, and each client's bytes."""
    if quick:
        return [UNIT, 2 << 20], 1, 4 << 20
    return [16 << 10, UNIT, 256 << 10, 1 << 20, 2 << 20], 3, 8 << 20


# ---------------------------------------------------------------- the real side

WORKER = r"""
import json, sys, time
from concerto import fs
cluster, rank = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
for line in sys.stdin:
    cell = json.loads(line)
    client = fs.connect(cluster, app=cell["app"], rank=rank,
                        transfers=f"{cell['ordering']},block={cell['block']}")
    f = client.create(cell["path"], unit=cell["unit"], count=cell["servers"], exclusive=False)
    client.ping()  # every server's connection open (and authenticated) before the start
    at = rank * cell["size"]
    # Every client starts at the same moment (the machine's monotonic clock, shared by the namespaces).
    while time.monotonic_ns() < cell["start_ns"]:
        time.sleep(0.0005)
    start = time.monotonic_ns()
    if cell["op"] == "write":
        f.write(at, bytes([rank + 1]) * cell["size"])
    else:
        data = f.read_list([(at, cell["size"])])
        assert data == bytes([rank + 1]) * cell["size"], "read back other bytes"
    end = time.monotonic_ns()
    print(json.dumps({"start_ns": start, "end_ns": end}), flush=True)
"""


class Workers:
    """One long-lived client process per client group, each in its namespace."""

    def __init__(self, net: netns.Network, cluster: Path):
        self.procs = [subprocess.Popen([*net.enter("c", j), sys.executable, "-c", WORKER, str(cluster), str(j)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                      for j in range(net.clients)]
        for p in self.procs:
            self._line(p)

    def _line(self, p: subprocess.Popen) -> str:
        line = p.stdout.readline()
        if not line:
            p.wait(10)
            raise RuntimeError(f"a client process stopped (exit code {p.returncode})")
        return line

    def run(self, cell: dict) -> tuple[float, int, int]:
        """The cell on every client at once: the aggregate throughput,
        bytes/s, and when the first client started and the last ended (the
        machine's monotonic clock, the servers' arrival logs' too)."""
        cell = cell | {"start_ns": time.monotonic_ns() + 300_000_000}
        for p in self.procs:
            p.stdin.write(json.dumps(cell) + "\n")
            p.stdin.flush()
        times = [json.loads(self._line(p)) for p in self.procs]
        start, end = min(t["start_ns"] for t in times), max(t["end_ns"] for t in times)
        return len(self.procs) * cell["size"] * 1e9 / (end - start), start, end

    def close(self) -> None:
        for p in self.procs:
            if p.stdin:
                p.stdin.close()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


# Two reading clients "meet" at a server when one's request reaches it
# before half of the block it sends the other, asked for just before, could
# have crossed a link: the later then waits for or shares that link. A read
# request arrives before its data leaves, so the arrival logs show this; a
# write arrives with its data, after any wait, so for writes they cannot.
MEET_FRACTION = 0.5


def read_meetings(logs: list[list[dict]], start_ns: int, end_ns: int, rate: float) -> tuple[int, int]:
    """How often reading clients met at a server during one cell, from the
    servers' arrival logs: (meetings, consecutive reads from two clients)
    over every server's reads between ``start_ns`` and ``end_ns``."""
    met = pairs = 0
    for server, log in enumerate(logs):
        if isinstance(log, dict):
            raise RuntimeError(f"server {server}'s arrival log: {log['error']}")
        here = sorted((a["at_ns"], a["rank"], a["bytes"]) for a in log
                      if a["op"] == "read" and start_ns <= a["at_ns"] <= end_ns)
        for (t0, r0, size), (t1, r1, _) in zip(here, here[1:]):
            if r0 != r1:
                pairs += 1
                met += (t1 - t0) < MEET_FRACTION * size / rate * 1e9
    return met, pairs


def run_real(directory: Path, quick: bool, status: Callable[[str], None]) -> dict[str, Any]:
    blocks, reps, size = _grid(quick)
    spec = local.ClusterSpec(servers=SERVERS, netns=True, clients=CLIENTS, link_rate=LINK_RATE, stripe_unit=UNIT,
                             timeout_s=30.0)
    cluster = local.up(directory, spec)
    try:
        net = netns.load(directory)
        # What it made, by identity, for whoever checks that it is gone.
        made = netns.footprint(net)
        status(f"measuring the links (each {LINK_RATE / 1e6:g} MB/s by tbf)")
        # On the links themselves, beside the file system: the median of
        # five writes through it read 10.8-11.0 MB/s of a 12.5 MB/s link on
        # a loaded CI machine (11.8-11.9 otherwise), where the run then moved
        # 11.7 through each.
        links = netns.measure_links(net)
        admin = fs.connect(cluster, app=99)
        workers = Workers(net, cluster)
        try:
            cells = []
            for rep in range(reps):
                for b in blocks:
                    for ordering in ORDERINGS:
                        path = f"/synthetic-{ordering}-{b}-{rep}"
                        for op in OPS:  # written, then read back
                            status(f"real: {op} {ordering} b={b} rep {rep + 1}/{reps}")
                            cell = {"app": 100 + ORDERINGS.index(ordering), "ordering": ordering, "block": b,
                                    "path": path, "unit": UNIT, "servers": SERVERS, "size": size, "op": op}
                            throughput, start, end = workers.run(cell)
                            cells.append({"op": op, "ordering": ordering, "block": b, "rep": rep,
                                          "throughput_Bps": throughput})
                            if op == "read":
                                met, pairs = read_meetings(admin.arrivals(), start, end, links["rate_Bps"])
                                cells[-1] |= {"meetings": met, "read_pairs": pairs}
        finally:
            workers.close()
        return {"links": links, "cells": cells, "namespaces": made}
    finally:
        local.down(directory)


# ---------------------------------------------------------------- the simulator's twin

def twin_scenario(links: dict[str, float], size: int) -> str:
    """The real run as a scenario: the measured link rate on every NIC
    (queued mode: each NIC serializes what it sends and what it receives),
    half the measured round trip as latency, storage much faster than the
    links (the servers' page cache)."""
    latency_us = max(1, round(links["rtt_s"] / 2 * 1e6))
    rate = links["rate_Bps"]
    return f"""
name = "clusterfile-real-twin"
[policy]
kind = "fifo"
[cluster]
servers = {SERVERS}
stripe_unit = {UNIT}
[cluster.network]
mode = "queued"
latency = "{latency_us}us"
client_bandwidth = "{rate:.0f}B/s"
server_bandwidth = "{rate:.0f}B/s"
[cluster.device]
kind = "emulated"
bandwidth = "1GB/s"
latency = "20us"
seek = "0us"
[[apps]]
name = "synthetic"
workload = "ior"
processes = {CLIENTS}
requests = 1
request_size = {size}
pattern = "contiguous"
op = "write"
ordering = "first-ios"
"""


def run_twin(links: dict[str, float], quick: bool, seed: int) -> list[dict]:
    blocks, reps, size = _grid(quick)
    text = twin_scenario(links, size)
    cells = []
    for b in blocks:
        for ordering in ORDERINGS:
            for op in OPS:
                overrides = [f'apps[0].ordering="{ordering}"', f'apps[0].op="{op}"', f"apps[0].schedule_block={b}"]
                r = _native.simulate(text, None, overrides, seed, max(reps, 3), None, None)
                cells.append({"op": op, "ordering": ordering, "block": b,
                              "throughput_Bps": r["aggregate"]["aggregate_bandwidth_Bps"]["mean"]})
    return cells


# ---------------------------------------------------------------- claims

def mean_throughput(cells: list[dict], op: str, ordering: str, b: int) -> float:
    return statistics.mean(c["throughput_Bps"] for c in cells
                           if (c["op"], c["ordering"], c["block"]) == (op, ordering, b))


def _spread(cells: list[dict], op: str, b: int) -> tuple[float, str, str]:
    means = {o: mean_throughput(cells, op, o, b) for o in ORDERINGS}
    best, worst = max(means, key=means.get), min(means, key=means.get)
    return means[best] / means[worst] - 1, best, worst


# Why the worlds can differ, found on the first runs: the simulator's NIC
# (queued mode) takes in the messages that reach it one after the other,
# first come first served, while TCP shares a link among the flows on it.
# When first- or random-IOS clients meet at one server, the simulated
# clients finish their blocks one after another and drift apart into a
# pipeline; the real ones share the link, finish together, and meet again
# at the next server, so they stay in lockstep and go slower. Where no two
# transfers ever meet at a NIC (hash-IOS, clients as many as servers) the
# difference cannot arise, and there the twin must hold the tolerance.
# But hash-IOS keeps clients apart only while they stay in step: on real
# links they can drift out of it (found on CI, 2026-11-27: reads at 64 KiB
# at 0.71-0.87 of the simulator over 12 quick runs while writes held
# 0.97-0.98; the servers' arrival logs showed 17-28% of the read requests
# reaching a server within a fraction of a block of another client's, under
# 2% of the writes; the later client then waits for the link). The strict
# check is for hash-IOS writes, where a client's own link paces it (it is
# busy at every step), and the hash-IOS reads whose clients, by the arrival
# logs, did not meet.
CAUSE = ("the simulator's NIC takes in colliding transfers first come first served, where TCP shares the link: "
         "real colliding clients stay in lockstep, simulated ones drift into a pipeline")
# Off by more than this anywhere, the cause above no longer explains it.
TWIN_BOUND = 0.5
# Colliding clients in full lockstep all send to one server at every step:
# together they get one link's rate (its measured payload rate, less what
# the moves from server to server cost).
LOCKSTEP_FLOOR = 0.9
# A read cell's clients "kept apart" when fewer than this share of
# consecutive reads at a server (from two clients) were meetings.
APART_SHARE = 0.05


def met_share(cells: list[dict], ordering: str, b: int) -> float:
    """The share of consecutive reads from two clients at a server that were
    meetings, over the repetitions of one read cell."""
    here = [c for c in cells if (c["op"], c["ordering"], c["block"]) == ("read", ordering, b)]
    return sum(c["meetings"] for c in here) / max(1, sum(c["read_pairs"] for c in here))


def kept_apart(cells: list[dict], op: str, ordering: str, b: int) -> bool:
    """Whether no two of a hash-IOS cell's transfers met at a NIC: writes,
    paced by each client's own busy link; reads, by the arrival logs."""
    return ordering == "hash-ios" and (op == "write" or met_share(cells, ordering, b) < APART_SHARE)


def _twin_claim(real: list[dict], sim: list[dict], blocks: list[int]) -> Claim:
    ratios = {(op, o, b): mean_throughput(real, op, o, b) / mean_throughput(sim, op, o, b)
              for op in OPS for o in ORDERINGS for b in blocks}
    far = lambda r, tol: abs(r - 1) > tol  # noqa: E731
    worst = max(ratios, key=lambda k: abs(ratios[k] - 1))
    measured = (f"{min(ratios.values()):.2f}-{max(ratios.values()):.2f} (furthest: {worst[0]} {worst[1]} "
                f"b={worst[2] >> 10} KiB, {ratios[worst]:.2f})")
    claim = "the simulator, given the measured links, predicts every cell's throughput on real bytes"
    expected = f"real / simulated within {1 - TWIN_TOLERANCE:.2f}-{1 + TWIN_TOLERANCE:.2f} in all {len(ratios)} cells"
    if not any(far(r, TWIN_TOLERANCE) for r in ratios.values()):
        return Claim("cf-real-twin", claim, expected, measured, True)
    off = sorted(k for k, r in ratios.items() if far(r, TWIN_TOLERANCE))
    apart = [k for k in ratios if kept_apart(real, *k)]
    conflict_free_ok = not any(far(ratios[k], TWIN_TOLERANCE) for k in apart)
    bounded = all(not far(r, TWIN_BOUND) for r in ratios.values())
    met = lambda op, o, b: f" (clients met at {met_share(real, o, b):.0%} of reads)" if op == "read" else ""  # noqa: E731
    cells = ", ".join(f"{op} {o} b={b >> 10} KiB {ratios[(op, o, b)]:.2f}{met(op, o, b)}" for op, o, b in off)
    return Claim("cf-real-twin", claim, expected + f"; not reproduced while {CAUSE}: bound — every hash-IOS cell "
                 f"whose clients kept apart (no two transfers at a NIC: writes, and reads where the servers' arrival "
                 f"logs show clients met at under {APART_SHARE:.0%} of reads) within the tolerance, every cell within "
                 f"{1 - TWIN_BOUND:.2f}-{1 + TWIN_BOUND:.2f}",
                 f"{measured}; hash-IOS cells kept apart: {len(apart)} of {len(blocks) * len(OPS)}; outside the "
                 f"tolerance: {cells}", conflict_free_ok and bounded, reproduced=False)


def evaluate(results: dict) -> list[Claim]:
    real, sim = results["real"], results["simulated"]
    blocks = sorted({c["block"] for c in real})
    largest = blocks[-1]
    claims = [_twin_claim(real, sim, blocks)]
    for op in OPS:
        sim_means = {o: mean_throughput(sim, op, o, largest) for o in ORDERINGS}
        real_means = {o: mean_throughput(real, op, o, largest) for o in ORDERINGS}
        pairs = [(a, b) for i, a in enumerate(ORDERINGS) for b in ORDERINGS[i + 1:]
                 if abs(sim_means[a] / sim_means[b] - 1) > TIE]
        agree = [(a, b) for a, b in pairs if (sim_means[a] > sim_means[b]) == (real_means[a] > real_means[b])]
        fmt = lambda m: ", ".join(f"{o} {m[o] / 1e6:.1f}" for o in sorted(m, key=m.get, reverse=True))  # noqa: E731
        claims.append(Claim(
            f"cf-real-order-{op}", f"{op}s at b = {largest >> 10} KiB: the strategies rank on real bytes as in the "
            f"simulator (pairs the simulator separates by more than {TIE:.0%})",
            f"simulated MB/s: {fmt(sim_means)}; {len(pairs)} pair(s) to rank",
            f"real MB/s: {fmt(real_means)}; {len(agree)} of {len(pairs)} pair(s) in the same order",
            len(agree) == len(pairs)))
        real_spread, rb, rw = _spread(real, op, largest)
        sim_spread, sb, sw = _spread(sim, op, largest)
        low, high = sim_spread / SPREAD_FACTOR, sim_spread * SPREAD_FACTOR
        claim = (f"{op}s at b = {largest >> 10} KiB: the spread between the best and the worst strategy on real "
                 f"bytes is the simulator's (the paper's on its hardware: {PAPER_SPREAD[op]:.0%})")
        expected = f"within a factor {SPREAD_FACTOR} of the simulator's {sim_spread:.0%} ({sb} over {sw}): {low:.0%}-{high:.0%}"
        measured = f"{real_spread:.0%} ({rb} over {rw})"
        if real_spread <= high:
            claims.append(Claim(f"cf-real-spread-{op}", claim, expected, measured, low <= real_spread))
        else:
            # Above: the direction the cause predicts (real colliding clients
            # slower), and at worst every client at one server at every step:
            # the worst strategy no slower than one link.
            link = results["links"]["rate_Bps"]
            floor = LOCKSTEP_FLOOR * link
            claims.append(Claim(
                f"cf-real-spread-{op}", claim, expected + f"; not reproduced while {CAUSE}: bound — above the "
                f"simulator's, the worst strategy at least {LOCKSTEP_FLOOR} of one link ({floor / 1e6:.1f} MB/s: "
                "every client at one server at every step)",
                measured + f"; {rw} {real_means[rw] / 1e6:.1f} MB/s", real_means[rw] >= floor, reproduced=False))
    return claims


# ---------------------------------------------------------------- outputs

def write_outputs(out: Path, results: dict, claims: list[Claim], quick: bool) -> None:
    blocks = sorted({c["block"] for c in results["real"]})
    rows, table = [], []
    for op in OPS:
        for b in blocks:
            for o in ORDERINGS:
                means = {w: mean_throughput(results[w], op, o, b) for w in ("real", "simulated")}
                for world, mean in means.items():
                    rows.append({"params": {"op": op, "block": b, "ordering": o, "world": world},
                                 "throughput_MBps": mean / 1e6})
                table.append([op, f"{b >> 10} KiB", o, f"{means['real'] / 1e6:.1f}",
                              f"{means['simulated'] / 1e6:.1f}", f"{means['real'] / means['simulated']:.2f}",
                              f"{met_share(results['real'], o, b):.0%}" if op == "read" else "-"])
    line_plot(rows, x="block", y="throughput_MBps", series=["ordering", "world"], facet="op", path=out / "real",
              title="Synthetic benchmark on real bytes", xlabel="schedule block b (bytes)",
              ylabel="aggregate throughput (MB/s)", logx=True)
    links = results["links"]
    _, _, size = _grid(quick)
    about = (
        f"{CLIENTS} client groups and {SERVERS} servers, each in a network namespace of its own, every link "
        f"limited to {LINK_RATE / 1e6:g} MB/s each way by tbf; each client writes, then reads back, its own "
        f"{size >> 20} MiB region of one file striped in {UNIT >> 10} KiB units over the servers, in blocks of "
        "at most b bytes of one server's data, one at a time, in its heuristic's order "
        "(`fs.connect(..., transfers=...)`). The simulator is given the links as measured first: "
        f"{links['rate_Bps'] / 1e6:.2f} MB/s through one link, a request's round trip {links['rtt_s'] * 1e6:.0f} us."
    )
    text = [
        *report_head("Clusterfile's synthetic benchmark on real bytes", "clusterfile --real", quick, about, claims),
        "## Throughput, real beside simulated (means over the repetitions)",
        "",
        markdown_table(["op", "b", "ordering", "real MB/s", "simulated MB/s", "real / sim", "clients met (reads)"],
                       table),
        "",
        "*clients met*: the share of consecutive reads from two clients at a server (its arrival log) where the "
        f"later reached it before {MEET_FRACTION:g} of the earlier's block could have crossed a link.",
        "",
        "![throughput](real.png)",
    ]
    (out / "report.md").write_text("\n".join(text) + "\n")
    write_json(out / "results.json", results)
    write_json(out / "claims.json", [c.as_json() for c in claims])


def run(out: Path, quick: bool, seed: int | None = None, status: Callable[[str], None] = print) -> list[Claim]:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="concerto-cf-real-") as tmp:
        real = run_real(Path(tmp) / "cluster", quick, status)
    status("the simulator's twin")
    results = {"links": real["links"], "real": real["cells"], "namespaces": real["namespaces"],
               "simulated": run_twin(real["links"], quick, 1 if seed is None else seed)}
    claims = evaluate(results)
    write_outputs(out, results, claims, quick)
    return claims
