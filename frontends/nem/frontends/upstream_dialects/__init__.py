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

from bisect import bisect_right

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Dialect, Operation
from xdsl.parser import Parser

from nem.frontends.upstream_dialects.async_dialect import Async
from nem.frontends.upstream_dialects.dma import AFFINE_EXTRA_OPS, MEMREF_EXTRA_OPS

__all__ = ["Async", "register_mlir_dialects", "lowering_context", "parse_mlir",
           "LocatingParser", "parse_error_message"]


def _extended(factory, extra):
    def make() -> Dialect:
        base = factory()
        names = {op.name for op in extra}
        ops = [op for op in base.operations if op.name not in names] + list(extra)
        return Dialect(base.name, ops, list(base.attributes))
    return make


def register_mlir_dialects(ctx: Context) -> None:
    """Register `async` and extend `affine`/`memref` with the upstream DMA ops.
    Idempotent.  Works whether or not `affine`/`memref` are already loaded."""
    if getattr(ctx, "_nem_mlir_registered", False):
        return
    if "async" not in ctx.registered_dialect_names:
        ctx.register_dialect("async", lambda: Async)
    for name, extra in (("affine", AFFINE_EXTRA_OPS), ("memref", MEMREF_EXTRA_OPS)):
        registered = ctx._registered_dialects  # noqa: SLF001 - no public replace API
        if name in registered:
            registered[name] = _extended(registered[name], extra)
        else:
            from xdsl.dialects import affine, memref
            base = {"affine": affine.Affine, "memref": memref.MemRef}[name]
            registered[name] = _extended(lambda base=base: base, extra)
        if name in {d.name for d in ctx.loaded_dialects}:
            for op in extra:
                ctx._loaded_ops[op.name] = op  # noqa: SLF001
    ctx._nem_mlir_registered = True  # type: ignore[attr-defined]


class LocatingParser(Parser):
    """Gives every parsed op without a location a `FileLineColLoc` of the
    first token of its statement (the result list, or the op name), as
    upstream MLIR does."""

    def __init__(self, ctx: Context, text: str, file: str = "<unknown>", **kw):
        super().__init__(ctx, text, file, **kw)
        self._file = StringAttr(file)
        self.op_starts: list[int] = []
        """Offsets of the ops being parsed, innermost last (where an error
        raised while building an op is reported)."""
        self._line_starts = [0]
        find = text.find
        p = find("\n")
        while p >= 0:
            self._line_starts.append(p + 1)
            p = find("\n", p + 1)

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        self.op_starts.append(start)
        op = super().parse_operation()
        self.op_starts.pop()
        if op.location is None or isinstance(op.location, UnknownLoc):
            line, col = self.line_col(start)
            op.location = FileLineColLoc(self._file, IntAttr(line), IntAttr(col))
        return op

    def line_col(self, offset: int) -> tuple[int, int]:
        """One-based line and column of a character offset of the text."""
        line = bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1


def lowering_context() -> Context:
    """A context that parses what the lowering takes and produces: NEM IR
    (builtin, arith, nem), func, memref, affine, linalg and the upstream ops
    xDSL lacks (`register_mlir_dialects`)."""
    from xdsl.dialects import affine, func, linalg, memref

    from nem.dialect.dialect import nem_context

    ctx = nem_context()
    for d in (func.Func, memref.MemRef, affine.Affine, linalg.Linalg):
        ctx.load_dialect(d)
    register_mlir_dialects(ctx)
    return ctx


def parse_mlir(ctx: Context, text: str, file: str = "<unknown>",
               allow_implicit_module: bool = True) -> ModuleOp:
    register_mlir_dialects(ctx)
    module = LocatingParser(ctx, text, file).parse_module(allow_implicit_module)
    return module


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
