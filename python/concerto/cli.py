"""The ``concerto`` command line."""

from __future__ import annotations

import json
import shlex
import sys
import warnings
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from concerto import __version__, _native, terminal
from concerto.report import (apps_csv, benchmark_tables, compare_plot, compare_table, runset_table,
                             write_json)
from concerto.sim import ConfigWarning, ScenarioSource, simulate
from concerto.fscli import link_rate_arg, size_arg, stripe_unit_arg
from concerto.sweep import default_workers, policy_override

console = terminal.console()
err_console = terminal.console(stderr=True)
UsageProblem, guarded = terminal.UsageProblem, terminal.guarded


def run_with_progress(source: ScenarioSource, *, seed, reps, detail_csv=None, label="simulating") -> dict:
    """Runs a simulation, drawing a progress bar when it takes more than a moment."""
    with Progress(TextColumn(f"[cyan]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True, disable=not err_console.is_terminal) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        return simulate(source, seed=seed, reps=reps, detail_csv=detail_csv, on_progress=update)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="concerto")
def main() -> None:
    """Concerto: I/O scheduling on shared parallel file systems."""
    show_config_warnings()


def show_config_warnings() -> None:
    """Prints each configuration warning once, as `warning: ...` on stderr
    (a scenario read twice, or a sweep's points, repeat the same one)."""
    warnings.filterwarnings("once", category=ConfigWarning)
    shown = warnings.showwarning
    if getattr(shown, "shows_config_warnings", False):
        return  # installed by an earlier command in this process (tests)

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, ConfigWarning):
            err_console.print(f"[bold yellow]warning:[/] {escape(str(message))}", highlight=False)
        else:
            shown(message, category, filename, lineno, file, line)

    show.shows_config_warnings = True
    warnings.showwarning = show


@main.group()
def sim() -> None:
    """Run the parallel file system simulator."""


scenario_arg = click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
set_opt = click.option("--set", "sets", multiple=True, metavar="KEY.PATH=VALUE",
                       help="Override a scenario key, e.g. --set apps[0].processes=32 (repeatable).")
seed_opt = click.option("--seed", type=click.IntRange(min=0, max=2**64 - 1), default=None,
                        help="Seed of the first repetition (default: the scenario's).")
reps_opt = click.option("--reps", type=click.IntRange(min=1, max=100_000), default=1, show_default=True,
                        help="Repetitions with seeds seed, seed+1, ...")
out_opt = click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
                       help="Folder for results (JSON, CSV, plots).")


@sim.command("run")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False, path_type=Path))
@out_opt
@seed_opt
@reps_opt
@set_opt
@click.option("--detail", is_flag=True, help="Also write requests.csv: one row per request piece (needs --out).")
@click.option("--workload", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Run a job-level workload (JSON, from `sim workload generate`) in the fluid mode instead.")
@click.option("--rule", default="set10", show_default=True,
              help="Fluid mode: the set rule, a preset (fair-share, exclusive-fcfs, set10, clairvoyant, "
                   "set-fair-share, share-priority) or a TOML file with a rule table.")
@click.option("--window", default="1000:9000", show_default=True, metavar="BEGIN:END",
              help="Fluid mode: the measurement window, seconds.")
@click.option("--phases", "phases_csv", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Fluid mode: write every I/O phase here as CSV.")
@click.option("--cluster", "cluster", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --workload: also run the workload at request level on this cluster (a TOML file with "
                   "[cluster] and optionally [policy], default sfq-d), the same rule gating its phases, and "
                   "report both modes.")
@click.option("--processes", type=click.IntRange(min=1, max=4096), default=8, show_default=True,
              help="With --cluster: processes per application.")
@click.option("--request-size", default=None, metavar="SIZE",
              help="With --cluster: the largest request a process sends (default 4MiB).")
@click.option("--calibration", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A calibration.toml of `concerto calibrate`: the scenario runs on the calibrated cluster's twin "
                   "(its [cluster] fills what the scenario's leaves out), as [cluster] calibration = \"FILE\".")
@guarded
def sim_run(scenario: Path | None, out: Path | None, seed: int | None, reps: int, sets: tuple[str, ...], detail: bool,
            workload: Path | None, rule: str, window: str, phases_csv: Path | None, cluster: Path | None,
            processes: int, request_size: str | None, calibration: Path | None) -> None:
    """Simulate SCENARIO (a TOML file) and print per-application results; or, with --workload, run a
    job-level workload in the fluid mode (and, with --cluster, at request level too) and print its
    utilization, stretch and I/O slowdown."""
    if workload is not None:
        if scenario is not None or sets or detail or calibration is not None:
            raise UsageProblem("--workload runs the fluid mode: it takes no SCENARIO, --set, --detail or "
                               "--calibration")
        _run_fluid(workload, rule, window, phases_csv, out, cluster, processes, request_size, seed)
        return
    if scenario is None:
        raise UsageProblem("give a SCENARIO file (or --workload FILE)")
    if phases_csv is not None or cluster is not None:
        raise UsageProblem("--phases and --cluster need --workload")
    if detail and out is None:
        raise UsageProblem("--detail needs --out DIR")
    # The calibration first, so that a --set of the same key still says what it says.
    calibrated = () if calibration is None else (f"cluster.calibration={json.dumps(str(calibration))}",)
    source = ScenarioSource.from_path(scenario).with_overrides(*calibrated, *sets)
    detail_csv = out / "requests.csv" if detail and out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    result = run_with_progress(source, seed=seed, reps=reps, detail_csv=detail_csv)
    console.print(runset_table(result, f"{result['config']['name']} ({scenario})"))
    for table in benchmark_tables(result):
        console.print(table)
    if out:
        write_json(out / "results.json", result)
        apps_csv(result, out / "apps.csv")
        console.print(f"wrote {out / 'results.json'}, {out / 'apps.csv'}" + (f" and {detail_csv}" if detail_csv else ""))


def _run_fluid(workload: Path, rule: str, window: str, phases_csv: Path | None, out: Path | None,
               cluster: Path | None, processes: int, request_size: str | None, seed: int | None) -> None:
    from concerto import fluid

    span = fluid.parse_window(window)
    result = fluid.run(workload, rule, span)
    request_level = None
    if cluster is not None:
        text = fluid.request_level_scenario(workload, cluster, rule, span, processes, request_size)
        source = ScenarioSource(text=text, label=f"{workload} on {cluster}")
        request_level = run_with_progress(source, seed=seed, reps=1, label="request level")
    console.print(fluid.table(result, f"{workload}: rule {rule}, window {window} s", request_level))
    if phases_csv is not None:
        fluid.write_phases(result, phases_csv)
        console.print(f"wrote {phases_csv}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "fluid.json", {k: result[k] for k in ("metrics", "apps", "app_end_s", "events")})
        console.print(f"wrote {out / 'fluid.json'}")
        if request_level is not None:
            write_json(out / "results.json", request_level)
            console.print(f"wrote {out / 'results.json'} (the request-level run)")


@sim.group("workload")
def sim_workload() -> None:
    """Workloads: job-level ones for the fluid mode; IOR and mdtest command lines as scenario applications."""


def _benchmark_command(convert):
    def command(args: tuple[str, ...], processes: int | None, name: str | None) -> None:
        from concerto import benchmarks

        # One quoted command line as it is, or the words of one pasted unquoted.
        line = args[0] if len(args) == 1 else shlex.join(args)
        try:
            click.echo(benchmarks.apps_toml(convert(benchmarks)(line, processes, name)), nl=False)
        except benchmarks.BenchmarkArgsError as e:
            raise UsageProblem(str(e)) from e
    return command


_bench_opts = [
    click.argument("args", nargs=-1, required=True),
    click.option("--processes", type=click.IntRange(min=1, max=1_000_000), default=None,
                 help="Tasks, as mpirun -np gives them (default: the command line's -N, else 1)."),
    click.option("--name", default=None, help="The application's name in the scenario."),
]


def _with(opts, fn):
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@sim_workload.command("from-darshan")
@click.argument("log", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--phases", "as_phases", is_flag=True,
              help="A job-level workload of phases from the counters (the default without DXT records).")
@click.option("--bandwidth", default=None, metavar="RATE",
              help="With --phases: the platform's bandwidth the fluid mode shares (e.g. 10GB/s).")
@click.option("--name", default=None, help="The application's name (default job<jobid>).")
@guarded
def sim_workload_from_darshan(log: Path, as_phases: bool, bandwidth: str | None, name: str | None) -> None:
    """Print a Darshan log as a workload (JSON): its DXT records as a request trace (run it with workload =
    "trace"), or its counters as a job-level workload of phases (run it with sim run --workload)."""
    from concerto import darshan_import

    try:
        if not as_phases and darshan_import.has_dxt(log):
            if bandwidth is not None:
                raise UsageProblem("--bandwidth goes with --phases")
            click.echo(json.dumps(darshan_import.to_trace(log, name), indent=1))
            return
        if bandwidth is None:
            raise UsageProblem(f"{log}: " + ("" if as_phases else "no DXT records, so a workload of phases: ")
                               + "give the platform's --bandwidth (e.g. 10GB/s)")
        rate = _native.parse_bandwidth(bandwidth)
        click.echo(json.dumps(darshan_import.to_phases(log, rate, name), indent=1))
    except (darshan_import.DarshanImportError, ValueError) as e:
        raise UsageProblem(str(e)) from e


sim_workload.command("from-ior", context_settings={"ignore_unknown_options": True}, help="Print the [[apps]] table that runs an IOR command line ("
                     "\"-a POSIX -t 1m -b 16m -s 4 -F -w -r\", or as it was run: \"mpirun -np 4 ior ...\"); "
                     "append it to a scenario's cluster. "
                     "docs/workloads.md lists the options modelled.")(
    _with(_bench_opts, _benchmark_command(lambda b: b.from_ior)))
sim_workload.command("from-mdtest", context_settings={"ignore_unknown_options": True}, help="Print the [[apps]] table that runs an mdtest command line ("
                     "\"-n 1000 -u -F -w 4096 -e 4096\", or as it was run: \"srun -n 4 mdtest ...\"); "
                     "append it to a scenario's cluster. "
                     "docs/workloads.md lists the options modelled.")(
    _with(_bench_opts, _benchmark_command(lambda b: b.from_mdtest)))


@sim_workload.command("generate")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--seed", type=click.IntRange(min=0, max=2**64 - 1), default=1, show_default=True)
@guarded
def sim_workload_generate(spec: Path, seed: int) -> None:
    """Draw a workload from a generator file (io-sets.txt Section V-B) and print it as JSON."""
    from concerto import fluid

    click.echo(fluid.generate(spec, seed))


workers_opt = click.option("--workers", type=click.IntRange(min=1, max=1024), default=default_workers,
                           show_default="the CPU count, at most 8",
                           help="Local worker processes, or Dask workers with --dask local.")
dask_opt = click.option("--dask", "dask", default=None, metavar="ADDRESS|local",
                        help="Run on a Dask distributed cluster: its scheduler's address (tcp://host:8786), or "
                             "'local' to start a LocalCluster of --workers processes.")


@sim.command("sweep")
@click.argument("sweep_file", metavar="SWEEP", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--reps", type=click.IntRange(min=1, max=1_000_000), default=None,
              help="Repetitions per point and policy (default: the file's).")
@click.option("--quick", is_flag=True, help="Use the file's [sweep.quick] settings.")
@workers_opt
@dask_opt
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for runs.jsonl, runs.csv and plots (default: results/<sweep id>).")
@click.option("--fresh", is_flag=True, help="Redo every run (default: resume, keeping finished runs).")
@click.option("--seed", type=click.IntRange(min=0, max=2**64 - 1), default=None,
              help="Seed of the first repetition (default: the file's).")
@guarded
def sim_sweep(sweep_file: Path, reps: int | None, quick: bool, workers: int, dask: str | None,
              out: Path | None, fresh: bool, seed: int | None) -> None:
    """Run every (point x policy x repetition) of a sweep file (docs/sweeps.md): a request-level [scenario]
    or a fluid-mode [workload]. Resumable: runs already in OUT/runs.jsonl are not redone."""
    from concerto import sweep as sweeps

    sw = sweeps.load_sweep(sweep_file, quick=quick, reps=reps)
    if seed is not None:
        sw.seed = seed
    out = out or Path("results") / sw.id
    result = sweeps.run_sweep(sw, out=out, workers=workers, dask=dask, fresh=fresh)
    console.print(sweeps.summary_table(sw, result.rows))
    reused = f" ({result.reused} tasks reused from {out / 'runs.jsonl'})" if result.reused else ""
    console.print(f"wrote {out / 'runs.csv'} ({len(result.rows)} runs){reused}" +
                  "".join(f", {out / p.file_stem()}.png" for p in sw.plots))


@sim.command("compare")
@scenario_arg
@click.option("--policies", default="fifo,per-object,coordinated", show_default=True,
              help="Comma-separated policies to run the same workload and seed under.")
@out_opt
@seed_opt
@reps_opt
@set_opt
@guarded
def sim_compare(scenario: Path, policies: str, out: Path | None, seed: int | None, reps: int, sets: tuple[str, ...]) -> None:
    """Run SCENARIO under several policies side by side."""
    names = [p.strip() for p in policies.split(",") if p.strip()]
    known = _native.policy_names()
    for p in names:
        if p not in known:
            raise UsageProblem(f"--policies: unknown policy {p!r} (known: {', '.join(known)})")
    if not names:
        raise UsageProblem("--policies: name at least one policy")
    base = ScenarioSource.from_path(scenario).with_overrides(*sets)
    own = base.config()["policy"]["kind"]
    results = {}
    for p in names:
        # The scenario's own policy keeps its parameters; the others run with their defaults.
        source = base if p == own else base.with_overrides(policy_override(p))
        results[p] = run_with_progress(source, seed=seed, reps=reps, label=p)
    console.print(compare_table(results, f"{scenario}: policies compared (same workload and seeds)"))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "compare.json", results)
        compare_plot(results, out / "compare", f"{scenario.name}: per-application completion time")
        console.print(f"wrote {out / 'compare.json'} and {out / 'compare.png'}")


@main.group()
def reproduce() -> None:
    """Reproduce a paper's claims in simulation."""


def _report_claims(claims: list, out: Path) -> None:
    from concerto.reproduce import FAILED, REPRODUCED, counts_line

    marks = {REPRODUCED: "[green]REPRODUCED[/]", FAILED: "[red]FAILED[/]"}
    for c in claims:
        mark = marks.get(c.status, "[yellow]NOT REPRODUCED[/] (its model bound holds)")
        if c.status == REPRODUCED and c.model_option:
            mark = f"[green]REPRODUCED[/] [yellow]only with {escape(c.model_option)}[/]"
        console.print(f"{mark} {escape(f'{c.id}: {c.claim}')}\n     expected: {escape(c.expected)}\n"
                      f"     measured: {escape(c.measured)}", highlight=False)
    console.print(f"claims: {counts_line(claims)}")
    console.print(f"report: {out / 'report.md'}, claims: {out / 'claims.json'}")
    failed = [c for c in claims if c.status == FAILED]
    if failed:
        err_console.print(f"[bold red]{len(failed)} claim(s) failed[/]")
        sys.exit(1)


def _reproduce(module: str, out: Path, quick: bool, seed: int | None, **sweep_opts) -> None:
    """Runs ``concerto.reproduce.<module>`` and reports its claims."""
    import importlib

    run = importlib.import_module(f"concerto.reproduce.{module}").run
    _report_claims(run(out, quick, seed=seed, status=lambda s: err_console.print(f"[dim]{escape(s)}[/]"), **sweep_opts), out)


@reproduce.command("total-service")
@click.option("--quick", is_flag=True, help="Shorter runs (about half a minute).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/total-service"),
              show_default=True)
@seed_opt
@guarded
def reproduce_total_service(quick: bool, out: Path, seed: int | None) -> None:
    """vPFS claim v7 on a real 4-server cluster and in the simulator: per-server SFQ(D)+ against service-sync
    (service reports exchanged between the real servers)."""
    _reproduce("total_service", out, quick, seed)


def _sweep_reproduction(name: str, module: str, quick_help: str, about: str) -> None:
    """Registers ``concerto reproduce NAME``: a reproduction that runs sweep
    files, with the sweep runner's --workers and --dask."""

    @reproduce.command(name, help=about)
    @click.option("--quick", is_flag=True, help=quick_help)
    @click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path(f"results/{name}"),
                  show_default=True)
    @seed_opt
    @workers_opt
    @dask_opt
    @guarded
    def command(quick: bool, out: Path, seed: int | None, workers: int, dask: str | None) -> None:
        _reproduce(module, out, quick, seed, workers=workers, dask=dask)


for _name, _module, _quick, _about in [
    ("coordination", "coordination", "Fewer repetitions and sweep points (about twenty seconds).",
     "Server-side I/O coordination: Figures 3, 5, 6, 7, 8 and formulas (1)-(2)."),
    ("vpfs", "vpfs", "Shorter runs.",
     "vPFS+: BTIO, WRF and md-test under SFQ(D)+, SFQ(D), native and Capped; slot-cost sweep; total-service "
     "sharing."),
    ("iosets", "iosets", "Fewer sweep points and 20 repetitions (about twenty seconds).",
     "IO-SETS in the fluid mode: Sections VI-A (nH, I/O stress 0.8 and 0.2, noise), VI-B1 (spread of w_iter) and "
     "VI-B2 (a fourth profile against CLAIRVOYANT), 200 repetitions."),
    ("resonance", "resonance", "Two repetitions and shorter runs (a few seconds).",
     "Resonant I/O: the demonstration program (Figures 2 and 5), mpi-io-test, ior-mpi-io, noncontig, HPIO, "
     "coll_perf and BTIO class C under independent I/O, two-phase and resonant I/O, and interference "
     "(Figure 11)."),
]:
    _sweep_reproduction(_name, _module, _quick, _about)


@reproduce.command("clusterfile")
@click.option("--quick", is_flag=True,
              help="Three repetitions and fewer transfer graphs (a few seconds); with --real, two schedule blocks "
                   "and one repetition (about fifteen seconds).")
@click.option("--real", is_flag=True,
              help="The synthetic benchmark on real bytes: 4 client groups and 4 servers in network namespaces "
                   "with limited links (needs root), beside the simulator given the measured links.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the report goes (default results/clusterfile, with --real results/clusterfile-real).")
@seed_opt
@workers_opt
@dask_opt
@guarded
def reproduce_clusterfile(quick: bool, real: bool, out: Path | None, seed: int | None, workers: int,
                          dask: str | None) -> None:
    """Clusterfile's client-side I/O scheduling: first-, random- and hash-IOS over the schedule block (Figures 2-5),
    and the transfer-scheduling heuristics against the optimum; with --real, on real bytes across network
    namespaces."""
    if real:
        if dask is not None:
            raise click.BadParameter("the real run is on this machine", param_hint="--dask")
        _reproduce("clusterfile_real", out or Path("results/clusterfile-real"), quick, seed)
    else:
        _reproduce("clusterfile", out or Path("results/clusterfile"), quick, seed, workers=workers, dask=dask)


@reproduce.command("arena")
@click.option("--quick", is_flag=True, help="Shorter jobs (a few seconds); the real run is always the short suite.")
@click.option("--real", is_flag=True,
              help="The suite at half its quick length on a local 4-server cluster (hdd throttle) whose servers run "
                   "each policy in turn, beside the simulator on the same device (a few minutes for every policy).")
@click.option("--policies", "policy_names", default=None, metavar="NAME,...",
              help="With --real: only these policies (dmclock brings sfq-d, which its claims compare with).")
@click.option("--workload", "workload_names", multiple=True, metavar="NAME",
              help="With --real: only this workload (repeatable): checkpoint-and-metadata, "
                   "small-jobs-beside-a-large-one, reservation-mix, iosets-stress-0.4, iosets-stress-0.8.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the report goes (default results/arena, with --real results/arena-real).")
@seed_opt
@guarded
def reproduce_arena(quick: bool, real: bool, policy_names: str | None, workload_names: tuple[str, ...],
                    out: Path | None, seed: int | None) -> None:
    """Every server policy on one suite of workloads (a checkpoint beside md-test, small jobs beside a large one, a
    reservation beside heavy jobs, IO-SETS' generator at two I/O stresses), scored on utilization, max stretch, I/O slowdown, Jain's index, p99 latency,
    reservations missed and limits overshot; mClock's reservation and limit as claims. With --real, on a local
    cluster beside the simulator's twin."""
    if not real:
        if policy_names is not None or workload_names:
            raise UsageProblem("--policies and --workload are for --real")
        _reproduce("arena", out or Path("results/arena"), quick, seed)
        return
    from concerto.reproduce import arena_real

    try:
        names = None if policy_names is None else [p.strip() for p in policy_names.split(",") if p.strip()]
        arena_real.policies(names)
        known = arena_real.suite()
        bad = [w for w in workload_names if w not in known]
        if bad:
            raise ValueError(f"no workload {', '.join(bad)} (known: {', '.join(known)})")
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--policies" if "policy" in str(e) else "--workload") from None
    _reproduce("arena_real", out or Path("results/arena-real"), quick, seed, policy_names=names,
               workload_names=list(workload_names) or None)


@main.group()
def plan() -> None:
    """Client-side plans: transfer schedules (Clusterfile) and collective I/O (resonant I/O)."""


@plan.command("transfers")
@click.option("--matrix", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A file with one row per client and one number per server (commas or blanks; '#' comments).")
@click.option("--random", "random_spec", default=None, metavar="SPEC",
              help="A random instance: clients=C,servers=S,density=D,max=M[,seed=N].")
@click.option("--weighted", is_flag=True, help="The entries are sizes in bytes, not counts of unit transfers.")
@click.option("--unit", callback=size_arg, default="64KiB", show_default=True, metavar="SIZE",
              help="With --weighted: the transfer unit sizes are split into.")
@click.option("--seed", type=click.IntRange(min=0, max=2**64 - 1), default=1, show_default=True,
              help="Seed of the randomized heuristics (uar, m-passes).")
@click.option("--passes", type=click.IntRange(min=1, max=1000), default=3, show_default=True,
              help="m-passes: bidding rounds per step.")
@click.option("--show", default=None, metavar="NAME",
              help="Also print this schedule step by step: fcfs, hdf, hcdf, uar, m-passes or optimal.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@guarded
def plan_transfers(matrix: Path | None, random_spec: str | None, weighted: bool, unit: int, seed: int, passes: int,
                   show: str | None, as_json: bool) -> None:
    """Schedule transfers between clients and I/O servers, each doing one at a time: the length of each
    heuristic's schedule (FCFS, HDF, HCDF, UAR, MPASSES) against the optimum, Δ steps by bipartite edge
    colouring (or, with --weighted, against the load bound)."""
    from concerto import plan as plans

    rows = plans.load_matrix(matrix, random_spec)
    if weighted and unit < 1:
        raise UsageProblem("--unit: must be at least 1 byte")
    unit_bytes = unit if weighted else 0
    result = plans.plan_transfers(rows, unit_bytes, seed, passes, show)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    console.print(plans.table(result))
    if show:
        console.print(plans.steps_table(result, show))


@plan.command("collective")
@click.option("--pattern", required=True, metavar="SPEC",
              help="The access pattern: demo:segment=S, mpi-io-test:segment=S, ior-mpi-io:segment=S[,file=F], "
                   "ior:transfer=T[,block=B], noncontig:elmtcount=N[,call=BYTES], hpio:count=N,size=S[,spacing=G], coll-perf:n=N or "
                   "tiles:grid=PXxPY,tile=TXxTY,element=S[,planes=Z].")
@click.option("--procs", type=click.IntRange(min=1, max=1_000_000), required=True, help="Processes.")
@click.option("--servers", type=click.IntRange(min=1, max=100_000), required=True, help="I/O servers.")
@click.option("--stripe", callback=stripe_unit_arg(real=False), default="64KiB", show_default=True, metavar="SIZE", help="Stripe unit.")
@click.option("--strategy", type=click.Choice(["independent", "two-phase", "resonant"]), default="resonant",
              show_default=True)
@click.option("--write", is_flag=True, help="Plan a write (default: a read).")
@click.option("--call", type=click.IntRange(min=0), default=0, show_default=True,
              help="Which call of the pattern.")
@click.option("--max-segments", type=click.IntRange(min=1), default=None,
              help="Segments per list-I/O request (default 64; independent: 1, one call per piece).")
@click.option("--cb-nodes", type=click.IntRange(min=1), default=None,
              help="two-phase: aggregators (default every process).")
@click.option("--cb-buffer-size", callback=size_arg, default=None, metavar="SIZE",
              help="two-phase: bytes of a file domain per round; resonant: bytes a write's agent holds per round "
                   "(default 16MiB).")
@click.option("--align", is_flag=True, help="two-phase: file domains start on stripe-unit multiples.")
@click.option("--agents-per-server", type=click.IntRange(min=1), default=None,
              help="resonant: agents per server's data (default 1).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@guarded
def plan_collective(pattern: str, procs: int, servers: int, stripe: int, strategy: str, write: bool, call: int,
                    max_segments: int | None, cb_nodes: int | None, cb_buffer_size: int | None, align: bool,
                    agents_per_server: int | None, as_json: bool) -> None:
    """Plan one collective read or write: who accesses which server's data, in which order, and what the
    processes exchange (independent I/O, ROMIO's two-phase, or resonant I/O)."""
    from concerto import plan as plans

    if cb_buffer_size is not None and cb_buffer_size < 1:
        raise UsageProblem("--cb-buffer-size: must be at least 1 byte")
    result = _native.plan_collective(
        pattern, procs, servers, stripe, strategy, write=write, call=call,
        max_segments=max_segments, cb_nodes=cb_nodes, cb_buffer_size=cb_buffer_size,
        align=align, agents_per_server=agents_per_server)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    for table in plans.collective_tables(result):
        console.print(table)


@main.command("profile")
@click.option("--device", "device", default=None, metavar="SPEC",
              help="A simulated device: a TOML file (a scenario's [cluster.device], a [device] table, or the keys "
                   "alone) or key=value pairs, e.g. kind=ssd,latency=2ms,bandwidth=120MB/s,parallelism=14.")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Real storage: a directory on a local file system (random positioned reads, O_DIRECT where the "
                   "file system allows).")
@click.option("--server", default=None, metavar="ID|ADDRESS",
              help="Real storage: a running data server of the cluster (--cluster), through its own request path "
                   "(scheduler, storage, throttle).")
@click.option("--cluster", "cluster_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --server: the cluster file (default $CONCERTO_CLUSTER, else concerto-cluster/cluster.toml).")
@click.option("--network", "network_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The links of a cluster across namespaces (`cluster up --netns --dir DIR`): rate, latency and "
                   "jitter from client group 0 to server 0, and the scenario's [cluster.network] for them.")
@click.option("--working-set", default=None, metavar="SIZE", callback=size_arg,
              help="With --dir or --server: bytes written first and read at random, a whole number of MiB "
                   "(default 1GiB for --dir, 64MiB for --server).")
@click.option("--sizes", default=None, metavar="LIST",
              help="I/O sizes, ascending (default 4KiB,...,4MiB; 4KiB,16KiB,64KiB,256KiB,1MiB,4MiB on real storage).")
@click.option("--depths", default=None, metavar="LIST",
              help="Outstanding I/Os to try, ascending (default 1..32; 1,2,4,8,16,32 on real storage).")
@click.option("--count", type=click.IntRange(min=1, max=10_000_000), default=None,
              help="I/Os per measurement point (default 2000; 500 on real storage).")
@click.option("--large-size", default=None, metavar="SIZE",
              help="The typical large I/O the servers see, one of --sizes (default 256KiB); L is its slot cost.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/profile"),
              show_default=True)
@seed_opt
@guarded
def profile_cmd(device: str | None, directory: Path | None, server: str | None, cluster_file: Path | None,
                network_dir: Path | None, working_set: int | None, sizes: str | None, depths: str | None,
                count: int | None, large_size: str | None, out: Path, seed: int | None) -> None:
    """Profile storage: throughput against outstanding I/Os per size, latency by size, and the SFQ(D)+ depth D,
    small/large threshold and slot cost L it suggests. One of --device (simulated), --dir or --server (real).
    Or --network: the links of a cluster across namespaces, as the simulator's network."""
    from concerto import profile

    chosen = [name for name, v in (("--device", device), ("--dir", directory), ("--server", server),
                                   ("--network", network_dir)) if v is not None]
    if len(chosen) != 1:
        raise UsageProblem(f"give one of --device, --dir, --server, --network, not {', '.join(chosen)}" if chosen
                           else "say what to profile: --device, --dir, --server or --network")
    if network_dir is not None:
        return _profile_network(network_dir, out)
    if working_set is not None and device is not None:
        raise UsageProblem("--working-set is for real storage (--dir or --server)")
    if cluster_file is not None and server is None:
        raise UsageProblem("--cluster goes with --server")
    spec: dict = {} if device is not None else dict(profile.REAL_STORAGE_SPEC)
    if sizes:
        spec["sizes"] = [s.strip() for s in sizes.split(",") if s.strip()]
        try:
            given = [_native.parse_size(s) for s in spec["sizes"]]
        except ValueError as e:
            raise UsageProblem(f"--sizes {sizes}: {e}") from e
        if large_size is None:
            # The default large size when it is profiled, else the largest size profiled.
            large_size = "256KiB" if 256 * 1024 in given else spec["sizes"][given.index(max(given))]
        else:
            try:
                large = _native.parse_size(large_size)
            except ValueError as e:
                raise UsageProblem(f"--large-size {large_size}: {e}") from e
            if large not in given:
                raise UsageProblem(f"--large-size {large_size} is not one of --sizes ({sizes}): "
                                   "give one of them, or add it to --sizes")
    if depths:
        try:
            spec["depths"] = [int(d) for d in depths.split(",") if d.strip()]
        except ValueError as e:
            raise UsageProblem(f"--depths: {depths!r} is not a list of whole numbers") from e
    if count:
        spec["count"] = count
    if large_size:
        spec["large_size"] = large_size
    seed = 1 if seed is None else seed
    try:
        if device is not None:
            p = profile.profile(device, spec, seed=seed)
        elif directory is not None:
            p = profile.profile_directory(directory, working_set, spec, seed=seed)
        else:
            p = profile.profile_server(cluster_file, server, working_set, spec, seed=seed)
    except ValueError as e:  # a server the cluster file does not name, a malformed cluster file
        raise UsageProblem(str(e)) from e
    console.print(profile.table(p))
    profile.write(p, out)
    console.print(f"wrote {out / 'profile.json'} and {out / 'profile.png'}")


def _profile_network(directory: Path, out: Path) -> None:
    from concerto import netns
    from concerto.report import write_json

    net = netns.load(directory)
    if net is None or net.clients < 1:
        raise UsageProblem(f"--network {directory}: no cluster across namespaces with a client group there "
                           f"(start one with `concerto cluster up --netns --clients 1 --dir {directory}`)")
    links = netns.measure_links(net)
    console.print(f"client group 0 -> server 0: {links['rate_Bps'] / 1e6:.2f} MB/s, one way "
                  f"{links['latency_s'] * 1e6:.0f} us + up to {links['jitter_s'] * 1e6:.0f} us\n")
    console.print(netns.network_toml(links), markup=False, highlight=False)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "network.json", links)
    (out / "network.toml").write_text(netns.network_toml(links))
    console.print(f"wrote {out / 'network.json'} and {out / 'network.toml'}")


@main.group(invoke_without_command=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/demo"), show_default=True)
@click.option("--cluster-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the demo cluster's files (server files, logs, cluster.toml) here; "
                   "default: a temporary directory removed at the end.")
@click.option("--netns", "in_namespaces", is_flag=True,
              help="Servers and applications each in a network namespace of their own, joined by limited links "
                   "(needs root); the simulator is given the links as measured.")
@click.option("--link-rate", default=None, metavar="BANDWIDTH", callback=link_rate_arg,
              help="With --netns: every link's rate each way (default 25MB/s).")
@click.pass_context
@guarded
def demo(ctx: click.Context, out: Path, cluster_dir: Path | None, in_namespaces: bool,
         link_rate: float | None) -> None:
    """FIFO, coordinated and SFQ(D)+ on a real local cluster and in the simulator, side by side.

    `concerto demo iosets` is the job-level one (IO-SETS)."""
    if ctx.invoked_subcommand is not None:
        return
    from concerto.demo import LINK_RATE, run_demo

    if link_rate is not None and not in_namespaces:
        raise UsageProblem("--link-rate limits the links of a demo across namespaces: give --netns too")
    run_demo(out, console, cluster_dir, in_namespaces, LINK_RATE if link_rate is None else link_rate)


@demo.command("iosets")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/demo-iosets"),
              show_default=True)
@click.option("--quick", is_flag=True, help="Six applications, 30 s per policy: the shape, not figures to quote.")
@click.option("--cluster-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the clusters' files (one folder per policy) here; default: temporary directories.")
@guarded
def demo_iosets(out: Path, quick: bool, cluster_dir: Path | None) -> None:
    """IO-SETS (FAIR-SHARE, EXCLUSIVE-FCFS, SET-10) on a real cluster with a coordinator, and the same
    workload in the fluid and request-level simulators, side by side (io-sets.txt Section VI-A, compressed)."""
    from concerto.demo_iosets import run

    run(out, quick, console, cluster_dir)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--cluster", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Cluster file (default: $CONCERTO_CLUSTER, else concerto-cluster/cluster.toml).")
@click.option("--launcher", default="mpirun", show_default=True,
              help="The MPI launcher to run (e.g. mpirun.openmpi, mpiexec.mpich).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, required=True, metavar="[MPIRUN OPTIONS] PROGRAM [ARGS]...")
def mpirun(cluster: Path | None, launcher: str, args: tuple[str, ...]) -> None:
    """Run an MPI job whose MPI-IO on Concerto files is Concerto's.

    Runs LAUNCHER with ARGS, with Concerto's MPI-IO library preloaded in every
    rank and the cluster file and credential passed to them: files named
    concerto:/PATH (or under a Concerto mount) are served by Concerto's
    collective plans (hint concerto_strategy = independent, two_phase or
    resonant); every other file by the MPI library. Concerto's own options
    come before the launcher's."""
    from concerto import mpirun as launch
    from concerto.binaries import MissingBinary

    try:
        launch.run(list(args), launcher=launcher, cluster=cluster)
    except (launch.LaunchProblem, MissingBinary) as e:
        raise UsageProblem(str(e)) from e


# The real file system's commands, and those that put the simulator beside
# it, live in their own modules.
from concerto.authcli import auth_cmd  # noqa: E402
from concerto.benchcli import bench  # noqa: E402
from concerto.filescli import fs  # noqa: E402
from concerto.fscli import cluster, mount, server  # noqa: E402
from concerto.twincli import calibrate_cmd, twin_cmd  # noqa: E402

for command in (server, cluster, fs, mount, auth_cmd, twin_cmd, calibrate_cmd, bench):
    main.add_command(command)


if __name__ == "__main__":
    main()
