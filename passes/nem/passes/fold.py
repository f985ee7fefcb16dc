"""`nem-fold-consts`: fold every compile-time integer expression (SPEC §11).

Each maximal `arith` subtree whose value does not depend on a loop variable
(const right-hand sides, buffer sizes, region offsets/extents, shapes and
strides, loop bounds, integer compute attributes, integer lets) becomes one
`arith.constant`.  `nem.const` and `nem.let` declarations stay, so names
survive: a const's operand becomes the literal (`const tile = 2048`) and
uses of the const keep naming it.  Loop-dependent expressions keep their
shape with their constant subtrees folded (`(i mod 2) * 2048`).

Semantics are `nem.dialect.expressions.apply_binop`'s: `/` truncates toward zero,
`mod` is the truncated remainder (D-EXPR-MOD), arbitrary precision.  A
division or `mod` by a constant zero is CONST-05 at the expression's
location; the pass then changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from nem.dialect.diagnostics import Diagnostic, error
from nem.dialect.expressions import SYMBOL_OF, Evaluator, ExprError, apply_binop
from nem.dialect.ops import ConstOp, ProgramOp
from nem.passes.pass_context import report


def _statement_of(op: Operation) -> Operation:
    """The first non-arith user of an expression op (for messages)."""
    seen = 0
    while type(op) in SYMBOL_OF or isinstance(op, arith.ConstantOp):
        uses = list(op.results[0].uses)
        if not uses or seen > 64:
            return op
        op = uses[0].operation
        seen += 1
    return op


def _describe(op: Operation) -> str:
    name = op.properties.get("name") if hasattr(op, "properties") else None
    what = op.name.removeprefix("nem.")
    return f"{what} '{name.data}'" if name is not None and hasattr(name, "data") else what


def _constant(value: int, at: Operation) -> arith.ConstantOp:
    c = arith.ConstantOp(IntegerAttr(value, IndexType()))
    c.location = at.location
    return c


def _erase_dead(value: SSAValue) -> None:
    op = value.owner
    if not isinstance(op, Operation) or op.parent is None:
        return
    if not (type(op) in SYMBOL_OF or isinstance(op, arith.ConstantOp)):
        return
    if any(True for _ in op.results[0].uses):
        return
    operands = list(op.operands)
    op.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
    op.erase()
    for v in operands:
        _erase_dead(v)


def check_divisions(prog: ProgramOp, ev: Evaluator) -> list[Diagnostic]:
    """CONST-05 for every `/` or `mod` whose divisor is a constant zero
    (reported once, at the innermost failing expression)."""
    diags = []
    for op in prog.walk():
        sym = SYMBOL_OF.get(type(op))
        if sym not in ("/", "mod"):
            continue
        try:
            b = ev.static(op.operands[1])
        except ExprError:
            continue  # reported at the inner expression
        if b == 0:
            stmt = _statement_of(op)
            diags.append(
                error(
                    f"{'division' if sym == '/' else 'mod'} by zero in the expression of "
                    f"{_describe(stmt)}",
                    op if op.location is not None else stmt,
                    "CONST-05",
                    "change the divisor: `/` and `mod` by zero are static errors "
                    "(decision D-EXPR-MOD)",
                )
            )
    return diags


def fold_program(prog: ProgramOp) -> list[Diagnostic]:
    """Fold `prog` in place; returns the CONST-05 errors (then nothing is changed)."""
    ev = Evaluator()
    diags = check_divisions(prog, ev)
    if diags:
        return diags
    for op in list(prog.walk()):
        if op.parent is None:
            continue  # erased as a dead subtree
        sym = SYMBOL_OF.get(type(op))
        if sym is not None:
            a, b = ev.static(op.operands[0]), ev.static(op.operands[1])
            if a is None or b is None:
                continue
            c = _constant(apply_binop(sym, a, b), op)
            op.parent.insert_op_before(c, op)
            operands = list(op.operands)
            op.results[0].replace_all_uses_with(c.result)
            op.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
            op.erase()
            for v in operands:
                _erase_dead(v)
        elif isinstance(op, ConstOp) and not isinstance(op.value.owner, arith.ConstantOp):
            value = ev.static(op.value)
            if value is None:
                continue  # CONST-03: reported by the verifier
            c = _constant(value, op)
            op.parent.insert_op_before(c, op)
            old = op.value
            op.operands = [c.result]
            _erase_dead(old)
    return []


@dataclass(frozen=True)
class FoldConstsPass(ModulePass):
    """Fold compile-time integer expressions, keeping const and let names."""

    name = "nem-fold-consts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        diags: list[Diagnostic] = []
        for prog in op.walk():
            if isinstance(prog, ProgramOp):
                diags += fold_program(prog)
        report(ctx, diags)
