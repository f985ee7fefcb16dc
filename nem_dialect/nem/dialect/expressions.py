"""Integer expressions of NEM programs, evaluated once for everyone.

Constants, `let`s, region offsets and loop bounds are `arith` expressions
over block arguments (loop variables) and other constants; the verifier,
the hazard analysis, the bytecode, the text printer and the runtime all read
their values here.  `/` truncates toward zero and `mod` is the truncated
remainder (SPEC §Constant Declarations; CONST-05, D-EXPR-MOD); values leave
the 64-bit range as an `ExprError`.  One `Evaluator` answers static values,
values under loop bindings, and compiled closures over the loop-variable
vector (the execution model, `nem.dialect.semantics`, is where the rest of
a program's meaning is written).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

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


class NotAnExpression(Exception):
    """An operand that is not an integer expression (the op is named in the message)."""


def apply_binop(op: str, a: int, b: int) -> int:
    """`+ - * / mod` on signed 64-bit integers; `/` truncates toward zero and
    `mod` is the truncated remainder (sign of `a`), as `arith.divsi`/`remsi`;
    a result outside 64 bits is an error, never wrapped (D-INT-RANGE)."""
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
        raise ExprError(
            f"{a} {op} {b} overflows: NEM integers are signed 64-bit "
            f"([{INT_MIN}, {INT_MAX}], D-INT-RANGE)",
            None,
        )
    return r


Compiled = int | Callable[[Sequence[int]], int]
"""A compiled expression: an int when loop-invariant, else `f(iv) -> int`
where `iv[k]` is the value of the loop variable at nesting depth k (0-based)."""

TAPE_CONST, TAPE_ARG, TAPE_BINOP, TAPE_FORWARD, TAPE_UNKNOWN = range(5)
TapeNode = tuple[int, Any, int, int]
"""(kind, x, y, z); `x` by kind: the value (TAPE_CONST), the loop variable's
BlockArgument (TAPE_ARG), the operator symbol (TAPE_BINOP), the index of the forwarded
node (TAPE_FORWARD), the op name (TAPE_UNKNOWN).  Plain tuples, not a class: `eval`
interprets tapes at every iteration point of the verifier's enumeration."""
Tape = list[TapeNode]
"""An expression as (kind, x, y, z) nodes in dependency order, each node once,
loop-invariant parts folded to constants; `y`/`z` index earlier nodes."""


@dataclass(frozen=True)
class BuildFacts:
    """What a front end that builds IR bottom-up knows of it once it is done
    (the bytecode reader folds constants as it decodes): each integer
    value's static value (None when it depends on a loop variable, as
    `Evaluator.static` says) and structural key, the deepest expression as
    `expression_depth` counts it, the deepest loop nest, and whether every
    operand is by construction defined before its use in its user's block or
    an enclosing one (TASK-03/NAME-01 cannot fail).  The verifier takes them
    instead of walking the IR again (D-BC-SEED); they describe the IR as
    built and hold only until it is changed."""

    values: list[SSAValue]
    statics: list[int | None]
    keys: list[object]  # each value's `Evaluator.key`, from `key_table`
    key_table: ExprKeys
    max_expr_depth: int
    max_loop_depth: int
    operands_in_scope: bool


class ExprKeys:
    """Structural keys of integer expressions (`Evaluator.key`): a static
    value is its own key (an int); a loop variable, or an operand that is not
    an integer expression, a new object of its own; an operator applied to
    two keys one interned object per (operator, key, key); `nem.const` and
    `nem.let` forward their operand's key.  Equal keys mean the same
    function of the loop variables, which the tapes `eval`, `vector_eval`
    and `forms` interpret compute alike (D-VERIFY-REPEAT); every key object
    hashes by identity, in C."""

    def __init__(self) -> None:
        self._interned: dict[tuple[str, object, object], object] = {}

    def binop(self, sym: str, a: object, b: object) -> object:
        k = (sym, a, b)
        hit = self._interned.get(k)
        if hit is None:
            hit = self._interned[k] = object()
        return hit

    @staticmethod
    def leaf() -> object:
        return object()


class Evaluator:
    """The one evaluator of index SSA values (arith ops, `nem.const`/`nem.let`
    results, loop variables).

    * `static(v)`: the value when it does not depend on a loop variable, else None;
    * `eval(v, env)`: the value under loop-variable bindings `env`;
    * `compile(v, depth_of)`: an int or a closure over the loop-variable vector
      (what the hazard analysis and the runtime evaluate per iteration);
    * `free_loop_args(v)`: the loop variables `v` depends on.

    Nothing here recurses along an expression: static values come from an
    iterative walk of the expression DAG, and a loop-dependent value becomes
    a tape (`tape`) that `eval` interprets and `compile` turns into
    straight-line code, one assignment per node.  A chain of thousands of
    consts costs no recursion depth, and `let a2 = a1 + a1` chains cost linear,
    not exponential, time (issue 11).  Division by zero and 64-bit overflow
    raise `ExprError` (when evaluated, for compiled code).
    """

    def __init__(self) -> None:
        # the per-value memos are keyed by id(value): SSAValue's __hash__ is
        # Python code and dominated these queries; `_alive` keeps every value
        # with a memo entry alive, so no id is reused while the memo holds it
        self._static: dict[int, int | None] = {}
        self._alive: list[SSAValue] = []
        self._tapes: dict[int, Tape] = {}
        self._compiled: dict[SSAValue, Compiled] = {}
        self._depth_of: Mapping[BlockArgument, int] | None = None
        self._free: dict[int, frozenset[BlockArgument]] = {}
        self._keys: dict[int, object] = {}
        self._key_table = ExprKeys()

    def seed(self, facts: BuildFacts) -> None:
        """Take the static values a front end computed while building the
        expressions (D-BC-SEED): `static` then finds them instead of walking
        each expression again.  They must be the values `static` computes,
        which `test_bytecode_seed.py` checks on every program it loads."""
        self._static.update(zip(map(id, facts.values), facts.statics))
        self._keys.update(zip(map(id, facts.values), facts.keys))
        self._key_table = facts.key_table
        self._alive.extend(facts.values)  # the memo's ids stay theirs

    def key(self, value: SSAValue) -> object:
        """`value`'s structural key (`ExprKeys`): equal keys take equal
        values at every iteration point.  Raises ExprError as `static` does."""
        keys = self._keys
        hit = keys.get(id(value))
        if hit is not None:
            return hit
        table = self._key_table
        for v in _new_nodes(value, keys):
            s = self.static(v)  # keeps v alive
            if s is not None:
                k: object = s
            elif type(v) is OpResult:
                operands = _expr_operands(v.op)
                if len(operands) == 2:
                    k = table.binop(
                        SYMBOL_OF[type(v.op)], keys[id(operands[0])], keys[id(operands[1])]
                    )
                elif len(operands) == 1:
                    k = keys[id(operands[0])]
                else:
                    k = table.leaf()
            else:
                k = table.leaf()
            keys[id(v)] = k
        return keys[id(value)]

    def static(self, value: SSAValue) -> int | None:
        memo = self._static
        cached = memo.get(id(value), _MISSING)
        if cached is not _MISSING:
            return cached  # type: ignore[return-value]
        alive = self._alive
        if type(value) is OpResult:  # an operator over known values: no walk
            op = value.op
            operands = _expr_operands(op)
            if len(operands) == 2:
                fa, fb = memo.get(id(operands[0]), _MISSING), memo.get(id(operands[1]), _MISSING)
                if fa is not _MISSING and fb is not _MISSING:
                    alive.append(value)
                    known = memo[id(value)] = (
                        None
                        if fa is None or fb is None
                        else apply_binop(SYMBOL_OF[type(op)], fa, fb)  # type: ignore[arg-type]
                    )
                    return known
        for v in _new_nodes(value, memo):
            alive.append(v)
            # `type(v) is`: xDSL's IR classes are ABCs (slow isinstance); a
            # value is an op result or a block argument (no value)
            if type(v) is not OpResult:
                memo[id(v)] = None
                continue
            op = v.op
            operands = _expr_operands(op)
            if len(operands) == 2:  # an operator (`_node_value`, written out)
                a, b = memo[id(operands[0])], memo[id(operands[1])]
                memo[id(v)] = (
                    None if a is None or b is None else apply_binop(SYMBOL_OF[type(op)], a, b)
                )
            else:
                memo[id(v)] = _node_value(op, [memo[id(o)] for o in operands])
        return memo[id(value)]

    def eval(self, value: SSAValue, env: Mapping[SSAValue, int]) -> int | None:
        s = self.static(value)
        if s is not None or not env:
            return s
        regs: list[int | None] = []
        push = regs.append
        for kind, x, y, z in self.tape(value):
            if kind == TAPE_CONST:
                push(x)
            elif kind == TAPE_ARG:
                push(env.get(x))
            elif kind == TAPE_BINOP:
                a, b = regs[y], regs[z]
                push(None if a is None or b is None else apply_binop(x, a, b))
            elif kind == TAPE_FORWARD:
                push(regs[x])
            else:
                push(None)
        return regs[-1]

    def free_loop_args(self, value: SSAValue) -> frozenset[BlockArgument]:
        """The loop variables (block arguments) that `value` depends on (none
        when it is static)."""
        hit = self._free.get(id(value))
        if hit is None:
            hit = (
                frozenset()
                if self.static(value) is not None
                else frozenset(x for kind, x, _, _ in self.tape(value) if kind == TAPE_ARG)
            )
            self._free[id(value)] = hit  # `value` is alive: static() kept it
        return hit

    def tape(self, root: SSAValue) -> Tape:
        """The tape of `root`, built once."""
        tape = self._tapes.get(id(root))
        if tape is None:
            tape = self._build_tape(root)  # calls static(root), which keeps it alive
            self._tapes[id(root)] = tape
        return tape

    def _build_tape(self, root: SSAValue) -> Tape:
        index: dict[int, int] = {}  # by id: the nodes are alive (reachable from root)
        tape: Tape = []

        def children(v: SSAValue) -> tuple[SSAValue, ...]:
            return () if self.static(v) is not None else _value_operands(v)

        for v in postorder(root, children, index, id):
            s = self.static(v)
            if s is not None:
                node: TapeNode = (TAPE_CONST, s, 0, 0)
            elif type(v) is OpResult:
                operands = _expr_operands(v.op)
                if len(operands) == 2:
                    node = (
                        TAPE_BINOP,
                        SYMBOL_OF[type(v.op)],
                        index[id(operands[0])],
                        index[id(operands[1])],
                    )
                elif len(operands) == 1:
                    node = (TAPE_FORWARD, index[id(operands[0])], 0, 0)
                else:
                    node = (TAPE_UNKNOWN, v.op.name, 0, 0)
            else:  # a block argument
                node = (TAPE_ARG, v, 0, 0)
            index[id(v)] = len(tape)
            tape.append(node)
        return tape

    def compile(self, value: SSAValue, depth_of: Mapping[BlockArgument, int]) -> Compiled:
        """`value` as an int (loop-invariant) or a straight-line closure
        `f(iv) -> int` (one assignment per tape node); `depth_of[arg]` is the
        index in `iv` of each loop variable.  Raises `NotAnExpression` for an
        operand that is not an integer expression and `ExprError` for a
        constant division by zero.  One evaluator compiles for one `depth_of`
        mapping (one program)."""
        if self._depth_of is None:
            self._depth_of = depth_of
        assert self._depth_of is depth_of, "one Evaluator compiles for one loop-depth mapping"
        hit = self._compiled.get(value)
        if hit is not None:
            return hit
        s = self.static(value)
        fn: Compiled = s if s is not None else self._straight_line(self.tape(value), depth_of)
        self._compiled[value] = fn
        return fn

    @staticmethod
    def _straight_line(
        tape: Tape, depth_of: Mapping[BlockArgument, int]
    ) -> Callable[[Sequence[int]], int]:
        lines = []
        for k, (kind, x, y, z) in enumerate(tape):
            if kind == TAPE_CONST:
                rhs = repr(x)
            elif kind == TAPE_ARG:
                if x not in depth_of:
                    raise NotAnExpression("a block argument that is not a loop variable")
                rhs = f"iv[{depth_of[x]}]"
            elif kind == TAPE_FORWARD:
                rhs = f"t{x}"
            elif kind == TAPE_BINOP:
                rhs = f"_bin({x!r}, t{y}, t{z})"
            else:
                raise NotAnExpression(f"cannot evaluate '{x}' as an integer expression")
            lines.append(f"    t{k} = {rhs}\n")
        src = f"def _f(iv):\n{''.join(lines)}    return t{len(tape) - 1}\n"
        scope: dict[str, object] = {"_bin": apply_binop}
        exec(src, scope)  # noqa: S102 - generated from the IR's expression tape
        return scope["_f"]  # type: ignore[return-value]


_MISSING = object()


def run_compiled(fn: Compiled, iv: Sequence[int]) -> int:
    """The value of a compiled expression for loop-variable vector `iv`."""
    return fn if isinstance(fn, int) else fn(iv)


T = TypeVar("T")


def postorder(
    root: T,
    children: Callable[[T], Iterable[T]],
    done: Container[Hashable],
    key: Callable[[T], Hashable] | None = None,
) -> list[T]:
    """The nodes reachable from `root` through `children` whose `key` (the
    node itself by default) is not in `done`, each once, children before
    parents: the iterative walk behind every DAG computation on expressions
    (no recursion depth, no repeated subtrees)."""
    if key is None:
        key = _itself
    # `done` does not change during the walk, so only the root and each
    # child are tested against it; `placed` holds ids (the nodes are alive
    # meanwhile): SSAValue's __hash__ is Python code, the walk's main cost
    order: list[T] = []
    if key(root) in done:
        return order
    placed: set[int] = set()
    stack: list[tuple[T, bool]] = [(root, False)]
    while stack:
        v, expanded = stack.pop()
        if id(v) in placed:
            continue
        if expanded:
            placed.add(id(v))
            order.append(v)
            continue
        stack.append((v, True))
        stack.extend((c, False) for c in children(v) if id(c) not in placed and key(c) not in done)
    return order


def _itself(x: T) -> T:
    return x


def _new_nodes(root: SSAValue, done: Container[int]) -> list[SSAValue]:
    """`postorder(root, _value_operands, done, id)`, the same nodes in the
    same order, with the children and keys written out: the walk behind
    `Evaluator.static` and `key`, which run for every expression of a
    program and mostly find a node or two not yet known."""
    order: list[SSAValue] = []
    if id(root) in done:
        return order
    placed: set[int] = set()
    stack: list[tuple[SSAValue, bool]] = [(root, False)]
    pop, push = stack.pop, stack.append
    while stack:
        v, expanded = pop()
        vid = id(v)
        if vid in placed:
            continue
        if expanded:
            placed.add(vid)
            order.append(v)
            continue
        push((v, True))
        if type(v) is OpResult:
            for c in _expr_operands(v.op):
                cid = id(c)
                if cid not in placed and cid not in done:
                    push((c, False))
    return order


def _value_operands(v: SSAValue) -> tuple[SSAValue, ...]:
    # `type(v) is`, not isinstance: xDSL's IR classes are ABCs, whose
    # isinstance runs Python code, and OpResult has no subclasses
    return _expr_operands(v.op) if type(v) is OpResult else ()


def _node_value(op: Operation, args: list[int | None]) -> int | None:
    """The value of expression node `op` given its operands' values."""
    if type(op) is arith.ConstantOp:
        return op.value.value.data if isinstance(op.value, IntegerAttr) else None
    if len(args) == 2:
        a, b = args
        return None if a is None or b is None else apply_binop(SYMBOL_OF[type(op)], a, b)
    if len(args) == 1:
        return args[0]
    return None


Depths = dict[int, tuple[int, SSAValue]]
"""Expression depths (`expression_depth`) by the id of each value, with the
value, which the entry keeps alive (so the id stays its own): a value's
`__hash__` is Python code, and this runs for every expression node."""

_NO_DEPTH = (0, None)


def expression_depth(op: Operation, depths: Depths) -> int | None:
    """The dependency depth of `op`'s result when `op` is an expression node
    (operators count 1; `nem.const`/`nem.let` forward their operand's depth,
    so names do not reset it), recorded in `depths`; None for other ops.
    Operands must have been seen first (ops in program order).  Walkers that
    recurse along an expression (the printer) are bounded by MAX_EXPR_DEPTH,
    which the verifier enforces (D-LIMITS)."""
    operands = _expr_operands(op)
    if not operands:
        return None
    get = depths.get
    if len(operands) == 2:  # an operator (`_expr_operands`): counts 1
        a, b = get(id(operands[0]), _NO_DEPTH)[0], get(id(operands[1]), _NO_DEPTH)[0]
        d = (a if a > b else b) + 1
    else:  # a name forwards its operand's depth
        d = get(id(operands[0]), _NO_DEPTH)[0]
    result = _item(op.results, 0)
    depths[id(result)] = (d, result)
    return d


def _expr_operands(op: Operation) -> tuple[SSAValue, ...]:
    """The integer operands an expression node's value depends on: both
    operands of a binary op, the forwarded operand of `nem.const`/`nem.let`,
    none for a literal or anything else (whose value is unknown)."""
    # this runs for every op of every static query: the op's class and name
    # first, the operands (a view per access) only for an expression node
    if type(op) in SYMBOL_OF:
        operands = tuple(op.operands)
        return _item(operands, 0), _item(operands, 1)
    if op.name in _FORWARDING and len(op.results) == 1:
        operands = tuple(op.operands)
        if len(operands) == 1:
            return operands
    return ()


_item = tuple.__getitem__


_FORWARDING = frozenset({"nem.const", "nem.let"})
FORWARDING_NAMES = _FORWARDING
"""The ops that forward an operand's value under a name (`_expr_operands`):
with the operators (`SYMBOL_OF`), the only ops `expression_depth` counts."""
