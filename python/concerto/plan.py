"""``concerto plan``: client-side plans, computed by concerto-core.

``transfers``: the parallel I/O scheduling problem of the Clusterfile paper
(Section 2): a matrix of transfers between clients and I/O servers, each
heuristic's schedule length, and the optimum (Δ, by bipartite edge
colouring) or, for transfers of different sizes, the load bound.

``collective``: one collective call planned by the independent, two-phase
or resonant strategy (resonant-io.txt): who accesses which server's data,
in which order, and what the processes exchange.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from concerto import _native
from concerto.terminal import exact_size

RANDOM_KEYS = {"clients": int, "servers": int, "density": float, "max": int, "seed": int}


def parse_random(spec: str) -> dict:
    """``clients=C,servers=S,density=D,max=M[,seed=N]`` as a dict; an error names the key."""
    out: dict = {"seed": 1}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in RANDOM_KEYS:
            raise _native.ConfigError(f"--random: {part!r} is not one of {', '.join(k + '=...' for k in RANDOM_KEYS)}")
        try:
            out[key] = RANDOM_KEYS[key](value)
        except ValueError:
            kind = "a whole number" if RANDOM_KEYS[key] is int else "a number"
            raise _native.ConfigError(f"--random: {key}={value!r} is not {kind}") from None
    missing = [k for k in ("clients", "servers", "density", "max") if k not in out]
    if missing:
        raise _native.ConfigError(f"--random: give {', '.join(missing)} (e.g. clients=8,servers=8,density=0.5,max=4)")
    if out["clients"] < 1 or out["servers"] < 1 or out["max"] < 1 or not 0 < out["density"] <= 1:
        raise _native.ConfigError("--random: clients, servers and max must be >= 1, density in (0, 1]")
    return out


def load_matrix(matrix: Path | None, random: str | None) -> list[list[int]]:
    if (matrix is None) == (random is None):
        raise _native.ConfigError("give one of --matrix FILE or --random SPEC")
    if matrix is not None:
        try:
            return _native.parse_transfer_matrix(matrix.read_text())
        except _native.ConfigError as e:
            raise _native.ConfigError(f"{matrix}: {e}") from None
    r = parse_random(random or "")
    return _native.random_transfer_matrix(r["clients"], r["servers"], r["density"], r["max"], r["seed"])


def plan_transfers(rows: list[list[int]], unit: int, seed: int, passes: int, show: str | None) -> dict:
    return _native.plan_transfers(rows, unit, seed, passes, show)


def table(plan: dict) -> Table:
    weighted = plan["unit"] > 0
    title = (f"{plan['clients']} clients, {plan['servers']} servers, {plan['transfers']} unit transfers"
             + (f" of {plan['unit']} B" if weighted else "") + f"; optimum {plan['delta']} steps (Δ)")
    t = Table(title=title, title_justify="left")
    for col in ("schedule", "steps", "/ optimum") + (("steps x unit (B)", "/ load bound") if weighted else ()):
        t.add_column(col, justify="right" if col != "schedule" else "left")
    for s in plan["schedules"]:
        row = [s["name"], str(s["length"]), f"{s['length'] / plan['delta']:.3f}" if plan["delta"] else "-"]
        if weighted:
            span = s["length"] * plan["unit"]
            row += [str(span), f"{span / plan['load_bound']:.3f}" if plan["load_bound"] else "-"]
        t.add_row(*row)
    if weighted:
        t.caption = (f"load bound: {plan['load_bound']} B, the most any client or server moves; no schedule "
                     "of sized transfers is shorter")
    return t


def steps_table(plan: dict, name: str) -> Table:
    (s,) = [x for x in plan["schedules"] if x["name"] == name]
    t = Table(title=f"{name}: transfers (client -> server) per step", title_justify="left")
    t.add_column("step", justify="right")
    t.add_column("transfers")
    for i, step in enumerate(s["steps"]):
        t.add_row(str(i), "  ".join(f"{c}->{v}" for c, v in step))
    return t


def _runs(runs: list) -> str:
    """A request's servers in the order it touches them: "s2: 64 KiB from 1 MiB", ..."""
    shown = [f"s{server}: {exact_size(n)} from {exact_size(offset) if offset else 0}" for server, offset, n in runs[:6]]
    return ", ".join(shown) + (f", ... ({len(runs) - 6} more)" if len(runs) > 6 else "")


def collective_tables(result: dict, max_rows: int = 40) -> list[Table]:
    plan = result["plan"]
    head = Table(title=(f"{result['strategy']} {plan['direction']}: {result['procs']} processes, {result['servers']} "
                        f"servers, {exact_size(result['stripe'])} stripes"), title_justify="left", show_header=False)
    head.add_column()
    head.add_column()
    head.add_row("arrangement", plan["arrangement"])
    if plan["agents"]:
        head.add_row("agents", "  ".join(f"s{s}: rank {'+'.join(map(str, a))}" for s, a in plan["agents"]))
    head.add_row("requested", exact_size(result["requested_bytes"]))
    head.add_row("to or from the servers", exact_size(result["io_bytes"]))
    head.add_row("between processes", exact_size(result["exchanged_bytes"]))

    who = Table(title="who accesses which server's data, in which order", title_justify="left")
    for col in ("rank", "batch", "waits for", "request", "segments", "servers touched, in order"):
        who.add_column(col, justify="right" if col in ("rank", "batch", "request", "segments") else "left")
    rows = 0
    for rank, batches in enumerate(plan["processes"]):
        for b, batch in enumerate(batches):
            waits = (["previous done"] if batch["after_previous"] else []) + [f"{r}.{i} sent" for r, i in batch["after_sent"]]
            wait_text = ", ".join(waits[:4]) + (f", ... ({len(waits)})" if len(waits) > 4 else "")
            if batch["after_sent"] and batch["delay"]:
                # Times are serialized as nanoseconds.
                wait_text += f" + {batch['delay'] / 1000:g} us"
            for q, request in enumerate(batch["requests"]):
                if rows < max_rows:
                    who.add_row(str(rank), str(b), wait_text if q == 0 else "", str(q), str(len(request["extents"])),
                                _runs(result["touches"][rank][b][q]))
                rows += 1
    if rows > max_rows:
        who.caption = f"first {max_rows} of {rows} requests; all in --json"
    moved = Table(title="exchanges between processes", title_justify="left")
    for col in ("from", "to", "with batch", "bytes", "pieces"):
        moved.add_column(col, justify="right")
    for x in plan["exchanges"][:max_rows]:
        moved.add_row(str(x["from"]), str(x["to"]), str(x["batch"]), exact_size(x["bytes"]), str(len(x["extents"])))
    if len(plan["exchanges"]) > max_rows:
        moved.caption = f"first {max_rows} of {len(plan['exchanges'])}; all in --json"
    return [head, who] + ([moved] if plan["exchanges"] else [])
