"""Integer expressions: the one home of their semantics.

`.nem` expressions become `arith` ops on `index` values.  The parser (for
static shapes), the folding pass, the verifiers and the runtime all evaluate
them through `apply_binop`, so `/` truncates toward zero and `mod` is the
truncated remainder everywhere (CONST-05, decision D-EXPR-MOD), and every
value is a signed 64-bit integer (D-INT-RANGE).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from typing import TypeVar

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

    Nothing here recurses along an expression: static values come from an
    iterative walk of the expression DAG, and a loop-dependent value is
    compiled once into a flat tape (its nodes in dependency order, each node
    once, loop-invariant parts folded) that `eval` runs for each `env`.  A
    chain of thousands of consts or lets costs no recursion depth, and
    `let a2 = a1 + a1` chains cost linear, not exponential, time.
    """

    def __init__(self) -> None:
        self._static: dict[SSAValue, int | None] = {}
        self._tapes: dict[SSAValue, list[tuple]] = {}

    def static(self, value: SSAValue) -> int | None:
        """The value if it does not depend on any loop variable, else None."""
        cached = self._static.get(value, _MISSING)
        if cached is not _MISSING:
            return cached  # type: ignore[return-value]
        memo = self._static
        for v in postorder(value, _value_operands, memo):
            memo[v] = None if isinstance(v, BlockArgument) else \
                _node_value(v.owner, [memo[o] for o in _expr_operands(v.owner)])
        return memo[value]

    def eval(self, value: SSAValue, env: Mapping[SSAValue, int]) -> int | None:
        """The value under loop-variable bindings `env`."""
        s = self.static(value)
        if s is not None or not env:
            return s
        tape = self.tape(value)
        regs: list[int | None] = []
        push = regs.append
        for kind, x, y, z in tape:
            if kind == _CONST:
                push(x)
            elif kind == _ARG:
                push(env.get(x))
            elif kind == _BINOP:
                a, b = regs[y], regs[z]
                push(None if a is None or b is None else apply_binop(x, a, b))
            elif kind == _FORWARD:
                push(regs[x])
            else:
                push(None)
        return regs[-1]

    def loop_vars(self, value: SSAValue) -> set[BlockArgument]:
        """The loop variables `value` depends on (none when it is static)."""
        if self.static(value) is not None:
            return set()
        return {x for kind, x, _, _ in self.tape(value) if kind == _ARG}

    def tape(self, root: SSAValue) -> list[tuple]:
        """The tape of `root`: (kind, x, y, z) nodes in dependency order."""
        tape = self._tapes.get(root)
        if tape is None:
            tape = self._tapes[root] = self._build_tape(root)
        return tape

    def _build_tape(self, root: SSAValue) -> list[tuple]:
        index: dict[SSAValue, int] = {}
        tape: list[tuple] = []

        def children(v: SSAValue) -> tuple[SSAValue, ...]:
            return () if self.static(v) is not None else _value_operands(v)

        for v in postorder(root, children, index):
            s = self.static(v)
            if s is not None:
                node: tuple = (_CONST, s, 0, 0)
            elif isinstance(v, BlockArgument):
                node = (_ARG, v, 0, 0)
            else:
                op = v.owner
                operands = _expr_operands(op)
                if len(operands) == 2:
                    node = (_BINOP, SYMBOL_OF[type(op)], index[operands[0]], index[operands[1]])
                elif len(operands) == 1:
                    node = (_FORWARD, index[operands[0]], 0, 0)
                else:
                    node = (_UNKNOWN, 0, 0, 0)
            index[v] = len(tape)
            tape.append(node)
        return tape


T = TypeVar("T")


def postorder(root: T, children: Callable[[T], Iterable[T]], done: Container[T]) -> list[T]:
    """The nodes reachable from `root` through `children` that are not in
    `done`, each once, children before parents: the iterative walk behind
    every DAG computation here (no recursion depth, no repeated subtrees)."""
    order: list[T] = []
    placed: set[T] = set()
    stack: list[tuple[T, bool]] = [(root, False)]
    while stack:
        v, expanded = stack.pop()
        if v in done or v in placed:
            continue
        if expanded:
            placed.add(v)
            order.append(v)
            continue
        stack.append((v, True))
        stack.extend((c, False) for c in children(v) if c not in done and c not in placed)
    return order


def _value_operands(v: SSAValue) -> tuple[SSAValue, ...]:
    return () if isinstance(v, BlockArgument) else _expr_operands(v.owner)


_CONST, _ARG, _BINOP, _FORWARD, _UNKNOWN = range(5)


def compile_function(ev: Evaluator, value: SSAValue, arg_ref: Callable[[BlockArgument], str],
                     param: str = "env", nullable: bool = True,
                     names: dict[str, object] | None = None):
    """`value` as an int (loop-invariant), or a straight-line Python function
    of one parameter `param`: one assignment per node of its tape, each node
    once, so a shared or deep expression costs linear code and no nesting
    (the runtime's and the hazard analysis's compiled offsets).  `arg_ref(a)`
    is the Python expression reading loop variable `a` from `param`;
    `nullable`: an unknown variable (None) makes the result None, as
    `Evaluator.eval`.  `/` and `mod` follow `apply_binop`.  None when the
    value depends on something that is not an integer expression."""
    s = ev.static(value)
    if s is not None:
        return s
    tape = ev.tape(value)
    lines = []
    for k, (kind, x, y, z) in enumerate(tape):
        if kind == _CONST:
            rhs = repr(x)
        elif kind == _ARG:
            rhs = arg_ref(x)
        elif kind == _FORWARD:
            rhs = f"t{x}"
        elif kind == _BINOP:
            rhs = f"t{y} {x} t{z}" if x in "+-*" else f"_bin({x!r}, t{y}, t{z})"
            if nullable:
                rhs = f"None if t{y} is None or t{z} is None else {rhs}"
        else:
            return None
        lines.append(f"    t{k} = {rhs}\n")
    src = f"def _f({param}):\n{''.join(lines)}    return t{len(tape) - 1}\n"
    scope: dict[str, object] = {"_bin": apply_binop, **(names or {})}
    exec(src, scope)  # noqa: S102 - generated from the IR above
    return scope["_f"]


def _node_value(op: Operation, args: list[int | None]) -> int | None:
    """The value of expression node `op` given its operands' values."""
    if isinstance(op, arith.ConstantOp):
        return op.value.value.data if isinstance(op.value, IntegerAttr) else None
    if len(args) == 2:
        a, b = args
        return None if a is None or b is None else apply_binop(SYMBOL_OF[type(op)], a, b)
    if len(args) == 1:
        return args[0]
    return None


def expression_depth(op: Operation, depths: dict[SSAValue, int]) -> int | None:
    """The dependency depth of `op`'s result when `op` is an expression node
    (operators count 1; `nem.const`/`nem.let` forward their operand's depth,
    so names do not reset it), recorded in `depths`; None for other ops.
    Operands must have been seen first (ops in program order).  Walkers that
    recurse along an expression (printer, runtime compiler, hazard analysis)
    are bounded by MAX_EXPR_DEPTH, which the verifier enforces (D-LIMITS)."""
    operands = _expr_operands(op)
    if not operands:
        return None
    d = max(depths.get(v, 0) for v in operands) + (1 if type(op) in SYMBOL_OF else 0)
    depths[op.results[0]] = d
    return d


def _expr_operands(op: Operation) -> tuple[SSAValue, ...]:
    """The integer operands an expression node's value depends on: both
    operands of a binary op, the forwarded operand of `nem.const`/`nem.let`,
    none for a literal or anything else (whose value is unknown)."""
    if type(op) in SYMBOL_OF:
        return (op.operands[0], op.operands[1])
    if len(op.operands) == 1 and len(op.results) == 1 and op.name in ("nem.const", "nem.let"):
        return (op.operands[0],)
    return ()


_MISSING = object()
