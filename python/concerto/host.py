"""How busy the host was while something was measured on it.

The real side of a comparison runs its tasks, its mount and its servers on
this machine's cores; when other work holds them, the real figures are the
busy host's, and a ratio to the simulator (which models no host) measures
the host, not the model. The kernel's pressure stall information
(``/proc/pressure/cpu``, Linux 4.20 and later) counts the time at least one
runnable task waited for a CPU: measured here over the span of the real
side, it tells a busy host from a quiet one whatever the load's source.
Measured on this machine (2 cores), `concerto twin` of a 2-task IOR run:
5% of the time quiet, 59% beside two busy loops.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

#: Above this share of the time with a task waiting for a CPU, the host
#: counts as busy.
BUSY_STALL_SHARE = 0.25
PRESSURE = Path("/proc/pressure/cpu")


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
    """The host over one span: the share of it some task waited for a CPU
    (None where the kernel does not say), its length, the load average at
    its end and the cores."""

    cpu_stall_share: float | None = None
    seconds: float = 0.0
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def busy(self) -> bool:
        return self.cpu_stall_share is not None and self.cpu_stall_share > BUSY_STALL_SHARE

    def as_dict(self) -> dict:
        return {**asdict(self), "busy": self.busy, "busy_above": BUSY_STALL_SHARE}

    @classmethod
    def from_dict(cls, h: dict) -> "HostPressure":
        """What :meth:`as_dict` wrote (a result file's ``host``)."""
        return cls(h["cpu_stall_share"], h["seconds"], tuple(h["load_average"]), h["cores"])

    def describe(self) -> str:
        stall = ("unknown" if self.cpu_stall_share is None
                 else f"a task waited for a CPU {self.cpu_stall_share:.0%} of the time")
        load = " ".join(f"{x:.2f}" for x in self.load_average)
        return f"{stall} over {self.seconds:.0f} s; load average {load} on {self.cores} cores"


class watch:
    """``with watch() as pressure:`` fills ``pressure`` when the block ends
    (also when it raises)."""

    def __init__(self, path: Path = PRESSURE, clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.clock = path, clock
        self.pressure = HostPressure()

    def __enter__(self) -> HostPressure:
        self._start, self._stalled = self.clock(), _stalled_us(self.path)
        return self.pressure

    def __exit__(self, *_exc) -> None:
        seconds = self.clock() - self._start
        stalled = _stalled_us(self.path)
        self.pressure.seconds = seconds
        self.pressure.load_average = os.getloadavg()
        if stalled is not None and self._stalled is not None and seconds > 0:
            self.pressure.cpu_stall_share = min(1.0, (stalled - self._stalled) / 1e6 / seconds)
