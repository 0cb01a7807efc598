"""How busy the host was while something was measured on it.

The real side of a comparison runs its tasks, its mount and its servers on
this machine's cores; when other work holds them, the real figures are the
busy host's, and a ratio to the simulator (which models no host) measures
the host, not the model. What counts is the work of *others*: the CPU time
the whole host spent (``/proc/stat``) less what this process and the
processes it started and reaped spent (``getrusage``), as a share of the
cores over the span. The real side's own CPU demand is not a busy host:
four tasks, a mount and four servers on two cores keep the cores busy by
themselves, and their figures are what the model should predict.

The kernel's pressure stall information (``/proc/pressure/cpu``, Linux
4.20 and later: the time at least one runnable task waited for a CPU) is
reported beside it, but judges nothing, since the real side's own tasks
wait for each other's cores: measured here (2 cores), `concerto twin` of a
2-task IOR run 5% quiet and 59% beside two busy loops, but a 4-task mdtest
run over 25% on a quiet machine.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

#: Above this share of the cores taken by other processes over the span,
#: the host counts as busy.
BUSY_OTHER_SHARE = 0.25
PRESSURE = Path("/proc/pressure/cpu")
STAT = Path("/proc/stat")


def host_cpu_s(path: Path = STAT) -> float | None:
    """CPU seconds the whole host has spent busy since boot (every core's
    user, nice, system, interrupt and steal time; None: not available)."""
    try:
        fields = path.read_text().splitlines()[0].split()
        if fields[0] != "cpu":
            return None
        ticks = [int(x) for x in fields[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds this process and the children it reaped have spent."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def cpu_seconds() -> tuple[float | None, float]:
    """(the host's busy CPU seconds, this process tree's), now."""
    return host_cpu_s(), own_cpu_s()


def _stalled_us(path: Path = PRESSURE) -> int | None:
    """The kernel's running total of microseconds some task waited for a CPU (None: not available)."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("some "):
                return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class HostPressure:
    """The host over one span: the share of its cores other processes took
    (None where the kernel does not say), the share of it some task waited
    for a CPU (None likewise), its length, the load average at its end and
    the cores."""

    other_cpu_share: float | None = None
    cpu_stall_share: float | None = None
    seconds: float = 0.0
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def busy(self) -> bool:
        return self.other_cpu_share is not None and self.other_cpu_share > BUSY_OTHER_SHARE

    def as_dict(self) -> dict:
        return {**asdict(self), "busy": self.busy, "busy_above": BUSY_OTHER_SHARE}

    @classmethod
    def from_dict(cls, h: dict) -> "HostPressure":
        """What :meth:`as_dict` wrote (a result file's ``host``; one of an
        earlier version, without the other processes' share, judges nothing)."""
        return cls(h.get("other_cpu_share"), h["cpu_stall_share"], h["seconds"], tuple(h["load_average"]),
                   h["cores"])

    def describe(self) -> str:
        other = ("other processes' share of the cores unknown" if self.other_cpu_share is None
                 else f"other processes took {self.other_cpu_share:.0%} of the cores")
        stall = ("" if self.cpu_stall_share is None
                 else f", a task waited for a CPU {self.cpu_stall_share:.0%} of the time")
        load = " ".join(f"{x:.2f}" for x in self.load_average)
        return f"{other}{stall} over {self.seconds:.0f} s; load average {load} on {self.cores} cores"


class watch:
    """``with watch() as pressure:`` fills ``pressure`` when the block ends
    (also when it raises)."""

    def __init__(self, path: Path = PRESSURE, clock: Callable[[], float] = time.monotonic,
                 cpu: Callable[[], tuple[float | None, float]] = cpu_seconds) -> None:
        self.path, self.clock, self.cpu = path, clock, cpu
        self.pressure = HostPressure()

    def __enter__(self) -> HostPressure:
        self._start, self._stalled, self._cpu = self.clock(), _stalled_us(self.path), self.cpu()
        return self.pressure

    def __exit__(self, *_exc) -> None:
        seconds = self.clock() - self._start
        stalled, (host_s, own_s) = _stalled_us(self.path), self.cpu()
        self.pressure.seconds = seconds
        self.pressure.load_average = os.getloadavg()
        if seconds <= 0:
            return
        if stalled is not None and self._stalled is not None:
            self.pressure.cpu_stall_share = min(1.0, (stalled - self._stalled) / 1e6 / seconds)
        (host_before, own_before) = self._cpu
        if host_s is not None and host_before is not None:
            others = (host_s - host_before) - (own_s - own_before)
            self.pressure.other_cpu_share = min(1.0, max(0.0, others / (self.pressure.cores * seconds)))
