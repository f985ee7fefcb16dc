"""Valid upstream MLIR with ops xDSL 0.74 lacks or reads only in generic
form (D-LOW-UPSTREAM).

xDSL 0.74 defines only some of linalg's named ops: `linalg.pooling_nhwc_max`
/ `_sum`, `linalg.map`, `linalg.div`, `linalg.batch_matmul` and others
are "not registered" there.  Other ops it defines without their custom
syntax (`memref.cast`, `affine.parallel`, `scf.parallel`, ...: "does not
have a custom format").  Upstream MLIR has every one of them, can rewrite
each linalg op into the `linalg.generic` it stands for, and prints any op
in the generic form xDSL reads.  So before xDSL parses the text,
`generalize_upstream_ops`:

1. scans the statements for op names the xDSL context does not know (and
   the named linalg ops that the lowering raises from their generic form:
   NCHW convolutions and pooling, `GENERALIZED_KNOWN`), and for ops it
   knows written in a custom form it does not have (`generic_only`);
2. if there are linalg ones or custom-form ones, parses the text with the
   upstream MLIR 22 bindings (`mlir.ir`; their diagnostics are passed on at
   the file's line:col), applies `transform.structured.generalize` to
   exactly the linalg ones (the transform interpreter), and prints the
   module back with its locations (`loc("FILE":line:col)`), so diagnostics
   and NEM ops still point at the user's source line; in generic form when
   an op needs it;
3. restores the function arguments' names (upstream prints `%arg0`; the
   lowering names DDR buffers after the arguments, D-LOW-BUF).

An unknown op that is not linalg, or one of these ops without the `mlir`
extra, is a located `not supported` diagnostic naming the op and the fix;
never xDSL's "is not registered" or "does not have a custom format".

Step 2 runs in a forked child (`isolation.run_isolated`): upstream MLIR
aborts the process on some invalid input, and that must be a located
diagnostic, not a dead tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from xdsl.context import Context
from xdsl.ir import Operation

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc, fail
from nem.frontends.upstream_dialects.isolation import run_isolated

GENERALIZED_KNOWN = frozenset(
    {
        "linalg.conv_2d_nchw_fchw",
        "linalg.conv_2d_nhwc_fhwc",
        "linalg.pooling_nchw_max",
        # grouped convolutions (D-LOW-GROUPCONV)
        "linalg.conv_2d_nhwgc_gfhwc",
        "linalg.conv_2d_ngchw_gfchw",
        "linalg.conv_2d_ngchw_fgchw",
    }
)
"""Named ops xDSL defines that are raised from their generic form (the
window matcher of `nem.passes.lowering.windows`): generalized when the
bindings are there, else left as they are (escape-hatch tasks)."""

KEPT = frozenset({"linalg.yield", "linalg.index", "linalg.generic"})

_STATEMENT = re.compile(
    r'^[ \t]*(?:%[\w$.#:-]+(?:[ \t]*,[ \t]*%[\w$.#:-]+)*[ \t]*=[ \t]*)?(?P<quote>"?)'
    r"(?P<name>[A-Za-z_][\w$]*\.[\w$.]+)",
    re.M,
)
_FUNC = re.compile(r"func\.func\s+(?:(?:private|public|nested)\s+)?@(?P<name>[\w$.-]+)\s*\(")
_PRINTED_FUNC = re.compile(
    r"^[ \t]*(?:func\.func\s+(?:(?:private|public|nested)\s+)?@(?P<name>"
    r'[\w$.-]+)\s*\(|"func\.func"\(\)[^\n]*?\bsym_name = "(?P<generic>[^"]*)")',
    re.M,
)
_ARG = re.compile(r"%(?P<name>[\w$.-]+)\s*:")
_LOC = re.compile(r'loc\("(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)\)')


def _statements(text: str) -> Iterator[tuple[str, int, bool]]:
    """(op name, offset, in generic form) of every statement that starts a line."""
    for m in _STATEMENT.finditer(text):
        yield m["name"], m.start("name"), bool(m["quote"])


def generic_only(op: type[Operation]) -> bool:
    """Whether xDSL reads `op` only in its generic form (it has no custom
    syntax: `Operation.parse`'s "does not have a custom format")."""
    return op.parse.__func__ is Operation.parse.__func__  # type: ignore[attr-defined]


def _location(text: str, file: str, offset: int, at: tuple[int, int]) -> SourceLoc:
    line = text.count("\n", 0, offset) + 1
    return SourceLoc.in_chunk(file, line, offset - (text.rfind("\n", 0, offset) + 1) + 1, at)


def generalize_upstream_ops(
    ctx: Context,
    text: str,
    file: str,
    custom_found: str | None = None,
    at: tuple[int, int] = (0, 0),
) -> str:
    """`text`, with the linalg ops xDSL lacks (and GENERALIZED_KNOWN ones)
    rewritten into `linalg.generic` by upstream MLIR; unchanged when it has
    none.  `custom_found`: an op xDSL reads only in generic form that xDSL's
    parser met in custom form where the statement scan does not look (not at
    the start of a line).  Raises a located NemDiagnosticError (see the
    module docstring).  `at`: where `text` starts in `file`, as in
    `parse_mlir_checked`; the locations printed back are the file's."""
    unknown: dict[str, int] = {}
    known: dict[str, int] = {}
    custom: dict[str, int] = {}  # generic_only ops written in custom form
    if custom_found is not None:
        m = re.search(rf'(?<!")\b{re.escape(custom_found)}\b', text)
        custom[custom_found] = m.start() if m else 0
    for name, where, generic in _statements(text):
        if name in KEPT or name in unknown or name in known or name in custom:
            continue
        op = ctx.get_optional_op(name)
        if op is None:
            unknown[name] = where
        elif name in GENERALIZED_KNOWN:
            known[name] = where
        elif not generic and generic_only(op):
            custom[name] = where
    for name, where in unknown.items():
        if not name.startswith("linalg."):
            # a transform op: the script `mlir-opt --transform-interpreter` ran
            # is still in the module (it keeps it); interpret it from its own file
            fix = (
                (
                    "the transform script is still in the module: keep it in a file of its own "
                    "and apply it with mlir-opt --transform-preload-library="
                    "transform-library-paths=SCRIPT.mlir --transform-interpreter "
                    "(docs/graph-lowering.md)"
                )
                if name.startswith("transform.")
                else (
                    "lower it upstream first (mlir-opt) into func, memref, affine, scf, "
                    "arith, math or linalg ops"
                )
            )
            raise fail(
                f"not supported: operation '{name}': xDSL 0.74 does not define it and "
                "only linalg ops are rewritten upstream (D-LOW-UPSTREAM)",
                _location(text, file, where, at),
                None,
                fix,
            )
    if not unknown and not known and not custom:
        return text
    try:  # probe: are the bindings installed?  (used in the child, _generalize)
        import mlir.dialects.transform.interpreter  # noqa: F401
    except ImportError:
        if unknown:
            name, where = next(iter(unknown.items()))
            raise fail(
                f"not supported: '{name}' needs the mlir extra: xDSL 0.74 does not define "
                "it and the upstream MLIR bindings that rewrite it into linalg.generic are "
                "not installed (D-LOW-UPSTREAM)",
                _location(text, file, where, at),
                None,
                "pip install 'nem-toolchain[mlir]', or run mlir-opt "
                "--linalg-generalize-named-ops first",
            ) from None
        if custom:
            name, where = next(iter(custom.items()))
            raise fail(
                f"not supported: '{name}' in its custom form needs the mlir extra: xDSL "
                "0.74 reads it only in generic form and the upstream MLIR bindings that "
                "convert it are not installed (D-LOW-UPSTREAM)",
                _location(text, file, where, at),
                None,
                "pip install 'nem-toolchain[mlir]', or write the op in generic "
                "form (mlir-opt --mlir-print-op-generic prints it)",
            ) from None
        return text
    names = sorted({*unknown, *known})
    first = min({**unknown, **known, **custom}.values())
    what = [f"rewriting {', '.join(names)} into linalg.generic"] if names else []
    what += [f"printing {', '.join(sorted(custom))} in generic form"] if custom else []
    out = run_isolated(
        _generalize,
        text,
        file,
        names,
        bool(custom),
        at,
        where=_location(text, file, first, at),
        what=" and ".join(what),
        fix="check the op against upstream MLIR (mlir-opt shows the same failure)",
    )
    escaped = _escape(file)
    out = _PARSED_LOC.sub(lambda m: _loc_in_file(m, escaped, at), out).replace(" loc(unknown)", "")
    return _restore_arg_names(text, out)


_PARSED_LOC = re.compile(r'loc\("-":(?P<line>\d+):(?P<col>\d+)\)')
"""A location upstream gives an op of the text it parsed (named "-")."""


def _loc_in_file(m: re.Match[str], escaped_file: str, at: tuple[int, int]) -> str:
    """The location in the file (line 0: upstream's "no line", kept)."""
    line, col = int(m["line"]), int(m["col"])
    loc = (
        SourceLoc.in_chunk(escaped_file, line, col, at)
        if line
        else SourceLoc(escaped_file, line, col)
    )
    return f'loc("{loc.file}":{loc.line}:{loc.col})'


def _generalize(text: str, file: str, names: list[str], generic: bool, at: tuple[int, int]) -> str:
    """Step 2 of the module docstring, with the upstream bindings: the
    `names` ops generalized, the module printed (in generic form if
    `generic`; `at` places the parser's diagnostics in the file)."""
    from mlir import ir

    with ir.Context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as e:
            raise NemDiagnosticError(
                [_diagnostic(str(d.location), d.message, file, at) for d in e.error_diagnostics]
                or [Diagnostic("error", f"invalid MLIR: {e}", SourceLoc.in_chunk(file, 1, 1, at))]
            ) from None
        if names:
            _apply_generalize(module, names, file, at)
        return str(
            module.operation.get_asm(
                enable_debug_info=True, use_local_scope=True, print_generic_op_form=generic
            )
        )


def _apply_generalize(module: object, names: list[str], file: str, at: tuple[int, int]) -> None:
    """`transform.structured.generalize` on the `names` ops of `module`."""
    from mlir import ir
    from mlir.dialects.transform import interpreter

    script = ir.Module.parse(_script(names))
    try:
        interpreter.apply_named_sequence(
            module.operation,  # type: ignore[attr-defined]
            script.body.operations[0],
            script,
        )
    except ir.MLIRError as e:  # e.g. an op upstream cannot generalize
        raise NemDiagnosticError(
            [_diagnostic(str(d.location), d.message, file, at) for d in e.error_diagnostics]
        ) from None
    except ValueError as e:  # the interpreter's failure: "... at loc(op)" last
        where = list(_LOC.finditer(str(e)))
        raise NemDiagnosticError(
            [
                upstream_diagnostic(
                    where[-1].group(0) if where else "",
                    f"not supported: {', '.join(names)}: "
                    "upstream cannot rewrite it into linalg.generic (not a structured op) "
                    "(D-LOW-UPSTREAM)",
                    file,
                    "lower it upstream first into linalg.generic or loops",
                    at,
                )
            ]
        ) from None


def _script(names: list[str]) -> str:
    ops = ", ".join(f'"{n}"' for n in names)
    return (
        "module attributes {transform.with_named_sequence} {\n"
        "  transform.named_sequence @__transform_main(%root: !transform.any_op "
        "{transform.readonly}) {\n"
        f"    %m = transform.structured.match ops{{[{ops}]}} in %root : "
        "(!transform.any_op) -> !transform.any_op\n"
        "    %g = transform.structured.generalize %m : (!transform.any_op) -> !transform.any_op\n"
        "    transform.yield\n  }\n}\n"
    )


def _escape(file: str) -> str:
    return file.replace("\\", "\\\\").replace('"', '\\"')


def _diagnostic(location: str, message: str, file: str, at: tuple[int, int]) -> Diagnostic:
    """An upstream parser diagnostic at `file:line:col`."""
    return upstream_diagnostic(
        location,
        f"invalid MLIR (upstream parser): {message}",
        file,
        "fix the MLIR at this position",
        at,
    )


def upstream_diagnostic(
    location: str, message: str, file: str, fix: str, at: tuple[int, int] = (0, 0)
) -> Diagnostic:
    """An upstream diagnostic (`str(mlir.ir.Location)`, which calls a parsed
    text "-") at `file:line:col` of the text it was parsed from (which
    starts at `at` in `file`)."""
    loc = upstream_loc(location, file, at) or SourceLoc.in_chunk(file, 1, 1, at)
    return Diagnostic("error", message, loc, fix=fix)


def upstream_loc(location: str, file: str, at: tuple[int, int] = (0, 0)) -> SourceLoc | None:
    """`file:line:col` of an upstream location (`upstream_diagnostic`), None
    for one that names no position (`loc(unknown)`)."""
    m = _LOC.search(location)
    return SourceLoc.in_chunk(file, int(m["line"]), int(m["col"]), at) if m else None


def _param_names(text: str, start: int) -> list[str]:
    """The `%name`s of the parameter list `(%a: T, %b: U ...)` whose `(`
    ends at `start`."""
    depth, i = 1, start
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    args, level, begin = [], 0, start
    for k in range(start, i - 1):
        c = text[k]
        if c in "(<[{":
            level += 1
        elif c in ")>]}":
            level -= 1
        elif c == "," and level == 0:
            args.append(text[begin:k])
            begin = k + 1
    args.append(text[begin : i - 1])
    return [a.group("name") for a in (_ARG.match(x.strip()) for x in args) if a]


def _arg_names(text: str) -> dict[str, list[str]]:
    """Function name -> its argument names, as written."""
    return {m["name"]: _param_names(text, m.end()) for m in _FUNC.finditer(text)}


def _restore_arg_names(original: str, printed: str) -> str:
    """Rename upstream's names of each function's arguments (`%arg0`, ...:
    the header's in custom form, the entry block's `^bb0(...)` in generic
    form) back to the names written; a function runs to the next."""
    names = _arg_names(original)
    pieces: list[str] = []
    pos = 0
    funcs = list(_PRINTED_FUNC.finditer(printed))
    for i, m in enumerate(funcs):
        wanted = names.get(m["name"] or m["generic"])
        end = funcs[i + 1].start() if i + 1 < len(funcs) else len(printed)
        pieces.append(printed[pos : m.start()])
        body = printed[m.start() : end]
        entry = body.find("^bb0(") if m["generic"] else -1
        given = (
            _param_names(body, m.end() - m.start())
            if m["name"]
            else _param_names(body, entry + len("^bb0("))
            if entry >= 0
            else []
        )
        mapping = {g: n for g, n in zip(given, wanted or []) if n != g}
        # the renaming is simultaneous, so a wanted name that upstream gave
        # another argument (`%arg0` written second) is renamed away too; only a
        # wanted name used by something else (an inner value) would clash
        if mapping and not any(
            n not in mapping and re.search(rf"%{re.escape(n)}(?![\w$.-])", body)
            for n in mapping.values()
        ):  # `%a` is not `%arg0`
            body = re.sub(r"%([\w$.-]+)", lambda a: "%" + mapping.get(a[1], a[1]), body)
        pieces.append(body)
        pos = end
    pieces.append(printed[pos:])
    return "".join(pieces)


__all__ = ["generalize_upstream_ops", "GENERALIZED_KNOWN"]
