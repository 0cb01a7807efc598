"""Keys: the key ring the servers authenticate connections against
(``keys.toml``) and the credential files clients hold.

The formats and the checks are Rust's (``concerto_proto::auth``, reached
through ``concerto._native``); this module reads and writes the files, each
readable by its owner only (mode 0600), replaced atomically so that a server
re-reading the ring never sees half a file.
"""

from __future__ import annotations

import os
from pathlib import Path

from concerto import _native

RING = "keys.toml"
ADMIN_CREDENTIAL = "admin.key"


class KeyFileError(Exception):
    """A key file could not be read or changed; the message says why."""


def write_private(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` with mode 0600, atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise KeyFileError(f"{path}: no key ring there (`concerto cluster up` writes one beside cluster.toml)") from None


def init(ring: Path) -> Path:
    """A new ring at ``ring`` (an admin and a peer key) and the admin key's
    credential beside it (``admin.key``); refuses to replace either.
    Returns the credential's path."""
    admin = ring.parent / ADMIN_CREDENTIAL
    for path in (ring, admin):
        if path.exists():
            raise KeyFileError(f"{path}: exists already (a ring is made once; `concerto auth issue` adds keys)")
    ring.parent.mkdir(parents=True, exist_ok=True)
    ring_text, admin_text = _native.generate_keys()
    write_private(admin, admin_text)
    write_private(ring, ring_text)
    return admin


def ensure_local(directory: Path) -> Path:
    """The ring of a local cluster in ``directory``: kept if there is one
    (keys issued to tenants survive a restart), else a new one with an admin
    key, whose credential goes to ``admin.key``. Returns the ring's path."""
    ring, admin = directory / RING, directory / ADMIN_CREDENTIAL
    if ring.exists() and admin.exists():
        try:
            _native.list_keys(ring.read_text())
            return ring
        except ValueError as e:
            raise KeyFileError(f"{ring}: {e}") from None
    ring_text, admin_text = _native.generate_keys()
    write_private(ring, ring_text)
    write_private(admin, admin_text)
    return ring


def issue(ring: Path, job: int, key_id: str | None, weight: float | None, out: Path | None,
          user: int | None = None, groups: list[int] | None = None) -> tuple[str, Path]:
    """Adds a tenant key for ``job``; writes its credential (default
    ``job-<JOB>.key`` beside the ring). Returns the key id and the file."""
    key_id = key_id or f"job-{job}"
    out = out or ring.parent / f"{key_id}.key"
    if out.exists():
        raise KeyFileError(f"{out}: exists already (give --out, or revoke the key first)")
    try:
        ring_text, credential = _native.issue_key(_read(ring), key_id, job, weight, user, groups or [])
    except ValueError as e:
        raise KeyFileError(f"{ring}: {e}") from None
    # The credential first: a key in the ring whose credential was lost
    # would have to be revoked by hand.
    write_private(out, credential)
    write_private(ring, ring_text)
    return key_id, out


def issue_node(ring: Path, users: tuple[int, int], key_id: str, out: Path | None) -> Path:
    """Adds a node key acting for ``users`` (first, last); writes its
    credential (default ``<ID>.key`` beside the ring). Returns the file."""
    out = out or ring.parent / f"{key_id}.key"
    if out.exists():
        raise KeyFileError(f"{out}: exists already (give --out, or revoke the key first)")
    try:
        ring_text, credential = _native.issue_node_key(_read(ring), key_id, *users)
    except ValueError as e:
        raise KeyFileError(f"{ring}: {e}") from None
    write_private(out, credential)
    write_private(ring, ring_text)
    return out


def revoke(ring: Path, key_id: str) -> None:
    """Removes key ``key_id``; connections it opens from now on are refused."""
    try:
        write_private(ring, _native.revoke_key(_read(ring), key_id))
    except ValueError as e:
        raise KeyFileError(f"{ring}: {e}") from None


def keys(ring: Path) -> list[dict]:
    """The ring's keys (id, role, job, weight), without their secrets."""
    try:
        return _native.list_keys(_read(ring))
    except ValueError as e:
        raise KeyFileError(f"{ring}: {e}") from None
