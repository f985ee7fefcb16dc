"""No cache grows with the programs a process handles (issue 36).

A mutable container assigned at module level is process state: a cache there
keeps every program's entries alive, and one keyed by object ids or level
indices can alias a later program's.  Caches belong to an instance (a
scheduler, an interpreter, a source registry) or are a `BoundedCache`.  This
scans the product's modules for module-level empty dicts, lists and sets and
accepts only the registries below, each bounded by something other than the
input (installed plugins, a context-manager stack).  Facts decided once per
class live in `nem.dialect.per_class.PerClass` tables, bounded by the number of
classes; the scan below does not count them, and they refuse keys that are not
classes (test_per_class.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cli", "compile", "runtime", "nem_dialect", "frontends", "passes", "devices")

REGISTRIES = {
    ("task_state.py", "EMPTY"): "the shared empty vector clock, never mutated",
    ("driver.py", "PLUGIN_PASSES"): "the installed pass plugins",
    ("driver.py", "_LOADED"): "the installed pass plugins",
    ("source_files.py", "_reads"): "the stack of open tracking_reads blocks",
}


def _module_containers() -> list[tuple[str, str, int]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
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
