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


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def pytest_report_header(config) -> str:
    """The host's load as the run begins: a quiet_machine test's figures mean
    something only beside it."""
    return f"host: {_load()}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    terminalreporter.write_line(f"host at the end: {_load()}")


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



class NativeShapes:
    """The TypedDicts of ``python/concerto/_native.pyi``: the one schema of
    what ``concerto._native`` returns. ``check(obj, "Stat")`` asserts that
    ``obj`` has every key the shape requires and none it does not declare,
    and follows the fields typed with another shape (``Layout | None``,
    ``list[Arrival] | ServerError``)."""

    def __init__(self) -> None:
        import ast
        self._ast = ast
        tree = ast.parse((ROOT / "python" / "concerto" / "_native.pyi").read_text())
        self.shapes: dict[str, tuple[dict[str, object], set[str]]] = {}
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            if not ("TypedDict" in bases or any(b in self.shapes for b in bases)):
                continue
            fields: dict[str, object] = {}
            optional: set[str] = set()
            for b in bases:
                if b in self.shapes:
                    fields.update(self.shapes[b][0])
                    optional |= self.shapes[b][1]
            total = not any(k.arg == "total" and isinstance(k.value, ast.Constant) and k.value.value is False
                            for k in node.keywords)
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    ann = item.annotation
                    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) \
                            and ann.value.id == "NotRequired":
                        optional.add(item.target.id)
                        ann = ann.slice
                    elif not total:
                        optional.add(item.target.id)
                    fields[item.target.id] = ann
            self.shapes[node.name] = (fields, optional)

    def check(self, obj: object, shape: str, at: str = "") -> None:
        fields, optional = self.shapes[shape]
        assert isinstance(obj, dict), f"{at or shape}: {type(obj).__name__}, not a {shape}"
        missing = set(fields) - optional - set(obj)
        extra = set(obj) - set(fields)
        assert not missing and not extra, f"{at or shape}: {shape} lacks {sorted(extra)}, object lacks {sorted(missing)}"
        for key, ann in fields.items():
            if key in obj:
                self._value(obj[key], ann, f"{at or shape}.{key}")

    def _value(self, value: object, ann: object, at: str) -> bool:
        """Checks ``value`` against annotation ``ann`` where a shape is involved; False if it cannot be
        that annotation (so a union tries its next member)."""
        ast = self._ast
        if isinstance(ann, ast.Name) and ann.id in self.shapes:
            if not isinstance(value, dict):
                return False
            self.check(value, ann.id, at)
            return True
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            members = []
            def flat(a):
                if isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr):
                    flat(a.left)
                    flat(a.right)
                else:
                    members.append(a)
            flat(ann)
            if value is None and any(isinstance(m, ast.Constant) and m.value is None for m in members):
                return True
            # A dict matching a shape's keys is that shape (ServerError's one key tells it apart).
            for m in members:
                if isinstance(m, ast.Name) and m.id in self.shapes and isinstance(value, dict):
                    fields, optional = self.shapes[m.id]
                    if set(fields) - optional <= set(value) <= set(fields):
                        return self._value(value, m, at)
            for m in members:
                if not (isinstance(m, ast.Name) and m.id in self.shapes):
                    if self._value(value, m, at):
                        return True
            raise AssertionError(f"{at}: {value!r:.200} is none of {ast.unparse(ann)}")
        if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "list":
            if not isinstance(value, list):
                return False
            for i, v in enumerate(value):
                assert self._value(v, ann.slice, f"{at}[{i}]"), f"{at}[{i}]: not a {ast.unparse(ann.slice)}"
            return True
        if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "dict":
            if not isinstance(value, dict):
                return False
            _, item = ann.slice.elts
            for k, v in value.items():
                assert self._value(v, item, f"{at}[{k!r}]"), f"{at}[{k!r}]: not a {ast.unparse(item)}"
            return True
        return self._plain(value, ann)

    def _plain(self, value: object, ann: object) -> bool:
        ast = self._ast
        kinds = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}
        if isinstance(ann, ast.Name) and ann.id in kinds:
            return isinstance(value, kinds[ann.id]) and (ann.id == "bool" or not isinstance(value, bool))
        if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "Literal":
            options = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            return value in [o.value for o in options]
        return True  # Any, and what the schema leaves to the Rust type's documentation


@pytest.fixture(scope="session")
def native_shapes() -> NativeShapes:
    return NativeShapes()
