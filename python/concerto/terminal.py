"""Where the command line prints, and how wide its tables may be."""

from __future__ import annotations

import os

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
