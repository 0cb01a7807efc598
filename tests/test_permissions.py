"""Owners and modes as POSIX says: the same modes, owners and operations
tried by three real Unix users on the local file system (processes run
with setpriv as uids 1001, 1002, 1003) and by three tenant keys bound to
those users on a local cluster; every outcome must be the same."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from concerto import cluster as local
from concerto import fs

from conftest import concerto as run_cli
from conftest import mounted_at


def concerto(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    r = run_cli(*args)
    if ok:
        assert r.returncode == 0, r.stderr
    return r

# user -> (uid, groups): the owner and a member share group 100.
USERS = {"owner": (1001, [100]), "member": (1002, [100]), "other": (1003, [300])}
FILE_MODES = [0o000, 0o400, 0o600, 0o640, 0o604, 0o060, 0o006, 0o664, 0o644, 0o222, 0o066]
DIR_MODES = [0o700, 0o500, 0o100, 0o400, 0o750, 0o710, 0o705, 0o701, 0o770, 0o777, 0o1777, 0o003]
OPS = ("read", "write", "list", "search", "create", "unlink")

# Runs as one user: tries each (op, path) and prints whether it was allowed.
LOCAL_TRIER = r"""
import json, os, sys
out = []
for op, path in json.loads(sys.stdin.read()):
    try:
        if op == "read":
            open(path, "rb").close()
        elif op == "write":
            os.close(os.open(path, os.O_WRONLY))
        elif op == "list":
            os.listdir(path)
        elif op == "search":
            os.stat(os.path.join(path, "f"))
        elif op == "create":
            p = os.path.join(path, "new-%d" % os.getuid())
            open(p, "xb").close()
            os.unlink(p)
        elif op == "unlink":
            os.unlink(os.path.join(path, "victim-%d" % os.getuid()))
        out.append(True)
    except PermissionError:
        out.append(False)
print(json.dumps(out))
"""


def cases() -> list[tuple[str, str, int]]:
    """(op, kind of thing, mode) for every operation on every mode."""
    out = [(op, "file", m) for m in FILE_MODES for op in ("read", "write")]
    out += [(op, "dir", m) for m in DIR_MODES for op in ("list", "search", "create", "unlink")]
    return out


def name(kind: str, mode: int) -> str:
    return f"{kind}-{mode:04o}"


@pytest.fixture(scope="module")
def users_cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("perm-cluster")
    path = local.up(directory, local.ClusterSpec(servers=2, policy="fifo", stripe_unit=65536, timeout_s=5.0))
    keys = {}
    try:
        for who, (uid, groups) in USERS.items():
            key = directory / f"{who}.key"
            concerto("auth", "issue", "--keys", str(directory / "keys.toml"), "--job", str(uid),
                     "--user", str(uid), "--groups", ",".join(map(str, groups)), "--out", str(key))
            keys[who] = key
        yield path, keys
    finally:
        local.down(directory)


def as_key(cluster: Path, key: Path | None) -> fs.Client:
    saved = os.environ.get("CONCERTO_CREDENTIAL")
    try:
        if key is None:
            os.environ.pop("CONCERTO_CREDENTIAL", None)
        else:
            os.environ["CONCERTO_CREDENTIAL"] = str(key)
        return fs.Client(cluster)
    finally:
        if saved is None:
            os.environ.pop("CONCERTO_CREDENTIAL", None)
        else:
            os.environ["CONCERTO_CREDENTIAL"] = saved


def local_outcomes(base: Path) -> dict[str, list[bool]]:
    """Makes the tree as the owner (uid 1001, group 100) would have it, then
    tries every case as each user."""
    owner_uid, owner_groups = USERS["owner"]
    for op, kind, mode in cases():
        p = base / name(kind, mode)
        if kind == "file":
            p.write_bytes(b"x")
        else:
            p.mkdir(exist_ok=True)
            (p / "f").write_bytes(b"x")
            os.chown(p / "f", owner_uid, owner_groups[0])
            for uid, _ in USERS.values():
                (p / f"victim-{uid}").write_bytes(b"x")
                os.chown(p / f"victim-{uid}", owner_uid, owner_groups[0])
        os.chown(p, owner_uid, owner_groups[0])
        os.chmod(p, mode)
    out = {}
    for who, (uid, groups) in USERS.items():
        work = [(op, str(base / name(kind, mode))) for op, kind, mode in cases()]
        r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={groups[0]}",
                            f"--groups={','.join(map(str, groups))}", sys.executable, "-c", LOCAL_TRIER],
                           input=json.dumps(work), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out[who] = json.loads(r.stdout)
    return out


def concerto_outcomes(cluster: Path, keys: dict[str, Path]) -> dict[str, list[bool]]:
    owner = as_key(cluster, keys["owner"])
    for op, kind, mode in cases():
        p = "/" + name(kind, mode)
        if kind == "file":
            try:
                owner.create(p).close()
            except FileExistsError:
                pass
        else:
            try:
                owner.mkdir(p, mode=0o700)
            except FileExistsError:
                pass
            else:
                owner.create(p + "/f").close()
                for uid, _ in USERS.values():
                    owner.create(f"{p}/victim-{uid}").close()
        owner.chmod(p, mode)
    out = {}
    for who, (uid, _) in USERS.items():
        c = as_key(cluster, keys[who])
        results = []
        for op, kind, mode in cases():
            p = "/" + name(kind, mode)
            try:
                if op == "read":
                    c.open(p).close()
                elif op == "write":
                    c.open(p, write=True).close()
                elif op == "list":
                    c.listdir(p)
                elif op == "search":
                    c.stat(p + "/f")
                elif op == "create":
                    c.create(f"{p}/new-{uid}").close()
                    c.unlink(f"{p}/new-{uid}")
                elif op == "unlink":
                    c.unlink(f"{p}/victim-{uid}")
                results.append(True)
            except PermissionError:
                results.append(False)
        out[who] = results
    return out


def test_three_users_are_allowed_and_refused_what_the_local_file_system_allows_and_refuses(users_cluster):
    cluster, keys = users_cluster
    base = Path(tempfile.mkdtemp(prefix="concerto-perm-", dir="/tmp"))
    try:
        base.chmod(0o755)
        expected = local_outcomes(base)
    finally:
        shutil.rmtree(base)
    assert_same_as_local(expected, concerto_outcomes(cluster, keys), "concerto")


def assert_same_as_local(expected: dict[str, list[bool]], got: dict[str, list[bool]], label: str) -> None:
    """Every user's answer for every case is the local file system's; and
    the table is not trivial: each user is both allowed and refused."""
    rows = cases()
    differ = [(who, *rows[i], expected[who][i], got[who][i])
              for who in USERS for i in range(len(rows)) if expected[who][i] != got[who][i]]
    assert not differ, "\n".join(f"{who} {op} {kind} {mode:04o}: local {e}, {label} {g}"
                                 for who, op, kind, mode, e, g in differ)
    for who in USERS:
        assert any(got[who]) and not all(got[who]), who


def test_a_refusal_reaches_python_as_permission_error_naming_the_operation_and_file(users_cluster):
    cluster, keys = users_cluster
    owner = as_key(cluster, keys["owner"])
    owner.create("/mine-only").close()
    owner.chmod("/mine-only", 0o600)
    other = as_key(cluster, keys["other"])
    with pytest.raises(PermissionError, match=r"open for reading /mine-only: permission denied \(needs read "
                                              r"on a file of mode 0600 owned by 1001:100; the key acts as user 1003"):
        other.open("/mine-only")
    assert not other.access("/mine-only", os.R_OK) and owner.access("/mine-only", os.R_OK | os.W_OK)
    st = owner.stat("/mine-only")
    assert (st.uid, st.gid, st.mode) == (1001, 100, 0o600)


def test_the_cli_shows_owners_and_modes_and_refuses_a_bad_mode_or_group_list(users_cluster, tmp_path):
    cluster, keys = users_cluster
    admin = as_key(cluster, None)
    admin.mkdir("/cli-dir", mode=0o2750)
    listed = concerto("fs", "ls", "/", "--cluster", str(cluster)).stdout
    assert "drwxr-s---" in listed and "0:0" in listed and "cli-dir/" in listed
    shown = concerto("fs", "chown", "1001:100", "/cli-dir", "--cluster", str(cluster)).stdout
    assert "1001:100" in shown
    shown = concerto("fs", "chmod", "1777", "/cli-dir", "--cluster", str(cluster)).stdout
    assert "drwxrwxrwt" in shown
    bad = concerto("fs", "chmod", "rwx", "/cli-dir", "--cluster", str(cluster), ok=False)
    assert bad.returncode == 2 and "'rwx' is not an octal mode" in bad.stderr
    bad = concerto("auth", "issue", "--keys", str(cluster.parent / "keys.toml"), "--job", "5", "--user", "1005",
                   "--groups", "100,staff", "--out", str(tmp_path / "k"), ok=False)
    assert bad.returncode == 2 and "--groups" in bad.stderr and "numeric group ids" in bad.stderr
    bad = concerto("auth", "issue", "--keys", str(cluster.parent / "keys.toml"), "--job", "5",
                   "--groups", "100", "--out", str(tmp_path / "k"), ok=False)
    assert bad.returncode == 1 and "--groups: groups need a user" in bad.stderr


def test_through_the_mount_files_show_their_owner_and_mode_and_another_users_mount_is_refused(
        users_cluster, tmp_path, monkeypatch):
    cluster, keys = users_cluster
    monkeypatch.setenv("CONCERTO_CREDENTIAL", str(keys["owner"]))
    with mounted_at(cluster, tmp_path / "owner"):
        monkeypatch.setenv("CONCERTO_CREDENTIAL", str(keys["other"]))
        with mounted_at(cluster, tmp_path / "other"):
            mine, theirs = tmp_path / "owner", tmp_path / "other"
            old = os.umask(0o022)
            try:
                (mine / "m").mkdir(0o777)
                (mine / "m" / "f").write_bytes(b"private")
            finally:
                os.umask(old)
            st = os.stat(mine / "m" / "f")
            assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1001, 100, 0o644)
            assert os.stat(mine / "m").st_mode & 0o7777 == 0o755
            os.chmod(mine / "m" / "f", 0o600)
            assert os.stat(theirs / "m" / "f").st_mode & 0o7777 == 0o600
            with pytest.raises(PermissionError):
                (theirs / "m" / "f").read_bytes()
            with pytest.raises(PermissionError):
                (theirs / "m" / "g").write_bytes(b"x")
            assert not os.access(theirs / "m" / "f", os.R_OK) and os.access(mine / "m" / "f", os.R_OK)
            with pytest.raises(PermissionError):
                os.chown(mine / "m" / "f", 1003, -1)
            # Only the owner may chmod, whatever the modes: EPERM, as POSIX
            # says (it was EACCES), and so for chown of another's file.
            with pytest.raises(PermissionError) as refused:
                os.chmod(theirs / "m" / "f", 0o644)
            assert refused.value.errno == errno.EPERM, refused.value
            with pytest.raises(PermissionError) as refused:
                os.chown(theirs / "m" / "f", 1002, -1)
            assert refused.value.errno == errno.EPERM, refused.value
            assert (mine / "m" / "f").read_bytes() == b"private"


# Runs as the owner through the mount: makes the tree local_outcomes makes
# (each file and directory the owner's, with its mode).
BUILDER = r"""
import json, os, sys
for kind, path, mode, uids in json.loads(sys.stdin.read()):
    if kind == "file":
        with open(path, "wb") as f:
            f.write(b"x")
    else:
        os.mkdir(path)
        for leaf in ["f"] + ["victim-%d" % uid for uid in uids]:
            with open(os.path.join(path, leaf), "wb") as f:
                f.write(b"x")
    os.chmod(path, mode)
"""


def as_user(who: str, script: str, work) -> subprocess.CompletedProcess:
    uid, groups = USERS[who]
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={groups[0]}",
                           f"--groups={','.join(map(str, groups))}", sys.executable, "-c", script],
                          input=json.dumps(work), capture_output=True, text=True, timeout=120)


def test_one_node_mount_serves_three_real_users_each_as_itself_as_the_local_file_system_does(
        users_cluster, monkeypatch):
    cluster, _ = users_cluster
    node_key = cluster.parent / "node-a.key"
    shown = concerto("auth", "issue-node", "--keys", str(cluster.parent / "keys.toml"), "--users", "1000-1999",
                     "--id", "node-a", "--out", str(node_key)).stdout
    assert "issued node key node-a for users 1000-1999" in shown
    listed = concerto("auth", "list", "--keys", str(cluster.parent / "keys.toml")).stdout
    assert "node-a" in listed and "1000-1999" in listed
    base = Path(tempfile.mkdtemp(prefix="concerto-node-", dir="/tmp"))
    try:
        base.chmod(0o755)
        (base / "local").mkdir(mode=0o755)
        expected = local_outcomes(base / "local")
        monkeypatch.setenv("CONCERTO_CREDENTIAL", str(node_key))
        with mounted_at(cluster, base / "mnt"):
            tree = base / "mnt" / "node-tree"
            tree.mkdir()
            tree.chmod(0o777)
            shapes = sorted({(kind, mode) for _, kind, mode in cases()})
            r = as_user("owner", BUILDER, [(kind, str(tree / name(kind, mode)), mode,
                                            [uid for uid, _ in USERS.values()]) for kind, mode in shapes])
            assert r.returncode == 0, r.stderr
            st = os.stat(tree / name("file", 0o640))
            assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1001, 100, 0o640)
            got = {}
            for who in USERS:
                r = as_user(who, LOCAL_TRIER, [(op, str(tree / name(kind, mode))) for op, kind, mode in cases()])
                assert r.returncode == 0, r.stderr
                got[who] = json.loads(r.stdout)
            # Root on the node is nobody on the servers: what it makes is
            # nobody's, and a file the owner keeps to itself stays closed.
            (tree / "by-root").write_bytes(b"r")
            assert os.stat(tree / "by-root").st_uid == 65534
            with pytest.raises(PermissionError):
                (tree / name("file", 0o600)).read_bytes()
    finally:
        subprocess.run(["umount", "-l", str(base / "mnt")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    assert_same_as_local(expected, got, "node mount")
