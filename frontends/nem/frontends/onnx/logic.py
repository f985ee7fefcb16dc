"""ONNX's comparisons, logical ops and Where (D-COMPILE-BOOL).

NEM computes with f32, f16 and i32 tensors; it has no boolean type a DMA
or an engine could hold.  An ONNX bool tensor is therefore program data as
an i32 tensor holding 0 (false) or 1 (true): every op that makes a bool
makes exactly those two values (a comparison widens its `i1`, a bool
constant is stored as 0/1, a Cast to bool compares with zero), so the ops
that read one can rely on them (`Not` is `x xor 1`) and data movement
(Reshape, Unsqueeze, Expand, Concat, ...) carries them as any i32 tensor.
Where reads its condition as `cond != 0`.  A bool graph input or output is
an i32 buffer holding 0 or 1 (`graph.program_elem_types`).

Float comparisons are ordered, as ONNX's (and numpy's): any comparison with
a NaN is false, Equal included; `IsNaN` is the unordered comparison of a
value with itself.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, math

from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.ops import define_elementwise, operand

_FLOAT_PREDICATES = {
    "Equal": arith.CmpFPredicate.OEQ,
    "Less": arith.CmpFPredicate.OLT,
    "LessOrEqual": arith.CmpFPredicate.OLE,
    "Greater": arith.CmpFPredicate.OGT,
    "GreaterOrEqual": arith.CmpFPredicate.OGE,
}
_INT_PREDICATES = {
    "Equal": arith.CmpIPredicate.eq,
    "Less": arith.CmpIPredicate.slt,
    "LessOrEqual": arith.CmpIPredicate.sle,
    "Greater": arith.CmpIPredicate.sgt,
    "GreaterOrEqual": arith.CmpIPredicate.sge,
}


def _i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def as_data(flag: ir.Value) -> ir.Value:
    """An `i1` as a bool held as data: i32 0 or 1."""
    return arith.extui(_i32(), flag)


def is_true(b: ir.Value) -> ir.Value:
    """A bool held as data (i32) as an `i1`."""
    return arith.cmpi(arith.CmpIPredicate.ne, b, emit.scalar(b.type, 0))


def compare(imp: Importer, node: Node) -> None:
    """Equal, Less, LessOrEqual, Greater, GreaterOrEqual of two f32, f16 or
    i32 operands (i64 demoted, D-COMPILE-I64; bools are i32 0/1, which
    Equal compares as ONNX does)."""
    op = node.op_type

    def body(a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(a.type, ir.IntegerType):
            return as_data(arith.cmpi(_INT_PREDICATES[op], a, b))
        return as_data(arith.cmpf(_FLOAT_PREDICATES[op], a, b))

    operands = [operand(imp, node.input(0)), operand(imp, node.input(1))]
    define_elementwise(imp, node, operands, body, _i32())


def logical(combine: Callable[[ir.Value, ir.Value], ir.Value]) -> Callable[[Importer, Node], None]:
    """And, Or, Xor: the bitwise op on 0/1 values is the logical one."""

    def convert(imp: Importer, node: Node) -> None:
        operands = [operand(imp, node.input(0)), operand(imp, node.input(1))]
        define_elementwise(imp, node, operands, combine, _i32())

    return convert


def not_(imp: Importer, node: Node) -> None:
    def body(b: ir.Value) -> ir.Value:
        return arith.xori(b, emit.scalar(b.type, 1))

    define_elementwise(imp, node, [imp.tensor(node.input(0))], body, _i32())


def is_nan(imp: Importer, node: Node) -> None:
    def body(x: ir.Value) -> ir.Value:
        return as_data(arith.cmpf(arith.CmpFPredicate.UNO, x, x))

    define_elementwise(imp, node, [imp.tensor(node.input(0))], body, _i32())


def is_inf(imp: Importer, node: Node) -> None:
    """IsInf with ONNX's `detect_positive` and `detect_negative` (both 1 by
    default): +inf, -inf or either."""
    pos = int(node.attrs.get("detect_positive", 1))
    neg = int(node.attrs.get("detect_negative", 1))

    def body(x: ir.Value) -> ir.Value:
        inf = emit.fconst(x.type, float("inf"))
        if pos and neg:
            flag = arith.cmpf(arith.CmpFPredicate.OEQ, math.absf(x), inf)
        elif pos:
            flag = arith.cmpf(arith.CmpFPredicate.OEQ, x, inf)
        elif neg:
            flag = arith.cmpf(arith.CmpFPredicate.OEQ, x, arith.negf(inf))
        else:
            return emit.scalar(_i32(), 0)
        return as_data(flag)

    define_elementwise(imp, node, [imp.tensor(node.input(0))], body, _i32())


def where(imp: Importer, node: Node) -> None:
    """Where(cond, X, Y): `X` where `cond` holds, else `Y`, broadcast as ONNX
    does.  Inlined constants take the type of X and Y, not the condition's."""
    value_type = next(
        (t for t in (imp.elem_name(node.input(k)) for k in (1, 2)) if t is not None), None
    )
    if value_type is None:
        raise imp.error(f"input '{node.input(1)}' is not produced by any earlier node")
    elem = ir.Type.parse(value_type)

    def body(c: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        return arith.select(is_true(c), x, y)

    # the condition as a tensor even when constant: an inlined constant
    # would take X's type
    operands = [imp.tensor(node.input(0)), operand(imp, node.input(1)), operand(imp, node.input(2))]
    define_elementwise(imp, node, operands, body, elem, scalar_elem=elem)


def to_bool(imp: Importer, node: Node, x: TensorVal) -> None:
    """Cast to bool: true where `x` is not zero (a NaN is true, as in ONNX
    and numpy: `une`)."""

    def body(v: ir.Value) -> ir.Value:
        if isinstance(v.type, ir.IntegerType):
            return as_data(arith.cmpi(arith.CmpIPredicate.ne, v, emit.scalar(v.type, 0)))
        return as_data(arith.cmpf(arith.CmpFPredicate.UNE, v, emit.fconst(v.type, 0.0)))

    define_elementwise(imp, node, [x], body, _i32())
