"""The real file system's commands: ``concerto server``, ``concerto cluster ...`` and ``concerto fs ...``."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.table import Table

from concerto import _native, auth, binaries, netns, terminal
from concerto import cluster as local
from concerto.fs import Client, cluster_path

console = terminal.console()
err_console = terminal.console(stderr=True)

CHUNK = 4 << 20


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
        where = f" in namespaces concerto-{net.index}-s* ({clients} client group{'s' if clients != 1 else ''}{limit})"
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
        for warning in _native.policy_warnings(json.dumps(table)):
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
                "weight": "--weight"}


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
@fs_guarded
def rule_add(cluster_file, name, job, op, bandwidth, iops, burst, burst_requests, user, weight) -> None:
    """Add rule NAME on every server (checked by all before any applies): a rate, a weight or both. The first rule
    matching a request applies."""
    rule = {"name": name}
    for key, value in (("job", job), ("op", op), ("user", user), ("bandwidth", bandwidth), ("requests_per_second", iops),
                       ("burst", burst), ("burst_requests", burst_requests), ("weight", weight)):
        if value is not None:
            rule[key] = value
    for option, value in (("--iops", iops), ("--weight", weight)):
        if value is not None and not math.isfinite(value):
            raise click.BadParameter(f"{value} is not a number > 0", param_hint=option)
    # Checked here as every server will check it, so a mistake is named once, by its option.
    fault = _native.check_qos_rule(json.dumps(rule))
    if fault is not None:
        field, why = fault
        if field == "requests_per_second" and iops is None:
            raise click.UsageError("give --bandwidth, --iops, --weight, or several of them")
        raise click.BadParameter(why, param_hint=RULE_OPTIONS.get(field, field))
    client = Client(cluster_path(cluster_file))
    rules = _current_rules(client)
    rules["rules"].append(rule)
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
        table = Table("name", "job", "op", "user", "weight", "bandwidth (B/s)", "requests/s", "burst", "burst requests",
                      title=f"servers {', '.join(map(str, servers))}"
                            + (" (work-conserving)" if r.get("work_conserving") else ""))
        for rule in r.get("rules", []):
            table.add_row(*(str(rule.get(k, "")) for k in ("name", "job", "op", "user", "weight", "bandwidth", "requests_per_second",
                                                          "burst", "burst_requests")))
        console.print(table)


# ---------------------------------------------------------------- fs

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
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the credential (default: ID.key beside the ring), mode 0600.")
@fs_guarded
def auth_issue(ring: Path, job: int, key_id: str | None, weight: float | None, user: int | None,
               groups: str | None, out: Path | None) -> None:
    """Issue a tenant key for a job. The servers accept it from their next connection on;
    the job's processes use it with CONCERTO_CREDENTIAL=FILE."""
    key_id, path = auth.issue(ring, job, key_id, weight, out, user=user, groups=_group_list(groups))
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


def _group_list(text: str | None) -> list[int]:
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
