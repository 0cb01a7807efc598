from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SMALL = """
name = "small"
[cluster]
servers = 4
stripe_unit = "4KiB"
[cluster.device]
kind = "hdd"
[[apps]]
workload = "ior"
instances = 3
processes = 4
requests = 3
request_size = "64KiB"
"""


@pytest.fixture
def small_scenario(tmp_path: Path) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return p


def concerto(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs the CLI as a user would, in a subprocess, its output going to a
    file as a batch job's log does: in `env` when given, else in this
    process's environment without COLUMNS and LINES. Passing the environment
    matters even unchanged: GNU readline, once loaded into the test process,
    exports the terminal's size (COLUMNS=80) behind `os.environ`'s back, and
    a child given no `env` inherits it, so its output would wrap at the width
    of whatever terminal runs the tests."""
    if env is None:
        env = log_env()
    return subprocess.run([sys.executable, "-m", "concerto.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def log_env() -> dict[str, str]:
    """This environment as a batch job's would be: no terminal size in it."""
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


@contextlib.contextmanager
def mounted_at(cluster: Path, mnt: Path, *options: str):
    """`concerto mount` of `cluster` at `mnt` (created here), up once its
    ready file says so; stopped with SIGTERM at the end, also on failure.
    Yields the mount's process."""
    mnt.mkdir(exist_ok=True)
    ready = mnt.with_name(mnt.name + ".ready.json")
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "concerto", "mount", "--cluster", str(cluster), str(mnt),
                             "--ready-file", str(ready), *options], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, f"mount exited: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "mount did not come up"
            time.sleep(0.05)
        assert json.loads(ready.read_text())["mountpoint"] == str(mnt.resolve())
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)

