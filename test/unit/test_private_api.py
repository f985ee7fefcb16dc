"""No product module uses a private name of xDSL or argparse (issue 36, item 3).

A private name (`_operands`, `_impl_dict`, `_option_string_actions`) is not
API: it changes without notice between releases, and code reaching it
patches over a missing public API (docs/upstream-reports.md, 9-11, propose
those APIs upstream).  This scans the product's modules (not the tests) for:

* an attribute `x._name` where `_name` is a private name xDSL or argparse
  defines (a method, a class or dataclass field, an attribute its code
  assigns), unless `x` is `self`, `cls` or `super()`: a subclass's use of
  its base class's protected members (the upstream parser subclasses,
  `KernelInterpreter._run_op`) is the subclass contract, as ruff's SLF001
  sees it;
* such a name as a string where Python reaches attributes by name:
  `getattr`/`setattr`/`hasattr`/`delattr`'s second argument, or a subscript
  (`op.__dict__["_operands"]`);
* `from xdsl... import _name` / `from argparse import _name`;
* a `noqa: SLF001` comment (each silenced such a use).

The product's own private names that xDSL happens to define too are told
apart by file in OWN_NAMES, each with the reason.
"""

from __future__ import annotations

import argparse
import ast
from functools import lru_cache
from pathlib import Path

import xdsl

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cli", "compile", "runtime", "nem_dialect", "frontends", "passes", "devices")
GENERATED = {"nem_bytecode_generated.py"}  # flatc's output

OWN_NAMES = {
    ("cli/nem/cli/nemb_tool.py", "_verify"): "NemOptMain's own method (OptMain), not xDSL's",
}
_BY_NAME = ("getattr", "setattr", "hasattr", "delattr")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and len(name) > 1


def _defined_private_names(paths: list[Path]) -> set[str]:
    """The private names the modules at `paths` define: functions, classes,
    assigned names and attributes."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return {n for n in names if _private(n)}


@lru_cache(maxsize=1)
def foreign_private_names() -> frozenset[str]:
    """Every private name xDSL (the installed package) or argparse defines."""
    paths = [*Path(xdsl.__file__).parent.rglob("*.py"), Path(argparse.__file__)]
    return frozenset(_defined_private_names(paths))


def _own_receiver(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def private_uses(source: str, foreign: frozenset[str]) -> list[tuple[int, str]]:
    """(line, name) of each use of a name of `foreign` in `source`, as the
    module doc says."""
    found: list[tuple[int, str]] = []

    def named(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in foreign and _private(node.value):
                found.append((node.lineno, node.value))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if _private(node.attr) and node.attr in foreign and not _own_receiver(node.value):
                found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in _BY_NAME and len(node.args) > 1:
                named(node.args[1])
        elif isinstance(node, ast.Subscript):
            named(node.slice)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in ("xdsl", "argparse"):
                found += [(node.lineno, a.name) for a in node.names if _private(a.name)]
    for i, line in enumerate(source.splitlines(), 1):
        if "noqa: SLF001" in line:
            found.append((i, "noqa: SLF001"))
    return found


def _product_files() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name not in GENERATED
    ]


def test_no_product_module_uses_a_private_xdsl_or_argparse_name() -> None:
    foreign = foreign_private_names()
    bad = []
    for path in _product_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, name in private_uses(path.read_text(encoding="utf-8"), foreign):
            if (rel, name) not in OWN_NAMES:
                bad.append(f"{rel}:{line}: {name}")
    assert not bad, "private xDSL/argparse names used (issue 36):\n" + "\n".join(bad)


def test_own_names_are_still_needed() -> None:
    """Each OWN_NAMES entry still matches a use (a stale one would hide a
    later private use in that file)."""
    foreign = foreign_private_names()
    for rel, name in OWN_NAMES:
        uses = private_uses((ROOT / rel).read_text(encoding="utf-8"), foreign)
        assert name in {n for _, n in uses}, (rel, name)


def test_the_scan_sees_each_form_of_private_use() -> None:
    """The forms the project used before issue 36 item 3 are each found; a
    subclass's own use and public names are not."""
    foreign = foreign_private_names()
    source = """
from xdsl.interpreter import _InterpreterFunctionImpls
impls = interp._impls._impl_dict
table = parser._option_string_actions  # noqa: SLF001
first._prev_use = use
d = op.__dict__
d["_operands"] = operands
getattr(op, "_successors")
class P(Parser):
    def f(self):
        return self._current_token, super()._parse_token(1, "")
values = op.operands
"""
    assert sorted(private_uses(source, foreign)) == [
        (2, "_InterpreterFunctionImpls"),
        (3, "_impl_dict"),
        (3, "_impls"),
        (4, "_option_string_actions"),
        (4, "noqa: SLF001"),
        (5, "_prev_use"),
        (7, "_operands"),
        (8, "_successors"),
    ]


def own_private_imports(source: str) -> list[tuple[int, str]]:
    """(line, name) of each `from nem... import _name` in `source`: a module
    reaching into another's private names (issue 36 found `_const_bound`,
    `_replace_in`, `_apply` shared that way in nem.compile).  A name two
    modules share is public API of the one that defines it."""
    return [
        (node.lineno, a.name)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "nem"
        for a in node.names
        if _private(a.name)
    ]


def test_no_product_module_imports_another_modules_private_name() -> None:
    bad = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {name}"
        for path in _product_files()
        for line, name in own_private_imports(path.read_text(encoding="utf-8"))
    ]
    assert not bad, "private names imported across modules (issue 36):\n" + "\n".join(bad)


def test_the_import_scan_sees_a_private_name() -> None:
    source = "from nem.compile.fusion import body, _maps\nfrom nem.dialect import ops\n"
    assert own_private_imports(source) == [(1, "_maps")]
