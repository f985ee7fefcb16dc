"""Valid upstream MLIR with ops xDSL 0.74 lacks (D-LOW-UPSTREAM).

xDSL 0.74 defines only some of linalg's named ops: `linalg.pooling_nhwc_max`
/ `_sum`, `linalg.map`, `linalg.div`, `linalg.batch_matmul` and others
are "not registered" there.  Upstream MLIR has every one of them and can
rewrite each into the `linalg.generic` it stands for.  So before xDSL
parses the text, `generalize_upstream_ops`:

1. scans the statements for op names the xDSL context does not know (and
   the named linalg ops that the lowering raises from their generic form:
   NCHW convolutions and pooling, `GENERALIZED_KNOWN`);
2. if there are linalg ones, parses the text with the upstream MLIR 22
   bindings (`mlir.ir`; their diagnostics are passed on at the file's
   line:col), applies `transform.structured.generalize` to exactly those
   ops (the transform interpreter), and prints the module back with its
   locations (`loc("FILE":line:col)`), so diagnostics and NEM ops still
   point at the user's source line;
3. restores the function arguments' names (upstream prints `%arg0`; the
   lowering names DDR buffers after the arguments, D-LOW-BUF).

An unknown op that is not linalg, or a linalg op without the `mlir` extra,
is a located `not supported` diagnostic naming the op and the fix; never
xDSL's "is not registered".

Step 2 runs in a forked child (`isolation.run_isolated`): upstream MLIR
aborts the process on some invalid input, and that must be a located
diagnostic, not a dead tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from xdsl.context import Context

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc, fail
from nem.frontends.upstream_dialects.isolation import run_isolated

GENERALIZED_KNOWN = frozenset({
    "linalg.conv_2d_nchw_fchw", "linalg.conv_2d_nhwc_fhwc", "linalg.pooling_nchw_max",
    # grouped convolutions (D-LOW-GROUPCONV)
    "linalg.conv_2d_nhwgc_gfhwc", "linalg.conv_2d_ngchw_gfchw", "linalg.conv_2d_ngchw_fgchw"})
"""Named ops xDSL defines that are raised from their generic form (the
window matcher of `nem.passes.lowering.windows`): generalized when the
bindings are there, else left as they are (escape-hatch tasks)."""

KEPT = frozenset({"linalg.yield", "linalg.index", "linalg.generic"})

_STATEMENT = re.compile(
    r'^[ \t]*(?:%[\w$.#:-]+(?:[ \t]*,[ \t]*%[\w$.#:-]+)*[ \t]*=[ \t]*)?"?'
    r'(?P<name>[A-Za-z_][\w$]*\.[\w$.]+)', re.M)
_FUNC = re.compile(r'func\.func\s+(?:(?:private|public|nested)\s+)?@(?P<name>[\w$.-]+)\s*\(')
_ARG = re.compile(r'%(?P<name>[\w$.-]+)\s*:')
_LOC = re.compile(r'loc\("(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)\)')


def _statements(text: str) -> Iterator[tuple[str, int]]:
    """(op name, offset) of every statement that starts a line."""
    for m in _STATEMENT.finditer(text):
        yield m["name"], m.start("name")


def _location(text: str, file: str, offset: int) -> SourceLoc:
    line = text.count("\n", 0, offset) + 1
    return SourceLoc(file, line, offset - (text.rfind("\n", 0, offset) + 1) + 1)


def generalize_upstream_ops(ctx: Context, text: str, file: str) -> str:
    """`text`, with the linalg ops xDSL lacks (and GENERALIZED_KNOWN ones)
    rewritten into `linalg.generic` by upstream MLIR; unchanged when it has
    none.  Raises a located NemDiagnosticError (see the module docstring)."""
    unknown: dict[str, int] = {}
    known: dict[str, int] = {}
    for name, at in _statements(text):
        if name in KEPT or name in unknown or name in known:
            continue
        if ctx.get_optional_op(name) is None:
            unknown[name] = at
        elif name in GENERALIZED_KNOWN:
            known[name] = at
    for name, at in unknown.items():
        if not name.startswith("linalg."):
            # a transform op: the script `mlir-opt --transform-interpreter` ran
            # is still in the module (it keeps it); interpret it from its own file
            fix = ("the transform script is still in the module: keep it in a file of its own "
                   "and apply it with mlir-opt --transform-preload-library="
                   "transform-library-paths=SCRIPT.mlir --transform-interpreter "
                   "(docs/graph-lowering.md)") if name.startswith("transform.") else \
                ("lower it upstream first (mlir-opt) into func, memref, affine, scf, "
                 "arith, math or linalg ops")
            raise fail(f"not supported: operation '{name}': xDSL 0.74 does not define it and "
                       "only linalg ops are rewritten upstream (D-LOW-UPSTREAM)",
                       _location(text, file, at), None, fix)
    if not unknown and not known:
        return text
    try:    # probe: are the bindings installed?  (used in the child, _generalize)
        import mlir.dialects.transform.interpreter  # noqa: F401
    except ImportError:
        if not unknown:
            return text
        name, at = next(iter(unknown.items()))
        raise fail(f"not supported: '{name}' needs the mlir extra: xDSL 0.74 does not define "
                   "it and the upstream MLIR bindings that rewrite it into linalg.generic are not "
                   "installed (D-LOW-UPSTREAM)", _location(text, file, at), None,
                   "pip install 'nem-toolchain[mlir]', or run mlir-opt "
                   "--linalg-generalize-named-ops first") from None
    names = sorted({*unknown, *known})
    first = min({**unknown, **known}.values())
    out = run_isolated(_generalize, text, file, names, where=_location(text, file, first),
                       what=f"rewriting {', '.join(names)} into linalg.generic",
                       fix="check the op's attributes and body against upstream MLIR "
                       "(mlir-opt --linalg-generalize-named-ops shows the same failure)")
    out = out.replace('loc("-":', f'loc("{_escape(file)}":').replace(" loc(unknown)", "")
    return _restore_arg_names(text, out)


def _generalize(text: str, file: str, names: list[str]) -> str:
    """Step 2 of the module docstring, with the upstream bindings."""
    from mlir import ir
    from mlir.dialects.transform import interpreter

    with ir.Context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as e:
            raise NemDiagnosticError([_diagnostic(str(d.location), d.message, file)
                                      for d in e.error_diagnostics] or [Diagnostic(
                                          "error", f"invalid MLIR: {e}", SourceLoc(file, 1, 1))]
                                     ) from None
        script = ir.Module.parse(_script(names))
        try:
            interpreter.apply_named_sequence(module.operation, script.body.operations[0], script)
        except ir.MLIRError as e:   # e.g. an op upstream cannot generalize
            raise NemDiagnosticError([_diagnostic(str(d.location), d.message, file)
                                      for d in e.error_diagnostics]) from None
        except ValueError as e:     # the interpreter's failure: "... at loc(op)" last
            where = list(_LOC.finditer(str(e)))
            raise NemDiagnosticError([upstream_diagnostic(
                where[-1].group(0) if where else "", f"not supported: {', '.join(names)}: "
                "upstream cannot rewrite it into linalg.generic (not a structured op) "
                "(D-LOW-UPSTREAM)", file,
                "lower it upstream first into linalg.generic or loops")]) from None
        return str(module.operation.get_asm(enable_debug_info=True, use_local_scope=True))


def _script(names: list[str]) -> str:
    ops = ", ".join(f'"{n}"' for n in names)
    return (
        "module attributes {transform.with_named_sequence} {\n"
        "  transform.named_sequence @__transform_main(%root: !transform.any_op "
        "{transform.readonly}) {\n"
        f"    %m = transform.structured.match ops{{[{ops}]}} in %root : "
        "(!transform.any_op) -> !transform.any_op\n"
        "    %g = transform.structured.generalize %m : (!transform.any_op) -> !transform.any_op\n"
        "    transform.yield\n  }\n}\n")


def _escape(file: str) -> str:
    return file.replace("\\", "\\\\").replace('"', '\\"')


def _diagnostic(location: str, message: str, file: str) -> Diagnostic:
    """An upstream parser diagnostic at `file:line:col`."""
    return upstream_diagnostic(location, f"invalid MLIR (upstream parser): {message}", file,
                               "fix the MLIR at this position")


def upstream_diagnostic(location: str, message: str, file: str, fix: str) -> Diagnostic:
    """An upstream diagnostic (`str(mlir.ir.Location)`, which calls a parsed
    text "-") at `file:line:col` of the text it was parsed from."""
    m = _LOC.search(location)
    loc = SourceLoc(file, int(m["line"]), int(m["col"])) if m else SourceLoc(file, 1, 1)
    return Diagnostic("error", message, loc, fix=fix)


def _arg_names(text: str) -> dict[str, list[str]]:
    """Function name -> its argument names, as written."""
    out: dict[str, list[str]] = {}
    for m in _FUNC.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        args, level, start = [], 0, m.end()
        for k in range(m.end(), i - 1):
            c = text[k]
            if c in "(<[{":
                level += 1
            elif c in ")>]}":
                level -= 1
            elif c == "," and level == 0:
                args.append(text[start:k])
                start = k + 1
        args.append(text[start:i - 1])
        names = [a.group("name") for a in (_ARG.match(x.strip()) for x in args) if a]
        out[m["name"]] = names
    return out


def _restore_arg_names(original: str, printed: str) -> str:
    """Rename upstream's `%argN` of each function back to the names written."""
    names = _arg_names(original)
    pieces: list[str] = []
    pos = 0
    for m in _FUNC.finditer(printed):
        wanted = names.get(m["name"])
        end = printed.find("\n  }", m.end())
        end = len(printed) if end < 0 else end
        pieces.append(printed[pos:m.start()])
        body = printed[m.start():end]
        if wanted:
            mapping = {f"arg{k}": n for k, n in enumerate(wanted) if n != f"arg{k}"}
            if mapping and not any(re.search(rf"%{re.escape(n)}(?![\w$.-])", body)
                                   for n in mapping.values()):  # `%a` is not `%arg0`
                body = re.sub(r"%(arg\d+)\b(?![\w$.-])",
                              lambda a: "%" + mapping.get(a[1], a[1]), body)
        pieces.append(body)
        pos = end
    pieces.append(printed[pos:])
    return "".join(pieces)


__all__ = ["generalize_upstream_ops", "GENERALIZED_KNOWN"]
