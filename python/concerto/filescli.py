"""``concerto fs ...``: the file system's files from the command line (put, get, ls, stat, ...)."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.table import Table

from concerto import _native, terminal
from concerto import cluster as local
from concerto.fs import Client, cluster_path
from concerto.fscli import FsProblem, cluster_opt, console, err_console, fs_guarded, stripe_unit_arg

# Bytes a put or get moves per request.
CHUNK = 4 << 20


@click.group("fs")
@cluster_opt
@click.pass_context
def fs(ctx, cluster_file: Path | None) -> None:
    """Use the file system: put, get, ls, stat, rm, mkdir, chmod, chown, layout, setstripe."""
    ctx.obj = cluster_file


def _client(ctx) -> Client:
    return Client(cluster_path(ctx.obj))


def _cluster_after(ctx, _param, value: Path | None) -> Path | None:
    """`fs COMMAND --cluster F`, as `cluster` and `mount` take it: the same as `fs --cluster F COMMAND`."""
    if value is not None:
        if ctx.obj is not None and Path(ctx.obj) != value:
            raise click.BadParameter(f"{value} here, but {ctx.obj} before the command: give one")
        ctx.obj = value
    return value


# Every fs command also takes --cluster after its name.
fs_cluster_opt = click.option("--cluster", type=click.Path(dir_okay=False, path_type=Path), default=None,
                              expose_value=False, callback=_cluster_after,
                              help="Cluster file (default: $CONCERTO_CLUSTER, else concerto-cluster/cluster.toml).")


def _transfer_bar(label: str) -> Progress:
    return Progress(TextColumn(label), BarColumn(), DownloadColumn(), TransferSpeedColumn(), console=err_console,
                    transient=True, disable=not err_console.is_terminal)


@fs.command("put")
@fs_cluster_opt
@click.argument("local_path", metavar="LOCAL", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("remote")
@click.option("--unit", default=None, callback=stripe_unit_arg(real=True), help="Stripe unit for a new file.")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stripe count for a new file.")
@click.pass_context
@fs_guarded
def fs_put(ctx, local_path: Path, remote: str, unit, count) -> None:
    """Copy a local file in (replacing REMOTE), then fsync."""
    client = _client(ctx)
    f = client.create(remote, unit=unit, count=count, exclusive=False)
    client.truncate(remote, 0)
    size = local_path.stat().st_size
    with _transfer_bar(remote) as bar:
        task = bar.add_task("put", total=size)
        f.copy_in(local_path, CHUNK, lambda done: bar.update(task, completed=done))
    f.fsync()
    f.close()
    console.print(f"{remote}: {terminal.size(size)} over {len(f.servers)} servers")


@fs.command("get")
@fs_cluster_opt
@click.argument("remote")
@click.argument("local_path", metavar="LOCAL", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
@fs_guarded
def fs_get(ctx, remote: str, local_path: Path) -> None:
    """Copy REMOTE out to a local file."""
    client = _client(ctx)
    f = client.open(remote)
    size = client.stat(remote).size
    tmp = local_path.with_name(local_path.name + ".part")
    try:
        with _transfer_bar(remote) as bar:
            task = bar.add_task("get", total=size)
            offset = f.copy_out(tmp, size, CHUNK, lambda done: bar.update(task, completed=done))
        os.replace(tmp, local_path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # never leave a partial copy behind
        raise
    console.print(f"{local_path}: {terminal.size(offset)}")


@fs.command("ls")
@fs_cluster_opt
@click.argument("directory", default="/")
@click.pass_context
@fs_guarded
def fs_ls(ctx, directory: str) -> None:
    """List a directory."""
    client = _client(ctx)
    t = Table(box=None)
    for col, justify in (("mode", "left"), ("owner", "left"), ("size", "right"), ("layout", "left"),
                         ("name", "left")):
        t.add_column(col, justify=justify)
    for e in client.listdir(directory):
        s = client.stat(directory.rstrip("/") + "/" + e.name)
        mode, owner = terminal.mode_string(s.kind, s.mode), f"{s.uid}:{s.gid}"
        if s.is_dir:
            t.add_row(mode, owner, "-", "", e.name + "/")
        else:
            t.add_row(mode, owner, terminal.size(s.size), f"{terminal.size(s.stripe_unit)} x {len(s.servers)}", e.name)
    console.print(t)


@fs.command("stat")
@fs_cluster_opt
@click.argument("path")
@click.pass_context
@fs_guarded
def fs_stat(ctx, path: str) -> None:
    """A file's or directory's attributes."""
    s = _client(ctx).stat(path)
    import datetime as dt
    when = dt.datetime.fromtimestamp(s.mtime_ns / 1e9).isoformat(sep=" ", timespec="seconds") if s.mtime_ns else "-"
    console.print(f"[bold]{path}[/]: {s.kind}, inode {s.inode}, {terminal.mode_string(s.kind, s.mode)} "
                  f"({s.mode:04o}) owned by {s.uid}:{s.gid}")
    if s.is_dir:
        d = s.default_layout or {}
        console.print(f"  entries: {s.entries}; default layout: {terminal.size(d.get('unit', 0))} x {d.get('count', '?')} servers")
    else:
        console.print(f"  size: {s.size} bytes ({terminal.size(s.size)}); layout: {terminal.size(s.stripe_unit)} x {len(s.servers)} servers {s.servers}")
    console.print(f"  modified: {when}")


def _mode_arg(ctx, param, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        mode = int(value, 8)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an octal mode (e.g. 750 or 1777)") from None
    if not 0 <= mode <= 0o7777:
        raise click.BadParameter(f"{value!r}: a mode is at most 7777 (octal)")
    return mode


def _owner_arg(ctx, param, value: str) -> tuple[int | None, int | None]:
    user, _, group = value.partition(":")
    try:
        return (int(user) if user else None, int(group) if group else None)
    except ValueError:
        raise click.BadParameter(f"{value!r}: give numeric ids, UID, UID:GID or :GID") from None


@fs.command("chmod")
@fs_cluster_opt
@click.argument("mode", callback=_mode_arg)
@click.argument("path")
@click.pass_context
@fs_guarded
def fs_chmod(ctx, mode: int, path: str) -> None:
    """Set a file's or directory's permission bits (octal MODE; its owner or the admin key)."""
    s = _client(ctx).chmod(path, mode)
    console.print(f"{path}: {terminal.mode_string(s.kind, s.mode)} {s.uid}:{s.gid}")


@fs.command("chown")
@fs_cluster_opt
@click.argument("owner", metavar="UID[:GID]", callback=_owner_arg)
@click.argument("path")
@click.pass_context
@fs_guarded
def fs_chown(ctx, owner: tuple[int | None, int | None], path: str) -> None:
    """Give a file to another user (the admin key only) or group (its owner, to a group its key names)."""
    s = _client(ctx).chown(path, *owner)
    console.print(f"{path}: {terminal.mode_string(s.kind, s.mode)} {s.uid}:{s.gid}")


@fs.command("rm")
@fs_cluster_opt
@click.argument("path")
@click.pass_context
@fs_guarded
def fs_rm(ctx, path: str) -> None:
    """Remove a file, or an empty directory."""
    client = _client(ctx)
    if client.stat(path).is_dir:
        client.rmdir(path)
    else:
        client.unlink(path)


@fs.command("mkdir")
@fs_cluster_opt
@click.argument("directory")
@click.option("-p", "--parents", is_flag=True, help="Create missing parents; no error if it exists.")
@click.option("-m", "--mode", default="755", show_default=True, callback=_mode_arg,
              help="Permission bits (octal).")
@click.pass_context
@fs_guarded
def fs_mkdir(ctx, directory: str, parents: bool, mode: int) -> None:
    """Create a directory (it inherits its parent's default layout)."""
    _client(ctx).mkdir(directory, parents=parents, mode=mode)


@fs.command("layout")
@fs_cluster_opt
@click.argument("path")
@click.option("--stripes", type=click.IntRange(min=0), default=8, show_default=True, help="How many stripe units to list.")
@click.pass_context
@fs_guarded
def fs_layout(ctx, path: str, stripes: int) -> None:
    """Which server holds which stripe of a file (like lfs getstripe / pvfs2-viewdist)."""
    client = _client(ctx)
    s = client.stat(path)
    if s.is_dir:
        raise FsProblem(f"{path}: is a directory (its default layout: {s.default_layout})")
    addresses = {e["id"]: e["address"] for e in local.read_cluster(client.cluster_file)["servers"]}
    unit, servers = s.stripe_unit, s.servers
    count = len(servers)
    console.print(f"[bold]{path}[/]: inode {s.inode}, {s.size} bytes, stripe unit {terminal.size(unit)}, stripe count {count}")
    per = Table(title="objects")
    for col in ("slot", "server", "address", "object", "bytes held"):
        per.add_column(col, justify="right")
    held_by = client.open(path).object_sizes()
    for slot, (sid, held) in enumerate(zip(servers, held_by)):
        per.add_row(str(slot), str(sid), addresses.get(sid, "?"), f"{s.inode:016x}", str(held))
    console.print(per)
    rows = _native.stripe_map(unit, servers, s.size, stripes)
    if rows:
        t = Table(title=f"first {len(rows)} stripes")
        for col in ("stripe", "file range", "server", "object offset"):
            t.add_column(col, justify="right")
        for stripe, first, last, sid, object_offset in rows:
            t.add_row(str(stripe), f"{first}-{last}", str(sid), str(object_offset))
        console.print(t)


@fs.command("setstripe")
@fs_cluster_opt
@click.argument("directory")
@click.option("--unit", default=None, callback=stripe_unit_arg(real=True), help="Stripe unit, e.g. 1MiB.")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Number of servers to stripe over.")
@click.pass_context
@fs_guarded
def fs_setstripe(ctx, directory: str, unit, count) -> None:
    """Set a directory's default layout for files created in it from now on."""
    if unit is None and count is None:
        raise click.UsageError("give --unit, --count or both")
    _client(ctx).setstripe(directory, unit=unit, count=count)
