"""`make lint` (.ci/lint), which CI runs before the tests: each of its steps
fails on a planted mistake and passes the same code without it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ROOT

LINT = ROOT / ".ci" / "lint"


def lint(*args: str | Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, RUFF=str(ROOT / ".venv" / "bin" / "ruff"))
    env["PATH"] = f"{Path.home() / '.cargo' / 'bin'}:{env['PATH']}"
    return subprocess.run(["bash", str(LINT), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=600)


def crate(directory: Path, source: str) -> Path:
    """A one-file library crate with no dependencies; its manifest."""
    (directory / "src").mkdir(parents=True)
    (directory / "Cargo.toml").write_text('[package]\nname = "planted"\nversion = "0.1.0"\nedition = "2021"\n')
    (directory / "src" / "lib.rs").write_text(source)
    return directory / "Cargo.toml"


def test_ruff_step_fails_on_an_unused_import_and_passes_without_it(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\nprint('x')\n")
    r = lint("ruff", bad)
    assert r.returncode != 0 and "F401" in r.stdout + r.stderr
    bad.write_text("print('x')\n")
    assert lint("ruff", bad).returncode == 0


def test_rustfmt_step_fails_on_unformatted_code_and_passes_formatted(tmp_path):
    manifest = crate(tmp_path / "fmt", "pub fn f( )->u8{1}\n")
    r = lint("rustfmt", manifest)
    assert r.returncode != 0 and "lib.rs" in r.stdout + r.stderr
    (tmp_path / "fmt" / "src" / "lib.rs").write_text("pub fn f() -> u8 {\n    1\n}\n")
    assert lint("rustfmt", manifest).returncode == 0


def test_clippy_step_turns_a_warning_into_a_failure(tmp_path):
    manifest = crate(tmp_path / "clippy", "pub fn f(x: u8) -> u8 {\n    return x;\n}\n")
    r = lint("clippy", manifest)
    assert r.returncode != 0 and "needless_return" in r.stdout + r.stderr
    (tmp_path / "clippy" / "src" / "lib.rs").write_text("pub fn f(x: u8) -> u8 {\n    x\n}\n")
    assert lint("clippy", manifest).returncode == 0, lint("clippy", manifest).stderr


def test_length_step_fails_on_a_function_over_80_lines_of_code_but_not_in_tests(tmp_path):
    def function(name: str, lines: int) -> str:
        body = "".join(f"    let x{i} = {i};\n" for i in range(lines - 2))
        return f"pub fn {name}() -> u32 {{\n{body}    x0\n}}\n"

    # clippy counts the lines of code between the braces.
    manifest = crate(tmp_path / "long", function("f", 82))
    r = lint("length", manifest)
    assert r.returncode != 0 and "too_many_lines" in r.stdout + r.stderr, r.stderr
    (tmp_path / "long" / "src" / "lib.rs").write_text(
        function("f", 80) + "#[cfg(test)]\nmod tests {\n" + function("table", 120) + "}\n")
    r = lint("length", manifest)
    assert r.returncode == 0, r.stderr
