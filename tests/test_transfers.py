"""How the real client shapes its requests, seen where they land, in the
servers' arrival logs: Clusterfile's transfer orderings, and core's
read-ahead beside the simulator's client running the same policy."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from concerto import cluster as local
from concerto import fs
from concerto.sim import ScenarioSource, simulate
from conftest import ROOT, mounted_at

SERVERS = 4
UNIT = 64 << 10
BLOCK = 32 << 10
PER_CLIENT = 1 << 20  # 16 stripe units: 4 on each server, 8 blocks each


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("cluster")
    path = local.up(directory, local.ClusterSpec(servers=SERVERS, policy="fifo", stripe_unit=UNIT, timeout_s=5.0))
    yield path
    local.down(directory)


def _marks(admin: fs.Client) -> list[int]:
    """Each server's last logged request number (arrivals are numbered per server): where a test's own begin."""
    return [log[-1]["seq"] if log else 0 for log in admin.arrivals()]


def _writes(admin: fs.Client, marks: list[int], app: int, inode: int) -> list[dict]:
    """The application's writes to the file's objects after the marks, each with its server, in arrival time."""
    out = []
    for server, log in enumerate(admin.arrivals()):
        assert isinstance(log, list), log
        out += [a | {"server": server} for a in log
                if a["seq"] > marks[server] and a["app"] == app and a["op"] == "write" and a["object"] == inode]
    return sorted(out, key=lambda a: a["at_ns"])


def _write_in_order(cluster: Path, app: int, rank: int, transfers: str | None, path: str, offset: int) -> int:
    client = fs.connect(cluster, app=app, rank=rank, transfers=transfers)
    f = client.create(path, unit=UNIT, count=SERVERS, exclusive=False)
    f.write(offset, bytes([rank + 1]) * PER_CLIENT)
    return client.stat(path).inode


@pytest.mark.parametrize("ordering", ["first-ios", "random-ios", "hash-ios"])
def test_each_ordering_sends_every_block_once_and_each_servers_in_offset_order(cluster, ordering):
    admin = fs.connect(cluster, app=1)
    app = 300 + ["first-ios", "random-ios", "hash-ios"].index(ordering)
    mark = _marks(admin)
    inode = _write_in_order(cluster, app, 1, f"{ordering},block={BLOCK},seed=7", f"/{ordering}", 0)
    writes = _writes(admin, mark, app, inode)
    # One transfer at a time: each block arrives once, whole.
    assert len(writes) == PER_CLIENT // BLOCK and all(w["bytes"] == BLOCK for w in writes), writes
    for server in range(SERVERS):
        offsets = [w["offset"] for w in writes if w["server"] == server]
        assert offsets == list(range(0, PER_CLIENT // SERVERS, BLOCK)), (server, offsets)
    servers = [w["server"] for w in writes]
    # File order: a stripe unit's two blocks, then the next server of the file's layout.
    file_order = [s for _ in range(4) for s in admin.stat(f"/{ordering}").servers for _ in range(2)]
    if ordering == "first-ios":
        assert servers == file_order
    elif ordering == "hash-ios":
        # Client 1 at step j sends to server (1 + j) mod 4.
        assert servers == [(1 + j) % SERVERS for j in range(len(writes))]
    else:
        # Seeded: the same seed gives the same order on another file, and it is not file order.
        mark = _marks(admin)
        again = _write_in_order(cluster, app, 1, f"{ordering},block={BLOCK},seed=7", f"/{ordering}-again", 0)
        assert [w["server"] for w in _writes(admin, mark, app, again)] == servers
        assert servers != file_order
    data = admin.open(f"/{ordering}").read(0, PER_CLIENT)
    assert data == bytes([2]) * PER_CLIENT


def test_hash_ios_clients_as_many_as_servers_never_send_to_one_server_at_one_step(cluster):
    # Four processes of one job (ranks 0-3) write their own MiB of one file
    # at once under hash-IOS: at every step the four go to four different
    # servers, as the servers' logs show.
    admin = fs.connect(cluster, app=1)
    app = 310
    fs.connect(cluster, app=app).create("/shared", unit=UNIT, count=SERVERS).write(SERVERS * PER_CLIENT - 1, b"\0")
    mark = _marks(admin)
    errors = []

    def rank(r: int) -> None:
        try:
            _write_in_order(cluster, app, r, f"hash-ios,block={BLOCK}", "/shared", r * PER_CLIENT)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(SERVERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    inode = admin.stat("/shared").inode
    writes = _writes(admin, mark, app, inode)
    steps = PER_CLIENT // BLOCK
    per_rank = {r: [w["server"] for w in writes if w["rank"] == r] for r in range(SERVERS)}
    assert all(len(s) == steps for s in per_rank.values()), per_rank
    for j in range(steps):
        assert sorted(per_rank[r][j] for r in range(SERVERS)) == list(range(SERVERS)), (j, per_rank)
    data = admin.open("/shared").read(0, SERVERS * PER_CLIENT)
    assert data == b"".join(bytes([r + 1]) * PER_CLIENT for r in range(SERVERS))


def test_a_read_in_order_gets_the_same_bytes(cluster):
    admin = fs.connect(cluster, app=1)
    f = admin.create("/mixed", unit=UNIT, count=SERVERS)
    payload = bytes(range(256)) * (3 * PER_CLIENT // 256)
    f.write(12345, payload)
    for ordering in ("first-ios", "random-ios,in-flight=3", "hash-ios,block=20000"):
        reader = fs.connect(cluster, app=2, rank=3, transfers=ordering)
        assert reader.open("/mixed").read(12345, len(payload)) == payload, ordering


def test_a_mount_sends_each_callers_writes_in_blocks_of_its_order(cluster, tmp_path):
    # An unmodified program (dd) writes through a mount that orders its
    # transfers: the servers see blocks of at most 16 KiB, each server's in
    # ascending offsets, and the file reads back whole.
    admin = fs.connect(cluster, app=1)
    marks = _marks(admin)
    with mounted_at(cluster, tmp_path / "mnt", "--transfers", "hash-ios,block=16KiB", "--write-behind", "0"):
        subprocess.run(["dd", "if=/dev/urandom", f"of={tmp_path / 'mnt' / 'dd.bin'}", "bs=256k", "count=4",
                        "conv=fsync", "status=none"], check=True, timeout=60, env={**os.environ, "CONCERTO_APP_ID": "320"})
        expected = (tmp_path / "mnt" / "dd.bin").read_bytes()
    inode = admin.stat("/dd.bin").inode
    writes = _writes(admin, marks, 320, inode)
    assert sum(w["bytes"] for w in writes) == 1 << 20 and all(w["bytes"] <= 16 << 10 for w in writes), writes
    for server in range(SERVERS):
        offsets = [w["offset"] for w in writes if w["server"] == server]
        assert offsets == sorted(offsets), (server, offsets)
    assert admin.open("/dd.bin").read(0, 1 << 20) == expected


def test_a_bad_transfer_order_is_named():
    with pytest.raises(ValueError, match=r"transfers: \"in-flight\" is not KEY=VALUE"):
        fs.Client(Path(__file__).parent.parent / "README.md", transfers="hash-ios,in-flight")


def test_cluster_arrivals_shows_each_servers_latest_requests(cluster):
    from conftest import concerto

    f = fs.connect(cluster, app=330, rank=2).create("/shown", unit=UNIT, count=SERVERS)
    f.write(0, bytes(SERVERS * UNIT))
    r = concerto("cluster", "arrivals", "--cluster", str(cluster), "--json")
    assert r.returncode == 0, r.stderr
    logs = json.loads(r.stdout)
    assert len(logs) == SERVERS
    for log in logs:
        ours = [(a["rank"], a["op"], a["bytes"]) for a in log if a["app"] == 330 and a["op"] != "metadata"]
        assert ours == [(2, "write", UNIT)], log
    r = concerto("cluster", "arrivals", "--cluster", str(cluster), "--last", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("1 of its latest") == SERVERS and "330" in r.stdout, r.stdout
    r = concerto("cluster", "arrivals", "--cluster", str(cluster), "--last", "0")
    assert r.returncode != 0 and "--last" in r.stderr, r.stderr


def test_the_environment_names_a_transfer_order_and_its_mistakes(cluster, monkeypatch):
    monkeypatch.setenv("CONCERTO_TRANSFERS", "hash-ios,in-flight=x")
    with pytest.raises(ValueError, match=r"CONCERTO_TRANSFERS: in-flight=x: not a whole number"):
        fs.connect(cluster, app=340)
    monkeypatch.setenv("CONCERTO_TRANSFERS", f"hash-ios,block={BLOCK}")
    admin = fs.connect(cluster, app=1)
    marks = _marks(admin)
    inode = _write_in_order(cluster, 341, 0, None, "/from-env", 0)
    writes = _writes(admin, marks, 341, inode)
    assert [w["server"] for w in writes] == [j % SERVERS for j in range(PER_CLIENT // BLOCK)]


# One process reading 16 MiB sequentially in 1 MiB reads, on four servers
# of 64 KiB stripes: the simulator's side, the scenario its own tests read.
READER = (ROOT / "crates" / "concerto-sim" / "tests" / "read_ahead.toml").read_text()


def test_a_sequential_reader_sends_the_simulated_readers_requests_and_fetches_past_the_end_only(cluster, tmp_path):
    # issue 55: core's read-ahead runs in both worlds, so the real client's
    # reads of a file reach each server as the simulated client's do. The
    # one difference is known and bounded: the real client does not know
    # where the file ends (an open does not say its size), so its last
    # chunk asks a whole MiB of each server and it fetches on, up to one
    # window (16 MiB), until a fetch comes back short; the simulator knows
    # the size and stops there.
    size, per_server = 16 << 20, (16 << 20) // SERVERS
    detail = tmp_path / "requests.csv"
    simulate(ScenarioSource(text=READER, label="read-ahead"), reps=1, detail_csv=detail)
    simulated: dict[int, list[int]] = {s: [] for s in range(SERVERS)}
    for row in csv.DictReader(open(detail)):
        if row["op"] == "read":
            simulated[int(row["server"])].append(int(row["bytes"]))

    writer = fs.connect(cluster, app=410)
    with writer.create("/read-ahead", unit=UNIT, count=SERVERS) as f:
        for i in range(size >> 20):
            f.write(i << 20, bytes([i]) * (1 << 20))
    admin = fs.connect(cluster, app=1)
    marks = _marks(admin)
    reader = fs.connect(cluster, app=411)
    with reader.open("/read-ahead") as f:
        inode = f.inode
        for i in range(size >> 20):
            assert f.read(i << 20, 1 << 20) == bytes([i]) * (1 << 20), i
    within: dict[int, list[int]] = {s: [] for s in range(SERVERS)}
    past = []
    for server, log in enumerate(admin.arrivals()):
        for a in log:
            if a["seq"] <= marks[server] or a["app"] != 411 or a["op"] != "read" or a["object"] != inode:
                continue
            if a["offset"] < per_server:
                within[server].append(min(a["bytes"], per_server - a["offset"]))
            else:
                past.append(a["bytes"])
    for server in range(SERVERS):
        assert sorted(within[server]) == sorted(simulated[server]), (server, within, simulated)
        assert sum(simulated[server]) == per_server, simulated
    # Without read-ahead each 1 MiB read would be four requests of 256 KiB
    # (64 in all); both worlds send 24 within the file.
    assert sum(map(len, within.values())) == 24, within
    assert sum(past) <= 16 << 20, past
