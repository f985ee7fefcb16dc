"""`nem-fold-index-arith` (D-LOW-AFFINE): the entry's `arith` index
arithmetic becomes `affine.apply`s with composed maps before the conversion,
which then evaluates `affine.apply` (and `affine.min`/`max`) on loop
variables where it lowers ops one by one (issue 36 item 1):

    %c4 = arith.constant 4 : index
    %0 = arith.muli %i, %c4 : index
    %1 = arith.addi %0, %j : index
    -> %0 = affine.apply affine_map<(d0) -> (d0 * 4)>(%i)
       %1 = affine.apply affine_map<(d0, d1) -> (d0 * 4 + d1)>(%i, %j)

as MLIR's `affine.apply` canonicalization composes: an operand that is an
index constant is folded into the map, one that is a one-result
`affine.apply` is replaced by its expression (xDSL's
`AffineExpr.replace_dims_and_symbols`), the other operands become the
map's dimensions.  An existing `affine.apply` is composed the same way.  In
program order, one walk: an operand's `affine.apply` was composed already,
so each op reads its operands' producers and no further.

Rewritten, the value the conversion evaluates is the one it evaluated op by
op (its `Aff` algebra: a sum, a product by a constant, a `mod` or
`floordiv` by a positive constant, evaluated on the same operands); what is
not affine stays as written, and the conversion's handler rejects it with
the same words at the same place (`index_ops.lower_index_binop`): a product
of two indices neither of which is a constant here, a division or
remainder by what is not a positive constant, a signed or unsigned division
or remainder (`divsi`, `divui`, `remsi`, `remui`, `ceildivsi`) of an index
not provably non-negative here (a sum of non-negative multiples of
constants and of variables of loops starting at a non-negative constant),
and `arith` on other types.  The handler still evaluates those it can
prove affine with the loops' ranges (a variable of a one-iteration loop is
0).  An op is rewritten only when every operand of its map is one the
conversion evaluates (a loop variable, the result of index arithmetic,
an async `index` payload, which it binds before any user or rejects at
its await or execute): else the conversion rejects it, at the op, as before.
An operand of an `affine.min`/`max` or of a loop with a min/max bound is
rewritten too: the conversion's peeling decision
(`partial_tiles.nonuniform_minmax`) reads `arith` as it reads applies
(`resolve_index` with `arith_ops`, session 34), so it peels what it peeled.

Ops in an outlined kernel or a pure loop nest are not rewritten (as
`nem-rewrite-views`): their kernels, or the nest's raising, read them.
Those of a loop the conversion keeps around raised tiles are when
`nem-mark-tile-loops` marked it (`nem_lowering.tile_loop`, decided on the
body as written; the conversion reads the mark): a loop it left undecided
is a nest like any other here, and the conversion's handler evaluates its
arithmetic (D-LOW-AFFINE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects.affine_max import AffineMaxOp
from nem.passes.lowering.affine_algebra import Aff, Dim, eval_affine_expr
from nem.passes.lowering.prepare import entry_function, rewrite_once
from nem.passes.lowering.view_ops import LoweredOneByOne

_DIVISIONS: dict[type[Operation], Callable[[AffineExpr, int], AffineExpr]] = {
    arith.FloorDivSIOp: lambda e, d: e // d,
    arith.DivSIOp: lambda e, d: e // d,
    arith.DivUIOp: lambda e, d: e // d,
    arith.RemSIOp: lambda e, d: e % d,
    arith.RemUIOp: lambda e, d: e % d,
    # the conversion's `ceildiv a, b == floordiv(a + b - 1, b)`
    arith.CeilDivSIOp: lambda e, d: (e + (d - 1)) // d,
}
"""The divisions by a positive constant, as affine expressions; all but
`floordivsi` of a dividend proven non-negative only."""

_ARITH: tuple[type[Operation], ...] = (arith.AddiOp, arith.SubiOp, arith.MuliOp, *_DIVISIONS)
"""The `arith` index ops rewritten when affine."""
_EVALUATED: tuple[type[Operation], ...] = (
    arith.ConstantOp,
    asy.AwaitOp,
    affine.ApplyOp,
    affine.MinOp,
    AffineMaxOp,
    *_ARITH,
)
"""The ops whose index results the conversion evaluates (or rejects, first)."""


def _evaluated(v: SSAValue) -> bool:
    """Whether the conversion evaluates `v` where it lowers its users: a
    loop variable, index arithmetic (rejected there if not affine), or an
    async `index` payload (an await's result, an execute's body argument),
    which `nem-inline-async-executes` makes the yielded value (the scope's
    result) or rejects, at the await or execute, before any user
    (D-LOW-ASYNC-INLINE)."""
    if isinstance(v, BlockArgument):
        return isinstance(v.block.parent_op(), affine.ForOp | asy.ExecuteOp)
    return isinstance(v.owner, _EVALUATED)


def _nonneg_var(v: SSAValue) -> bool:
    """A variable of a loop from a non-negative constant (its step is positive)."""
    if not isinstance(v, BlockArgument):
        return False
    loop = v.block.parent_op()
    if not isinstance(loop, affine.ForOp) or loop.lowerBoundOperands:
        return False
    bounds = loop.lowerBoundMap.data.results  # (the max of several: not constant)
    return len(bounds) == 1 and isinstance(bounds[0], AffineConstantExpr) and bounds[0].value >= 0


class _Composition:
    """The expression of index values over the map's dimensions, each a
    distinct operand (`leaves`), constants and composable applies folded."""

    def __init__(self) -> None:
        self.leaves: list[SSAValue] = []

    def expr(self, v: SSAValue) -> AffineExpr:
        owner = v.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(v.type, IndexType):
            assert isinstance(owner.value, IntegerAttr)
            return AffineExpr.constant(owner.value.value.data)
        if _composable(owner):
            assert isinstance(owner, affine.ApplyOp)
            m = owner.map.data
            args = [self.expr(o) for o in owner.mapOperands]
            return m.results[0].replace_dims_and_symbols(args[: m.num_dims], args[m.num_dims :])
        if v not in self.leaves:
            self.leaves.append(v)
        return AffineExpr.dimension(self.leaves.index(v))

    def nonneg(self, e: AffineExpr) -> bool:
        """`e` provably >= 0: each operand a non-negative atom when it is
        the variable of a loop from a non-negative constant, else a
        difference of two (of unknown sign)."""
        atoms = [
            Aff.atom(Dim(2 * k))
            if _nonneg_var(v)
            else Aff.atom(Dim(2 * k)) - Aff.atom(Dim(2 * k + 1))
            for k, v in enumerate(self.leaves)
        ]
        return eval_affine_expr(e, atoms, ()).nonneg()


def _composable(op: Operation | Block) -> bool:
    """A one-result `affine.apply`: folded into its users' maps."""
    return isinstance(op, affine.ApplyOp) and len(op.map.data.results) == 1


def _folds(v: SSAValue) -> bool:
    """Whether composing with `v` changes a map (a constant or a composable apply)."""
    owner = v.owner
    return _composable(owner) or (
        isinstance(owner, arith.ConstantOp) and isinstance(v.type, IndexType)
    )


def _arith_expr(op: Operation, comp: _Composition) -> AffineExpr | None:
    """The affine expression of `arith` index op `op`, None when it is not
    affine here (the conversion's handler judges it)."""
    lhs, rhs = (comp.expr(v) for v in op.operands)
    if isinstance(op, arith.AddiOp):
        return lhs + rhs
    if isinstance(op, arith.SubiOp):
        return lhs - rhs
    if isinstance(op, arith.MuliOp):
        if isinstance(lhs, AffineConstantExpr) or isinstance(rhs, AffineConstantExpr):
            return lhs * rhs
        return None
    divide = _DIVISIONS[type(op)]
    if not isinstance(rhs, AffineConstantExpr) or rhs.value <= 0:
        return None
    if not isinstance(op, arith.FloorDivSIOp) and not comp.nonneg(lhs):
        return None
    return divide(lhs, rhs.value)


@dataclass
class IndexArithToApply(RewritePattern):
    """`arith` index arithmetic -> `affine.apply`, and `affine.apply` of
    constants or of applies -> one apply, maps composed (module docstring)."""

    lowered: LoweredOneByOne = field(default_factory=LoweredOneByOne)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        comp = _Composition()
        try:
            expr = self.composed(op, comp)
        except (ArithmeticError, ValueError):
            return  # a map dividing by 0 or less: the conversion rejects it, at this op
        if expr is None or not all(_evaluated(v) for v in comp.leaves):
            return  # (an operand it does not evaluate: rejected at this op, as before)
        new = affine.ApplyOp(comp.leaves, AffineMapAttr(AffineMap(len(comp.leaves), 0, (expr,))))
        new.location = op.location
        new.result.name_hint = op.results[0].name_hint
        rewriter.replace_op(op, new)

    def composed(self, op: Operation, comp: _Composition) -> AffineExpr | None:
        """The composed expression of `op` over `comp`'s leaves, None when
        `op` stays as it is."""
        if isinstance(op, affine.ApplyOp):
            m = op.map.data
            if len(m.results) != 1 or not any(_folds(v) for v in op.mapOperands):
                return None
            if not self.lowered(op):
                return None
            args = [comp.expr(v) for v in op.mapOperands]
            return m.results[0].replace_dims_and_symbols(args[: m.num_dims], args[m.num_dims :])
        if isinstance(op, _ARITH) and isinstance(op.results[0].type, IndexType):
            if not self.lowered(op):
                return None
            return _arith_expr(op, comp)
        return None


@dataclass(frozen=True)
class FoldIndexArithPass(ModulePass):
    """Rewrite the entry function's `arith` index arithmetic into
    `affine.apply`s with composed maps, constants folded (D-LOW-AFFINE); what
    is not affine stays, for the conversion to reject.

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-fold-index-arith"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = entry_function(op, self.entry)
        # in program order: an operand's apply composed before its users; a
        # folded constant or apply left unused is the conversion's to skip,
        # as an unused one was
        rewrite_once(fn.body, IndexArithToApply())
