"""Emission of window plans (`windows.py`, D-LOW-WINDOW): `conv2d in X, W
out T` + `add in Y, T out Y`, or `maxpool in X out T` + `max in Y, T out
Y` (the output's prior contents are accumulated as D-LOW-ACCUM does for
matmul), over regions whose logical axes (NHWC / HWIO) step along the
memref dimensions that carry them: an NCHW input is an NHWC region with
permuted strides, no transpose task.  A window sum, and a max pooling
without a legal `maxpool` variant, is one `add` / `max` per window offset
(`_combine_over_offsets`, D-LOW-SUMPOOL)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.ir import Operation, SSAValue

from nem.passes.lowering.accumulators import Accumulator, accumulator
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.emit import region
from nem.passes.lowering.escape import emit_escape
from nem.passes.lowering.nest_analysis import NotRaisable, saturating_add
from nem.passes.lowering.staging import (
    Staging,
    commit_accumulating,
    drop_unused_scratch,
    illegal,
    name_task,
    region_shape,
    scratch,
)
from nem.passes.lowering.state import BlockState, Lowering
from nem.passes.lowering.views import View
from nem.passes.lowering.windows import Axis, Group, WAccess, WindowPlan

if TYPE_CHECKING:
    from nem.dialect.builder import NemBuilder


def window_region(
    ctx: LoweringContext,
    b: NemBuilder,
    acc: WAccess,
    axes: tuple[Axis, ...],
    anchor: Operation,
    layout: str,
    group: tuple[int, int, int] | None = None,
) -> tuple[SSAValue, View]:
    """The region of `acc` with the plan's logical axes; `group` (the
    position of the channel axis, the group loop's memref dimension and
    extent) widens that axis to all groups (D-LOW-GROUPCONV)."""
    vw, start, shape, strides = _window_box(ctx, acc, axes, anchor, group)
    return region(ctx, b, vw, start, shape, strides, anchor, layout), vw


def _window_box(
    ctx: LoweringContext,
    acc: WAccess,
    axes: tuple[Axis, ...],
    anchor: Operation,
    group: tuple[int, int, int] | None,
) -> tuple[View, Aff, list[int], list[int]]:
    """`window_region`'s view, first element, shape and strides (a band's
    `add` shifts them by rows: `_emit_window`)."""
    vw = ctx.view(acc.memref, anchor)
    start = vw.base
    for ix, s in zip(acc.index, vw.strides):
        start = start + ix.rest.scale(s)
    shape = [a.size for a in axes]
    strides = [vw.strides[a.mdim] if a.mdim is not None else 1 for a in axes]
    if group is not None:
        k, gdim, gsize = group
        shape[k], strides[k] = _merged(shape[k], strides[k], gsize, vw.strides[gdim])
    return vw, start, shape, strides


def _merged(size: int, stride: int, gsize: int, gstride: int) -> tuple[int, int]:
    """The channel axis of all groups: channel `g * size + c` at element
    `g * gstride + c * stride`, one axis when `gstride = size * stride`."""
    if gsize == 1:
        return size, stride
    if size == 1:
        return gsize, gstride
    if gstride != size * stride:
        raise Unmerged(
            "a grouped convolution whose group and channel dimensions are not "
            "one channel axis (group stride != channels x channel stride: "
            "D-LOW-GROUPCONV)"
        )
    return gsize * size, stride


class Unmerged(NotRaisable):
    """A group loop whose dimension does not extend the channel axis
    (`_merged`): the reason names the computation (`unmerged_reason`)."""


def unmerged_reason(plan: WindowPlan, e: Unmerged) -> str:
    """Why `plan`'s tile is not one `conv2d groups=G`: a batched matmul's
    batch dimension is outside its rows, never next to a channel axis (one
    matmul per tile is raised: D-COMPILE-BATCH-TILE tiles the batch by 1)."""
    if not plan.batched_matmul():
        return str(e)
    assert plan.group is not None
    return (
        f"a batched matmul of {plan.group.size} matrices per tile (one conv2d "
        "raises one: the batch is not next to a channel dimension, "
        "D-LOW-GROUPCONV); tile the batch loop by 1 (D-COMPILE-BATCH-TILE)"
    )


def emit_window(
    lw: Lowering, plan: WindowPlan, anchor: Operation, st: BlockState, what: str
) -> None:
    """The plan's two tasks, or one escape-hatch task when either has no
    legal variant on the target (a window sum that would wrap is escaped
    by `RaiseAnalysis`, before)."""
    ctx = lw.ctx
    if plan.kind == "sumpool":  # no NEM opcode sums a window (D-LOW-SUMPOOL)
        return _combine_over_offsets(lw, plan, anchor, st, what, "add", None)
    stg = Staging(anchor.location)
    g = plan.group
    try:
        return _emit_window(lw, plan, anchor, st, what, stg, g)
    except NotRaisable as e:
        stg.drop()
        drop_unused_scratch(ctx)
        why = unmerged_reason(plan, e) if isinstance(e, Unmerged) else str(e)
        return emit_escape(lw, anchor, st, why, what)


def _emit_window(
    lw: Lowering,
    plan: WindowPlan,
    anchor: Operation,
    st: BlockState,
    what: str,
    stg: Staging,
    g: Group | None,
) -> None:
    """`emit_window` once its staging block exists (a grouped convolution
    whose channel axes do not merge raises NotRaisable)."""
    ctx = lw.ctx
    b = stg.builder
    grouped = f" (groups={g.size})" if g is not None and g.size > 1 else ""
    with b.located(anchor.location):
        x_reg, _ = window_region(
            ctx, b, plan.x, plan.x_axes, anchor, "NHWC", None if g is None else (3, g.x, g.size)
        )
        y_reg, yv = window_region(
            ctx, b, plan.y, plan.y_axes, anchor, "NHWC", None if g is None else (3, g.y, g.size)
        )
        if plan.kind == "conv2d":
            assert plan.w is not None
            w_reg, _ = window_region(
                ctx, b, plan.w, plan.w_axes, anchor, "HWIO", None if g is None else (3, g.w, g.size)
            )
            attrs: dict[str, object] = {
                "strides": list(plan.strides),
                "dilations": list(plan.dilations),
                "pads": [0, 0, 0, 0],
            }
            if g is not None and g.size > 1:
                attrs["groups"] = g.size
            # the sum and what Y holds rounded once where the variant is
            # legal (f16, D-CONV-BIAS), else into scratch + add (D-LOW-ACCUM)
            fused = [x_reg, w_reg, y_reg]
            if commit_accumulating(
                ctx,
                stg,
                st,
                "conv2d",
                fused,
                lambda: b.compute("conv2d", fused, [y_reg], attrs=attrs),
            ):
                ctx.summary.raised.append(f"{what} -> conv2d{grouped} (accumulating bias)")
                return
        shape = region_shape(y_reg)
        if plan.kind == "conv2d":  # a band of a split one: its rows of one scratch
            acc = accumulator(ctx, st, anchor, yv, shape)
            tv = acc.view
            t_reg = region(ctx, b, tv, acc.start, shape, tv.strides, anchor, "NHWC")
            main = b.compute("conv2d", [x_reg, w_reg], [t_reg], attrs=attrs)
            if acc.adds is None:  # a later band adds these rows
                combine = None
            elif acc.adds == (0, shape[1]):  # its own rows: not split, or the rows before lost
                combine = b.compute("add", [y_reg, t_reg], [y_reg])
            else:
                combine = _add_rows(ctx, b, plan, anchor, acc)
        else:
            tv = scratch(ctx, st, yv, shape, anchor)
            t_reg = region(ctx, b, tv, tv.base, shape, tv.strides, anchor, "NHWC")
            main = b.compute(
                "maxpool",
                [x_reg],
                [t_reg],
                attrs={
                    "kernel_shape": list(plan.kernel),
                    "strides": list(plan.strides),
                    "pads": [0, 0, 0, 0],
                },
            )
            combine = b.compute("max", [y_reg, t_reg], [y_reg])
    why = (
        illegal(ctx, main)
        or (saturating_add(yv.elem) if plan.kind == "conv2d" else None)
        or (illegal(ctx, combine) if combine is not None else _add_illegal(ctx, yv, tv))
    )
    if why is not None and plan.kind == "maxpool":
        stg.drop()
        drop_unused_scratch(ctx)
        return _combine_over_offsets(lw, plan, anchor, st, what, "max", why)
    if why is not None:
        stg.drop()
        return emit_escape(lw, anchor, st, why, what)
    stg.commit(st)
    name_task(ctx, main, plan.kind)
    if combine is not None:  # (a band before the last adds nothing)
        name_task(ctx, combine, "add" if plan.kind == "conv2d" else "max")
    ctx.summary.raised.append(
        f"{what} -> {plan.kind}{grouped} + "
        f"{'add' if plan.kind == 'conv2d' else 'max'} (accumulation)"
    )


def _add_rows(
    ctx: LoweringContext, b: NemBuilder, plan: WindowPlan, anchor: Operation, acc: Accumulator
) -> SSAValue:
    """`add in Y, T out Y` over the rows `acc.adds` of the last band of a
    split convolution (relative to its first row: the bands before it too,
    D-COMPILE-NMU-SPLIT)."""
    g = plan.group
    yv, start, shape, strides = _window_box(
        ctx, plan.y, plan.y_axes, anchor, None if g is None else (3, g.y, g.size)
    )
    assert acc.adds is not None
    lo, hi = acc.adds
    rows = [shape[0], hi - lo, *shape[2:]]
    tv = acc.view
    y_add = region(ctx, b, yv, start + Aff.c(lo * strides[1]), rows, strides, anchor, "NHWC")
    t_add = region(
        ctx, b, tv, acc.start + Aff.c(lo * tv.strides[1]), rows, tv.strides, anchor, "NHWC"
    )
    return b.compute("add", [y_add, t_add], [y_add])


def _add_illegal(ctx: LoweringContext, yv: View, tv: View) -> str | None:
    """Why the last band's `add` would have no variant (asked of an earlier
    band, which builds none: every band takes the same path)."""
    return ctx.legality.why_not("add", [yv.elem, tv.elem], [yv.elem])


def _combine_over_offsets(
    lw: Lowering,
    plan: WindowPlan,
    anchor: Operation,
    st: BlockState,
    what: str,
    opcode: str,
    why_not_pool: str | None,
) -> None:
    """One `OPCODE in Y, X(kh, kw) out Y` per window offset, `X(kh, kw)`
    the input strided by the pooling strides from that offset: max pooling
    without a `maxpool` variant (f32 on the shipped devices; exact, max is
    order-independent), or a window sum with `add` (D-LOW-SUMPOOL: the
    offsets in the nest's window-loop order, so every element is rounded
    as the nest rounds it)."""
    ctx = lw.ctx
    stg = Staging(anchor.location)
    b = stg.builder
    vw = ctx.view(plan.x.memref, anchor)
    base = vw.base
    for ix, s in zip(plan.x.index, vw.strides):
        base = base + ix.rest.scale(s)
    xs = [vw.strides[a.mdim] if a.mdim is not None else 1 for a in plan.x_axes]
    shape = [a.size for a in plan.y_axes]
    strides = [xs[0], xs[1] * plan.strides[0], xs[2] * plan.strides[1], xs[3]]
    kh, kw = plan.kernel
    offsets = (
        [(i, j) for i in range(kh) for j in range(kw)]
        if plan.h_first
        else [(i, j) for j in range(kw) for i in range(kh)]
    )
    toks = []
    with b.located(anchor.location):
        y_reg, _ = window_region(ctx, b, plan.y, plan.y_axes, anchor, "NHWC")
        for i, j in offsets:
            start = base + Aff.c(i * xs[1] + j * xs[2])
            x_reg = region(ctx, b, vw, start, shape, strides, anchor, "NHWC")
            toks.append(b.compute(opcode, [y_reg, x_reg], [y_reg]))
    why = illegal(ctx, toks[0])
    if why is not None:
        stg.drop()
        return emit_escape(
            lw, anchor, st, why if why_not_pool is None else f"{why_not_pool}, and {why}", what
        )
    stg.commit(st)
    for t in toks:
        name_task(ctx, t, opcode)
    kind = "max pooling" if opcode == "max" else "window sum"
    ctx.summary.raised.append(f"{what} -> {len(toks)} {opcode} ({kind} over window offsets)")
