"""Constant fills (D-LOW-FILL): `linalg.fill` and the nests storing one
constant into a box (what `linalg.fill` becomes as loops, tiled or not)
as NEM tasks.

NEM has no fill opcode and `.nem` text no constant buffers, so the
constant is D-LOW-SPLAT's splat, `clamp in S out B min=c max=c`, with
the box `B` itself as `S`.  A float box may hold NaN (a fresh buffer is
undefined, a user's output buffer anything) and `clamp(NaN) = NaN`, so
its old contents are first made harmless without reading them as floats:

1. `clamp in B8 out B8 min=0 max=0`, `B8` the box's bytes as `i8`
   (integers have no NaN, so every byte becomes 0 whatever it held; all
   zero bytes are +0 in every float and integer type, whatever the byte
   order) -- a `+0` fill is this one task;
2. `clamp in B out B min=c max=c` (`clamp(+0, c, c) = c` exactly);
3. for c = +-inf, which `.nem` numbers cannot write: c is the largest
   finite value of that sign, then `add in B, B out B` (IEEE overflow
   rounds `2 * max` to inf, D-NUM-FLOAT).

An integer box has no NaN: a nonzero integer fill is step 2 alone.  A NaN
or -0.0 fill stays an escape-hatch task, with that reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue

from nem.passes.lowering.affine_algebra import Aff, is_index_arith
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.emit import expr, region
from nem.passes.lowering.escape import emit_escape
from nem.passes.lowering.nest_analysis import Access, Nest, NotRaisable, access
from nem.passes.lowering.partial_tiles import RegionAccess
from nem.passes.lowering.staging import Staging, illegal, name_task
from nem.passes.lowering.state import BlockState, Lowering
from nem.passes.lowering.views import View

if TYPE_CHECKING:
    from nem.dialect.builder import NemBuilder

FLOAT_DTYPES: dict[str, type[np.float32] | type[np.float16]] = {
    "f32": np.float32,
    "f16": np.float16,
}
"""Float element types whose largest finite value numpy gives directly."""


@dataclass(frozen=True)
class Box:
    """The elements a fill writes: `shape` with element `strides` from
    element `start` of `view`'s buffer."""

    view: View
    start: Aff
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def constant_of(v: SSAValue) -> Attribute | None:
    """The value of `v` when an `arith.constant` defines it."""
    owner = v.owner
    return owner.value if isinstance(owner, arith.ConstantOp) else None


def nest_fill(
    nest: Nest, outer: Mapping[SSAValue, Aff], view_of: Callable[[SSAValue, Operation], View]
) -> tuple[Box, Attribute] | None:
    """The box and value of a nest whose body stores one constant (None
    when the stored value is not a constant); `view_of(memref, user)`."""
    stores = [o for o in nest.body if isinstance(o, affine.StoreOp | memref.StoreOp)]
    if len(stores) != 1:
        return None
    st = stores[0]
    value = constant_of(st.value)
    if value is None:
        return None
    if any(
        o is not st and not isinstance(o, arith.ConstantOp) and not is_index_arith(o)
        for o in nest.body
    ):
        raise NotRaisable("a constant store beside other operations")
    acc = access(nest, outer, st)  # match_nest saw each loop index it once
    return access_box(view_of(acc.memref, st), acc, nest.extents), value


def access_box(vw: View, acc: Access, exts: Mapping[int, int]) -> Box:
    """The box a nest access covers in `vw`: the extents of its nest dimensions."""
    start = vw.base
    shape, strides = [], []
    for (k, rest), s in zip(acc.index, vw.strides):
        start = start + rest.scale(s)
        if k is not None:
            shape.append(exts[k])
            strides.append(s)
    return Box(vw, start, tuple(shape), tuple(strides))


def view_box(vw: View) -> Box:
    """The whole of a memref view, as `linalg.fill` writes it."""
    return Box(vw, vw.base, vw.shape, vw.strides)


def fill_steps(value: Attribute, elem: str) -> list[tuple[str, float | int]]:
    """The tasks of a fill of `value` into `elem` elements, in order:
    ("zero", 0) is step 1 on the bytes, ("clamp", c) step 2, ("add", 0)
    step 3 (module docstring).  Raises NotRaisable for what stays a kernel."""
    if isinstance(value, IntegerAttr):
        c = int(value.value.data)
        return [("zero", 0)] if c == 0 else [("clamp", c)]
    if not isinstance(value, FloatAttr):
        raise NotRaisable(f"a fill with {value} (not a number)")
    x = float(value.value.data)
    if math.isnan(x):
        raise NotRaisable("a NaN fill (D-LOW-FILL: no NEM op writes a NaN without reading one)")
    if x == 0.0 and math.copysign(1.0, x) < 0:
        raise NotRaisable("a -0.0 fill (D-LOW-FILL: clamp of +0 to [-0, -0] may keep +0)")
    if x == 0.0:
        return [("zero", 0)]
    if math.isinf(x):
        dtype = FLOAT_DTYPES.get(elem)
        if dtype is None:
            raise NotRaisable(f"an infinite {elem} fill (D-LOW-FILL: f32/f16 only)")
        big = float(np.finfo(dtype).max)
        return [("zero", 0), ("clamp", big if x > 0 else -big), ("add", 0)]
    dtype = FLOAT_DTYPES.get(elem)
    return [("zero", 0), ("clamp", float(dtype(x)) if dtype is not None else x)]


def _byte_shape(box: Box, keep_axes: bool = False) -> tuple[list[int], list[int]]:
    """The box's bytes as an `i8` box: one more, innermost, axis of the
    element's bytes; axes that step contiguously merged (unless `keep_axes`)."""
    eb = box.view.elem_bytes
    dims = [(d, s * eb) for d, s in zip(box.shape, box.strides) if d != 1 or keep_axes]
    dims.append((eb, 1))
    if keep_axes:
        return [d for d, _ in dims], [s for _, s in dims]
    merged = [dims[-1]]
    for d, s in reversed(dims[:-1]):
        inner_d, inner_s = merged[0]
        if s == inner_d * inner_s:
            merged[0] = (d * inner_d, inner_s)
        else:
            merged.insert(0, (d, s))
    return [d for d, _ in merged], [s for _, s in merged]


def byte_region(
    ctx: LoweringContext, b: NemBuilder, box: Box, anchor: Operation, keep_axes: bool = False
) -> SSAValue:
    """The region of the box's bytes as `i8` (step 1), logged for the
    partial-tile checks in the view's own elements; `keep_axes`: the box's
    axes kept as they are, the bytes one more innermost axis (a concat's
    operands must keep their rank, D-LOW-BCAST-CONCAT)."""
    vw = box.view
    _keep_elem_type(ctx, vw)
    ctx.log_region(RegionAccess(vw, box.start, box.shape, box.strides, anchor))
    shape, strides = _byte_shape(box, keep_axes)
    extent = sum((d - 1) * s for d, s in zip(shape, strides)) + 1
    offset = expr(box.start.scale(vw.elem_bytes), anchor)
    if strides[-1] == 1 and len(shape) == 1:
        return b.region(None, vw.buffer, offset, extent, elem="i8", shape=shape, layout="C")
    return b.region(None, vw.buffer, offset, extent, elem="i8", shape=shape, strides=strides)


def _keep_elem_type(ctx: LoweringContext, vw: View) -> None:
    """Before the first region over a DDR or L2 buffer is the `i8` one of
    step 1, declare `NAME_ELEM = region(NAME, 0, SIZE)` of the buffer's
    own element type at program scope: `nem-run` types a buffer's inputs,
    outputs and random contents by the first typed region over it
    (D-RT-TENSOR-IO, D-RT-INPUTS), and a fill must not make a float
    argument read as bytes.  A declaration is no task; L1 buffers (no
    user I/O) get none, so buffer sharing still sees their lifetimes."""
    from nem.dialect.attributes import elem_name
    from nem.dialect.expressions import Evaluator
    from nem.dialect.ops import BufferOp

    buf = vw.buffer
    if buf.uses or vw.level.data not in ("DDR", "L2") or not ctx.is_declared(buf):
        return
    owner = buf.owner
    size = Evaluator().static(owner.size) if isinstance(owner, BufferOp) else None
    if not isinstance(size, int):
        return
    elem = elem_name(vw.elem) or "i8"
    name = ctx.names.fresh(f"{vw.name}_{elem}", "typed")
    ctx.decls.region(name, buf, 0, size, elem=elem, shape=[size // vw.elem_bytes], layout="C")


def box_elem(box: Box) -> str:
    """The NEM name of a box's element type (`fill_steps`' `elem`)."""
    from nem.dialect.attributes import elem_name

    return elem_name(box.view.elem) or str(box.view.elem)


def emit_fill(
    lw: Lowering,
    box: Box,
    steps: Sequence[tuple[str, float | int]],
    anchor: Operation,
    st: BlockState,
    what: str,
) -> None:
    """The fill's tasks (`fill_steps`), else one escape-hatch task with
    the reason (a step without a legal variant on the target)."""
    ctx = lw.ctx
    stg = Staging(anchor.location)
    b = stg.builder
    toks: list[tuple[str, SSAValue]] = []
    with b.located(anchor.location):
        for kind, c in steps:
            if kind == "zero":
                r8 = byte_region(ctx, b, box, anchor)
                toks.append(("clamp", b.compute("clamp", [r8], [r8], min=0, max=0)))
                continue
            r = region(ctx, b, box.view, box.start, box.shape, box.strides, anchor)
            if kind == "clamp":
                toks.append(("clamp", b.compute("clamp", [r], [r], min=c, max=c)))
            else:
                toks.append(("add", b.compute("add", [r, r], [r])))
    why = next((w for w in (illegal(ctx, t) for _, t in toks) if w), None)
    if why is not None:
        stg.drop()
        return emit_escape(lw, anchor, st, f"{why} (D-LOW-FILL)", what)
    stg.commit(st)
    for opcode, t in toks:
        name_task(ctx, t, opcode)
    ctx.summary.raised.append(f"{what} -> {' + '.join(op for op, _ in toks)} (constant fill)")
