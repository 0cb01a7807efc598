"""Lustre NRS's CRR-N and ORR serve in their documented orders on a real
server: the arrival log records, beside each request's arrival, the order
in which the server's policy started it.

A request too large to finish quickly (16 MiB on a device throttled to
4 MB/s, the server holding one request in service) keeps the device busy
while the others arrive, so they all wait together in the policy's queue;
once it is done, the order in which the policy starts them is its own.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Callable

from concerto import cluster as local
from concerto import fs

UNIT = 64 << 10
PIECES = 6  # requests per client (CRR-N) or object (ORR)
BLOCKER_APP = 9


def _queued(client: fs.Client) -> int:
    return client.server_stats()[0]["queued"]


def _start_order(tmp_path, policy: dict, writers: list[tuple[Callable[[Path], fs.Client], str, list[int]]]
                 ) -> list[dict]:
    """On a one-server cluster running ``policy``: a blocker's 16 MiB write,
    then every writer's 64 KiB writes (``(connect, path, offsets)``: how it
    connects, its file, and its writes' offsets in stripe units, each write
    a thread of its own) all queued behind it; the writes' arrival-log
    entries in the order the policy started them."""
    directory = tmp_path / "c"
    spec = local.ClusterSpec(servers=1, policy=policy["kind"],
                             policy_params={k: v for k, v in policy.items() if k != "kind"}, depth=1,
                             device={"bandwidth": "4MB/s", "latency": "1ms", "seek": "0ms", "parallelism": 1},
                             stripe_unit=UNIT)
    cluster = local.up(directory, spec)
    try:
        admin = fs.connect(cluster)
        blocker = fs.connect(cluster, app=BLOCKER_APP, rank=0)
        big = blocker.create("/blocker", unit=UNIT, count=1)
        files = {path: connect(cluster).create(path, unit=UNIT, count=1) for connect, path, _ in writers}
        blocking = threading.Thread(target=big.write, args=(0, bytes(16 << 20)))
        blocking.start()
        deadline = time.monotonic() + 30
        while admin.server_stats()[0]["in_flight"] < 1:
            assert time.monotonic() < deadline, "the blocker never started"
            time.sleep(0.01)
        threads = [threading.Thread(target=files[path].write, args=(k * UNIT, bytes(UNIT)))
                   for _, path, offsets in writers for k in offsets]
        for t in threads:
            t.start()
        total = len(threads)
        while _queued(admin) < total:
            assert time.monotonic() < deadline, f"{_queued(admin)} of {total} writes queued"
            time.sleep(0.01)
        # Every write waited behind the blocker: the policy saw them together.
        assert blocking.is_alive(), "the blocker finished before every write had arrived"
        blocking.join()
        for t in threads:
            t.join()
        log = admin.arrivals()[0]
        writes = [a for a in log if a["op"] == "write" and a["app"] != BLOCKER_APP]
        assert len(writes) == total and all(a["started"] > 0 for a in writes), writes
        return sorted(writes, key=lambda a: a["started"])
    finally:
        local.down(directory)


def test_crr_n_gives_each_client_quantum_requests_a_turn_in_a_fixed_cycle(tmp_path):
    quantum, clients = 2, 3
    rng = random.Random(7)
    writers = [((lambda c, r=r: fs.connect(c, app=5, rank=r)), f"/client{r}", rng.sample(range(64), PIECES))
               for r in range(clients)]
    started = _start_order(tmp_path, {"kind": "crr-n", "quantum": quantum}, writers)
    turns = [started[i:i + quantum] for i in range(0, len(started), quantum)]
    ranks = [{a["rank"] for a in turn} for turn in turns]
    assert all(len(r) == 1 for r in ranks), f"a turn mixed clients: {ranks}"
    cycle = [r.pop() for r in ranks]
    assert len(set(cycle[:clients])) == clients, cycle
    assert cycle == cycle[:clients] * (PIECES // quantum), f"the turns are not a fixed cycle: {cycle}"
    # Within a client, first come first served.
    for r in range(clients):
        mine = [a["seq"] for a in started if a["rank"] == r]
        assert mine == sorted(mine), (r, mine)


def test_orr_serves_each_objects_requests_in_one_batch_in_offset_order(tmp_path):
    rng = random.Random(11)
    writers = [((lambda c: fs.connect(c, app=6, rank=0)), f"/object{k}", rng.sample(range(64), PIECES))
               for k in range(3)]
    started = _start_order(tmp_path, {"kind": "orr"}, writers)
    batches: list[list[dict]] = []
    for a in started:
        if batches and batches[-1][-1]["object"] == a["object"]:
            batches[-1].append(a)
        else:
            batches.append([a])
    objects = [b[0]["object"] for b in batches]
    assert len(objects) == len(set(objects)) == 3, f"an object's requests in more than one batch: {objects}"
    for b in batches:
        offsets = [a["offset"] for a in b]
        assert offsets == sorted(offsets), f"object {b[0]['object']}: {offsets}"
    # Arrival order was not already offset order (the check would then prove nothing).
    arrived = sorted(started, key=lambda a: a["seq"])
    assert [a["offset"] for a in arrived] != [a["offset"] for a in started]
