"""The real side of a twin table from a benchmark's own output: IOR's JSON
summary (``-O summaryFormat=JSON``, on stdout or in ``summaryFile``), IOR's
text output (its default), or mdtest's text output, as they ran on any
cluster. Each gives the command line it ran (IOR's ``"Command line"`` and
``Command line        :``, mdtest's ``Command line used:``), which the
simulator runs, and per operation the figure the benchmark reported:
IOR's mean bandwidth over its repetitions (``bwMeanMIB``, the text's
``Summary of all tests`` Mean(MiB) column, MiB/s), mdtest's mean rate (its
``SUMMARY rate`` table's Mean column, ops/s)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path


class ImportProblem(ValueError):
    """A file that is not a benchmark output this module reads; the message
    names the file and what is missing."""


@dataclass
class RealSide:
    program: str
    command: str
    #: Tasks the benchmark ran (IOR's ``numTasks``; None when the output does not say).
    tasks: int | None
    #: Per operation, as the benchmark names it: its figure.
    figures: dict[str, float]


def read(path: Path) -> RealSide:
    """The command line and figures of an IOR JSON summary or an mdtest output."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ImportProblem(f"{path}: {e}") from e
    if "SUMMARY rate" in text or "Command line used:" in text:
        return _mdtest(path, text)
    if "Summary of all tests:" in text:
        return _ior_text(path, text)
    return _ior(path, text)


def _ior_text(path: Path, text: str) -> RealSide:
    """IOR's default text output: the command from its banner, the tasks
    and each operation's mean bandwidth from ``Summary of all tests``."""
    command = None
    for line in text.splitlines():
        if line.startswith("Command line") and ":" in line:
            command = line.split(":", 1)[1].strip()
            break
    if not command:
        raise ImportProblem(f"{path}: no \"Command line        :\" line in IOR's output (IOR 3.2 and later print it)")
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Summary of all tests:"))
    header = lines[at + 1].split() if at + 1 < len(lines) else []
    if "Operation" not in header or "Mean(MiB)" not in header:
        raise ImportProblem(f"{path}: IOR's \"Summary of all tests\" has no Operation and Mean(MiB) columns")
    op_col, mean_col = header.index("Operation"), header.index("Mean(MiB)")
    tasks_col = header.index("#Tasks") if "#Tasks" in header else None
    figures: dict[str, float] = {}
    tasks = None
    for k, line in enumerate(lines[at + 2:], start=at + 3):
        cells = line.split()
        if len(cells) != len(header):
            break
        operation = cells[op_col]
        if operation in figures:
            raise ImportProblem(f"{path}, line {k}: a second {operation!r}: one IOR test per file")
        try:
            figures[operation] = float(cells[mean_col])
            tasks = int(cells[tasks_col]) if tasks_col is not None else tasks
        except ValueError as e:
            raise ImportProblem(f"{path}, line {k}: {e}") from e
    if not figures:
        raise ImportProblem(f"{path}: IOR's \"Summary of all tests\" has no operation rows")
    return RealSide("ior", command, tasks, figures)


def _ior(path: Path, text: str) -> RealSide:
    # IOR prints a banner before the JSON and a line after it on stdout.
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ImportProblem(f"{path}: neither IOR's output (text, or its JSON summary: -O summaryFormat=JSON) "
                            "nor mdtest's")
    try:
        doc = json.loads(text[start:end + 1])
    except json.JSONDecodeError as e:
        raise ImportProblem(f"{path}: IOR's JSON summary does not parse: {e}") from e
    command = doc.get("Command line")
    if not isinstance(command, str) or not command.strip():
        raise ImportProblem(f"{path}: no \"Command line\" in IOR's JSON summary (IOR 3.2 and later write it)")
    summary = doc.get("summary")
    if not isinstance(summary, list) or not summary:
        raise ImportProblem(f"{path}: no \"summary\" in IOR's JSON output")
    figures: dict[str, float] = {}
    tasks = None
    for k, entry in enumerate(summary):
        if not isinstance(entry, dict) or not isinstance(entry.get("operation"), str) \
                or not isinstance(entry.get("bwMeanMIB"), (int, float)):
            raise ImportProblem(f"{path}: summary[{k}] has no operation and bwMeanMIB")
        if entry["operation"] in figures:
            raise ImportProblem(f"{path}: summary[{k}]: a second {entry['operation']!r}: one IOR test per file")
        figures[entry["operation"]] = float(entry["bwMeanMIB"])
        if isinstance(entry.get("numTasks"), int):
            tasks = entry["numTasks"]
    return RealSide("ior", command.strip(), tasks, figures)


_LAUNCHED = re.compile(r"was launched with (\d+) total task")
# mdtest 3.3 puts a colon after the operation's name; mdtest 4 does not.
_RATE = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:?\s+([-+\d.eE]+)\s+([-+\d.eE]+)\s+([-+\d.eE]+)")


def _mdtest(path: Path, text: str) -> RealSide:
    command, tasks = None, None
    figures: dict[str, float] = {}
    in_rates = False
    for line in text.splitlines():
        launched = _LAUNCHED.search(line)
        if launched:
            tasks = int(launched.group(1))
        if line.startswith("Command line used:"):
            command = line.split(":", 1)[1].strip()
        elif line.startswith("SUMMARY rate"):
            in_rates = True
        elif line.startswith("SUMMARY") or line.startswith("-- "):
            in_rates = False
        elif in_rates:
            m = _RATE.match(line)
            if m:
                figures[m.group(1)] = float(m.group(4))
    if not command:
        raise ImportProblem(f"{path}: no \"Command line used:\" line in mdtest's output")
    if not figures:
        raise ImportProblem(f"{path}: no \"SUMMARY rate\" table in mdtest's output")
    return RealSide("mdtest", command, tasks, figures)
