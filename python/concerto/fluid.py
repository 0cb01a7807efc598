"""The fluid mode for job-level studies (IO-SETS): a thin layer over
``concerto._native.fluid_generate`` / ``fluid_run`` (the work is in
``concerto_sim::fluid``), plus the terminal table and the phases CSV."""

from __future__ import annotations

import csv
import json
import tomllib
from pathlib import Path

import tomli_w
from rich.table import Table

from concerto import _native

def rule_toml(rule: str) -> str:
    """The path of a TOML file holding a rule table, or a rule's name
    (`set10`; the Rust side knows the names and says which exist), as TOML text."""
    path = Path(rule)
    return path.read_text() if path.is_file() else tomli_w.dumps({"kind": rule})


def parse_window(text: str) -> tuple[float, float]:
    """``BEGIN:END`` in seconds."""
    begin, sep, end = text.partition(":")
    try:
        window = (float(begin), float(end))
    except ValueError:
        window = None
    if not sep or window is None or not window[1] > window[0]:
        raise _native.ConfigError(f"--window {text!r}: give BEGIN:END in seconds, END after BEGIN (e.g. 1000:9000)")
    return window


def generate(spec: Path, seed: int) -> str:
    """The workload file (JSON text) a generator file describes."""
    try:
        return _native.fluid_generate(spec.read_text(), seed)
    except _native.ConfigError as e:
        raise _native.ConfigError(f"{spec}: {e}") from None


def run(workload: Path, rule: str, window: tuple[float, float]) -> dict:
    """Runs a workload file under a rule; the result as a dict."""
    try:
        return _native.fluid_run(workload.read_text(), rule_toml(rule), *window)
    except _native.ConfigError as e:
        raise _native.ConfigError(f"{workload}: {e}") from None


def table(result: dict, title: str, request_level: dict | None = None) -> Table:
    """The window metrics; with a request-level run of the same workload, both modes side by side."""
    t = Table(title=title, title_justify="left")
    for col in ("mode", "apps", "I/O phases", "utilization", "max stretch", "I/O slowdown"):
        t.add_column(col, justify="right")
    rows = [("fluid", len(result["apps"]), len(result["phases"]), result["metrics"])]
    if request_level is not None:
        job = request_level["runs"][0]["job"]
        rows.append(("request-level", len(request_level["runs"][0]["apps"]), job["phases"], job["metrics"]))
    def shown(value, digits: int) -> str:
        # A metric the window holds nothing for (no phase in it) is None.
        return "-" if value is None else f"{value:.{digits}f}"

    for mode, apps, phases, m in rows:
        t.add_row(mode, str(apps), str(phases), shown(m["utilization"], 4), shown(m["max_stretch"], 3),
                  shown(m["io_slowdown"], 3))
    return t


def request_level_scenario(workload: Path, cluster: Path, rule: str, window: tuple[float, float], processes: int,
                           request_size: str | None) -> str:
    """The workload as a request-level scenario (TOML text) on the cluster
    of ``cluster`` (a file with a ``[cluster]`` table and, optionally, a
    ``[policy]``; default SFQ(D) so that priorities become weights): each
    application writes its phases' bytes with ``processes`` processes, and
    the same rule arbitrates its phases (``[job]``)."""
    try:
        doc = json.loads(workload.read_text())
        base = tomllib.loads(cluster.read_text())
    except (OSError, ValueError) as e:
        raise _native.ConfigError(f"{cluster if isinstance(e, tomllib.TOMLDecodeError) else workload}: {e}") from None
    if not isinstance(base.get("cluster"), dict):
        raise _native.ConfigError(f"{cluster}: needs a [cluster] table (servers, device, ...)")
    apps = []
    for a in doc.get("apps", []):
        app = {"name": a.get("name"), "workload": "phases", "op": "write", "processes": processes,
               "phases": a.get("phases"), "start": _duration(a.get("release_s", 0.0))}
        if request_size:
            app["request_size"] = request_size
        if a.get("w_iter_s") is not None:
            app["w_iter"] = _duration(a["w_iter_s"])
        if a.get("group") is not None:
            app["group"] = a["group"]
            app["group_w_iter"] = _duration(a.get("group_w_iter_s", 0.0))
        apps.append({k: v for k, v in app.items() if v is not None})
    scenario = {
        "name": workload.stem,
        "cluster": base["cluster"],
        "policy": base.get("policy", {"kind": "sfq-d"}),
        "apps": apps,
        "job": {"rule": tomllib.loads(rule_toml(rule)), "bandwidth": doc.get("bandwidth"),
                "window_s": list(window)},
    }
    return tomli_w.dumps(scenario)


def _duration(seconds: float) -> str:
    """A duration as scenarios write it, to the nanosecond, with its unit (a
    bare integer would be read as nanoseconds, and warned about)."""
    return f"{round(seconds * 1e9)}ns"


def write_phases(result: dict, path: Path) -> None:
    """Every I/O phase as one CSV row: application, phase, request, start and end times, bytes, priority, set."""
    fields = ["app", "phase", "request_s", "start_s", "end_s", "bytes", "priority", "set"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(result["phases"])
