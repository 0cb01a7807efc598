"""``concerto demo``: the same workload under FIFO, per-object FCFS and
coordinated scheduling, side by side, with a plot."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from concerto.report import compare_plot, compare_table, write_json
from concerto.reproduce import experiments_dir
from concerto.sim import ScenarioSource, simulate

POLICIES = ["fifo", "per-object", "coordinated"]


def run_demo(out: Path, console: Console) -> dict[str, dict]:
    scenario = experiments_dir() / "demo.toml"
    base = ScenarioSource.from_path(scenario)
    cfg = base.config()
    app = cfg["apps"][0]
    console.print(
        f"[bold]Concerto demo[/]: {app['instances']} IOR applications x {app['processes']} processes, "
        f"{cfg['cluster']['servers']} HDD-class servers, simulated under {', '.join(POLICIES)}"
    )
    results = {}
    for p in POLICIES:
        source = base if p == cfg["policy"]["kind"] else base.with_overrides(f'policy={{kind = "{p}"}}')
        results[p] = simulate(source, reps=3)
    console.print(compare_table(results, "Average completion time of a synchronized 128 KiB call (3 seeds)"))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "demo.json", results)
    compare_plot(results, out / "demo", "Per-application average completion time")
    console.print(f"wrote {out / 'demo.json'} and {out / 'demo.png'}")
    return results
