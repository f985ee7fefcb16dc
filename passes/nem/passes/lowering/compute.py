"""Compute: raising loop nests and linalg ops to NEM opcodes (D-LOW-RAISE,
D-LOW-ACCUM, D-LOW-TILES), else the escape hatch (`escape.py`).

Which plan, or the escape hatch and why, is `raise_decision.RaiseAnalysis`'s
decision (an analysis apart from this rewrite); this module emits it.  A
plan is emitted into a `Staging` block first: the regions and candidate
tasks are built, each candidate is checked against the target's type
families, and the staging block is then committed to the NEM block, or
dropped when some task has no legal variant (the computation falls back to
one escape-hatch task, D-LOW-OUTLINE).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, Operation, SSAValue

from nem.dialect.builder import NemBuilder
from nem.dialect.ops import ComputeOp
from nem.frontends.upstream_dialects.linalg_softmax import SoftmaxOp
from nem.passes.lowering.access_bounds import check_access_bounds
from nem.passes.lowering.accumulators import accumulator
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.broadcasts import BroadcastPlan, broadcast_leaf, emit_broadcast
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.emit import region
from nem.passes.lowering.escape import emit_escape, linalg_operands, location_text
from nem.passes.lowering.fills import access_box, emit_fill
from nem.passes.lowering.nest_analysis import (
    Access,
    EltNode,
    EltOp,
    Load,
    Operand,
    Splat,
    in_place_operand,
    saturating_add,
    wrapping_in,
)
from nem.passes.lowering.raise_decision import (
    Copy,
    Decision,
    Eltwise,
    Escape,
    Fill,
    NamedEltwise,
    NamedLinalg,
    NestMatmul,
    RaiseAnalysis,
)
from nem.passes.lowering.raise_windows import emit_window
from nem.passes.lowering.staging import (
    Staging,
    commit_accumulating,
    copy_kind,
    full_region,
    illegal,
    name_task,
    region_shape,
    scratch,
)
from nem.passes.lowering.state import BlockState, Lowering
from nem.passes.lowering.views import View
from nem.passes.lowering.windows import WindowPlan

if TYPE_CHECKING:
    from xdsl.dialects import affine


def _task(token: SSAValue) -> ComputeOp:
    op = token.owner
    assert isinstance(op, ComputeOp)
    return op


# ---------------------------------------------------------------------------
# Regions and scratch buffers
# ---------------------------------------------------------------------------


def access_region(
    ctx: LoweringContext,
    b: NemBuilder,
    acc: Access,
    exts: dict[int, int],
    anchor: Operation,
    layout: str | None = None,
) -> tuple[SSAValue, View]:
    """The region a nest access covers: the extents of its nest dimensions."""
    vw = ctx.view(acc.memref, anchor)
    box = access_box(vw, acc, exts)
    return region(ctx, b, vw, box.start, box.shape, box.strides, anchor, layout), vw


# ---------------------------------------------------------------------------
# Matmul, elementwise, copy
# ---------------------------------------------------------------------------


def emit_matmul(
    lw: Lowering,
    stg: Staging,
    st: BlockState,
    anchor: Operation,
    a: SSAValue,
    b: SSAValue,
    c: tuple[SSAValue, View],
    trans: tuple[bool, bool],
    what: str,
) -> str | None:
    """C += A x B.  One `matmul in A, B, C out C` when that variant is legal,
    else `matmul in A, B out T` + `add in C, T out C` (D-LOW-ACCUM).  Returns
    the reason when neither is legal (the caller falls back)."""
    ctx = lw.ctx
    bld = stg.builder
    c_reg, cv = c
    flags: dict[str, object] = {
        k: 1 for k, f in (("trans_a", trans[0]), ("trans_b", trans[1])) if f
    }

    def fused() -> SSAValue:
        with bld.located(anchor.location):
            return bld.compute("matmul", [a, b, c_reg], [c_reg], attrs=flags)

    if commit_accumulating(ctx, stg, st, "matmul", [a, b, c_reg], fused):
        ctx.summary.raised.append(f"{what} -> matmul (accumulating bias)")
        return None
    shape = region_shape(c_reg)
    tv = scratch(ctx, st, cv, shape, anchor)
    with bld.located(anchor.location):
        t_reg = region(ctx, bld, tv, tv.base, shape, tv.strides, anchor, "MN")
        mm = bld.compute("matmul", [a, b], [t_reg], attrs=flags)
        add = bld.compute("add", [c_reg, t_reg], [c_reg])
    why = illegal(ctx, mm) or saturating_add(cv.elem) or illegal(ctx, add)
    if why is not None:
        return why
    stg.commit(st)
    name_task(ctx, mm, "matmul")
    name_task(ctx, add, "add")
    ctx.summary.raised.append(f"{what} -> matmul + add (accumulation)")
    return None


def lower_nest(lw: Lowering, top: affine.ForOp, st: BlockState) -> None:
    """A loop nest: one raised task per op of its plan, else one escape-hatch
    task (the decision is `RaiseAnalysis.nest`'s)."""
    ctx = lw.ctx
    what = f"loop nest at {location_text(top)}"
    check_access_bounds(top, ctx.env)  # D-LOW-BOUNDS, raised or not
    decision = RaiseAnalysis(ctx.env, ctx.view, ctx.roots).nest(top)
    if isinstance(decision, Escape):
        for op in decision.after:
            check_access_bounds(op, ctx.env)
    emit_decision(lw, decision, top, st, what)


def emit_decision(
    lw: Lowering, decision: Decision, anchor: Operation, st: BlockState, what: str
) -> None:
    """The tasks of `RaiseAnalysis`'s decision for `anchor` (a loop nest or
    a linalg op); a plan whose tasks have no legal variant on the target
    falls back to the escape hatch there (`staging.illegal`)."""
    ctx = lw.ctx
    if isinstance(decision, Escape):
        return emit_escape(lw, anchor, st, decision.why, what, decision.after)
    if isinstance(decision, Fill):
        return emit_fill(lw, decision.box, decision.steps, anchor, st, what)
    if isinstance(decision, Copy):
        return _emit_copy(
            lw,
            Staging(anchor.location),
            st,
            decision.src,
            decision.dst,
            decision.extents,
            anchor,
            what,
        )
    if isinstance(decision, BroadcastPlan):
        return emit_broadcast(lw, decision, anchor, st, what)
    if isinstance(decision, WindowPlan):
        return emit_window(lw, decision, anchor, st, what)
    stg = Staging(anchor.location)
    b = stg.builder
    if isinstance(decision, NestMatmul):
        plan, exts = decision.plan, decision.extents
        with b.located(anchor.location):
            a_reg, _ = access_region(
                ctx, b, plan.a.access, exts, anchor, "KM" if plan.trans_a else "MK"
            )
            b_reg, _ = access_region(
                ctx, b, plan.b.access, exts, anchor, "NK" if plan.trans_b else "KN"
            )
            c = access_region(ctx, b, plan.c, exts, anchor, "MN")
        why = emit_matmul(lw, stg, st, anchor, a_reg, b_reg, c, (plan.trans_a, plan.trans_b), what)
        if why is not None:
            stg.drop()
            emit_escape(lw, anchor, st, why, what)
        return
    if isinstance(decision, Eltwise):
        exts = decision.extents
        with b.located(anchor.location):
            trees = [
                (root, access_region(ctx, b, acc, exts, anchor))
                for root, acc in zip(decision.roots, decision.outs)
            ]
        return _raise_over_accesses(lw, stg, st, trees, decision.outs[0], exts, anchor, what)
    if isinstance(decision, NamedEltwise):
        with b.located(anchor.location):
            out = full_region(ctx, b, linalg_operands(anchor)[1][0], anchor)
        return raise_eltwise(
            lw,
            stg,
            st,
            [(decision.root, out)],
            anchor,
            what,
            lambda leaf: full_region(ctx, b, _operand(leaf).memref, anchor),
            (),
            lambda leaf: True,
        )
    _emit_named(lw, decision, anchor, stg, st, what)


def _raise_over_accesses(
    lw: Lowering,
    stg: Staging,
    st: BlockState,
    trees: Sequence[tuple[EltOp, tuple[SSAValue, View]]],
    out_acc: Access,
    exts: dict[int, int],
    anchor: Operation,
    what: str,
) -> None:
    """`raise_eltwise` for trees whose leaves are loads over the loops of
    `out_acc` (a nest's, or a `linalg.generic`'s, D-LOW-RAISE): a leaf
    indexed like the output is its region, a broadcast one is copied to the
    output's shape first (D-LOW-BCAST-OPERAND)."""
    ctx = lw.ctx
    b = stg.builder
    copies: list[SSAValue] = []

    def leaf_region(leaf: Load | Operand) -> tuple[SSAValue, View]:
        acc = _load(leaf).access
        if acc.dims == out_acc.dims:
            return access_region(ctx, b, acc, exts, anchor)
        return broadcast_leaf(lw, b, st, acc, out_acc, trees[0][1][1], exts, anchor, copies)

    raise_eltwise(
        lw,
        stg,
        st,
        trees,
        anchor,
        what,
        leaf_region,
        copies,
        lambda leaf: _load(leaf).access.dims == out_acc.dims,
    )


def _emit_copy(
    lw: Lowering,
    stg: Staging,
    st: BlockState,
    src: Access,
    dst: Access,
    exts: dict[int, int],
    anchor: Operation,
    what: str,
) -> None:
    """A copy nest or copying `linalg.generic` as one transfer (D-LOW-COPYNEST)."""
    ctx = lw.ctx
    b = stg.builder
    with b.located(anchor.location):
        s, _ = access_region(ctx, b, src, exts, anchor)
        d, _ = access_region(ctx, b, dst, exts, anchor)
        tok = b.transfer(d, s)
    stg.commit(st)
    name_task(ctx, tok, "copy")
    ctx.summary.raised.append(f"{what} -> transfer (copy)")


def _load(leaf: Load | Operand) -> Load:
    assert isinstance(leaf, Load)
    return leaf


def raise_eltwise(
    lw: Lowering,
    stg: Staging,
    st: BlockState,
    trees: Sequence[tuple[EltOp, tuple[SSAValue, View]]],
    anchor: Operation,
    what: str,
    leaf_region: Callable[[Load | Operand], tuple[SSAValue, View]],
    copies: Sequence[SSAValue] = (),
    direct: Callable[[Load | Operand], bool] | None = None,
) -> None:
    """One task per op of each elementwise tree (D-LOW-RAISE), the tree
    `root` of each (root, out) writing `out` (a `linalg.generic` has one
    tree per output, in order), when every op has a legal variant and all
    operands have one shape; else the whole computation falls back to the
    escape hatch.  `copies`: the tasks `leaf_region` stages for broadcast
    operands; `direct(leaf)`: whether a leaf is indexed like the output, a
    splat source (D-LOW-SPLAT-SOURCE); without one each splat clamps its
    sibling."""
    ctx = lw.ctx
    wraps = next((w for w in (wrapping_in(root) for root, _ in trees) if w), None)
    if wraps is not None:  # D-LOW-INT-WRAP
        stg.drop()
        return emit_escape(lw, anchor, st, wraps, what)
    if any(n.opcode == "pow" for root, _ in trees for n in _ops(root)):
        direct = None
    with stg.builder.located(anchor.location):
        per_tree = [
            _tree_steps(ctx, stg.builder, st, root, out, anchor, leaf_region, direct)
            for root, out in trees
        ]
    steps = [step for tree in per_tree for step in tree]
    shapes = {tuple(region_shape(r)) for _, tok in steps for r in _task(tok).ins}
    out_shapes = {tuple(region_shape(out[0])) for _, out in trees}
    why = (
        "operand shapes differ (broadcast)"
        if len(shapes | out_shapes) > 1
        else next((w for w in (illegal(ctx, tok) for _, tok in steps) if w), None)
    )
    if why is not None:
        stg.drop()
        return emit_escape(lw, anchor, st, why, what)
    stg.commit(st)
    for tok in copies:
        name_task(ctx, tok, copy_kind(tok))
    for opcode, tok in steps:
        name_task(ctx, tok, opcode)
    kinds = sorted({copy_kind(t).replace("copy", "transfer") for t in copies})
    moved = f"{len(copies)} {'/'.join(kinds)} (broadcast operand) + " if copies else ""
    ops = ", ".join(" + ".join(op for op, _ in tree) for tree in per_tree) + (
        f" ({len(trees)} outputs)" if len(trees) > 1 else ""
    )
    ctx.summary.raised.append(f"{what} -> {moved}{ops}")


def _ops(node: EltNode) -> list[EltOp]:
    """The ops of an elementwise tree."""
    if not isinstance(node, EltOp):
        return []
    return [node, *(o for c in node.operands for o in _ops(c))]


def _tree_steps(
    ctx: LoweringContext,
    b: NemBuilder,
    st: BlockState,
    root: EltOp,
    out: tuple[SSAValue, View],
    anchor: Operation,
    leaf_region: Callable[[Load | Operand], tuple[SSAValue, View]],
    direct: Callable[[Load | Operand], bool] | None = None,
) -> list[tuple[str, SSAValue]]:
    """The candidate tasks of an elementwise tree, in evaluation order:
    (opcode, token); the root writes `out`, every inner op a hoisted scratch
    region of the same shape and of its result's element type (D-LOW-ACCUM's
    scratch buffers; a `cast` converts, every other op
    keeps its operands' type: D-LOW-CAST-TREE), every distinct splat too:
    `clamp` of a source of the splat's type that is ready before the ops, a
    leaf `direct` accepts or a cast of one (D-LOW-SPLAT-SOURCE), else of
    the op's other operand (D-LOW-SPLAT); a splat of the same value, type
    and source is made once.  An op computes in place over the result of
    its first operand that is an op of its own type but no cast (D-HAZ-INPLACE
    allows it; `_into`): a chain of ops takes one scratch region, not one
    per op (D-LOW-TREE-INPLACE).  Where no leaf reads `out`'s buffer, that
    chain below the root computes in `out` itself, and takes none."""
    steps: list[tuple[str, SSAValue]] = []
    shape = region_shape(out[0])
    leaves = [
        x for x in root.leaves() if not isinstance(x, Splat) and direct is not None and direct(x)
    ]
    sources: dict[Attribute, SSAValue] = {}
    splats: dict[tuple[float, Attribute, SSAValue], tuple[SSAValue, View]] = {}
    temps: set[SSAValue] = set()  # (the scratch regions the tree's ops write)
    early = _apart(ctx, root, out[1])
    elem_of = _elems()

    def splat_like(sibling: SSAValue, elem: Attribute) -> SSAValue:
        if elem not in sources:
            leaf = next((x for x in leaves if _leaf_elem(x) == elem), None)
            if leaf is None:
                return sibling
            sources[elem] = leaf_region(leaf)[0]
        return sources[elem]

    def temp(elem: Attribute) -> tuple[SSAValue, View]:
        sv = scratch(ctx, st, out[1], shape, anchor, ident=len(steps) + 1, elem=elem)
        made = region(ctx, b, sv, sv.base, shape, sv.strides, anchor), sv
        temps.add(made[0])
        return made

    def emit(node: EltNode, target: tuple[SSAValue, View] | None) -> tuple[SSAValue, View]:
        if isinstance(node, Splat):
            raise AssertionError("a splat is made beside its sibling")
        if not isinstance(node, EltOp):
            return leaf_region(node)
        into = _into(node, elem_of)
        down = target if early and into is not None and target is not None else None
        if down is not None and into is not None and elem_of(node.operands[into]) != down[1].elem:
            down = None
        made = {
            k: emit(c, down if k == into else None)
            for k, c in enumerate(node.operands)
            if not isinstance(c, Splat)
        }
        like, like_view = next(iter(made.values()))
        for k, c in enumerate(node.operands):
            if isinstance(c, Splat):
                src = splat_like(like, like_view.elem)
                key = (c.value, like_view.elem, src)  # one clamp per distinct splat
                if key not in splats:
                    splats[key] = temp(like_view.elem)
                    steps.append(
                        (
                            "clamp",
                            b.compute("clamp", [src], [splats[key][0]], min=c.value, max=c.value),
                        )
                    )
                made[k] = splats[key]
        ins = [made[k] for k in range(len(node.operands))]
        if target is None and into is not None and made[into][0] in temps:
            target = made[into]  # (in place over its operand's scratch)
        if into is not None and made[into] == target:  # (its splats' sources change)
            for key in [key for key in splats if key[2] == target[0]]:
                del splats[key]
        if target is None:
            target = temp(like_view.elem if node.to is None else node.to)
        steps.append(
            (
                node.opcode,
                b.compute(node.opcode, [r for r, _ in ins], [target[0]], attrs=dict(node.attrs)),
            )
        )
        if node.to is not None and node.operands[0] in leaves:
            sources.setdefault(node.to, target[0])  # a cast of a direct leaf
        return target

    emit(root, out)
    return steps


def _elems() -> Callable[[EltNode], Attribute]:
    """The element type of a (non-splat) node's result, remembered per
    node for one tree: `_into` asks it of each op and of its operands, and
    an op's answer is found at the bottom of its chain (quadratic in a
    chain's depth if asked afresh)."""
    memo: dict[int, Attribute] = {}  # (by identity: the tree outlives it)

    def elem(node: EltNode) -> Attribute:
        key = id(node)
        if key not in memo:
            if isinstance(node, EltOp) and node.to is not None:
                memo[key] = node.to
            elif isinstance(node, EltOp):
                memo[key] = elem(next(c for c in node.operands if not isinstance(c, Splat)))
            else:
                assert not isinstance(node, Splat)
                memo[key] = _leaf_elem(node)
        return memo[key]

    return elem


def _into(node: EltOp, elem: Callable[[EltNode], Attribute]) -> int | None:
    """The operand an op computes in place over (`in_place_operand`), its
    nodes' element types by `elem` (`_elems`)."""
    return in_place_operand(
        node.to is not None,
        elem(node),
        [(elem(c), c.to is not None) if isinstance(c, EltOp) else None for c in node.operands],
    )


def _apart(ctx: LoweringContext, root: EltOp, out: View) -> bool:
    """No leaf of the tree `root` reads the buffer `out` views (each leaf's
    memref known to the lowering), so that its ops may write `out` before
    the last leaf is read."""
    for leaf in root.leaves():
        if isinstance(leaf, Splat):
            continue
        memref = leaf.access.memref if isinstance(leaf, Load) else leaf.memref
        view = ctx.views.get(memref)
        if view is None or view.buffer == out.buffer:
            return False
    return True


def _leaf_elem(leaf: Load | Operand) -> Attribute:
    """The element type of a leaf's memref."""
    mem = leaf.access.memref if isinstance(leaf, Load) else leaf.memref
    t = mem.type
    assert isinstance(t, MemRefType)
    elem: Attribute = t.element_type
    return elem


# ---------------------------------------------------------------------------
# linalg
# ---------------------------------------------------------------------------


def lower_linalg(lw: Lowering, op: Operation, st: BlockState) -> None:
    """A linalg op: raised as `RaiseAnalysis.linalg` decides, else one
    escape-hatch task."""
    decision = RaiseAnalysis(lw.ctx.env, lw.ctx.view, lw.ctx.roots).linalg(op)
    emit_decision(lw, decision, op, st, f"{op.name} at {location_text(op)}")


def _emit_named(
    lw: Lowering, decision: NamedLinalg, op: Operation, stg: Staging, st: BlockState, what: str
) -> None:
    """`linalg.matmul`, `linalg.conv_2d_nhwc_hwcf`, `linalg.softmax`, or
    `linalg.copy` as one transfer."""
    ctx = lw.ctx
    ins, outs = linalg_operands(op)
    b = stg.builder
    if decision.kind == "linalg.matmul":
        with b.located(op.location):
            a_reg, _ = full_region(ctx, b, ins[0], op, "MK")
            b_reg, _ = full_region(ctx, b, ins[1], op, "KN")
            c = full_region(ctx, b, outs[0], op, "MN")
        why = emit_matmul(lw, stg, st, op, a_reg, b_reg, c, (False, False), what)
        if why is not None:
            stg.drop()
            emit_escape(lw, op, st, why, what)
        return
    if decision.kind == "linalg.conv_2d_nhwc_hwcf":
        return _lower_conv(lw, op, ins, outs, stg, st, what)
    if decision.kind == "linalg.softmax":
        return _lower_softmax(lw, op, stg, st, what)
    assert decision.kind == "linalg.copy"
    with b.located(op.location):  # what transform.structured.promote copies (D-LOW-VIEW)
        src, _ = full_region(ctx, b, ins[0], op)
        dst, _ = full_region(ctx, b, outs[0], op)
        tok = b.transfer(dst, src)
    stg.commit(st)
    name_task(ctx, tok, "copy")
    ctx.summary.raised.append(f"{what} -> transfer (copy)")


def _operand(leaf: Load | Operand) -> Operand:
    assert isinstance(leaf, Operand)
    return leaf


def _lower_softmax(lw: Lowering, op: Operation, stg: Staging, st: BlockState, what: str) -> None:
    """`linalg.softmax dimension(d)` -> `softmax in X out Y axis=d`
    (D-LOW-SOFTMAX); a located error where the device has no variant."""
    ctx = lw.ctx
    ins, outs = linalg_operands(op)
    b = stg.builder
    with b.located(op.location):
        x, _ = full_region(ctx, b, ins[0], op)
        y, _ = full_region(ctx, b, outs[0], op)
        assert isinstance(op, SoftmaxOp)
        tok = b.compute("softmax", [x], [y], axis=op.dimension.value.data)
    why = illegal(ctx, tok)
    if why is not None:  # the kernel interpreter has no linalg.softmax either
        stg.drop()
        raise reject(
            op,
            f"not supported: {why} (D-LOW-SOFTMAX)",
            "decompose it upstream first (transform.structured.decompose_interface, "
            "which nem-compile applies where the device has no softmax variant)",
        )
    stg.commit(st)
    name_task(ctx, tok, "softmax")
    ctx.summary.raised.append(f"{what} -> softmax")


def _lower_conv(
    lw: Lowering,
    op: Operation,
    ins: Sequence[SSAValue],
    outs: Sequence[SSAValue],
    stg: Staging,
    st: BlockState,
    what: str,
) -> None:
    """`conv2d in X, W, Y out Y` where that variant is legal (f16: the sum
    and what Y holds rounded once, D-CONV-BIAS), else `conv2d in X, W out T`
    + `add in Y, T out Y` (D-LOW-ACCUM)."""
    ctx = lw.ctx
    b = stg.builder
    attrs: dict[str, object] = {}
    for key in ("strides", "dilations"):
        a = op.attributes.get(key) or op.properties.get(key)
        vals = list(a.get_values()) if a is not None and hasattr(a, "get_values") else [1, 1]
        attrs[key] = [int(v) for v in vals]
    attrs["pads"] = [0, 0, 0, 0]
    with b.located(op.location):
        x_reg, _ = full_region(ctx, b, ins[0], op, "NHWC")
        w_reg, _ = full_region(ctx, b, ins[1], op, "HWIO")
        y_reg, yv = full_region(ctx, b, outs[0], op, "NHWC")

    def fused() -> SSAValue:
        with b.located(op.location):
            return b.compute("conv2d", [x_reg, w_reg, y_reg], [y_reg], attrs=attrs)

    if commit_accumulating(ctx, stg, st, "conv2d", [x_reg, w_reg, y_reg], fused):
        ctx.summary.raised.append(f"{what} -> conv2d (accumulating bias)")
        return
    with b.located(op.location):
        shape = region_shape(y_reg)
        acc = accumulator(ctx, st, op, yv, shape)
        tv = acc.view
        t_reg = region(ctx, b, tv, acc.start, shape, tv.strides, op, "NHWC")
        conv = b.compute("conv2d", [x_reg, w_reg], [t_reg], attrs=attrs)
        add = None
        if acc.adds is not None:  # this band's rows, and those of the bands before it
            lo, hi = acc.adds
            rows = [shape[0], hi - lo, *shape[2:]]
            y_add = region(
                ctx, b, yv, yv.base + Aff.c(lo * yv.strides[1]), rows, yv.strides, op, "NHWC"
            )
            t_add = region(
                ctx, b, tv, acc.start + Aff.c(lo * tv.strides[1]), rows, tv.strides, op, "NHWC"
            )
            add = b.compute("add", [y_add, t_add], [y_add])
    why = (
        illegal(ctx, conv)
        or saturating_add(yv.elem)
        or ctx.legality.why_not("add", [yv.elem, tv.elem], [yv.elem])
    )
    if why is not None:
        stg.drop()
        return emit_escape(lw, op, st, why, what)
    stg.commit(st)
    name_task(ctx, conv, "conv2d")
    if add is not None:
        name_task(ctx, add, "add")
    ctx.summary.raised.append(f"{what} -> conv2d + add (accumulation)")
