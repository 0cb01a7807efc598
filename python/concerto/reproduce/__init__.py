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
    # Set when the simulator is known not to reproduce this claim yet: the
    # claim is still evaluated and reported, but does not fail the run.
    deviation: str | None = None

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("passed")
        if d["deviation"] is None:
            del d["deviation"]
        return d

    @property
    def blocking_failure(self) -> bool:
        return not self.passed and self.deviation is None


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

    def status(c: Claim) -> str:
        return "PASS" if c.passed else ("DEVIATION" if c.deviation else "FAIL")

    return [
        f"# Reproduction: {title}",
        "",
        f"Mode: {'quick' if quick else 'full'}. Produced by `concerto reproduce {paper}{' --quick' if quick else ''}`. "
        + about,
        "",
        "## Claims",
        "",
        markdown_table(["", "claim", "expected", "measured"],
                       [[status(c), c.claim, c.expected, c.measured] for c in claims]),
        "",
    ]

