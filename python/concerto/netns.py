"""A local cluster's own network: each server and each client group in a
network namespace of its own, joined by veth pairs to one bridge, each link
optionally limited — the multi-host deployment of docs/deployment.md on one
machine, with nothing on 127.0.0.1.

Cluster ``k`` (the lowest number whose bridge name is free, claimed by
creating the bridge) uses the subnet 10.77.k.0/24: server ``i`` is
10.77.k.(1+i) in namespace ``concerto-k-<token>-s<i>``, client group ``j``
is 10.77.k.(129+j) in ``concerto-k-<token>-c<j>`` (the token, six hex
digits drawn per cluster, keeps a later cluster at the same index from
taking the same names), and the bridge ``cc<k>br`` holds
10.77.k.254 in this machine's own namespace, so the administrator's
commands reach every server (unlimited) while clients go through their
links. A link limit is a ``tbf`` queueing discipline on both ends of the
link's veth pair (the kernel here has ``tbf`` and ``htb``, not ``netem``),
so each direction of each link carries at most the rate, as a NIC would.

Processes enter a namespace with ``nsenter --net`` (not ``ip netns exec``,
which also enters a mount namespace of its own and would hide a FUSE mount
made inside it). The state is written to ``DIR/netns.json`` before anything
is made, so :func:`destroy` removes everything even after a failed start.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

STATE = "netns.json"
# Servers take host numbers 1..128, client groups 129..253, the bridge 254.
MAX_SERVERS = 128
MAX_CLIENTS = 125
# tbf's queue: what a link may hold before it drops, as a time at its rate.
QUEUE_LATENCY = "50ms"
# tbf's bucket: what may pass at the wire's speed after the link was idle,
# 10 ms of the rate and at least one 64 KiB GSO packet. A 1 ms bucket was
# tried (tbf cuts GSO packets to fit) for a link closer to a fixed rate,
# the simulator's: TCP then lost a fifth to a third of a link where no two
# transfers ever met (hash-IOS writes of 64-256 KiB blocks at 0.67-0.80 of
# the simulator's rate, against 0.99-1.00 with 10 ms), and the small reads
# the simulator is pessimistic about stayed as they were (first-IOS at
# 16 KiB 1.56 of it, against 1.60), so 10 ms is kept.
BURST_TIME = 10e-3
BURST_MIN = 64 << 10
# setns(2)'s namespace type for a network namespace.
CLONE_NEWNET = 0x40000000


class NetnsError(Exception):
    """The namespaces could not be made or removed; the message says why."""


@dataclass
class Network:
    index: int
    servers: int
    clients: int
    # Bytes per second each way on each server's and client group's link; None: unlimited.
    link_rate: float | None = None
    # In the namespaces' names, so that no later cluster, at the same free
    # index, takes the same names: a namespace's nsfs inode does not tell
    # them apart (the kernel hands freed namespace numbers out again). Empty
    # in a state file from before it existed.
    token: str = ""

    @property
    def prefix(self) -> str:
        """What every one of its namespaces' names begins with."""
        return f"concerto-{self.index}-{self.token}-" if self.token else f"concerto-{self.index}-"

    @property
    def bridge(self) -> str:
        return f"cc{self.index}br"

    def namespace(self, kind: str, i: int) -> str:
        """``kind`` is ``"s"`` (server) or ``"c"`` (client group)."""
        return f"{self.prefix}{kind}{i}"

    def host_link(self, kind: str, i: int) -> str:
        return f"cc{self.index}{kind}{i}"

    def address(self, kind: str, i: int) -> str:
        return f"10.77.{self.index}.{(1 if kind == 's' else 129) + i}"

    @property
    def bridge_address(self) -> str:
        return f"10.77.{self.index}.254"

    def members(self) -> list[tuple[str, int]]:
        return [("s", i) for i in range(self.servers)] + [("c", j) for j in range(self.clients)]

    def identities(self) -> dict[str, int]:
        """Each namespace's name and identity (the inode of its nsfs file):
        a later namespace of the same name, another cluster's, is another."""
        return {ns: identity(ns) for ns in (self.namespace(k, i) for k, i in self.members())}

    def enter(self, kind: str, i: int) -> list[str]:
        """The command prefix that runs a program in that namespace's network."""
        return ["nsenter", f"--net=/run/netns/{self.namespace(kind, i)}", "--"]


def join(namespace: str) -> None:
    """Moves this process into ``namespace``'s network (a process of our
    own started for it, before it opens a socket or a thread: sockets
    stay in the namespace they were made in, threads start in their
    parent's). Python 3.11 has no ``os.setns``, so through libc."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise NetnsError(f"cannot enter network namespace {namespace}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def _run(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise NetnsError(f"`{' '.join(args)}` failed: {r.stderr.strip() or r.stdout.strip()}")
    return r


def _claim_index() -> int:
    """The lowest cluster number whose bridge could be created (made here: the claim)."""
    for k in range(256):
        r = subprocess.run(["ip", "link", "add", f"cc{k}br", "type", "bridge"], capture_output=True, text=True)
        if r.returncode == 0:
            return k
        if "exists" not in r.stderr:
            raise NetnsError(f"cannot create a bridge (`ip link add cc{k}br type bridge`): {r.stderr.strip()} "
                             "(network namespaces need root, or CAP_NET_ADMIN)")
    raise NetnsError("every cluster number 0..255 has a bridge already (`ip link show type bridge`)")


def bucket_bytes(rate: float) -> int:
    """The tbf bucket of a link limited to ``rate`` bytes/s."""
    return max(BURST_MIN, int(rate * BURST_TIME))


def _limit(rate: float, namespace: str | None, link: str) -> None:
    """tbf at ``rate`` bytes/s on ``link``'s egress (in ``namespace``, or here)."""
    burst = bucket_bytes(rate)
    where = ["-n", namespace] if namespace else []
    _run("tc", *where, "qdisc", "add", "dev", link, "root", "tbf", "rate", f"{int(rate)}bps",
         "burst", str(burst), "latency", QUEUE_LATENCY)


def identity(namespace: str) -> int:
    """A named namespace's identity while it exists (the inode of its
    ``/run/netns`` file, as ``ip netns identify`` compares them); 0 when it
    does not."""
    try:
        return os.stat(f"/run/netns/{namespace}").st_ino
    except FileNotFoundError:
        return 0


def create(directory: Path, servers: int, clients: int, link_rate: float | None) -> Network:
    """Makes the bridge, the namespaces and their links; records them in ``DIR/netns.json``."""
    if not 1 <= servers <= MAX_SERVERS:
        raise NetnsError(f"--servers {servers}: a namespace cluster has 1 to {MAX_SERVERS} servers")
    if not 0 <= clients <= MAX_CLIENTS:
        raise NetnsError(f"--clients {clients}: a namespace cluster has 0 to {MAX_CLIENTS} client groups")
    if link_rate is not None and link_rate <= 0:
        raise NetnsError(f"--link-rate must be above 0 (got {link_rate} bytes/s)")
    directory.mkdir(parents=True, exist_ok=True)
    state = directory / STATE
    if state.exists():
        raise NetnsError(f"{state}: namespaces of an earlier cluster are still recorded there "
                         f"(remove them with `concerto cluster down --dir {directory}`)")
    net = Network(_claim_index(), servers, clients, link_rate, token=secrets.token_hex(3))
    state.write_text(json.dumps(asdict(net)))
    try:
        _run("ip", "addr", "add", f"{net.bridge_address}/24", "dev", net.bridge)
        _run("ip", "link", "set", net.bridge, "up")
        for kind, i in net.members():
            ns, link = net.namespace(kind, i), net.host_link(kind, i)
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "link", "set", link, "master", net.bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{net.address(kind, i)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            if link_rate is not None:
                _limit(link_rate, ns, "eth0")
                _limit(link_rate, None, link)
    except BaseException:
        destroy(directory)
        raise
    return net


def load(directory: Path) -> Network | None:
    """The namespaces recorded in ``DIR/netns.json``, if any."""
    try:
        return Network(**json.loads((directory / STATE).read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as e:
        raise NetnsError(f"{directory / STATE}: not a record of namespaces ({e})") from None


def _pids_in(namespace: str) -> list[int]:
    r = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []


def destroy(directory: Path, grace_s: float = 10.0) -> bool:
    """Stops every process left in the namespaces (SIGTERM, then SIGKILL),
    removes the namespaces (their veth pairs go with them) and the bridge;
    True if there was something to remove. Goes on past what is already
    gone, so it also finishes a start that failed half-way."""
    net = load(directory)
    if net is None:
        return False
    namespaces = [net.namespace(kind, i) for kind, i in net.members()]
    existing = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    namespaces = [ns for ns in namespaces if ns in existing]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [p for ns in namespaces for p in _pids_in(ns)]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            pids = [p for ns in namespaces for p in _pids_in(ns)]
            for p in pids:
                _reap(p)
            time.sleep(0.05)
        if not pids:
            break
    errors = []
    for ns in namespaces:
        r = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True)
        if r.returncode != 0:
            errors.append(r.stderr.strip())
    for kind, i in net.members():  # a veth made before its namespace took its end
        subprocess.run(["ip", "link", "del", net.host_link(kind, i)], capture_output=True)
    subprocess.run(["ip", "link", "del", net.bridge], capture_output=True)
    # A removed namespace's veth pair goes a moment later; wait for it, so
    # that nothing of the cluster is left once this returns.
    deadline = time.monotonic() + grace_s
    while (left := links_of(net)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if left:
        errors.append(f"links still there: {', '.join(left)}")
    if errors:
        raise NetnsError("could not remove every namespace: " + "; ".join(errors))
    (directory / STATE).unlink(missing_ok=True)
    return True


def _host_links() -> dict[str, int]:
    """This machine's namespace's network interfaces: name and index (the
    kernel numbers interfaces afresh: another of the same name is another)."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    links = {}
    for line in out.splitlines():
        fields = line.split(":")
        if len(fields) > 2 and fields[0].strip().isdigit():
            links[fields[1].strip().split("@")[0]] = int(fields[0])
    return links


def links_of(net: Network) -> list[str]:
    """The network interfaces of this machine's namespace that belong to ``net``."""
    ours = {net.bridge} | {net.host_link(kind, i) for kind, i in net.members()}
    return [n for n in _host_links() if n in ours]


def footprint(net: Network) -> dict[str, int]:
    """What ``net`` has on this machine now, each with its identity: its
    namespaces (by nsfs inode) and its interfaces here (by index)."""
    links = _host_links()
    ours = [net.bridge] + [net.host_link(kind, i) for kind, i in net.members()]
    return net.identities() | {n: links[n] for n in ours if n in links}


def still_there(made: dict[str, int]) -> list[str]:
    """Of a ``footprint``, what is still on this machine: the same
    namespace or interface, not one of the same name made since (another
    cluster that took the same free index)."""
    links = _host_links()
    return [n for n, ident in made.items()
            if ident and (identity(n) == ident if n.startswith("concerto-") else links.get(n) == ident)]


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# ---------------------------------------------------------------- measuring the links

# A TCP sink in a server's namespace: each message is an 8-byte length and
# that many bytes, answered with one byte once all are in.
_SINK = r"""
import socket, struct, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = bytearray(1 << 20)
def exact(n):
    got = 0
    while got < n:
        k = c.recv_into(memoryview(buf)[: min(len(buf), n - got)])
        if k == 0:
            sys.exit(0)
        got += k
    return bytes(buf[:n]) if n <= 8 else None
while True:
    (n,) = struct.unpack("<Q", exact(8))
    exact(n)
    c.sendall(b"k")
"""

# Its peer in a client group's namespace: round trips of 8-byte messages,
# then timed bulk messages; prints what it measured.
_SENDER = r"""
import json, socket, statistics, struct, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
size, reps, pings = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def message(n, data=b""):
    t = time.monotonic()
    c.sendall(struct.pack("<Q", n) + data)
    if c.recv(1) != b"k":
        sys.exit("the sink stopped")
    return time.monotonic() - t
rtts = [message(0) for _ in range(pings)]
data = bytes(size)
message(1 << 20, data[: 1 << 20])  # TCP's window opened before the timed ones
rates = [size / message(size, data) for _ in range(reps)]
print(json.dumps({"rates_Bps": rates, "rtts_s": rtts}))
"""


def measure_links(net: Network, client: int = 0, server: int = 0, size: int = 8 << 20, reps: int = 5,
                  pings: int = 200) -> dict[str, float]:
    """What the simulator's network is given for a cluster across
    namespaces, measured on the links themselves (a TCP stream from client
    group ``client``'s namespace to server ``server``'s, beside the file
    system, not through it, so no device's time is in it): the payload rate
    of one stream through the links (the median of ``reps`` messages of
    ``size`` bytes; what a limit leaves after headers), and from ``pings``
    round trips of small messages a one-way latency (half the fastest) and
    a jitter (the median's excess over the fastest: the simulator adds a
    uniform draw from 0 to the jitter to each one-way latency, so two such
    draws make the median round trip)."""
    sink = subprocess.Popen([*net.enter("s", server), sys.executable, "-c", _SINK, net.address("s", server)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = sink.stdout.readline().strip()
        if not port.isdigit():
            raise NetnsError(f"the link probe's sink in {net.namespace('s', server)} did not start: "
                             f"{sink.stderr.read().strip()}")
        r = subprocess.run([*net.enter("c", client), sys.executable, "-c", _SENDER, net.address("s", server), port,
                            str(size), str(reps), str(pings)], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise NetnsError(f"measuring the link from {net.namespace('c', client)} to "
                             f"{net.namespace('s', server)} failed: {r.stderr.strip()}")
    finally:
        sink.kill()
        sink.wait(10)
    raw = json.loads(r.stdout)
    fastest = min(raw["rtts_s"])
    return {"rate_Bps": statistics.median(raw["rates_Bps"]), "latency_s": fastest / 2,
            "jitter_s": statistics.median(raw["rtts_s"]) - fastest, "rtt_s": statistics.median(raw["rtts_s"])}


def network_toml(links: dict[str, float]) -> str:
    """The scenario's ``[cluster.network]`` for links measured by
    :func:`measure_links`: every NIC at the measured rate, each message a
    flow at its fair share of the NICs it crosses (``shared``), as TCP
    connections share links."""
    return f"""[cluster.network]
mode = "shared"
latency = "{max(1, round(links['latency_s'] * 1e6))}us"
jitter = "{round(links['jitter_s'] * 1e6)}us"
client_bandwidth = "{links['rate_Bps']:.0f}B/s"
server_bandwidth = "{links['rate_Bps']:.0f}B/s"
"""
