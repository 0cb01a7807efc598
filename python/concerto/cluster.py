"""A local cluster: one ``concerto-server`` process per server, on loopback
or (``netns``) each in a network namespace of its own (see :mod:`concerto.netns`).

``up`` writes one server file per server (``DIR/s<i>.toml``), starts the
processes in their own session (so they outlive the command and a Ctrl-C in
the terminal), waits until each has bound its port and answers, then
writes ``DIR/cluster.toml`` with the addresses and process ids. Each server
file is rewritten with the port it got, so a server restarted from it comes
back at the same address. ``down`` stops the processes it started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from concerto import _native, auth, binaries, netns, tomlvalue
from concerto.fs import Client

THROTTLES = ("hdd", "ssd", "none")


class ClusterError(Exception):
    """The cluster could not be started or reached; the message says why."""


@dataclass
class ClusterSpec:
    servers: int = 4
    policy: str = "fifo"
    policy_params: dict | None = None
    throttle: str = "none"
    meta: int = 0
    stripe_unit: int = 64 * 1024
    stripe_count: int | None = None
    timeout_s: float = 10.0
    metrics: bool = True
    depth: int = 8
    # An emulated device given by its numbers (bandwidth, latency, seek,
    # parallelism), in place of a throttle preset.
    device: dict | None = None
    # A coordinator (IO-SETS), one more server after the data servers:
    # its `[coordinator]` section ({"sets": {"kind": "set10"}, "lease": "10s"}).
    coordinator: dict | None = None
    # Each server (and client group) in a network namespace of its own,
    # joined by a bridge, links limited to link_rate bytes/s each way.
    netns: bool = False
    clients: int = 0
    link_rate: float | None = None
    # Which connections' frames carry MACs (the servers' `integrity`:
    # "between-hosts", the default, "always" or "when-asked").
    integrity: str | None = None

    def processes(self) -> int:
        """Servers to start: the data servers, and the coordinator if any."""
        return self.servers + (1 if self.coordinator is not None else 0)


def server_file(spec: ClusterSpec, directory: Path, i: int, listen: str = "127.0.0.1:0",
                metrics: str | None = "127.0.0.1:0", cluster: Path | None = None) -> dict:
    if i == spec.servers:
        return _coordinator_file(spec, directory, i, listen, metrics, cluster)
    roles = ["data", "metadata"] if i == spec.meta else ["data"]
    server = {"listen": listen, "data_dir": str((directory / f"s{i}").resolve()), "roles": roles, "depth": spec.depth,
              "keys": str((directory / auth.RING).resolve())}
    if spec.metrics and metrics:
        server["metrics"] = metrics
    if cluster is not None:
        server["cluster"] = str(cluster.resolve())
    if spec.integrity is not None:
        server["integrity"] = spec.integrity
    cfg: dict = {"server": server, "policy": policy_table(spec.policy, spec.policy_params or {})}
    if spec.device is not None:
        cfg["throttle"] = dict(spec.device)
    elif spec.throttle != "none":
        cfg["throttle"] = {"preset": spec.throttle}
    if i == spec.meta:
        meta = {"data_servers": list(range(spec.servers)), "stripe_unit": spec.stripe_unit}
        if spec.stripe_count is not None:
            meta["stripe_count"] = spec.stripe_count
        cfg["metadata"] = meta
    return cfg


def _coordinator_file(spec: ClusterSpec, directory: Path, i: int, listen: str, metrics: str | None,
                      cluster: Path | None) -> dict:
    """The coordinator's server file: the coordinator role alone, no device."""
    server = {"listen": listen, "data_dir": str((directory / f"s{i}").resolve()), "roles": ["coordinator"],
              "keys": str((directory / auth.RING).resolve())}
    if spec.metrics and metrics:
        server["metrics"] = metrics
    if cluster is not None:
        server["cluster"] = str(cluster.resolve())
    return {"server": server, "coordinator": dict(spec.coordinator or {})}


def check_server_file(config: Path) -> None:
    """Validates a server file with ``concerto-server --check``; :class:`ClusterError` says what is wrong."""
    r = subprocess.run([binaries.find(binaries.SERVER), "--config", str(config), "--check"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise ClusterError(r.stderr.strip().removeprefix("concerto-server: "))


def _spawn(config: Path, ready: Path, log: Path, enter: list[str]) -> subprocess.Popen:
    """Starts a server; ``enter`` is the prefix that runs it in its namespace (nsenter, which execs: the pid is the server's)."""
    ready.unlink(missing_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*enter, binaries.find(binaries.SERVER), "--config", str(config), "--ready-file", str(ready)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _wait_ready(proc: subprocess.Popen, ready: Path, log: Path, deadline: float) -> dict:
    while time.monotonic() < deadline:
        if ready.exists():
            return json.loads(ready.read_text())
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            raise ClusterError(f"server {ready.stem} exited with code {proc.returncode}: " + " | ".join(tail))
        time.sleep(0.05)
    raise ClusterError(f"server {ready.stem} did not start within the time allowed (log: {log})")


def server_alive(pid: int) -> bool:
    """Whether ``pid`` is a running ``concerto-server`` (not a reused pid)."""
    return binaries.is_running(pid, binaries.SERVER)


def up(directory: Path, spec: ClusterSpec, start_timeout_s: float = 60.0) -> Path:
    """Starts the cluster; returns the cluster file's path. Stops what it started if any server fails."""
    if spec.servers < 1:
        raise ClusterError("--servers must be at least 1")
    if not 0 <= spec.meta < spec.servers:
        raise ClusterError(f"--meta {spec.meta} is not one of the servers 0..{spec.servers - 1}")
    if spec.throttle not in THROTTLES:
        raise ClusterError(f"--throttle {spec.throttle!r} is not one of {', '.join(THROTTLES)}")
    if not spec.netns and (spec.clients or spec.link_rate is not None):
        raise ClusterError("--clients and --link-rate are for a cluster across namespaces (--netns)")
    directory.mkdir(parents=True, exist_ok=True)
    cluster_file = directory / "cluster.toml"
    if cluster_file.exists() and any(server_alive(s.get("pid", -1)) for s in read_cluster(cluster_file)["servers"]):
        raise ClusterError(f"{cluster_file}: a cluster is already running there (stop it with `concerto cluster down --dir {directory}`)")
    # A cluster file left by a stopped cluster describes nothing now; it
    # reappears once this cluster is up.
    cluster_file.unlink(missing_ok=True)
    procs: list[subprocess.Popen] = []
    entries = []
    try:
        auth.ensure_local(directory)
        net = netns.create(directory, spec.processes(), spec.clients, spec.link_rate) if spec.netns else None
        for i in range(spec.processes()):
            path = directory / f"s{i}.toml"
            host = net.address("s", i) if net else "127.0.0.1"
            path.write_text(tomli_w.dumps(server_file(spec, directory, i, listen=f"{host}:0", metrics=f"{host}:0")))
            check_server_file(path)
            procs.append(_spawn(path, directory / f"s{i}.ready", directory / f"s{i}.log", _enter(net, i)))
        deadline = time.monotonic() + start_timeout_s
        readies = [_wait_ready(proc, directory / f"s{i}.ready", directory / f"s{i}.log", deadline)
                   for i, proc in enumerate(procs)]
        for i, (proc, ready) in enumerate(zip(procs, readies)):
            # Pin the ports it got, so a restart from this file comes back at the same address, knowing
            # its cluster from the cluster file.
            cfg = server_file(spec, directory, i, listen=ready["address"], metrics=ready.get("metrics"),
                              cluster=cluster_file)
            (directory / f"s{i}.toml").write_text(tomli_w.dumps(cfg))
            entry = {"id": i, "address": ready["address"], "roles": cfg["server"]["roles"], "pid": proc.pid,
                     "config": str((directory / f"s{i}.toml").resolve())}
            if ready.get("metrics"):
                entry["metrics"] = ready["metrics"]
            entries.append(entry)
        # Clients on this machine authenticate with the admin key unless
        # CONCERTO_CREDENTIAL names another (a tenant's, `concerto auth issue`).
        text = tomli_w.dumps({"cluster": {"timeout": f"{spec.timeout_s}s", "credential": auth.ADMIN_CREDENTIAL},
                              "servers": entries})
        _native.check_cluster_file(text)
        starting = cluster_file.with_suffix(".starting")
        starting.write_text(text)
        wait_answering(starting, deadline)
        # The running servers learn the cluster map now; their files name the cluster file for a restart.
        Client(starting).introduce_cluster()
        # The last step: once cluster.toml exists, the cluster is up and
        # stopping it is the caller's business (`down`); before, it is ours.
        starting.replace(cluster_file)
    except BaseException:
        if not cluster_file.exists():
            for proc in procs:
                _stop_pid(proc.pid)
            cluster_file.with_suffix(".starting").unlink(missing_ok=True)
            netns.destroy(directory)
        raise
    return cluster_file


def wait_answering(cluster_file: Path, deadline: float) -> None:
    client = Client(cluster_file)
    while True:
        answers = client.ping()
        missing = [a["error"] for a in answers if "error" in a]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise ClusterError("servers did not answer: " + "; ".join(missing))
        time.sleep(0.1)


def read_cluster(cluster_file: Path) -> dict:
    try:
        text = cluster_file.read_text()
    except FileNotFoundError:
        raise ClusterError(f"{cluster_file}: no cluster file (start one with `concerto cluster up`)") from None
    try:
        return _native.check_cluster_file(text)
    except ValueError as e:
        raise ClusterError(f"{cluster_file}: {e}") from None


def _stop_pid(pid: int, grace_s: float = 10.0) -> bool:
    """SIGTERM, then SIGKILL after ``grace_s``; True if it was running."""
    if not server_alive(pid):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace_s
    while server_alive(pid) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.05)
    if server_alive(pid):
        os.kill(pid, signal.SIGKILL)
    _reap(pid)
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _enter(net: netns.Network | None, server: int) -> list[str]:
    return net.enter("s", server) if net else []


def down(directory: Path) -> int:
    """Stops every server of the cluster started in ``directory`` and removes
    its namespaces, if any (also those of a start that failed half-way);
    returns how many servers were running."""
    if not (directory / "cluster.toml").exists() and netns.load(directory) is not None:
        netns.destroy(directory)
        return 0
    cluster = read_cluster(directory / "cluster.toml")
    try:
        return sum(_stop_pid(s["pid"]) for s in cluster["servers"] if s.get("pid"))
    finally:
        netns.destroy(directory)


def restart_server(cluster_file: Path, server_id: int, timeout_s: float = 30.0) -> int:
    """Starts one server of a local cluster again from its server file; updates its pid; returns it."""
    cluster = read_cluster(cluster_file)
    entry = next((s for s in cluster["servers"] if s["id"] == server_id), None)
    if entry is None or not entry.get("config"):
        raise ClusterError(f"server {server_id} was not started by `concerto cluster up` in {cluster_file.parent}")
    config = Path(entry["config"])
    ready, log = config.with_suffix(".ready"), config.with_suffix(".log")
    proc = _spawn(config, ready, log, _enter(netns.load(cluster_file.parent), server_id))
    _wait_ready(proc, ready, log, time.monotonic() + timeout_s)
    entry["pid"] = proc.pid
    cluster_file.write_text(tomli_w.dumps(cluster))
    return proc.pid


def policy_table(name: str, params: dict) -> dict:
    """A ``[policy]`` table from a name and parameters: a string value is read
    as TOML (``"5"`` is the number 5, as with ``sim --set``; a bare word
    stays a string), other values are taken as they are."""
    return {"kind": name, **{k: tomlvalue.read(v) if isinstance(v, str) else v for k, v in params.items()}}


def policy_toml(name: str, params: dict) -> str:
    """The text of :func:`policy_table`, as servers take it over the wire."""
    return tomli_w.dumps(policy_table(name, params))
