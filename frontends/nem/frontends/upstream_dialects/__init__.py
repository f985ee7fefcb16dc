"""MLIR input support for the NEM lowering (installed as `nem.frontends.upstream_dialects`).

- `async_dialect`: the upstream `async` dialect (xDSL has none).
- `dma`: `affine.dma_start/dma_wait` (xDSL has none) and upstream-exact
  `memref.dma_start/dma_wait` (replacing xDSL's, which differ).
- `register_mlir_dialects(ctx)`: make a context (e.g. nem-opt's) know them.
- `lowering_context()`: a context for lowering inputs (NEM + func, memref,
  affine, linalg and the above).
- `parse_mlir(ctx, text, file)`: xDSL's parser, plus a `file:line:col`
  location on every op that has none (xDSL only keeps explicit `loc(...)`),
  so diagnostics and the NEM ops produced by the lowering point back at the
  MLIR source line.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import ChainMap
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Attribute, Dialect, Operation, Region, SSAValue
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from nem.dialect.diagnostics import SourceLoc
from nem.frontends.upstream_dialects.affine_ssa_maps import UpstreamParser
from nem.frontends.upstream_dialects.async_dialect import Async
from nem.frontends.upstream_dialects.dma import AFFINE_EXTRA_OPS, MEMREF_EXTRA_OPS
from nem.frontends.upstream_dialects.fast_ops import FastOps, memref_type
from nem.frontends.upstream_dialects.linalg_named import UPSTREAM_CONTRACTIONS
from nem.frontends.upstream_dialects.linalg_softmax import SoftmaxOp
from nem.frontends.upstream_dialects.mlir_input import closing

__all__ = [
    "Async",
    "mlir_dialect_factories",
    "register_mlir_dialects",
    "lowering_context",
    "parse_mlir",
    "LocatingParser",
    "parse_error_message",
]


def _extended(
    factory: Callable[[], Dialect], extra: Sequence[type[Operation]]
) -> Callable[[], Dialect]:
    """A factory of `factory()`'s dialect with the ops of `extra` added,
    replacing its ops of the same names."""

    def make() -> Dialect:
        base = factory()
        names = {op.name for op in extra}
        ops = [op for op in base.operations if op.name not in names] + list(extra)
        return Dialect(base.name, ops, list(base.attributes))

    return make


def mlir_dialect_factories() -> dict[str, Callable[[], Dialect]]:
    """`async`, and xDSL's `affine`/`memref`/`linalg` extended with the
    upstream ops xDSL lacks or defines differently (`dma.AFFINE_EXTRA_OPS`,
    `dma.MEMREF_EXTRA_OPS`, `linalg.softmax`, the named contractions as
    upstream builds them: `linalg_named.UPSTREAM_CONTRACTIONS`), as
    `Context.register_dialect` takes them."""
    from xdsl.dialects import affine, linalg, memref

    return {
        "async": lambda: Async,
        "affine": _extended(lambda: affine.Affine, AFFINE_EXTRA_OPS),
        "memref": _extended(lambda: memref.MemRef, MEMREF_EXTRA_OPS),
        "linalg": _extended(lambda: linalg.Linalg, [SoftmaxOp, *UPSTREAM_CONTRACTIONS]),
    }


def register_mlir_dialects(ctx: Context) -> None:
    """Make `ctx` know `async` and the upstream `affine`/`memref`/`linalg`
    ops, through xDSL's public registration API.  Idempotent.  Call it
    before registering xDSL's own `affine`/`memref`/`linalg` (a driver
    registering every xDSL dialect skips the names already registered): a
    context whose `affine`, `memref` or `linalg` is already xDSL's gets the
    ops xDSL lacks added, but an op xDSL defines differently
    (`memref.dma_start`, `linalg.matmul`) cannot be replaced, and is an
    error."""
    for name, factory in mlir_dialect_factories().items():
        if name not in ctx.registered_dialect_names:
            ctx.register_dialect(name, factory)
    loaded = {d.name for d in ctx.loaded_dialects}
    for name in ("affine", "memref"):
        if name not in loaded:
            ctx.load_registered_dialect(name)
    known = {op.name: op for op in ctx.loaded_ops}
    extra = [*AFFINE_EXTRA_OPS, *MEMREF_EXTRA_OPS]
    if "linalg" in loaded:
        extra += [SoftmaxOp, *UPSTREAM_CONTRACTIONS]
    for op in extra:
        if op.name not in known:
            ctx.load_op(op)
        elif known[op.name] is not op:
            dialect = op.name.split(".")[0]
            raise ValueError(
                f"register_mlir_dialects: the context already defines {op.name} "
                f"as {known[op.name].__module__}.{known[op.name].__name__}; call it "
                f"before registering xDSL's {dialect} dialect"
            )


class _Scopes(ChainMap[str, tuple[SSAValue, ...]]):
    """The parser's SSA names, one layer per open region.  xDSL's parser
    saves its name table with `copy()` when it enters a region and puts the
    copy back when it leaves: a copy of every name of the function at each
    region made parsing quadratic (a tiled 3,000-node chain: 59 s, a third
    of it in those copies, for 14 s at 1,000 nodes).  Here `copy()` gives
    the saved view of the current layers and opens an empty one for the
    region's own names, so entering a region costs its nesting depth."""

    def copy(self) -> _Scopes:
        saved = _Scopes(*self.maps)
        self.maps.insert(0, {})
        return saved

    def get(self, key: str, default: Any = None) -> Any:
        for layer in self.maps:
            values = layer.get(key)
            if values is not None:
                return values
        return default

    def __getitem__(self, key: str) -> tuple[SSAValue, ...]:
        for layer in self.maps:
            values = layer.get(key)
            if values is not None:
                return values
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return any(key in layer for layer in self.maps)


class LocatingParser(UpstreamParser):
    """Gives every parsed op without a location a `FileLineColLoc` of the
    first token of its statement (the result list, or the op name), as
    upstream MLIR does.  `at`: the lines, and the characters on its first
    line, before `text` in `file` (a `--split-input-file` chunk), so that
    locations are the file's."""

    def __init__(
        self,
        ctx: Context,
        text: str,
        file: str = "<unknown>",
        at: tuple[int, int] = (0, 0),
        fast: bool = True,
        **kw: Any,
    ):
        super().__init__(ctx, text, file, **kw)
        self.ssa_values = _Scopes()  # type: ignore[assignment]  # the mapping xDSL reads
        self._file, self._at = StringAttr(file), at
        self.op_starts: list[int] = []
        """Offsets of the ops being parsed, innermost last (where an error
        raised while building an op is reported)."""
        self.top_level: list[Operation] = []
        """The operations parsed at the top of the input, in order."""
        self.memref_types: dict[str, Attribute] = {}
        """Each memref type's text, parsed once (`parse_optional_type`; read
        by `fast_ops`)."""
        self._locations: dict[str, Attribute] = {}
        """Each location's text, parsed once (`parse_optional_location`)."""
        self.attr_dicts: dict[str, dict[str, Attribute]] = {}
        """Each attribute dictionary's text, parsed once (a copy per use; read
        by `fast_ops`)."""
        self._fast = FastOps(self) if fast else None
        """The one-line staging statements read without xDSL's lexer
        (`fast_ops`, D-COMPILE-PARSE-FAST); `fast=False`: xDSL reads all."""
        self._line_starts = [0]
        find = text.find
        p = find("\n")
        while p >= 0:
            self._line_starts.append(p + 1)
            p = find("\n", p + 1)

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        top = not self.op_starts
        if not top and self._fast is not None:
            op = self._fast.operation(start)
            if op is not None:
                if op.location is None or isinstance(op.location, UnknownLoc):
                    line, col = self.line_col(start)
                    op.location = FileLineColLoc(self._file, IntAttr(line), IntAttr(col))
                return op
        self.op_starts.append(start)
        op = super().parse_operation()
        self.op_starts.pop()
        if top:
            self.top_level.append(op)
        if op.location is None or isinstance(op.location, UnknownLoc):
            line, col = self.line_col(start)
            op.location = FileLineColLoc(self._file, IntAttr(line), IntAttr(col))
        return op

    def parse_optional_type(self) -> Any:
        """xDSL's, but a memref type whose text was parsed before is not
        parsed again: a tiled program spells the same few dozen memref types
        thousands of times, and xDSL takes about a millisecond for each
        (shape, layout, memory space); types are immutable, so one object
        serves every occurrence."""
        tok = self._current_token
        if tok.kind != MLIRTokenKind.BARE_IDENT or tok.text != "memref":
            return super().parse_optional_type()
        end = _angle_end(self.lexer.input.content, tok.span.end)
        if end is None:
            return super().parse_optional_type()
        return self._reused(self.memref_types, end, lambda: self._memref_type(end))

    def _memref_type(self, end: int) -> Any:
        """The memref type from the current token to `end`, built without
        xDSL's lexer when its spelling is a plain one (`fast_ops.memref_type`,
        D-COMPILE-PARSE-FAST), else xDSL's `parse_optional_type`."""
        text = self.lexer.input.content
        start = self._current_token.span.start
        built = memref_type(text[start:end]) if self._fast is not None else None
        if built is None:
            return super().parse_optional_type()
        self.resume_at(end)
        return built

    # -- the parser state `fast_ops` moves, through this subclass (xDSL's
    # `_parser_state` and `_register_ssa_definition` are protected members
    # of its parser, not API for other classes)
    def resume_at(self, pos: int) -> None:
        """Continue parsing from offset `pos` of the input (xDSL's
        `_resume_from`)."""
        self.lexer.pos = pos
        self._parser_state.current_token = self.lexer.lex()

    def define_results(self, name: str, op: Operation, span: Span) -> None:
        """`%name` defined as `op`'s results, as xDSL's parse of the op's
        statement registers it."""
        self._register_ssa_definition(name, op.results, span)

    def type_between(self, start: int, end: int) -> Any:
        """The type spelled by the input from `start` to `end`, parsed where
        it stands by `parse_optional_type` (which memoizes a memref type),
        the parser's position then put back; None when that parse fails or
        does not end where the type's text does."""
        state = self._parser_state
        source = self.lexer.input.content
        pos, token = self.lexer.pos, state.current_token
        try:
            self.resume_at(start)
            parsed = self.parse_optional_type()
            ok = (
                state.current_token.span.start >= end
                and not source[end : state.current_token.span.start].strip()
            )
        except Exception:  # left to xDSL's parse of the statement: its error, its place
            parsed, ok = None, False
        finally:
            self.lexer.pos, state.current_token = pos, token
        return parsed if ok else None

    def region_at(self, brace: int, start: int, dialect: str) -> Region | None:
        """The region whose `{` is at offset `brace` of the statement at
        `start`, parsed with the statement's start and `dialect` on the
        parser's stacks as xDSL's `parse_operation` has them while it parses
        an op of `dialect`; None, the parser back at `start`, when result
        types (`-> T`) follow the region."""
        state = self._parser_state
        self.resume_at(brace)
        self.op_starts.append(start)
        state.dialect_stack.append(dialect)
        body = self.parse_region()
        state.dialect_stack.pop()
        self.op_starts.pop()
        if state.current_token.kind == MLIRTokenKind.ARROW:
            self.resume_at(start)
            return None
        return body

    def parse_optional_location(self) -> Any:
        """xDSL's, but a location whose text was parsed before is not parsed
        again: upstream MLIR gives every op tiled from one ONNX node the
        same `loc(...)` (a quarter of the parse time of a tiled CNN)."""
        tok = self._current_token
        if tok.kind != MLIRTokenKind.BARE_IDENT or tok.text != "loc":
            return super().parse_optional_location()
        end = closing(self.lexer.input.content, tok.span.end, "(")
        if end is None:
            return super().parse_optional_location()
        return self._reused(self._locations, end, super().parse_optional_location)

    def parse_optional_dictionary_attr_dict(self) -> dict[str, Attribute]:
        """xDSL's, but an attribute dictionary whose text was parsed before is
        not parsed again: a tiled CNN repeats a few dozen (a convolution's
        `{dilations = dense<1> : vector<2xi64>, ...}`, a generic's indexing
        maps and iterator types), each taking xDSL milliseconds."""
        tok = self._current_token
        end = (
            closing(self.lexer.input.content, tok.span.start, "{")
            if tok.kind == MLIRTokenKind.L_BRACE
            else None
        )
        if end is None:
            return super().parse_optional_dictionary_attr_dict()
        return dict(self._reused(self.attr_dicts, end, super().parse_optional_dictionary_attr_dict))

    def _reused(self, cache: dict[str, Any], end: int, parse: Callable[[], Any]) -> Any:
        """What the text from the current token to `end` spells: from `cache`
        when that text was parsed before, else `parse()`d (and cached when
        the parse ended at `end`)."""
        text = self.lexer.input.content
        key = text[self._current_token.span.start : end]
        cached = cache.get(key)
        if cached is not None:
            self.resume_at(end)
            return cached
        parsed = parse()
        if parsed is not None and not text[end : self._current_token.span.start].strip():
            cache[key] = parsed
        return parsed

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        """xDSL's `parse_module`; an implicit module gets the location of its
        first op, or the input's first line when it is empty, so that an
        error about the whole input still names the file."""
        module = super().parse_module(allow_implicit_module)
        if module.location is None or isinstance(module.location, UnknownLoc):
            first = module.body.block.first_op
            module.location = first.location if first is not None else self._first_line()
        return module

    def empty_module(self) -> ModuleOp:
        """The module of an input without any operation (mlir-opt prints
        `module {}`; xDSL's `parse_module` refuses an input at its end),
        located at the input's first line as `parse_module` locates an
        implicit module without operations (aliases only)."""
        module = ModuleOp([])
        module.location = self._first_line()
        return module

    def _first_line(self) -> FileLineColLoc:
        line, col = self.line_col(0)
        return FileLineColLoc(self._file, IntAttr(line), IntAttr(col))

    def line_col(self, offset: int) -> tuple[int, int]:
        """One-based line and column in the file of a character offset of the text."""
        line = bisect_right(self._line_starts, offset)
        loc = SourceLoc.in_chunk("", line, offset - self._line_starts[line - 1] + 1, self._at)
        return loc.line, loc.col


_ANGLES = re.compile(r"->|[<>\n]")


def _angle_end(text: str, at: int) -> int | None:
    """The offset after the `>` closing the `<` at `text[at]` (`->` of an
    affine map inside is no closer), or None when `text[at]` is not `<` or
    the type does not end on its line."""
    if text[at : at + 1] != "<":
        return None
    depth = 0
    for m in _ANGLES.finditer(text, at):
        c = m.group()
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                return m.end()
        elif c == "\n":
            return None
    return None


def lowering_context() -> Context:
    """A context that parses what the lowering takes and produces: NEM IR
    (builtin, arith, nem), func, memref, affine, linalg, the upstream ops
    xDSL lacks (`register_mlir_dialects`) and the lowering's own
    `nem_lowering.kernel` and `nem_lowering.view` (D-LOW-OUTLINE, D-LOW-VIEW-OP)."""
    from xdsl.dialects import func

    from nem.dialect.dialect import nem_context
    from nem.dialect.kernel_op import NEM_LOWERING

    ctx = nem_context()
    register_mlir_dialects(ctx)  # affine, memref (with the upstream ops), async
    ctx.load_dialect(func.Func)
    ctx.load_registered_dialect("linalg")  # with linalg.softmax (D-LOW-SOFTMAX)
    ctx.load_dialect(NEM_LOWERING)
    return ctx


def parse_mlir(
    ctx: Context, text: str, file: str = "<unknown>", allow_implicit_module: bool = True
) -> ModuleOp:
    """Parse MLIR text with a location on every op (`LocatingParser`): text a
    tool wrote (upstream MLIR's output); the user's text goes through
    `mlir_input.parse_mlir_checked`, whose linear pre-scan keeps it from
    xDSL's backtracking string regex (D-XDSL-STRING-LEXER)."""
    register_mlir_dialects(ctx)
    return LocatingParser(ctx, text, file).parse_module(allow_implicit_module)


def parse_error_message(e: Exception) -> str:
    """The message of an xDSL `ParseError`, with the placeholders xDSL 0.74
    leaves unfilled (`Expected suffix identifier after {first_char}`) filled
    from the text at the error."""
    msg = (str(e.msg) if hasattr(e, "msg") else str(e).splitlines()[-1]).strip()
    span = getattr(e, "span", None)
    if "{first_char}" in msg and span is not None:
        text = span.input.content
        char = text[span.start] if 0 <= span.start < len(text) else "?"
        msg = msg.replace("{first_char}", f"'{char}'")
    return msg
