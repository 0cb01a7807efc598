"""Running simulations from Python: a thin layer over ``concerto._native``."""

from __future__ import annotations

import contextlib
import threading
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from concerto import _native


class ConfigWarning(UserWarning):
    """A configuration value that is valid but almost surely a mistake (a
    duration without a unit, a stripe unit in decimal units); the message
    names the file, line and key, and the fix."""


@dataclass
class ScenarioSource:
    """Scenario TOML text, optionally a sub-table of a larger file, plus overrides."""

    text: str
    label: str
    table: str | None = None
    overrides: list[str] = field(default_factory=list)

    @classmethod
    def from_path(cls, path: str | Path, table: str | None = None) -> "ScenarioSource":
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise _native.ConfigError(f"{p}: cannot read scenario ({e.strerror})") from e
        if table is None and _is_experiment(text):
            # A sweep file carries its base scenario in [scenario]; running
            # it as a plain scenario means running that base, once the
            # whole file (its [sweep] and every point) is checked.
            from concerto.sweep import parse_sweep

            parse_sweep(text, str(p))
            table = "scenario"
        return cls(text=text, label=str(p), table=table)

    def with_overrides(self, *sets: str) -> "ScenarioSource":
        return ScenarioSource(self.text, self.label, self.table, [*self.overrides, *sets])

    def config(self, warn: bool = True) -> dict:
        """The validated scenario with defaults filled in; its
        :meth:`warnings` issued unless ``warn`` is false."""
        with self.naming_errors():
            config = _native.load_scenario(self.text, self.table, self.overrides)
        if warn:
            self.warn()
        return config

    def warnings(self) -> list[str]:
        """Values that are valid but almost surely mistakes, each with its
        file, line, key and fix (see :class:`ConfigWarning`)."""
        with self.naming_errors():
            return [f"{self.label}: {w}" for w in _native.scenario_warnings(self.text, self.table, self.overrides)]

    def warn(self) -> None:
        """Issues :meth:`warnings` as :class:`ConfigWarning` (Python's
        warning filters then decide what is shown)."""
        for message in self.warnings():
            warnings.warn(message, ConfigWarning, stacklevel=3)

    @contextlib.contextmanager
    def naming_errors(self):
        """A configuration error from the native side, prefixed with this source's file name."""
        try:
            yield
        except _native.ConfigError as e:
            raise _native.ConfigError(f"{self.label}: {e}") from None


def _is_experiment(text: str) -> bool:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False  # the native loader reports the syntax error with its position
    # Sweep files (docs/sweeps.md) embed their scenario as a
    # table; a plain scenario has its cluster at the top level.
    return isinstance(doc.get("scenario"), dict) and "cluster" not in doc


def simulate(
    source: ScenarioSource,
    *,
    seed: int | None = None,
    reps: int = 1,
    detail_csv: str | Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Runs the scenario ``reps`` times; returns the run set as a dict.

    The simulation runs in a worker thread with the GIL released, so
    ``on_progress(done, total)`` can be called from this thread meanwhile.
    """
    source.warn()
    progress = _native.Progress()
    outcome: dict = {}

    def work() -> None:
        try:
            with source.naming_errors():
                outcome["runset"] = _native.simulate(
                    source.text,
                    source.table,
                    source.overrides,
                    seed,
                    reps,
                    progress,
                    str(detail_csv) if detail_csv else None,
                )
        except BaseException as e:  # re-raised in the caller's thread
            outcome["error"] = e

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
        if on_progress is not None:
            on_progress(progress.done, progress.total)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["runset"]
