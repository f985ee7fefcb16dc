"""The NEM execution model, written once.

Everything a NEM program *means* when it runs is stated here as code, and the
static checker (`nem.dialect.verifier`, `nem.analysis.happens_before`,
`nem.analysis.capacity`, the device and placement passes), the reference
runtime (`nem.runtime`: scheduler, engine, kernels, memory, checks, API) and
the lowering import it.  When two of them disagree, one of them holds a
second copy of a fact in this file: remove the copy (docs/design.md,
"Execution model"; decisions D-SEM-* in docs/spec-decisions.md).

* **Element types** (`ELEM_TYPES`): spec name, bit width, float/signed, the
  xDSL type, the MLIR spelling and the numpy / ml_dtypes dtype.
* **What a transfer moves** (`moved_bytes`, `fills_range`): a typed region
  its elements, an untyped one its byte range (D-SEM-TRANSFER).
* **Integer expressions** (`apply_binop`, `Evaluator`): `/` truncates toward
  zero, `mod` is the truncated remainder (D-EXPR-MOD); one evaluator for
  static values, values under loop bindings, and compiled closures over the
  loop-variable vector (hazard analysis, runtime).
* **Streams, loops and ends** (`LOOP_END`, `PROGRAM_END`, `ITERATION_END`):
  the program body and each loop iteration are instruction streams; a
  `wait`/`.sync` blocks its own stream; `endloop` waits for every iteration
  to be *issued and past its waits* but not for its tasks to complete
  (D-SEM-ENDLOOP); the program's end waits for every task (D-SEM-PROGRAM-END);
  an iteration ends when its stream ended and all it issued completed.
* **The `@max_in_flight(N)` window** (`max_in_flight`, `window_error`,
  `window_orders`, `complete_at_loop_end`): iteration `j` opens once every
  iteration `<= j - N` has completed (LOOP-01/02/05/06, D-HAZ-PIPE).
* **Instances of loop-body declarations** (`loop_copies`, `instance_index`):
  a buffer declared in a loop body has one instance per iteration that can be
  in flight (D-SEM-INSTANCES).
* **Which units may run a task** (`eligible_units`, `bind_unit`), on a given
  device (D-SEM-UNITS, RES-03/04/05/07).
* **Memory layout of a level** (`layout`): the placement the capacity check
  verifies is the one the runtime uses (D-SEM-LAYOUT, DEV-16).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import ml_dtypes
import numpy as np
import numpy.typing as npt
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerAttr,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute, BlockArgument, Operation, OpResult, SSAValue

from nem.dialect.limits import INT_MAX, INT_MIN

if TYPE_CHECKING:
    import islpy as isl

    from nem.dialect.ops import LoopOp, TaskOp

# ---------------------------------------------------------------------------
# Element types (SPEC §3; TYPE-01, TYPE-02, TYPE-05; D-RT-I4)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ElemType:
    """One element type of the spec.  `dtype` is the numpy dtype values have
    in kernels and typed views (`i4` is unpacked to int8 values in [-8, 7];
    in memory it is packed two per byte, D-RT-I4)."""

    name: str
    bits: int
    is_float: bool
    signed: bool
    dtype: np.dtype
    mlir: str

    @cached_property
    def xdsl(self) -> Attribute:
        if self.name == "f16":
            return Float16Type()
        if self.name == "bf16":
            return BFloat16Type()
        if self.name == "f32":
            return Float32Type()
        return IntegerType(self.bits, Signedness.SIGNLESS if self.signed else Signedness.UNSIGNED)

    @property
    def is_int(self) -> bool:
        return not self.is_float

    def int_range(self) -> tuple[int, int]:
        """The integer range of an integer type."""
        if self.signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1


def _e(name: str, bits: int, is_float: bool, signed: bool, dtype: npt.DTypeLike,
       mlir: str | None = None) -> ElemType:
    return ElemType(name, bits, is_float, signed, np.dtype(dtype), mlir or name)


ELEM_TYPES: dict[str, ElemType] = {e.name: e for e in (
    _e("i4", 4, False, True, np.int8),
    _e("i8", 8, False, True, np.int8),
    _e("i16", 16, False, True, "<i2"),
    _e("i32", 32, False, True, "<i4"),
    _e("u8", 8, False, False, np.uint8, "ui8"),
    _e("u16", 16, False, False, "<u2", "ui16"),
    _e("u32", 32, False, False, "<u4", "ui32"),
    _e("f16", 16, True, True, "<f2"),
    _e("bf16", 16, True, True, ml_dtypes.bfloat16),
    _e("f32", 32, True, True, "<f4"),
)}
"""The spec's element types in its order of listing (TYPE-01)."""

ELEM_NAMES: tuple[str, ...] = tuple(ELEM_TYPES)
INT_ELEMS: tuple[str, ...] = tuple(n for n, e in ELEM_TYPES.items() if e.is_int)
FLOAT_ELEMS: tuple[str, ...] = tuple(n for n, e in ELEM_TYPES.items() if e.is_float)
ELEM_BITS: dict[str, int] = {n: e.bits for n, e in ELEM_TYPES.items()}
ELEM_DTYPES: dict[str, np.dtype] = {n: e.dtype for n, e in ELEM_TYPES.items()}
_BY_XDSL: dict[Attribute, str] = {e.xdsl: n for n, e in ELEM_TYPES.items()}


def elem_of_xdsl(attr: Attribute) -> str | None:
    """The spec's name of an xDSL builtin element type, or None."""
    return _BY_XDSL.get(attr)


def elem_bytes(name: str, count: int) -> int:
    """Bytes that `count` packed elements occupy (TYPE-02: ceil for sub-byte types)."""
    return -(-count * ELEM_TYPES[name].bits // 8)


# ---------------------------------------------------------------------------
# What a transfer moves (SPEC §3 Region Type Syntax, §5 transfer.async; D-SEM-TRANSFER)
# ---------------------------------------------------------------------------


def fills_range(elem: str, shape: Sequence[int], strides: Sequence[int] | None,
                extent: int) -> bool:
    """Whether a typed region's elements are exactly its byte range
    `[offset, offset + extent)`: row-major over its shape (no strides, or
    strides that step as row-major ones do; a dimension of size 1 steps
    nothing) and no byte of the extent left over (for i4: whole bytes).
    Such a region moves the same bytes typed or not; only such a typed
    region may face an untyped one in a transfer (TASK-07)."""
    if strides is not None:
        step = 1
        for d in reversed(range(len(shape))):
            if shape[d] != 1 and strides[d] != step:
                return False
            step *= shape[d]
    count = math.prod(shape)
    return count * ELEM_TYPES[elem].bits == 8 * extent


def moved_bytes(elem: str | None, shape: Sequence[int] | None,
                strides: Sequence[int] | None, extent: int) -> npt.NDArray[np.int64]:
    """The bytes of a region a transfer reads (source) or writes
    (destination), as offsets from the region's offset, in the order they
    are moved: an untyped region (or a typed one without a shape) its whole
    range; a typed region its elements in row-major order of its shape
    (addressed by its strides, else row-major), each element's bytes in
    address order (i4: the bytes holding its elements' nibbles).  The
    gaps between strided elements and any extent past the last element are
    not moved.  The runtime copies these (`nem.runtime.engine.prepare_move`);
    the checker's access range `[offset, offset + extent)` holds them
    (D-HAZ-ACCESS)."""
    if elem is None or not shape:
        return np.arange(extent, dtype=np.int64)
    if strides is None:
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    grid = np.indices(shape).reshape(len(shape), -1)
    index = np.asarray(strides, dtype=np.int64) @ grid        # element index, row-major order
    bits = ELEM_TYPES[elem].bits
    if bits < 8:     # each byte holding an element's nibble, once, in element order
        byte = index * bits // 8
        _, first = np.unique(byte, return_index=True)
        out: npt.NDArray[np.int64] = byte[np.sort(first)]
        return out
    size = bits // 8
    return (index[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)


# ---------------------------------------------------------------------------
# Integer expressions (SPEC §Constant Declarations; CONST-05, D-EXPR-MOD)
# ---------------------------------------------------------------------------

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
        raise ExprError(f"{a} {op} {b} overflows: NEM integers are signed 64-bit "
                        f"([{INT_MIN}, {INT_MAX}], D-INT-RANGE)", None)
    return r


Compiled = int | Callable[[Sequence[int]], int]
"""A compiled expression: an int when loop-invariant, else `f(iv) -> int`
where `iv[k]` is the value of the loop variable at nesting depth k (0-based)."""

_CONST, _ARG, _BINOP, _FORWARD, _UNKNOWN = range(5)
TapeNode = tuple[int, Any, int, int]
"""(kind, x, y, z); `x` by kind: the value (_CONST), the loop variable's
BlockArgument (_ARG), the operator symbol (_BINOP), the index of the forwarded
node (_FORWARD), the op name (_UNKNOWN).  Plain tuples, not a class: `eval`
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
        for v in postorder(value, _value_operands, keys, id):
            s = self.static(v)  # keeps v alive
            if s is not None:
                k: object = s
            elif type(v) is OpResult:
                operands = _expr_operands(v.op)
                if len(operands) == 2:
                    k = table.binop(SYMBOL_OF[type(v.op)], keys[id(operands[0])],
                                    keys[id(operands[1])])
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
        for v in postorder(value, _value_operands, memo, id):
            alive.append(v)
            # `type(v) is`: xDSL's IR classes are ABCs (slow isinstance); a
            # value is an op result or a block argument (no value)
            memo[id(v)] = _node_value(v.op, [memo[id(o)] for o in _expr_operands(v.op)]) \
                if type(v) is OpResult else None
        return memo[id(value)]

    def eval(self, value: SSAValue, env: Mapping[SSAValue, int]) -> int | None:
        s = self.static(value)
        if s is not None or not env:
            return s
        regs: list[int | None] = []
        push = regs.append
        for kind, x, y, z in self.tape(value):
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

    def free_loop_args(self, value: SSAValue) -> frozenset[BlockArgument]:
        """The loop variables (block arguments) that `value` depends on (none
        when it is static)."""
        hit = self._free.get(id(value))
        if hit is None:
            hit = frozenset() if self.static(value) is not None else \
                frozenset(x for kind, x, _, _ in self.tape(value) if kind == _ARG)
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
                node: TapeNode = (_CONST, s, 0, 0)
            elif type(v) is OpResult:
                operands = _expr_operands(v.op)
                if len(operands) == 2:
                    node = (_BINOP, SYMBOL_OF[type(v.op)], index[id(operands[0])],
                            index[id(operands[1])])
                elif len(operands) == 1:
                    node = (_FORWARD, index[id(operands[0])], 0, 0)
                else:
                    node = (_UNKNOWN, v.op.name, 0, 0)
            else:  # a block argument
                node = (_ARG, v, 0, 0)
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
    def _straight_line(tape: Tape, depth_of: Mapping[BlockArgument, int]
                       ) -> Callable[[Sequence[int]], int]:
        lines = []
        for k, (kind, x, y, z) in enumerate(tape):
            if kind == _CONST:
                rhs = repr(x)
            elif kind == _ARG:
                if x not in depth_of:
                    raise NotAnExpression("a block argument that is not a loop variable")
                rhs = f"iv[{depth_of[x]}]"
            elif kind == _FORWARD:
                rhs = f"t{x}"
            elif kind == _BINOP:
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


def postorder(root: T, children: Callable[[T], Iterable[T]], done: Container[Hashable],
              key: Callable[[T], Hashable] | None = None) -> list[T]:
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


def expression_depth(op: Operation, depths: dict[SSAValue, int]) -> int | None:
    """The dependency depth of `op`'s result when `op` is an expression node
    (operators count 1; `nem.const`/`nem.let` forward their operand's depth,
    so names do not reset it), recorded in `depths`; None for other ops.
    Operands must have been seen first (ops in program order).  Walkers that
    recurse along an expression (the printer) are bounded by MAX_EXPR_DEPTH,
    which the verifier enforces (D-LIMITS)."""
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
    # `_operands` is the operand tuple `op.operands` wraps: this runs for every
    # expression node of every static query, where the wrapper dominated
    # (and tuple's own indexing, not SSAValues' that type-checks the index)
    operands = op._operands  # noqa: SLF001 - hot path
    if type(op) in SYMBOL_OF:
        return _item(operands, 0), _item(operands, 1)
    if len(operands) == 1 and op.name in _FORWARDING and len(op.results) == 1:
        return (_item(operands, 0),)
    return ()


_item = tuple.__getitem__


_FORWARDING = frozenset({"nem.const", "nem.let"})


# ---------------------------------------------------------------------------
# Streams, loops and ends (SPEC §Execution Semantics, §Loops; IA §4.5)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockEnd:
    """What reaching the end of a block instance waits for.

    `stream_waits`: the statement after the block (or the block's completion)
    waits until every instruction stream the block opened has reached its end
    (every statement issued, every `wait` and `.sync` passed).
    `drains`: it also waits until every task the block issued, in nested
    blocks too, has completed."""

    what: str
    stream_waits: bool
    drains: bool
    decision: str


LOOP_END = BlockEnd("endloop", stream_waits=True, drains=False, decision="D-SEM-ENDLOOP")
"""`endloop` is not a barrier: the statements after a loop are issued once every
iteration has been issued and passed its waits; tasks of the last N iterations
that no wait covered may still run (D-SEM-ENDLOOP, = D-HAZ-ENDLOOP)."""

ITERATION_END = BlockEnd("iteration", stream_waits=True, drains=True, decision="D-HAZ-PIPE")
"""An iteration completes when its stream has ended and everything it issued
(nested loops included) has completed; only then may iteration i + N open (LOOP-06)."""

PROGRAM_END = BlockEnd("program end", stream_waits=True, drains=True,
                       decision="D-SEM-PROGRAM-END")
"""The program completes when every task it issued has completed; results are
read (by the host, `--output`, the API) only then."""


def max_in_flight(loop: LoopOp) -> int:
    """N of the loop's `@max_in_flight(N)`; 1 without it (LOOP-02).  An N < 1 is
    a LOOP-03 error (`window_error`, raised by the `nem.loop` op verifier and
    reported, located, by the static verifier); the
    execution model never sees such a loop."""
    from nem.dialect.attributes import MaxInFlightAttr  # attributes imports this module

    for d in loop.decorator_list():
        if isinstance(d, MaxInFlightAttr):
            return d.n.data
    return 1


def window_error(loop: LoopOp) -> str | None:
    """The LOOP-03 message when the loop's `@max_in_flight(N)` has N < 1."""
    n = max_in_flight(loop)
    return f"@max_in_flight({n}) must be at least 1" if n < 1 else None


def may_open(next_ord: int, first_incomplete_ord: int, n: int) -> bool:
    """Iteration `next_ord` (0-based) may open when every iteration before
    `first_incomplete_ord` has completed: at most N are active (LOOP-01/05)."""
    return next_ord - first_incomplete_ord < n


def window_orders(distance: int, n: int) -> bool:
    """Is every task of iteration i complete before iteration i + distance
    starts?  Yes iff distance >= N (LOOP-06, D-HAZ-PIPE)."""
    return distance >= n


def complete_at_loop_end(ord_: int, trip: int, n: int) -> bool:
    """Is iteration `ord_` (0-based) of a loop of `trip` iterations complete when
    the statement after `endloop` is issued, without any wait covering it?
    Iteration trip - 1 opened, so iterations <= trip - 1 - N completed."""
    return LOOP_END.drains or window_orders(trip - 1 - ord_, n)


def window_orders_set(distance: isl.PwAff, n: int) -> isl.Set:
    """Symbolic twin of `window_orders` (D-HAZ-SYMBOLIC): where `distance`
    (a quasi-affine function of iteration ordinals) is >= N."""
    return (distance - n).nonneg_set()


def complete_at_loop_end_set(ord_: isl.PwAff, trip: isl.PwAff, n: int) -> isl.Set:
    """Symbolic twin of `complete_at_loop_end`: where iteration `ord_` of a loop
    of `trip` iterations is complete after `endloop`."""
    if LOOP_END.drains:  # pragma: no cover - endloop is not a barrier
        return ord_.domain()
    return window_orders_set(trip - 1 - ord_, n)


def loop_window(n: int, trip: int | None) -> int:
    """Iterations of one loop instance that can be active at once: min(N, trip)."""
    return max(1, n if trip is None else min(n, trip))


# ---------------------------------------------------------------------------
# Instances of loop-body declarations (D-SEM-INSTANCES)
# ---------------------------------------------------------------------------


def loop_copies(windows: Iterable[int]) -> int:
    """Instances of a buffer declared in a loop body: one per combination of
    concurrently active iterations of its enclosing loops, i.e. the product of
    their `loop_window`s."""
    n = 1
    for w in windows:
        n *= w
    return n


def static_windows(loops: Sequence[LoopOp], ev: Evaluator) -> tuple[int, ...]:
    """`loop_window` of each loop of a declaration's enclosing loops, from their
    static trip counts (N when a bound depends on an outer loop variable)."""
    out = []
    for lp in loops:
        try:
            lo, hi = ev.static(lp.lower), ev.static(lp.upper)
        except ExprError:
            lo = hi = None
        trip = hi - lo + 1 if lo is not None and hi is not None else None
        out.append(loop_window(max_in_flight(lp), trip))
    return tuple(out)


def instance_index(ords: Sequence[int], windows: Sequence[int]) -> int:
    """The instance a loop-body declaration uses in the iteration with ordinals
    `ords` (0-based, outermost first): `ord mod window` per loop, mixed radix.
    Iterations sharing an instance are ordered by the window (i and i + N)."""
    k = 0
    for o, w in zip(ords, windows):
        k = k * w + o % w
    return k


def same_instance_set(ords_a: Sequence[isl.PwAff], ords_b: Sequence[isl.PwAff],
                      windows: Sequence[int], universe: isl.Set) -> isl.Set:
    """Symbolic twin of `instance_index`: where iterations `ords_a` and
    `ords_b` (ordinals, never negative) use the same instance.  The index is
    mixed radix with digits `ord mod window`, so equal iff every digit is."""
    out = universe
    for a, b, w in zip(ords_a, ords_b, windows):
        if w > 1:
            out = out & a.mod_val(w).eq_set(b.mod_val(w))
    return out


# ---------------------------------------------------------------------------
# Memory layout of one level (DEV-16, D-SEM-LAYOUT)
# ---------------------------------------------------------------------------


K = TypeVar("K")


@dataclass(frozen=True)
class Slot(Generic[K]):
    """One buffer instance placed in a level: `key` identifies it for the caller."""

    key: K
    offset: int
    size: int
    align: int

    @property
    def end(self) -> int:
        return self.offset + self.size


def layout(items: Sequence[tuple[K, int, int]]) -> list[Slot[K]]:
    """Place `(key, size, align)` buffer instances of one level: by decreasing
    `align` (declaration order among equals), each at the next multiple of its
    align.  Buffers are opaque (BUF-07), so the order is free; decreasing
    alignment avoids most padding.  The capacity check (DEV-16) verifies this
    layout and the runtime allocates it, so the two agree byte for byte."""
    order = sorted(range(len(items)), key=lambda k: -max(1, items[k][2]))
    out: list[Slot[K] | None] = [None] * len(items)
    top = 0
    for k in order:
        key, size, align = items[k]
        align = max(1, align)
        off = -(-top // align) * align
        out[k] = Slot(key, off, size, align)
        top = off + size
    return [s for s in out if s is not None]


class Placement(Protocol):
    """Anything placed in a level's memory (a `Slot`, a memory map's entry)."""

    @property
    def end(self) -> int: ...


def footprint(slots: Iterable[Placement]) -> int:
    """The bytes a level's placed buffers span: the end of the last one."""
    return max((s.end for s in slots), default=0)


# ---------------------------------------------------------------------------
# Execution units (SPEC §1 "Resource Classes and Task Mapping"; RES-03..07)
# ---------------------------------------------------------------------------

PER_ENGINE_UNITS = ("NMU", "CSTL", "DMA", "VPU", "SEQ")
"""Unit types every engine has instances of (SPEC §1)."""
DEVICE_UNITS = ("sDMA", "WDM")
"""Unit types shared by the device."""
UNIT_TYPES = PER_ENGINE_UNITS + DEVICE_UNITS
RESOURCE_UNITS = ("NMU", "CSTL", "DMA", "VPU")
"""Valid `@resource` targets (RES-01)."""


def _levels(op: TaskOp) -> set[str]:
    from nem.dialect.attributes import RegionType  # attributes imports this module

    levels: set[str] = set()
    for v, _ in op.operand_regions():
        rtype = v.type
        assert isinstance(rtype, RegionType)  # task operands are regions
        levels.add(rtype.level.kind)
    return levels


def task_kind(op: TaskOp) -> str:
    """`transfer`, `store`, or the compute opcode (how diagnostics name a task's kind)."""
    from nem.dialect.ops import ComputeOp, StoreOp, TransferOp

    if isinstance(op, TransferOp):
        return "transfer"
    if isinstance(op, StoreOp):
        return "store"
    assert isinstance(op, ComputeOp)  # the third kind of task
    return op.opcode


def eligible_units(op: TaskOp) -> tuple[str, ...]:
    """Unit types that may execute `op`, preferred first (D-SEM-UNITS):
    a transfer that touches DDR and no L1: sDMA, then DMA; any other transfer: DMA;
    a store: CSTL; a compute op: the registry's unit, DMA too for view ops,
    then VPU (the fallback for every compute op)."""
    from nem.dialect.ops import ComputeOp, StoreOp, TransferOp

    if isinstance(op, TransferOp):
        levels = _levels(op)
        return ("sDMA", "DMA") if "DDR" in levels and "L1" not in levels else ("DMA",)
    if isinstance(op, StoreOp):
        return ("CSTL",)
    assert isinstance(op, ComputeOp)
    units = [op.SPEC.unit]
    if op.SPEC.category == "view":
        units.append("DMA")
    units.append("VPU")
    return tuple(dict.fromkeys(units))


@dataclass(frozen=True)
class UnitBinding:
    """The unit type (and instance, when fixed) a task runs on, with how it was
    chosen: `rule` is None (usual unit), RES-03 (exact), RES-04 (same-type
    remap), RES-05 (cross-type translation, or `error` when impossible) or RES-07
    (`error`: a present unit that cannot run the task), and the `fix` of an error."""

    unit: str | None
    index: int | None
    rule: str | None
    error: str | None = None
    fix: str | None = None


def bind_unit(op: TaskOp, resource: tuple[str, int] | None,
              count: Callable[[str], int]) -> UnitBinding:
    """The Target Resource Validity Rule: the unit `op` runs on, given its
    `@resource(U[i])` (or None) and the device's instance count per unit type
    (`count`, per engine or device-wide); `nem-verify-device`'s and the runtime's."""
    eligible = eligible_units(op)
    names, target = ", ".join(eligible), f"target a device with one of {', '.join(eligible)}"
    alt = next((u for u in eligible if count(u) > 0), None)
    if resource is not None:
        unit, i = resource
        c = count(unit)
        if c > 0 and unit not in eligible:
            return UnitBinding(None, None, "RES-07", f"{unit} cannot run this task (eligible: "
                               f"{names})", f"use @resource({eligible[0]}[0]) or drop @resource "
                               "(decisions D-DEV-RES, D-SEM-UNITS)")
        if c > 0:
            return UnitBinding(unit, i if i < c else i % c, "RES-03" if i < c else "RES-04")
        if alt is None:
            return UnitBinding(None, None, "RES-05", f"the device has no {unit} and no other unit "
                               f"type that can run this task (eligible: {names})",
                               target + ", or drop @resource and the task")
        return UnitBinding(alt, None, "RES-05")
    if alt is None:
        return UnitBinding(None, None, "RES-05", "the device has no unit that can run this task "
                           f"(eligible: {names})", target)
    return UnitBinding(alt, None, None)
