"""ONNX ConvTranspose (1-D, 2-D, 3-D; D-COMPILE-CONV-ND, D-COMPILE-CONVT-PHASES).

A ConvTranspose is the convolution, stride 1, of its input dilated by the
stride (zeros between the rows) and bordered by `(k - 1) d - pad` (cropped
where negative, widened by `output_padding` at the end), with the flipped
kernel whose input and output channels are swapped per group
(`Kernel.of_transpose`).  Computed so, st - 1 of every st products along an
axis multiply a zero: a 2-D stride 2 does 4x the model's MACs on a
zero-filled input 4x the size of its own.

With a kernel known at compile time, no dilation, at most MAX_PHASES
phases and each kernel at least as long as its stride (`by_phases`), it is
computed by phases instead
(`phases`): the outputs `o = st i + p` of one phase p per axis read the
input at `i + u + c_p` with the kernel taps `t0_p + st u` only, a
stride-1 convolution of the undilated input with the sub-kernel
`w[t0_p::st]`; the phases' outputs are written into the result at offset p,
stride st (a strided `tensor.insert_slice`).  The same products as the
dilated convolution's that are not by zero, in the same order, so the sums
are the same (but for the sign of a zero).  Otherwise (a kernel computed at
run time, a dilation, a stride of more phases, a kernel shorter than its
stride) the dilated convolution stands.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from mlir import ir
from mlir.dialects import tensor

from nem.frontends.onnx import emit
from nem.frontends.onnx.convs import (
    Kernel,
    Operand,
    channels_last,
    check_kernel_shape,
    check_operands,
    conv_nd,
    kernel_node,
)
from nem.frontends.onnx.graph import Importer, Node
from nem.frontends.onnx.ops import ints, text


def conv_transpose(imp: Importer, node: Node) -> None:
    x, spatial, w, bias, group = kernel_node(imp, node, "ConvTranspose")
    n, c, *sizes = x.shape
    cw, fg, *kernel = w.shape
    check_operands(imp, x, w, bias, group, cw, fg * group)
    check_kernel_shape(imp, node, w.shape)
    strides = ints(node, "strides", [1] * spatial)
    dil = ints(node, "dilations", [1] * spatial)
    out_pad = ints(node, "output_padding", [0] * spatial)
    pads = _transpose_pads(imp, node, sizes, kernel, strides, dil, out_pad)
    # the equivalent convolution: stride-dilated input, borders, flipped kernel
    lows, highs, outs = [], [], []
    for s, k, st, d, op, pb, pe in zip(
        sizes, kernel, strides, dil, out_pad, pads[:spatial], pads[spatial:]
    ):
        keff = (k - 1) * d + 1
        lows.append(keff - 1 - pb)
        highs.append(keff - 1 - pe + op)
        outs.append(st * (s - 1) + op + keff - pb - pe)
    if min(outs) <= 0:
        raise imp.error(f"ConvTranspose output size {outs} is empty")
    cl = channels_last(x.rank)
    xv = imp.in_perm(x, cl)
    kern = Kernel.of_transpose(imp, w, group, f"{node.input(1)}_transposed")
    if isinstance(kern.data, np.ndarray) and by_phases(kernel, strides, dil):
        y = phases(imp, node, xv, kern, bias, sizes, strides, lows, outs)
    else:
        xd = dilated(xv, sizes, strides, lows, highs)
        y = conv_nd(imp, node, xd, kern, bias, outs, [1] * spatial, dil)
    imp.define(node.outputs[0], y, cl)


def dilated(
    xv: ir.Value,
    sizes: Sequence[int],
    strides: Sequence[int],
    lows: Sequence[int],
    highs: Sequence[int],
) -> ir.Value:
    """The channels-last input `xv` dilated by `strides` (zeros between its
    rows, a strided `tensor.insert_slice` into a zero fill) and bordered by
    `lows`, `highs` (cropped where negative): the input of the equivalent
    convolution (module doc)."""
    shape = emit.shape_of(xv)
    n, c, elem = shape[0], shape[-1], emit.elem_type(xv)
    ups = [(s - 1) * st + 1 for s, st in zip(sizes, strides)]
    grown = [n, *(max(lo, 0) + u + max(hi, 0) for lo, u, hi in zip(lows, ups, highs)), c]
    z = emit.fill(grown, elem, 0.0)
    xd = tensor.insert_slice(
        xv, z, [], [], [], [0, *(max(lo, 0) for lo in lows), 0], [n, *sizes, c], [1, *strides, 1]
    )
    if min(lows) >= 0 and min(highs) >= 0:
        return xd
    start = [0, *(max(-lo, 0) for lo in lows), 0]
    keep = [
        n,
        *(g - max(-lo, 0) - max(-hi, 0) for g, lo, hi in zip(grown[1:-1], lows, highs)),
        c,
    ]
    return tensor.extract_slice(
        emit.tensor_type(keep, elem), xd, [], [], [], start, keep, [1] * len(keep)
    )


def _transpose_pads(
    imp: Importer,
    node: Node,
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dil: Sequence[int],
    out_pad: Sequence[int],
) -> list[int]:
    """ConvTranspose's pads (begins, ends): given, or from `output_shape` /
    `auto_pad` by ONNX's formula (total = stride (in - 1) + output_padding +
    (k - 1) d + 1 - out; SAME_UPPER puts the larger half at the end).  Under
    auto_pad SAME a negative total (a stride above the kernel's extent: in *
    stride is more than the convolution gives) is 0, as ONNX's shape
    inference and onnxruntime take it: the output is the whole convolution.
    An `output_shape` larger than the convolution gives ends with the extra
    rows (a negative end pad: zeros, plus the bias)."""
    auto = text(node, "auto_pad", "NOTSET")
    shape = node.attrs.get("output_shape")
    if shape is None and auto not in ("SAME_UPPER", "SAME_LOWER"):
        if auto not in ("NOTSET", "", "VALID"):
            raise imp.error(f"not supported: auto_pad='{auto}'")
        return (
            ints(node, "pads", [0] * (2 * len(sizes)))
            if auto != "VALID"
            else [0] * (2 * len(sizes))
        )
    target = (
        [int(v) for v in shape][-len(sizes) :]
        if shape is not None
        else [s * st for s, st in zip(sizes, strides)]
    )
    begins, ends = [], []
    for s, k, st, d, op, o in zip(sizes, kernel, strides, dil, out_pad, target):
        total = st * (s - 1) + op + (k - 1) * d + 1 - o
        if total < 0 and shape is None:
            total = 0
        if total < 0:
            # an output_shape past the convolution: the extra rows end the
            # output, zero plus the bias (onnxruntime and onnx's reference
            # evaluator both; a negative end pad is that zero border)
            begins.append(0)
            ends.append(total)
            continue
        half = total // 2
        upper = auto == "SAME_UPPER"
        begins.append(half if upper else total - half)
        ends.append(total - half if upper else half)
    return begins + ends


MAX_PHASES = 16
"""The most phases (the strides' product) a ConvTranspose is computed by:
each is a convolution of its own through the whole compile (an outside
review, session 54: FCN-32s's stride-32 upsampler, 1,024 phases, did not
compile in 470 s; stride 16, 256 phases, took 44 s CPU against 1.6 s
dilated; stride 8, 64 phases, 5.5-7 s)."""


def by_phases(kernel: Sequence[int], strides: Sequence[int], dil: Sequence[int]) -> bool:
    """Whether a ConvTranspose with a compile-time kernel is computed by
    phases (module doc): a stride above 1, at most MAX_PHASES phases, no
    dilation, every phase's sub-kernel non-empty (each kernel at least as
    long as its stride)."""
    return (
        1 < math.prod(strides) <= MAX_PHASES
        and all(d == 1 for d in dil)
        and all(k >= st for k, st in zip(kernel, strides))
    )


@dataclass(frozen=True)
class Phase:
    """One phase `p` of one axis (module doc): its first kernel tap `t0`,
    its taps `taps` (`t0, t0 + st, ..`), its outputs `count` (`p, p + st,
    .. < out`), and the input rows its stride-1 convolution reads, from
    `first` (negative: before the input) for `count + taps - 1` rows."""

    p: int
    t0: int
    taps: int
    count: int
    first: int

    @staticmethod
    def of(p: int, k: int, st: int, low: int, out: int) -> Phase:
        """Phase `p` of an axis of kernel `k`, stride `st`, output `out`,
        whose equivalent convolution borders the dilated input by `low`:
        output o reads dilated row o + t - low, input row (o + t - low) / st
        where that divides, so for o = st i + p the taps t = t0 + st u with
        t0 = (low - p) mod st, input row i + u + (p + t0 - low) / st."""
        t0 = (low - p) % st
        return Phase(p, t0, len(range(t0, k, st)), len(range(p, out, st)), (p + t0 - low) // st)

    @property
    def rows(self) -> int:
        return self.count + self.taps - 1


def phases(
    imp: Importer,
    node: Node,
    xv: ir.Value,
    kern: Kernel,
    bias: Operand | None,
    sizes: Sequence[int],
    strides: Sequence[int],
    lows: Sequence[int],
    outs: Sequence[int],
) -> ir.Value:
    """The channels-last result of a ConvTranspose by phases (module doc):
    `xv` the channels-last input, `kern` the flipped kernel (compile-time),
    `lows` the equivalent convolution's low borders, `outs` its output."""
    data = kern.data
    assert isinstance(data, np.ndarray)
    n, c = emit.shape_of(xv)[0], emit.shape_of(xv)[-1]
    f = kern.group * int(data.shape[1])
    kernel = data.shape[3:]
    elem = emit.elem_type(xv)
    y = emit.empty([n, *outs, f], elem)
    per_axis = [
        [Phase.of(p, k, st, low, out) for p in range(st)]
        for k, st, low, out in zip(kernel, strides, lows, outs)
    ]
    # (a phase without an output: an output shorter than the stride)
    used = [[a for a in axis if a.count] for axis in per_axis]
    # one border for every phase: each reads its rows of it
    lo = [max(0, *(-a.first for a in axis)) for axis in used]
    hi = [max(0, *(a.first + a.rows - s for a in axis)) for axis, s in zip(used, sizes)]
    xp_all = imp.pad(xv, [0, *lo, 0], [0, *hi, 0], 0.0)
    for ph in itertools.product(*used):
        taps = tuple(slice(a.t0, None, st) for a, st in zip(ph, strides))
        sub = Kernel(
            np.ascontiguousarray(data[(slice(None),) * 3 + taps]),
            f"{kern.name}_p{'x'.join(str(a.p) for a in ph)}",
        )
        xp = xp_all
        start = [a.first + pad for a, pad in zip(ph, lo)]
        rows = [a.rows for a in ph]
        if any(start) or rows != list(emit.shape_of(xp)[1:-1]):
            xp = tensor.extract_slice(
                emit.tensor_type([n, *rows, c], elem),
                xp,
                [],
                [],
                [],
                [0, *start, 0],
                [n, *rows, c],
                [1] * (len(rows) + 2),
            )
        counts = [a.count for a in ph]
        box = ([0, *(a.p for a in ph), 0], [n, *counts, f], [1, *strides, 1])
        into = None
        if len(counts) == 2:  # (computed in the result's strided slice: no copy)
            into = tensor.extract_slice(emit.tensor_type(box[1], elem), y, [], [], [], *box)
        ones = [1] * len(counts)
        yp = conv_nd(imp, node, xp, sub, bias, counts, ones, ones, into)
        y = tensor.insert_slice(yp, y, [], [], [], *box)
    return y
