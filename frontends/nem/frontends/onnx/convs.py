"""ONNX Conv (1-D, 2-D, 3-D), ConvTranspose and BatchNormalization
(D-COMPILE-LAYOUT, D-COMPILE-CONV-ND).

Every convolution is built from the one form the lowering raises to NEM
`conv2d`: `linalg.conv_2d_nhwc_hwcf` (or `conv_2d_nhwgc_gfhwc` with
groups) on a channels-last activation padded by a `tensor.pad`:

* 2-D: one such op, HWCF weights, the bias (and a following
  BatchNormalization, folded in f64) in its accumulator;
* 1-D: the same on [N, W, C] viewed as [1, N, W, C] (the batch as a
  height the kernel [1, k] does not slide over);
* 3-D: one 2-D convolution per kernel depth kd, each reading the padded
  input's depth slices `kd * dilation + od * stride` (a strided
  `tensor.extract_slice`, od batched into N) and accumulating into the
  previous one's result: out = sum over kd of conv2d(x[.., kd + od s, ..],
  w[:, :, kd]);
* ConvTranspose (1-D, 2-D): the stride-dilated input (zeros between the
  rows, a strided `tensor.insert_slice` into a zero-filled tensor) padded by
  `(k - 1) d - pad` (cropped where that is negative, widened by
  `output_padding` at the end), convolved with the flipped kernel whose
  input and output channels are swapped (per group).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor
from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.ops import define_elementwise, ints, x_dtype


def channels_last(rank: int) -> tuple[int, ...]:
    """The physical order of an N, C, spatial... activation: N, spatial..., C."""
    return (0, *range(2, rank), 1)


def spatial_pads(imp: Importer, node: Node, sizes: Sequence[int], kernel: Sequence[int],
                 strides: Sequence[int], dilations: Sequence[int],
                 crop: bool = False) -> list[int]:
    """ONNX `pads` (begins, then ends) after `auto_pad`, for any number of
    spatial dimensions.  Under SAME a stride above the window's extent can
    make the total padding negative (D-COMPILE-SAME-NEG): a convolution
    takes -1 and -2 as 0 (as onnxruntime does) and refuses less; with `crop` (the pooling operators, whose definition
    gives `pad_shape` by a formula) it stays negative and is split as
    onnxruntime splits it (C division by 2: a negative pad crops)."""
    auto = node.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        return ints(node, "pads", [0] * (2 * len(sizes)))
    if auto == "VALID":
        return [0] * (2 * len(sizes))
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise imp.error(f"not supported: auto_pad='{auto}'")
    begins, ends = [], []
    for axis, (n, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations)):
        out = -(-n // s)
        total = (out - 1) * s + (k - 1) * d + 1 - n
        if total < -2 and not crop:
            raise imp.error(
                f"not supported: auto_pad={auto} with a stride of {s} over {n} elements on "
                f"spatial axis {axis} gives a total padding of {total}: onnxruntime shifts "
                "the windows there, which the operator's definition does not say "
                "(D-COMPILE-SAME-NEG)", "give the node explicit `pads` instead of auto_pad")
        total = total if crop else max(total, 0)
        half = total if auto == "SAME_UPPER" else total + 1
        begins.append(half // 2 if half >= 0 else -(-half // 2))   # C division by 2
        ends.append(total - begins[-1])
    return begins + ends


def _batchnorm_consts(imp: Importer, node: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-channel (scale, shift) of an inference BatchNormalization whose
    parameters are constants, else None."""
    params = [p for k in range(1, 5) if (p := imp.const(node.input(k))) is not None]
    if len(params) < 4 or len(node.outputs) > 1 and any(node.outputs[1:]):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    eps = float(node.attrs.get("epsilon", 1e-5))
    scale = gamma / np.sqrt(var + eps)
    return scale, beta - mean * scale


def plan_batchnorm_folds(imp: Importer) -> dict[int, int]:
    """Conv node index -> BatchNormalization node index for each BN whose
    input is a Conv output used by that BN only, with constant weights and
    BN parameters: the BN is folded into the conv's weights and bias."""
    users: dict[str, list[int]] = {}
    for i, n in enumerate(imp.graph.node):
        for name in n.input:
            users.setdefault(name, []).append(i)
    producer = {o: i for i, n in enumerate(imp.graph.node) for o in n.output}
    outputs = {o.name for o in imp.graph.output}
    folds = {}
    for i, n in enumerate(imp.graph.node):
        if n.op_type != "BatchNormalization":
            continue
        src = n.input[0]
        j = producer.get(src)
        if j is None or imp.graph.node[j].op_type != "Conv" or users.get(src) != [i] \
                or src in outputs:
            continue
        conv = imp.graph.node[j]
        if conv.input[1] not in imp.consts or \
                (len(conv.input) > 2 and conv.input[2] and conv.input[2] not in imp.consts):
            continue
        if all(k < len(n.input) and n.input[k] in imp.consts for k in range(1, 5)) \
                and not any(n.output[1:]):
            folds[j] = i
    return folds


def _bias_init(imp: Importer, bias: np.ndarray | None, node: Node, shape: Sequence[int],
               elem: ir.Type, name: str | None = None) -> ir.Value:
    """The channels-last accumulator a convolution adds into: zeros, or the
    bias broadcast along the last dimension."""
    if bias is None:
        return emit.fill(shape, elem, 0.0)
    b = imp.weight(bias, name or node.input(2) or f"{node.name}_bias")
    return emit.broadcast(b.value, [len(shape) - 1], shape)


def conv2d(imp: Importer, xp: ir.Value, w: np.ndarray, init: ir.Value, group: int,
           strides: Sequence[int], dil: Sequence[int], wname: str) -> ir.Value:
    """`init` + the 2-D convolution of the padded NHWC value `xp` with the
    OIHW weights `w` (the raised form: HWCF weights, or GFHWC per group)."""
    n, hp, wp, c = emit.shape_of(xp)
    f, cg, kh, kw = w.shape
    oh, ow, _ = emit.shape_of(init)[1:]
    if group == 1:
        wt = imp.weight(w.transpose(2, 3, 1, 0), wname, perm=(2, 3, 1, 0))   # HWCF
        return emit.value_of(linalg.conv_2d_nhwc_hwcf(xp, wt.value, outs=[init],
                                                      strides=list(strides),
                                                      dilations=list(dil)))
    xg = emit.reshape(xp, [n, hp, wp, group, c // group])
    wg = w.reshape(group, f // group, cg, kh, kw).transpose(0, 1, 3, 4, 2)   # GFHWC
    wt = imp.weight(np.ascontiguousarray(wg), wname, perm=None)
    acc = emit.reshape(init, [n, oh, ow, group, f // group])
    y = emit.value_of(linalg.conv_2d_nhwgc_gfhwc(xg, wt.value, outs=[acc],
                                                 strides=list(strides), dilations=list(dil)))
    return emit.reshape(y, [n, oh, ow, f])


def _folded_weights(imp: Importer, node: Node, w: np.ndarray, bias: np.ndarray | None
                    ) -> tuple[np.ndarray, np.ndarray | None, str]:
    """(weights, bias, output name) with a following BatchNormalization
    folded in (plan_batchnorm_folds), in f64 rounded once."""
    bn_index = imp.bn_folds.get(node.index)
    if bn_index is None:
        return w, bias, node.outputs[0]
    from onnx import helper

    proto = imp.graph.node[bn_index]
    bn = Node(bn_index, proto, {a.name: helper.get_attribute_value(a) for a in proto.attribute})
    folded = _batchnorm_consts(imp, bn)
    assert folded is not None  # plan_batchnorm_folds: constant parameters, one output
    scale, shift = folded
    w = (w.astype(np.float64) * scale.reshape(-1, *[1] * (w.ndim - 1))).astype(w.dtype)
    b64 = bias.astype(np.float64) if bias is not None else 0.0
    return w, (b64 * scale + shift).astype(w.dtype), bn.outputs[0]


def conv(imp: Importer, node: Node) -> None:
    x = imp.tensor(node.input(0))
    w = imp.const(node.input(1))
    spatial = x.rank - 2
    if spatial not in (1, 2, 3):
        raise imp.error(f"not supported: {spatial}-D convolution (1-D, 2-D and 3-D are)")
    bias = imp.const(node.input(2)) if node.input(2) else None
    if node.input(2) and bias is None:
        raise imp.error(f"not supported: Conv bias '{node.input(2)}' computed at run time",
                        fix="make the bias an initializer")
    group = int(node.attrs.get("group", 1))
    if w is None:
        return _conv_of_values(imp, node, x, imp.tensor(node.input(1)), bias, group)
    w = w.astype(x_dtype(imp, x))
    w, bias, out_name = _folded_weights(imp, node, w, bias)
    n, c, *sizes = x.shape
    f, cg, *kernel = w.shape
    if ints(node, "kernel_shape", kernel) != kernel:
        raise imp.error(f"kernel_shape {ints(node, 'kernel_shape', [])} does not match the "
                        f"weights {list(w.shape)}")
    strides = ints(node, "strides", [1] * spatial)
    dil = ints(node, "dilations", [1] * spatial)
    if c != cg * group or f % group:
        raise imp.error(f"weights {list(w.shape)} do not fit {c} input channels in "
                        f"{group} groups")
    pads = spatial_pads(imp, node, sizes, kernel, strides, dil)
    cl = channels_last(x.rank)
    xp = emit.pad(imp.in_perm(x, cl), [0, *pads[:spatial], 0], [0, *pads[spatial:], 0], 0.0)
    outs = [(s + lo + hi - d * (k - 1) - 1) // st + 1
            for s, k, st, d, lo, hi in zip(sizes, kernel, strides, dil, pads[:spatial],
                                            pads[spatial:])]
    y = conv_nd(imp, node, xp, w, bias, outs, group, strides, dil, node.input(1))
    imp.define(out_name, y, cl)


def _conv_of_values(imp: Importer, node: Node, x: TensorVal, w: TensorVal,
                    bias: np.ndarray | None, group: int) -> None:
    """A 2-D convolution whose weights are computed at run time (an output
    of other nodes, not an initializer): the OIHW value transposed in the
    program to HWCF (one group) or GFHWC (`conv2d`'s raised forms); a 1-D or
    3-D one is refused."""
    if x.rank != 4:
        raise imp.error(f"not supported: Conv weights '{node.input(1)}' computed at run time "
                        f"in a {x.rank - 2}-D convolution (a 2-D one takes them)",
                        fix="make the weights an initializer")
    n, c, *sizes = x.shape
    f, cg, *kernel = w.shape
    if w.rank != 4 or c != cg * group or f % group:
        raise imp.error(f"weights {list(w.shape)} do not fit {c} input channels in "
                        f"{group} groups")
    if ints(node, "kernel_shape", kernel) != kernel:
        raise imp.error(f"kernel_shape {ints(node, 'kernel_shape', [])} does not match the "
                        f"weights {list(w.shape)}")
    strides, dil = ints(node, "strides", [1, 1]), ints(node, "dilations", [1, 1])
    pads = spatial_pads(imp, node, sizes, kernel, strides, dil)
    cl = channels_last(x.rank)
    xp = emit.pad(imp.in_perm(x, cl), [0, *pads[:2], 0], [0, *pads[2:], 0], 0.0)
    outs = [(s + lo + hi - d * (k - 1) - 1) // st + 1
            for s, k, st, d, lo, hi in zip(sizes, kernel, strides, dil, pads[:2], pads[2:])]
    init = _bias_init(imp, bias, node, [n, *outs, f], emit.elem_type(xp))
    if group == 1:
        y = emit.value_of(linalg.conv_2d_nhwc_hwcf(xp, imp.in_perm(w, (2, 3, 1, 0)),
                                                   outs=[init], strides=list(strides),
                                                   dilations=list(dil)))
    else:
        wg = emit.reshape(imp.in_perm(w, (0, 1, 2, 3)), [group, f // group, cg, *kernel])
        xg = emit.reshape(xp, [n, *emit.shape_of(xp)[1:3], group, cg])
        acc = emit.reshape(init, [n, *outs, group, f // group])
        y = emit.reshape(emit.value_of(linalg.conv_2d_nhwgc_gfhwc(
            xg, emit.transpose(wg, [0, 1, 3, 4, 2]), outs=[acc], strides=list(strides),
            dilations=list(dil))), [n, *outs, f])
    imp.define(node.outputs[0], y, cl)


def conv_nd(imp: Importer, node: Node, xp: ir.Value, w: np.ndarray, bias: np.ndarray | None,
            outs: Sequence[int], group: int, strides: Sequence[int], dil: Sequence[int],
            wname: str) -> ir.Value:
    """The channels-last result of a 1-, 2- or 3-D convolution of the padded
    channels-last `xp` with OI<spatial> weights `w` (module docstring)."""
    shape = emit.shape_of(xp)
    n, c, f = shape[0], shape[-1], w.shape[0]
    elem = emit.elem_type(xp)
    if len(outs) == 1:   # [N, W, C] as [1, N, W, C] (pools.pool_nd says why)
        x2 = emit.reshape(xp, [1, n, shape[1], c])
        init = _bias_init(imp, bias, node, [1, n, outs[0], f], elem)
        y = conv2d(imp, x2, w[:, :, None, :], init, group, [1, strides[0]], [1, dil[0]],
                   wname)
        return emit.reshape(y, [n, outs[0], f])
    if len(outs) == 2:
        init = _bias_init(imp, bias, node, [n, *outs, f], elem)
        return conv2d(imp, xp, w, init, group, strides, dil, wname)
    od, oh, ow = outs
    _, _, hp, wp, _ = shape
    acc = _bias_init(imp, bias, node, [n * od, oh, ow, f], elem)
    for kd in range(w.shape[2]):
        rows = tensor.extract_slice(emit.tensor_type([n, od, hp, wp, c], elem), xp, [], [], [],
                                    [0, kd * dil[0], 0, 0, 0], [n, od, hp, wp, c],
                                    [1, strides[0], 1, 1, 1])
        acc = conv2d(imp, emit.reshape(rows, [n * od, hp, wp, c]),
                     np.ascontiguousarray(w[:, :, kd]), acc, group, strides[1:], dil[1:],
                     f"{wname}_d{kd}")
    return emit.reshape(acc, [n, od, oh, ow, f])


def conv_transpose(imp: Importer, node: Node) -> None:
    x = imp.tensor(node.input(0))
    w = imp.const(node.input(1))
    spatial = x.rank - 2
    if spatial not in (1, 2):
        raise imp.error(f"not supported: {spatial}-D ConvTranspose (1-D and 2-D are)")
    if w is None:
        raise imp.error(f"not supported: ConvTranspose weights '{node.input(1)}' computed at "
                        "run time", fix="make the weights an initializer")
    w = w.astype(x_dtype(imp, x))
    bias = imp.const(node.input(2)) if node.input(2) else None
    if node.input(2) and bias is None:
        raise imp.error(f"not supported: ConvTranspose bias '{node.input(2)}' computed at run "
                        "time", fix="make the bias an initializer")
    group = int(node.attrs.get("group", 1))
    n, c, *sizes = x.shape
    cw, fg, *kernel = w.shape
    if cw != c or c % group:
        raise imp.error(f"weights {list(w.shape)} do not fit {c} input channels in "
                        f"{group} groups")
    strides = ints(node, "strides", [1] * spatial)
    dil = ints(node, "dilations", [1] * spatial)
    out_pad = ints(node, "output_padding", [0] * spatial)
    pads = _transpose_pads(imp, node, sizes, kernel, strides, dil, out_pad)
    # the equivalent convolution: stride-dilated input, borders, flipped kernel
    lows, highs, ups, outs = [], [], [], []
    for s, k, st, d, op, pb, pe in zip(sizes, kernel, strides, dil, out_pad, pads[:spatial],
                                       pads[spatial:]):
        keff = (k - 1) * d + 1
        ups.append((s - 1) * st + 1)
        lows.append(keff - 1 - pb)
        highs.append(keff - 1 - pe + op)
        outs.append(st * (s - 1) + op + keff - pb - pe)
    if min(outs) <= 0:
        raise imp.error(f"ConvTranspose output size {outs} is empty")
    cl = channels_last(x.rank)
    xv = imp.in_perm(x, cl)
    elem = x.elem
    grown = [n, *(max(lo, 0) + u + max(hi, 0) for lo, u, hi in zip(lows, ups, highs)), c]
    z = emit.fill(grown, elem, 0.0)
    xd = tensor.insert_slice(xv, z, [], [], [], [0, *(max(lo, 0) for lo in lows), 0],
                             [n, *sizes, c], [1, *strides, 1])
    if min(lows) < 0 or min(highs) < 0:
        start = [0, *(max(-lo, 0) for lo in lows), 0]
        keep = [n, *(g - max(-lo, 0) - max(-hi, 0) for g, lo, hi in zip(grown[1:-1], lows,
                                                                          highs)), c]
        xd = tensor.extract_slice(emit.tensor_type(keep, elem), xd, [], [], [], start, keep,
                                  [1] * len(keep))
    cg = c // group
    flipped = np.flip(w.reshape(group, cg, fg, *kernel), axis=tuple(range(3, 3 + spatial)))
    w_oi = np.ascontiguousarray(flipped.swapaxes(1, 2).reshape(group * fg, cg, *kernel))
    y = conv_nd(imp, node, xd, w_oi, bias, outs, group, [1] * spatial, dil,
                f"{node.input(1)}_transposed")
    imp.define(node.outputs[0], y, cl)


def _transpose_pads(imp: Importer, node: Node, sizes: Sequence[int], kernel: Sequence[int],
                    strides: Sequence[int], dil: Sequence[int], out_pad: Sequence[int]
                    ) -> list[int]:
    """ConvTranspose's pads (begins, ends): given, or from `output_shape` /
    `auto_pad` by ONNX's formula (total = stride (in - 1) + output_padding +
    (k - 1) d + 1 - out; SAME_UPPER puts the larger half at the end).  Under
    auto_pad SAME a negative total (a stride above the kernel's extent: in *
    stride is more than the convolution gives) is 0, as ONNX's shape
    inference and onnxruntime take it: the output is the whole convolution."""
    auto = node.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    shape = node.attrs.get("output_shape")
    if shape is None and auto not in ("SAME_UPPER", "SAME_LOWER"):
        if auto not in ("NOTSET", "", "VALID"):
            raise imp.error(f"not supported: auto_pad='{auto}'")
        return ints(node, "pads", [0] * (2 * len(sizes))) if auto != "VALID" else \
            [0] * (2 * len(sizes))
    target = [int(v) for v in shape][-len(sizes):] if shape is not None else \
        [s * st for s, st in zip(sizes, strides)]
    begins, ends = [], []
    for s, k, st, d, op, o in zip(sizes, kernel, strides, dil, out_pad, target):
        total = st * (s - 1) + op + (k - 1) * d + 1 - o
        if total < 0 and shape is None:
            total = 0
        if total < 0:
            raise imp.error(f"ConvTranspose output_shape {target} is larger than the "
                            "convolution gives")
        half = total // 2
        upper = auto == "SAME_UPPER"
        begins.append(half if upper else total - half)
        ends.append(total - half if upper else half)
    return begins + ends


def batchnorm(imp: Importer, node: Node) -> None:
    if node.index in imp.bn_folds.values():
        return   # folded into the producing Conv
    x = imp.tensor(node.input(0))
    sc = _batchnorm_consts(imp, node)
    if sc is None:
        raise imp.error("not supported: BatchNormalization with parameters computed at run "
                        "time or training outputs", fix="export the model in inference mode")
    dtype = x_dtype(imp, x)
    extra = [1] * (x.rank - 2)
    scale = imp.weight(sc[0].astype(dtype).reshape(-1, *extra), f"{node.name}_scale")
    shift = imp.weight(sc[1].astype(dtype).reshape(-1, *extra), f"{node.name}_shift")
    define_elementwise(imp, node, [x, scale, shift],
                       lambda v, s, t: arith.addf(arith.mulf(v, s), t))

