"""The type stub of ``concerto._native`` (python/concerto/_native.pyi) names
exactly what the module exports, with the same parameters: a function added,
removed or changed on the Rust side without its stub fails here."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from concerto import _native

STUB = Path(__file__).resolve().parents[1] / "python" / "concerto" / "_native.pyi"


def _stub() -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
    """The stub's functions (name -> parameter names) and classes (name ->
    member name -> parameter names, without self)."""
    tree = ast.parse(STUB.read_text())

    def params(f: ast.FunctionDef) -> list[str]:
        return [a.arg for a in f.args.args if a.arg != "self"]

    functions = {n.name: params(n) for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: {m.name: params(m) for m in n.body if isinstance(m, ast.FunctionDef)}
               for n in tree.body if isinstance(n, ast.ClassDef)}
    return functions, classes


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
