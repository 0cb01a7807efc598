"""Reproductions of the papers' claims: each writes report.md, plots and claims.json."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
FAILED = "failed"
STATES = (REPRODUCED, NOT_REPRODUCED, FAILED)


@dataclass
class Claim:
    """One of a paper's claims as checked here. ``passed``: the check holds.
    ``reproduced``: the check is the paper's result (within a stated
    tolerance); when False, the paper's result is not reproduced and the
    check is a bound on the model that guards against regression (the claim's
    text says the paper's value, the model's and the cause). Its state is one
    of three: reproduced, not reproduced (the bound holds), failed.
    ``model_option``: the documented model option the check runs with, when
    the result appears only with it on (its state then reads
    "reproduced with ...")."""
    id: str
    claim: str
    expected: str
    measured: str
    passed: bool
    reproduced: bool = True
    model_option: str | None = None

    @property
    def shown_status(self) -> str:
        """The state as reports print it: with the model option a result needs."""
        if self.model_option and self.status == REPRODUCED:
            return f"{REPRODUCED} with {self.model_option}"
        return self.status

    @property
    def status(self) -> str:
        if not self.passed:
            return FAILED
        return REPRODUCED if self.reproduced else NOT_REPRODUCED

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("passed")
        d["status"] = self.status
        return d


def within_factor(measured: float, paper: float, factor: float) -> bool:
    """Two-sided: ``measured`` within a factor ``factor`` of the paper's value, either way."""
    return paper / factor <= measured <= paper * factor


def judged(reproduced: bool, bound: bool) -> dict[str, bool]:
    """A claim's verdict from its two checks: the paper's result within its
    two-sided tolerance (``reproduced``), and the model's stated bound,
    which holds wherever the tolerance does. Reproduced; else not
    reproduced while the bound holds; else failed. Use as
    ``Claim(..., **judged(...))``."""
    return {"passed": reproduced or bound, "reproduced": reproduced}


def counts(claims: list[Claim]) -> dict[str, int]:
    """How many claims are in each state."""
    return {state: sum(c.status == state for c in claims) for state in STATES}


def counts_line(claims: list[Claim]) -> str:
    """"31 reproduced, 3 not reproduced, 0 failed", saying how many of the
    reproduced need a model option ("31 reproduced (1 only with a model
    option), ...")."""
    n = counts(claims)
    optioned = sum(c.status == REPRODUCED and bool(c.model_option) for c in claims)
    parts = [f"{n[state]} {state}" for state in STATES]
    if optioned:
        parts[0] += f" ({optioned} only with a model option)"
    return ", ".join(parts)


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
        counts_line(claims) + ".",
        "",
        markdown_table(["", "claim", "expected", "measured"],
                       [[c.shown_status, c.claim, c.expected, c.measured] for c in claims]),
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

