"""Experiment files: sweep expansion and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from concerto import ConfigError
from concerto.sweep import Point, expand, load_experiment, policy_override, toml_literal


def test_cartesian_product_and_zipped_keys() -> None:
    pts = expand({"a": [1, 2], "b,c": [[3, "x"], [4, "y"]]}, n_apps=1, where="sweep")
    assert [p.params for p in pts] == [
        {"a": 1, "b": 3, "c": "x"}, {"a": 1, "b": 4, "c": "y"},
        {"a": 2, "b": 3, "c": "x"}, {"a": 2, "b": 4, "c": "y"},
    ]


def test_wildcard_applies_to_every_app() -> None:
    (p,) = expand({"apps[*].processes": [8]}, n_apps=3, where="sweep")
    assert p.params == {"apps[0].processes": 8, "apps[1].processes": 8, "apps[2].processes": 8}


def test_policy_parameters_only_reach_policies_that_take_them() -> None:
    p = Point({"policy.window": "250ms", "cluster.servers": 4})
    assert p.overrides("fifo") == ["cluster.servers=4", "policy.kind=fifo"]
    assert p.overrides("coordinated") == ['policy.window="250ms"', "cluster.servers=4", "policy.kind=coordinated"]
    assert p.key("fifo") == Point({"policy.window": "1s", "cluster.servers": 4}).key("fifo")


def test_sfq_parameters_reach_the_sfq_policies() -> None:
    # Sweeping L or D for SFQ(D)+ must run different points, not repeat one.
    p = Point({"policy.large_slots": 3, "policy.depth": 8})
    assert p.overrides("sfq-d-plus") == ["policy.large_slots=3", "policy.depth=8", "policy.kind=sfq-d-plus"]
    assert p.overrides("sfq-d") == ["policy.depth=8", "policy.kind=sfq-d"]
    assert p.key("sfq-d-plus") != Point({"policy.large_slots": 5, "policy.depth": 8}).key("sfq-d-plus")


def test_bad_sweeps_are_reported() -> None:
    with pytest.raises(ConfigError, match="non-empty list"):
        expand({"a": 3}, n_apps=1, where="experiment.sweep")
    with pytest.raises(ConfigError, match="list of 2 items"):
        expand({"a,b": [[1]]}, n_apps=1, where="experiment.sweep")
    with pytest.raises(ConfigError, match="sweep value"):
        toml_literal(None)
    with pytest.raises(ConfigError, match="as a key"):
        toml_literal({"a b": 1})


def test_override_values_are_written_by_the_toml_library() -> None:
    # Quotes and backslashes survive (a hand-written writer broke on them).
    assert toml_literal('say "hi" \\ now') == '"say \\"hi\\" \\\\ now"'
    assert toml_literal([1, 2.5, True]) == "[\n    1,\n    2.5,\n    true,\n]"
    assert policy_override("sfq-d-plus", {"large_slots": 5, "note": 'a"b'}) == \
        'policy={ kind = "sfq-d-plus", large_slots = 5, note = "a\\"b" }'


def test_experiment_files_load(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1] / "experiments" / "coordination"
    for f in root.glob("*.toml"):
        full, quick = load_experiment(f), load_experiment(f, quick=True)
        assert len(quick.points) <= len(full.points)
        for pt in quick.points:  # every point is a valid scenario
            for policy in quick.policies:
                quick.source.with_overrides(*pt.overrides(policy)).config()
    bad = tmp_path / "bad.toml"
    bad.write_text("[experiment]\nid = 'x'\n")
    with pytest.raises(ConfigError, match="needs an \\[experiment\\] table and a \\[scenario\\] table"):
        load_experiment(bad)
