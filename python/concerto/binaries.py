"""Where the Rust programs are: ``concerto-server`` (one server) and
``concerto-fuse`` (a FUSE mount), and the MPI-IO library MPI programs
preload (``libconcerto-mpiio-FLAVOUR.so``, one per MPI library). They are separate binaries, not part of
the Python module, so an I/O node runs a server without a Python
interpreter and the module links only the client library.

``make`` builds them and installs the binaries beside the virtual
environment's Python (the libraries in its ``lib/concerto``); otherwise
they are looked for on ``PATH``, then in the checkout's
``target/release``. ``CONCERTO_BIN_DIR`` overrides all of these.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SERVER = "concerto-server"
FUSE = "concerto-fuse"


class MissingBinary(OSError):
    """A Concerto binary is not installed; the message says how to get it."""


def find(name: str) -> str:
    """The path of binary ``name``, or :class:`MissingBinary` naming where it was looked for."""
    override = os.environ.get("CONCERTO_BIN_DIR")
    places = [Path(override)] if override else [
        Path(sys.executable).parent,
        *(Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p),
        Path(__file__).resolve().parents[2] / "target" / "release",
    ]
    for place in places:
        candidate = place / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    where = f"CONCERTO_BIN_DIR={override}" if override else "beside Python, on PATH or in target/release"
    raise MissingBinary(f"{name} not found ({where}); build it with `make build` "
                        f"or `cargo build --release -p {name}`")


def find_library(name: str) -> str:
    """The path of shared library ``name``, or :class:`MissingBinary` naming where it was looked for."""
    override = os.environ.get("CONCERTO_BIN_DIR")
    places = [Path(override)] if override else [
        Path(sys.prefix) / "lib" / "concerto",
        Path(__file__).resolve().parents[2] / "target" / "release",
    ]
    for place in places:
        if (place / name).is_file():
            return str(place / name)
    where = f"CONCERTO_BIN_DIR={override}" if override else f"{places[0]} or target/release"
    raise MissingBinary(f"{name} not found ({where}); build it with `make build`")


def exec_binary(name: str, args: list[str]) -> None:
    """Replaces this process with binary ``name`` (signals then reach it directly)."""
    path = find(name)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [path, *args])


def is_running(pid: int, name: str) -> bool:
    """Whether ``pid`` is a live process of binary ``name`` (so a reused pid is not mistaken for it)."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return os.path.basename(argv0) == name.encode() and state != "Z"
