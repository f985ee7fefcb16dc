"""Loop nests as NEM opcodes (D-LOW-RAISE): a pure analysis.

`analyze` normalizes a perfect, rectangular, unit-step nest (`Nest`);
`match_nest` recognizes what its one store computes and returns a typed
plan: `MatmulPlan` (`C[i,j] += A[i,k] * B[k,j]` in any loop order),
`CopyPlan` (a copy nest, D-LOW-COPYNEST) or `EltwisePlan` (a tree of
elementwise ops over identically indexed or broadcast loads, `max(x, 0)`
as `relu`); `generic_analysis` does the same for `linalg.generic` bodies
with these trees.  A cast is a node of the tree like any other op
(D-LOW-CAST, D-LOW-CAST-TREE): the tree may mix element types.  Anything
else raises `NotRaisable` with the reason the remark reports; the caller
then emits an escape-hatch task (D-LOW-ESCAPE).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue

from nem.dialect.expressions import postorder
from nem.dialect.semantics.clamp import clamp_matches_min_max
from nem.passes.lowering.affine_algebra import (
    Aff,
    Dim,
    eval_map,
    is_index_arith,
    pick_minmax,
    resolve_index,
)
from nem.passes.lowering.casts import CAST_OPS, cast_attrs, cast_reason

if TYPE_CHECKING:
    pass

BINARY = {
    "arith.addf": "add",
    "arith.addi": "add",
    "arith.subf": "sub",
    "arith.subi": "sub",
    "arith.mulf": "mul",
    "arith.muli": "mul",
    "arith.divf": "div",
    "arith.divsi": "div",
    "arith.maximumf": "max",
    "arith.maxsi": "max",
    "arith.minimumf": "min",
    "arith.minsi": "min",
    "math.powf": "pow",
}
"""MLIR binary op -> NEM opcode.  Not `maxnumf`/`minnumf`: they return the
non-NaN operand, NEM `max`/`min` propagate a NaN (D-LOW-MAXNUM)."""
UNARY = {
    "arith.negf": "neg",
    "math.exp": "exp",
    "math.log": "log",
    "math.sqrt": "sqrt",
    "math.absf": "abs",
    "math.absi": "abs",
    "math.tanh": "tanh",
}
WRAPPING = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul", "math.absi": "abs"}
"""The integer ops of BINARY / UNARY whose result wraps (two's complement)
where the NEM opcode saturates (D-NUM-INT): `100 + 100` is -56 in i8 and
127 in NEM.  They are matched (a tree holding them may be an integer
matmul's or convolution's accumulation, whose NEM result is MLIR's or an
error: D-NUM-LINEAR-INT) but never raised to elementwise tasks
(D-LOW-INT-WRAP).  `divsi`, `maxsi`, `minsi` and relu as `maxsi(x, 0)`
give MLIR's value on every input MLIR defines (a divide by zero or
`INT_MIN / -1` is undefined there)."""
LINALG_ELTWISE = {
    "linalg.add": "add",
    "linalg.sub": "sub",
    "linalg.mul": "mul",
    "linalg.div": "div",
    "linalg.max": "max",
    "linalg.min": "min",
    "linalg.exp": "exp",
    "linalg.log": "log",
    "linalg.sqrt": "sqrt",
    "linalg.abs": "abs",
    "linalg.tanh": "tanh",
    "linalg.negf": "neg",
    "linalg.powf": "pow",
}
"""The named elementwise linalg ops and their NEM opcodes (every operand
through the identity map)."""
LINALG_WRAPPING = {
    name: mlir
    for name, nem in LINALG_ELTWISE.items()
    for mlir, wrapped in WRAPPING.items()
    if wrapped == nem
}
"""The op upstream computes a named elementwise op with on integers, where it
is one of WRAPPING (D-LOW-INT-WRAP); `linalg.div` is `divsi`,
`linalg.max`/`min` are `maxsi`/`minsi`, which agree with NEM's."""
RSQRT = "math.rsqrt"
"""Raised as `div` of a splat 1 by `sqrt` (D-LOW-SPLAT): NEM has no rsqrt."""
MAX_OPS = ("arith.maximumf", "arith.maxsi")
"""`max(x, 0)` of these is `relu`."""
RELU_PREDICATES = (9, 10)
"""`arith.cmpf` ugt / uge: `select(x > 0, x, 0)` with these is `relu` exactly
(a NaN selects x, as relu propagates it); the ordered ogt / oge give 0 for a
NaN and are not raised (D-LOW-RAISE)."""
SELECT_OPS = ("arith.select", "arith.cmpf")


def wrapping_reason(name: str) -> str:
    """Why a computation using wrapping integer op `name` (WRAPPING) is not raised."""
    return f"wrapping integer {name}: NEM's {WRAPPING[name]} saturates (D-NUM-INT, D-LOW-INT-WRAP)"


def saturating_add(elem: Attribute) -> str | None:
    """Why an `add` accumulating `elem` elements (D-LOW-ACCUM, D-LOW-SUMPOOL)
    is not raised: an integer sum wraps in MLIR (`arith.addi`)."""
    return wrapping_reason("arith.addi") if isinstance(elem, IntegerType) else None


def relu_select(op: Operation) -> SSAValue | None:
    """`x` when `op` is `select(cmpf ugt|uge x, 0), x, 0)` (torch-mlir's relu)."""
    if op.name != "arith.select":
        return None
    cond, x, z = op.operands
    cmp = cond.owner
    zero = z.owner
    if not (
        isinstance(cmp, arith.CmpfOp)
        and isinstance(zero, arith.ConstantOp)
        and Const(zero.value).is_zero
    ):
        return None
    pred = cmp.predicate.value.data
    a, b = cmp.operands
    if (
        pred in RELU_PREDICATES
        and a == x
        and (b == z or (isinstance(b.owner, arith.ConstantOp) and Const(b.owner.value).is_zero))
    ):
        return x
    return None


def clamp_of(op: Operation) -> tuple[SSAValue, float, float] | None:
    """(x, lo, hi) when `op` is `minimumf(maximumf(x, lo), hi)` (either
    operand order of each), lo and hi float constants for which the two
    agree (`semantics.clamp.clamp_matches_min_max`: lo not -0, hi not +0):
    NEM's `clamp min=lo max=hi` (D-LOW-CLAMP), the importer's Clip and
    ReLU6."""
    if op.name != "arith.minimumf":
        return None
    for inner, h in (op.operands, op.operands[::-1]):
        mx, hi = inner.owner, _float_const(h)
        if not isinstance(mx, Operation) or mx.name != "arith.maximumf" or hi is None:
            continue
        for x, low in (mx.operands, mx.operands[::-1]):
            lo = _float_const(low)
            if lo is None or _float_const(x) is not None:
                continue
            return (x, lo, hi) if clamp_matches_min_max(lo, hi) else None
    return None


LEAKY_PREDICATES = {4: True, 11: True, 2: False, 9: False}
"""`arith.cmpf` olt / ult (x < 0 selects the product) and ogt / ugt (x > 0
selects x): with these `select` is `leaky_relu` exactly, a NaN giving NaN
either way (the product of NaN, or x)."""


def leaky_select(op: Operation) -> tuple[SSAValue, float] | None:
    """(x, alpha) when `op` is `select(x < 0, x * alpha, x)` or `select(x > 0,
    x, x * alpha)` (the importer's LeakyRelu, torch-mlir's), alpha a finite
    float constant: NEM's `leaky_relu alpha` (D-LOW-LEAKY)."""
    if op.name != "arith.select":
        return None
    cond, a, b = op.operands
    cmp = cond.owner
    if not isinstance(cmp, arith.CmpfOp) or cmp.predicate.value.data not in LEAKY_PREDICATES:
        return None
    x, zero = cmp.operands
    z = _float_const(zero)
    if z is None or z != 0.0:
        return None
    prod, kept = (a, b) if LEAKY_PREDICATES[cmp.predicate.value.data] else (b, a)
    mul = prod.owner
    if kept != x or not isinstance(mul, arith.MulfOp):
        return None
    for y, c in ((mul.operands[0], mul.operands[1]), (mul.operands[1], mul.operands[0])):
        alpha = _float_const(c)
        if y == x and alpha is not None and math.isfinite(alpha):
            return x, alpha
    return None


class NotRaisable(Exception):
    """Why a nest or linalg op is not raised (reported by the remark)."""


MAX_RAISED_OPS = 64
"""Most operations one raised computation may expand to (each becomes a task)."""


def check_raisable_size(root: SSAValue, within: Callable[[Operation], bool]) -> None:
    """NotRaisable when the computation of `root` (its ops that satisfy
    `within`, expanded as a tree, as raising does) has more than
    MAX_RAISED_OPS operations.  Counted iteratively over the DAG with each
    value once, so a 1500-op chain or a body whose values reuse each other
    (`%x2 = arith.addf %x1, %x1`, 2^40 as a tree) falls back to a compute
    task (D-LOW-ESCAPE) in linear time instead of recursing (issue 11);
    the recursive tree walks below run only on what passed."""

    def operands(v: SSAValue) -> list[SSAValue]:
        owner = v.owner
        return list(owner.operands) if isinstance(owner, Operation) and within(owner) else []

    size: dict[SSAValue, int] = {}
    for v in postorder(root, operands, size):
        size[v] = min(1 + sum(size[o] for o in operands(v)), MAX_RAISED_OPS + 1)
    if size[root] > MAX_RAISED_OPS:
        raise NotRaisable(f"a computation of more than {MAX_RAISED_OPS} operations")


# ---------------------------------------------------------------------------
# Typed records
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """A memref access in a nest: per index, the nest dimension it moves
    with (or None) and the rest of its value."""

    memref: SSAValue
    index: tuple[tuple[int | None, Aff], ...]

    @property
    def dims(self) -> list[int]:
        return [k for k, _ in self.index if k is not None]

    def same(self, other: Access) -> bool:
        return self.index == other.index


@dataclass(frozen=True)
class Load:
    access: Access


@dataclass(frozen=True)
class Const:
    value: Attribute

    @property
    def is_zero(self) -> bool:
        v = self.value
        return isinstance(v, FloatAttr | IntegerAttr) and v.value.data == 0


@dataclass(frozen=True)
class Operand:
    """A whole linalg operand (a leaf of a linalg elementwise tree)."""

    memref: SSAValue


@dataclass(frozen=True)
class EltOp:
    """One NEM elementwise task: `opcode` over its operands' results."""

    opcode: str
    operands: tuple[EltNode, ...]
    attrs: tuple[tuple[str, str | float], ...] = ()
    """The task's attributes (`gelu approximate="none"`, D-LOW-GELU-ERF;
    `leaky_relu alpha`, D-LOW-LEAKY; `cast saturate`, D-LOW-CAST)."""
    to: Attribute | None = None
    """The element type a `cast` converts to (D-LOW-CAST-TREE); every
    other op's result has its operands' type."""
    wraps: str | None = None
    """The wrapping integer op (WRAPPING) this node stands for: raised only
    as a matmul's accumulation, never as an elementwise task."""

    def leaves(self) -> list[Load | Operand | Splat]:
        return [x for c in self.operands for x in (c.leaves() if isinstance(c, EltOp) else [c])]


@dataclass(frozen=True)
class Splat:
    """A scalar constant operand of an elementwise op: a region of the shape
    of the op's other operand filled with `value`, made by `clamp` of that
    operand with min = max = value (D-LOW-SPLAT)."""

    value: float


EltNode = EltOp | Load | Operand | Splat

T = TypeVar("T")


def in_place_operand(cast: bool, elem: T, operands: Sequence[tuple[T, bool] | None]) -> int | None:
    """The operand an op of an elementwise tree computes in place over
    (D-LOW-TREE-INPLACE): the first computed by an op of the tree (each
    such operand: (its result's element type, whether that op is a cast);
    None for a leaf or a splat) of the op's own result type `elem` and no
    cast (a cast of a leaf may be a splat's source, D-LOW-SPLAT-SOURCE);
    None for a cast.  The one statement of the rule for the lowering's
    trees (`compute._into`) and the L1 model's (`l1_scratch._in_place`),
    which describe ops in two IRs."""
    if cast:
        return None
    return next((k for k, o in enumerate(operands) if o == (elem, False)), None)


SPLAT_FLOATS = (
    "arith.addf",
    "arith.subf",
    "arith.mulf",
    "arith.divf",
    "arith.maximumf",
    "arith.minimumf",
)
"""Ops whose scalar constant operand is a splat (D-LOW-SPLAT): they
propagate a NaN of either operand, as the splat made from the other one
does (pow(NaN, 0) = 1 and maxnumf/minnumf drop NaNs: not these)."""


def splat_operands(name: str, operands: Sequence[Any]) -> list[int]:
    """Positions of the constant operands of MLIR op `name` that are splats
    (D-LOW-SPLAT); raises when a constant operand cannot be one."""
    consts = [k for k, c in enumerate(operands) if isinstance(c, Const)]
    if not consts:
        return []
    c = operands[consts[0]]
    assert isinstance(c, Const)
    v = c.value
    if (
        name not in SPLAT_FLOATS
        or len(consts) == len(operands)
        or not (isinstance(v, FloatAttr) and math.isfinite(v.value.data))
        or (v.value.data == 0 and math.copysign(1.0, v.value.data) < 0)
    ):
        raise NotRaisable(
            f"'{name}' with a constant operand (a splat is made for a finite "
            "float operand of add/sub/mul/div/maximum/minimum only, not -0.0: D-LOW-SPLAT)"
        )
    return consts


GELU_ERF = (("approximate", "none"),)
"""The attributes of NEM's erf-form `gelu` (D-NUM-GELU-ERF)."""


def _float_const(v: SSAValue) -> float | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr):
        return float(owner.value.value.data)
    return None


def _binary_with(op: Operation | None, name: str, want: float) -> SSAValue | None:
    """x when `op` is `name(x, c)` or `name(c, x)` with the constant c = want
    (to 1e-6 relative: constants rounded to f32)."""
    if not isinstance(op, Operation) or op.name != name or len(op.operands) != 2:
        return None
    for x, c in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        k = _float_const(c)
        if k is not None and abs(k - want) <= 1e-6 * abs(want):
            return x
    return None


def gelu_erf_input(op: Operation) -> SSAValue | None:
    """x when `op` computes ONNX's exact GELU `0.5 x (1 + erf(x / sqrt 2))`
    (`x * 0.5 * (1 + erf(x * (1 / sqrt 2)))` in any operand order, or with a
    divide by sqrt 2), or, for f16, `truncf` of that over `extf x` (what the
    importer writes under D-COMPILE-F16; NEM's f16 `gelu` also computes wide
    and rounds once): NEM's `gelu approximate="none"` (D-LOW-GELU-ERF)."""
    if op.name == "arith.truncf":
        inner = op.operands[0].owner
        x = gelu_erf_input(inner) if isinstance(inner, Operation) else None
        ext = x.owner if x is not None else None
        if (
            isinstance(ext, Operation)
            and ext.name == "arith.extf"
            and ext.operands[0].type == op.results[0].type
        ):
            return ext.operands[0]
        return None
    if op.name != "arith.mulf":
        return None
    for half, rest in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        x = _binary_with(
            half.owner if isinstance(half.owner, Operation) else None, "arith.mulf", 0.5
        )
        erf_v = _binary_with(
            rest.owner if isinstance(rest.owner, Operation) else None, "arith.addf", 1.0
        )
        erf = erf_v.owner if erf_v is not None else None
        if x is None or not isinstance(erf, Operation) or erf.name != "math.erf":
            continue
        arg = erf.operands[0].owner
        arg_op = arg if isinstance(arg, Operation) else None
        scaled = _binary_with(arg_op, "arith.mulf", 1.0 / math.sqrt(2.0))
        if (
            scaled is None
            and arg_op is not None
            and arg_op.name == "arith.divf"
            and _float_const(arg_op.operands[1]) is not None
            and abs(float(_float_const(arg_op.operands[1]) or 0) - math.sqrt(2.0)) <= 1e-6
        ):
            scaled = arg_op.operands[0]
        if scaled is x:
            return x
    return None


GELU_OPS = ("math.erf",)
"""Ops a nest body may hold only inside an erf GELU (D-LOW-GELU-ERF)."""


def cast_node(op: Operation) -> Attribute:
    """The element type cast `op` converts to (NotRaisable for a cast that
    is not raised, with the reason)."""
    why = cast_reason(op)
    if why is not None:
        raise NotRaisable(why)
    return op.results[0].type


@dataclass(frozen=True)
class MatmulPlan:
    a: Load
    b: Load
    c: Access
    trans_a: bool
    trans_b: bool


@dataclass(frozen=True)
class CopyPlan:
    src: Load
    dst: Access


@dataclass(frozen=True)
class EltwisePlan:
    root: EltOp
    out: Access


Plan = MatmulPlan | CopyPlan | EltwisePlan


@dataclass
class Nest:
    """A perfect nest: its loops (outermost first) with their extents, the
    affine value of each loop variable (`lb + Dim(k)`) and the innermost body."""

    loops: list[tuple[affine.ForOp, int]] = field(default_factory=list)
    """The loops of the iteration space: a one-iteration loop whose
    variable nothing uses is no dimension (it indexes nothing, D-LOW-TILES),
    but the innermost loop stays when it would leave none."""
    env: dict[SSAValue, Aff] = field(default_factory=dict)
    body: list[Operation] = field(default_factory=list)
    root: Operation | None = None
    """The outermost loop, folded or not."""

    @property
    def extents(self) -> dict[int, int]:
        return {k: ext for k, (_, ext) in enumerate(self.loops)}


# ---------------------------------------------------------------------------
# Nests
# ---------------------------------------------------------------------------


def analyze(top: affine.ForOp, outer: Mapping[SSAValue, Aff]) -> Nest:
    """The nest rooted at `top` (`outer`: index values of enclosing scopes)."""
    nest = Nest(root=top)
    op = top
    while True:
        lb = pick_minmax(
            eval_map(
                op.lowerBoundMap.data, [index_value(nest, outer, v) for v in op.lowerBoundOperands]
            ),
            False,
        )
        ub = pick_minmax(
            eval_map(
                op.upperBoundMap.data, [index_value(nest, outer, v) for v in op.upperBoundOperands]
            ),
            True,
        )
        if lb is None or ub is None:
            raise NotRaisable("min/max loop bounds")
        if lb.has_dims() or ub.has_dims():
            raise NotRaisable("non-rectangular nest")
        if op.step.value.data != 1:
            raise NotRaisable("non-unit step")
        ext = ub - lb
        if not ext.is_const() or ext.const <= 0:
            raise NotRaisable("non-constant trip count")
        inner = [o for o in op.body.block.ops if not isinstance(o, affine.YieldOp)]
        nested = only_loop(inner)
        iv = op.body.block.args[0]
        if ext.const == 1 and not iv.uses and (nested is not None or nest.loops):
            nest.env[iv] = lb  # one iteration, its variable unused: no dimension
        else:
            nest.env[iv] = lb + Aff.atom(Dim(len(nest.loops)))
            nest.loops.append((op, ext.const))
        if nested is None:
            if not nest.loops:  # every loop had one iteration: keep the innermost
                nest.env[iv] = lb + Aff.atom(Dim(0))
                nest.loops.append((op, 1))
            nest.body = inner
            return nest
        op = nested


def only_loop(ops: list[Operation]) -> affine.ForOp | None:
    """The loop of a loop body holding one loop and otherwise only index
    values `_idx` evaluates (as `-affine-loop-normalize` leaves tile
    offsets), else None: the nest is perfect up to index arithmetic."""
    loops = [o for o in ops if isinstance(o, affine.ForOp)]
    if len(loops) == 1 and all(o is loops[0] or is_index_arith(o) for o in ops):
        return loops[0]
    return None


def index_value(nest: Nest, outer: Mapping[SSAValue, Aff], v: SSAValue) -> Aff:
    """The affine value of index `v` in the nest (NotRaisable if it has none)."""
    r = resolve_index(v, nest.env, outer)
    if r is None:
        raise NotRaisable("an index that is not an affine function of the loop indices")
    return r


def access_indices(nest: Nest, outer: Mapping[SSAValue, Aff], op: Operation) -> list[Aff]:
    """The affine values of the indices of a load or store of the nest."""
    assert isinstance(op, affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp)
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        assert op.map is not None
        return eval_map(op.map.data, [index_value(nest, outer, v) for v in op.indices])
    return [index_value(nest, outer, v) for v in op.indices]


def access(nest: Nest, outer: Mapping[SSAValue, Aff], op: Operation) -> Access:
    """The access of a load or store of the nest."""
    assert isinstance(op, affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp)
    idx = access_indices(nest, outer, op)
    out: list[tuple[int | None, Aff]] = []
    for a in idx:
        dims, rest = a.split_dims()
        if rest.has_dims():
            raise NotRaisable("a nest index inside mod/floordiv")
        if len(dims) > 1 or (dims and dims[0][1] != 1):
            raise NotRaisable("a strided or skewed access")
        out.append((dims[0][0].k if dims else None, rest))
    return Access(op.memref, tuple(out))


def elt_tree(
    v: SSAValue, leaf: Callable[[SSAValue], EltNode | Const | None], where: str, not_tree: str
) -> EltNode | Const:
    """The elementwise computation of `v` as NEM ops (D-LOW-RAISE), down to
    the values `leaf` resolves (a load, a linalg block argument: an EltNode;
    None for an op to walk into); constants are `Const`, splats where an op
    takes them (D-LOW-SPLAT), else NotRaisable(`not_tree`).  The one walk
    for loop-nest bodies and `linalg.generic` bodies: the whole-op
    recognizers (relu by select or by `max(x, 0)`, erf GELU, leaky relu,
    rsqrt, casts) live here only.  Operands are walked before their op is
    checked, so an op that is not raised is reported before a constant
    that cannot be a splat.  `where` names the body in the reasons."""

    def convert(n: EltNode | Const) -> EltNode:
        if isinstance(n, Const):
            raise NotRaisable(not_tree)
        return n

    def operand(x: SSAValue) -> EltNode:
        return convert(elt_tree(x, leaf, where, not_tree))

    resolved = leaf(v)
    if resolved is not None:
        return resolved
    owner = v.owner
    if isinstance(owner, arith.ConstantOp):
        return Const(owner.value)
    assert isinstance(owner, Operation), "leaf() resolves block arguments"
    x = relu_select(owner)
    if x is not None:
        return EltOp("relu", (operand(x),))
    x = gelu_erf_input(owner)
    if x is not None:
        return EltOp("gelu", (operand(x),), GELU_ERF)
    clamp = clamp_of(owner)
    if clamp is not None:
        return EltOp("clamp", (operand(clamp[0]),), (("min", clamp[1]), ("max", clamp[2])))
    leaky = leaky_select(owner)
    if leaky is not None:
        return EltOp("leaky_relu", (operand(leaky[0]),), (("alpha", leaky[1]),))
    if owner.name == RSQRT:
        return EltOp("div", (Splat(1.0), EltOp("sqrt", (operand(owner.operands[0]),))))
    if owner.name in CAST_OPS:
        to = cast_node(owner)
        return EltOp("cast", (operand(owner.operands[0]),), cast_attrs(owner.name), to)
    if owner.name not in BINARY and owner.name not in UNARY:
        raise unraisable(owner.name, where)
    n = 2 if owner.name in BINARY else 1
    kids = [elt_tree(x, leaf, where, not_tree) for x in owner.operands[:n]]
    if owner.name in MAX_OPS:
        for keep, zero in ((kids[0], kids[1]), (kids[1], kids[0])):
            if isinstance(zero, Const) and zero.is_zero and not isinstance(keep, Const):
                return EltOp("relu", (keep,))
    return EltOp(
        BINARY.get(owner.name) or UNARY[owner.name],
        with_splats(owner.name, kids, convert),
        wraps=owner.name if owner.name in WRAPPING else None,
    )


NAN_DROPPING = ("arith.maxnumf", "arith.minnumf")


def wrapping_in(root: EltNode) -> str | None:
    """Why an elementwise tree is not raised when it holds a wrapping
    integer op (D-LOW-INT-WRAP), else None."""
    todo = [root]
    while todo:
        node = todo.pop()
        if isinstance(node, EltOp):
            if node.wraps is not None:
                return wrapping_reason(node.wraps)
            todo += node.operands
    return None


def unraisable(name: str, where: str) -> NotRaisable:
    """Why an op keeps its nest (or `linalg.generic`) an escape-hatch task."""
    if name in NAN_DROPPING:
        return NotRaisable(
            f"'{name}' in the {where} body (it returns the non-NaN operand, "
            "NEM max/min propagate a NaN: D-LOW-MAXNUM)"
        )
    return NotRaisable(f"'{name}' in the {where} body")


def match_nest(
    nest: Nest, outer: Mapping[SSAValue, Aff], buffer_of: Callable[[SSAValue, Operation], Hashable]
) -> Plan:
    """The raise plan of a nest (`buffer_of(memref, user)`: which buffer a
    memref lives in, equal answers one buffer: `MemrefRoots`)."""
    assert nest.root is not None
    inside = set(nest.root.walk())
    stores = [o for o in nest.body if isinstance(o, affine.StoreOp | memref.StoreOp)]
    for o in nest.body:
        if not (
            isinstance(
                o,
                affine.StoreOp
                | memref.StoreOp
                | affine.LoadOp
                | memref.LoadOp
                | arith.ConstantOp
                | affine.ApplyOp,
            )
            or o.name in BINARY
            or o.name in UNARY
            or o.name in SELECT_OPS
            or o.name == RSQRT
            or o.name in GELU_OPS
            or o.name in CAST_OPS
        ):
            raise unraisable(o.name, "nest")
    if len(stores) != 1:
        raise NotRaisable(f"{len(stores)} stores in the nest body")
    st = stores[0]
    out = access(nest, outer, st)
    check_raisable_size(st.value, lambda op: op in inside)

    def leaf(v: SSAValue) -> Load | Const | None:
        owner = v.owner
        if not isinstance(owner, Operation) or owner not in inside:
            if isinstance(owner, arith.ConstantOp):
                return Const(owner.value)
            raise NotRaisable("a value defined outside the nest")
        if isinstance(owner, affine.LoadOp | memref.LoadOp):
            return Load(access(nest, outer, owner))
        return None

    tree = elt_tree(st.value, leaf, "nest", NOT_ELT_TREE)
    n = len(nest.loops)
    sorder = out.dims
    matmul = _match_matmul(tree, out, n)
    if matmul is not None:
        return matmul
    if sorted(sorder) != list(range(n)):
        raise NotRaisable("the store does not cover the iteration space once")
    if isinstance(tree, Load):  # a copy nest, as generate-dma=false leaves it (D-LOW-COPYNEST)
        if tree.access.dims != sorder:
            raise NotRaisable("a copy that transposes or broadcasts")
        if buffer_of(tree.access.memref, st) == buffer_of(out.memref, st):
            raise NotRaisable("a copy within one buffer")
        return CopyPlan(tree, out)
    if not isinstance(tree, EltOp):
        raise NotRaisable(NOT_ELT_TREE)
    # each load indexed like the store or by a subsequence of its loops (a
    # broadcast operand, materialized by transfers: D-LOW-BCAST-OPERAND), never transposed
    if any(
        isinstance(x, Load) and not is_broadcast_of(x.access.dims, sorder) for x in tree.leaves()
    ):
        raise NotRaisable("operands are indexed in different orders (transpose)")
    return EltwisePlan(tree, out)


NOT_ELT_TREE = "the body is not a tree of elementwise operations over loads"


def _match_matmul(tree: EltNode | Const, out: Access, n: int) -> MatmulPlan | None:
    """`C[i,j] = C[i,j] + A[i,k] * B[k,j]` (any loop order, either operand
    order; transposed operands set `trans_a`/`trans_b`; A and B may be
    widened to C's type first, as linalg's mixed-type matmul is: the plan
    then has their narrower types, which the device's matmul variants
    accept or not, D-LOW-LINALG-NAMED)."""
    sorder = out.dims
    if not (n == 3 and len(sorder) == 2 and isinstance(tree, EltOp) and tree.opcode == "add"):
        return None
    x, y = tree.operands
    for acc_t, prod in ((x, y), (y, x)):
        if not (
            isinstance(acc_t, Load)
            and acc_t.access.memref == out.memref
            and acc_t.access.same(out)
            and isinstance(prod, EltOp)
            and prod.opcode == "mul"
        ):
            continue
        p, q = (_widened(x) for x in prod.operands)
        if not (isinstance(p, Load) and isinstance(q, Load)):
            continue
        ki, kj = sorder
        kk = ({0, 1, 2} - {ki, kj}).pop()
        for a, b in ((p, q), (q, p)):
            ao, bo = a.access.dims, b.access.dims
            if (
                sorted(ao) == sorted([ki, kk])
                and sorted(bo) == sorted([kk, kj])
                and len(ao) == 2
                and len(bo) == 2
            ):
                return MatmulPlan(a, b, out, ao != [ki, kk], bo != [kk, kj])
    return None


def _widened(x: EltNode | Const) -> EltNode | Const:
    """The load under an exact widening cast (`extf`, `extsi`: no
    attributes), else `x`."""
    if (
        isinstance(x, EltOp)
        and x.opcode == "cast"
        and not x.attrs
        and isinstance(x.operands[0], Load)
    ):
        return x.operands[0]
    return x


def with_splats(
    name: str, operands: Sequence[Any], convert: Callable[[Any], EltNode]
) -> tuple[EltNode, ...]:
    """The operands of an elementwise op as EltNodes, its scalar constants as splats."""
    splats = splat_operands(name, operands)
    return tuple(Splat(_float(c)) if k in splats else convert(c) for k, c in enumerate(operands))


def _float(c: Const) -> float:
    assert isinstance(c.value, FloatAttr)
    return float(c.value.value.data)


def is_broadcast_of(dims: list[int], sorder: list[int]) -> bool:
    """Whether an operand indexed by loops `dims` is the store's (`sorder`)
    or a broadcast of one: its loops a subsequence of the store's, in order."""
    it = iter(sorder)
    return all(d in it for d in dims)
