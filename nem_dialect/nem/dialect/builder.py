"""Build NEM IR from Python: the builder API.

    from nem.dialect.builder import ProgramBuilder
    from nem.frontends.nem_text import print_nem

    b = ProgramBuilder("scale", device="npm_lite")
    T = b.const("T", 4)
    tile = b.const("tile_bytes", 64)
    X = b.buffer("X", "DDR", size=T * tile)
    Y = b.buffer("Y", "DDR", size=T * tile)
    L = b.buffer("L", "L1", size=2 * tile)
    with b.loop("i", 0, T - 1, max_in_flight=2) as i:
        slot = b.region("slot_i", L, (i % 2) * tile, tile, let=True,
                        elem="f16", shape=[32], layout="C")
        t_in = b.transfer(slot, b.region(None, X, i * tile, tile, elem="f16", shape=[32],
                                         layout="C"), name="t_in")
        t_r = b.compute("relu", ins=[slot], outs=[slot], deps=[t_in], name="t_r")
        t_out = b.store(b.region(None, Y, i * tile, tile, elem="f16", shape=[32], layout="C"),
                        slot, deps=[t_r], name="t_out")
        b.wait(t_out)
    module = b.finish()          # verified: raises NemDiagnosticError on a rule violation
    print(print_nem(module))

What the builder does for you, so IR built here is exactly what the `.nem`
parser builds from the equivalent text:

* Integer expressions are `Expr`s.  A const, a let and a loop variable are
  symbols; they combine with each other and with Python ints through
  `+ - * / %` (`/` and `%` are NEM's truncating `/` and `mod`, D-EXPR-MOD;
  `e.mod(m)` spells `mod` explicitly) and become `arith` index ops only where
  they are used, one `arith.constant` per literal per block.  The printer
  prints them as written (`(i mod 2) * tile_bytes`).
* Region types are derived from the operands: the shape is written once, and
  the extent defaults to the bytes the shape needs (EXT-01/02).
* Compute ops are made by opcode name with keyword attributes converted by
  the registry's attribute types (`nem_dialect/nem/dialect/registry/opcodes.yaml`):
  `b.compute("gemm", ins=[A, B], outs=[Y], accum_type="f32")`.
* Decorators are names or `(name, args...)` tuples (`nem.dialect.decorators.
  make_decorator`); a loop takes `max_in_flight=N`.
* Every op gets a location: the builder's `loc` when set, else the Python
  line that called the builder, so a diagnostic of `finish()` points at the
  line of your script that built the offending statement.

`NemBuilder` builds at any insertion point of existing NEM IR (a lowering
pass, a rewrite); `ProgramBuilder` starts a new program and `finish()`
verifies it with every static rule (`nem.dialect.verifier`).  Values are
xDSL `SSAValue`s (buffers, regions, tokens) or `Expr`s (integers); the op of
a value is `value.owner`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TypeAlias, cast

from xdsl.builder import Builder
from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    IndexType,
    LocationAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from nem.dialect.attributes import (
    BITWIDTH,
    DYNAMIC,
    ELEM_BY_NAME,
    MEM_LEVEL_FIX,
    ArgRefAttr,
    BufferType,
    DecoratorAttr,
    MaxInFlightAttr,
    MemLevelAttr,
    QuantAttr,
    RegionType,
    TokenType,
    elem_name,
    mem_level_error,
    region_min_bytes,
    region_type,
)
from nem.dialect.builder_attrs import (
    binary_op,
    buffer_type,
    index_constant,
    memory_level,
    shared_region_type,
)
from nem.dialect.builder_exprs import BinExpr, Expr, IntLike, Lit, Sym, as_expr
from nem.dialect.decorators import DecoratorError, DecoratorSpec, make_decorator
from nem.dialect.diagnostics import (
    Diagnostic,
    NemDiagnosticError,
    RuleVerifyException,
    SourceLoc,
    fail,
)
from nem.dialect.expressions import BINOPS, Evaluator
from nem.dialect.operand_binding import user_name
from nem.dialect.ops import (
    COMPUTE_OPS,
    BufferOp,
    ConstOp,
    LetOp,
    LoopOp,
    ProgramOp,
    RegionOp,
    StoreOp,
    TransferOp,
    WaitOp,
)
from nem.dialect.registry import lookup, opcodes

__all__ = [
    "BinExpr",
    "Expr",
    "IntLike",
    "Lit",
    "NemBuilder",
    "ProgramBuilder",
    "Sym",
    "index_constant",
]


# ---------------------------------------------------------------------------
# The builder
# ---------------------------------------------------------------------------

Loc: TypeAlias = SourceLoc | LocationAttr | None
Operand: TypeAlias = SSAValue | tuple[SSAValue, Sequence[DecoratorSpec]]
"""A compute operand: a region value, or (region, decorators written after it)."""

_THIS_FILE = str(Path(__file__).resolve())


class NemBuilder:
    """Builds NEM statements at an insertion point (xDSL `Builder` underneath).

    `NemBuilder.at_end(block)`, `.before(op)`, `.after(op)`; `with b.at(ip):`
    moves temporarily.  `loc` (a `SourceLoc` or an xDSL location) is given to
    every op built; without it each op gets the Python line that called the
    builder."""

    def __init__(self, insertion_point: InsertPoint, loc: Loc = None):
        self._builder = Builder(insertion_point)
        self.loc = loc
        # literal -> arith.constant, per scope (as the parser: one per literal
        # per block, visible in nested loop bodies)
        self._literals: list[dict[int, SSAValue]] = [{}]

    @classmethod
    def at_end(cls, block: Block, loc: Loc = None) -> NemBuilder:
        return cls(InsertPoint.at_end(block), loc)

    @classmethod
    def before(cls, op: Operation, loc: Loc = None) -> NemBuilder:
        return cls(InsertPoint.before(op), loc)

    @classmethod
    def after(cls, op: Operation, loc: Loc = None) -> NemBuilder:
        return cls(InsertPoint.after(op), loc)

    @property
    def insertion_point(self) -> InsertPoint:
        return self._builder.insertion_point

    @contextmanager
    def at(self, insertion_point: InsertPoint) -> Iterator[NemBuilder]:
        """Build at `insertion_point` inside the `with` block, then come back."""
        saved, literals = self._builder.insertion_point, self._literals
        self._builder.insertion_point, self._literals = insertion_point, [{}]
        try:
            yield self
        finally:
            self._builder.insertion_point, self._literals = saved, literals

    @contextmanager
    def located(self, loc: Loc) -> Iterator[NemBuilder]:
        """Give `loc` to every op built inside the `with` block."""
        saved, self.loc = self.loc, loc
        try:
            yield self
        finally:
            self.loc = saved

    # -- locations and insertion ------------------------------------------------
    def _location(self) -> LocationAttr:
        if isinstance(self.loc, SourceLoc):
            return self.loc.to_attr()
        if self.loc is not None:
            return self.loc
        return self._caller().to_attr()

    @staticmethod
    def _caller() -> SourceLoc:
        """The first Python frame outside this module (the user's line)."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and str(Path(frame.f_code.co_filename).resolve()) == _THIS_FILE:
            frame = frame.f_back
        if frame is None:  # pragma: no cover - always called from outside
            return SourceLoc("<builder>", 1, 1)
        # the column of the call being made (CPython's instruction positions)
        positions = list(frame.f_code.co_positions())
        k = frame.f_lasti // 2
        col = positions[k][2] if 0 <= k < len(positions) else None
        return SourceLoc(
            frame.f_code.co_filename, frame.f_lineno, col + 1 if isinstance(col, int) else 1
        )

    def _insert(self, op: Operation, loc: LocationAttr) -> Operation:
        op.location = loc
        return self._put(op)

    def _put(self, op: Operation) -> Operation:
        """Insert `op` at the insertion point: what `Builder.insert` does for a
        builder with no listeners and no name hint, the block's own insertion
        without its wrappers (issue 30: hundreds of thousands of ops)."""
        ip = self._builder.insertion_point
        before = ip.insert_before
        if before is None:
            ip.block.add_op(op)
        else:
            ip.block.insert_op_before(op, before)
        return op

    # -- expressions ------------------------------------------------------------
    def index(self, x: IntLike, loc: Loc = None) -> SSAValue:
        """Materialize `x` as an `index` SSA value at the insertion point."""
        return self._emit(as_expr(x), self._loc_attr(loc))

    def _loc_attr(self, loc: Loc) -> LocationAttr:
        if loc is None:
            return self._location()
        return loc.to_attr() if isinstance(loc, SourceLoc) else loc

    def _emit(self, e: Expr, loc: LocationAttr) -> SSAValue:
        if isinstance(e, Sym):
            return e.value
        if isinstance(e, Lit):
            return self._literal(e.value, loc)
        assert isinstance(e, BinExpr)
        lhs, rhs = self._emit(e.lhs, loc), self._emit(e.rhs, loc)
        # `arith.addi lhs, rhs : index`, ... as `op_cls(lhs, rhs)` builds it
        # (the overflow flags are the definition's default, D-IR-BUILD)
        return self._put(binary_op(BINOPS[e.op], lhs, rhs, loc)).results[0]

    def _literal(self, value: int, loc: LocationAttr) -> SSAValue:
        """The `arith.constant value : index` of this scope or an enclosing
        one (one per literal per block), built at the insertion point the
        first time."""
        for scope in reversed(self._literals):
            hit = scope.get(value)
            if hit is not None and hit.owner.parent is not None:
                return hit
        hit = self._put(index_constant(value, loc)).results[0]
        self._literals[-1][value] = hit
        return hit

    # -- declarations -------------------------------------------------------------
    def const(self, name: str, value: IntLike, *, loc: Loc = None) -> Sym:
        """`const NAME = value` (CONST-*: only literals and earlier consts)."""
        at = self._loc_attr(loc)
        op = ConstOp(name, self._emit(as_expr(value), at))
        return Sym(self._insert(op, at).results[0])

    def let(
        self, name: str, value: IntLike | str | float | list[object], *, loc: Loc = None
    ) -> Sym | None:
        """`let NAME = value`: an integer expression gives a symbol usable in
        later expressions; a string, float or list gives None (it can only be
        printed)."""
        at = self._loc_attr(loc)
        if isinstance(value, Expr | int | SSAValue) and not isinstance(value, bool):
            op = LetOp(name, ArgRefAttr(0), [self._emit(as_expr(value), at)], True)
            return Sym(self._insert(op, at).results[0])
        args: list[SSAValue] = []
        attr = self._attr_value(value, None, args, f"let {name}", at)
        self._insert(LetOp(name, attr, args, False), at)
        return None

    def buffer(
        self,
        name: str,
        level: str | MemLevelAttr,
        size: IntLike,
        *,
        align: int | None = None,
        decorators: Sequence[DecoratorSpec] = (),
        loc: Loc = None,
    ) -> SSAValue:
        """`buffer NAME : LEVEL (size=..., align=...)`; `level` is `DDR`, `L2`,
        `L1` or `L1[k]`."""
        at = self._loc_attr(loc)
        lvl = level if isinstance(level, MemLevelAttr) else memory_level(level)
        if lvl is None:
            assert isinstance(level, str)
            error = mem_level_error(level)
            raise fail(f"buffer '{name}': {error}", _src(at), "GRAM-05", MEM_LEVEL_FIX)
        btype = buffer_type(lvl)
        size_v = self._emit(as_expr(size), at)
        op = BufferOp(name, btype, size_v, align, self._decos(decorators, at))
        return self._insert(op, at).results[0]

    def region(
        self,
        name: str | None,
        buffer: SSAValue,
        offset: IntLike,
        extent: IntLike | None = None,
        *,
        elem: str | Attribute | None = None,
        shape: Sequence[IntLike] | None = None,
        layout: str | None = None,
        strides: Sequence[IntLike] | None = None,
        quant: QuantAttr | None = None,
        let: bool = False,
        decorators: Sequence[DecoratorSpec] = (),
        loc: Loc = None,
    ) -> SSAValue:
        """A region of `buffer`: `NAME = region(buffer, offset, extent) elem=..,
        shape=[..], layout=..|strides=[..]` (`let=True`: `let NAME = ...`;
        `name=None`: an inline region, for an operand).  An untyped region
        (raw bytes) has no `elem`.  `extent` defaults to the bytes a typed
        region's static shape and strides need."""
        at = self._loc_attr(loc)
        if buffer is None or not isinstance(buffer.type, BufferType):
            raise fail(
                f"region '{name or 'inline'}': {buffer!r} is not a buffer",
                _src(at),
                "NAME-01",
                "pass the value returned by b.buffer(...)",
            )
        level = buffer.type.level
        # int entries stay ints (a literal each, `_literal`): a lowered CNN
        # builds a hundred thousand shape and stride entries (issue 30)
        shape_e = (
            [d if type(d) is int else as_expr(d) for d in shape] if shape is not None else None
        )
        strides_e = (
            [d if type(d) is int else as_expr(d) for d in strides] if strides is not None else None
        )
        elem_attr = self._elem(elem, at) if elem is not None else None
        if elem_attr is not None and (shape_e is None or (layout is None) == (strides_e is None)):
            raise fail(
                f"region '{name or 'inline'}': a typed region needs shape= and exactly "
                "one of layout= or strides=",
                _src(at),
                "GRAM-08",
                'write elem="f16", shape=[..], layout="C" (or strides=[..])',
            )
        if elem_attr is None and (shape_e or layout or strides_e or quant):
            raise fail(
                f"region '{name or 'inline'}': shape, layout, strides and quant need elem=",
                _src(at),
                "GRAM-08",
                'add elem="f16" (or the region\'s element type)',
            )
        if extent is None:
            exprs = [
                None if xs is None else [as_expr(x) for x in xs] for xs in (shape_e, strides_e)
            ]
            extent = self._default_extent(name, elem_attr, exprs[0], exprs[1], at)
        off_v = self._emit(as_expr(offset), at)
        ext_v = self._emit(as_expr(extent), at)
        literal, emit = self._literal, self._emit
        shape_v = [literal(d, at) if isinstance(d, int) else emit(d, at) for d in shape_e or ()]
        strides_v = [literal(d, at) if isinstance(d, int) else emit(d, at) for d in strides_e or ()]
        if elem_attr is None:
            rtype = region_type(level)
        else:
            ev = Evaluator()

            def static(e: int | Expr, v: SSAValue) -> int:
                if isinstance(e, int):
                    return e
                s = e.value if isinstance(e, Lit) else ev.static(v)
                return DYNAMIC if s is None else s

            shape_s = tuple(map(static, shape_e or (), shape_v))
            strides_s = tuple(map(static, strides_e, strides_v)) if strides_e is not None else None
            rtype = shared_region_type((level, elem_attr, shape_s, layout, strides_s, quant))
        binding = "inline" if name is None else ("let" if let else "decl")
        op = RegionOp(
            rtype,
            buffer,
            off_v,
            ext_v,
            shape_v,
            strides_v,
            name,
            binding,
            self._decos(decorators, at),
        )
        return self._insert(op, at).results[0]

    def _default_extent(
        self,
        name: str | None,
        elem: Attribute | None,
        shape: list[Expr] | None,
        strides: list[Expr] | None,
        at: LocationAttr,
    ) -> IntLike:
        dims = [d.static() for d in shape or ()]
        steps = [s.static() for s in strides] if strides is not None else None
        if elem is None or None in dims or (steps is not None and None in steps):
            raise fail(
                f"region '{name or 'inline'}': give extent= (it defaults to the bytes of a "
                "typed region whose shape and strides are loop-invariant)",
                _src(at),
                "GRAM-07",
                "pass the extent in bytes as the fourth argument",
            )
        name_of_elem = elem_name(elem)
        assert name_of_elem is not None
        bits = BITWIDTH[name_of_elem]
        if steps is None and bits % 8 == 0 and shape and any(not isinstance(d, Lit) for d in shape):
            # a dense shape given with named sizes: the extent is written with
            # them (`TM * TK * 2`), as a hand-written program would, not folded
            extent: Expr = shape[0]
            for d in shape[1:]:
                extent = extent * d
            return extent * (bits // 8) if bits != 8 else extent
        return region_min_bytes(name_of_elem, dims, steps)  # type: ignore[arg-type]

    def _elem(self, elem: str | Attribute, at: LocationAttr) -> Attribute:
        if isinstance(elem, str):
            attr = ELEM_BY_NAME.get(elem)
            if attr is None:
                raise fail(
                    f"unknown element type '{elem}'",
                    _src(at),
                    "TYPE-01",
                    "use one of " + ", ".join(ELEM_BY_NAME),
                )
            return attr
        if elem_name(elem) is None:
            raise fail(
                f"{elem} is not a NEM element type",
                _src(at),
                "TYPE-01",
                "use one of " + ", ".join(ELEM_BY_NAME),
            )
        return elem

    # -- loops --------------------------------------------------------------------
    @contextmanager
    def loop(
        self,
        iv: str,
        lower: IntLike,
        upper: IntLike,
        *,
        max_in_flight: int | None = None,
        decorators: Sequence[DecoratorSpec] = (),
        loc: Loc = None,
    ) -> Iterator[Sym]:
        """`loop IV in [lower..upper] @max_in_flight(N): ... endloop` (bounds
        inclusive, D-LOOP-1); the `with` body builds the loop body and gets
        the loop variable."""
        at = self._loc_attr(loc)
        lo, hi = self._emit(as_expr(lower), at), self._emit(as_expr(upper), at)
        decos = self._decos(decorators, at)
        if max_in_flight is not None:
            decos.insert(0, MaxInFlightAttr(max_in_flight))
        body = Block(arg_types=[IndexType()])
        op = LoopOp(iv, lo, hi, body, decos)
        self._insert(op, at)
        saved = self._builder.insertion_point
        self._builder.insertion_point = InsertPoint.at_end(body)
        self._literals.append({})
        try:
            yield Sym(op.block.args[0])
        finally:
            self._literals.pop()
            self._builder.insertion_point = saved

    # -- tasks --------------------------------------------------------------------
    def transfer(
        self,
        dst: SSAValue,
        src: SSAValue,
        *,
        deps: Sequence[SSAValue] = (),
        name: str | None = None,
        sync: bool = False,
        decorators: Sequence[DecoratorSpec] = (),
        loc: Loc = None,
    ) -> SSAValue:
        """`NAME = transfer.async|sync(dst=..., src=..., deps=[...])`; returns the token."""
        at = self._loc_attr(loc)
        dst, src = self._values([dst, src], RegionType, "transfer dst= and src=", at)
        deps = self._values(deps, TokenType, "transfer deps", at)
        op = TransferOp(dst, src, list(deps), sync, name, self._decos(decorators, at))
        return self._insert(op, at).results[0]

    def store(
        self,
        dst: SSAValue,
        src: SSAValue,
        *,
        deps: Sequence[SSAValue] = (),
        name: str | None = None,
        sync: bool = False,
        decorators: Sequence[DecoratorSpec] = (),
        loc: Loc = None,
    ) -> SSAValue:
        """`NAME = store.async|sync(dst=..., src=..., deps=[...])`; returns the token."""
        at = self._loc_attr(loc)
        dst, src = self._values([dst, src], RegionType, "store dst= and src=", at)
        deps = self._values(deps, TokenType, "store deps", at)
        op = StoreOp(dst, src, list(deps), sync, name, self._decos(decorators, at))
        return self._insert(op, at).results[0]

    def wait(
        self, *tokens: SSAValue, decorators: Sequence[DecoratorSpec] = (), loc: Loc = None
    ) -> WaitOp:
        """`wait(t1, t2, ...)`."""
        at = self._loc_attr(loc)
        op = WaitOp(self._values(tokens, TokenType, "wait", at), self._decos(decorators, at))
        self._insert(op, at)
        return op

    def compute(
        self,
        opcode: str,
        ins: Sequence[Operand],
        outs: Sequence[Operand],
        *,
        deps: Sequence[SSAValue] = (),
        name: str | None = None,
        sync: bool = False,
        decorators: Sequence[DecoratorSpec] = (),
        attrs: dict[str, object] | None = None,
        loc: Loc = None,
        **attributes: object,
    ) -> SSAValue:
        """`NAME = OPCODE.async|sync in INS out OUTS deps=[...] key=value ...`;
        returns the token.  Attributes come as keywords (or `attrs=` for names
        that are not Python identifiers) and are converted by their registry
        type: `int`/`int_list` take ints and `Expr`s, `float` a number, `elem`
        an element type name (`accum_type="f32"`), `string` a str.  Whether the
        op is well formed (operand counts, required attributes, type families)
        is checked by the verifier, as for parsed text."""
        at = self._loc_attr(loc)
        cls = COMPUTE_OPS.get(opcode)
        if cls is None:
            import difflib

            near = difflib.get_close_matches(opcode, list(opcodes()), 3)
            raise fail(
                f"unknown opcode '{opcode}'",
                _src(at),
                "TASK-11",
                (f"did you mean {', '.join(near)}? " if near else "")
                + "opcodes are listed in docs/ops.md",
            )
        spec = lookup(opcode)
        assert spec is not None
        given = {**(attrs or {}), **attributes}
        op_decos: list[list[DecoratorAttr]] = []
        ins_v: list[SSAValue] = []
        outs_v: list[SSAValue] = []
        for values, side in ((ins, ins_v), (outs, outs_v)):
            for x in values:
                value, decos = x if isinstance(x, tuple) else (x, ())
                side.extend(self._values([value], RegionType, f"{opcode} ins and outs", at))
                op_decos.append(self._decos(decos, at))
        args: list[SSAValue] = []
        converted: dict[str, Attribute] = {}
        for key in spec.canonical_attr_order(given):
            aspec = spec.attributes.get(key)
            converted[key] = self._attr_value(
                given[key], aspec.type if aspec else None, args, f"{opcode} attribute '{key}'", at
            )
        deps = self._values(deps, TokenType, f"{opcode} deps", at)
        op = cls(
            ins_v,
            outs_v,
            list(deps),
            args,
            converted,
            sync,
            name,
            self._decos(decorators, at),
            op_decos,
        )
        return self._insert(op, at).results[0]

    def _attr_value(
        self, value: object, type_: str | None, args: list[SSAValue], what: str, at: LocationAttr
    ) -> Attribute:
        """A Python value as a compute-attribute / let value, as the parser
        gives it: integers become `ArgRefAttr`s into `args` (expressions stay
        SSA values), floats `FloatAttr`, element types the builtin type."""

        def bad(expected: str) -> NemDiagnosticError:
            return fail(
                f"{what} takes {expected}, not {value!r}",
                _src(at),
                "TASK-13",
                "see the opcode's attributes in docs/ops.md",
            )

        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, Expr | int | SSAValue):
            if type_ in ("elem", "string"):
                raise bad("an element type" if type_ == "elem" else "a string")
            e = as_expr(value)
            if type_ == "float" and e.static() is not None:
                return FloatAttr(float(e.static()), 64)  # type: ignore[arg-type]
            args.append(self._emit(e, at))
            return ArgRefAttr(len(args) - 1)
        if isinstance(value, float):
            if type_ in ("int", "int_list", "elem", "string"):
                raise bad({"elem": "an element type", "string": "a string"}.get(type_, "integers"))
            return FloatAttr(value, 64)
        if isinstance(value, str):
            if type_ == "elem":
                return self._elem(value, at)
            if type_ in (None, "string"):
                return StringAttr(value)
            raise bad("a number")
        if (
            isinstance(value, Attribute)
            and elem_name(value) is not None
            and type_ in (None, "elem")
        ):
            return value
        if isinstance(value, list | tuple):
            if type_ not in (None, "int_list"):
                raise bad(f"a value of type {type_}")
            inner = "int" if type_ == "int_list" else None
            return ArrayAttr(tuple(self._attr_value(v, inner, args, what, at) for v in value))
        raise bad("an int, Expr, float, str, element type or list")

    @staticmethod
    def _values(
        values: Sequence[object], kind: type[TokenType | RegionType], what: str, at: LocationAttr
    ) -> list[SSAValue]:
        """`values`, each an SSA value of type `kind`: a wrong one is reported
        here, at the user's line, as the parser reports `wait(R)` (NAME-01),
        not by xDSL's operand verifier when `finish()` runs."""
        for v in values:
            if not (isinstance(v, SSAValue) and isinstance(v.type, kind)):
                token = kind is TokenType
                raise fail(
                    f"{what} take{'s' if what == 'wait' else ''} "
                    f"{'tokens' if token else 'regions'}, got {_describe(v)}",
                    _src(at),
                    "NAME-01",
                    "deps and wait take task tokens: the value b.transfer, "
                    "b.store or b.compute returns"
                    if token
                    else "pass the value b.region(...) returns",
                )
        return cast(list[SSAValue], list(values))

    def _decos(self, decorators: Sequence[DecoratorSpec], at: LocationAttr) -> list[DecoratorAttr]:
        try:
            return [make_decorator(d) for d in decorators]
        except DecoratorError as e:
            raise fail(str(e), _src(at), e.rule, "see docs/spec-decisions.md D-DECO-1") from None


def _describe(value: object) -> str:
    """`value` as a user names it: `the region 'R'`, `the buffer 'B'`, ..."""
    if not isinstance(value, SSAValue):
        return repr(value)
    named = user_name(value)
    if named is not None:
        return f"the {named}"
    kinds = {TokenType: "token", RegionType: "region", BufferType: "buffer", IndexType: "integer"}
    return "an unnamed " + next(
        (k for t, k in kinds.items() if isinstance(value.type, t)), str(value.type)
    )


def _failing_op(module: ModuleOp, e: VerifyException) -> tuple[Operation, str]:
    """The first op that fails its own verification (its line is the user's
    statement) and why, all of xDSL's message on one line: its first line
    alone can be a cut-off header (`operand 'x' at position 0 does not
    verify:`)."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as own:
            return op, " ".join(str(own).split())
    return module, " ".join(str(e).split())


def _src(loc: LocationAttr) -> SourceLoc | None:
    from xdsl.dialects.builtin import FileLineColLoc

    if isinstance(loc, FileLineColLoc):
        return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
    return None


class ProgramBuilder(NemBuilder):
    """A new `nem.program` in a new module, built from its first statement on.

    `device` is a device name (`device npm_lite`), `device_file` a device file
    (`device "npm_lite.nem"`); `includes` become `include "..."` lines.  A
    `device` name with no `includes` must be a shipped device, and the program
    includes its file (`include "npm_lite.nem"`), as a hand-written program
    must for `device NAME` to resolve (DEV-20): the printed program then
    verifies on its own, with no `--device` (D-BUILD-DEVICE)."""

    def __init__(
        self,
        name: str | None = None,
        *,
        device: str | None = None,
        device_file: str | None = None,
        includes: Sequence[str] = (),
        loc: Loc = None,
    ):
        if device is not None and device_file is not None:
            raise ValueError("give device= (a name) or device_file= (a path), not both")
        body = Block()
        super().__init__(InsertPoint.at_end(body), loc)
        at = self._location()
        if device is not None and not includes:
            includes = (self._shipped_device_file(device, at),)
        kind = "name" if device is not None else ("file" if device_file is not None else None)
        self.program = ProgramOp(name, body, kind, device or device_file, tuple(includes))
        self.module = ModuleOp([self.program])
        self.program.location = at
        self.warnings: list[Diagnostic] = []

    @staticmethod
    def _shipped_device_file(device: str, at: LocationAttr) -> str:
        """The file of shipped device `device`, which the program includes; a
        file name or an unknown device is a DEV-20 diagnostic at the caller's
        line (D-BUILD-DEVICE)."""
        from nem.dialect.verifier import shipped_device_names

        shipped = shipped_device_names()
        if "." in device or "/" in device or "\\" in device:
            stem = device.removesuffix(".nem")
            name = f'device="{stem}"' if stem in shipped else f"device=NAME ({', '.join(shipped)})"
            raise fail(
                f"device='{device}' is a file name, not a device name",
                _src(at),
                "DEV-20",
                f'{name} for a shipped device, or device_file="{device}" for a device file',
            )
        if device not in shipped:
            raise fail(
                f"device '{device}' is not a shipped device ({', '.join(shipped)})",
                _src(at),
                "DEV-20",
                'give the file that defines it: device_file="FILE.nem", or '
                f'device="{device}", includes=["FILE.nem"]',
            )
        return f"{device}.nem"

    def finish(self, verify: bool = True) -> ModuleOp:
        """The module, checked with xDSL's verifier and every static rule of
        `nem.dialect.verifier` (with `verify`).  Errors raise
        `NemDiagnosticError`; warnings are kept in `self.warnings`."""
        if verify:
            from nem.dialect.verifier import verify_program

            try:
                self.module.verify()
            except RuleVerifyException as e:
                bad, _ = _failing_op(self.module, e)
                raise NemDiagnosticError([e.diagnostic(SourceLoc.of(bad))]) from None
            except VerifyException as e:
                bad, reason = _failing_op(self.module, e)
                raise fail(
                    f"invalid NEM IR: {reason}",
                    SourceLoc.of(bad) or SourceLoc.of(self.program),
                    None,
                    "fix the statement built at this line",
                ) from None
            diags = verify_program(self.program)
            if any(d.severity == "error" for d in diags):
                raise NemDiagnosticError(diags)
            self.warnings = diags
        return self.module
