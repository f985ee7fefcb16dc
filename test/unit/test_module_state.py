"""No cache grows with the programs a process handles (issue 36).

A mutable container assigned at module level is process state: a cache there
keeps every program's entries alive, and one keyed by object ids or level
indices can alias a later program's.  Caches belong to an instance (a
scheduler, an interpreter, a source registry) or are a `BoundedCache`.  This
scans the product's modules for module-level empty dicts, lists and sets and
accepts only the registries below, each bounded by something other than the
input (the installed pass plugins).  Facts decided once per
class live in `nem.dialect.per_class.PerClass` tables, bounded by the number of
classes; the scan below does not count them, and they refuse keys that are not
classes (test_per_class.py).  No function rebinds a module global (a value
scoped to a block is a `contextvars.ContextVar`), a `functools` cache without
a bound memoizes only a function of no argument, and one module pauses the
garbage collector (D-MODULE-STATE).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cli", "compile", "runtime", "nem_dialect", "frontends", "passes", "devices")

REGISTRIES = {
    ("task_state.py", "EMPTY"): "the shared empty vector clock, never mutated",
    ("driver.py", "PLUGIN_PASSES"): "the installed pass plugins",
    ("driver.py", "_LOADED"): "the installed pass plugins",
}


@cache
def _modules(*tops: str) -> list[tuple[Path, ast.Module]]:
    """Each module under `tops` and its syntax tree (parsed once for the tests)."""
    return [
        (path, ast.parse(path.read_text(encoding="utf-8")))
        for top in tops
        for path in sorted((ROOT / top).rglob("*.py"))
    ]


def _module_containers() -> list[tuple[str, str, int]]:
    found = []
    for path, tree in _modules(*PACKAGES):
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target, value = node.target, node.value
            else:
                continue
            empty = (
                (isinstance(value, ast.Dict) and not value.keys)
                or (isinstance(value, (ast.List, ast.Set)) and not value.elts)
                or (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name)
                    and value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict")
                )
            )
            if empty and isinstance(target, ast.Name):
                found.append((path.name, target.id, node.lineno))
    return found


def test_module_level_containers_are_known_registries():
    unknown = [
        f"{file}:{line} {name}"
        for file, name, line in _module_containers()
        if (file, name) not in REGISTRIES
    ]
    assert not unknown, (
        "module-level mutable state (make it an instance attribute or a "
        "BoundedCache): " + ", ".join(unknown)
    )


def test_the_registry_list_has_no_stale_entries():
    present = {(file, name) for file, name, _ in _module_containers()}
    assert set(REGISTRIES) <= present, set(REGISTRIES) - present


def test_no_function_rebinds_a_module_global():
    """A `global` statement makes a module variable process state that every
    caller shares (issue 36 item 4: hunt's worker state, the error limit's
    report, the entry-point universes); a value scoped to a block is a
    `contextvars.ContextVar`, a value loaded once a cached function."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno} global {', '.join(node.names)}"
        for path, tree in _modules(*PACKAGES)
        for node in ast.walk(tree)
        if isinstance(node, ast.Global)
    ]
    assert not found, found


def _name(e: ast.expr) -> str | None:
    """`name` of `name` or `module.name`."""
    return e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None


def _unbounded_cache(decorator: ast.expr) -> bool:
    """`@cache`, `@functools.cache` or `@lru_cache(maxsize=None)`."""
    if isinstance(decorator, ast.Call):
        bound = [k.value for k in decorator.keywords if k.arg == "maxsize"] + decorator.args[:1]
        unbounded = any(isinstance(b, ast.Constant) and b.value is None for b in bound)
        return unbounded and _name(decorator.func) == "lru_cache"
    return _name(decorator) == "cache"


def test_unbounded_function_caches_take_no_argument():
    """A `functools` cache without a bound keeps every argument it was called
    with (and all they reference) for the life of the process; only a
    function of no argument (a fact of the installation, one entry) may have
    one.  Facts per class are `PerClass` tables; anything else has a maxsize."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path, tree in _modules(*PACKAGES)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(_unbounded_cache(d) for d in node.decorator_list)
        and (node.args.args or node.args.posonlyargs or node.args.kwonlyargs)
    ]
    assert not found, found


def test_one_module_pauses_the_garbage_collector():
    """`gc.disable`/`gc.enable` appear in `nem.dialect.gc_pause` only: every
    other pause is a `gc_paused()` scope, which leaves a collector the process
    had disabled as it was (D-RT-GC)."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for top in ("bench", "scripts", *PACKAGES)
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.name != "gc_pause.py" and "gc." in (text := path.read_text(encoding="utf-8"))
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and _name(node.func.value) == "gc"
        and node.func.attr in ("disable", "enable")
    ]
    assert not found, found


def test_one_module_finds_the_bindings_libraries():
    """The compiler's reference run and the runtime's native kernels load
    runtime libraries the MLIR bindings ship; `nem.dialect.mlir_libs` is the
    one place that knows where (`mlir.__path__`), so the two engines cannot
    look in different places (issue 36, one home; D-RT-MLIR-JIT)."""
    found = sorted(
        str(path.relative_to(ROOT))
        for path in (p for top in PACKAGES for p in (ROOT / top).rglob("*.py"))
        if "__path__" in (text := path.read_text(encoding="utf-8"))
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Attribute)
        and node.attr == "__path__"
        and _name(node.value) == "mlir"
    )
    assert found == ["nem_dialect/nem/dialect/mlir_libs.py"], found
