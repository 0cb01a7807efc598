"""``concerto.fs``: the real file system from Python.

    from concerto import fs
    client = fs.connect("concerto-cluster/cluster.toml")
    f = client.create("/out.dat", unit=1 << 20, count=4)
    f.write(0, b"...")          # striped over the layout's servers in parallel
    f.fsync()                   # durable on every server holding part of it
    client.stat("/out.dat").size

Every request carries the application id (the job: ``CONCERTO_APP_ID``,
else the batch system's or launcher's job id, else the session; see
docs/filesystem.md "Jobs and ranks"), the rank and the issue time, which is what the servers' policies schedule by. Errors are
the usual Python ones: ``FileNotFoundError``, ``FileExistsError``,
``NotADirectoryError``, ``IsADirectoryError``, ``OSError`` with
``errno.ENOTEMPTY``, ``TimeoutError`` / ``ConnectionError`` naming the
server that did not answer, and ``ValueError`` for bad arguments.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from concerto import _native

DEFAULT_CLUSTER = Path("concerto-cluster/cluster.toml")


def cluster_path(path: str | Path | None = None) -> Path:
    """The cluster file: the argument, else ``$CONCERTO_CLUSTER``, else ``concerto-cluster/cluster.toml``."""
    if path is not None:
        return Path(path)
    return Path(os.environ.get("CONCERTO_CLUSTER", DEFAULT_CLUSTER))


@dataclass(frozen=True)
class Stat:
    inode: int
    kind: str  # "file" or "directory"
    size: int
    ctime_ns: int
    mtime_ns: int
    stripe_unit: int | None
    servers: list[int] | None
    default_layout: dict | None
    entries: int
    uid: int
    gid: int
    mode: int  # permission bits, st_mode & 0o7777

    @property
    def is_dir(self) -> bool:
        return self.kind == "directory"


@dataclass(frozen=True)
class DirEntry:
    name: str
    inode: int
    kind: str


class IoPhase:
    """An I/O phase held at the coordinator while the ``with`` block runs (:meth:`Client.io_phase`)."""

    def __init__(self, client: Client):
        self._client = client
        self.priority: float | None = None

    def __enter__(self) -> IoPhase:
        self.priority = self._client._native.begin_phase()
        return self

    def __exit__(self, *exc) -> None:
        self._client._native.end_phase()


class File:
    """An open file. Offsets are explicit (like ``os.pwrite``/``os.pread``)."""

    def __init__(self, client: Client, handle: _native.FsFile):
        self._client = client
        self._handle = handle

    @property
    def path(self) -> str:
        return self._handle.path

    @property
    def inode(self) -> int:
        return self._handle.inode

    @property
    def stripe_unit(self) -> int:
        return self._handle.stripe_unit

    @property
    def servers(self) -> list[int]:
        """Server ids holding the stripes, in stripe order."""
        return self._handle.servers

    def write(self, offset: int, data: bytes) -> None:
        self._client._native.write(self._handle, offset, data)

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes; shorter only at the end of the file."""
        return self._client._native.read(self._handle, offset, length)

    def write_list(self, extents: list[tuple[int, int]], data: bytes) -> None:
        """List I/O: ``data`` goes to the (offset, length) extents, ascending and disjoint."""
        self._client._native.write_list(self._handle, extents, data)

    def read_list(self, extents: list[tuple[int, int]]) -> bytes:
        """List I/O: the extents' bytes concatenated; never-written bytes read as zeros."""
        return self._client._native.read_list(self._handle, extents)

    def fsync(self) -> None:
        self._client._native.fsync(self._handle)

    def copy_in(self, local_path: str | Path, chunk: int, on_progress=None) -> int:
        """Writes the local file's bytes from offset 0, ``chunk`` bytes at a time (copied in Rust, not
        through Python); ``on_progress(bytes so far)`` after each chunk. Returns the bytes written."""
        return self._client._native.copy_in(self._handle, str(local_path), chunk, on_progress)

    def copy_out(self, local_path: str | Path, size: int, chunk: int, on_progress=None) -> int:
        """Writes up to ``size`` bytes from offset 0 into a new local file (copied in Rust, not
        through Python); ``on_progress(bytes so far)`` after each chunk. Returns the bytes copied."""
        return self._client._native.copy_out(self._handle, str(local_path), size, chunk, on_progress)

    def close(self) -> None:
        """Makes what this file wrote durable (on the servers it wrote to) and lets it go; a file
        opened for writing that is never closed is let go when its client goes."""
        self._client._native.close(self._handle)

    def io_phase(self) -> IoPhase:
        """``with f.io_phase(): ...``: an I/O phase of this file's client (see :meth:`Client.io_phase`)."""
        return self._client.io_phase()

    def __enter__(self) -> File:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def size(self) -> int:
        """The file's size now (``FileNotFoundError``-like ``OSError`` ESTALE once it was removed)."""
        return _stat(self._client._native.fstat(self._handle)).size

    def object_sizes(self) -> list[int]:
        """Bytes each server holds of the file, in layout order (asks every server of the layout)."""
        return self._client._native.object_sizes(self._handle)

    def __repr__(self) -> str:
        return f"File({self.path!r}, inode={self.inode}, unit={self.stripe_unit}, servers={self.servers})"


class Client:
    """A connection to a cluster. Thread-safe; each call blocks without holding the GIL."""

    def __init__(self, cluster: str | Path | None = None, *, app: int | None = None, rank: int | None = None,
                 weight: float | None = None, transfers: str | None = None):
        """``transfers``: send large accesses in blocks in one of Clusterfile's orders,
        ``"ORDERING[,block=SIZE][,in-flight=N][,seed=N]"`` with ORDERING ``first-ios``, ``random-ios`` or
        ``hash-ios`` (block: default the file's stripe unit; in-flight: default 1, the paper's one transfer
        at a time); default ``$CONCERTO_TRANSFERS``, else every server's part at once."""
        path = cluster_path(cluster)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no cluster file (start one with `concerto cluster up`)") from None
        self.cluster_file = path
        self._native = _native.FsClientHandle(text, str(path), app, rank, weight, transfers)

    @property
    def app(self) -> int:
        return self._native.app

    @property
    def rank(self) -> int:
        return self._native.rank

    def create(self, path: str, *, unit: int | None = None, count: int | None = None, exclusive: bool = True) -> File:
        """Creates a file whose layout is fixed now: ``unit``/``count`` or the directory's default,
        and opens it for writing. With ``exclusive=False`` an existing file is opened instead."""
        return File(self, self._native.create(path, unit, count, exclusive))

    def open(self, path: str, *, write: bool = False) -> File:
        """Opens an existing file, for reading, or for writing too with ``write=True``
        (then close it: the metadata service learns its size from the close)."""
        return File(self, self._native.open(path, write))

    def mkdir(self, path: str, *, parents: bool = False, mode: int = 0o755) -> None:
        """Makes a directory with permission bits ``mode``, owned by the key's user."""
        if not parents:
            self._native.mkdir(path, mode)
            return
        at = ""
        for name in [p for p in path.split("/") if p]:
            at += "/" + name
            try:
                self._native.mkdir(at, mode)
            except FileExistsError:
                if not self.stat(at).is_dir:
                    raise NotADirectoryError(f"{at}: not a directory") from None

    def rmdir(self, path: str) -> None:
        self._native.rmdir(path)

    def unlink(self, path: str) -> None:
        self._native.unlink(path)

    def rename(self, src: str, dst: str) -> None:
        self._native.rename(src, dst)

    def truncate(self, path: str, size: int) -> None:
        self._native.truncate(path, size)

    def setstripe(self, path: str, *, unit: int | None = None, count: int | None = None) -> None:
        """Sets a directory's default layout for files created in it from now on."""
        self._native.setstripe(path, unit, count)

    def stat(self, path: str) -> Stat:
        return _stat(self._native.stat(path))

    def chmod(self, path: str, mode: int) -> Stat:
        """Sets the permission bits (the owner or the admin key); raises PermissionError naming why not."""
        return _stat(self._native.set_attr(path, mode, None, None))

    def chown(self, path: str, uid: int | None = None, gid: int | None = None) -> Stat:
        """Gives the file to ``uid`` (the admin key only) and/or group ``gid`` (its owner, to a group its key names)."""
        return _stat(self._native.set_attr(path, None, uid, gid))

    def access(self, path: str, mode: int) -> bool:
        """Whether the key's user may ``os.R_OK | os.W_OK | os.X_OK`` ``path``, as :func:`os.access`."""
        try:
            self._native.access(path, mode)
        except PermissionError:
            return False
        return True

    def listdir(self, path: str = "/") -> list[DirEntry]:
        return [DirEntry(**e) for e in self._native.readdir(path)]

    def statfs(self) -> dict:
        return self._native.statfs()

    def io_phase(self) -> IoPhase:
        """An I/O phase at the cluster's coordinator (IO-SETS), as a context manager::

            with client.io_phase() as phase:   # waits for this job's set's turn
                f.write(0, checkpoint)         # weighed by phase.priority on the servers

        Entering waits until the coordinator grants the phase (at its set's
        priority) and renews the grant meanwhile; leaving ends it, so the next
        job of the set may go. Without a coordinator, or when it does not
        answer (one warning), the phase runs at once, ungated: ``priority`` is
        ``None``. One phase per client at a time; entering again while one is
        held keeps it."""
        return IoPhase(self)

    def set_sets(self, sets_toml: str) -> None:
        """Replaces the coordinator's set rule live, e.g. ``'kind = "exclusive-fcfs"'`` (docs/coordinator.md)."""
        self._native.set_sets(sets_toml)

    def arrivals(self, after: int = 0) -> list[list[dict] | dict]:
        """Each server's arrival log (cluster-file order): the requests that reached its queue after
        request ``after`` (numbered per server), oldest first, at most the latest 8192 — ``{"seq",
        "at_ns", "app", "rank", "issue_ns", "op", "object", "offset", "bytes"}`` each (``op``: read,
        write, sync or metadata; ``at_ns``: the server machine's monotonic clock, as
        ``time.monotonic_ns()`` there; ``object``: the file's inode) — or ``{"error": ...}``. The
        administrator's key only."""
        return self._native.arrivals(after)

    def server_stats(self) -> list[dict]:
        """One dict per server (cluster-file order): its statistics, or ``{"error": ...}``."""
        return self._native.stats()

    def ping(self) -> list[dict]:
        """One dict per server: ``{"policy", "roles"}`` or ``{"error": ...}``."""
        return self._native.ping()

    def set_policy(self, policy_toml: str) -> list[int]:
        """Switches every server's policy live, e.g. ``'kind = "sfq-d-plus"'``.

        Returns, per server, how many requests the previous policy still held
        (queued or in service): it finishes them before it goes."""
        return self._native.set_policy(policy_toml)

    def set_rules(self, rules: dict) -> None:
        """Puts QoS rules (weights and rates) in force on every server (``{"rules": [...], "work_conserving": False}``,
        the ``[qos]`` table of docs/configuration.md); every server checks them before any applies."""
        self._native.set_rules(tomli_w.dumps(rules))

    def rules(self) -> dict[int, dict]:
        """Every server's QoS rules in force, by server id."""
        return {sid: tomllib.loads(text) for sid, text in self._native.rules()}

    def introduce_cluster(self) -> None:
        """Tells every server the cluster map: the metadata server its data servers, each data server
        its metadata server and the peers ``service-sync`` sends its service reports to."""
        self._native.introduce_cluster()


def _stat(s: dict) -> Stat:
    """A Stat from the module's stat shape (_native.pyi's ``Stat``)."""
    layout = s["layout"] or {}
    return Stat(inode=s["inode"], kind=s["kind"], size=s["size"], ctime_ns=s["ctime_ns"], mtime_ns=s["mtime_ns"],
                stripe_unit=layout.get("unit"), servers=layout.get("servers"),
                default_layout=s["default_layout"], entries=s["entries"], uid=s["uid"], gid=s["gid"],
                mode=s["mode"])


def connect(cluster: str | Path | None = None, **identity) -> Client:
    return Client(cluster, **identity)
