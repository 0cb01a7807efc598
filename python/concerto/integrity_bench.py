"""What integrity on the wire costs between hosts (`concerto bench integrity`).

One cluster across network namespaces whose servers turn MACs on only when
asked (`integrity = "when-asked"`); a client program in client group 0's
namespace writes 64 MiB (fsync), reads it back, and stats a file 300
times, once with the cluster file as written (the client asks, the servers
are on other hosts) and once with a copy that says `integrity = "never"`,
alternately, for the rounds asked; medians. The servers' own counts of
connections with integrity are returned too, so the run shows which
connections carried MACs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

import tomli_w

from concerto import cluster as local
from concerto import netns

SIZE = 64 << 20
STATS = 300

# Run in the client namespace: argv = cluster file, path.
_CLIENT = f"""
import json, os, sys, time
from concerto import fs
c = fs.connect(sys.argv[1])
data = os.urandom({SIZE})
f = c.create(sys.argv[2])
t = time.monotonic(); f.write(0, data); f.fsync(); w = time.monotonic() - t
t = time.monotonic(); back = f.read(0, {SIZE}); r = time.monotonic() - t
assert back == data, "read back differs"
t = time.monotonic()
for _ in range({STATS}):
    c.stat(sys.argv[2])
s = time.monotonic() - t
c.unlink(sys.argv[2])
print(json.dumps({{"write": {SIZE} / w / 2**20, "read": {SIZE} / r / 2**20, "stat": {STATS} / s}}))
"""


class BenchProblem(RuntimeError):
    """What stops the benchmark; the message says what."""


def _without_integrity(cluster_file: Path) -> Path:
    """A copy of the cluster file whose clients never ask for MACs."""
    c = tomllib.loads(cluster_file.read_text())
    c["cluster"]["integrity"] = "never"
    credential = c["cluster"].get("credential")
    if credential is not None:
        c["cluster"]["credential"] = str((cluster_file.parent / credential).resolve())
    out = cluster_file.parent / "cluster-never.toml"
    out.write_text(tomli_w.dumps(c))
    return out


def run(directory: Path, link_rate: float | None, rounds: int, say=print) -> dict:
    """The measurement; `directory` holds the cluster while it runs."""
    spec = local.ClusterSpec(servers=4, netns=True, clients=1, link_rate=link_rate, timeout_s=30.0,
                             integrity="when-asked")
    cluster_file = local.up(directory, spec)
    try:
        # What it made, by identity, for whoever checks that it is gone.
        made = netns.footprint(netns.load(directory))
        sides = {"on": cluster_file, "off": _without_integrity(cluster_file)}
        runs: dict[str, list[dict]] = {name: [] for name in sides}
        for k in range(rounds):
            for name, file in sides.items():
                say(f"round {k + 1}/{rounds}: integrity {name}")
                r = subprocess.run([sys.executable, "-m", "concerto", "cluster", "exec", "--dir", str(directory), "--",
                                    sys.executable, "-c", _CLIENT, str(file), f"/integrity-{k}-{name}"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise BenchProblem(f"the client program failed: {r.stderr.strip()}")
                runs[name].append(json.loads(r.stdout.strip().splitlines()[-1]))
        from concerto import fs
        connections = [s["connections"] for s in fs.connect(cluster_file).server_stats()]
    finally:
        local.down(directory)
    medians = {name: {m: statistics.median(x[m] for x in rs) for m in ("write", "read", "stat")}
               for name, rs in runs.items()}
    return {"link_rate": link_rate, "rounds": rounds, "medians": medians, "runs": runs,
            "ratio_on_to_off": {m: medians["on"][m] / medians["off"][m] for m in ("write", "read", "stat")},
            "connections": connections, "namespaces": made}
