"""Integer expressions: the one home of their semantics.

`.nem` expressions become `arith` ops on `index` values.  The parser (for
static shapes), the folding pass, the verifiers and the runtime all evaluate
them through `apply_binop`, so `/` truncates toward zero and `mod` is the
truncated remainder everywhere (CONST-05, decision D-EXPR-MOD).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue

BINOPS: dict[str, type[Operation]] = {
    "+": arith.AddiOp,
    "-": arith.SubiOp,
    "*": arith.MuliOp,
    "/": arith.DivSIOp,
    "mod": arith.RemSIOp,
}
SYMBOL_OF: dict[type[Operation], str] = {v: k for k, v in BINOPS.items()}
PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "mod": 2}


class ExprError(Exception):
    """Division or `mod` by zero; the caller attaches the location and rule."""


def apply_binop(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise ExprError(f"{'division' if op == '/' else 'mod'} by zero")
    q = abs(a) // abs(b)
    q = q if (a >= 0) == (b >= 0) else -q
    return q if op == "/" else a - q * b


class Evaluator:
    """Evaluates index SSA values, memoizing loop-invariant results.

    `env` maps loop-variable block arguments to their current values;
    values that depend on a loop variable missing from `env` evaluate to
    None.  Let-bound and const values are followed through their ops.
    """

    def __init__(self) -> None:
        self._static: dict[SSAValue, int | None] = {}

    def static(self, value: SSAValue) -> int | None:
        """The value if it does not depend on any loop variable, else None."""
        cached = self._static.get(value, _MISSING)
        if cached is not _MISSING:
            return cached  # type: ignore[return-value]
        result = self._eval(value, {}, self.static)
        self._static[value] = result
        return result

    def eval(self, value: SSAValue, env: Mapping[SSAValue, int]) -> int | None:
        """The value under loop-variable bindings `env`."""
        if not env:
            return self.static(value)
        s = self.static(value)
        if s is not None:
            return s
        return self._eval(value, env, lambda v: self.eval(v, env))

    @staticmethod
    def _eval(value: SSAValue, env: Mapping[SSAValue, int],
              rec: Callable[[SSAValue], int | None]) -> int | None:
        if isinstance(value, BlockArgument):
            return env.get(value)
        op = value.owner
        if isinstance(op, arith.ConstantOp):
            assert isinstance(op.value, IntegerAttr)
            return op.value.value.data
        sym = SYMBOL_OF.get(type(op))
        if sym is not None:
            a, b = rec(op.operands[0]), rec(op.operands[1])
            if a is None or b is None:
                return None
            return apply_binop(sym, a, b)
        # nem.const / nem.let forward their single operand
        if len(op.operands) == 1 and op.name in ("nem.const", "nem.let"):
            return rec(op.operands[0])
        return None


_MISSING = object()
