"""The commands that put the simulator beside the real file system:
``concerto twin`` (a benchmark, several applications, a trace or a
benchmark's own output, in both worlds) and ``concerto calibrate`` (what
the throttle does not give the simulator, measured)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from rich.markup import escape

from concerto import _native, terminal
from concerto.terminal import StepClock, UsageProblem, guarded
from concerto.fscli import stripe_unit_arg

console = terminal.console()
err_console = terminal.console(stderr=True)


@click.command("twin", context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1)
@click.option("--apps", "apps_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Instead of a command line: an [[apps]] file (as `sim workload from-ior/from-mdtest` print), "
                   "its applications run at once, each the servers' application 1, 2, ...")
@click.option("--real-from", "real_from", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Instead of running the real side: IOR's output (text, or its JSON summary) or mdtest's "
                   "output, from any cluster; the simulator runs the command line it gives.")
@click.option("--servers", type=click.IntRange(min=1, max=64), default=4, show_default=True)
@click.option("--throttle", type=click.Choice(["hdd", "ssd"]), default="hdd", show_default=True,
              help="The servers' emulated device (the simulator gets its model).")
@click.option("--stripe-unit", default="64KiB", show_default=True, callback=stripe_unit_arg(real=True))
@click.option("--depth", type=click.IntRange(min=1, max=1024), default=8, show_default=True,
              help="Requests in service per server.")
@click.option("--policy", type=click.Choice(_native.policy_names()), default="fifo", show_default=True)
@click.option("--reps", type=click.IntRange(min=1, max=100), default=3, show_default=True,
              help="Real runs (the median) and simulator seeds (the mean).")
@click.option("--processes", type=click.IntRange(min=1, max=256), default=None,
              help="Tasks, when the command line has no launcher (mpirun -np N).")
@click.option("--write-behind", default="16MiB", show_default=True, metavar="SIZE",
              help="The mount's write-behind, as `concerto mount --write-behind` (0: writes go through); the "
                   "simulated clients hold as much, coalesce as the mount does and read ahead as it does.")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A calibration.toml of `concerto calibrate`: the simulator charges its client overhead and "
                   "the servers' measured cost of each operation.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/twin"),
              show_default=True)
@guarded
def twin_cmd(command: tuple[str, ...], apps_file: Path | None, real_from: Path | None, servers: int,
             throttle: str, stripe_unit: int,
             depth: int, policy: str, reps: int, processes: int | None, write_behind: str, calibration: Path | None,
             out: Path) -> None:
    """Run an IOR or mdtest command line on a local throttled cluster (the project's own IOR-like and
    mdtest-like drivers, through the mount) and in the simulator on its twin; print each operation side by
    side with sim / real. E.g. concerto twin mpirun -np 4 ior -t 1m -b 4m -s 4 -F -w -r"""
    from rich import box
    from rich.table import Table

    from concerto import twin

    if [bool(command), apps_file is not None, real_from is not None].count(True) != 1:
        raise UsageProblem("give an IOR or mdtest command line, --apps FILE or --real-from FILE (one of them)")
    line = (command[0] if len(command) == 1 else shlex.join(command)) if command else str(apps_file or real_from)
    try:
        _native.parse_size(write_behind)
    except ValueError as e:
        raise UsageProblem(f"--write-behind {write_behind}: {e}") from e
    spec = twin.TwinSpec(servers=servers, throttle=throttle, stripe_unit=stripe_unit, depth=depth, policy=policy,
                         reps=reps, write_behind=write_behind)
    try:
        if calibration is not None:
            from concerto.calibrate import read_calibration

            spec = read_calibration(calibration, spec)
        # The real rounds are the steps whose time tells how long is left.
        say = StepClock(reps, lambda m: err_console.print(f"[dim]{escape(m)}[/]"),
                        is_step=lambda m: m.startswith("real cluster"))
        if apps_file is not None:
            result = twin.run_apps(apps_file, spec, out, say=say)
            tables = [(f"{a['name']} ({a['program']}, {a['app']['processes']} tasks)", a) for a in result["apps"]]
        elif real_from is not None:
            result = twin.run_imported(real_from, spec, out, processes, say=say)
            tables = [(result["command"], result)]
        else:
            result = twin.run(line, spec, out, processes, say=say)
            tables = [(line, result)]
    except twin.TwinProblem as e:
        raise UsageProblem(str(e)) from e
    for title, figures in tables:
        t = Table(title=f"{escape(title)}: {servers} {throttle}-class servers, {policy}, {figures['unit']}",
                  title_justify="left", box=box.SIMPLE_HEAD,
                  caption=(f"real: {escape(str(real_from))} (its mean)" if real_from is not None
                           else f"real: median of {reps} runs through the mount")
                  + f"; sim: mean of {reps} seeds on the throttle's device model", caption_justify="left")
        # The real runs' range beside their median: on a small machine it
        # can be as wide as the ratio's tolerance.
        spread = any(len(r.get("real_runs") or []) > 1 for r in figures["rows"])
        for col in ("operation", "real", *(("real runs",) if spread else ()), "sim", "sim / real"):
            t.add_column(col, justify="left" if col == "operation" else "right")
        busy = bool(result.get("host", {}).get("busy"))
        for r in figures["rows"]:
            ratio = "busy" if busy else f"{r['sim_over_real']:.2f}" if r["sim_over_real"] is not None else "-"
            cells = [r["operation"], f"{r['real']:.1f}"]
            if spread:
                runs = r.get("real_runs") or []
                cells.append(f"{min(runs):.1f}-{max(runs):.1f}" if len(runs) > 1 else "")
            t.add_row(*cells, f"{r['sim']:.1f}", ratio)
        console.print(t)
    if result.get("host", {}).get("busy"):
        from concerto.host import HostPressure

        h = result["host"]
        pressure = HostPressure.from_dict(h)
        console.print(f"[bold yellow]the host was busy while the real side ran[/] ({escape(pressure.describe())}; "
                      f"busy above {h['busy_above']:.0%}): its figures are the busy host's and a ratio to the model "
                      f"would measure the host, so none is shown (twin.json has them)")
    for key, what in (("not_modelled", "in the output, not modelled"), ("not_in_output", "simulated, not in the output")):
        if result.get(key):
            console.print(f"{what}: {escape(', '.join(result[key]))}")
    if spec.client_overhead_ns:
        mount = (f" and a mount moving {spec.mount_bandwidth_Bps / 1e6:.0f} MB/s"
                 if spec.mount_bandwidth_Bps is not None else "")
        varying = (f" ({spec.client_overhead_spread_ns / 1000:.0f} us of it varying)"
                   if spec.client_overhead_spread_ns else "")
        console.print(f"simulated with a client overhead of {spec.client_overhead_ns / 1000:.0f} us per step{varying}"
                      f"{mount} "
                      f"({escape(str(calibration))})")
    from concerto.twin_plot import plot

    drawn = plot(tables, out / "twin.png")
    console.print(f"figures: {out / 'twin.json'}; plot: {drawn}")


@click.command("calibrate")
@click.option("--servers", type=click.IntRange(min=1, max=64), default=4, show_default=True)
@click.option("--throttle", type=click.Choice(["hdd", "ssd"]), default="hdd", show_default=True)
@click.option("--stripe-unit", default="64KiB", show_default=True, callback=stripe_unit_arg(real=True))
@click.option("--depth", type=click.IntRange(min=1, max=1024), default=8, show_default=True)
@click.option("--items", type=click.IntRange(min=10, max=1_000_000), default=300, show_default=True,
              help="Files the probe stats.")
@click.option("--reps", type=click.IntRange(min=1, max=100), default=5, show_default=True,
              help="Real runs of the probe (the median).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/calibrate"),
              show_default=True)
@guarded
def calibrate_cmd(servers: int, throttle: str, stripe_unit: int, depth: int, items: int, reps: int,
                  out: Path) -> None:
    """Measure what each operation costs a server and what a request costs a client before it reaches one (the
    kernel, FUSE, the library) on a local throttled cluster, against the simulator's twin; write
    calibration.toml for `concerto twin --calibration`."""
    from concerto import calibrate, twin

    spec = twin.TwinSpec(servers=servers, throttle=throttle, stripe_unit=stripe_unit, depth=depth, reps=reps)
    try:
        result = calibrate.calibrate(spec, items, say=StepClock(calibrate.steps(reps),
                                                                 lambda m: err_console.print(f"[dim]{escape(m)}[/]")))
    except twin.TwinProblem as e:
        raise UsageProblem(str(e)) from e
    path = calibrate.write(result, out)
    spread = result["spread"]

    def runs(lo_hi: list | None, scale: float = 1e3, unit: str = "us") -> str:
        """The range each run alone gives, beside a figure: how far to trust it."""
        if not lo_hi or reps < 2:
            return ""
        return f" (runs alone: {lo_hi[0] / scale:.0f}-{lo_hi[1] / scale:.0f} {unit})"

    costs = ", ".join(f"{op} {ns / 1000:.0f}" for op, ns in result["server_latency_ns"].items())
    console.print(f"each operation's latency at the server, alone (us): {costs}; "
                  f"{result['server_fixed_ns'] / 1000:.0f} us of it is the server's handling of any request")
    console.print(f"a stat: {result['real_stat_s'] * 1e6:.0f} us real, {result['simulated_stat_s'] * 1e6:.0f} us "
                  f"simulated without client overhead: client_overhead = {result['client_overhead_ns'] / 1000:.0f} us"
                  + runs(spread["client_overhead_ns"]))
    console.print(f"a stat's mean above its fastest tenth: client_overhead_spread = "
                  f"{result['client_overhead_spread_ns'] / 1000:.0f} us (each step's overhead varies by it)"
                  + runs(spread["client_overhead_spread_ns"]))
    console.print(f"a data request at a server, alone: {result['server_data_beyond_device_ns'] / 1000:.0f} us beyond "
                  "the device, less the handling of any request: server_data_overhead = "
                  f"{result['server_data_overhead_ns'] / 1000:.0f} us" + runs(spread["server_data_overhead_ns"]))
    for transfer, w in result["data_probe"].items():
        console.print(f"a write of {int(transfer) >> 10} KiB: {w['real_s'] * 1e6:.0f} us real, "
                      f"{w['simulated_s'] * 1e6:.0f} us simulated")
    bandwidth = result["mount_bandwidth_Bps"]
    console.print("the mount's data path: " + (f"{bandwidth / 1e6:.1f} MB/s (cluster.network.client_bandwidth)"
                                                 + runs(spread["mount_bandwidth_Bps"], 1e6, "MB/s")
                                                 if bandwidth is not None else "no cost per byte beyond the model's"))
    console.print(f"the page cache: one process reads back what it wrote at {result['page_cache_Bps'] / 1e6:.0f} "
                  "MB/s (cluster.page_cache)")
    from concerto.host import HostPressure

    h = result["host"]
    pressure = HostPressure.from_dict(h)
    if pressure.busy:
        console.print(f"[bold yellow]the host was busy while calibrating[/] ({escape(pressure.describe())}; busy "
                      f"above {h['busy_above']:.0%}): these are the busy host's figures, not the quiet machine's; "
                      "calibrate again when it is quiet")
    else:
        console.print(f"the host: {escape(pressure.describe())}")
    console.print(f"wrote {path}")
