"""``concerto auth ...``: the servers' key ring, who may connect and as what (docs/security.md)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from concerto import auth
from concerto.fscli import console, fs_guarded


@click.group("auth")
def auth_cmd() -> None:
    """Keys: who may connect to the servers, and as what (docs/security.md)."""


def _ring_opt(fn):
    return click.option("--keys", "ring", type=click.Path(dir_okay=False, path_type=Path),
                        default=Path("concerto-cluster") / auth.RING, show_default=True,
                        help="The servers' key ring (the file their server files name as server.keys).")(fn)


@auth_cmd.command("init")
@_ring_opt
@fs_guarded
def auth_init(ring: Path) -> None:
    """Make a key ring (an admin key and the servers' peer key) and the admin credential beside it."""
    admin = auth.init(ring)
    console.print(f"wrote {ring} (copy it to every server, mode 0600) and {admin} (the administrators' key)")


@auth_cmd.command("issue")
@_ring_opt
@click.option("--job", type=click.IntRange(min=0, max=2**32 - 1), required=True,
              help="The application id the key acts as; its requests carry no other.")
@click.option("--id", "key_id", default=None, help="The key's name (default job-JOB).")
@click.option("--weight", type=float, default=None,
              help="The job's proportional-share weight (default: the policy's default).")
@click.option("--user", type=click.IntRange(min=1, max=2**32 - 1), default=None,
              help="The user (numeric id, not 0) the job runs as: it owns the files the job creates and "
                   "permissions are checked against it; QoS rules can match it. Without one the key acts as nobody.")
@click.option("--groups", default=None, metavar="GID,...",
              help="The user's groups (numeric ids), the first its primary group (default: the user's own).")
@click.option("--as-nobody", is_flag=True,
              help="Issue the key without a user: it acts as nobody, an identity (and files) it shares with "
                   "every other key issued so. Without --user, this must be said.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the credential (default: ID.key beside the ring), mode 0600.")
@fs_guarded
def auth_issue(ring: Path, job: int, key_id: str | None, weight: float | None, user: int | None,
               groups: str | None, as_nobody: bool, out: Path | None) -> None:
    """Issue a tenant key for a job. The servers accept it from their next connection on;
    the job's processes use it with CONCERTO_CREDENTIAL=FILE."""
    if user is not None and as_nobody:
        raise click.UsageError("--as-nobody and --user: give one (a key acts as one user)")
    if user is None and groups is None and not as_nobody:
        # Tenants without a user all act as nobody, so each may read, change
        # and remove what any other made: keeping them apart is the default.
        raise click.UsageError(
            "--user: give the user the job runs as (a numeric id): a key without one acts as nobody, "
            "and shares that identity, and every file it makes, with every other key issued so "
            "(--as-nobody to mean that)")
    key_id, path = auth.issue(ring, job, key_id, weight, out, user=user, groups=group_list(groups))
    console.print(f"issued key {key_id} for job {job}: {path} (use CONCERTO_CREDENTIAL={path})")


def _user_range(_ctx, _param, value: str) -> tuple[int, int]:
    first, sep, last = value.partition("-")
    try:
        users = (int(first), int(last if sep else first))
    except ValueError:
        raise click.BadParameter(f"{value!r}: give FIRST-LAST, numeric user ids (e.g. 1000-59999)") from None
    if users[0] < 1 or users[0] > users[1] or users[1] > 2**32 - 1:
        raise click.BadParameter(f"{value!r}: from 1 (never root) up, the first not above the last")
    return users


@auth_cmd.command("issue-node")
@_ring_opt
@click.option("--users", required=True, callback=_user_range, metavar="FIRST-LAST",
              help="The users (numeric ids) the node's mount may act for, e.g. 1000-59999; never 0.")
@click.option("--id", "key_id", required=True, help="The key's name (e.g. the node's host name).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the credential (default: ID.key beside the ring), mode 0600.")
@fs_guarded
def auth_issue_node(ring: Path, users: tuple[int, int], key_id: str, out: Path | None) -> None:
    """Issue a node key: one mount on the node (`concerto mount`, as root) serves every user of the node,
    each acting as itself on files, within --users."""
    path = auth.issue_node(ring, users, key_id, out)
    console.print(f"issued node key {key_id} for users {users[0]}-{users[1]}: {path} "
                  f"(mount with CONCERTO_CREDENTIAL={path})")


@auth_cmd.command("revoke")
@_ring_opt
@click.argument("key_id")
@fs_guarded
def auth_revoke(ring: Path, key_id: str) -> None:
    """Revoke a key: new connections are refused, and open ones at their next request within 5 s."""
    auth.revoke(ring, key_id)
    console.print(f"revoked key {key_id}")


@auth_cmd.command("list")
@_ring_opt
@fs_guarded
def auth_list(ring: Path) -> None:
    """The ring's keys: id, role, job, weight, user and groups (never the secrets)."""
    table = Table("id", "role", "job", "weight", "user", "groups")
    for k in auth.keys(ring):
        user = {"admin": "root", "tenant": "nobody"}.get(k["role"], "") if k["user"] is None else str(k["user"])
        if k.get("users"):
            user = "{}-{}".format(*k["users"])
        table.add_row(k["id"], k["role"], "" if k["job"] is None else str(k["job"]),
                      "" if k["weight"] is None else f"{k['weight']:g}", user, ",".join(map(str, k["groups"])))
    console.print(table)



def group_list(text: str | None) -> list[int]:
    if text is None:
        return []
    try:
        groups = [int(g) for g in text.split(",") if g.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: give numeric group ids separated by commas (e.g. 100,2001)",
                                 param_hint="--groups") from None
    if not groups or any(not 0 <= g < 2**32 for g in groups):
        raise click.BadParameter(f"{text!r}: group ids are numbers from 0 to 4294967295", param_hint="--groups")
    return groups
