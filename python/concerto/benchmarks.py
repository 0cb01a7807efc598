"""IOR and mdtest command lines as scenario applications (``[[apps]]``).

``concerto sim workload from-ior "-a POSIX -t 1m -b 16m -s 4 -F -w -r"``
prints the ``[[apps]]`` table the simulator runs for that command line, and
``from-mdtest`` does the same for mdtest. The options are parsed by hand
(with ``shlex`` for the quoting) because the point is IOR's and mdtest's
own option letters, which no argument parser library knows; every option
is either modelled, accepted with no effect in the simulator (and said so
in docs/workloads.md), or refused with a message naming it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import tomli_w


class BenchmarkArgsError(ValueError):
    """A command line the importer cannot model; the message names the option."""


_SIZE = re.compile(r"^(\d+)([kKmMgGtT]?)$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def ior_size(option: str, text: str) -> int:
    """A size as IOR and mdtest write it: bytes, or with k, m, g, t (powers of 1024)."""
    m = _SIZE.match(text.strip())
    if not m:
        raise BenchmarkArgsError(f"{option} {text}: not a size (a number, optionally followed by k, m, g or t)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _count(option: str, text: str, minimum: int = 1) -> int:
    try:
        n = int(text)
    except ValueError:
        raise BenchmarkArgsError(f"{option} {text}: not a whole number") from None
    if n < minimum:
        raise BenchmarkArgsError(f"{option} {text}: must be at least {minimum}")
    return n


@dataclass
class _Parsed:
    flags: set[str]
    values: dict[str, str]


def _parse(program: str, args: str, flags: dict[str, str], valued: dict[str, str],
           refused: dict[str, str]) -> _Parsed:
    """Splits ``args`` into the flags and valued options the tables name;
    anything else is an error naming it."""
    try:
        words = shlex.split(args)
    except ValueError as e:
        raise BenchmarkArgsError(f"{program} command line: {e}") from None
    if words and words[0] in (program, f"./{program}") or (words and words[0].endswith(f"/{program}")):
        words = words[1:]
    parsed = _Parsed(set(), {})
    i = 0
    while i < len(words):
        w = words[i]
        if w in refused:
            raise BenchmarkArgsError(f"{program} {w}: {refused[w]}")
        if w in flags:
            parsed.flags.add(w)
        elif w in valued:
            if i + 1 >= len(words):
                raise BenchmarkArgsError(f"{program} {w}: needs a value ({valued[w]})")
            parsed.values[w] = words[i + 1]
            i += 1
        elif len(w) > 2 and w[:2] in valued:  # -t1m
            parsed.values[w[:2]] = w[2:]
        else:
            raise BenchmarkArgsError(f"{program} {w}: not an option the simulator models "
                                     f"(docs/workloads.md lists those it does)")
        i += 1
    return parsed


def _tasks(program: str, values: dict[str, str], processes: int | None) -> int:
    """The tasks: the command line's -N or --processes (agreeing when both
    are given), else 1; and no -i repetitions, which are the simulator's
    own (--reps), not part of the workload."""
    if "-i" in values and _count(f"{program} -i", values["-i"]) > 1:
        raise BenchmarkArgsError(f"{program} -i {values['-i']}: repetitions are the simulator's --reps (different "
                                 "seeds), not part of the workload")
    if "-N" not in values:
        return processes or 1
    tasks = _count(f"{program} -N", values["-N"])
    if processes is not None and tasks != processes:
        raise BenchmarkArgsError(f"{program} -N {values['-N']} and --processes {processes} disagree")
    return tasks


#: IOR options: (what it is, how the simulator takes it).
IOR_FLAGS = {
    "-w": "write", "-r": "read", "-F": "file per process", "-C": "reorder tasks for the read",
    "-e": "fsync after the write", "-g": "barriers between operations", "-k": "keep the file",
    "-v": "verbose", "-q": "quit on error",
}
IOR_VALUED = {
    "-a": "API: POSIX or MPIIO", "-b": "block size", "-t": "transfer size", "-s": "segment count",
    "-N": "number of tasks", "-o": "test file name", "-i": "repetitions",
}
IOR_REFUSED = {
    "-c": "collective I/O is not what the ior workload models: use workload \"collective\" (docs/configuration.md)",
    "-z": "random offsets are not modelled",
    "-Y": "an fsync after every write is not modelled",
    "-D": "a deadline for stonewalling is not modelled",
    "-O": "directives (-O) are not modelled",
    "-B": "O_DIRECT is not modelled (the simulator has no client cache)",
    "-x": "single-shared-file stonewalling is not modelled",
    "-l": "data checks are not modelled",
    "-W": "write checks are not modelled",
    "-R": "read checks are not modelled",
}


def from_ior(args: str, processes: int | None = None, name: str | None = None) -> dict:
    """The ``[[apps]]`` entry for an IOR command line (see IOR_* above)."""
    p = _parse("ior", args, IOR_FLAGS, IOR_VALUED, IOR_REFUSED)
    v = p.values
    api = v.get("-a", "POSIX").upper()
    if api not in ("POSIX", "MPIIO"):
        raise BenchmarkArgsError(f"ior -a {v['-a']}: only POSIX and MPIIO (independent) are modelled")
    transfer = ior_size("ior -t", v.get("-t", "256k"))
    block = ior_size("ior -b", v.get("-b", "1m"))
    if transfer == 0 or block == 0 or block % transfer:
        raise BenchmarkArgsError(f"ior -b {v.get('-b', '1m')} -t {v.get('-t', '256k')}: the block size must be a "
                                 "whole, non-zero number of transfers")
    segments = _count("ior -s", v.get("-s", "1"))
    tasks = _tasks("ior", v, processes)
    # IOR writes and reads when told neither.
    operations = [op for flag, op in (("-w", "write"), ("-r", "read")) if flag in p.flags] or ["write", "read"]
    app = {
        "name": name or "ior",
        "workload": "ior",
        "processes": tasks,
        "op": operations[0],
        "request_size": transfer,
        "block_size": block,
        "segments": segments,
        "operations": operations,
        "file": "per-process" if "-F" in p.flags else "shared",
    }
    return app


MDTEST_FLAGS = {
    "-u": "a directory per task", "-F": "files only", "-C": "create only", "-T": "stat only",
    "-E": "read only", "-r": "remove only", "-v": "verbose", "-y": "sync after each write",
}
MDTEST_VALUED = {
    "-n": "items per task", "-w": "bytes written to each file", "-e": "bytes read from each file",
    "-i": "repetitions", "-d": "test directory", "-N": "number of tasks",
}
MDTEST_REFUSED = {
    "-D": "directories only is not modelled (the md-test workload's items are files)",
    "-z": "a directory tree (depth) is not modelled: each task has one directory",
    "-b": "a directory tree (branching) is not modelled: each task has one directory",
    "-L": "leaf-only trees are not modelled",
    "-S": "a shared file is not modelled",
    "-I": "items per directory in a tree are not modelled",
    "-R": "random stat order is not modelled",
    "-t": "the unique working directory option is not modelled",
}

#: mdtest's steps for its -C/-T/-E/-r choices, as the md-test workload names them.
_MDTEST_STEPS = {"-C": ["create", "write"], "-T": ["stat"], "-E": ["read"], "-r": ["rm"]}


def from_mdtest(args: str, processes: int | None = None, name: str | None = None) -> dict:
    """The ``[[apps]]`` entry for an mdtest command line (see MDTEST_* above)."""
    p = _parse("mdtest", args, MDTEST_FLAGS, MDTEST_VALUED, MDTEST_REFUSED)
    v = p.values
    if "-n" not in v:
        raise BenchmarkArgsError("mdtest: -n (items per task) is required")
    if "-u" not in p.flags:
        raise BenchmarkArgsError("mdtest without -u (every task in one shared directory) is not modelled: the "
                                 "md-test workload gives each task its own directory; pass -u")
    tasks = _tasks("mdtest", v, processes)
    write = ior_size("mdtest -w", v.get("-w", "0"))
    read = ior_size("mdtest -e", v.get("-e", "0"))
    if write and read and write != read:
        raise BenchmarkArgsError(f"mdtest -w {v['-w']} -e {v['-e']}: the md-test workload reads what it wrote; "
                                 "give one size")
    chosen = [flag for flag in ("-C", "-T", "-E", "-r") if flag in p.flags]
    steps = ["mktestdir"]
    for flag in chosen or ["-C", "-T", "-E", "-r"]:
        steps += _MDTEST_STEPS[flag]
    steps += ["rmtestdir"]
    if not write:
        steps = [s for s in steps if s != "write"]
    if not read and "read" in steps and not write:
        # Reading files of no bytes: mdtest's read phase opens and closes them.
        steps = [s if s != "read" else "stat" for s in steps]
    app = {
        "name": name or "mdtest",
        "workload": "md-test",
        "processes": tasks,
        "items": _count("mdtest -n", v["-n"]),
        "md_steps": steps,
    }
    if write or read:
        app["request_size"] = write or read
    return app


def apps_toml(app: dict) -> str:
    """An ``[[apps]]`` table to append to a scenario file."""
    return tomli_w.dumps({"apps": [app]})
