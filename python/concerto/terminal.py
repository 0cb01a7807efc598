"""Where the command line prints, and how wide its tables may be."""

from __future__ import annotations

import os

import humanize
from rich.console import Console

# Rich lays a table out for 80 columns when it does not print to a terminal,
# cutting names and numbers short ("coordin…", "completi…"). The output of a
# batch job or of a pipe is read in a file, not a window: there, tables take
# the width they need, up to this many columns. A terminal, or COLUMNS when
# set, keeps its own width.
FILE_WIDTH = 240


def console(stderr: bool = False) -> Console:
    """The console for standard output (or standard error)."""
    c = Console(stderr=stderr)
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
