"""The documentation as tests: every command README.md and docs/*.md tell a
user to run is run, in page order, in a scratch directory that sees the
source tree as a clone does.

The pages follow one convention for fenced blocks, which this harness
enforces (a block that says nothing of itself fails the test, so a new
page or command is covered by default):

- ```sh: commands to run. A page's sh blocks run in one bash script,
  ``set -euo pipefail``, with ``.venv/bin`` first on PATH; the first
  failing command fails the page, named with its line.
- ```python: run with the environment's Python at that point of the page.
- ```LANGUAGE file=NAME (python, toml, text...): written to NAME at that
  point of the page, for a later command to use.
- ```sh manual: commands that cannot run here (several hosts, /etc, the
  test suite itself). The prose of its section before the block says so
  visibly, with the reason: it contains "not run by the tests".
- ```toml: must parse (tomllib). Other languages (text, json, ini, yaml,
  c) are shown only.

Whatever a page starts (local clusters, mounts, background jobs) is
stopped when the page ends, also when it fails: the script runs in a
session of its own, which is killed; clusters are taken down by the
directories their ``cluster up`` named; mounts by their mount points.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, log_env

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
MANUAL_SAYS = "not run by the tests"
SHOWN_ONLY = {"text", "json", "ini", "yaml", "c", "toml"}
# Top-level entries of the source tree a page's commands may read; the
# scratch directory links to them, so outputs (results/, concerto-cluster/)
# land in the scratch directory, not the tree.
TREE = [".venv", "Makefile", "README.md", "benches", "crates", "docs", "experiments", "python", "tests", "target",
        "Cargo.toml", "Cargo.lock", "pyproject.toml", "requirements.txt"]


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    info: str  # the fence's info string
    text: str
    before: str  # the prose of its section before the fence

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"

    @property
    def language(self) -> str:
        return self.info.split()[0] if self.info else ""

    @property
    def manual(self) -> bool:
        return "manual" in self.info.split()[1:]

    @property
    def runs(self) -> bool:
        """Run (or written to its file) at its place in the page."""
        return not self.manual and (self.language in ("sh", "python") or self.file is not None)

    @property
    def file(self) -> str | None:
        m = re.search(r"\bfile=(\S+)", self.info)
        return m.group(1) if m else None


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with the prose of its section
    before it (from the last # or ## heading, code left out)."""
    lines = page.read_text().splitlines()
    out: list[Block] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(```+)(.*)$", lines[i])
        if not m:
            if re.match(r"^#{1,2} ", lines[i]):
                prose = []
            prose.append(lines[i])
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(fence)), None)
        assert end is not None, f"{page.relative_to(ROOT)}:{i + 1}: a fenced block is not closed"
        out.append(Block(page, i + 1, info, "\n".join(lines[i + 1:end]) + "\n", " ".join(prose)))
        i = end + 1
    return out


def test_every_block_says_what_it_is() -> None:
    """An untagged block, an unknown language or a manual block without its
    visible reason fails here, so nothing is skipped silently."""
    problems = []
    for page in PAGES:
        for b in blocks(page):
            if b.language not in SHOWN_ONLY | {"sh", "python"}:
                problems.append(f"{b.where}: fence says {b.info!r}: use sh, python, sh manual, or one of "
                                f"{sorted(SHOWN_ONLY)}")
            elif b.manual and MANUAL_SAYS not in b.before.lower():
                problems.append(f"{b.where}: a manual block needs its section's prose before it to say "
                                f"'{MANUAL_SAYS}' and why")
            elif b.language == "toml":
                try:
                    tomllib.loads(b.text)
                except tomllib.TOMLDecodeError as e:
                    problems.append(f"{b.where}: the TOML does not parse: {e}")
    assert not problems, "\n".join(problems)


def script(page: Path) -> str:
    """A page's runnable blocks as one bash script, each announced with its place."""
    parts = ["set -euo pipefail"]
    for b in blocks(page):
        if not b.runs:
            continue
        parts.append(f"echo '### {b.where}' >&2")
        if b.file:
            parts.append(f"cat > {shlex.quote(b.file)} <<'CONCERTO_DOC_EOF'\n{b.text}CONCERTO_DOC_EOF")
        elif b.language == "python":
            parts.append(f"python - <<'CONCERTO_DOC_EOF'\n{b.text}CONCERTO_DOC_EOF")
        else:
            parts.append(b.text)
    return "\n".join(parts) + "\n"


def _started(text: str, scratch: Path) -> tuple[list[Path], list[Path]]:
    """The cluster directories and mount points a page's commands name."""
    clusters, mounts = [scratch / "concerto-cluster"], []
    for line in text.splitlines():
        for m in re.finditer(r"concerto cluster up\b([^&;|]*)", line):
            d = re.search(r"--dir\s+(\S+)", m.group(1))
            if d:
                clusters.append(scratch / d.group(1))
        for m in re.finditer(r"concerto mount\s+(?:--\S+\s+\S+\s+)*(/?[\w./-]+)", line):
            mounts.append(scratch / m.group(1))
    return clusters, mounts


def _clean_up(clusters: list[Path], mounts: list[Path], env: dict[str, str], scratch: Path) -> None:
    for m in mounts:
        if os.path.ismount(m):
            subprocess.run(["fusermount3", "-u", "-z", str(m)], capture_output=True)
            if os.path.ismount(m):
                subprocess.run(["umount", "-l", str(m)], capture_output=True)
    for d in clusters:
        if (d / "cluster.toml").exists() or (d / "netns").exists():
            subprocess.run([str(ROOT / ".venv" / "bin" / "concerto"), "cluster", "down", "--dir", str(d)],
                           capture_output=True, env=env, cwd=scratch, timeout=120)


def run_page(page: Path, tmp_path: Path) -> tuple[int, str, str]:
    """Runs a page's commands in a scratch directory that links to the
    source tree; returns the exit status, the output and the place of the
    last block begun. Whatever the page started is stopped, even on failure."""
    text = script(page)
    scratch = tmp_path / "clone"
    scratch.mkdir()
    for name in TREE:
        if (ROOT / name).exists():
            (scratch / name).symlink_to(ROOT / name)
    env = log_env()
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"
    if os.geteuid() == 0:  # Open MPI refuses root unless told; the CI runs as root
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    clusters, mounts = _started(text, scratch)
    proc = subprocess.Popen(["bash", "-c", text], cwd=scratch, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += "\n(still running after 900 s: killed)"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        _clean_up(clusters, mounts, env, scratch)
    begun = re.findall(r"^### (\S+)$", out, re.M)
    return proc.returncode, out, begun[-1] if begun else str(page)


# The pages that tell a user to run something (the others only show).
RUNNABLE = [p for p in PAGES if any(b.runs for b in blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_documented_commands_run(page: Path, tmp_path: Path) -> None:
    status, out, block = run_page(page, tmp_path)
    assert status == 0, f"{block}: a documented command failed (exit {status}):\n{out[-4000:]}"


@pytest.mark.parametrize("command", [
    "concerto sim run experiments/no-such-scenario.toml --out results/x",  # a file the page reads is gone
    "concerto sim compare experiments/demo.toml --policy fifo,coordinated",  # an option renamed (--policies)
])
def test_a_page_fails_where_its_command_no_longer_works(command: str, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```sh\nconcerto plan transfers --random clients=2,servers=2,density=1,max=1\n```\n\n"
                    f"Then:\n\n```sh\n{command}\n```\n")
    status, out, block = run_page(page, tmp_path)
    assert status != 0 and block == f"{page}:9", (status, block, out[-2000:])
