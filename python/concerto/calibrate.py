"""``concerto calibrate``: what the simulator's twin of a throttled cluster
needs that the throttle does not give it, measured on the real cluster.

The throttle gives the device model (the simulator's ``emulated`` device
and the metadata operations' cost are the throttle's own numbers). What it
does not give is what a request costs before it reaches a server: the
system call, the kernel, FUSE and the client library. One task stats
``items`` files through the mount (each stat one metadata request, which
the throttle charges a fixed time); the simulator runs the same probe with
no client overhead; the difference per stat is the client's overhead per
step (``[cluster] client_overhead``), the simulator's network and the
device's time being in both. Written as a TOML file that ``concerto twin
--calibration`` (and any scenario, by hand) takes.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Callable

from concerto import benchmarks
from concerto.report import write_json
from concerto.twin import TwinProblem, TwinSpec, real_runs, simulated

#: The probe's operation whose latency is compared.
PROBE_ROW = "File stat"


def probe_app(items: int) -> dict:
    """One task creating, stating and removing ``items`` files."""
    return benchmarks.from_mdtest(f"-n {items} -u -F -C -T -r", processes=1, name="probe")


def stat_latency(figures: dict[str, float]) -> float:
    """Seconds per stat of one task, from its ``File stat`` rate."""
    rate = next((v for k, v in figures.items() if k.split(":", 1)[1] == PROBE_ROW), None)
    if not rate:
        raise TwinProblem(f"the probe has no {PROBE_ROW} figure: {figures}")
    return 1.0 / rate


def overhead_from(real_latency_s: float, simulated_latency_s: float) -> float:
    """The client's overhead per step: what a real stat takes beyond what
    the simulator charges one with none (never below zero: a real client
    faster than the simulated network is no overhead)."""
    return max(0.0, real_latency_s - simulated_latency_s)


def calibrate(spec: TwinSpec, items: int, say: Callable[[str], None] = print) -> dict:
    """Runs the probe on the real cluster (``spec.reps`` times, the median)
    and in the simulator (no client overhead); returns the figures and the
    overhead."""
    app = probe_app(items)
    base = replace(spec, client_overhead_ns=0)
    simulated_s = stat_latency(simulated("mdtest", app, base))
    runs = real_runs("mdtest", app, base, say)
    real_rates = next(v for k, v in runs.items() if k.split(":", 1)[1] == PROBE_ROW)
    real_s = statistics.median(1.0 / r for r in real_rates)
    overhead = overhead_from(real_s, simulated_s)
    return {"servers": spec.servers, "throttle": spec.throttle, "stripe_unit": spec.stripe_unit,
            "depth": spec.depth, "items": items, "reps": spec.reps, "real_stat_s": real_s,
            "real_stat_runs_s": [1.0 / r for r in real_rates], "simulated_stat_s": simulated_s,
            "client_overhead_ns": round(overhead * 1e9)}


def write(result: dict, out: Path) -> Path:
    """``calibration.toml`` (and ``calibration.json``, every figure) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "calibration.json", result)
    path = out / "calibration.toml"
    path.write_text(
        f"# concerto calibrate, {date.today().isoformat()}: {result['servers']} {result['throttle']}-class servers, "
        f"one task stating {result['items']} files through the mount, {result['reps']} runs:\n"
        f"# a stat takes {result['real_stat_s'] * 1e6:.0f} us real, {result['simulated_stat_s'] * 1e6:.0f} us "
        "simulated with no client overhead.\n"
        f"[cluster]\nclient_overhead = \"{result['client_overhead_ns']}ns\"\n")
    return path


def read_overhead(path: Path) -> int:
    """The client overhead (ns) a calibration file gives; an error names
    the file and what is wrong."""
    import tomllib

    from concerto import _native

    try:
        table = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise TwinProblem(f"{path}: {e}") from e
    cluster = table.get("cluster")
    value = cluster.get("client_overhead") if isinstance(cluster, dict) else None
    if not isinstance(value, str):
        raise TwinProblem(f"{path}: no cluster.client_overhead (a duration, as `concerto calibrate` writes it)")
    try:
        return round(_native.parse_duration(value) * 1e9)
    except ValueError as e:
        raise TwinProblem(f"{path}: cluster.client_overhead = {value!r}: {e}") from e
