"""Integer expressions: the one home of their semantics.

`.nem` expressions become `arith` ops on `index` values.  The parser (for
static shapes), the folding pass, the verifiers and the runtime all evaluate
them through `apply_binop`, so `/` truncates toward zero and `mod` is the
truncated remainder everywhere (CONST-05, decision D-EXPR-MOD), and every
value is a signed 64-bit integer (D-INT-RANGE).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue

from nem.dialect.limits import INT_MAX, INT_MIN

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
    """Division or `mod` by zero, or a value outside the 64-bit range
    (D-INT-RANGE); the caller attaches the location.  `rule` is the rule id
    the error breaks, when there is one."""

    def __init__(self, message: str, rule: str | None = "CONST-05"):
        super().__init__(message)
        self.rule = rule


def apply_binop(op: str, a: int, b: int) -> int:
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    else:
        if b == 0:
            raise ExprError(f"{'division' if op == '/' else 'mod'} by zero")
        q = abs(a) // abs(b)
        q = q if (a >= 0) == (b >= 0) else -q
        r = q if op == "/" else a - q * b
    if r < INT_MIN or r > INT_MAX:
        raise ExprError(f"{a} {op} {b} overflows: NEM integers are signed 64-bit "
                        f"([{INT_MIN}, {INT_MAX}], D-INT-RANGE)", None)
    return r


class Evaluator:
    """Evaluates index SSA values, memoizing loop-invariant results.

    `env` maps loop-variable block arguments to their current values;
    values that depend on a loop variable missing from `env` evaluate to
    None.  Let-bound and const values are followed through their ops.

    The walk is iterative over the expression DAG, each node evaluated once
    per call: a chain of thousands of consts or lets costs no recursion
    depth, and `let a2 = a1 + a1` chains cost linear, not exponential, time.
    """

    def __init__(self) -> None:
        self._static: dict[SSAValue, int | None] = {}

    def static(self, value: SSAValue) -> int | None:
        """The value if it does not depend on any loop variable, else None."""
        cached = self._static.get(value, _MISSING)
        if cached is not _MISSING:
            return cached  # type: ignore[return-value]
        return self._walk(value, {}, self._static)

    def eval(self, value: SSAValue, env: Mapping[SSAValue, int]) -> int | None:
        """The value under loop-variable bindings `env`."""
        s = self.static(value)
        if s is not None or not env:
            return s
        return self._walk(value, env, {})

    def _walk(self, root: SSAValue, env: Mapping[SSAValue, int],
              memo: dict[SSAValue, int | None]) -> int | None:
        static = self._static
        stack = [root]
        while stack:
            value = stack[-1]
            if value in memo:
                stack.pop()
                continue
            if memo is not static:
                s = static.get(value, _MISSING)
                if s is _MISSING:
                    s = self.static(value)
                if s is not None:
                    memo[value] = s  # type: ignore[assignment]
                    stack.pop()
                    continue
            if isinstance(value, BlockArgument):
                memo[value] = env.get(value)
                stack.pop()
                continue
            op = value.owner
            operands = _expr_operands(op)
            missing = [v for v in operands if v not in memo]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            if isinstance(op, arith.ConstantOp):
                assert isinstance(op.value, IntegerAttr)
                memo[value] = op.value.value.data
            elif len(operands) == 2:
                a, b = memo[operands[0]], memo[operands[1]]
                memo[value] = None if a is None or b is None else \
                    apply_binop(SYMBOL_OF[type(op)], a, b)
            elif len(operands) == 1:
                memo[value] = memo[operands[0]]
            else:
                memo[value] = None
        return memo[root]


def _expr_operands(op: Operation) -> tuple[SSAValue, ...]:
    """The integer operands an expression node's value depends on: both
    operands of a binary op, the forwarded operand of `nem.const`/`nem.let`,
    none for a literal or anything else (whose value is unknown)."""
    if type(op) in SYMBOL_OF:
        return (op.operands[0], op.operands[1])
    if len(op.operands) == 1 and op.name in ("nem.const", "nem.let"):
        return (op.operands[0],)
    return ()


_MISSING = object()
