"""IOR and mdtest command lines as scenario applications (``[[apps]]``).

``concerto sim workload from-ior "-a POSIX -t 1m -b 16m -s 4 -F -w -r"``
prints the ``[[apps]]`` table the simulator runs for that command line, and
``from-mdtest`` does the same for mdtest. The command line may be the one
a user ran, launcher and all (``mpirun -np 4 ior ...``, ``srun -n 4
mdtest ...``): the launcher's rank count is used and its other options
ignored. The options are parsed by hand (with ``shlex`` for the quoting)
because the point is IOR's and mdtest's own option letters, which no
argument parser library knows; every option is either modelled, accepted
with no effect on timing in the simulator (and said so in
docs/workloads.md), or refused with a message naming it.
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
    #: The ranks the launcher starts, and how it was told (``mpirun -np 4``).
    ranks: tuple[int, str] | None = None
    #: How many of them share a node, when the launcher says
    #: (``srun -N 2 -n 8``, ``mpirun -np 8 -npernode 4``).
    per_node: int | None = None


#: Programs that start MPI ranks, whose rank count a pasted command line gives.
LAUNCHERS = ("mpirun", "mpiexec", "mpiexec.hydra", "orterun", "srun", "aprun")
#: Their options that give the rank count (``-n 4``, ``-n4``, ``--ntasks=4``);
#: Open MPI's ``-c`` is one (srun's is CPUs per task).
_RANK_OPTIONS = ("-np", "-n", "--np", "--n", "--ntasks")
_MPIRUN_RANK_OPTIONS = _RANK_OPTIONS + ("-c",)
#: srun's node count and tasks per node (``srun -N 2 --ntasks-per-node=2``).
_SRUN_NODES = ("-N", "--nodes")
_SRUN_PER_NODE = ("--ntasks-per-node",)
#: Other launchers' ranks per node, whose total depends on the hosts the
#: job runs on (Open MPI's ``-N`` and ``--npernode``, MPICH's ``-ppn``,
#: aprun's ``-N``): with no rank count beside them, refused.
_PER_HOST = ("-N", "-npernode", "--npernode", "-ppn", "--ppn")


def _launcher_options(opts: list[str]) -> list[tuple[str, str]]:
    """The launcher's options as (name, value) pairs: ``-n 4``, ``-n4``,
    ``--ntasks=4`` all give ``("-n"|"--ntasks", "4")``; flags give ``(name, "")``."""
    out = []
    for j, w in enumerate(opts):
        name, eq, value = w.partition("=")
        if not eq:
            glued = next((o for o in ("-np", "-n", "-N", "-c") if w.startswith(o) and w[len(o):].isdigit()), None)
            if glued:
                name, value = glued, w[len(glued):]
            elif w.startswith("-") and j + 1 < len(opts) and not opts[j + 1].startswith("-"):
                value = opts[j + 1]
        out.append((name, value))
    return out


def _launcher_ranks(launcher: str, opts: list[str]) -> tuple[tuple[int, str] | None, int | None]:
    """The ranks ``launcher`` with options ``opts`` starts, and how it was
    told (None when the options leave it to the launcher's default, one);
    and how many ranks share a node, when the options say."""
    srun, aprun = launcher == "srun", launcher == "aprun"
    totals = _RANK_OPTIONS if srun or aprun else _MPIRUN_RANK_OPTIONS
    ranks, nodes, per_node = None, None, None
    for name, value in _launcher_options(opts):
        if not value:
            continue
        told = f"{launcher} {name} {value}"
        if name in totals:
            n = _count(f"{launcher} {name}", value)
            if ranks is not None and ranks[0] != n:
                raise BenchmarkArgsError(f"{ranks[1]} and {told} disagree")
            ranks = (n, told)
        elif srun and name in _SRUN_NODES:
            if not value.isdigit():
                raise BenchmarkArgsError(f"{told}: a range of nodes leaves the rank count to the allocation; "
                                         f"give the nodes as one number or the ranks with -n")
            nodes = (_count(f"{launcher} {name}", value), told)
        elif srun and name in _SRUN_PER_NODE:
            per_node = (_count(f"{launcher} {name}", value), told)
        elif not srun and name in _PER_HOST:
            per_node = (_count(f"{launcher} {name}", value), told)
        elif not srun and name == "--map-by" and value.startswith("ppr:"):
            # ppr:K:node, K ranks per node (per socket or core: left to the hosts).
            parts = value.split(":")
            k = _count(told, parts[1]) if len(parts) >= 3 and parts[2].startswith("node") else None
            per_node = (k, told)
    if ranks is not None:
        if srun and nodes is not None and per_node is None:
            # Slurm spreads -n tasks over -N nodes in blocks.
            return ranks, min(ranks[0], -(-ranks[0] // nodes[0]))
        return ranks, min(ranks[0], per_node[0]) if per_node and per_node[0] else None
    if srun and nodes is not None:
        # Slurm starts one task per node unless told how many.
        k = per_node[0] if per_node else 1
        return (nodes[0] * k, f"{nodes[1]}{' ' + per_node[1] if per_node else ''}"), k
    if per_node is not None:
        give = "-N (nodes) or -n" if srun else "-n"
        raise BenchmarkArgsError(f"{per_node[1]}: ranks per node, and how many nodes is the allocation's; "
                                 f"give the rank count ({give})")
    return None, None


def _launched(program: str, words: list[str]) -> tuple[list[str], tuple[int, str] | None, int | None]:
    """The words after the program, the ranks a leading launcher starts
    and how many share a node (``mpirun -np 4 ior ...``, ``srun -N 2
    --ntasks-per-node=2 ior ...``; see ``_launcher_ranks``). Environment
    assignments before the launcher (``OMP_NUM_THREADS=1``) and the
    launcher's other options (hosts, binding) have no effect on the
    model."""
    i = 0
    while i < len(words) and (words[i] == "env" or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i])):
        i += 1
    is_program = lambda w: w == program or w.endswith(f"/{program}")  # noqa: E731
    if i < len(words) and words[i].rsplit("/", 1)[-1] in LAUNCHERS:
        launcher = words[i].rsplit("/", 1)[-1]
        at = next((j for j in range(i + 1, len(words)) if is_program(words[j])), None)
        if at is None:
            raise BenchmarkArgsError(f"{launcher}: no {program} on the command line after it")
        return (words[at + 1:], *_launcher_ranks(launcher, words[i + 1:at]))
    if i < len(words) and is_program(words[i]):
        i += 1
    return words[i:], None, None


def _parse(program: str, args: str, flags: dict[str, str], valued: dict[str, str],
           refused: dict[str, str]) -> _Parsed:
    """Splits ``args`` into the launcher's ranks and the flags and valued
    options the tables name; anything else is an error naming it."""
    try:
        words = shlex.split(args)
    except ValueError as e:
        raise BenchmarkArgsError(f"{program} command line: {e}") from None
    words, ranks, per_node = _launched(program, words)
    parsed = _Parsed(set(), {}, ranks, per_node)
    i = 0
    while i < len(words):
        w = words[i]
        name, eq, value = w.partition("=")
        if w in refused or (eq and name in refused):
            raise BenchmarkArgsError(f"{program} {w}: {refused[name if eq else w]}")
        if w in flags:
            parsed.flags.add(w)
        elif re.fullmatch(r"-(\w)\1+", w) and w[:2] in flags:  # -vv
            parsed.flags.add(w[:2])
        elif w in valued:
            if i + 1 >= len(words):
                raise BenchmarkArgsError(f"{program} {w}: needs a value ({valued[w]})")
            parsed.values[w] = words[i + 1]
            i += 1
        elif eq and name.startswith("--") and name in valued:  # --option=value
            parsed.values[name] = value
        elif len(w) > 2 and not w.startswith("--") and w[:2] in valued:  # -t1m
            parsed.values[w[:2]] = w[2:]
        else:
            raise BenchmarkArgsError(f"{program} {w}: not an option the simulator models "
                                     f"(docs/workloads.md lists those it does)")
        i += 1
    return parsed


def _ranks(program: str, parsed: _Parsed, processes: int | None) -> tuple[int, str] | None:
    """The ranks started: the launcher's or --processes (agreeing when
    both are given), with how they were told; None when neither says."""
    given = (processes, f"--processes {processes}") if processes is not None else None
    if parsed.ranks and given and parsed.ranks[0] != given[0]:
        raise BenchmarkArgsError(f"{parsed.ranks[1]} and {given[1]} disagree")
    return parsed.ranks or given


#: IOR options: (what it is, how the simulator takes it). The flags and
#: valued options the simulator does not model change what IOR checks,
#: prints or names, or repeat the run, not the timing of its operations
#: (IOR times its data checks apart from the write and read bandwidths).
IOR_FLAGS = {
    "-w": "write", "-r": "read", "-F": "file per process", "-c": "collective I/O (with -a MPIIO)",
    "-C": "reorder tasks for the read", "-Z": "reorder tasks at random for the read",
    "-e": "fsync after the write", "-g": "barriers between operations", "-k": "keep the file",
    "-K": "keep the file after errors", "-E": "use the existing file", "-u": "a directory per task",
    "-m": "a file per repetition", "-W": "check the written data", "-R": "check the read data",
    "-H": "show MPI-IO hints", "-v": "verbose", "-q": "quit on error",
}
IOR_VALUED = {
    "-a": "API: POSIX or MPIIO", "-b": "block size", "-t": "transfer size", "-s": "segment count",
    "-N": "number of tasks", "-o": "test file name", "-i": "repetitions", "-O": "directives",
    "-X": "seed of the random task order", "-Q": "task offset of the reordered read",
    "-d": "delay between repetitions", "-G": "time-stamp signature of the data", "-l": "data packet type",
    "-j": "outlier threshold (a warning)",
}
IOR_REFUSED = {
    "-z": "random offsets are not modelled",
    "-Y": "an fsync after every write is not modelled",
    "-D": "a deadline for stonewalling is not modelled",
    "-B": "O_DIRECT is not modelled (the simulator has no client cache)",
    "-x": "single-shared-file stonewalling is not modelled",
    "-U": "an MPI-IO hints file is not modelled (the collective workload's options are in the scenario)",
}
#: ``-O`` directives that change only IOR's output.
IOR_OUTPUT_DIRECTIVES = ("summaryFormat", "summaryFile")


def _ior_directives(text: str) -> None:
    """``-O key=value[,key=value]``: only those that change the output."""
    for directive in text.split(","):
        key = directive.partition("=")[0].strip()
        if key not in IOR_OUTPUT_DIRECTIVES:
            raise BenchmarkArgsError(f"ior -O {directive}: not modelled (accepted: "
                                     f"{', '.join(IOR_OUTPUT_DIRECTIVES)}, which change the output only)")


def _ior_tasks(p: _Parsed, processes: int | None) -> int:
    """IOR's tasks: -N of the ranks started (all of them without -N)."""
    ranks = _ranks("ior", p, processes)
    if "-N" not in p.values:
        return ranks[0] if ranks else 1
    tasks = _count("ior -N", p.values["-N"])
    if ranks and tasks > ranks[0]:
        raise BenchmarkArgsError(f"ior -N {p.values['-N']}: more tasks than the {ranks[0]} ranks {ranks[1]} starts")
    return tasks


def from_ior(args: str, processes: int | None = None, name: str | None = None) -> dict:
    """The ``[[apps]]`` entry for an IOR command line (see IOR_* above)."""
    p = _parse("ior", args, IOR_FLAGS, IOR_VALUED, IOR_REFUSED)
    v = p.values
    api = v.get("-a", "POSIX").upper()
    if api not in ("POSIX", "MPIIO"):
        raise BenchmarkArgsError(f"ior -a {v['-a']}: only POSIX and MPIIO are modelled")
    if "-O" in v:
        _ior_directives(v["-O"])
    if "-i" in v:
        _count("ior -i", v["-i"])
    transfer = ior_size("ior -t", v.get("-t", "256k"))
    block = ior_size("ior -b", v.get("-b", "1m"))
    if transfer == 0 or block == 0 or block % transfer:
        raise BenchmarkArgsError(f"ior -b {v.get('-b', '1m')} -t {v.get('-t', '256k')}: the block size must be a "
                                 "whole, non-zero number of transfers")
    segments = _count("ior -s", v.get("-s", "1"))
    tasks = _ior_tasks(p, processes)
    # IOR writes and reads when told neither.
    operations = [op for flag, op in (("-w", "write"), ("-r", "read")) if flag in p.flags] or ["write", "read"]
    if "-c" in p.flags:
        return _placed(p, _ior_collective(p, api, operations, tasks, transfer, block, segments, name))
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
    return _placed(p, app)


def _placed(p: _Parsed, app: dict) -> dict:
    """The entry with its ranks on nodes as the launcher placed them
    (``processes_per_node``), when it said; else the simulator's default,
    a node per rank."""
    if p.per_node:
        app["processes_per_node"] = min(p.per_node, app["processes"])
    return app


def _ior_collective(p: _Parsed, api: str, operations: list[str], tasks: int, transfer: int, block: int,
                    segments: int, name: str | None) -> dict:
    """``ior -a MPIIO -c``: the collective workload with IOR's layout
    (pattern ``ior``), one call per transfer, as ROMIO and the MPI-IO
    library run it by default: two-phase, and a call whose tasks' data
    share no stripe unit as each task's independent call (``romio_cb``
    automatic)."""
    if api != "MPIIO":
        raise BenchmarkArgsError("ior -c: collective I/O goes through MPI-IO; add -a MPIIO (IOR requires it too)")
    if "-F" in p.flags:
        raise BenchmarkArgsError("ior -c with -F: a collective call on each task's own file is independent I/O; "
                                 "drop -c (or -F)")
    if len(operations) > 1:
        raise BenchmarkArgsError("ior -c with both -w and -r: the collective workload runs one operation per "
                                 "application; import -c -w and -c -r as two runs")
    return {
        "name": name or "ior",
        "workload": "collective",
        "processes": tasks,
        "op": operations[0],
        "requests": segments * (block // transfer),
        "access": f"ior:block={block},transfer={transfer}",
        "collective": {"strategy": "two-phase", "romio_cb": "automatic"},
    }


MDTEST_FLAGS = {
    "-u": "a directory per task", "-F": "files only", "-C": "create only", "-T": "stat only",
    "-E": "read only", "-r": "remove only", "-v": "verbose", "-y": "sync after each write",
    "-X": "verify the data read", "--verify-read": "verify the data read",
    "--verify-write": "verify the data written", "-P": "print rates and times", "-Y": "sync after each phase",
    "--print-all-procs": "every process prints", "--showRankStatistics": "per-rank statistics",
}
MDTEST_VALUED = {
    "-n": "items per task", "-w": "bytes written to each file", "-e": "bytes read from each file",
    "-i": "repetitions", "-d": "test directory", "-N": "stride between the task that writes and the one that "
    "reads (against the client's cache)", "-a": "API", "-G": "seed of the data", "-V": "verbosity level",
    "--saveRankPerformanceDetails": "a file of per-rank figures",
}
MDTEST_REFUSED = {
    "-D": "directories only: the md-test workload's items are files (its directory phases are not modelled)",
    "-z": "a directory tree (depth) is not modelled: each task has one directory",
    "-b": "a directory tree (branching) is not modelled: each task has one directory",
    "-L": "leaf-only trees are not modelled",
    "-S": "a shared file is not modelled",
    "-I": "items per directory in a tree are not modelled",
    "-R": "random stat order is not modelled",
    "-t": "the unique working directory option is not modelled",
    "-W": "a stonewall deadline is not modelled",
    "-x": "a stonewall status file is not modelled",
    "-k": "mknod instead of creat is not modelled",
    "-f": "a sweep of task counts (first) is not modelled: import one count (--processes or the launcher's)",
    "-l": "a sweep of task counts (last) is not modelled: import one count (--processes or the launcher's)",
    "-s": "a sweep of task counts (stride) is not modelled: import one count (--processes or the launcher's)",
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
    if "-F" not in p.flags:
        raise BenchmarkArgsError("mdtest without -F runs its directory phases too (Directory creation, stat, "
                                 "removal), which the md-test workload does not model: pass -F for its file phases")
    if v.get("-a", "POSIX").upper() != "POSIX":
        raise BenchmarkArgsError(f"mdtest -a {v['-a']}: only POSIX is modelled")
    for option in ("-i", "-N"):
        if option in v:
            _count(f"mdtest {option}", v[option], minimum=0 if option == "-N" else 1)
    ranks = _ranks("mdtest", p, processes)
    tasks = ranks[0] if ranks else 1
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
    return _placed(p, app)


def apps_toml(app: dict) -> str:
    """An ``[[apps]]`` table to append to a scenario file: always in that
    form, which may follow other tables (``tomli_w`` writes a short
    array of tables inline, ``apps = [...]``, which after a ``[policy]``
    table would belong to it)."""
    return "[[apps]]\n" + "".join(f"{_toml_key(k)} = {_toml_value(v)}\n" for k, v in app.items())


def _toml_key(key: str) -> str:
    return tomli_w.dumps({key: 0}).split(" = ", 1)[0]


def _toml_value(value: object) -> str:
    """A value as TOML writes it on the right of a key (a table inline)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return tomli_w.dumps({"v": value}).split(" = ", 1)[1].rstrip("\n")
