"""Sweeps: one base (a request-level scenario or a fluid-mode workload
generator), the parameters to vary, the policies to compare, repetitions.

The file format is documented in ``docs/sweeps.md``. In short: a
``[sweep]`` table beside a ``[scenario]`` or a ``[workload]`` table.
``sweep.axes`` maps key paths of the base to value lists (their cartesian
product is run); ``sweep.cases`` is a list of such maps (their union is
run). A key naming several comma-separated paths varies them together (its
values are lists); ``apps[*]`` stands for every application.
``[sweep.quick]`` may replace ``reps``, ``axes`` or ``cases`` for
``--quick``. Every point runs under every policy (scenario policy kinds, or
set rules for a workload) and every repetition (seeds ``seed``,
``seed + 1``, ...).

Runs go to local processes or to a Dask cluster; each finished task is
appended to ``runs.jsonl`` at once, so a sweep that stops is resumed where
it stopped. The result is one tidy table, ``runs.csv``: one row per (point,
policy, repetition).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import importlib
import itertools
import json
import math
import multiprocessing
import re
import warnings
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import tomli_w

from concerto import _native


def _accepted(policy: str) -> set[str]:
    """The ``policy.*`` keys ``policy`` takes, as the Rust side defines them (the rest are dropped for it)."""
    return {f"policy.{k}" for k in _native.policy_keys(policy)}


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_literal(value: Any) -> str:
    """A Python value as TOML value text, for ``--set``-style overrides
    (tomli_w writes it, so any string is quoted and escaped right); a dict
    becomes an inline table."""
    if isinstance(value, dict):
        bad = next((k for k in value if not isinstance(k, str) or not _BARE_KEY.match(k)), None)
        if bad is not None:
            raise _native.ConfigError(f"cannot use {bad!r} as a key in an override")
        return "{ " + ", ".join(f"{k} = {toml_literal(v)}" for k, v in value.items()) + " }"
    try:
        text = tomli_w.dumps({"v": value})
    except TypeError:
        raise _native.ConfigError(f"cannot use {value!r} as a sweep value") from None
    return text.removeprefix("v = ").strip()


def policy_override(kind: str, params: dict | None = None) -> str:
    """An override that replaces the scenario's whole ``[policy]`` table."""
    return "policy=" + toml_literal({"kind": kind, **(params or {})})


@dataclass
class Point:
    """One combination of swept parameters."""

    params: dict[str, Any]

    def overrides(self, policy: str | None = None) -> list[str]:
        """The ``--set`` assignments of this point; for a scenario policy,
        only the ``policy.*`` keys it takes, and its kind."""
        if policy is None:
            return [f"{k}={toml_literal(v)}" for k, v in self.params.items()]
        accepted = _accepted(policy)
        sets = [f"{k}={toml_literal(v)}" for k, v in self.params.items() if not k.startswith("policy.") or k in accepted]
        return [*sets, f"policy.kind={policy}"]

    def policy_table(self, policy: str) -> dict[str, Any]:
        """The ``[policy]`` table ``policy`` runs with at this point: its
        kind and the swept ``policy.*`` keys it takes."""
        accepted = _accepted(policy)
        return {"kind": policy, **{k.removeprefix("policy."): v for k, v in self.params.items() if k in accepted}}


def _expand_keys(key: str, n_apps: int) -> list[str]:
    if "apps[*]" in key:
        return [key.replace("apps[*]", f"apps[{i}]") for i in range(n_apps)]
    return [key]


def expand(axes: dict[str, list], n_apps: int, where: str) -> list[Point]:
    """The cartesian product of an axes map."""
    if not isinstance(axes, dict):
        raise _native.ConfigError(f"{where}: must be a table of key paths to value lists")
    lists: list[list[dict[str, Any]]] = []
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise _native.ConfigError(f"{where}.\"{key}\": must be a non-empty list of values")
        paths = [p.strip() for p in key.split(",")]
        axis = []
        for v in values:
            row = v if len(paths) > 1 else [v]
            if not isinstance(row, list) or len(row) != len(paths):
                raise _native.ConfigError(f"{where}.\"{key}\": each value must be a list of {len(paths)} items")
            assignment: dict[str, Any] = {}
            for path, item in zip(paths, row):
                for concrete in _expand_keys(path, n_apps):
                    assignment[concrete] = item
            axis.append(assignment)
        lists.append(axis)
    points = []
    for combo in itertools.product(*lists):
        params: dict[str, Any] = {}
        for part in combo:
            params.update(part)
        points.append(Point(params))
    return points


@dataclass
class Plot:
    """One figure of a sweep: ``y`` against the axis ``x``, one series per policy."""

    x: str
    y: str
    style: str = "band"  # "box": every repetition; "band": mean line, min-max band
    relative_to: str | None = None  # divide by this policy's value (same point, same repetition)
    where: dict[str, Any] = field(default_factory=dict)  # only points with these parameter values
    name: str | None = None
    title: str | None = None

    def file_stem(self) -> str:
        rel = f"_vs_{self.relative_to}" if self.relative_to else ""
        return self.name or re.sub(r"[^A-Za-z0-9_-]+", "_", f"{self.y}{rel}_by_{self.x}").strip("_")


SCENARIO_METRICS = ["avg_completion_s", "p95_completion_s", "bandwidth_MBps", "makespan_s", "finish_spread"]
WORKLOAD_METRICS = ["utilization", "max_stretch", "mean_stretch", "io_slowdown", "sets"]
STYLES = ("box", "band")


@dataclass
class Sweep:
    """A loaded sweep file."""

    id: str
    title: str
    kind: str  # "scenario" or "workload"
    policies: list[str]
    reps: int
    seed: int
    points: list[Point]
    text: str
    label: str
    # workload only: the rule table of each policy, and the measurement window
    rules: dict[str, str] = field(default_factory=dict)
    window: tuple[float, float] = (1000.0, 9000.0)
    plots: list[Plot] = field(default_factory=list)
    # The base table as canonical JSON: what a run depends on (the rest of
    # the file, such as the repetitions, is not).
    base: str = ""
    # Scenario sweeps: what each run is measured by ("module:function"; see Task).
    measure: str = ""

    @property
    def metrics(self) -> list[str]:
        return SCENARIO_METRICS if self.kind == "scenario" else WORKLOAD_METRICS

    def metrics_of(self, row: dict[str, Any]) -> dict[str, Any]:
        """What a tidy row measured: the row without its ids and its point's parameters."""
        params = self.points[row["point"]].params
        return {k: v for k, v in row.items() if k not in _ROW_IDS and k not in params}

    def columns(self) -> list[str]:
        """The parameters that vary, in the order the file gives them."""
        seen: dict[str, None] = {}
        for p in self.points:
            for k in p.params:
                seen.setdefault(k)
        return list(seen)

    def source(self):
        """The base scenario (request-level sweeps)."""
        from concerto.sim import ScenarioSource

        return ScenarioSource(text=self.text, label=self.label, table="scenario")


# Repetitions a sweep may ask for (as `concerto sim sweep --reps` allows).
MAX_REPS = 1_000_000


def _bad(label: str, key: str, message: str) -> _native.ConfigError:
    return _native.ConfigError(f"{label}: {key}: {message}")


def load_sweep(path: str | Path, quick: bool = False, reps: int | None = None) -> Sweep:
    """Reads and checks a sweep file; ``reps`` overrides its repetitions.
    Every point is checked against the base before anything runs."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise _native.ConfigError(f"{p}: cannot read sweep file ({e.strerror})") from e
    return parse_sweep(text, str(p), quick=quick, reps=reps)


def parse_sweep(text: str, label: str, quick: bool = False, reps: int | None = None) -> Sweep:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _native.ConfigError(f"{label}: {e}") from None
    settings = doc.get("sweep")
    stray = sorted(set(doc) - {"sweep", "scenario", "workload"})
    if stray:
        raise _bad(label, stray[0], "unknown top-level key (a sweep file has [sweep] and one of [scenario], "
                                    "[workload])")
    bases = [k for k in ("scenario", "workload") if isinstance(doc.get(k), dict)]
    if not isinstance(settings, dict) or len(bases) != 1:
        raise _native.ConfigError(f"{label}: needs a [sweep] table and one base table, [scenario] or [workload]")
    kind = bases[0]
    known = {"id", "title", "policies", "reps", "seed", "axes", "cases", "quick", "rules", "window_s", "plots"}
    settings = dict(settings)
    unknown_keys = sorted(set(settings) - known)
    if unknown_keys:
        raise _bad(label, f"sweep.{unknown_keys[0]}", f"unknown key (known: {', '.join(sorted(known))})")
    quick_table = settings.get("quick", {})
    if not isinstance(quick_table, dict):
        raise _bad(label, "sweep.quick", "must be a table")
    unknown = set(quick_table) - {"reps", "axes", "cases", "set"}
    if unknown:
        raise _bad(label, f"sweep.quick.{sorted(unknown)[0]}", "--quick replaces only reps, axes and cases, and adds set")
    if quick:
        settings.update(quick_table)
        if "axes" in quick_table:
            settings.pop("cases", None)
        if "cases" in quick_table:
            settings.pop("axes", None)
    n_apps = len(doc[kind].get("apps", [])) if kind == "scenario" else 0
    if "cases" in settings:
        if not isinstance(settings["cases"], list):
            raise _bad(label, "sweep.cases", "must be an array of tables ([[sweep.cases]])")
        points = [pt for i, case in enumerate(settings["cases"]) for pt in expand(case, n_apps, f"sweep.cases[{i}]")]
    else:
        points = expand(settings.get("axes", {}), n_apps, "sweep.axes")
    fixed = settings.get("set", {}) if quick else {}
    if not isinstance(fixed, dict):
        raise _bad(label, "sweep.quick.set", "must be a table of key paths to values")
    for pt in points:  # the quick runs' own settings (shorter runs); a swept key keeps its swept value
        pt.params = {**{k: v for k, v in fixed.items() if k not in pt.params}, **pt.params}
    n_reps = settings.get("reps", 1) if reps is None else reps
    if not isinstance(n_reps, int) or isinstance(n_reps, bool) or not 1 <= n_reps <= MAX_REPS:
        raise _bad(label, "sweep.reps", f"{n_reps!r} must be a whole number from 1 to {MAX_REPS:,}")
    seed = settings.get("seed")
    if seed is None:
        seed = doc["scenario"].get("seed", 1) if kind == "scenario" else 1
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise _bad(label, "sweep.seed", f"{seed!r} must be a whole number >= 0")
    sweep = Sweep(
        id=str(settings.get("id", Path(label).stem)),
        title=str(settings.get("title", Path(label).stem)),
        kind=kind,
        policies=[],
        reps=n_reps,
        seed=seed,
        points=points,
        text=text,
        label=label,
    )
    _read_policies(sweep, settings)
    if kind == "workload":
        window = settings.get("window_s", [1000.0, 9000.0])
        if (not isinstance(window, list) or len(window) != 2 or not all(isinstance(w, (int, float)) for w in window)
                or not window[1] > window[0]):
            raise _bad(label, "sweep.window_s", f"{window!r} must be [begin, end] in seconds, end after begin")
        sweep.window = (float(window[0]), float(window[1]))
    sweep.base = json.dumps(doc[kind], sort_keys=True, default=str)
    _check_points(sweep)
    _read_plots(sweep, settings)
    return sweep


def _read_policies(sweep: Sweep, settings: dict) -> None:
    label = sweep.label
    if sweep.kind == "scenario":
        policies = settings.get("policies", ["fifo", "coordinated"])
        known = _native.policy_names()
        for x in policies:
            if x not in known:
                raise _bad(label, "sweep.policies", f"unknown policy {x!r} (known: {', '.join(known)})")
        sweep.policies = list(policies)
        return
    policies = settings.get("policies", ["fair-share", "exclusive-fcfs", "set10"])
    user_rules = settings.get("rules", {})
    if not isinstance(user_rules, dict) or not all(isinstance(v, dict) for v in user_rules.values()):
        raise _bad(label, "sweep.rules", "must be a table of named rule tables")
    if not isinstance(policies, list) or not policies:
        raise _bad(label, "sweep.policies", "must be a non-empty list of set rules")
    for name in policies:
        table = user_rules.get(name, {"kind": name})
        sweep.rules[name] = tomli_w.dumps(table)
    sweep.policies = list(policies)


def _read_plots(sweep: Sweep, settings: dict) -> None:
    plots = settings.get("plots", [])
    if not isinstance(plots, list):
        raise _bad(sweep.label, "sweep.plots", "must be an array of tables ([[sweep.plots]])")
    for i, spec in enumerate(plots):
        where = f"sweep.plots[{i}]"
        if not isinstance(spec, dict) or "x" not in spec or "y" not in spec:
            raise _bad(sweep.label, where, "needs x (a swept key) and y (a metric)")
        try:
            plot = Plot(**spec)
        except TypeError as e:
            raise _bad(sweep.label, where, str(e).replace("Plot.__init__() ", "")) from None
        if plot.style not in STYLES:
            raise _bad(sweep.label, f"{where}.style", f"{plot.style!r} is not one of {', '.join(STYLES)}")
        if plot.y not in sweep.metrics and not plot.y.startswith("max_stretch_g"):
            raise _bad(sweep.label, f"{where}.y", f"{plot.y!r} is not a metric (known: {', '.join(sweep.metrics)})")
        if plot.relative_to is not None and plot.relative_to not in sweep.policies:
            raise _bad(sweep.label, f"{where}.relative_to", f"{plot.relative_to!r} is not one of the sweep's policies")
        sweep.plots.append(plot)
    # Checked after the points are known.
    for i, plot in enumerate(sweep.plots):
        if plot.x not in sweep.columns():
            raise _bad(sweep.label, f"sweep.plots[{i}].x", f"{plot.x!r} is not a swept key")


def _swept_text(sweep: Sweep, pt: Point, text: str) -> str:
    """A message about a value the sweep set names it as the sweep's, with
    the line of the sweep file that sweeps it, instead of "(as set by --set)"."""
    if "(as set by --set)" not in text:
        return text
    for path, value in pt.params.items():
        if f" {path}:" in text or f" {path}." in text:
            line = next((n for n, ln in enumerate(sweep.text.splitlines(), 1)
                         if "=" in ln and re.search(rf'(^|[\s"\',]){re.escape(path)}([\s"\',=]|$)', ln.split("=")[0])),
                        None)
            where = f"the sweep's {path} = {toml_literal(value)}" + (f", line {line}" if line else "")
            return text.replace("(as set by --set)", f"(as set by {where})")
    return text


def _swept_error(sweep: Sweep, pt: Point, e: _native.ConfigError) -> _native.ConfigError:
    text = _swept_text(sweep, pt, str(e))
    return e if text == str(e) else _native.ConfigError(text)


def _check_points(sweep: Sweep) -> None:
    """Every point must make a valid base, under every policy; a value that
    is almost surely a mistake is warned about (see ``ConfigWarning``)."""
    if sweep.kind == "scenario":
        from concerto.sim import ConfigWarning

        src = sweep.source()
        for pt in sweep.points:
            for policy in sweep.policies:
                point = src.with_overrides(*pt.overrides(policy))
                try:
                    point.config(warn=False)  # warned next, named as the sweep's
                    point_warnings = point.warnings()
                except _native.ConfigError as e:
                    raise _swept_error(sweep, pt, e) from None
                for message in point_warnings:
                    warnings.warn(_swept_text(sweep, pt, message), ConfigWarning, stacklevel=2)
        return
    for pt in sweep.points:
        try:
            _native.fluid_measure(sweep.text, "workload", pt.overrides(), sweep.seed, list(sweep.rules.values()), 0.0, 1.0,
                                  check_only=True)
        except _native.ConfigError as e:
            raise _native.ConfigError(f"{sweep.label}: {e}") from None


# ---------------------------------------------------------------------------
# Tasks: self-contained, picklable units of work, each run in a worker.


@dataclass(frozen=True)
class Task:
    """One repetition (one seed) of one point: under one policy (a
    scenario), or under every rule on the same drawn workload (a workload,
    so rules compare pairwise). Repetitions are separate tasks, so a sweep
    given more repetitions runs only the new ones."""

    kind: str
    text: str  # the sweep file (its base table is read from it, errors name its lines)
    label: str
    base: str  # the base table, canonical: what the key names
    overrides: tuple[str, ...]
    policies: tuple[str, ...]  # the names the rows carry
    rules: tuple[str, ...]  # workload: each policy's rule table (TOML)
    seed: int
    window: tuple[float, float]
    # Scenario tasks: "module:function" measuring a run (its JSON as a
    # dict) into a row's metrics; default: the run's summary.
    measure: str = ""

    def key(self) -> str:
        """Names the work, not where it came from: equal work is done once,
        and a finished task is recognised when a sweep is resumed."""
        ident = {k: v for k, v in self.__dict__.items() if k not in ("label", "text")}
        ident["version"] = _native.__version__
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


def run_task(task: Task) -> list[dict[str, Any]]:
    """One row per policy: ``policy``, ``seed``, metrics."""
    try:
        if task.kind == "scenario":
            return _scenario_rows(task)
        return _workload_rows(task)
    except Exception as e:  # noqa: BLE001 - re-raised with the task named, as a type any worker can send back
        raise RuntimeError(f"{task.label}: {' '.join(task.overrides) or 'base'} (seed {task.seed}): {e}") from None


def summary_metrics(run: dict) -> dict[str, Any]:
    """A request-level run's summary: the metrics a scenario sweep records by default."""
    s = run["summary"]
    return {"avg_completion_s": s["avg_completion_s"], "p95_completion_s": s["p95_completion_s"],
            "bandwidth_MBps": s["aggregate_bandwidth_Bps"] / 1e6, "makespan_s": s["makespan_s"],
            "finish_spread": s.get("finish_spread")}


def _scenario_rows(task: Task) -> list[dict[str, Any]]:
    runset = _native.simulate(task.text, "scenario", list(task.overrides), task.seed, 1, None, None)
    measure = summary_metrics
    if task.measure:
        module, _, name = task.measure.partition(":")
        measure = getattr(importlib.import_module(module), name)
    return [{"policy": task.policies[0], "seed": task.seed, **measure(runset["runs"][0])}]


def _workload_rows(task: Task) -> list[dict[str, Any]]:
    outcomes = _native.fluid_measure(task.text, "workload", list(task.overrides), task.seed,
                                     list(task.rules), *task.window)
    rows = []
    for policy, o in zip(task.policies, outcomes):
        row = {"policy": policy, "seed": task.seed}
        row.update({m: o[m] for m in WORKLOAD_METRICS})
        row.update({f"max_stretch_g{g}": s for g, s in enumerate(o["group_max_stretch"])})
        rows.append(row)
    return rows


def run_batch(tasks: list[Task]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Runs tasks one after another (a worker's unit: fewer round trips)."""
    return [(t.key(), run_task(t)) for t in tasks]


@dataclass
class Plan:
    """A sweep's tasks, and which task gives which (point, policy) its rows."""

    tasks: dict[str, Task]  # by key, each once
    cells: list[tuple[int, str, int, str]]  # (point index, policy, repetition, task key), in table order


def plan(sweep: Sweep) -> Plan:
    tasks: dict[str, Task] = {}
    cells: list[tuple[int, str, int, str]] = []

    def add(t: Task) -> str:
        key = t.key()
        tasks.setdefault(key, t)
        return key

    for i, pt in enumerate(sweep.points):
        if sweep.kind == "scenario":
            for policy in sweep.policies:
                for rep in range(sweep.reps):
                    key = add(Task("scenario", sweep.text, sweep.label, sweep.base, tuple(pt.overrides(policy)), (policy,), (),
                                   sweep.seed + rep, (0.0, 0.0), sweep.measure))
                    cells.append((i, policy, rep, key))
        else:
            keys = [add(Task("workload", sweep.text, sweep.label, sweep.base, tuple(pt.overrides()), tuple(sweep.policies),
                             tuple(sweep.rules[p] for p in sweep.policies), sweep.seed + rep, sweep.window))
                    for rep in range(sweep.reps)]
            cells.extend((i, policy, rep, keys[rep]) for policy in sweep.policies for rep in range(sweep.reps))
    return Plan(tasks, cells)


# ---------------------------------------------------------------------------
# Running: the log that makes a sweep resumable, and the executors.


class RunLog:
    """``runs.jsonl``: one line per finished task, appended and flushed as
    it finishes. A line cut short by a crash is ignored (its task reruns)."""

    def __init__(self, path: Path | None, fresh: bool):
        self.done: dict[str, list[dict[str, Any]]] = {}
        self._file = None
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if fresh:
            path.unlink(missing_ok=True)
        elif path.exists():
            text = path.read_text()
            if text and not text.endswith("\n"):
                # Drop the line a crash cut short, so that the next entry starts a line of its own.
                text = text[: text.rfind("\n") + 1]
                path.write_text(text)
            for line in text.splitlines():
                try:
                    entry = json.loads(line)
                    self.done[entry["key"]] = entry["rows"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue
        self._file = open(path, "a")

    def add(self, key: str, rows: list[dict[str, Any]]) -> None:
        self.done[key] = rows
        if self._file is not None:
            self._file.write(json.dumps({"key": key, "rows": rows}) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _batches(tasks: list[Task], workers: int) -> list[list[Task]]:
    """Enough batches to keep every worker busy to the end and the progress
    bar moving (about 20 per worker), never more tasks in one than 64."""
    if not tasks:
        return []
    size = max(1, min(64, len(tasks) // (workers * 20)))
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def _local(batches: list[list[Task]], workers: int) -> Iterator[list[tuple[str, list[dict]]]]:
    if workers == 1:
        for b in batches:
            yield run_batch(b)
        return
    # Workers start fresh ("spawn"): nothing of this process (threads, open
    # files) is copied into them.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(run_batch, b) for b in batches]
        try:
            for f in as_completed(futures):
                yield f.result()
        finally:
            for f in futures:
                f.cancel()


def _dask(batches: list[list[Task]], address: str, workers: int) -> Iterator[list[tuple[str, list[dict]]]]:
    """Results from a Dask cluster; the import is checked here, before any
    progress is shown, the connection when the first result is asked for."""
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_completed
    except ImportError as e:
        raise _native.ConfigError(f"--dask needs dask.distributed ({e}); pip install -r requirements.txt") from None

    def stream() -> Iterator[list[tuple[str, list[dict]]]]:
        cluster = (LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
                   if address == "local" else None)
        try:
            try:
                client = Client(cluster if cluster is not None else address, timeout="10s")
            except OSError as e:
                raise _native.ConfigError(f"--dask {address}: cannot reach the scheduler ({e})") from None
            with client:
                futures = client.map(run_batch, batches, pure=False)
                for f in dask_completed(futures):
                    yield f.result()
        finally:
            if cluster is not None:
                cluster.close()

    return stream()


@dataclass
class SweepResult:
    sweep: Sweep
    rows: list[dict[str, Any]]  # the tidy table
    ran: int  # tasks run now
    reused: int  # tasks found finished in the log


def run_sweep(
    sweep: Sweep,
    *,
    out: Path | None = None,
    workers: int = 1,
    dask: str | None = None,
    fresh: bool = False,
    progress: bool = True,
) -> SweepResult:
    """Runs every task not already in ``out/runs.jsonl``; writes
    ``runs.csv`` (and the plots the file asks for) into ``out``."""
    if workers < 1:
        raise _native.ConfigError(f"--workers {workers}: must be at least 1")
    the_plan = plan(sweep)
    log = RunLog(out / "runs.jsonl" if out else None, fresh)
    todo = [t for k, t in the_plan.tasks.items() if k not in log.done]
    reused = len(the_plan.tasks) - len(todo)
    batches = _batches(todo, workers)
    stream = _dask(batches, dask, workers) if dask else _local(batches, workers)
    try:
        with _progress_bar(sweep, len(the_plan.tasks), reused, progress) as advance:
            for results in stream:
                for key, rows in results:
                    log.add(key, rows)
                advance(len(results))
    finally:
        log.close()
    rows = tidy_rows(sweep, the_plan, log.done)
    if out:
        write_csv(rows, out / "runs.csv")
        for p in sweep.plots:
            draw(p, rows, out / p.file_stem(), sweep.title)
    return SweepResult(sweep, rows, ran=len(todo), reused=reused)


@contextlib.contextmanager
def _progress_bar(sweep: Sweep, total: int, done: int, show: bool):
    if not show:
        yield lambda n: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from concerto import terminal

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=terminal.console(stderr=True), transient=False) as bar:
        task = bar.add_task(f"{sweep.id}: {len(sweep.points)} points x {len(sweep.policies)} policies x {sweep.reps} reps",
                            total=total, completed=done)
        yield lambda n: bar.advance(task, n)


def tidy_rows(sweep: Sweep, the_plan: Plan, done: dict[str, list[dict]]) -> list[dict[str, Any]]:
    """One row per (point, policy, repetition), in point order."""
    rows = []
    for i, policy, rep, key in the_plan.cells:
        (r,) = [r for r in done[key] if r["policy"] == policy]
        rows.append({"sweep": sweep.id, "point": i, **sweep.points[i].params, "policy": policy, "rep": rep, **r})
    return rows


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    fields: dict[str, None] = {}
    for r in rows:
        for k in r:
            fields.setdefault(k)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fields))
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()})


# ---------------------------------------------------------------------------
# Reading the table: means per point, paired ratios, plots.


def by_cell(rows: Iterable[dict[str, Any]]) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """Rows grouped by (point, policy)."""
    cells: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["point"], r["policy"]), []).append(r)
    return cells


def mean(values: Iterable[float]) -> float:
    v = [x for x in values if x is not None]
    return math.fsum(v) / len(v) if v else float("nan")


_ROW_IDS = {"sweep", "point", "policy", "rep", "seed"}


def aggregate(sweep: Sweep, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (point, policy): the mean of every metric over the repetitions
    (and the standard deviation as ``<metric>_sd``), with the point's
    parameters under ``params``."""
    out = []
    for (i, policy), cell in by_cell(rows).items():
        row: dict[str, Any] = {"experiment": sweep.id, "policy": policy, "params": sweep.points[i].params,
                               "point": i, "reps": len(cell)}
        for m in sweep.metrics_of(cell[0]):
            values = [r[m] for r in cell if isinstance(r.get(m), (int, float)) and not isinstance(r.get(m), bool)]
            if not values:
                continue
            mu = mean(values)
            row[m] = mu
            row[f"{m}_sd"] = math.sqrt(math.fsum((x - mu) ** 2 for x in values) / (len(values) - 1)) if len(values) > 1 else 0.0
        out.append(row)
    return out


def series(plot: Plot, rows: list[dict[str, Any]]) -> dict[str, dict[Any, list[float]]]:
    """policy -> x -> values (one per repetition), relative to ``plot.relative_to`` when set."""
    chosen = [r for r in rows if all(r.get(k) == v for k, v in plot.where.items())]
    base = {(r["point"], r["rep"]): r[plot.y] for r in chosen if r["policy"] == plot.relative_to}
    out: dict[str, dict[Any, list[float]]] = {}
    for r in chosen:
        if plot.relative_to is not None and r["policy"] == plot.relative_to:
            continue
        y = r[plot.y]
        if plot.relative_to is not None:
            y = y / base[(r["point"], r["rep"])]
        out.setdefault(r["policy"], {}).setdefault(r[plot.x], []).append(y)
    return out


def draw(plot: Plot, rows: list[dict[str, Any]], stem: Path, title: str) -> Path:
    """The figure as ``stem.png``: box plots per x, or mean lines with min-max bands."""
    from concerto.report import policy_colour, pyplot

    plt = pyplot()
    data = series(plot, rows)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    policies = list(data)
    xs = sorted({x for d in data.values() for x in d}, key=_sort_key)
    for k, policy in enumerate(policies):
        d = data[policy]
        present = [x for x in xs if x in d]
        if plot.style == "box":
            width = 0.8 / max(1, len(policies))
            pos = [xs.index(x) + (k - (len(policies) - 1) / 2) * width for x in present]
            parts = ax.boxplot([d[x] for x in present], positions=pos, widths=width * 0.9, patch_artist=True,
                               manage_ticks=False, flierprops={"markersize": 2})
            color = policy_colour(policy, k)
            for b in parts["boxes"]:
                b.set_facecolor(color)
                b.set_alpha(0.6)
            ax.plot([], [], color=color, linewidth=6, alpha=0.6, label=policy)
        else:
            xv = [float(x) for x in present]
            ax.plot(xv, [mean(d[x]) for x in present], label=policy, color=policy_colour(policy, k))
            ax.fill_between(xv, [min(d[x]) for x in present], [max(d[x]) for x in present],
                            color=policy_colour(policy, k), alpha=0.2)
    if plot.style == "box":
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([str(x) for x in xs], rotation=90 if len(xs) > 12 else 0, fontsize=8 if len(xs) > 12 else 10)
    ax.set_xlabel(plot.x)
    ax.set_ylabel(f"{plot.y} / {plot.relative_to}'s" if plot.relative_to else plot.y)
    ax.set_title(plot.title or title)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = stem.with_suffix(".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _sort_key(x: Any) -> tuple:
    return (0, x, "") if isinstance(x, (int, float)) else (1, 0, json.dumps(x))


def summary_table(sweep: Sweep, rows: list[dict[str, Any]], limit: int = 60):
    """The means per (point, policy) as a terminal table."""
    from rich.table import Table

    agg = aggregate(sweep, rows)
    shown = [m for m in sweep.metrics if any(m in a for a in agg)][:4]
    t = Table(title=f"{sweep.title} (means over {sweep.reps} repetitions)", title_justify="left")
    for col in [*sweep.columns(), "policy", *shown]:
        t.add_column(col, justify="right")
    for a in agg[:limit]:
        t.add_row(*[json.dumps(a["params"].get(c)) for c in sweep.columns()], a["policy"],
                  *[f"{a[m]:.4g}" if m in a else "-" for m in shown])
    if len(agg) > limit:
        t.caption = f"first {limit} of {len(agg)} rows; all in runs.csv"
    return t


def default_workers() -> int:
    return max(1, min(multiprocessing.cpu_count(), 8))
