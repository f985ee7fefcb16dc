"""ONNX MaxPool and AveragePool (1-D, 2-D, 3-D), global pooling
(D-COMPILE-CONV-ND, D-COMPILE-POOL-EDGE).

Pooling is built from the forms the lowering raises (`maxpool` + `max`,
or one `add` per window offset, D-LOW-WINDOW, D-LOW-SUMPOOL):
`linalg.pooling_nhwc_max`/`_sum` on a channels-last activation padded by a
`tensor.pad` (-inf for max, 0 for average; the `ceil_mode` overhang is
padding no window counts; where ONNX's shape inference, the definition
and onnxruntime disagree, a located "not supported", D-COMPILE-POOL-EDGE).

* 1-D: [N, W, C] viewed as the 2-D [1, N, W, C], kernel [1, k] (the batch
  as the height: a unit dimension between the batch and the window would
  meet upstream `affine-data-copy-generate`'s contiguous DMA of a box that
  is not contiguous (the stride across a unit dimension dropped: fuzz
  finding F2, issue 31), a wrong result on the affine route);
* 3-D: max and sum are separable, so a 3-D window is a 2-D pooling over
  (H, W) of every depth row ([N, D, H, W, C] viewed as [N D, H, W, C]),
  then a pooling of kernel [kd, 1] along D of the result viewed as
  [N, D, OH OW, C];
* AveragePool then multiplies by 1 / (elements of the window inside the
  input, or with the explicit pads when `count_include_pad`): a scalar
  when every window has the same count, else a constant weight (the
  per-axis counts' outer product).  An f16 one sums its windows in f32 and
  rounds the mean once (D-COMPILE-F16, as GlobalAveragePool and ReduceMean
  do): a 2x2 window of 20,000s summed in f16 overflowed to inf (an outside
  user, session 66), onnxruntime gives 20,000.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg

from nem.frontends.onnx import emit
from nem.frontends.onnx.convs import channels_last, spatial_pads
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.ops import define_elementwise, elementwise, ints, is_f16, text, x_dtype
from nem.frontends.onnx.shapes import crop_negative_pads


def pool2d(
    xp: ir.Value,
    kernel: Sequence[int],
    strides: Sequence[int],
    dil: Sequence[int],
    outs: Sequence[int],
    kind: str,
) -> ir.Value:
    """The window max or sum of the padded NHWC `xp`, `outs` output rows and
    columns (one named pooling op)."""
    n, _, _, c = emit.shape_of(xp)
    elem = emit.elem_type(xp)
    window = emit.empty(list(kernel), elem)
    init = emit.fill([n, *outs, c], elem, -np.inf if kind == "max" else 0.0)
    op = linalg.pooling_nhwc_max if kind == "max" else linalg.pooling_nhwc_sum
    return emit.value_of(op(xp, window, outs=[init], strides=list(strides), dilations=list(dil)))


def pool_nd(
    xp: ir.Value,
    kernel: Sequence[int],
    strides: Sequence[int],
    dil: Sequence[int],
    outs: Sequence[int],
    kind: str,
) -> ir.Value:
    """The channels-last window max or sum over 1, 2 or 3 spatial
    dimensions (module docstring)."""
    shape = emit.shape_of(xp)
    n, c = shape[0], shape[-1]
    if len(outs) == 1:  # [N, W, C] as [1, N, W, C]: N is the unit-kernel height
        y = pool2d(
            emit.reshape(xp, [1, n, shape[1], c]),
            [1, kernel[0]],
            [1, strides[0]],
            [1, dil[0]],
            [n, outs[0]],
            kind,
        )
        return emit.reshape(y, [n, outs[0], c])
    if len(outs) == 2:
        return pool2d(xp, kernel, strides, dil, outs, kind)
    _, dp, hp, wp, _ = shape
    rows = pool2d(
        emit.reshape(xp, [n * dp, hp, wp, c]), kernel[1:], strides[1:], dil[1:], outs[1:], kind
    )
    flat = emit.reshape(rows, [n, dp, outs[1] * outs[2], c])
    y = pool2d(
        flat, [kernel[0], 1], [strides[0], 1], [dil[0], 1], [outs[0], outs[1] * outs[2]], kind
    )
    return emit.reshape(y, [n, *outs, c])


def pool(kind: str) -> Callable[[Importer, Node], None]:
    def convert(imp: Importer, node: Node) -> None:
        x = imp.tensor(node.input(0))
        spatial = x.rank - 2
        if spatial not in (1, 2, 3):
            raise imp.error(f"not supported: {spatial}-D pooling (1-D, 2-D and 3-D are)")
        if len(node.outputs) > 1 and node.outputs[1]:
            raise imp.error("not supported: MaxPool indices output")
        if int(node.attrs.get("storage_order", 0)):
            raise imp.error("not supported: storage_order=1")
        kernel = ints(node, "kernel_shape", [])
        if len(kernel) != spatial:
            raise imp.error(f"kernel_shape must have {spatial} entries")
        strides = ints(node, "strides", [1] * spatial)
        dil = ints(node, "dilations", [1] * spatial)
        if kind == "avg" and any(d != 1 for d in dil):
            raise imp.error(f"not supported: AveragePool dilations={dil}")
        pads = spatial_pads(imp, node, x.shape[2:], kernel, strides, dil, crop=True)
        lo, hi = [0, 0, *pads[:spatial]], [0, 0, *pads[spatial:]]
        x = crop_negative_pads(imp, x, lo, hi, node.op_type)  # D-COMPILE-SAME-NEG
        pads = lo[2:] + hi[2:]
        sizes = x.shape[2:]
        ceil_mode = int(node.attrs.get("ceil_mode", 0))
        outs: list[int] = []
        extra: list[int] = []
        for size, k, s, d, lo, hi in zip(
            sizes, kernel, strides, dil, pads[:spatial], pads[spatial:]
        ):
            span = size + lo + hi - d * (k - 1) - 1
            # ONNX (and onnxruntime) divide as C does: a window longer than the
            # padded input (span < 0) still makes one output, over what it covers
            o = (-(-span // s) if ceil_mode or span < 0 else span // s) + 1
            if o < 1:
                raise imp.error(
                    f"not supported: a {k}-element window (dilation {d}) over "
                    f"{size + lo + hi} padded elements makes no output"
                )
            if ceil_mode and (o - 1) * s >= size + lo:
                o -= 1  # the last window must start inside the input or left pad
            outs.append(o)
            extra.append(max((o - 1) * s + d * (k - 1) + 1 - (size + lo + hi), 0))
        if ceil_mode:
            _ceil_mode_disagreement(imp, node, outs)
        if kind == "max":
            _window_in_padding(imp, sizes, kernel, strides, dil, pads[:spatial], outs)
        f16 = x.elem if kind == "avg" and isinstance(x.elem, ir.F16Type) else None
        if f16 is not None:  # summed in f32 (module doc)
            f32 = ir.F32Type.get()
            wide_x, perm = elementwise(imp, [x], lambda t: arith.extf(f32, t), elem=f32)
            x = TensorVal(wide_x, x.shape, perm)
        cl = channels_last(x.rank)
        xp = imp.pad(
            imp.in_perm(x, cl),
            [0, *pads[:spatial], 0],
            [0, *(h + e for h, e in zip(pads[spatial:], extra)), 0],
            -np.inf if kind == "max" else 0.0,
        )
        y = pool_nd(xp, kernel, strides, dil, outs, kind)
        if kind == "max":
            imp.define(node.outputs[0], y, cl)
            return
        include_pad = int(node.attrs.get("count_include_pad", 0))
        counts = _pool_counts(sizes, kernel, strides, pads, outs, include_pad)
        sum_tv = TensorVal(y, (*x.shape[:2], *outs), cl)
        if np.all(counts == counts.flat[0]):
            inv: TensorVal | float = 1.0 / float(counts.flat[0])
        else:
            inv = imp.weight(
                (1.0 / counts).astype(x_dtype(imp, x)).reshape(1, *outs), f"{node.name}_inv_count"
            )
        if f16 is None:
            define_elementwise(imp, node, [sum_tv, inv], arith.mulf)
            return
        y, perm = elementwise(
            imp, [sum_tv, inv], lambda t, w: arith.truncf(f16, arith.mulf(t, w)), elem=f16
        )
        imp.define(node.outputs[0], y, perm)

    return convert


def _ceil_mode_disagreement(imp: Importer, node: Node, outs: Sequence[int]) -> None:
    """Stop where ONNX's shape inference sizes a ceil_mode pooling otherwise
    than the operator's definition and onnxruntime (`outs`): it counts a
    last window that starts past the input, which they drop, and under
    auto_pad SAME it takes a negative padding as 0 and rounds up, where they
    give ceil(in / stride).  The model's declared shape and its values
    cannot both be met (D-COMPILE-POOL-EDGE)."""
    info = imp.inferred.get(node.outputs[0])
    if info is None or not info.type.tensor_type.HasField("shape"):
        return
    same = text(node, "auto_pad", "NOTSET").startswith("SAME")
    # the one reason that applies to this node (an outside user, session 61:
    # both, to a model of explicit pads, read as if it had auto_pad)
    why = (
        "under auto_pad SAME it gives ceil(in / stride)"
        if same
        else "a window that starts past the input is dropped"
    )
    for axis, size in enumerate(outs):
        dim = info.type.tensor_type.shape.dim[2 + axis]
        if dim.HasField("dim_value") and dim.dim_value != size:
            raise imp.error(
                f"not supported: with ceil_mode=1 ONNX's shape inference gives dimension "
                f"{2 + axis} of '{node.outputs[0]}' {dim.dim_value} outputs, where the operator "
                f"(and onnxruntime) gives {size}: {why} (D-COMPILE-POOL-EDGE)",
                fix="give explicit pads (covering the last window) and ceil_mode=0, or strides "
                "with which every window starts inside the input",
            )


def _window_in_padding(
    imp: Importer,
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dil: Sequence[int],
    begins: Sequence[int],
    outs: Sequence[int],
) -> None:
    """Stop at a max pooling window that reads no input element (dilated
    taps that all fall in the padding): the operator gives it no value, and
    onnxruntime gives the lowest finite f32 but -inf in f16
    (D-COMPILE-POOL-EDGE).  Checked per axis, one pass over its windows."""
    for axis, (size, k, s, d, lo, o) in enumerate(zip(sizes, kernel, strides, dil, begins, outs)):
        for j in range(o):
            taps = [j * s - lo + t * d for t in range(k)]
            if not any(0 <= p < size for p in taps):
                raise imp.error(
                    f"not supported: MaxPool window {j} on spatial axis {axis} reads only "
                    f"padding (positions {taps} of {size}): the operator gives it no value "
                    "(onnxruntime: the lowest finite value in f32, -inf in f16; "
                    "D-COMPILE-POOL-EDGE)",
                    fix="make the pads or dilations smaller, so that every window reads the input",
                )


def _pool_counts(
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    outs: Sequence[int],
    include_pad: int,
) -> np.ndarray:
    """Elements each average-pooling window divides by: the window inside
    the input (plus the explicit pads with count_include_pad; the ceil_mode
    overhang never counts), the outer product of the per-axis counts."""
    spatial = len(sizes)
    counts = np.ones(outs, dtype=np.float64)
    for axis in range(spatial):
        lo = 0 if include_pad else pads[axis]
        hi = sizes[axis] + (pads[axis] + pads[axis + spatial] if include_pad else pads[axis])
        starts = np.arange(outs[axis]) * strides[axis]
        n = np.clip(np.minimum(starts + kernel[axis], hi) - np.maximum(starts, lo), 0, None)
        counts *= n.reshape([-1 if a == axis else 1 for a in range(spatial)])
    return counts


def global_pool(kind: str) -> Callable[[Importer, Node], None]:
    def convert(imp: Importer, node: Node) -> None:
        x = imp.tensor(node.input(0))
        if x.rank < 3:
            raise imp.error(f"Global pooling needs rank >= 3, got {x.rank}")
        axes = [x.perm.index(d) for d in range(2, x.rank)]
        v = x.value
        kept = tuple(s if d < 2 else 1 for d, s in enumerate(x.shape))
        if kind == "max":
            y = emit.reduce(v, axes, -np.inf, arith.maximumf)
        else:
            n = int(np.prod(x.shape[2:]))
            if is_f16(v):
                f32 = ir.F32Type.get()
                s = emit.reduce(
                    v, axes, 0.0, arith.addf, elem=f32, prologue=lambda e: arith.extf(f32, e)
                )
                y, _ = elementwise(
                    imp,
                    [TensorVal(s, kept, x.perm)],
                    lambda t: arith.truncf(x.elem, arith.mulf(t, emit.fconst(t.type, 1.0 / n))),
                    elem=x.elem,
                )
            else:
                s = emit.reduce(v, axes, 0.0, arith.addf)
                y, _ = elementwise(
                    imp,
                    [TensorVal(s, kept, x.perm)],
                    lambda t: arith.mulf(t, emit.fconst(t.type, 1.0 / n)),
                )
        imp.define(node.outputs[0], y, x.perm)

    return convert
