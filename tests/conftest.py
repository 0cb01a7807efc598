from __future__ import annotations

import subprocess
import sys
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
    """Runs the CLI as a user would, in a subprocess (in `env` when given, else this process's environment)."""
    return subprocess.run([sys.executable, "-m", "concerto.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)
