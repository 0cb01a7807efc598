"""Where the command line prints, and how wide its tables may be."""

from __future__ import annotations

import os
import stat
import time
from typing import Callable

import click
import humanize
from rich.markup import escape
from rich.console import Console
from rich.table import Table
from rich.text import Text

from concerto import _native

# Rich lays a table out for 80 columns when it does not print to a terminal,
# cutting names and numbers short ("coordin…", "completi…"). The output of a
# batch job or of a pipe is read in a file, not a window: there, tables take
# the width they need, up to this many columns. A terminal, or COLUMNS when
# set, keeps its own width.
FILE_WIDTH = 240


def fit(table: Table, width: int) -> Table:
    """At any width, the first column (what each row is about: a policy, a
    server, a size) keeps its text whole and the others fold their text onto
    more lines, rather than cutting names short ("coordin…", "127.0.…");
    headers break between their words where `width` leaves room for that."""
    names = table.columns[0] if table.columns else None
    if names is not None:
        texts = [Text.from_markup(c) if isinstance(c, str) else c for c in names.cells]
        names.no_wrap = True
        names.min_width = max([names.min_width or 0, *(t.cell_len for t in texts if isinstance(t, Text))])
    others = table.columns[1:]
    words = []
    for column in others:
        column.overflow = "fold"
        header = column.header.plain if isinstance(column.header, Text) else str(column.header)
        words.append(max((len(w) for w in header.split()), default=0))
    # Each column takes its width plus a space either side and a border.
    needed = sum(max(c.min_width or 0, 1) + 3 for c in table.columns[:1]) + sum(w + 3 for w in words) + 1
    if needed <= width:
        for column, w in zip(others, words):
            column.min_width = max(column.min_width or 0, w)
    return table


class _Console(Console):
    """A console whose tables keep their names whole (see :func:`fit`)."""

    def print(self, *objects, **kwargs) -> None:  # noqa: D102 - Console's
        for o in objects:
            if isinstance(o, Table):
                fit(o, self.width)
        super().print(*objects, **kwargs)


def console(stderr: bool = False) -> Console:
    """The console for standard output (or standard error)."""
    c = _Console(stderr=stderr)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c.width = FILE_WIDTH
    return c


def size(n: float) -> str:
    """Bytes as people read them, in binary units to a tenth: 512 B, 1.5 MiB."""
    return humanize.naturalsize(n, binary=True, format="%.1f").replace(" Bytes", " B").replace(" Byte", " B")


def exact_size(n: int) -> str:
    """A size as it was given: in KiB, MiB or GiB when it is a whole number of
    KiB (64 KiB, 1.5 MiB), else in bytes."""
    return f"{n} B" if n == 0 or n % 1024 else humanize.naturalsize(n, binary=True, format="%g")


def mode_string(kind: str, mode: int) -> str:
    """Permission bits as ``ls -l`` shows them: drwxrwxrwt, -rw-r-----."""
    return stat.filemode((stat.S_IFDIR if kind == "directory" else stat.S_IFREG) | mode)


class UsageProblem(click.ClickException):
    """Bad input: printed as `error: ...` with exit code 2, never a traceback."""

    exit_code = 2

    def show(self, file=None) -> None:  # noqa: ARG002 - click's signature
        # The message is text, not markup: "[cluster]" in it must print as written.
        console(stderr=True).print(f"[bold red]error:[/] {escape(self.message)}", highlight=False)


def guarded(fn):
    """Turns configuration and file errors into UsageProblem."""

    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _native.ConfigError as e:
            raise UsageProblem(str(e)) from e
        except OSError as e:
            raise UsageProblem(f"{e.filename}: {e.strerror or e}" if e.filename else str(e)) from e

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


class StepClock:
    """Progress of a long command told a line at a time, with a time
    estimate: each message ``is_step`` accepts begins one of ``total``
    steps and is told as ``[k/total] message, about T left`` (the steps
    done so far, timed, times the steps left, this one included); other
    messages pass as they are. ``clock`` is injectable for tests."""

    def __init__(self, total: int, say: Callable[[str], None], is_step: Callable[[str], bool] = lambda _: True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.say, self.is_step, self.clock = max(1, total), say, is_step, clock
        self.done = 0
        self.first: float | None = None

    def __call__(self, message: str) -> None:
        if not self.is_step(message):
            self.say(message)
            return
        now = self.clock()
        if self.first is None:
            self.first = now
        left = ""
        if self.done:
            per_step = (now - self.first) / self.done
            left = f", about {humanize.naturaldelta(per_step * max(1, self.total - self.done))} left"
        self.done += 1
        self.say(f"[{min(self.done, self.total)}/{self.total}] {message}{left}")
