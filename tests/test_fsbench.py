"""`concerto bench fs`: fio and a metadata loop through the mount beside the
local file system, and one shared file written by one and by four
processes. Needs root, /dev/fuse and fio, as CI has."""

from __future__ import annotations

import json

from concerto.fsbench import ROWS
from conftest import concerto


def test_bench_fs_measures_every_row_beside_the_local_file_system(tmp_path):
    # The quick run's figures say nothing; that every row is there, for
    # each file system (and a cluster with MACs on every frame), with
    # Concerto's ratios, is what is checked.
    r = concerto("bench", "fs", "--quick", "--integrity", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "fsbench.json").read_text())
    for fs_name in ("concerto", "local", "concerto-integrity"):
        assert set(result["medians"][fs_name]) == {k for k, _, _ in ROWS}
        assert all(v > 0 for v in result["medians"][fs_name].values())
    assert set(result["ratios"]) == {"local", "concerto-integrity"}
    assert set(result["shared_file"]) == {"write-behind", "write-through"}
    assert all(row["1"] > 0 and row["4"] > 0 for row in result["shared_file"].values())
    assert "x local" in r.stdout and "4 processes" in r.stdout
    # Nothing is left mounted or running.
    assert str(tmp_path) not in open("/proc/self/mounts").read()


def test_bench_fs_names_a_bad_compare_option(tmp_path):
    for bad, says in (("nodir", "--compare nodir: give NAME=DIR"),
                      ("local=/tmp", "the name 'local' is taken"),
                      (f"x={tmp_path / 'missing'}", "is not a directory")):
        r = concerto("bench", "fs", "--compare", bad, "--out", str(tmp_path))
        assert r.returncode == 2 and says in r.stderr, r.stderr
