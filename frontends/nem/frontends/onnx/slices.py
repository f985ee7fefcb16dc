"""ONNX `Slice` and `Split` (D-COMPILE-SLICE).

Both are `tensor.extract_slice`s of the input in its physical layout (a
logical axis maps to its physical dimension, so an NHWC-kept activation
stays NHWC): static offsets, sizes and strides (a Slice's steps).
Bufferization makes each a `memref.subview` of the producer's buffer, a
strided view the lowering reads with DMAs (D-LOW-VIEW); no copy is emitted
unless a consumer needs one.

Slice's starts, ends, axes and steps are inputs from opset 10 on (before:
attributes, no steps); Split's sizes are an input from opset 13 on (before:
the `split` attribute), else an even split into the outputs (or
`num_outputs`, opset 18: the last part smaller).  Index tensors computed at
run time and empty results are located `not supported` errors; a negative
step is the positive slice of the same elements, then the axis picked
backwards, one element at a time (up to `MAX_REVERSED` elements).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mlir import ir
from mlir.dialects import tensor

from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.shapes import pick

MAX_REVERSED = 256
"""The longest reversed axis of a Slice: one copy per element (D-COMPILE-SLICE)."""


def _define_slice(
    imp: Importer,
    name: str,
    src: str,
    offsets: Sequence[int],
    sizes: Sequence[int],
    steps: Sequence[int],
) -> None:
    """Bind `name` to `src[offsets : offsets + sizes * steps : steps]`
    (logical dimensions): a constant when `src` is one (so a sliced weight
    stays a compile-time weight, as a Conv needs), else one
    `tensor.extract_slice` of its physical tensor, in its layout."""
    c = imp.const(src)
    if c is not None:
        imp.consts[name] = c[
            tuple(slice(o, o + n * st, st) for o, n, st in zip(offsets, sizes, steps))
        ]
        return
    x = imp.tensor(src)
    imp.define(name, _extract(x, offsets, sizes, steps), x.perm)


def _extract(
    x: TensorVal, offsets: Sequence[int], sizes: Sequence[int], steps: Sequence[int]
) -> ir.Value:
    if list(sizes) == list(x.shape):  # the whole tensor
        return x.value
    offs, szs, strs = ([v[a] for a in x.perm] for v in (offsets, sizes, steps))
    return tensor.extract_slice(emit.tensor_type(szs, x.elem), x.value, [], [], [], offs, szs, strs)


def _shape(imp: Importer, name: str) -> tuple[int, ...]:
    c = imp.const(name)
    return tuple(c.shape) if c is not None else imp.tensor(name).shape


def slice_(imp: Importer, node: Node) -> None:
    """`Slice` (module docstring): ONNX's clamping of starts and ends to
    the dimension, negative indices counted from its end."""
    shape = _shape(imp, node.input(0))
    rank = len(shape)
    if imp.opset < 10:
        starts = [int(v) for v in node.attrs["starts"]]
        ends = [int(v) for v in node.attrs["ends"]]
        axes = [int(v) for v in node.attrs.get("axes", range(len(starts)))]
        steps = [1] * len(starts)
    else:
        starts = imp.const_ints(node, 1, "starts") or []
        ends = imp.const_ints(node, 2, "ends") or []
        axes = imp.const_ints(node, 3, "axes") or list(range(len(starts)))
        steps = imp.const_ints(node, 4, "steps") or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise imp.error(
            f"starts, ends, axes and steps have different lengths "
            f"({len(starts)}, {len(ends)}, {len(axes)}, {len(steps)})"
        )
    offsets, sizes, strides = [0] * rank, list(shape), [1] * rank
    reversed_axes = []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = imp.axis(a, rank)
        dim = shape[a]
        if st == 0:
            raise imp.error(f"Slice step 0 on axis {a}", fix="ONNX requires nonzero steps")
        # ONNX clamps starts and ends to [0, dim] for a positive step and to
        # [0, dim - 1] and [-1, dim - 1] for a negative one
        lo, hi = (0, dim) if st > 0 else (-1, dim - 1)
        s = min(max(s + dim if s < 0 else s, 0), dim if st > 0 else dim - 1)
        e = min(max(e + dim if e < 0 else e, lo), hi)
        n = max(0, -(-(e - s) // st))
        if n == 0:
            raise imp.error(
                f"not supported: Slice with an empty result (axis {a}: [{s}:{e}:{st}] of {dim})",
                fix="remove the node and its consumers",
            )
        if st < 0:  # the same elements ascending, then reversed (D-COMPILE-SLICE)
            s, st = s + (n - 1) * st, -st
            reversed_axes.append(a)
        offsets[a], sizes[a], strides[a] = s, n, st
    if not reversed_axes:
        _define_slice(imp, node.outputs[0], node.input(0), offsets, sizes, strides)
        return
    c = imp.const(node.input(0))
    if c is not None:
        view = c[tuple(slice(o, o + n * st, st) for o, n, st in zip(offsets, sizes, strides))]
        imp.consts[node.outputs[0]] = np.flip(view, tuple(reversed_axes))
        return
    # the positive slice of the same elements, then each reversed axis
    # picked backwards (a concatenation of one-element views)
    x = imp.tensor(node.input(0))
    x = TensorVal(_extract(x, offsets, sizes, strides), tuple(sizes), x.perm)
    if any(x.shape[a] > MAX_REVERSED for a in reversed_axes):
        raise imp.error(
            f"not supported: Slice with a negative step selecting more than "
            f"{MAX_REVERSED} elements of an axis (shape {list(x.shape)})",
            fix="reverse a shorter axis, or reverse the data before the model",
        )
    for a in reversed_axes:
        x = pick(x, a, range(x.shape[a] - 1, -1, -1))
    imp.vals[node.outputs[0]] = x


def split(imp: Importer, node: Node) -> None:
    """`Split` (module docstring): one slice per output."""
    shape = _shape(imp, node.input(0))
    axis = imp.axis(int(node.attrs.get("axis", 0)), len(shape))
    dim = shape[axis]
    parts = (
        imp.const_ints(node, 1, "split")
        if imp.opset >= 13
        else [int(v) for v in node.attrs.get("split", [])] or None
    )
    outs = node.outputs
    if parts is None:
        n = int(node.attrs.get("num_outputs", len(outs)))
        chunk = -(-dim // n)
        parts = [min(chunk, max(0, dim - k * chunk)) for k in range(n)]
    if len(parts) != len(outs) or sum(parts) != dim or min(parts) <= 0:
        raise imp.error(
            f"Split sizes {parts} do not cut axis {axis} ({dim}) into {len(outs)} nonempty outputs",
            fix="give one positive size per output, summing to the dimension",
        )
    offset = 0
    for name, n in zip(outs, parts):
        offsets = [offset if d == axis else 0 for d in range(len(shape))]
        sizes = [n if d == axis else s for d, s in enumerate(shape)]
        _define_slice(imp, name, node.input(0), offsets, sizes, [1] * len(shape))
        offset += n
