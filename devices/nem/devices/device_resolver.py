"""Loading config files (includes) and resolving devices (inheritance + schema).

Include search order (INC-02 plus decision D-INC-SEARCH): the directory of the
including file, then each `-I` directory in order, then the shipped `devices/`
folder (`nem.devices`), so `include "nem_baseline_1.0.nem"` works anywhere and
the spec's `include "devices/npm_pro.nem"` works with `-I <project root>`.
Includes are transitive (docs/conformance.md Gaps D).  A file reached twice through different
paths is loaded once; a cycle is an error (INC-03).

Resolution follows SPEC "Device Inheritance" rules 1-8 (INH-01..08) and checks
the schema rules on the resolved *target* only, so abstract intermediate
devices such as `nem_baseline_1_0` are fine (docs/conformance.md Gaps B).  Warnings (DEV-03
duplicates, DEV-21 no baseline) are returned on `Device.warnings`.
"""

from __future__ import annotations

import importlib.resources
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from nem.dialect.device_model import Device, DeviceDecl, Topology
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc, error, fail
from nem.dialect.families import Catalog
from nem.dialect.family_model import TypeFamily, VariantRef
from nem.dialect.limits import MAX_DEVICE_COUNT
from nem.dialect.semantics.units import DEVICE_UNITS, PER_ENGINE_UNITS
from nem.dialect.source_files import read_source
from nem.frontends.nem_text.config_parser import ConfigDocument, parse_config_document

SUPPORTED_SPEC_VERSIONS = ("1.0",)
BASELINE_DEVICE = "nem_baseline_1_0"


def shipped_devices_dir() -> Path:
    return Path(str(importlib.resources.files("nem.devices")))


def shipped_device_names() -> tuple[str, ...]:
    """The shipped target devices: each `npm_*.nem` file defines the device of
    its name (the baseline file only the abstract base).  Also provided to the
    IR's builder under the `nem.shipped_devices` entry point (pyproject.toml)."""
    return tuple(sorted(p.stem for p in shipped_devices_dir().glob("npm_*.nem")))


@dataclass
class Scope:
    """Families and devices visible to a file, each keeping its defining `loc`.

    `includes` maps each loaded file to the files it includes directly; it
    decides which devices a declaration can see (INH-08).
    """

    families: dict[str, TypeFamily] = field(default_factory=dict)
    devices: dict[str, DeviceDecl] = field(default_factory=dict)
    includes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _catalog: Catalog | None = field(default=None, repr=False)

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.families.values())
        return self._catalog

    def visible_files(self, file: str) -> set[str]:
        seen, todo = set(), [file]
        while todo:
            f = todo.pop()
            if f not in seen:
                seen.add(f)
                todo.extend(self.includes.get(f, ()))
        return seen

    def add_document(self, doc: ConfigDocument) -> None:
        """Add a parsed document's own declarations (INC-06 on duplicates)."""
        self._catalog = None
        for fam in doc.families:
            _define(self.families, fam.id, fam, "type family")
        for dev in doc.devices:
            _define(self.devices, dev.name, dev, "device")


class _Located(Protocol):
    @property
    def loc(self) -> SourceLoc | None: ...


L = TypeVar("L", bound=_Located)


def _define(table: dict[str, L], key: str, value: L, what: str) -> None:
    if key in table:
        first = table[key].loc
        diag = error(
            f"{what} '{key}' is defined twice",
            value.loc,
            "INC-06",
            "rename one of them or include only one of the defining files",
        )
        if first is not None:
            diag.notes.append(Diagnostic("note", f"first definition of '{key}' is here", first))
        raise NemDiagnosticError([diag])
    table[key] = value


class _Loader:
    """Loads files depth-first; a file's identity is its resolved path, but its
    diagnostics use the path it was first reached by (what the user wrote)."""

    def __init__(self, include_dirs: Iterable[str | Path]) -> None:
        self.search = [Path(d) for d in include_dirs] + [shipped_devices_dir()]
        self.scope = Scope()
        self.names: dict[str, str] = {}  # resolved path -> display name
        self.stack: list[str] = []  # resolved paths being loaded

    def load_file(
        self, path: Path, included: bool, loc: SourceLoc | None = None, lazy: bool = False
    ) -> str:
        key = str(path.resolve())
        if key in self.stack:
            chain = " -> ".join(self.names[k] for k in self.stack[self.stack.index(key) :])
            raise fail(
                f"circular include: {chain} -> {self.names[key]}",
                loc,
                "INC-03",
                "remove one include of the cycle",
            )
        if key in self.names:
            return self.names[key]
        if not included:
            text = read_source(path, "device file", loc, "DEV-20")
            self.load_document(parse_config_document(text, str(path), lazy=lazy), key)
            return str(path)
        try:
            text = read_source(path, "included file", loc, "INC-02")
            doc = parse_config_document(text, str(path), included=True)
            if doc.stopped_at is not None:
                check_program_grammar(text, str(path))
            self.load_document(doc, key)
        except NemDiagnosticError as e:
            raise included_from(e, str(path), loc) from None
        return str(path)

    def load_document(self, doc: ConfigDocument, key: str) -> None:
        self.names[key] = doc.file
        self.stack.append(key)
        base = Path(doc.file).parent
        deps = tuple(
            self.load_file(self.find(inc, base, loc), True, loc)
            for inc, loc in zip(doc.includes, doc.include_locs)
        )
        self.stack.pop()
        self.scope.includes[doc.file] = deps
        self.scope.add_document(doc)

    def find(self, inc: str, base: Path, loc: SourceLoc | None) -> Path:
        """The first regular file of the search path; else the first path that
        exists (a directory, a FIFO: `read_source` refuses it with what it is)."""
        candidates = [d / inc for d in [base, *self.search]]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        for candidate in candidates:
            if os.path.lexists(candidate):
                return candidate
        where = ", ".join(str(d) for d in [base, *self.search])
        raise fail(
            f"included file '{inc}' not found (searched {where})",
            loc,
            "INC-02",
            "fix the path (relative to the including file) or pass -I <dir>",
        )


def check_program_grammar(text: str, file: str) -> None:
    """An included file that is not a config document must be a program
    (INC-05: an included file MUST be a valid document; its program is then
    ignored, D-INC-PROGRAM): parsed for its errors only, so `/etc/passwd` or
    a file of junk is refused at its first bad token (D-INC-VALID)."""
    from nem.frontends.nem_text.parser import ProgramParser

    ProgramParser(text, file).parse_program()


def included_from(e: NemDiagnosticError, file: str, loc: SourceLoc | None) -> NemDiagnosticError:
    """`e` (an error in, or reading, the included `file`) with a note at the
    include that reached it; nested includes add one note per level."""
    for d in e.diagnostics:
        if d.rule is None:  # the file is not UTF-8 (decode_source)
            d.rule = "INC-05"
        if loc is not None and d.loc != loc:
            why = (
                "; an included file must be a valid NEM document (INC-05)"
                if d.loc is not None and d.loc.file == file
                else ""
            )
            d.notes.append(Diagnostic("note", f"'{file}' is included from here{why}", loc))
    return NemDiagnosticError(e.diagnostics)


def load_config_file(
    path: str | Path, include_dirs: Iterable[str | Path] = (), *, lazy: bool = False
) -> Scope:
    """Parse a config document and everything it includes into one `Scope`.
    `lazy`: the document itself lexed only as far as it is parsed, for a
    caller that drops the error of a file that is not one (a program):
    `parse_config_document(lazy=True)`."""
    loader = _Loader(include_dirs)
    loader.load_file(Path(path), included=False, lazy=lazy)
    return loader.scope


def baseline_catalog() -> Catalog:
    """The type families of the shipped `nem_baseline_1.0.nem`: the provider
    behind the `nem.baseline_catalog` entry point that
    `nem.dialect.verifier.baseline_catalog` loads (and caches)."""
    return load_config_file(shipped_devices_dir() / "nem_baseline_1.0.nem").catalog


def scope_for_document(doc: ConfigDocument, include_dirs: Iterable[str | Path] = ()) -> Scope:
    """The scope of an already-parsed document, e.g. a program's includes plus its
    inline device (`doc.file` must be the program's path, for relative includes)."""
    loader = _Loader(include_dirs)
    loader.load_document(doc, str(Path(doc.file).resolve()))
    return loader.scope


def resolve_device_file(
    path: str | Path,
    name: str | None = None,
    include_dirs: Iterable[str | Path] = (),
    loc: SourceLoc | None = None,
) -> Device:
    """The target of a program's `device "file.nem"` directive (DEV-20).

    Without `name`, the file's default device is chosen (decision D-DEV-FILE):
    the last device defined in that file itself (not in its includes) that no
    other device of the file extends -- for `npm_pro.nem` + an SKU in the same
    file, the SKU.
    """
    p = Path(path)
    if not p.is_file():
        raise fail(
            f"device file '{path}' not found",
            loc,
            "DEV-20",
            "give a path relative to the program file",
        )
    scope = load_config_file(p, include_dirs)
    if name is None:
        own = [d for d in scope.devices.values() if d.loc and d.loc.file == str(p)]
        parents = {d.parent for d in own}
        leaves = [d for d in own if d.name not in parents]
        if not leaves:
            raise fail(
                f"device file '{path}' defines no device",
                loc,
                "DEV-20",
                "name a file that contains a `device NAME { ... }` block",
            )
        name = leaves[-1].name
    return resolve_device(scope, name, loc)


# -- resolution -------------------------------------------------------------------


def _chain(scope: Scope, name: str, loc: SourceLoc | None) -> list[DeviceDecl]:
    """Target first, root last (INH-08: parents defined before, visible, acyclic)."""
    if name not in scope.devices:
        known = ", ".join(sorted(scope.devices)) or "none"
        raise fail(
            f"unknown device '{name}' (visible devices: {known})",
            loc,
            "DEV-20",
            "include the file that defines it",
        )
    chain = [scope.devices[name]]
    while (parent_name := chain[-1].parent) is not None:
        child = chain[-1]
        names = [d.name for d in chain]
        if parent_name in names:
            cycle = " -> ".join(names[names.index(parent_name) :] + [parent_name])
            raise fail(
                f"device {child.name} extends itself through {cycle}"
                if parent_name != child.name
                else f"device {child.name} extends itself",
                child.loc,
                "INH-08",
                "a device must extend a different, earlier device",
            )
        parent = scope.devices.get(parent_name)
        if parent is None or not _defined_before(scope, parent, child):
            why = "is not defined" if parent is None else "is not defined before it"
            raise fail(
                f"parent device '{parent_name}' of {child.name} {why}",
                child.loc,
                "INH-08",
                "define the parent earlier in this file or include its file",
            )
        chain.append(parent)
    return chain


def _defined_before(scope: Scope, parent: DeviceDecl, child: DeviceDecl) -> bool:
    if parent.loc is None or child.loc is None:
        return True
    if parent.loc.file == child.loc.file:
        return parent.loc.line < child.loc.line or (
            parent.loc.line == child.loc.line and parent.loc.col < child.loc.col
        )
    return parent.loc.file in scope.visible_files(child.loc.file)


def resolve_device(scope: Scope, name: str, loc: SourceLoc | None = None) -> Device:
    """Resolve `name` by INH-01..08 and check the schema rules on the result."""
    chain = _chain(scope, name, loc)
    target = chain[0]
    catalog = scope.catalog
    warnings: list[Diagnostic] = []
    topology: Topology | None = None
    topo_locs: dict[str, SourceLoc] = {}
    chars: dict[str, dict[str, int]] = {}
    mandatory: dict[VariantRef, None] = {}
    extended: dict[VariantRef, None] = {}
    for decl in reversed(chain):
        if decl.topology is not None:  # INH-03: replace
            topology, topo_locs = decl.topology, decl.locs
        for unit, keys in decl.unit_characteristics.items():  # INH-05: merge
            chars.setdefault(unit, {}).update(keys)
            if unit == "SEQ" and keys.get("max_active_tokens") == 0:  # D-DEV-TOKENS
                raise fail(
                    f"SEQ.max_active_tokens of {decl.name} is 0: its sequencer could "
                    "hold no token, so no async task could run",
                    decl.locs.get("unit_characteristics.SEQ.max_active_tokens", decl.loc),
                    "DEV-17",
                    "give the number of live tokens the sequencer supports (at least "
                    "1), or leave the key out for no limit",
                )
        for ref in decl.mandatory:  # INH-06: union
            _check_ref(catalog, ref)
            mandatory.setdefault(ref)
        for ref in decl.extended:  # INH-07: union
            _check_ref(catalog, ref)
            extended.setdefault(ref)
    for ref in [r for r in extended if r in mandatory]:  # DEV-02/03
        where = next((r.loc for d in chain for r in d.extended if r == ref), target.loc)
        warnings.append(
            Diagnostic(
                "warning",
                f"{ref} is listed in both opcode.mandatory and "
                f"opcode.extended of {name}; the extended entry is ignored",
                where,
                "DEV-03",
                "remove it from opcode.extended",
            )
        )
        del extended[ref]
    root = chain[-1]
    spec = root.spec_version
    if spec not in SUPPORTED_SPEC_VERSIONS:
        raise fail(
            f'spec_version "{spec}" of {root.name} is not a known NEM revision',
            root.locs.get("spec_version", root.loc),
            "DEV-01",
            f"use one of {', '.join(SUPPORTED_SPEC_VERSIONS)}",
        )
    if topology is None:
        if target.parent is not None:
            raise fail(
                f"device {name} has no topology and its parent {target.parent} is abstract",
                target.loc,
                "INH-04",
                "add a topology { ... } block",
            )
        if name == BASELINE_DEVICE:  # the shipped abstract base, named as a target
            raise fail(
                f"device {name} has no topology: it is the abstract baseline the "
                "shipped devices extend (type families only), not a target",
                target.loc,
                "DEV-07",
                f"target a concrete device: {', '.join(shipped_device_names())}",
            )
        raise fail(
            f"device {name} has no topology", target.loc, "DEV-07", "add a topology { ... } block"
        )
    _check_topology(topology, topo_locs)
    missing = [r for r in catalog.must_refs() if r not in mandatory]
    if not mandatory:
        raise fail(
            f"device {name} has an empty opcode.mandatory",
            target.loc,
            "DEV-08",
            f'extend {BASELINE_DEVICE} (include "nem_baseline_1.0.nem")',
        )
    if missing:
        shown = ", ".join(str(r) for r in missing[:4]) + (" ..." if len(missing) > 4 else "")
        raise fail(
            f"device {name} lacks {len(missing)} MUST variant(s) in opcode.mandatory: {shown}",
            target.loc,
            "DEV-08",
            f'extend {BASELINE_DEVICE} (include "nem_baseline_1.0.nem") or list them',
        )
    if BASELINE_DEVICE not in (d.name for d in chain):
        warnings.append(
            Diagnostic(
                "warning",
                f"device {name} does not extend {BASELINE_DEVICE}",
                target.loc,
                "DEV-21",
                f"write `device {name} extends {BASELINE_DEVICE}`",
            )
        )
    return Device(
        name,
        tuple(d.name for d in chain[1:]),
        spec,
        topology,
        chars,
        tuple(mandatory),
        tuple(extended),
        catalog,
        tuple(warnings),
        target.loc,
    )


def _check_ref(catalog: Catalog, ref: VariantRef) -> None:
    problem = catalog.ref_problem(ref)
    if problem is not None:
        raise fail(
            f"unknown variant {ref}: {problem}",
            ref.loc,
            "DEV-10",
            "use a variant listed with MUST or MAY in the family's conformance block",
        )


def _check_topology(t: Topology, locs: dict[str, SourceLoc]) -> None:
    """DEV-04/05/06/09 on the topology the target actually uses (`locs`: where
    the declaring device wrote its fields)."""
    if t.num_engines < 1:
        raise fail(
            f"num_engines is {t.num_engines}, must be at least 1",
            locs.get("num_engines"),
            "DEV-04",
            "declare num_engines = 1 or more",
        )
    if t.num_engines > MAX_DEVICE_COUNT:
        raise fail(
            f"num_engines is {t.num_engines}, more than the limit of {MAX_DEVICE_COUNT}",
            locs.get("num_engines"),
            "DEV-04",
            f"declare at most {MAX_DEVICE_COUNT} engines (decision D-LIMITS)",
        )
    for block, units, right, other in (
        ("device_units", t.device_units, DEVICE_UNITS, "per_engine"),
        ("per_engine", t.per_engine, PER_ENGINE_UNITS, "device_units"),
    ):
        for unit, count in units.items():
            where = locs.get(f"{block}.{unit}")
            if unit not in right:
                raise fail(
                    f"{unit} is not a {block.replace('_', '-')} unit",
                    where,
                    "DEV-09",
                    f"declare {unit} in {other}",
                )
            if block == "per_engine" and count < 1:
                raise fail(
                    f"per_engine {unit} = {count}, must be at least 1",
                    where,
                    "DEV-04",
                    "leave the unit out, or give it at least one instance",
                )
            if count > MAX_DEVICE_COUNT:
                raise fail(
                    f"{block} {unit} = {count}, more than the limit of {MAX_DEVICE_COUNT}",
                    where,
                    "DEV-04",
                    f"declare at most {MAX_DEVICE_COUNT} instances (decision D-LIMITS)",
                )
    for key, value in (("l2_size_bytes", t.l2_size_bytes), ("l1_size_bytes", t.l1_size_bytes)):
        if value <= 0:
            raise fail(
                f"{key} is {value}, must be greater than 0",
                locs.get(key),
                "DEV-06",
                f"give {key} the level's size in bytes",
            )
