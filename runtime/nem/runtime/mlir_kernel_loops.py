"""The loop and structured ops of escape-hatch kernels (D-RT-MLIR-KERNEL-OPS).

`affine` ops with dims and symbols split as their maps say (xDSL's pass
every operand as a dimension and ignore `affine.for` bound operands and
`iter_args`), `affine.if`, `scf.parallel`/`scf.reduce` (which xDSL lacks),
`scf.for` with MLIR's positive step, and every structured `linalg` op run
as its generic form; reductions combine in the sequential order.  Also
what makes one of these ops unsupported (`unsupported`): the kernel is
refused before it runs rather than computing a wrong value.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Container, Sequence
from itertools import product
from math import inf as math_inf
from typing import Any, ClassVar, Protocol, cast

from xdsl.dialects import affine, arith, linalg, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseIntElementsAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ShapedType,
    StringAttr,
)
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation, PoolingOperation
from xdsl.dialects.linalg.ops import BroadcastOp as LinalgBroadcastOp
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.dialects.linalg.ops import ReduceOp as LinalgReduceOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.interpreters.linalg import run_linalg_structured_op
from xdsl.interpreters.scf import ScfFunctions
from xdsl.interpreters.shaped_array import ShapedArray
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.ir.affine import AffineConstraintKind, AffineExpr, AffineMap

from nem.frontends.upstream_dialects import affine_ssa_maps, mlir_dialect_factories
from nem.frontends.upstream_dialects.affine_if import AffineIfOp
from nem.frontends.upstream_dialects.affine_max import AffineMaxOp
from nem.frontends.upstream_dialects.arith_rounding import other_rounding
from nem.runtime.mlir_kernel_scalar import NP_FLOAT, UNDEFINED, raise_undefined


class ReducingInterpreter(Protocol):
    """What the affine.parallel implementation needs of its interpreter
    (`mlir_kernel.KernelInterpreter`): each op's (combiner, identity) pairs,
    as `affine_reductions` makes them."""

    reductions: dict[Operation, list[tuple[Operation, Any]]]


_CONSTRAINT = {
    AffineConstraintKind.ge: operator.ge,
    AffineConstraintKind.le: operator.le,
    AffineConstraintKind.eq: operator.eq,
}


def _eval_map(m: AffineMap, operands: Sequence[int]) -> tuple[int, ...]:
    nd = m.num_dims
    return m.eval(list(operands[:nd]), list(operands[nd:]))


def _return_operands(
    self: InterpreterFunctions, interpreter: Interpreter, op: Operation, args: PythonValues
) -> tuple[TerminatorValue, PythonValues]:
    """A terminator that hands its operands to the op running its region
    (affine.yield, scf.reduce, scf.reduce.return)."""
    return ReturnedValues(args), ()


def _grouped(
    bound: Callable[[Sequence[int]], int], values: Sequence[int], groups: DenseIntElementsAttr
) -> list[int]:
    """affine.parallel bounds: `values` (the map's results) split into
    consecutive groups of the sizes `groups` lists, each reduced by `bound`
    (max for lower bounds, min for upper bounds)."""
    out: list[int] = []
    start = 0
    for size in groups.get_values():
        out.append(bound(values[start : start + size]))
        start += size
    return out


def _parallel_loops(
    interpreter: Interpreter,
    body: Region,
    lbs: Sequence[int],
    ubs: Sequence[int],
    steps: Sequence[int],
    init: Sequence[Any],
    combine: Callable[[int, Any, Any], Any],
) -> PythonValues:
    """affine.parallel / scf.parallel: run `body` at every point of the
    iteration space in sequential order (lexicographic, the first induction
    variable outermost) and fold the values each point yields into `init` in
    that order, `acc[k] = combine(k, acc[k], value[k])`.  MLIR leaves the
    order unspecified; fixing it makes float reductions reproducible."""
    if any(s <= 0 for s in steps):
        raise_undefined(UNDEFINED["parallel_step"](min(steps)))
    acc = tuple(init)
    for point in product(*map(range, lbs, ubs, steps)):
        values = interpreter.run_ssacfg_region(body, point)
        acc = tuple(combine(k, a, v) for k, (a, v) in enumerate(zip(acc, values)))
    return acc


def _run_load(
    self: InterpreterFunctions, interpreter: Interpreter, op: affine.LoadOp, args: PythonValues
) -> PythonValues:
    mem, *ops = args
    return (mem.load(_eval_map(op.map.data, ops)),)


def _run_store(
    self: InterpreterFunctions, interpreter: Interpreter, op: affine.StoreOp, args: PythonValues
) -> PythonValues:
    value, mem, *ops = args
    mem.store(_eval_map(op.map.data, ops), value)
    return ()


@register_impls
class AffineKernelFunctions(InterpreterFunctions):
    """affine ops with dims and symbols split as the map says."""

    # xDSL's classes, and those NEM's contexts parse (D-XDSL-AFFINE-SSA)
    run_load = impl(affine.LoadOp)(_run_load)
    run_upstream_load = impl(affine_ssa_maps.LoadOp)(_run_load)
    run_store = impl(affine.StoreOp)(_run_store)
    run_upstream_store = impl(affine_ssa_maps.StoreOp)(_run_store)

    @impl(affine.ApplyOp)
    def run_apply(
        self, interpreter: Interpreter, op: affine.ApplyOp, args: PythonValues
    ) -> PythonValues:
        return tuple(_eval_map(op.map.data, args))

    @impl(affine.MinOp)
    def run_min(
        self, interpreter: Interpreter, op: affine.MinOp, args: PythonValues
    ) -> PythonValues:
        return (min(_eval_map(op.map.data, args)),)

    @impl(AffineMaxOp)
    def run_max(
        self, interpreter: Interpreter, op: AffineMaxOp, args: PythonValues
    ) -> PythonValues:
        return (max(_eval_map(op.map.data, args)),)

    @impl(affine.ForOp)
    def run_for(
        self, interpreter: Interpreter, op: affine.ForOp, args: PythonValues
    ) -> PythonValues:
        n_lb, n_ub = len(op.lowerBoundOperands), len(op.upperBoundOperands)
        lb = max(_eval_map(op.lowerBoundMap.data, args[:n_lb]))
        ub = min(_eval_map(op.upperBoundMap.data, args[n_lb : n_lb + n_ub]))
        carried = tuple(args[n_lb + n_ub :])
        step = op.step.value.data
        for i in range(lb, ub, step):
            carried = tuple(interpreter.run_ssacfg_region(op.body, (i, *carried)))
        return carried

    @impl(affine.ParallelOp)
    def run_parallel(
        self, interpreter: Interpreter, op: affine.ParallelOp, args: PythonValues
    ) -> PythonValues:
        """Bounds: max over each lower-bound group, min over each upper one;
        each `reduce` result combines as `interpreter.reductions` says
        (`affine_reductions`)."""
        lb_map, ub_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
        n_lb = lb_map.num_dims + lb_map.num_symbols
        lbs = _grouped(max, _eval_map(lb_map, args[:n_lb]), op.lowerBoundsGroups)
        ubs = _grouped(min, _eval_map(ub_map, args[n_lb:]), op.upperBoundsGroups)
        # these functions are registered on a KernelInterpreter only
        reductions = cast(ReducingInterpreter, interpreter).reductions[op]
        return _parallel_loops(
            interpreter,
            op.body,
            lbs,
            ubs,
            [s.value.data for s in op.steps.data],
            [identity for _, identity in reductions],
            lambda k, acc, v: interpreter.run_op(reductions[k][0], (acc, v))[0],
        )

    @impl(AffineIfOp)
    def run_if(self, interpreter: Interpreter, op: AffineIfOp, args: PythonValues) -> PythonValues:
        cond = op.condition.data
        dims, syms = list(args[: cond.num_dims]), list(args[cond.num_dims :])
        holds = all(
            _CONSTRAINT[c.kind](c.lhs.eval(dims, syms), c.rhs.eval(dims, syms))
            for c in cond.constraints
        )
        region = op.then_region if holds else op.else_region
        if not region.blocks:
            return ()
        return tuple(interpreter.run_ssacfg_region(region, ()))

    run_yield = impl_terminator(affine.YieldOp)(_return_operands)


@register_impls
class ScfKernelFunctions(InterpreterFunctions):
    """scf.parallel and its scf.reduce terminator, which xDSL's interpreter
    lacks, and scf.for with MLIR's positive-step requirement."""

    @impl(scf.ParallelOp)
    def run_parallel(
        self, interpreter: Interpreter, op: scf.ParallelOp, args: PythonValues
    ) -> PythonValues:
        """Each reduction starts from its init value; its scf.reduce region
        combines (accumulator, value), as the `scf.for` nest of
        `-convert-scf-to-cf` applies it."""
        n = len(op.lowerBound)
        last = op.body.block.last_op
        assert isinstance(last, scf.ReduceOp)  # the op verified (`unsupported`)
        regions = last.reductions
        return _parallel_loops(
            interpreter,
            op.body,
            args[:n],
            args[n : 2 * n],
            args[2 * n : 3 * n],
            args[3 * n :],
            lambda k, acc, v: interpreter.run_ssacfg_region(regions[k], (acc, v))[0],
        )

    @impl(scf.ForOp)
    def run_for(self, interpreter: Interpreter, op: scf.ForOp, args: PythonValues) -> PythonValues:
        """xDSL's scf.for, refusing a non-positive step (MLIR requires a
        positive one; xDSL's would iterate backwards or fail in `range`)."""
        if args[2] <= 0:
            raise_undefined(UNDEFINED["for_step"](args[2]))
        return _XDSL_SCF.run_for(interpreter, op, args)

    run_reduce = impl_terminator(scf.ReduceOp)(_return_operands)
    run_reduce_return = impl_terminator(scf.ReduceReturnOp)(_return_operands)


_XDSL_SCF = ScfFunctions()
"""xDSL's scf implementations, which `ScfKernelFunctions.run_for` defers to."""


def _projection(rank: int, dropped: Container[int]) -> AffineMap:
    """(d0, ..., d{rank-1}) -> the dims not in `dropped`, in order."""
    return AffineMap(
        rank, 0, tuple(AffineExpr.dimension(k) for k in range(rank) if k not in dropped)
    )


class _AsGeneric:
    """A `linalg.reduce` or `linalg.broadcast` (one input, one init) seen as
    the structured op MLIR defines it to be, for `run_linalg_structured_op`
    and `_linalg_unsupported` (xDSL 0.74 does not derive them from
    LinalgStructuredOperation).  Indexing maps as MLIR's: reduce loops over
    the input (identity) and indexes the init by the dims not reduced;
    broadcast loops over the init (identity) and indexes the input by the
    dims not added.  The loop ranges follow from the maps as for any
    structured op (the inherited methods)."""

    OPS = (LinalgReduceOp, LinalgBroadcastOp)
    # LinalgStructuredOperation's methods, run on this stand-in (they read only
    # the indexing maps and the operands)
    get_num_loops: ClassVar[Callable[[Any], int]] = LinalgStructuredOperation.get_num_loops
    get_loops_to_shapes_map: ClassVar[Callable[[Any], AffineMap]] = (
        LinalgStructuredOperation.get_loops_to_shapes_map
    )
    get_shapes_to_loops_map: ClassVar[Callable[[Any], AffineMap]] = (
        LinalgStructuredOperation.get_shapes_to_loops_map
    )

    def __init__(self, op: LinalgReduceOp | LinalgBroadcastOp) -> None:
        self.inputs, self.outputs = (op.input,), (op.init,)
        self.results, self.body = op.results, op.regions[0]
        dims = set(op.dimensions.get_values())
        if isinstance(op, LinalgReduceOp):
            t = op.input.type
            assert isinstance(t, ShapedType)  # a memref or tensor operand
            rank = len(t.get_shape())
            maps = (AffineMap.identity(rank), _projection(rank, dims))
        else:
            t = op.init.type
            assert isinstance(t, ShapedType)
            rank = len(t.get_shape())
            maps = (_projection(rank, dims), AffineMap.identity(rank))
        self._maps = ArrayAttr(AffineMapAttr(m) for m in maps)

    def get_indexing_maps(self) -> ArrayAttr:
        return self._maps


STRUCTURED = (LinalgStructuredOperation, *_AsGeneric.OPS)


def as_structured(op: Operation) -> LinalgStructuredOperation | _AsGeneric:
    """`op` (a `STRUCTURED` op) as `run_linalg_structured_op` takes it."""
    if isinstance(op, _AsGeneric.OPS):
        return _AsGeneric(op)
    return cast(LinalgStructuredOperation, op)  # the other STRUCTURED ops


class LinalgKernelFunctions(InterpreterFunctions):
    """Every structured linalg op (generic, the named ops, transpose, and
    reduce/broadcast through `_AsGeneric`) runs as its generic form with
    xDSL's `run_linalg_structured_op`: loops over the iteration space in
    dimension order, as MLIR's linalg-to-loops lowering (the named ops list
    their reduction dimensions last), accumulating into the output element by
    element, and the body region interpreted per point, so each body op is
    rounded like any other op.  It replaces xDSL's fill/conv/pooling
    implementations, which read `ShapedArray.data` (not the numpy storage)
    and want zeroed outputs.  Registered below for each structured op class
    of the linalg dialect."""


def _run_structured(
    self: InterpreterFunctions, interpreter: Interpreter, op: Operation, args: PythonValues
) -> PythonValues:
    """xDSL's `run_linalg_structured_op` (an `_AsGeneric` has what it reads
    of a structured op), or, for a body that asks its point's indices
    (`linalg.index`, which xDSL 0.74's runner does not give it: a gather
    written with `tensor.extract` at `linalg.index` compiled, and its kernel
    could not run, an outside user, session 66), the same loops here, each
    point's indices kept for `run_index`."""
    structured = cast(LinalgStructuredOperation, as_structured(op))
    if structured.results or not any(isinstance(o, IndexOp) for o in structured.body.walk()):
        results: PythonValues = run_linalg_structured_op(interpreter, structured, args)
        return results
    points: list[tuple[int, ...]] = self.__dict__.setdefault("points", [])
    n_in = len(structured.inputs)
    maps = [m.data for m in structured.get_indexing_maps()]
    outs = args[n_in:]
    shapes = [d for a in args if isinstance(a, ShapedArray) for d in a.shape]
    for point in product(*map(range, structured.get_shapes_to_loops_map().eval(shapes, []))):
        scalars = tuple(
            a.load(m.eval(point, ())) if isinstance(a, ShapedArray) else a
            for a, m in zip(args, maps, strict=True)
        )
        points.append(point)
        try:
            values = interpreter.run_ssacfg_region(structured.body, scalars, "for_loop")
        finally:
            points.pop()
        for value, out, m in zip(values, outs, maps[n_in:], strict=True):
            cast(ShapedArray[Any], out).store(m.eval(point, ()), value)
    return ()


# xDSL's structured ops, and those NEM's contexts parse in their place (the
# contractions as upstream builds them, D-LOW-LINALG-NAMED)
for _op in dict.fromkeys(
    (*linalg.Linalg.operations, *mlir_dialect_factories()["linalg"]().operations)
):
    if issubclass(_op, STRUCTURED):
        _suffix = "" if _op in linalg.Linalg.operations else "_upstream"
        setattr(
            LinalgKernelFunctions,
            f"run_{_op.name.split('.')[1]}{_suffix}",
            impl(_op)(_run_structured),
        )


@impl(IndexOp)
def _run_index(
    self: InterpreterFunctions, interpreter: Interpreter, op: IndexOp, args: PythonValues
) -> PythonValues:
    """`linalg.index d`: dimension d of the point the innermost structured
    op's body runs at (`_run_structured`)."""
    return (self.__dict__["points"][-1][op.dim.value.data],)


LinalgKernelFunctions.run_index = _run_index  # type: ignore[attr-defined]
register_impls(LinalgKernelFunctions)  # the methods set above (in place)


def first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _verify_failure(op: Operation) -> str | None:
    """The first line of `op`'s verifier error (its regions unchecked), or None."""
    try:
        op.verify(verify_nested_ops=False)
    except Exception as e:  # noqa: BLE001 - any verifier failure
        return first_line(e)
    return None


def _linalg_unsupported(op: LinalgStructuredOperation | _AsGeneric) -> str | None:
    """Why a structured linalg op cannot run, or None.  `run_linalg_structured_op`
    stores every body result into the first output, and a body must yield
    the output's element type: a named op parsed from its custom form over
    mixed element types gets xDSL's body without MLIR's casts (e.g.
    `arith.addf` of bf16 and f32), which fails verification.  xDSL's body for
    a pooling op parsed from its custom form is max(input, window element),
    not MLIR's max(output, input): a pooling body must read the output."""
    if op.results or len(op.outputs) != 1 or getattr(op, "library_call", None) is not None:
        return "is supported only with one memref output, no results, no library_call"
    if isinstance(op, PoolingOperation) and not op.body.block.args[-1].uses:
        return (
            "has a body that ignores the output (xDSL's body for the custom form of a "
            "pooling op); the generic form with MLIR's body runs"
        )
    out = op.outputs[0].type
    want = out.get_element_type() if isinstance(out, MemRefType) else None
    yielded = [v.type for v in op.body.block.last_op.operands] if op.body.block.last_op else []
    if yielded != [want]:
        return (
            f"yields {', '.join(map(str, yielded)) or 'nothing'} into a memref of {want} "
            "(implicit casts are not supported)"
        )
    for body_op in op.body.block.ops:
        why = _verify_failure(body_op)
        if why is not None:
            return f"has a body that does not verify ({body_op.name}: {why})"
    return None


# affine.parallel `reduce` kinds as upstream `-lower-affine` lowers them: the
# arith op its scf.reduce region applies to (accumulator, value)
# (arith::getReductionOp) and the identity it starts from
# (arith::getIdentityValue: +0.0 for addf).  The other kinds (assign, maxs,
# maxnumf, xori, ...) fail upstream's verifier or its lowering.
_AFFINE_REDUCTIONS = {
    "addf": (arith.AddfOp, 0.0),
    "mulf": (arith.MulfOp, 1.0),
    "maximumf": (arith.MaximumfOp, -math_inf),
    "minimumf": (arith.MinimumfOp, math_inf),
    "addi": (arith.AddiOp, 0),
    "muli": (arith.MuliOp, 1),
    "andi": (arith.AndIOp, -1),
    "ori": (arith.OrIOp, 0),
}
# arith::AtomicRMWKind by its number, as MLIR's generic form prints `reductions`
ATOMIC_RMW_KINDS = (
    "addf",
    "addi",
    "andi",
    "assign",
    "maximumf",
    "maxnumf",
    "maxs",
    "maxu",
    "minimumf",
    "minnumf",
    "mins",
    "minu",
    "mulf",
    "muli",
    "ori",
    "xori",
)
_AFFINE_PARALLEL_PROPS = (
    "lowerBoundsMap",
    "lowerBoundsGroups",
    "upperBoundsMap",
    "upperBoundsGroups",
    "steps",
)


def reduction_kinds(op: affine.ParallelOp) -> list[str]:
    """The `reduce` kinds of an affine.parallel: upstream prints them as
    AtomicRMWKind numbers, xDSL declares them as strings; both are read."""
    attr = op.properties.get("reductions")
    kinds = []
    for a in attr.data if isinstance(attr, ArrayAttr) else ():
        if isinstance(a, IntegerAttr) and 0 <= a.value.data < len(ATOMIC_RMW_KINDS):
            kinds.append(ATOMIC_RMW_KINDS[a.value.data])
        else:
            kinds.append(a.data if isinstance(a, StringAttr) else str(a))
    return kinds


def _kind_fits(kind: str, t: Attribute) -> bool:
    """A `reduce` kind -lower-affine lowers, on a result type it accepts (a
    float identity: a float type; an integer one: an integer type)."""
    spec = _AFFINE_REDUCTIONS.get(kind)
    if spec is None:
        return False
    return type(t) in NP_FLOAT if isinstance(spec[1], float) else isinstance(t, IntegerType)


def _affine_parallel_unsupported(op: affine.ParallelOp) -> str | None:
    """Why an affine.parallel cannot run, or None.  Checked here rather than
    by xDSL's verifier, which counts the results among the operands and
    wants string reductions (upstream's generic form has numbers)."""
    missing = [p for p in _AFFINE_PARALLEL_PROPS if p not in op.properties]
    if missing:
        return f"lacks {', '.join(missing)}"
    lb, ub = op.lowerBoundsMap.data, op.upperBoundsMap.data
    groups = (op.lowerBoundsGroups.get_values(), op.upperBoundsGroups.get_values())
    n = len(op.body.block.args)
    if (
        len(op.steps.data) != n
        or any(len(g) != n for g in groups)
        or (sum(groups[0]), sum(groups[1])) != (len(lb.results), len(ub.results))
        or len(op.operands) != lb.num_dims + lb.num_symbols + ub.num_dims + ub.num_symbols
    ):
        return "has bound maps, bound groups, steps and operands that do not match"
    kinds = reduction_kinds(op)
    last = op.body.block.last_op
    yielded = last.operands if isinstance(last, affine.YieldOp) else ()
    if not len(kinds) == len(op.results) == len(yielded):
        return (
            f"has {len(kinds)} reductions and {len(op.results)} results and yields "
            f"{len(yielded)} values"
        )
    for kind, res in zip(kinds, op.results):
        if not _kind_fits(kind, res.type):
            return (
                f'reduces with "{kind}" into {res.type} (supported, as upstream '
                "-lower-affine lowers them: addf, mulf, maximumf, minimumf on floats; "
                "addi, muli, andi, ori on integers)"
            )
    return None


def affine_reductions(op: affine.ParallelOp) -> list[tuple[Operation, Any]]:
    """(combiner, identity) per `reduce` result of a checked affine.parallel:
    the combiner is the arith op of its kind on a detached (accumulator,
    value) pair of the result type, so that running it through the
    interpreter rounds or wraps exactly as that op does in a body."""
    out = []
    for kind, res in zip(reduction_kinds(op), op.results):
        make, identity = _AFFINE_REDUCTIONS[kind]
        acc, value = Block(arg_types=[res.type, res.type]).args
        out.append((make(acc, value), identity))
    return out


# ops whose xDSL verifier checks, as MLIR's, what their implementation here
# relies on (operand, result and region counts; the shapes of reduce/broadcast)
_VERIFIED = (*_AsGeneric.OPS, scf.ParallelOp, scf.ReduceOp)


def unsupported(op: Operation, impls: Container[type[Operation]]) -> str | None:
    """Why `op` cannot run in the kernel interpreter, or None."""
    if type(op) not in impls:
        return "has no implementation in the kernel interpreter"
    rounding = other_rounding(op)
    if rounding is not None:
        return (
            f"rounds {rounding}: the kernel interpreter and the native path round to "
            "nearest even only (D-RT-MLIR-ROUNDING)"
        )
    if isinstance(op, _AsGeneric.OPS) and len(op.operands) != 2:
        return (
            f"is supported only with one input and one init (it has {len(op.operands)} "
            "operands; xDSL 0.74 defines no variadic form)"
        )
    if isinstance(op, _VERIFIED):
        why = _verify_failure(op)
        if why is not None:
            return f"does not verify ({why})"
    if isinstance(op, STRUCTURED):
        return _linalg_unsupported(as_structured(op))
    if isinstance(op, affine.ParallelOp):
        return _affine_parallel_unsupported(op)
    return None
