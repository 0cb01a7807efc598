"""Reproductions of the papers' claims: each writes report.md, plots and claims.json."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class Claim:
    id: str
    claim: str
    expected: str
    measured: str
    passed: bool

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("passed")
        return d


def experiments_dir() -> Path:
    """``$CONCERTO_EXPERIMENTS``, else the ``experiments/`` folder of the source tree."""
    env = os.environ.get("CONCERTO_EXPERIMENTS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "experiments"


def report_head(title: str, paper: str, quick: bool, about: str, claims: list[Claim]) -> list[str]:
    """The first lines of a reproduction's report.md: its title, the mode and
    the command that produced it, what was run, and the claims as a table."""
    from concerto.report import markdown_table

    return [
        f"# Reproduction: {title}",
        "",
        f"Mode: {'quick' if quick else 'full'}. Produced by `concerto reproduce {paper}{' --quick' if quick else ''}`. "
        + about,
        "",
        "## Claims",
        "",
        markdown_table(["", "claim", "expected", "measured"],
                       [["PASS" if c.passed else "FAIL", c.claim, c.expected, c.measured] for c in claims]),
        "",
    ]


def run_paper_sweep(sweep, out: Path, seed: int | None, status, workers: int, dask: str | None) -> list[dict]:
    """Runs one of a reproduction's sweeps afresh into ``out`` (the seed
    overridden when given), saying which; returns its rows."""
    from concerto.sweep import run_sweep

    if seed is not None:
        sweep.seed = seed
    status(f"{sweep.id}: {sweep.title}")
    return run_sweep(sweep, out=out, workers=workers, dask=dask, fresh=True).rows

