"""Element-type casts (D-LOW-CAST): a nest or `linalg.generic` whose body
is one `arith` cast of a load, stored in the same order (`y[i..] =
truncf(x[i..])`, what an importer's precision change becomes), is one
`cast in X out Y` with the `saturate` that gives MLIR's result:

    arith.extf, arith.extsi       exact either way (the default)
    arith.truncf, arith.sitofp    saturate=0: a finite value beyond the target's
                                  range is +-inf, as IEEE rounding gives
    arith.trunci                  saturate=0: two's-complement wrap

`arith.fptosi`/`fptoui` truncate toward zero where NEM's cast rounds half to
even, and `uitofp`/`extui` read the source as unsigned where a NEM integer
region is signed (D-NUM-CAST): those stay escape-hatch tasks, with that
reason.  A cast inside a larger body is not raised here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nem.passes.lowering.affine_algebra import Aff, is_identity, is_index_arith
from nem.passes.lowering.nest_analysis import Access, Nest, NotRaisable, access
from xdsl.dialects import affine, arith, linalg, memref
from xdsl.ir import BlockArgument, Operation, SSAValue

if TYPE_CHECKING:
    from nem.passes.lowering.driver import BlockState, Lowerer

SATURATE = {"arith.extf": None, "arith.extsi": None, "arith.truncf": 0, "arith.sitofp": 0,
            "arith.trunci": 0}
"""The casts raised, and the `saturate` attribute each needs (None: default)."""

NOT_RAISED = {
    "arith.fptosi": "truncates toward zero, NEM's cast rounds half to even",
    "arith.fptoui": "truncates toward zero, NEM's cast rounds half to even",
    "arith.uitofp": "reads its source as unsigned, NEM integer regions are signed",
    "arith.extui": "reads its source as unsigned, NEM integer regions are signed",
}


@dataclass(frozen=True)
class CastPlan:
    name: str
    """The MLIR cast op."""
    src: Access | None
    """The nest's load (None: a linalg.generic's whole operands)."""
    dst: Access | None


def _cast_op(op: Operation | None) -> str | None:
    """The name of a cast op, raising for the casts that are not raised."""
    if op is None or op.name not in (*SATURATE, *NOT_RAISED):
        return None
    if op.name in NOT_RAISED:
        raise NotRaisable(f"'{op.name}' {NOT_RAISED[op.name]} (D-LOW-CAST)")
    return op.name


def match_cast_nest(nest: Nest, outer: Mapping[SSAValue, Aff]) -> CastPlan | None:
    """The plan of a nest `Y[..] = cast(X[..])` (None: not a cast nest)."""
    stores = [o for o in nest.body if isinstance(o, affine.StoreOp | memref.StoreOp)]
    if len(stores) != 1:
        return None
    st = stores[0]
    cast = st.value.owner
    if not isinstance(cast, Operation) or cast not in nest.body:
        return None
    name = _cast_op(cast)
    load = cast.operands[0].owner if name else None
    if not isinstance(load, affine.LoadOp | memref.LoadOp) or load not in nest.body or any(
            o not in (st, cast, load) and not isinstance(o, arith.ConstantOp)
            and not is_index_arith(o) for o in nest.body):
        return None
    assert name is not None
    src, dst = access(nest, outer, load), access(nest, outer, st)
    if src.dims != dst.dims or sorted(dst.dims) != list(range(len(nest.loops))):
        raise NotRaisable(f"'{name}' of a load that transposes or broadcasts (D-LOW-CAST)")
    return CastPlan(name, src, dst)


def match_cast_generic(op: linalg.GenericOp) -> CastPlan | None:
    """The plan of an identity-map, all-parallel generic whose body is
    `yield cast(in0)` (None: another body)."""
    block = op.regions[0].block
    ops = list(block.ops)
    if len(ops) != 2 or len(op.inputs) != 1 or len(op.outputs) != 1:
        return None
    cast, yld = ops
    arg = cast.operands[0] if cast.operands else None
    if not (isinstance(arg, BlockArgument) and arg.block is block and arg.index == 0
            and yld.operands and yld.operands[0] is cast.results[0]):
        return None
    name = _cast_op(cast)
    if name is None:
        return None
    maps = [m.data for m in op.indexing_maps.data]
    if not all(is_identity(m) for m in maps) or any(
            str(it.data).split(".")[-1].lower() != "parallel" for it in op.iterator_types.data):
        raise NotRaisable(f"'{name}' in a linalg.generic that is not elementwise (D-LOW-CAST)")
    return CastPlan(name, None, None)


def emit_cast(lw: Lowerer, plan: CastPlan, anchor: Operation, st: BlockState, what: str,
              exts: dict[int, int] | None = None) -> None:
    """`cast in X out Y [saturate=0]`, else one escape-hatch task with the reason."""
    from nem.passes.lowering.compute import (
        Staging,
        access_region,
        full_region,
        illegal,
        name_task,
    )
    from nem.passes.lowering.escape import emit_escape, linalg_operands

    ctx = lw.ctx
    stg = Staging(anchor.location)
    b = stg.builder
    with b.located(anchor.location):
        if plan.src is not None and plan.dst is not None:
            assert exts is not None
            x, _ = access_region(ctx, b, plan.src, exts, anchor)
            y, _ = access_region(ctx, b, plan.dst, exts, anchor)
        else:
            ins, outs = linalg_operands(anchor)
            x, _ = full_region(ctx, b, ins[0], anchor)
            y, _ = full_region(ctx, b, outs[0], anchor)
        sat = SATURATE[plan.name]
        tok = b.compute("cast", [x], [y], attrs={} if sat is None else {"saturate": sat})
    why = illegal(ctx, tok)
    if why is not None:
        stg.drop()
        return emit_escape(lw, anchor, st, f"{why} (D-LOW-CAST)", what)
    stg.commit(st)
    name_task(ctx, tok, "cast")
    ctx.summary.raised.append(f"{what} -> cast ({plan.name})")
