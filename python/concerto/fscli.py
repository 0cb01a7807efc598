"""The real file system's commands: ``concerto server``, ``mount`` and ``cluster ...`` (``auth ...`` and ``fs ...`` are
in authcli.py and filescli.py), and the argument parsers they share."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from concerto import _native, auth, binaries, netns, terminal
from concerto import cluster as local
from concerto.fs import Client, cluster_path

console = terminal.console()
err_console = terminal.console(stderr=True)

class FsProblem(click.ClickException):
    """A file system or cluster error, printed as `error: ...` with exit code 1."""

    def show(self, file=None) -> None:  # noqa: ARG002 - click's signature
        err_console.print(f"[bold red]error:[/] {self.message}", highlight=False)


def fs_guarded(fn):
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (local.ClusterError, netns.NetnsError, auth.KeyFileError, ValueError, OSError) as e:
            raise FsProblem(_problem(e)) from e

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _problem(e: Exception) -> str:
    """The message of an error: a local OS error names its path (and the second path of a rename)."""
    if isinstance(e, OSError) and e.strerror:
        paths = [str(p) for p in (e.filename, e.filename2) if p is not None]
        return ": ".join([" -> ".join(paths), e.strerror]) if paths else e.strerror
    return str(e)


def size_arg(_ctx, _param, value):
    """A click callback: a size option ("64KiB", "1MB", "4096") as bytes;
    a bad one is a usage error naming the option."""
    if value is None:
        return None
    try:
        return _native.parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def link_rate_arg(_ctx, _param, value):
    """A click callback: a link's rate ("12.5MB/s") as bytes/s, above 0;
    a bad one is a usage error naming the option."""
    if value is None:
        return None
    try:
        rate = _native.parse_bandwidth(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    if rate <= 0:
        raise click.BadParameter(f"{value!r}: a link's rate must be above 0")
    return rate


def stripe_unit_arg(real: bool):
    """A click callback for a stripe unit option: a size as bytes; one in
    decimal units ("4KB" is 4000 bytes) is warned about with the binary
    unit, and one that is not whole 4 KiB pages is refused when ``real``
    (the servers would refuse it) and warned about otherwise."""

    def check(ctx, param, value):
        size = size_arg(ctx, param, value)
        if size is None:
            return None
        problem = _native.stripe_unit_warning(size, str(value))
        if problem and real and size % 4096:
            raise click.BadParameter(problem)
        if problem:
            err_console.print(f"[bold yellow]warning:[/] {escape(param.opts[0])} {escape(str(value))}: {escape(problem)}",
                              highlight=False)
        return size

    return check


cluster_opt = click.option("--cluster", "cluster_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                           help="Cluster file (default: $CONCERTO_CLUSTER, else concerto-cluster/cluster.toml).")


# ---------------------------------------------------------------- server

@click.command("server")
@click.option("--config", "config", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The server file (see docs/deployment.md).")
@click.option("--check", is_flag=True, help="Validate the file, print what it describes, and exit.")
@click.option("--ready-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the bound addresses here as JSON once listening.")
@fs_guarded
def server(config: Path, check: bool, ready_file: Path | None) -> None:
    """Run one server (data, metadata or both) until SIGINT or SIGTERM.

    The same as running the `concerto-server` binary, which is what a
    service manager on an I/O node should start (no Python needed)."""
    args = ["--config", str(config)] + (["--check"] if check else [])
    args += ["--ready-file", str(ready_file)] if ready_file else []
    binaries.exec_binary(binaries.SERVER, args)


# ---------------------------------------------------------------- mount

@click.command("mount")
@cluster_opt
# Not click's exists check: a stale mount left by a killed mount fails to
# stat, and click would call it missing; concerto-fuse clears it or says how.
@click.argument("mountpoint", type=click.Path(path_type=Path))
@click.option("--attr-ttl", type=click.FloatRange(min=0, max=3600), default=1.0, show_default=True,
              help="Seconds the kernel may cache names and attributes.")
@click.option("--ready-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Written (JSON) once the mount is up.")
@click.option("--write-behind", default="16MiB", show_default=True, callback=size_arg,
              help="Writes that may be on their way to the servers after write(2) returned (0: write through). "
                   "O_DIRECT and O_SYNC writes are always written through.")
@click.option("--no-phases", is_flag=True,
              help="Do not find callers' I/O phases for the cluster's coordinator (found by default when it has one).")
@click.option("--transfers", default=None, metavar="ORDER",
              help="Send reads and writes in blocks in one of Clusterfile's orders, each caller as its rank: "
                   "ORDERING[,block=SIZE][,in-flight=N][,seed=N], ORDERING first-ios, random-ios or hash-ios "
                   "(default: every server's part at once).")
@fs_guarded
def mount(cluster_file: Path | None, mountpoint: Path, attr_ttl: float, ready_file: Path | None,
          write_behind: int, no_phases: bool, transfers: str | None) -> None:
    """Mount the cluster at MOUNTPOINT with FUSE until SIGINT or SIGTERM.

    Unmodified programs then read and write striped files there; each
    caller's requests carry its job (CONCERTO_APP_ID, else the batch
    system's or launcher's job id, else its session) and rank, as
    docs/filesystem.md "Jobs and ranks" says. Runs the `concerto-fuse` binary. Needs /dev/fuse
    and root (or fusermount3)."""
    try:
        mountpoint.lstat()
    except FileNotFoundError:
        raise FsProblem(f"mount point {mountpoint} does not exist (create the directory first)") from None
    except OSError:
        pass  # a stale mount, say: concerto-fuse deals with it
    path = cluster_path(cluster_file)
    if not path.is_file():
        raise FsProblem(f"no cluster file at {path} (start one with `concerto cluster up`)")
    args = ["--cluster", str(path), "--attr-ttl", str(attr_ttl), "--write-behind", str(write_behind),
            str(mountpoint)]
    args += ["--ready-file", str(ready_file)] if ready_file else []
    args += ["--no-phases"] if no_phases else []
    args += ["--transfers", transfers] if transfers else []
    binaries.exec_binary(binaries.FUSE, args)


# ---------------------------------------------------------------- cluster

# The coordinator's set rules `cluster up --coordinator` offers (a table or
# thresholds are written in a server file's [coordinator.sets]).
COORDINATOR_SETS = ("set10", "exclusive-fcfs", "fair-share", "set-fair-share", "share-priority")


@click.group("cluster")
def cluster() -> None:
    """Start, inspect and steer a cluster of servers."""


@cluster.command("up")
@click.option("--servers", type=click.IntRange(min=1, max=256), default=4, show_default=True)
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("concerto-cluster"),
              show_default=True, help="Where server files, data, logs and cluster.toml go.")
@click.option("--policy", type=click.Choice(_native.policy_names()), default="fifo", show_default=True)
@click.option("--set", "params", multiple=True, metavar="KEY=VALUE", help="A policy parameter (repeatable).")
@click.option("--throttle", type=click.Choice(local.THROTTLES), default="none", show_default=True,
              help="Emulate an HDD- or SSD-class device on each server.")
@click.option("--meta", type=int, default=0, show_default=True, help="Which server also holds the metadata.")
@click.option("--stripe-unit", default="64KiB", show_default=True, callback=stripe_unit_arg(real=True), help="Root's default stripe unit.")
@click.option("--stripe-count", type=click.IntRange(min=1), default=None, help="Root's default stripe count (default: all).")
@click.option("--depth", type=click.IntRange(min=1), default=8, show_default=True, help="Requests in flight per server.")
@click.option("--coordinator", "sets", type=click.Choice(COORDINATOR_SETS), default=None,
              help="Also start a coordinator (IO-SETS) with this set rule; the data servers should run an SFQ "
                   "policy (sfq-d-plus) so that its priorities share their bandwidth.")
@click.option("--lease", default=None, metavar="DURATION",
              help="How long the coordinator's grants last unless renewed (default 10s).")
@click.option("--netns", "in_namespaces", is_flag=True,
              help="Each server in a network namespace of its own, joined by a bridge (10.77.K.0/24), nothing on "
                   "127.0.0.1; needs root. `cluster exec` runs programs in the client groups' namespaces.")
@click.option("--clients", type=click.IntRange(min=0, max=netns.MAX_CLIENTS), default=0, show_default=True,
              help="With --netns: client groups, each a namespace of its own with its own link.")
@click.option("--link-rate", default=None, metavar="BANDWIDTH", callback=link_rate_arg,
              help="With --netns: limit every server's and client group's link to this rate each way "
                   "(\"12.5MB/s\"; a tbf queueing discipline on both ends).")
@fs_guarded
def cluster_up(servers, directory, policy, params, throttle, meta, stripe_unit, stripe_count, depth, sets,
               lease, in_namespaces, clients, link_rate) -> None:
    """Start SERVERS servers (on loopback, or across network namespaces with --netns) and write DIR/cluster.toml."""
    if lease is not None and sets is None:
        raise click.BadParameter("only with --coordinator", param_hint="--lease")
    coordinator = None
    if sets is not None:
        coordinator = {"sets": {"kind": sets}} | ({"lease": lease} if lease is not None else {})
    spec = local.ClusterSpec(servers=servers, policy=policy, policy_params=_params(params, policy), throttle=throttle, meta=meta,
                             stripe_unit=stripe_unit, stripe_count=stripe_count, depth=depth, coordinator=coordinator,
                             netns=in_namespaces, clients=clients, link_rate=link_rate)
    path = local.up(directory, spec)
    with_coordinator = f" and a coordinator ({sets})" if sets else ""
    where = ""
    if in_namespaces:
        net = netns.load(directory)
        limit = f", links {link_rate} each way" if link_rate else ""
        where = f" in namespaces {net.prefix}s* ({clients} client group{'s' if clients != 1 else ''}{limit})"
    console.print(f"{servers} servers up ({policy}, throttle {throttle}){with_coordinator}{where}; "
                  f"cluster file: [bold]{path}[/]")
    if in_namespaces and clients:
        console.print(f"run a program in client group 0: concerto cluster exec --dir {directory} -- PROGRAM ...")
    console.print(f"stop them with: concerto cluster down --dir {directory}")


def _params(items, policy: str) -> dict[str, str]:
    """The policy parameters of the --set options; a value that is valid
    but almost surely a mistake (`window=1000` is 1000 ns) is warned about."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--set")
        out[key.strip()] = value.strip()
        table = local.policy_table(policy, {key.strip(): value.strip()})
        for warning in _native.policy_warnings(table):
            err_console.print(f"[bold yellow]warning:[/] --set {escape(item)}: {escape(warning)}", highlight=False)
    return out


@cluster.command("down")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("concerto-cluster"),
              show_default=True)
@fs_guarded
def cluster_down(directory: Path) -> None:
    """Stop the servers `cluster up` started in DIR."""
    n = local.down(directory)
    console.print(f"stopped {n} server{'s' if n != 1 else ''}")


@cluster.command("exec", context_settings={"ignore_unknown_options": True})
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("concerto-cluster"),
              show_default=True)
@click.option("--client", "group", type=click.IntRange(min=0), default=0, show_default=True,
              help="Which client group's namespace.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@fs_guarded
def cluster_exec(directory: Path, group: int, command: tuple[str, ...]) -> None:
    """Run COMMAND in a client group's network namespace of the cluster `cluster up --netns` started in DIR
    (its network only: files and mounts are this machine's), with CONCERTO_CLUSTER set to DIR/cluster.toml."""
    net = netns.load(directory)
    if net is None:
        raise FsProblem(f"{directory}: no cluster across namespaces there (start one with `concerto cluster up --netns`)")
    if group >= net.clients:
        raise click.BadParameter(f"{group}: the cluster has {net.clients} client group(s)", param_hint="--client")
    os.environ["CONCERTO_CLUSTER"] = str((directory / "cluster.toml").resolve())
    argv = [*net.enter("c", group), *command]
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        raise FsProblem(f"{argv[0]}: {e.strerror}") from None


@cluster.command("status")
@cluster_opt
@fs_guarded
def cluster_status(cluster_file: Path | None) -> None:
    """Which servers answer, with their roles and policy."""
    path = cluster_path(cluster_file)
    info = local.read_cluster(path)
    answers = Client(path).ping()
    t = Table(title=f"cluster {path}")
    for col in ("id", "address", "roles", "policy", "state"):
        t.add_column(col)
    down = 0
    for s, a in zip(info["servers"], answers):
        state = "[green]up[/]" if "error" not in a else f"[red]down[/] ({a['error']})"
        down += "error" in a
        t.add_row(str(s["id"]), s["address"], ",".join(s["roles"]), a.get("policy", "-"), state)
    console.print(t)
    if down:
        raise FsProblem(f"{down} of {len(answers)} servers do not answer")


# Applications shown by `cluster stats`; servers track up to 4096 each and
# retire the idlest beyond that (their sums show as "retired").
STATS_ROWS = 40


@cluster.command("stats")
@cluster_opt
@click.option("--json", "as_json", is_flag=True, help="Print the raw statistics as JSON.")
@fs_guarded
def cluster_stats(cluster_file: Path | None, as_json: bool) -> None:
    """Queues, per-application service and latency on every server."""
    path = cluster_path(cluster_file)
    stats = Client(path).server_stats()
    if as_json:
        click.echo(json.dumps(stats, indent=2))
        return
    # Servers that do not answer are named below the tables, not inside them.
    entries = local.read_cluster(path)["servers"]
    silent = [f"server {e['id']}: {s['error']}" for e, s in zip(entries, stats) if "error" in s]
    if len(silent) == len(stats):
        raise FsProblem("no server answers: " + "; ".join(silent) + " (is the cluster running? `concerto cluster status`)")
    servers = Table(title="servers")
    for col in ("server", "policy", "queued", "in flight", "read p50/p99", "write p50/p99", "meta p50/p99", "free"):
        servers.add_column(col, justify="right")
    apps = Table(title="applications (all servers)")
    for col in ("app", "read", "written", "data ops", "meta ops", "queued now", "waiting s", "held back s"):
        apps.add_column(col, justify="right")
    per_app: dict[int, dict] = {}
    for s in stats:
        if "error" in s:
            continue
        lat = {h["op"]: h for h in s["latency"]}
        servers.add_row(s["address"], s["policy"], str(s["queued"]), str(s["in_flight"]),
                        *(_quantiles(lat[op]) for op in ("read", "write", "metadata")),
                        terminal.size(s["space_free"]) if s["space_total"] else "-")
        for a in s["apps"]:
            acc = per_app.setdefault(a["app"], {k: 0 for k in a})
            for k, v in a.items():
                if k != "app":
                    acc[k] += v
        retired = s.get("retired", {})
        if retired.get("apps"):
            acc = per_app.setdefault("retired", {k: 0 for k in retired})
            for k, v in retired.items():
                acc[k] += v
    # The busiest first; a long table is cut (--json has every application).
    shown = sorted(per_app.items(), key=lambda kv: (-(kv[1]["read_bytes"] + kv[1]["write_bytes"]), str(kv[0])))
    for app, a in shown[:STATS_ROWS]:
        apps.add_row(str(app), terminal.size(a["read_bytes"]), terminal.size(a["write_bytes"]), str(a["data_ops"]), str(a["metadata_ops"]),
                     str(a.get("queued", 0)), f"{a['waiting_s']:.2f}", f"{a['held_s']:.2f}")
    console.print(servers)
    console.print(apps)
    for s in stats:
        if s.get("coordinator"):
            console.print(_coordinator_table(s["coordinator"]))
    if len(shown) > STATS_ROWS:
        console.print(f"... and {len(shown) - STATS_ROWS} more applications (all of them: --json)")
    for line in silent:
        err_console.print(f"[red]does not answer[/]: {line}", soft_wrap=True, markup=True)


@cluster.command("arrivals")
@cluster_opt
@click.option("--last", type=click.IntRange(min=1, max=8192), default=16, show_default=True,
              help="Arrivals shown per server (the latest).")
@click.option("--json", "as_json", is_flag=True, help="Print every server's whole arrival log as JSON.")
@fs_guarded
def cluster_arrivals(cluster_file: Path | None, last: int, as_json: bool) -> None:
    """The latest requests to reach each server's queue, in arrival order: who sent them (application and rank),
    what they ask for and when — the order transfer ordering and coordination are about. Needs the admin key."""
    logs = Client(cluster_path(cluster_file)).arrivals()
    if as_json:
        click.echo(json.dumps(logs, indent=2))
        return
    for server, log in enumerate(logs):
        if isinstance(log, dict):
            raise FsProblem(f"server {server}: {log['error']}")
        shown = log[-last:]
        t = Table(title=f"server {server}: {len(shown)} of its latest {len(log)} arrivals")
        for col in ("#", "ms", "app", "rank", "op", "object", "offset", "bytes"):
            t.add_column(col, justify="right")
        start = shown[0]["at_ns"] if shown else 0
        for a in shown:
            t.add_row(str(a["seq"]), f"{(a['at_ns'] - start) / 1e6:.3f}", str(a["app"]), str(a["rank"]), a["op"],
                      str(a["object"]), str(a["offset"]), terminal.size(a["bytes"]))
        console.print(t)


def _coordinator_table(c: dict) -> Table:
    """Who does I/O by the coordinator's grant and who waits, in which set, for how long."""
    t = Table(title=f"coordinator ({c['policy']}; {c['grants_total']} grants, "
                    f"{c['leases_expired']} leases ran out)")
    for col in ("app", "state", "set", "priority", "for s", "w_iter s"):
        t.add_column(col, justify="right")
    for state, entries in (("granted", c["granted"]), ("waiting", c["waiting"])):
        for e in entries:
            w = "-" if e["w_iter_s"] is None else f"{e['w_iter_s']:.2f}"
            t.add_row(str(e["app"]), state, str(e["set"]), f"{e['priority']:g}", f"{e['for_s']:.2f}", w)
    return t


def _quantiles(h: dict) -> str:
    """p50/p99 as the bucket bounds the server computed."""
    if not h["count"]:
        return "-"
    return "/".join(_seconds(h[k], h["bounds_s"][-1]) for k in ("p50_s", "p99_s"))


def _seconds(bound: float | None, last: float) -> str:
    if bound is None:  # past the last bucket (infinite bounds travel as null)
        return f">{last:.1f}s"
    return f"≤{bound * 1e3:.1f}ms" if bound < 1 else f"≤{bound:.1f}s"


@cluster.command("policy")
@cluster_opt
@click.argument("name", type=click.Choice(_native.policy_names()))
@click.option("--set", "params", multiple=True, metavar="KEY=VALUE", help="A policy parameter (repeatable).")
@fs_guarded
def cluster_policy(cluster_file: Path | None, name: str, params) -> None:
    """Switch every server to policy NAME, live (queued requests are not lost)."""
    text = local.policy_toml(name, _params(params, name))
    retiring = Client(cluster_path(cluster_file)).set_policy(text)
    console.print(f"every server now schedules with {name}; the previous policy finishes the "
                  f"{sum(retiring)} requests it still held")


@cluster.command("sets")
@cluster_opt
@click.argument("rule", required=False, type=click.Choice(COORDINATOR_SETS))
@click.option("--file", "rule_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="A set rule as a TOML table (kind = \"table\", entries = [...], ...) instead of RULE.")
@fs_guarded
def cluster_sets(cluster_file: Path | None, rule: str | None, rule_file: Path | None) -> None:
    """Switch the coordinator's set rule, live (every job holding or waiting for a turn is placed again)."""
    if (rule is None) == (rule_file is None):
        raise click.UsageError("give a RULE or --file FILE, one of them")
    text = rule_file.read_text() if rule_file else f'kind = "{rule}"'
    try:
        Client(cluster_path(cluster_file)).set_sets(text)
    except ValueError as e:
        where = f"{rule_file}: " if rule_file else ""
        raise FsProblem(f"{where}{e}") from None
    console.print(f"the coordinator now places jobs with {rule or rule_file}")


@cluster.group("rule")
def cluster_rule() -> None:
    """QoS rules in force on every server: weights, and rates as Lustre's TBF (docs/security.md)."""


def _current_rules(client: Client) -> dict:
    """The servers' rules, which must agree (else say which differ)."""
    per_server = client.rules()
    first = next(iter(per_server.values()), {})
    differ = [sid for sid, r in per_server.items() if r != first]
    if differ:
        raise local.ClusterError(f"servers {', '.join(map(str, differ))} have other rules than server "
                                 f"{next(iter(per_server))}: `concerto cluster rule list` shows them; "
                                 "`rule add`/`rule rm` then set every server's")
    return {"rules": first.get("rules", []), "work_conserving": first.get("work_conserving", False)}


# A rule's fields as `cluster rule add` names them.
RULE_OPTIONS = {"name": "NAME", "job": "--job", "op": "--op", "user": "--user", "bandwidth": "--bandwidth",
                "requests_per_second": "--iops", "burst": "--burst", "burst_requests": "--burst-requests",
                "weight": "--weight", "match": "--match", "realtime": "--realtime"}


@cluster_rule.command("add")
@cluster_opt
@click.argument("name")
@click.option("--job", type=click.IntRange(min=0, max=2**32 - 1), default=None, help="The application id (default: every one).")
@click.option("--op", type=click.Choice(["read", "write", "metadata"]), default=None, help="The operations (default: all).")
@click.option("--bandwidth", default=None, help='Bytes per second per server, e.g. "20MB/s".')
@click.option("--iops", type=click.FloatRange(min=0, min_open=True), default=None, help="Requests per second per server.")
@click.option("--burst", default=None, help='Bytes that may go at once, e.g. "4MiB".')
@click.option("--burst-requests", type=click.IntRange(min=1), default=None, help="Requests that may go at once.")
@click.option("--user", type=click.IntRange(min=0, max=2**32 - 1), default=None,
              help="The user (numeric id, as keys name it) whose jobs it matches, all together (default: every one).")
@click.option("--weight", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The proportional-share weight of the requests it matches (sfq, sfq-d, sfq-d-plus, capped, "
                   "service-sync), whatever their key's weight.")
@click.option("--match", "expression", default=None, metavar="EXPR",
              help="Lustre TBF's expression instead of --job/--op/--user: fields jobid, uid, gid, opcode, nid; "
                   "'&' joins conditions, ',' alternatives, e.g. 'uid={500 501}&opcode={ost_write}, "
                   "nid={192.168.1.[1-9]@tcp}'.")
@click.option("--realtime", is_flag=True, help="Its rate is guaranteed: the requests its tokens release start before "
                                               "anything the policy holds (Lustre's realtime=1).")
@click.option("--rank", default=None, metavar="RULE",
              help="Place it just before rule RULE, so it is tried first (Lustre's rank=); default: last.")
@fs_guarded
def rule_add(cluster_file, name, job, op, bandwidth, iops, burst, burst_requests, user, weight, expression, realtime,
             rank) -> None:
    """Add rule NAME on every server (checked by all before any applies): a rate, a weight or both. The first rule
    matching a request applies."""
    rule = {"name": name}
    for key, value in (("job", job), ("op", op), ("user", user), ("bandwidth", bandwidth), ("requests_per_second", iops),
                       ("burst", burst), ("burst_requests", burst_requests), ("weight", weight),
                       ("match", expression)):
        if value is not None:
            rule[key] = value
    if realtime:
        rule["realtime"] = True
    for option, value in (("--iops", iops), ("--weight", weight)):
        if value is not None and not math.isfinite(value):
            raise click.BadParameter(f"{value} is not a number > 0", param_hint=option)
    # Checked here as every server will check it, so a mistake is named once, by its option.
    fault = _native.check_qos_rule(rule)
    if fault is not None:
        field, why = fault
        if field == "requests_per_second" and iops is None:
            raise click.UsageError("give --bandwidth, --iops, --weight, or several of them")
        raise click.BadParameter(why, param_hint=RULE_OPTIONS.get(field, field))
    client = Client(cluster_path(cluster_file))
    rules = _current_rules(client)
    names = [r["name"] for r in rules["rules"]]
    if rank is None:
        rules["rules"].append(rule)
    elif rank in names:
        rules["rules"].insert(names.index(rank), rule)
    else:
        raise click.BadParameter(f"no rule {rank!r} to place it before (rules: {', '.join(names) or 'none'})",
                                 param_hint="--rank")
    client.set_rules(rules)
    console.print(f"rule {name} is in force on every server")


@cluster_rule.command("rm")
@cluster_opt
@click.argument("name")
@fs_guarded
def rule_rm(cluster_file, name) -> None:
    """Remove rule NAME from every server; what it held goes on at once."""
    client = Client(cluster_path(cluster_file))
    rules = _current_rules(client)
    kept = [r for r in rules["rules"] if r["name"] != name]
    if len(kept) == len(rules["rules"]):
        raise local.ClusterError(f"no rule {name!r} (`concerto cluster rule list` shows them)")
    client.set_rules({**rules, "rules": kept})
    console.print(f"rule {name} removed from every server")


@cluster_rule.command("work-conserving")
@cluster_opt
@click.argument("setting", type=click.Choice(["on", "off"]))
@fs_guarded
def rule_work_conserving(cluster_file, setting) -> None:
    """Whether requests the rules hold may use slots nobody else wants (on), or stay capped on an idle server (off,
    the default, as Lustre's TBF)."""
    client = Client(cluster_path(cluster_file))
    rules = _current_rules(client)
    client.set_rules({**rules, "work_conserving": setting == "on"})
    console.print(f"rules are {'work-conserving' if setting == 'on' else 'not work-conserving'} on every server")


@cluster_rule.command("list")
@cluster_opt
@fs_guarded
def rule_list(cluster_file) -> None:
    """The rules in force, and the servers that have them."""
    per_server = Client(cluster_path(cluster_file)).rules()
    groups: dict[str, list[int]] = {}
    for sid, r in per_server.items():
        groups.setdefault(json.dumps(r, sort_keys=True), []).append(sid)
    for text, servers in groups.items():
        r = json.loads(text)
        table = Table("name", "job", "op", "user", "match", "weight", "bandwidth (B/s)", "requests/s", "burst",
                      "burst requests", title=f"servers {', '.join(map(str, servers))}"
                      + (" (work-conserving)" if r.get("work_conserving") else ""))
        for rule in r.get("rules", []):
            named = rule["name"] + (" (realtime)" if rule.get("realtime") else "")
            table.add_row(named, *(str(rule.get(k, "")) for k in ("job", "op", "user", "match", "weight", "bandwidth",
                                                                  "requests_per_second", "burst", "burst_requests")))
        console.print(table)
