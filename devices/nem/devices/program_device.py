"""The target device of a program and the Device Validity Rule (DEV-13).

The target is `--device NAME` when given (it overrides the directive, with a
remark), else the program's `device` directive: `device "file.nem"` (path
relative to the program, then `-I` dirs, then the shipped devices),
`device NAME` (a device made visible by the program's includes, DEV-20) or an
inline `device NAME { ... }` block.  No directive and no option: the program
is device-agnostic and only the device-independent checks run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nem.analysis.ir_walk import ops_of
from nem.devices.device_resolver import (
    resolve_device,
    resolve_device_file,
    scope_for_document,
    shipped_devices_dir,
)
from nem.dialect.device_model import Device, DeviceDecl
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc, error, fail
from nem.dialect.family_model import VariantRef
from nem.dialect.operand_binding import match_families
from nem.dialect.ops import ComputeOp, ProgramOp

if TYPE_CHECKING:
    from nem.frontends.nem_text.lexer import TokenStream


def program_device(
    prog: ProgramOp, file: str, include_dirs: Sequence[str] = (), override: str | None = None
) -> Device | None:
    from nem.devices.device_lookup import find_device
    from nem.frontends.nem_text.config_parser import ConfigDocument

    loc = SourceLoc.of(prog)
    includes = tuple(i.data for i in prog.includes.data) if prog.includes else ()
    include_locs = _include_locs(file, len(includes), loc)
    kind = prog.device_kind.data if prog.device_kind is not None else None
    if kind not in ("name", "inline") and includes:
        # the program's own includes are part of the program whatever its
        # directive: a missing, broken or circular include is an error (issue 10)
        scope_for_document(ConfigDocument(file, includes, (), (), include_locs), include_dirs)
    if override:
        try:
            return find_device(override, include_dirs, None)
        except NemDiagnosticError as e:  # the command line's --device names it
            for d in e.diagnostics:
                if d.loc is None:
                    d.message = f"--device {override}: {d.message}"
            raise
    if kind is None:
        return None
    assert prog.device is not None  # ProgramOp.verify_: set with device_kind
    value = prog.device.data
    if kind == "file":
        base = Path(file).parent
        for folder in [base, *map(Path, include_dirs), shipped_devices_dir()]:
            if (folder / value).is_file():
                return resolve_device_file(folder / value, None, include_dirs, loc)
        raise fail(
            f'device file "{value}" not found next to the program, in -I '
            "directories or among the shipped devices",
            loc,
            "DEV-20",
            'name a .nem device file, e.g. device "npm_lite.nem"',
        )
    if kind == "name":
        scope = scope_for_document(
            ConfigDocument(file, includes, (), (), include_locs), include_dirs
        )
        if value not in scope.devices:
            raise fail(
                f"device '{value}' is not defined by the program's includes",
                loc,
                "DEV-20",
                f'add include "{value}.nem" (or the file that defines it)',
            )
        return resolve_device(scope, value, loc)
    decl = _inline_device(file, value, loc)
    doc_file = file
    if decl.loc is not None and decl.loc.file != file:
        # a program whose text is not at hand (bytecode, whose debug section
        # names the source): the device is a declaration of that source, and
        # its includes are also looked up next to `file`
        doc_file, include_dirs = decl.loc.file, (str(Path(file).parent), *include_dirs)
    doc = ConfigDocument(doc_file, includes, (), (decl,), include_locs)
    scope = scope_for_document(doc, include_dirs)
    return resolve_device(scope, decl.name, loc)


def _inline_device(file: str, canonical: str, loc: SourceLoc | None) -> DeviceDecl:
    """The inline `device NAME { ... }` of a program, with the locations of
    the program's text (issue 10: errors resolving it are reported on the
    device's own lines).  It is parsed again from the registered source at
    the directive's location; when that text is not known (a program read
    from MLIR), from the canonical text kept in the IR, every location then
    being the directive's."""
    from nem.dialect.diagnostics import source_start, source_text
    from nem.frontends.nem_text.config_parser import parse_config_document, parse_device_config
    from nem.frontends.nem_text.cursor import TokenCursor
    from nem.frontends.nem_text.lexer import TokenStream

    text = source_text(file)
    if text is not None and loc is not None:
        # the directive is in the file's head: lexed up to the end of the block only
        tokens = TokenStream(text, file, source_start(file))
        try:
            start = _token_at(tokens, loc)
        except NemDiagnosticError:  # not .nem text (a program read from MLIR)
            start = None
        if start is not None:
            return parse_device_config(TokenCursor(tokens, file, start))
    pseudo = f"{file} (inline device)"
    try:
        decl = parse_config_document(canonical, pseudo).devices[-1]
    except NemDiagnosticError as e:
        raise NemDiagnosticError([_relocated(d, pseudo, loc) for d in e.diagnostics]) from None
    return _relocate_decl(decl, pseudo, loc)


def _include_locs(
    file: str, count: int, fallback: SourceLoc | None
) -> tuple[SourceLoc | None, ...]:
    """Where the program's `count` includes are written: the `include`
    keywords at the top of its registered source text (the IR keeps only the
    paths).  `fallback` (the program's location) when the text is not known,
    e.g. for a program read from MLIR."""
    from nem.dialect.diagnostics import source_start, source_text
    from nem.frontends.nem_text.lexer import STRING, TokenStream

    if count == 0:
        return ()
    text = source_text(file)
    locs: list[SourceLoc] = []
    if text is not None:
        tokens = TokenStream(text, file, source_start(file))  # the head only: includes first
        i = 0
        try:
            while (
                len(locs) < count and tokens[i].text == "include" and tokens[i + 1].kind == STRING
            ):
                locs.append(SourceLoc(file, tokens[i].line, tokens[i].col))
                i += 2
        except NemDiagnosticError:  # not .nem text (a program read from MLIR)
            locs = []
    return tuple(locs) if len(locs) == count else (fallback,) * count


def _token_at(tokens: TokenStream, loc: SourceLoc) -> int | None:
    """The index of the `device` keyword at `loc` (None if there is none):
    tokens are lexed up to it only."""
    i = 0
    while True:
        t = tokens[i]
        if (t.line, t.col) >= (loc.line, loc.col) or t.kind == "EOF":
            return i if (t.line, t.col) == (loc.line, loc.col) and t.text == "device" else None
        i += 1


def check_device_validity(
    prog: ProgramOp, device: Device, computes: Sequence[ComputeOp] | None = None
) -> list[Diagnostic]:
    """DEV-13/DEV-15: every compute op matches a variant of the effective set;
    the diagnostic names the nearest available variant (DEV-14).  `computes`:
    `prog`'s compute ops in walk order, when the caller has walked it already."""
    diags = []
    for op in ops_of(prog, ComputeOp) if computes is None else computes:
        if not op.SPEC.families:
            continue
        result = match_families(op, device.catalog, device.effective_for_family(op.SPEC.families))
        if result.ok:
            continue
        near = (
            f"; nearest available variant {result.nearest}: " + "; ".join(result.differences)
            if result.nearest
            else "; it offers no variant of " + ", ".join(op.SPEC.families)
        )
        what = (
            f" ({result.unavailable[0]} is not in its effective set)" if result.unavailable else ""
        )
        wanted = result.unavailable[0] if result.unavailable else "the variant"
        fix = (
            f"use a type combination of the device's effective set, or target a device "
            f"that lists {wanted}"
            if result.nearest
            else f"compute it with opcodes the device "
            f"offers, or target a device whose effective set lists {wanted}"
        )
        diags.append(
            error(
                f"{op.opcode} is not valid on device '{device.name}'{what}{near}", op, "DEV-13", fix
            )
        )
    return diags


def _relocated(d: Diagnostic, pseudo: str, loc: SourceLoc | None) -> Diagnostic:
    if d.loc is None or d.loc.file == pseudo:
        d.loc = loc
    d.notes = [_relocated(n, pseudo, loc) for n in d.notes]
    return d


def _relocate_decl(decl: DeviceDecl, pseudo: str, loc: SourceLoc | None) -> DeviceDecl:
    """`decl` (parsed from the canonical text under the name `pseudo`) with
    every location moved to the directive's `loc`."""
    from dataclasses import replace

    def at(x: SourceLoc | None) -> SourceLoc | None:
        return loc if x is None or x.file == pseudo else x

    def refs(rs: tuple[VariantRef, ...]) -> tuple[VariantRef, ...]:
        return tuple(replace(r, loc=at(r.loc)) for r in rs)

    # a field location that moves to an unknown `loc` is left out (`locs.get` is None)
    locs = {k: moved for k, v in decl.locs.items() if (moved := at(v)) is not None}
    return replace(
        decl,
        loc=at(decl.loc),
        locs=locs,
        mandatory=refs(decl.mandatory),
        extended=refs(decl.extended),
    )
