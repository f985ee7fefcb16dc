"""MLIR text in, checked and located: what every tool does before xDSL sees it.

`parse_mlir_checked(ctx, text, file)` is the one entry point of `nem-opt`
and `nem-run` for MLIR input.  Every failure is a `NemDiagnosticError` with a
`file:line:col` location, never an xDSL exception:

1. `check_mlir_text`, one linear scan before xDSL's lexer (D-LIMITS):
   * string literals must close on their line and use only MLIR's escapes
     (`\\"`, `\\n`, `\\t`, `\\\\`, two hex digits).  xDSL 0.74's string regex
     `"(?:[^"\\\\\\n\\v\\f]+|\\\\(...))*"` backtracks exponentially on a
     string that does not close (33 characters: more than 45 s); see
     docs/upstream-reports.md;
   * brackets `( [ { <` nest at most MAX_NESTING_DEPTH deep (xDSL's parser
     recurses per level: hundreds of nested `affine.for` or types are a
     RecursionError);
   * outside strings and comments the text is ASCII, as MLIR's grammar is
     (xDSL reads `memref<٤x4xf32>`, an Arabic-Indic digit, as 4).
2. named linalg ops xDSL lacks are rewritten into `linalg.generic` by
   upstream MLIR (`upstream_ops.generalize_upstream_ops`, D-LOW-UPSTREAM);
3. xDSL's parser, with a location on every op (`LocatingParser`); its
   ParseError is reported at its span, and the other exceptions its
   attribute and type parsers raise on out-of-range values (an `f16`
   constant of 1e10, an integer too wide for its type, a semi-affine map)
   at the token being parsed.
4. xDSL's verifier, reported at the first failing op (a module-level error
   such as a redefined symbol at the op that causes it).
"""

from __future__ import annotations

import re

from xdsl.context import Context
from xdsl.dialects.builtin import AffineMapAttr, LocationAttr, MemRefType, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult
from xdsl.parser import Parser
from xdsl.parser.core import ForwardDeclaredValue
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

from nem.dialect.diagnostics import (
    Diagnostic,
    NemDiagnosticError,
    RuleParseError,
    RuleVerifyException,
    SourceLoc,
    fail,
)
from nem.dialect.limits import MAX_NESTING_DEPTH

# Exceptions xDSL's parsers and verifiers raise on bad user input besides
# ParseError / VerifyException (OverflowError: float packing; ValueError:
# integer ranges; NotImplementedError: semi-affine maps; IndexError/KeyError:
# ops missing operands or attributes).
XDSL_INPUT_ERRORS: tuple[type[Exception], ...] = (
    ParseError,
    VerifyException,
    DiagnosticException,
    ValueError,
    OverflowError,
    NotImplementedError,
    IndexError,
    KeyError,
    TypeError,
    AssertionError,
    ZeroDivisionError,
)

_SCAN = re.compile(
    r"""//[^\n]*|"(?:[^"\\\n\v\f]|\\.)*(?P<close>")?|->|>=|[(){}\[\]<>\n]|[^\x00-\x7f]"""
)
_OP_NAME = re.compile(r'(?:[%\w#:, ]*=\s*)?"?(?P<name>[A-Za-z_][\w$.]*)')
_BAD_ESCAPE = re.compile(r'\\(?!["nt\\]|[0-9A-Fa-f]{2})')
_OPEN, _CLOSE = "({[<", ")}]>"


_BRACKETS = {
    "(": re.compile(r'"(?:[^"\\\n]|\\.)*"|[()\n]'),
    "{": re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\n]'),
}


def closing(text: str, at: int, opening: str) -> int | None:
    """The offset after the bracket closing the `opening` one (`(` or `{`) at
    `text[at]` (brackets in string literals are no closers), or None when
    `text[at]` is not `opening` or the brackets do not close on its line.
    The one bracket scanner of MLIR text: the parser's caches find a
    location's or an attribute dictionary's extent with it, the ONNX
    importer an op's own `loc(...)`s."""
    if text[at : at + 1] != opening:
        return None
    depth = 0
    for m in _BRACKETS[opening].finditer(text, at):
        c = m.group()
        if c == opening:
            depth += 1
        elif c == "\n":
            return None
        elif c[0] != '"':
            depth -= 1
            if depth == 0:
                return m.end()
    return None


def parse_location(text: str) -> LocationAttr | None:
    """The MLIR location written as `text` (`loc(...)`), None if it is not one.
    `text` is untrusted (a `.nemb`'s Debug section, D-BC-NODES): it is
    pre-scanned in linear time before xDSL's lexer sees it
    (D-XDSL-STRING-LEXER), and any parser failure means "not a location"."""
    try:
        check_mlir_text(text, "<origin>")
        parser = Parser(Context(), text)
        loc = parser.parse_optional_location()
    except Exception:  # untrusted bytes: any failure of xDSL's parser (upstream report 3)
        return None
    return loc if loc is not None and parser.pos == len(text) else None


def check_mlir_text(text: str, file: str, at: tuple[int, int] = (0, 0)) -> None:
    """The linear pre-scan (1. above); raises a located diagnostic (`at`:
    where `text` starts in `file`, see `parse_mlir_checked`)."""
    line, line_start = 1 + at[0], -at[1]
    depth = 0
    for m in _SCAN.finditer(text):
        tok = m.group()
        c = tok[0]
        if c == "\n":
            line, line_start = line + 1, m.end()
            continue
        col = m.start() - line_start + 1
        if c == "/" or tok in ("->", ">="):
            continue
        if c == '"':
            if m.group("close") is None:
                raise fail(
                    "unterminated string literal",
                    SourceLoc(file, line, col),
                    None,
                    'close the string with `"` on the same line',
                )
            bad = _BAD_ESCAPE.search(tok)
            if bad is not None:
                raise fail(
                    f"invalid escape '{tok[bad.start() : bad.start() + 2]}' in a string literal",
                    SourceLoc(file, line, col + bad.start()),
                    None,
                    'MLIR strings escape only \\", \\n, \\t, \\\\ and two hex digits',
                )
            continue
        if c in _OPEN:
            depth += 1
            if depth > MAX_NESTING_DEPTH:
                raise fail(
                    f"brackets nested more than {MAX_NESTING_DEPTH} deep (limit D-LIMITS)",
                    SourceLoc(file, line, col),
                    None,
                    "flatten the nest (split the function or the type)",
                )
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        else:
            raise fail(
                f"non-ASCII character {c!r} outside a string literal",
                SourceLoc(file, line, col),
                None,
                "MLIR syntax is ASCII; use digits 0-9 and ASCII names",
            )


_NO_CUSTOM_FORMAT = re.compile(r"Operation (?P<name>[\w$.]+) does not have a custom format")


def parse_mlir_checked(
    ctx: Context,
    text: str,
    file: str,
    allow_implicit_module: bool = True,
    custom_found: str | None = None,
    at: tuple[int, int] = (0, 0),
) -> ModuleOp:
    """Parse and verify MLIR text; every failure is a located diagnostic.
    `custom_found`: see `generalize_upstream_ops` (set by the retry below).
    `at`: the lines, and the characters on its first line, before `text` in
    `file` (a `--split-input-file` chunk, parsed where it is: linear work,
    D-OPT-SPLIT); locations and diagnostics are the file's."""
    from nem.frontends.upstream_dialects import LocatingParser, register_mlir_dialects
    from nem.frontends.upstream_dialects.upstream_ops import generalize_upstream_ops

    check_mlir_text(text, file, at)
    register_mlir_dialects(ctx)
    original = text
    text = generalize_upstream_ops(ctx, text, file, custom_found, at)
    parser = LocatingParser(ctx, text, file, at=at)

    def count_error(n: int) -> NemDiagnosticError:
        """mlir-opt's error without the implicit module."""
        return fail(
            f"source must contain a single top-level operation, found: {n}",
            SourceLoc.in_chunk(file, 1, 1, at),
            None,
            "write one 'builtin.module { ... }', or drop --no-implicit-module",
        )

    def at_end() -> bool:
        # the next token is the end of the input: it starts past every character
        return parser.pos >= len(parser.lexer.input)

    if at_end():
        # no operation at all (an empty file, comments): an empty module, as
        # mlir-opt prints `module {}`
        if not allow_implicit_module:
            raise count_error(0)
        return parser.empty_module()
    try:
        # the implicit module's parse in both cases: attribute and type aliases
        # may stand anywhere at the top, as in mlir-opt; the operations are
        # counted below
        module = parser.parse_module()
    except ParseError as e:
        # xDSL refuses aliases followed by the end of the input
        if at_end() and not parser.top_level and "Could not parse entire input" in str(e):
            if not allow_implicit_module:
                raise count_error(0) from None
            return parser.empty_module()
        # an op xDSL reads only in generic form, in custom form where the
        # statement scan did not see it (after `{` on the same line): the
        # same conversion, once (D-LOW-UPSTREAM)
        m = _NO_CUSTOM_FORMAT.search(str(e))
        if m and custom_found is None:
            return parse_mlir_checked(ctx, original, file, allow_implicit_module, m["name"], at)
        raise NemDiagnosticError([diagnostic_from_parse_error(e, file, at)]) from None
    except XDSL_INPUT_ERRORS as e:
        # the op being built when the error was raised, else where the parser stopped
        pos = parser.op_starts[-1] if parser.op_starts else parser.pos
        line, col = parser.line_col(pos)
        op = _OP_NAME.match(text, pos) if parser.op_starts else None
        what = f"'{op['name']}': " if op else ""
        raise fail(
            f"cannot parse MLIR: {what}{_message(e)}",
            SourceLoc(file, line, col),
            None,
            "check the value and its type at this position",
        ) from None
    if not allow_implicit_module:
        if len(parser.top_level) != 1:
            raise count_error(len(parser.top_level))
        if not isinstance(parser.top_level[0], ModuleOp):
            raise fail(
                "the top-level operation must be a builtin.module: nem-opt runs its passes "
                "on a module (mlir-opt would anchor them on this operation)",
                SourceLoc.of(parser.top_level[0]) or SourceLoc.in_chunk(file, 1, 1, at),
                None,
                "wrap it in 'module { ... }', or drop --no-implicit-module",
            )
    verify_mlir(module, file, at)
    return module


def verify_mlir(module: ModuleOp, file: str, at: tuple[int, int] = (0, 0)) -> None:
    """xDSL's verifier, reported at the first failing op, then the SSA
    scoping MLIR checks and xDSL does not (dominance).  `at`: where the
    module's text starts in `file` (see `location_in`)."""
    _check_ssa_scoping(module, file, at)
    _check_access_maps(module, file, at)
    try:
        module.verify()
    except XDSL_INPUT_ERRORS as e:
        first = _message(e)
        bad = culprit(module, first)
        name = f"'{bad.name}': " if bad is not None else ""
        if isinstance(e, RuleVerifyException):
            d = e.diagnostic(location_in(bad, file, at))
            d.message = f"invalid MLIR: {name}{d.message}"
            raise NemDiagnosticError([d]) from None
        raise NemDiagnosticError(
            [
                Diagnostic(
                    "error",
                    f"invalid MLIR: {name}{first}",
                    location_in(bad, file, at),
                    fix="fix the op so that it verifies",
                )
            ]
        ) from None


def _check_access_maps(module: ModuleOp, file: str, at: tuple[int, int]) -> None:
    """An `affine.load`/`affine.store` whose map takes as many inputs as it
    has subscripts and gives one result per dimension of its memref, as
    upstream's verifier requires (xDSL 0.74's does not: the printer and the
    lowering indexed past the subscripts)."""
    for op in module.walk():
        if op.name not in ("affine.load", "affine.store"):
            continue
        amap = op.properties.get("map")
        memref = (
            op.operands[1 if op.name == "affine.store" else 0]
            if len(op.operands) > (op.name == "affine.store")
            else None
        )
        if (
            not isinstance(amap, AffineMapAttr)
            or memref is None
            or not isinstance(memref.type, MemRefType)
        ):
            continue
        m = amap.data
        subscripts = len(op.operands) - (2 if op.name == "affine.store" else 1)
        if m.num_dims + m.num_symbols != subscripts:
            problem = (
                f"expects as many subscripts as affine map inputs ({subscripts} for "
                f"{m.num_dims + m.num_symbols})"
            )
        elif len(m.results) != len(memref.type.get_shape()):
            problem = (
                f"affine map num results must equal memref rank ({len(m.results)} for "
                f"{len(memref.type.get_shape())})"
            )
        else:
            continue
        raise NemDiagnosticError(
            [
                Diagnostic(
                    "error",
                    f"invalid MLIR: '{op.name}' op {problem}",
                    location_in(op, file, at),
                    fix="give the map one input per subscript and one result per dimension",
                )
            ]
        )


def _check_ssa_scoping(module: ModuleOp, file: str, at: tuple[int, int]) -> None:
    """Every operand is defined in the using op's block or a block enclosing
    it, and before the use within one block (except in graph regions: the
    module's body, NEM statement blocks).  xDSL 0.74 parses `%a = arith.addi %a, %a` and uses of
    values from another function's body; MLIR rejects both (dominance)."""
    positions: dict[Block, dict[Operation, int]] = {}
    for op in module.walk():
        use_block = op.parent_block()
        for i, value in enumerate(op.operands):
            if isinstance(value, ForwardDeclaredValue):
                # a name bound only later, as a block argument of a region
                # that does not enclose this use (xDSL leaves it unresolved)
                name = f"%{value.name_hint}" if value.name_hint else f"operand #{i}"
                raise fail(
                    f"invalid MLIR: '{op.name}': {name} is used before its definition "
                    "(it does not dominate its use)",
                    location_in(op, file, at),
                    None,
                    "define the value before it is used, in the same function",
                )
            def_block = (
                value.block if isinstance(value, BlockArgument) else value.owner.parent_block()
            )
            b = use_block
            while b is not None and b is not def_block:
                parent = b.parent_op()
                b = parent.parent_block() if parent is not None else None
            problem = None
            if b is None:
                problem = "is defined in a region that does not enclose this use"
            elif (
                isinstance(value, OpResult)
                and def_block is use_block
                and use_block is not None
                and not _graph_region(use_block)
            ):
                pos = positions.get(use_block)
                if pos is None:
                    pos = positions[use_block] = {o: k for k, o in enumerate(use_block.ops)}
                if pos[value.owner] >= pos[op]:
                    problem = "is used before its definition"
            if problem is not None:
                name = f"%{value.name_hint}" if value.name_hint else f"operand #{i}"
                raise fail(
                    f"invalid MLIR: '{op.name}': {name} {problem} (it does not dominate its use)",
                    location_in(op, file, at),
                    None,
                    "define the value before it is used, in the same function",
                )


def _graph_region(block: Block) -> bool:
    """Blocks whose ops need not be in dominance order: the module's body
    (an MLIR graph region) and NEM statement blocks, where a use before the
    definition is a program that deadlocks at run time (D-RT-DEADLOCK)."""
    parent = block.parent_op()
    return isinstance(parent, ModuleOp) or (parent is not None and parent.name.startswith("nem."))


def location_in(op: Operation | None, file: str, at: tuple[int, int] = (0, 0)) -> SourceLoc:
    """`op`'s location, else that of the first op it holds, else the start
    of the parsed text (`at`: where it starts in `file`, a
    `--split-input-file` chunk, D-OPT-SPLIT): a diagnostic about MLIR input
    always has a place, and it is in the chunk that holds the op."""
    if op is not None:
        for o in op.walk():
            loc = SourceLoc.of(o)
            if loc is not None:
                return loc
    return SourceLoc.in_chunk(file, 1, 1, at)


def diagnostic_from_parse_error(
    e: ParseError, file: str, at: tuple[int, int] = (0, 0)
) -> Diagnostic:
    """`e` at its place in `file` (`at`: where the parsed text starts in it)."""
    span = e.span
    loc = span.get_location()  # xDSL 0.74: one-based line and column
    where = SourceLoc.in_chunk(file, loc.line, loc.col, at)
    msg = (str(e.msg) if hasattr(e, "msg") else str(e).splitlines()[-1]).strip()
    # xDSL 0.74's lexer forgets an f-string prefix (docs/upstream-reports.md)
    msg = msg.replace("{first_char}", repr(span.input.content[span.start : span.start + 1]))
    at_end = span.start >= len(span.input.content.rstrip())
    what = "unexpected end of input" + (f" ({msg})" if msg else "") if at_end else msg
    if isinstance(e, RuleParseError):  # a NEM attribute breaking a spec rule
        return Diagnostic("error", f"cannot parse MLIR: {what}", where, e.rule, e.fix)
    return Diagnostic(
        "error",
        f"cannot parse MLIR: {what or 'syntax error'}",
        where,
        fix="check the MLIR syntax at this position",
    )


def _message(e: Exception) -> str:
    text = str(e).strip()
    first = text.splitlines()[0] if text else ""
    return first or type(e).__name__


_REDEFINED = re.compile(r'Redefinition of symbol "(?P<name>[^"]*)"')


def culprit(module: ModuleOp, message: str) -> Operation | None:
    """The op a verifier error is about: the second definition of a redefined
    symbol, else the first op that fails its own verification."""
    m = _REDEFINED.search(message)
    if m is not None:
        defs = [
            op
            for op in module.walk()
            if getattr(op.properties.get("sym_name") or op.attributes.get("sym_name"), "data", None)
            == m["name"]
        ]
        if len(defs) > 1:
            return defs[1]
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except XDSL_INPUT_ERRORS:
            return op
    return None


__all__ = [
    "check_mlir_text",
    "parse_mlir_checked",
    "verify_mlir",
    "location_in",
    "culprit",
    "diagnostic_from_parse_error",
    "XDSL_INPUT_ERRORS",
]
