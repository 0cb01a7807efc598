"""Experiments: a base scenario plus the parameters to sweep.

An experiment file (``experiments/**/*.toml``) holds an ``[experiment]``
table and the base ``[scenario]``. ``sweep`` maps key paths to value lists
(their cartesian product is run); ``cases`` is a list of such maps (their
union is run). A key naming several comma-separated paths sweeps them
together (values are lists); ``apps[*]`` stands for every application.
``[experiment.quick]`` may replace ``reps``, ``sweep`` or ``cases`` for
``--quick``. Every point runs under every policy in ``policies``; keys under
``policy.`` apply only to policies that take them.
"""

from __future__ import annotations

import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import tomli_w

from concerto import _native
from concerto.sim import ScenarioSource, simulate

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

    def overrides(self, policy: str) -> list[str]:
        accepted = _accepted(policy)
        sets = [f"{k}={toml_literal(v)}" for k, v in self.params.items() if not k.startswith("policy.") or k in accepted]
        return [*sets, f"policy.kind={policy}"]

    def key(self, policy: str) -> tuple:
        accepted = _accepted(policy)
        return tuple((k, json.dumps(v)) for k, v in self.params.items() if not k.startswith("policy.") or k in accepted)


@dataclass
class Experiment:
    id: str
    title: str
    policies: list[str]
    reps: int
    points: list[Point]
    source: ScenarioSource
    extra: dict[str, Any] = field(default_factory=dict)


def _expand_keys(key: str, n_apps: int) -> list[str]:
    if "apps[*]" in key:
        return [key.replace("apps[*]", f"apps[{i}]") for i in range(n_apps)]
    return [key]


def expand(sweep: dict[str, list], n_apps: int, where: str) -> list[Point]:
    """The cartesian product of a sweep map."""
    axes: list[list[dict[str, Any]]] = []
    for key, values in sweep.items():
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
        axes.append(axis)
    points = []
    for combo in itertools.product(*axes):
        params: dict[str, Any] = {}
        for part in combo:
            params.update(part)
        points.append(Point(params))
    return points


def load_experiment(path: str | Path, quick: bool = False) -> Experiment:
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise _native.ConfigError(f"{p}: {e}") from e
    exp = doc.get("experiment")
    if not isinstance(exp, dict) or "scenario" not in doc:
        raise _native.ConfigError(f"{p}: needs an [experiment] table and a [scenario] table")
    settings = dict(exp)
    if quick and isinstance(exp.get("quick"), dict):
        settings.update(exp["quick"])
        if "sweep" in exp["quick"]:
            settings.pop("cases", None)
        if "cases" in exp["quick"]:
            settings.pop("sweep", None)
    n_apps = len(doc["scenario"].get("apps", []))
    if "cases" in settings:
        points = [pt for i, case in enumerate(settings["cases"]) for pt in expand(case, n_apps, f"experiment.cases[{i}]")]
    else:
        points = expand(settings.get("sweep", {}), n_apps, "experiment.sweep")
    policies = settings.get("policies", ["fifo", "coordinated"])
    unknown = [x for x in policies if x not in _native.policy_names()]
    if unknown:
        raise _native.ConfigError(f"{p}: experiment.policies: unknown policy {unknown[0]!r}")
    source = ScenarioSource(text=p.read_text(), label=str(p), table="scenario")
    known = {"id", "title", "policies", "reps", "sweep", "cases", "quick"}
    return Experiment(
        id=str(settings.get("id", p.stem)),
        title=str(settings.get("title", p.stem)),
        policies=list(policies),
        reps=int(settings.get("reps", 1)),
        points=points,
        source=source,
        extra={k: v for k, v in settings.items() if k not in known},
    )


def summarize(runset: dict) -> dict[str, Any]:
    """The figures a report compares, from one run set."""
    agg = runset["aggregate"]
    row = {
        "avg_completion_s": agg["avg_completion_s"]["mean"],
        "avg_completion_sd": agg["avg_completion_s"]["sd"],
        "p95_completion_s": agg["p95_completion_s"]["mean"],
        "bandwidth_MBps": agg["aggregate_bandwidth_Bps"]["mean"] / 1e6,
        "makespan_s": agg["makespan_s"]["mean"],
        "reps": len(runset["runs"]),
    }
    if "finish_spread" in agg:
        row["finish_spread"] = agg["finish_spread"]["mean"]
    return row


def run_experiment(
    exp: Experiment,
    *,
    seed: int | None = None,
    on_point: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Runs every point under every policy; identical runs are done once."""
    rows: list[dict[str, Any]] = []
    cache: dict[tuple, dict] = {}
    total = len(exp.points) * len(exp.policies)
    done = 0
    for point in exp.points:
        for policy in exp.policies:
            key = (policy, point.key(policy))
            if key not in cache:
                runset = simulate(exp.source.with_overrides(*point.overrides(policy)), seed=seed, reps=exp.reps)
                cache[key] = summarize(runset)
            rows.append({"experiment": exp.id, "policy": policy, "params": point.params, **cache[key]})
            done += 1
            if on_point:
                on_point(done, total)
    return rows
