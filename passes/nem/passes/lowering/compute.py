"""Compute: raising loop nests and linalg ops to NEM opcodes (D-LOW-RAISE,
D-LOW-ACCUM, D-LOW-TILES), else the escape hatch (`escape.py`).

A raise plan (`nest_analysis`) is emitted into a `Staging` block first: the
regions and candidate tasks are built, each candidate is checked against
the target's type families, and the staging block is then committed to the
NEM block, or dropped when some task has no legal variant (the computation
falls back to one escape-hatch task).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import IntegerAttr, IntegerType, MemRefType
from xdsl.dialects.linalg.ops import GenericOp  # (not the deprecated lazy attribute)
from xdsl.ir import Attribute, Operation, SSAValue

from nem.dialect.builder import NemBuilder
from nem.dialect.ops import ComputeOp
from nem.frontends.upstream_dialects.linalg_softmax import SoftmaxOp
from nem.passes.lowering.access_bounds import check_access_bounds
from nem.passes.lowering.aliasing import alias_reason, linalg_alias_reason, nest_touches
from nem.passes.lowering.broadcasts import (
    BroadcastPlan,
    broadcast_leaf,
    emit_broadcast,
    match_broadcast,
)
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.emit import region
from nem.passes.lowering.escape import (
    CARRIED,
    carried_out,
    emit_escape,
    linalg_operands,
    location_text,
)
from nem.passes.lowering.fills import access_box, emit_fill, lower_linalg_fill, nest_fill
from nem.passes.lowering.generic_analysis import (
    NOT_ELTWISE_GENERIC,
    generic_accesses,
    generic_copy,
    generic_trees,
)
from nem.passes.lowering.nest_analysis import (
    LINALG_ELTWISE,
    LINALG_WRAPPING,
    Access,
    CopyPlan,
    EltNode,
    EltOp,
    EltwisePlan,
    Load,
    MatmulPlan,
    Nest,
    NotRaisable,
    Operand,
    Splat,
    analyze,
    match_nest,
    saturating_add,
    wrapping_in,
)
from nem.passes.lowering.raise_windows import emit_window
from nem.passes.lowering.staging import (
    Staging,
    commit_if_legal,
    copy_kind,
    full_region,
    illegal,
    name_task,
    region_shape,
    scratch,
)
from nem.passes.lowering.state import BlockState, Lowering
from nem.passes.lowering.views import View
from nem.passes.lowering.windows import (
    NotWindow,
    WindowPlan,
    match_window_generic,
    match_window_nest,
)

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
    with bld.located(anchor.location):
        fused = bld.compute("matmul", [a, b, c_reg], [c_reg], attrs=flags)
    if commit_if_legal(ctx, stg, st, fused, "matmul"):
        ctx.summary.raised.append(f"{what} -> matmul (accumulating bias)")
        return None
    shape = region_shape(c_reg)
    tv = scratch(ctx, cv, shape, anchor)
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
    """A loop nest: one raised task per op of its plan, else one escape-hatch task."""
    ctx = lw.ctx
    what = f"loop nest at {location_text(top)}"
    check_access_bounds(top, ctx.env)  # D-LOW-BOUNDS, raised or not
    if top.results:  # values carried out of the loop (D-LOW-CARRIED)
        after = carried_out(top)
        for op in after:
            check_access_bounds(op, ctx.env)
        return emit_escape(lw, top, st, CARRIED, what, after)
    try:
        nest = analyze(top, ctx.env)
    except (NotRaisable, ValueError) as e:
        return emit_escape(lw, top, st, str(e), what)

    def aliased() -> str | None:  # checked once a plan matched (D-LOW-ALIAS)
        return alias_reason(nest_touches(nest, ctx.env, ctx.view))

    try:
        plan = match_nest(nest, ctx.env, lambda m, u: ctx.view(m, u).buffer)
    except (NotRaisable, ValueError) as e:
        if str(e) in COPY_LIKE:
            return _broadcast_or_escape(lw, top, st, str(e), what, nest, aliased)
        return _window_or_escape(
            lw, top, st, str(e), what, lambda: match_window_nest(nest, ctx.env), aliased
        )
    why = aliased()
    if why is not None:
        return emit_escape(lw, top, st, why, what)
    exts = nest.extents
    stg = Staging(top.location)
    b = stg.builder
    if isinstance(plan, MatmulPlan):
        with b.located(top.location):
            a_reg, _ = access_region(
                ctx, b, plan.a.access, exts, top, "KM" if plan.trans_a else "MK"
            )
            b_reg, _ = access_region(
                ctx, b, plan.b.access, exts, top, "NK" if plan.trans_b else "KN"
            )
            c = access_region(ctx, b, plan.c, exts, top, "MN")
        why = emit_matmul(lw, stg, st, top, a_reg, b_reg, c, (plan.trans_a, plan.trans_b), what)
        if why is not None:
            stg.drop()
            emit_escape(lw, top, st, why, what)
        return
    if isinstance(plan, CopyPlan):
        return _emit_copy(lw, stg, st, plan.src.access, plan.dst, exts, top, what)
    assert isinstance(plan, EltwisePlan)
    with b.located(top.location):
        out = access_region(ctx, b, plan.out, exts, top)
    _raise_over_accesses(lw, stg, st, [(plan.root, out)], plan.out, exts, top, what)


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
        return broadcast_leaf(lw, b, acc, out_acc, trees[0][1][1], exts, anchor, copies)

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


def _lower_generic_copy(
    lw: Lowering,
    op: GenericOp,
    st: BlockState,
    what: str,
    src: Access | Attribute,
    dst: Access,
    exts: dict[int, int],
) -> None:
    """A `linalg.generic` that yields an input or a constant (`generic_copy`):
    a fill (D-LOW-FILL), one transfer, or D-LOW-BCAST's transfers for a
    transposing or broadcasting copy."""
    ctx = lw.ctx
    if not isinstance(src, Access):
        return emit_fill(lw, access_box(ctx.view(dst.memref, op), dst, exts), src, op, st, what)
    if ctx.view(src.memref, op).buffer is ctx.view(dst.memref, op).buffer:
        return emit_escape(lw, op, st, "a copy within one buffer", what)
    if src.dims == dst.dims:
        return _emit_copy(lw, Staging(op.location), st, src, dst, exts, op, what)
    emit_broadcast(lw, BroadcastPlan(src, dst, exts), op, st, what)


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
            _tree_steps(ctx, stg.builder, root, out, anchor, leaf_region, direct)
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
    root: EltOp,
    out: tuple[SSAValue, View],
    anchor: Operation,
    leaf_region: Callable[[Load | Operand], tuple[SSAValue, View]],
    direct: Callable[[Load | Operand], bool] | None = None,
) -> list[tuple[str, SSAValue]]:
    """The candidate tasks of an elementwise tree, in evaluation order:
    (opcode, token); the root writes `out`, every inner op a hoisted scratch
    region of the same shape and of its result's element type (D-LOW-ACCUM's
    scratch buffers, one per inner op; a `cast` converts, every other op
    keeps its operands' type: D-LOW-CAST-TREE), every distinct splat too:
    `clamp` of a source of the splat's type that is ready before the ops, a
    leaf `direct` accepts or a cast of one (D-LOW-SPLAT-SOURCE), else of
    the op's other operand (D-LOW-SPLAT); a splat of the same value, type
    and source is made once."""
    steps: list[tuple[str, SSAValue]] = []
    shape = region_shape(out[0])
    leaves = [
        x for x in root.leaves() if not isinstance(x, Splat) and direct is not None and direct(x)
    ]
    sources: dict[Attribute, SSAValue] = {}
    splats: dict[tuple[float, Attribute, SSAValue], tuple[SSAValue, View]] = {}

    def splat_like(sibling: SSAValue, elem: Attribute) -> SSAValue:
        if elem not in sources:
            leaf = next((x for x in leaves if _leaf_elem(x) == elem), None)
            if leaf is None:
                return sibling
            sources[elem] = leaf_region(leaf)[0]
        return sources[elem]

    def temp(elem: Attribute) -> tuple[SSAValue, View]:
        sv = scratch(ctx, out[1], shape, anchor, ident=len(steps) + 1, elem=elem)
        return region(ctx, b, sv, sv.base, shape, sv.strides, anchor), sv

    def emit(node: EltNode, target: tuple[SSAValue, View] | None) -> tuple[SSAValue, View]:
        if isinstance(node, Splat):
            raise AssertionError("a splat is made beside its sibling")
        if not isinstance(node, EltOp):
            return leaf_region(node)
        made = {k: emit(c, None) for k, c in enumerate(node.operands) if not isinstance(c, Splat)}
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


def _leaf_elem(leaf: Load | Operand) -> Attribute:
    """The element type of a leaf's memref."""
    mem = leaf.access.memref if isinstance(leaf, Load) else leaf.memref
    t = mem.type
    assert isinstance(t, MemRefType)
    return t.element_type


# ---------------------------------------------------------------------------
# linalg
# ---------------------------------------------------------------------------


def lower_linalg(lw: Lowering, op: Operation, st: BlockState) -> None:
    """`linalg.matmul`, `linalg.conv_2d_nhwc_hwcf`, named elementwise ops
    and elementwise `linalg.generic` are raised; other linalg ops fall back."""
    ctx = lw.ctx
    what = f"{op.name} at {location_text(op)}"
    ins, outs = linalg_operands(op)
    if op.results:
        raise reject(op, "linalg on tensors is not supported; bufferize first (one-shot-bufferize)")
    if op.name == "linalg.fill":
        return lower_linalg_fill(lw, op, st, what)
    for v in (*ins, *outs):
        if not isinstance(v.type, MemRefType):
            return emit_escape(lw, op, st, "scalar operands", what)
    # NEM's softmax reads a row before it writes it: in place on the very
    # same memref is what it computes; any other overlap is checked
    if not (isinstance(op, SoftmaxOp) and ins[0] is outs[0]):
        why = linalg_alias_reason(op, ctx.view, (ins, outs))  # D-LOW-ALIAS
        if why is not None:
            return emit_escape(lw, op, st, why, what)
    stg = Staging(op.location)
    b = stg.builder
    if op.name == "linalg.matmul":
        with b.located(op.location):
            a_reg, _ = full_region(ctx, b, ins[0], op, "MK")
            b_reg, _ = full_region(ctx, b, ins[1], op, "KN")
            c = full_region(ctx, b, outs[0], op, "MN")
        why = emit_matmul(lw, stg, st, op, a_reg, b_reg, c, (False, False), what)
        if why is not None:
            stg.drop()
            emit_escape(lw, op, st, why, what)
        return
    if op.name == "linalg.conv_2d_nhwc_hwcf":
        return _lower_conv(lw, op, ins, outs, stg, st, what)
    if op.name == "linalg.softmax":
        return _lower_softmax(lw, op, stg, st, what)
    if op.name == "linalg.copy" and _same_box(ctx.view(ins[0], op), ctx.view(outs[0], op)):
        with b.located(op.location):  # what transform.structured.promote copies (D-LOW-VIEW)
            src, _ = full_region(ctx, b, ins[0], op)
            dst, _ = full_region(ctx, b, outs[0], op)
            tok = b.transfer(dst, src)
        stg.commit(st)
        name_task(ctx, tok, "copy")
        ctx.summary.raised.append(f"{what} -> transfer (copy)")
        return
    if isinstance(op, GenericOp):
        generic = op

        def shape_of(v: SSAValue) -> tuple[int, ...]:
            return ctx.view(v, generic).shape

        try:
            copy = generic_copy(op, shape_of)
            roots = generic_trees(op, shape_of) if copy is None else []
        except NotRaisable as e:
            return _window_or_escape(
                lw, op, st, str(e), what, lambda: match_window_generic(generic, shape_of)
            )
        if copy is not None:
            return _lower_generic_copy(lw, op, st, what, *copy)
        accesses, exts = generic_accesses(op, shape_of)
        outs_acc = accesses[len(ins) :]
        with b.located(op.location):
            trees = [
                (root, access_region(ctx, b, acc, exts, op)) for root, acc in zip(roots, outs_acc)
            ]
        return _raise_over_accesses(lw, stg, st, trees, outs_acc[0], exts, op, what)
    if op.name not in LINALG_ELTWISE:
        return emit_escape(lw, op, st, "no NEM opcode for this linalg op", what)
    with b.located(op.location):
        out = full_region(ctx, b, outs[0], op)
    wraps = LINALG_WRAPPING.get(op.name) if isinstance(out[1].elem, IntegerType) else None
    root = EltOp(LINALG_ELTWISE[op.name], tuple(Operand(v) for v in ins), wraps=wraps)
    raise_eltwise(
        lw,
        stg,
        st,
        [(root, out)],
        op,
        what,
        lambda leaf: full_region(ctx, b, _operand(leaf).memref, op),
        (),
        lambda leaf: True,
    )


WINDOW_LIKE = ("a strided or skewed access", NOT_ELTWISE_GENERIC)
"""Why `match_nest` / `generic_trees` refuse what may be a convolution or pooling."""


def _window_or_escape(
    lw: Lowering,
    anchor: Operation,
    st: BlockState,
    why: str,
    what: str,
    match: Callable[[], WindowPlan],
    aliased: Callable[[], str | None] = lambda: None,
) -> None:
    """A convolution or max pooling (D-LOW-WINDOW), else the escape hatch
    with the reason: the window matcher's when the computation looked like
    one (skewed accesses), else `why`; `aliased()`: why a matched plan may
    not be raised (D-LOW-ALIAS)."""
    try:
        plan = match()
    except NotWindow:
        return emit_escape(lw, anchor, st, why, what)
    except (NotRaisable, ValueError) as e:
        return emit_escape(lw, anchor, st, str(e) if why in WINDOW_LIKE else why, what)
    overlap = aliased()
    if overlap is not None:
        return emit_escape(lw, anchor, st, overlap, what)
    emit_window(lw, plan, anchor, st, what)


COPY_LIKE = (
    "a copy that transposes or broadcasts",
    "the body is not a tree of elementwise operations over loads",
)
"""Why `match_nest` refuses what may be a transposing or broadcasting copy."""


def _broadcast_or_escape(
    lw: Lowering,
    top: affine.ForOp,
    st: BlockState,
    why: str,
    what: str,
    nest: Nest,
    aliased: Callable[[], str | None],
) -> None:
    """A transposing or broadcasting copy as transfers (D-LOW-BCAST), else
    the escape hatch with the reason (`aliased()`: D-LOW-ALIAS's, once a
    copy matched)."""
    try:
        fill = nest_fill(nest, lw.ctx.env, lw.ctx.view)  # D-LOW-FILL
        if fill is not None:
            return emit_fill(lw, *fill, top, st, what)
        plan = match_broadcast(nest, lw.ctx.env, why)
    except (NotRaisable, ValueError) as e:
        return emit_escape(lw, top, st, str(e), what)
    overlap = aliased()
    if overlap is not None:
        return emit_escape(lw, top, st, overlap, what)
    emit_broadcast(lw, plan, top, st, what)


def _same_box(a: View, b: View) -> bool:
    """Two views a transfer can copy between: same element type and shape."""
    return a.elem == b.elem and a.shape == b.shape


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
        fused = b.compute("conv2d", [x_reg, w_reg, y_reg], [y_reg], attrs=attrs)
    if commit_if_legal(ctx, stg, st, fused, "conv2d"):
        ctx.summary.raised.append(f"{what} -> conv2d (accumulating bias)")
        return
    with b.located(op.location):
        shape = region_shape(y_reg)
        # a band of a tile's convolution (D-COMPILE-NMU-SPLIT): a scratch of its
        # own, so that the bands run at once
        part = op.attributes.get("nem_part")
        ident = 1000 + part.value.data if isinstance(part, IntegerAttr) else 0
        tv = scratch(ctx, yv, shape, op, ident=ident)
        t_reg = region(ctx, b, tv, tv.base, shape, tv.strides, op, "NHWC")
        conv = b.compute("conv2d", [x_reg, w_reg], [t_reg], attrs=attrs)
        add = b.compute("add", [y_reg, t_reg], [y_reg])
    why = illegal(ctx, conv) or saturating_add(yv.elem) or illegal(ctx, add)
    if why is not None:
        stg.drop()
        return emit_escape(lw, op, st, why, what)
    stg.commit(st)
    name_task(ctx, conv, "conv2d")
    name_task(ctx, add, "add")
    ctx.summary.raised.append(f"{what} -> conv2d + add (accumulation)")
