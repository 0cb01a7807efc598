"""Does a calibration hold still? `concerto calibrate` run several times in
a row on one machine, and what each calibration makes the simulator
predict for a few IOR and mdtest command lines (`concerto sim run
--calibration`), side by side: per figure and per predicted row, the
calibrations' range and its spread (highest / lowest), with the host's
pressure during each calibration.

    .venv/bin/python benches/calibration/stability.py [CALIBRATIONS] [REPS]

(defaults 3 and calibrate's own). Needs root (calibrate starts a local
cluster and mounts it). Run by `make bench`; the issue's target is every
predicted row within 5% between calibrations (docs/reproductions.md has
the figures of a run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from concerto.host import HostPressure

COMMANDS = {"mdtest": "srun -n 2 mdtest -n 200 -u -F -w 4k -e 4k",
            "ior": "mpirun -np 2 ior -t 1m -b 16m -F -w -r"}
CONCERTO = [sys.executable, "-m", "concerto"]


def run(*args: str) -> str:
    r = subprocess.run([*CONCERTO, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"concerto {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def predict(calibration: Path, work: Path) -> dict[str, float]:
    """Each command line's rows as the calibrated simulator predicts them."""
    from concerto.report import mdtest_rows

    rows: dict[str, float] = {}
    for program, command in COMMANDS.items():
        scenario = work / f"{program}.toml"
        scenario.write_text(run("sim", "workload", f"from-{program}", command))
        out = work / f"{program}-{calibration.parent.name}"
        # The tasks share one mount (one node's link), and the twin runs fifo.
        run("sim", "run", str(scenario), "--calibration", str(calibration), "--set", "apps[0].processes_per_node=2",
            "--set", "policy.kind=fifo", "--out", str(out))
        app = json.loads((out / "results.json").read_text())["runs"][0]["apps"][0]
        if program == "ior":
            rows.update({f"IOR {op['access']} (MiB/s)": op["bandwidth_MiBps"] for op in app["ior"]})
        else:
            rows.update({f"mdtest {op} (ops/s)": items / s for op, items, s in mdtest_rows(app["mdtest"])})
    return rows


def figures(result: dict) -> dict[str, float]:
    """The calibration's own figures."""
    out = {"client_overhead (us)": result["client_overhead_ns"] / 1e3,
           "server_data_overhead (us)": result["server_data_overhead_ns"] / 1e3,
           "mount bandwidth (MB/s)": (result["mount_bandwidth_Bps"] or 0) / 1e6}
    out.update({f"{op} cost (us)": ns / 1e3 for op, ns in result["metadata_costs_ns"].items()})
    return out


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    reps = sys.argv[2:3]
    with tempfile.TemporaryDirectory(prefix="concerto-calstab-") as tmp:
        work = Path(tmp)
        results, predicted = [], []
        for k in range(count):
            out = work / f"cal{k}"
            run("calibrate", *(["--reps", reps[0]] if reps else []), "--out", str(out))
            results.append(json.loads((out / "calibration.json").read_text()))
            predicted.append(predict(out / "calibration.toml", work))
    print(f"{count} calibrations in a row; the host during each: "
          + "; ".join(HostPressure.from_dict(r["host"]).describe() for r in results))
    for title, table in (("figure", [figures(r) for r in results]), ("predicted row", predicted)):
        print(f"\n| {title} | " + " | ".join(f"calibration {k + 1}" for k in range(count)) + " | highest / lowest |")
        print("|---|" + "---|" * (count + 1))
        for key in table[0]:
            values = [t[key] for t in table]
            low, high = min(values), max(values)
            ratio = f"{high / low:.3f}" if low > 0 else "-"
            print(f"| {key} | " + " | ".join(f"{v:.1f}" for v in values) + f" | {ratio} |")


if __name__ == "__main__":
    main()
