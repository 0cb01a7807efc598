"""The type stub of ``concerto._native`` (python/concerto/_native.pyi) names
exactly what the module exports, with the same parameters: a function added,
removed or changed on the Rust side without its stub fails here."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pytest

from concerto import _native

STUB = Path(__file__).resolve().parents[1] / "python" / "concerto" / "_native.pyi"


def _stub() -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
    """The stub's functions (name -> parameter names) and classes (name ->
    member name -> parameter names, without self)."""
    tree = ast.parse(STUB.read_text())

    def params(f: ast.FunctionDef) -> list[str]:
        return [a.arg for a in f.args.args if a.arg != "self"]

    functions = {n.name: params(n) for n in tree.body if isinstance(n, ast.FunctionDef)}
    shapes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)
              and any(isinstance(b, ast.Name) and (b.id == "TypedDict" or b.id in shapes_before(tree, n)) for b in n.bases)}
    classes = {n.name: {m.name: params(m) for m in n.body if isinstance(m, ast.FunctionDef)}
               for n in tree.body if isinstance(n, ast.ClassDef) and n.name not in shapes}
    return functions, classes


def shapes_before(tree: ast.Module, node: ast.ClassDef) -> set[str]:
    """The TypedDict shapes declared before ``node`` (a shape may extend another); they exist only in the
    stub, for type checkers and the shape checks below, not in the module."""
    names: set[str] = set()
    for n in tree.body:
        if n is node:
            break
        if isinstance(n, ast.ClassDef) and any(isinstance(b, ast.Name) and (b.id == "TypedDict" or b.id in names)
                                                for b in n.bases):
            names.add(n.name)
    return names


def _native_params(obj) -> list[str]:
    sig = obj.__text_signature__ or "()"
    return [p.strip().split("=")[0].lstrip("*") for p in sig.strip("()").split(",")
            if p.strip() and p.strip() not in ("$self", "$cls", "/")]


def test_the_stub_declares_every_export_with_its_parameters() -> None:
    functions, classes = _stub()
    exported = {n for n in dir(_native) if not n.startswith("_")}
    assert exported == set(functions) | set(classes), (exported ^ (set(functions) | set(classes)))
    for name, declared in functions.items():
        assert _native_params(getattr(_native, name)) == declared, name
    for cls, members in classes.items():
        native = getattr(_native, cls)
        public = {n for n, v in vars(native).items() if not n.startswith("_")}
        assert public == set(members) - {"__init__"}, (cls, public ^ (set(members) - {"__init__"}))
        for member, declared in members.items():
            attr = native if member == "__init__" else vars(native)[member]
            if isinstance(attr, type) or callable(attr):
                assert _native_params(attr) == declared, (cls, member)
            else:
                assert declared == [], (cls, member)  # a property


def test_the_stub_is_valid_python_with_no_bodies() -> None:
    tree = ast.parse(STUB.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            assert len(node.body) == 1 and isinstance(node.body[0], ast.Expr), node.name
    assert inspect.getdoc(_native.ConfigError)


GOLDEN = Path(__file__).resolve().parents[1] / "crates" / "concerto-sim" / "tests" / "golden" / "scenarios"


def test_simulator_results_are_objects_of_the_declared_shapes(native_shapes) -> None:
    text = (GOLDEN / "workloads.toml").read_text()
    native_shapes.check(_native.load_scenario(text), "Scenario")
    runset = _native.simulate(text, None, [], 1, 2, None, None)
    native_shapes.check(runset, "RunSet")
    assert runset["seeds"] == [1, 2] and len(runset["runs"]) == 2


def test_client_side_plans_are_objects_of_the_declared_shapes(native_shapes) -> None:
    plan = _native.plan_transfers([[2, 1], [0, 3]], 0, 1, 3, "optimal")
    native_shapes.check(plan, "TransferPlan")
    shown = [s for s in plan["schedules"] if s["steps"] is not None]
    assert [s["name"] for s in shown] == ["optimal"]
    assert sum(len(step) for step in shown[0]["steps"]) == plan["transfers"] == 6
    native_shapes.check(_native.plan_collective("demo:segment=64KiB", 4, 4, 65536, "two-phase"), "CollectivePlan")


def test_fluid_results_are_objects_of_the_declared_shapes(native_shapes) -> None:
    from concerto import demo_iosets

    load = demo_iosets.workload(demo_iosets.QUICK, 100e6)
    ran = _native.fluid_run(json.dumps(load), 'kind = "set10"', *demo_iosets.QUICK.window)
    native_shapes.check(ran, "FluidRun")
    index = {a["name"]: i for i, a in enumerate(load["apps"])}
    phases = [{k: p[k] for k in ("phase", "request_s", "start_s", "end_s", "bytes")} | {"app": index[p["app"]]}
              for p in ran["phases"]]
    for p in phases:
        native_shapes.check(p, "RanPhase")
    native_shapes.check(_native.fluid_phase_metrics(load, phases, *demo_iosets.QUICK.window), "WindowMetrics")
    generator = (Path(__file__).resolve().parents[1] / "experiments" / "iosets" / "periodic_stress_02.toml").read_text()
    outcomes = _native.fluid_measure(generator, "workload", [], 1, ['kind = "set10"', 'kind = "exclusive-fcfs"'],
                                     0.0, 1.0)
    assert len(outcomes) == 2
    for o in outcomes:
        native_shapes.check(o, "RuleOutcome")


def test_profiles_keys_and_presets_are_objects_of_the_declared_shapes(native_shapes, tmp_path) -> None:
    spec = {"sizes": [4096, "64KiB"], "depths": [1, 2], "count": 8, "large_size": "64KiB"}
    native_shapes.check(spec, "ProfileSpec")
    native_shapes.check(_native.profile_device('kind = "hdd"', spec), "Profile")
    probed = _native.profile_directory(tmp_path, 1 << 20, spec)
    native_shapes.check(probed, "ProbedProfile")
    assert probed["probe"]["kind"] == "directory" and probed["probe"]["path"] == str(tmp_path)
    ring, _ = _native.generate_keys()
    ring, _ = _native.issue_key(ring, "alice", 7, 2.0, 1000, [100])
    keys = _native.list_keys(ring)
    for k in keys:
        native_shapes.check(k, "KeyInfo")
    assert {(k["id"], k["role"], k["job"]) for k in keys} >= {("alice", "tenant", 7)}
    native_shapes.check(_native.emulation_preset("hdd"), "EmulationPreset")
    cluster = _native.check_cluster_file('[cluster]\ntimeout = "5s"\n[[servers]]\nid = 0\naddress = "127.0.0.1:7000"\n'
                                         'roles = ["data", "metadata"]\n')
    native_shapes.check(cluster, "ClusterFile")


def test_structures_python_builds_are_read_with_errors_naming_the_key() -> None:
    """What Python hands the module as objects (a profiling sweep, workload phases, a QoS rule) is
    checked by the Rust type it becomes, and an error names the key path inside the argument."""
    with pytest.raises(_native.ConfigError, match=r"profile\.sizes\[1\]: \"x\" does not start with a number"):
        _native.profile_device('kind = "hdd"', {"sizes": [4096, "x"]})
    with pytest.raises(_native.ConfigError, match=r"profile\.bogus: unknown field `bogus`"):
        _native.profile_device('kind = "hdd"', {"bogus": 1})
    with pytest.raises(_native.ConfigError, match=r"phases\[0\]\.start_s: .*real number, not str"):
        _native.fluid_phase_metrics({"bandwidth": 1e9, "apps": []},
                                    [{"app": 0, "phase": 0, "request_s": 0, "start_s": "soon", "end_s": 1, "bytes": 1}],
                                    0.0, 1.0)
    assert _native.check_qos_rule({"name": "r", "job": 1, "op": "read", "bandwidth": "10MB/s"}) is None
    field, message = _native.check_qos_rule({"name": "r", "job": 1, "bogus": 1})
    assert field == "bogus" and "unknown field" in message
