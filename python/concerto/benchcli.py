"""``concerto bench ...``: the real file system measured (fio and a metadata
loop beside other file systems, integrity on the wire, collective MPI-IO);
criterion's benchmarks are ``make bench``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from concerto import terminal
from concerto.fscli import link_rate_arg
from concerto.report import fsbench_tables
from concerto.terminal import UsageProblem, guarded

# The slowest link `bench integrity` takes.
MIN_LINK_RATE = 100e3

console = terminal.console()
err_console = terminal.console(stderr=True)


@click.group("bench")
def bench() -> None:
    """Measure the real file system (criterion's benchmarks are `make bench`)."""


@bench.command("fs")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/bench"),
              show_default=True, help="Where fsbench.json goes (and, meanwhile, the clusters' files).")
@click.option("--compare", "compare", multiple=True, metavar="NAME=DIR",
              help="Another mounted file system to measure the same way (repeatable), e.g. glusterfs=/mnt/gl.")
@click.option("--size", "size_mib", type=click.IntRange(min=64), default=1024, show_default=True,
              help="MiB the sequential rows write and read.")
@click.option("--runtime", "runtime_s", type=click.IntRange(min=1), default=5, show_default=True,
              help="Seconds each random-I/O row runs.")
@click.option("--files", type=click.IntRange(min=10), default=2000, show_default=True,
              help="Files the metadata rows create, stat and unlink.")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Rounds (the order of the file systems rotates each round; figures are medians).")
@click.option("--integrity", is_flag=True,
              help="Also measure a Concerto cluster whose servers require a MAC on every frame, in the same rounds.")
@click.option("--quick", is_flag=True, help="A run of about a minute: the shape of the figures, not figures to quote.")
@guarded
def bench_fs(out: Path, compare: tuple[str, ...], size_mib: int, runtime_s: int, files: int, rounds: int,
             integrity: bool, quick: bool) -> None:
    """fio and a metadata loop through the mount, beside the local file system and others, in one run."""
    from concerto import fsbench

    targets: dict[str, Path] = {}
    for spec in compare:
        name, sep, directory = spec.partition("=")
        if not sep or not name or not directory:
            raise UsageProblem(f"--compare {spec}: give NAME=DIR (a mounted file system's directory)")
        if name in ("concerto", "local", fsbench.INTEGRITY) or name in targets:
            raise UsageProblem(f"--compare {spec}: the name {name!r} is taken")
        if not Path(directory).is_dir():
            raise UsageProblem(f"--compare {spec}: {directory} is not a directory")
        targets[name] = Path(directory)
    settings = (fsbench.Settings.quick() if quick else
                fsbench.Settings(size_mib=size_mib, runtime_s=runtime_s, files=files, rounds=rounds))
    settings.integrity = integrity
    try:
        result = fsbench.run(out, targets, settings, say=lambda m: err_console.print(f"[dim]{m}[/]"))
    except fsbench.BenchProblem as e:
        raise UsageProblem(str(e)) from e
    for t in fsbench_tables(result):
        console.print(t)
    console.print(f"figures: {out / 'fsbench.json'}")


@bench.command("integrity")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/bench"),
              show_default=True, help="Where integrity.json goes (and, meanwhile, the cluster).")
@click.option("--link-rate", "link_rate", default=None, metavar="RATE", callback=link_rate_arg,
              help='Each way on every link, e.g. "100MB/s" (default: unlimited veth links).')
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Rounds, each with and without MACs.")
@guarded
def bench_integrity(out: Path, link_rate: float | None, rounds: int) -> None:
    """What integrity on the wire costs between hosts: a cluster across network namespaces, the same client
    program with and without MACs, alternately (root)."""
    from concerto import integrity_bench

    if link_rate is not None and link_rate < MIN_LINK_RATE:
        raise UsageProblem(f"--link-rate: {link_rate:,.0f} B/s is below {MIN_LINK_RATE / 1e3:g} kB/s, where the "
                           "64 MiB the client moves would take hours")
    if os.geteuid() != 0:
        raise UsageProblem("bench integrity runs servers in network namespaces: run it as root")
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = integrity_bench.run(out / "integrity-cluster", link_rate, rounds,
                                     say=lambda m: err_console.print(f"[dim]{m}[/]"))
    except integrity_bench.BenchProblem as e:
        raise UsageProblem(str(e)) from e
    (out / "integrity.json").write_text(json.dumps(result, indent=1))
    med, ratio = result["medians"], result["ratio_on_to_off"]
    for m, unit in (("write", "MiB/s"), ("read", "MiB/s"), ("stat", "per s")):
        console.print(f"{m:5} ({unit}): with MACs {med['on'][m]:,.1f}, without {med['off'][m]:,.1f}, "
                      f"on/off {ratio[m]:.2f}")
    console.print(f"figures: {out / 'integrity.json'}")


@bench.command("mpiio")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results/bench"),
              show_default=True, help="Where mpiio.json and mpiio-ior.json go.")
@click.option("--quick", is_flag=True, help="One round instead of three: the shape of the figures.")
@click.option("--part", type=click.Choice(["all", "resonance", "ior"]), default="all", show_default=True,
              help="resonance: the collective patterns against the simulator; ior: IOR's patterns against "
                   "plain mpirun on the mount.")
@click.option("--mpi", "mpis", type=click.Choice(["openmpi", "mpich"]), multiple=True,
              help="The MPI libraries IOR's patterns run under (repeat; default both).")
@click.option("--ranks", default="1,2,4", show_default=True, help="The rank counts IOR's patterns run with.")
@guarded
def bench_mpiio(out: Path, quick: bool, part: str, mpis: tuple[str, ...], ranks: str) -> None:
    """MPI-IO on four HDD-class servers: collective I/O (Concerto's independent, two-phase and resonant,
    ROMIO's through the mount, the simulator's prediction) and IOR's patterns (the library against
    plain mpirun on the mount, under Open MPI and MPICH)."""
    counts = _rank_counts(ranks)
    if part in ("all", "resonance"):
        _bench_resonance(out, quick)
    if part in ("all", "ior"):
        _bench_ior(out, quick, list(mpis) or ["openmpi", "mpich"], counts)


def _rank_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        counts = []
    if not counts or any(n < 1 or n > 64 for n in counts):
        raise UsageProblem(f"--ranks {text!r}: give rank counts from 1 to 64, separated by commas (e.g. 1,2,4)")
    return counts


def _bench_resonance(out: Path, quick: bool) -> None:
    from rich import box
    from rich.table import Table

    from concerto import mpiio_bench

    try:
        result = mpiio_bench.run(out, quick, say=lambda m: err_console.print(f"[dim]{m}[/]"))
    except mpiio_bench.BenchProblem as e:
        raise UsageProblem(str(e)) from e
    t = Table(title=f"{result['processes']} ranks, {result['servers']} HDD-class servers, {result['calls']} "
                    "collective calls: MB/s", title_justify="left", box=box.SIMPLE_HEAD,
              caption="real: median of the rounds; sim: the simulator on the throttle's device model; "
                      "two-phase-1: one aggregator (cb_nodes=1); romio-on-mount: ROMIO's two-phase "
                      "through the FUSE mount", caption_justify="left")
    for col in ("pattern", "op", "way", "real", "sim", "real/sim"):
        t.add_column(col, justify="left" if col in ("pattern", "op", "way") else "right")
    for r in result["rows"]:
        sim = f"{r['sim_MBps']:.1f}" if r["sim_MBps"] else "-"
        ratio = f"{r['real_over_sim']:.2f}" if r["real_over_sim"] else "-"
        t.add_row(r["pattern"], r["op"], r["way"], f"{r['real_MBps']:.1f}", sim, ratio)
    console.print(t)
    for (pattern, op), g in mpiio_bench.gains(result).items():
        console.print(f"resonant / two-phase, {pattern} {op}: real {g['real']:.2f}x, simulated {g['sim']:.2f}x")
    console.print(f"figures: {out / 'mpiio.json'}")


def _bench_ior(out: Path, quick: bool, mpis: list[str], ranks: list[int]) -> None:
    from rich import box
    from rich.table import Table

    from concerto import mpiio_ior_bench as ior

    try:
        result = ior.run(out, mpis, ranks, 1 if quick else 3, say=lambda m: err_console.print(f"[dim]{m}[/]"))
    except ior.BenchProblem as e:
        raise UsageProblem(str(e)) from e
    ways = [ior.LIBRARY, *dict.fromkeys(w for m in mpis for w in ior.MPIS[m].on_mount)]
    t = Table(title=f"IOR's patterns, {result['servers']} HDD-class servers: write MiB/s", title_justify="left",
              box=box.SIMPLE_HEAD, caption=f"median of {result['rounds']} rotated round(s); library/best: the "
              "library over the faster MPI-IO on the mount (plain mpirun, the mount as `concerto mount` starts it)",
              caption_justify="left")
    for col in ("mpi", "ranks", "pattern", *ways, "library/best"):
        t.add_column(col, justify="left" if col in ("mpi", "pattern") else "right")
    for r in result["rows"]:
        cells = [f"{r['ways'][w]['write_MiBps']:.1f}" if w in r["ways"] else "-" for w in ways]
        ratio = f"{r['library_over_best']:.2f}" if r["library_over_best"] else "-"
        t.add_row(r["mpi"], str(r["ranks"]), r["pattern"], *cells, ratio)
    console.print(t)
    console.print(f"figures: {out / 'mpiio-ior.json'}")
