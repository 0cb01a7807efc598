"""The fluid mode for job-level studies (IO-SETS): a thin layer over
``concerto._native.fluid_generate`` / ``fluid_run`` (the work is in
``concerto_sim::fluid``), plus the terminal table and the phases CSV."""

from __future__ import annotations

import csv
import json
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
        text = _native.fluid_run(workload.read_text(), rule_toml(rule), *window)
    except _native.ConfigError as e:
        raise _native.ConfigError(f"{workload}: {e}") from None
    return json.loads(text)


def table(result: dict, title: str) -> Table:
    m = result["metrics"]
    t = Table(title=title, title_justify="left")
    for col in ("applications", "I/O phases", "utilization", "max stretch", "I/O slowdown"):
        t.add_column(col, justify="right")
    t.add_row(str(len(result["apps"])), str(len(result["phases"])), f"{m['utilization']:.4f}",
              f"{m['max_stretch']:.3f}", f"{m['io_slowdown']:.3f}")
    return t


def write_phases(result: dict, path: Path) -> None:
    """Every I/O phase as one CSV row: application, phase, request, start and end times, bytes, priority, set."""
    fields = ["app", "phase", "request_s", "start_s", "end_s", "bytes", "priority", "set"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(result["phases"])
