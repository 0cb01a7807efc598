"""Exports a fluid-mode workload for benches/simgrid/iosets_fluid.cpp and
checks SimGrid's end times against Concerto's (docs/performance.md).

    python benches/simgrid/iosets_export.py export W.json RULE OUT.txt CONCERTO_ENDS.txt
    python benches/simgrid/iosets_export.py compare CONCERTO_ENDS.txt SIMGRID_ENDS.txt

`export` writes the workload with each application's set and priority
under RULE (as Concerto's rule places it), and Concerto's fluid end times
with the time Concerto's run took. `compare` prints the largest relative
difference between the two simulators' end times.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from concerto import _native
from concerto.fluid import rule_toml


def export(workload: Path, rule: str, out: Path, ends: Path) -> None:
    text = workload.read_text()
    doc = json.loads(text)
    started = time.perf_counter()
    result = json.loads(_native.fluid_run(text, rule_toml(rule), 0.0, 1.0))
    took = time.perf_counter() - started
    placed = {}
    for p in result["phases"]:
        placed.setdefault(p["app"], (p["set"], p["priority"]))
    lines = [f"{doc['bandwidth']!r} {len(doc['apps'])}"]
    for a in doc["apps"]:
        set_id, priority = placed.get(a["name"], (0, 1.0))
        lines.append(f"{set_id} {priority!r} {a.get('release_s', 0.0)!r} {len(a['phases'])}")
        lines += [f"{c!r} {b!r}" for c, b in a["phases"]]
    out.write_text("\n".join(lines) + "\n")
    ends.write_text("\n".join(repr(e) for e in result["app_end_s"]) + "\n")
    print(f"concerto rule={rule} applications={len(doc['apps'])} phases={len(result['phases'])} "
          f"run_s={took:.6f} (fluid_run, JSON included)")


def compare(concerto: Path, simgrid: Path) -> None:
    a = [float(x) for x in concerto.read_text().split()]
    b = [float(x) for x in simgrid.read_text().split()]
    if len(a) != len(b):
        sys.exit(f"{len(a)} end times against {len(b)}")
    worst = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))
    print(f"end times: largest relative difference {worst:.2e} over {len(a)} applications")


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "export":
        export(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(__doc__)
