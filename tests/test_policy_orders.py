"""The real servers start requests in the order their policy gives: the
arrival log records, beside each request's arrival, the order in which the
server's policy started it. Lustre NRS's CRR-N and ORR are checked against
their documented orders, and every policy whose order depends only on its
queue against core's own policy replayed on the same arrivals.

A request too large to finish quickly (8 MiB on a device throttled to
6 MB/s, the server holding one request in service) keeps the device busy
while the others arrive, so they all wait together in the policy's queue;
once it is done, the order in which the policy starts them is its own.
One server runs every round, switching policy live before each.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
import tomli_w

from concerto import _native
from concerto import cluster as local
from concerto import fs

UNIT = 64 << 10
PIECES = 6  # requests per client (CRR-N) or object (ORR)
BLOCKER_APP = 9
# The blocker: 1.4 s of the device, while the writes arrive (they take
# milliseconds; under a load of 8 on two cores, tens).
BLOCKER_BYTES = 8 << 20
ROUNDS = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Path:
    """A one-server cluster holding one request in service on a 6 MB/s device; stopped even when a test fails."""
    directory = tmp_path_factory.mktemp("orders") / "c"
    spec = local.ClusterSpec(servers=1, depth=1, stripe_unit=UNIT,
                             device={"bandwidth": "6MB/s", "latency": "1ms", "seek": "0ms", "parallelism": 1})
    try:
        yield local.up(directory, spec)
    finally:
        local.down(directory)


def _queued(client: fs.Client) -> int:
    return client.server_stats()[0]["queued"]


def _start_order(cluster: Path, policy: dict, writers: list[tuple[Callable[[Path], fs.Client], str, list[int]]]
                 ) -> tuple[list[dict], list[dict]]:
    """A round under ``policy`` (switched to live): a blocker's 8 MiB
    write, then every writer's 64 KiB writes (``(connect, name, offsets)``:
    how it connects, its file, and its writes' offsets in stripe units, each
    write a thread of its own) all queued behind it. Returns the writes'
    arrival-log entries in the order the policy started them, and the
    round's whole arrival log (from the switch on, in arrival order)."""
    admin = fs.connect(cluster)
    before = admin.arrivals()[0]
    after = before[-1]["seq"] if before else 0
    admin.set_policy(tomli_w.dumps(policy))
    root = f"/round{next(ROUNDS)}"
    admin.mkdir(root)
    big = fs.connect(cluster, app=BLOCKER_APP, rank=0).create(f"{root}/blocker", unit=UNIT, count=1)
    files = {name: connect(cluster).create(f"{root}/{name}", unit=UNIT, count=1) for connect, name, _ in writers}
    blocking = threading.Thread(target=big.write, args=(0, bytes(BLOCKER_BYTES)))
    blocking.start()
    deadline = time.monotonic() + 30
    while admin.server_stats()[0]["in_flight"] < 1:
        assert time.monotonic() < deadline, "the blocker never started"
        time.sleep(0.01)
    threads = [threading.Thread(target=files[name].write, args=(k * UNIT, bytes(UNIT)))
               for _, name, offsets in writers for k in offsets]
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
    log = sorted(admin.arrivals(after)[0], key=lambda a: a["seq"])
    writes = [a for a in log if a["op"] == "write" and a["app"] != BLOCKER_APP]
    assert len(writes) == total and all(a["started"] > 0 for a in writes), writes
    return sorted(writes, key=lambda a: a["started"]), log


def test_crr_n_gives_each_client_quantum_requests_a_turn_in_a_fixed_cycle(server):
    quantum, clients = 2, 3
    rng = random.Random(7)
    writers = [((lambda c, r=r: fs.connect(c, app=5, rank=r)), f"client{r}", rng.sample(range(64), PIECES))
               for r in range(clients)]
    started, _ = _start_order(server, {"kind": "crr-n", "quantum": quantum}, writers)
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


def test_orr_serves_each_objects_requests_in_one_batch_in_offset_order(server):
    rng = random.Random(11)
    writers = [((lambda c: fs.connect(c, app=6, rank=0)), f"object{k}", rng.sample(range(64), PIECES))
               for k in range(3)]
    started, _ = _start_order(server, {"kind": "orr"}, writers)
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


# Policies whose order depends only on what is queued (not on time: the
# coordinated window, capped's and service-sync's shares, dmclock's tags
# are clocks), each with one request in service.
REPLAYED = ["fifo", "per-object", "sfq", "sfq-d", "sfq-d-plus", "crr-n", "orr", "themisio"]


@pytest.mark.parametrize("name", REPLAYED)
def test_a_real_server_starts_requests_in_the_order_cores_policy_gives(server, name):
    # Two applications, three clients, three objects, 64 KiB writes at
    # shuffled offsets, all queued behind the blocker: the server's start
    # order is core's policy replayed on the arrival log, request for
    # request (the round's namespace requests included).
    policy = {"kind": name} | ({"depth": 1} if "depth" in _native.policy_keys(name) else {})
    rng = random.Random(3)
    writers = [((lambda c, a=a, r=r: fs.connect(c, app=a, rank=r)), f"w{a}-{r}", rng.sample(range(64), PIECES))
               for a, r in [(5, 0), (5, 1), (6, 0)]]
    _, log = _start_order(server, policy, writers)
    blocker = next(i for i, a in enumerate(log) if a["app"] == BLOCKER_APP and a["op"] == "write")
    requests = [(a["app"], a["rank"], a["op"], a["object"], a["offset"], a["bytes"]) for a in log]
    replayed = _native.replay_policy(policy, requests, blocker + 1)
    real = [i for i, a in sorted(((i, a) for i, a in enumerate(log) if a["started"]), key=lambda x: x[1]["started"])]
    assert real == replayed, f"{name}: real {real}, core {replayed}"
