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
* ConvTranspose (1-D, 2-D, 3-D; `conv_transpose.py`): by phases, a
  stride-1 convolution of the input per phase of the stride with a
  sub-kernel, or the convolution of the stride-dilated input with the
  flipped kernel; either built from the convolutions here.

Weights and bias are initializers (stored in the raised forms' order, the
bias in the accumulator) or tensors computed at run time (a graph input,
another node's output): `Kernel` takes both through the same steps, in
numpy for the one and as slices and a transpose in the program for the
other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from nem.dialect.shape_rules import window_reach
from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Attrs, Importer, Node, TensorVal
from nem.frontends.onnx.ops import elementwise, ints, is_f16, text, x_dtype
from nem.frontends.onnx.shapes import add_unit_dims, drop_unit_dims, pick, slice_of


def channels_last(rank: int) -> tuple[int, ...]:
    """The physical order of an N, C, spatial... activation: N, spatial..., C."""
    return (0, *range(2, rank), 1)


def spatial_pads(
    imp: Importer,
    node: Node,
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    crop: bool = False,
) -> list[int]:
    """ONNX `pads` (begins, then ends) after `auto_pad`, for any number of
    spatial dimensions.  Under SAME a stride above the window's extent can
    make the total padding negative (D-COMPILE-SAME-NEG): a convolution
    takes -1 and -2 as 0 (as onnxruntime does) and refuses less; with `crop` (the pooling operators, whose definition
    gives `pad_shape` by a formula) it stays negative and is split as
    onnxruntime splits it (C division by 2: a negative pad crops), and
    dilations there are refused (D-COMPILE-POOL-EDGE)."""
    auto = text(node, "auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        return ints(node, "pads", [0] * (2 * len(sizes)))
    if auto == "VALID":
        return [0] * (2 * len(sizes))
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise imp.error(f"not supported: auto_pad='{auto}'")
    if crop and any(k > 1 and d > 1 for k, d in zip(kernel, dilations)):
        raise imp.error(
            f"not supported: MaxPool dilations {list(dilations)} under "
            f"auto_pad={auto}: onnxruntime pads by the undilated kernel, against "
            "the operator's definition, and so gives other windows "
            "(D-COMPILE-POOL-EDGE)",
            "give the node explicit `pads` instead of auto_pad",
        )
    begins, ends = [], []
    for axis, (n, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations)):
        out = -(-n // s)
        total = window_reach(out, s, k, d) - n
        if total < -2 and not crop:
            raise imp.error(
                f"not supported: auto_pad={auto} with a stride of {s} over {n} elements on "
                f"spatial axis {axis} gives a total padding of {total}: onnxruntime shifts "
                "the windows there, which the operator's definition does not say "
                "(D-COMPILE-SAME-NEG)",
                "give the node explicit `pads` instead of auto_pad",
            )
        total = total if crop else max(total, 0)
        half = total if auto == "SAME_UPPER" else total + 1
        begins.append(half // 2 if half >= 0 else -(-half // 2))  # C division by 2
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
        if (
            j is None
            or imp.graph.node[j].op_type != "Conv"
            or users.get(src) != [i]
            or src in outputs
        ):
            continue
        conv = imp.graph.node[j]
        if conv.input[1] not in imp.consts or (
            len(conv.input) > 2 and conv.input[2] and conv.input[2] not in imp.consts
        ):
            continue
        if all(k < len(n.input) and n.input[k] in imp.consts for k in range(1, 5)) and not any(
            n.output[1:]
        ):
            folds[j] = i
    return folds


Operand = np.ndarray | TensorVal
"""A convolution's weights or bias: a compile-time array (an initializer,
a constant) or a tensor computed at run time (a graph input, another
node's output)."""


def _operand(imp: Importer, name: str) -> Operand | None:
    """Input `name`: its compile-time value, else the tensor computed at run
    time; None when the input is absent ('')."""
    if not name:
        return None
    c = imp.const(name)
    return c if c is not None else imp.tensor(name)


def kernel_operands(imp: Importer, node: Node) -> tuple[Operand, Operand | None]:
    """The weights and the bias (None when absent) of a Conv or ConvTranspose."""
    w = _operand(imp, node.input(1))
    if w is None:
        raise imp.error(f"{node.op_type} has no weights (input 1)")
    return w, _operand(imp, node.input(2))


@dataclass(frozen=True)
class Kernel:
    """A convolution's weights in the logical order [G, F/G, C/G, spatial...]
    (group, output channel in the group, input channel in the group, kernel
    position), from which `conv2d` takes its raised forms (HWCF, GFHWC).  A
    compile-time array goes through numpy and is stored in that form as the
    weight argument `name` (D-COMPILE-WEIGHTS); a tensor computed at run time
    goes through the same steps as views and copies in the program (slices
    and concatenations, a transpose), so every convolution below takes
    either."""

    data: Operand
    name: str

    @property
    def group(self) -> int:
        return int(self.data.shape[0])

    @staticmethod
    def grouped(imp: Importer, w: Operand, group: int, name: str) -> Kernel:
        """The [G, F/G, C/G, spatial...] kernel of Conv weights [F, C/G, spatial...]."""
        f, cg, *kernel = w.shape
        return Kernel(_split_groups(imp, w, [group, f // group, cg, *kernel]), name)

    @staticmethod
    def of_transpose(imp: Importer, w: Operand, group: int, name: str) -> Kernel:
        """The kernel of the convolution a ConvTranspose of weights
        [C, F/G, spatial...] is: flipped along every spatial axis, input and
        output channels swapped within each group."""
        c, fg, *kernel = w.shape
        g = _split_groups(imp, w, [group, c // group, fg, *kernel])
        axes = range(3, 3 + len(kernel))
        if isinstance(g, np.ndarray):
            return Kernel(np.ascontiguousarray(np.flip(g, axis=tuple(axes)).swapaxes(1, 2)), name)
        for a in axes:
            g = pick(g, a, range(g.shape[a] - 1, -1, -1))
        swap = {1: 2, 2: 1}
        return Kernel(
            TensorVal(
                g.value, (group, fg, c // group, *kernel), tuple(swap.get(p, p) for p in g.perm)
            ),
            name,
        )

    def depth(self, kd: int) -> Kernel:
        """The 2-D kernel at depth `kd` of a 3-D one."""
        if isinstance(self.data, np.ndarray):
            return Kernel(np.ascontiguousarray(self.data[:, :, :, kd]), f"{self.name}_d{kd}")
        return Kernel(drop_unit_dims(slice_of(self.data, 3, kd, 1, 1), [3]), self.name)

    def with_unit_height(self) -> Kernel:
        """A 1-D kernel [.., k] as the 2-D kernel [.., 1, k]."""
        if isinstance(self.data, np.ndarray):
            return Kernel(self.data[:, :, :, None, :], self.name)
        return Kernel(add_unit_dims(self.data, [3]), self.name)

    def raised(self, imp: Importer) -> ir.Value:
        """The 2-D kernel as `conv2d`'s raised forms take it: HWCF for one
        group, else GFHWC."""
        w = self.data
        if isinstance(w, np.ndarray):
            if self.group == 1:
                return imp.weight(w[0].transpose(2, 3, 1, 0), self.name, perm=(2, 3, 1, 0)).value
            return imp.weight(w.transpose(0, 1, 3, 4, 2), self.name, perm=None).value
        if self.group == 1:
            return imp.in_perm(drop_unit_dims(w, [0]), (2, 3, 1, 0))
        return imp.in_perm(w, (0, 1, 3, 4, 2))


def _split_groups(imp: Importer, w: Operand, shape: Sequence[int]) -> Operand:
    """Weights [A, B, spatial...] as [G, A/G, B, spatial...] (`shape`); one
    group is a unit dimension in front, which keeps a run-time tensor's
    layout."""
    if isinstance(w, np.ndarray):
        return w.reshape(shape)
    if shape[0] == 1:
        return add_unit_dims(w, [0])
    return TensorVal(emit.reshape(imp.logical(w), shape), tuple(shape), tuple(range(len(shape))))


def _bias_init(
    imp: Importer,
    bias: Operand | None,
    node: Node,
    shape: Sequence[int],
    elem: ir.Type,
    into: ir.Value | None = None,
) -> ir.Value:
    """The channels-last accumulator a convolution adds into: zeros, or the
    bias (a weight, or a tensor computed at run time) broadcast along the
    last dimension; in `into` (a slice of a larger result, which the
    convolution then writes in place) or a tensor of its own."""
    out = emit.empty(shape, elem) if into is None else into
    if bias is None:
        return emit.value_of(linalg.fill(emit.scalar(elem, 0.0), outs=[out]))
    b = (
        imp.weight(bias, node.input(2) or f"{node.name}_bias")
        if isinstance(bias, np.ndarray)
        else bias
    )
    return emit.broadcast(imp.logical(b), [len(shape) - 1], shape, out)


def conv2d(
    imp: Importer,
    xp: ir.Value,
    w: Kernel,
    init: ir.Value,
    strides: Sequence[int],
    dil: Sequence[int],
) -> ir.Value:
    """`init` + the 2-D convolution of the padded NHWC value `xp` with the
    kernel `w` (the raised form: HWCF weights, or GFHWC per group)."""
    n, hp, wp, c = emit.shape_of(xp)
    _, oh, ow, f = emit.shape_of(init)
    group = w.group
    if group == 1:
        return emit.value_of(
            linalg.conv_2d_nhwc_hwcf(
                xp, w.raised(imp), outs=[init], strides=list(strides), dilations=list(dil)
            )
        )
    xg = emit.reshape(xp, [n, hp, wp, group, c // group])
    acc = emit.reshape(init, [n, oh, ow, group, f // group])
    y = emit.value_of(
        linalg.conv_2d_nhwgc_gfhwc(
            xg, w.raised(imp), outs=[acc], strides=list(strides), dilations=list(dil)
        )
    )
    return emit.reshape(y, [n, oh, ow, f])


def _folded_weights(
    imp: Importer, node: Node, w: np.ndarray, bias: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(weights, bias) with the BatchNormalization that follows `node`
    (plan_batchnorm_folds) folded in, in f64 rounded once."""
    from onnx import helper

    bn_index = imp.bn_folds[node.index]
    proto = imp.graph.node[bn_index]
    bn = Node(
        bn_index, proto, Attrs({a.name: helper.get_attribute_value(a) for a in proto.attribute})
    )
    folded = _batchnorm_consts(imp, bn)
    assert folded is not None  # plan_batchnorm_folds: constant parameters, one output
    scale, shift = folded
    w = (w.astype(np.float64) * scale.reshape(-1, *[1] * (w.ndim - 1))).astype(w.dtype)
    b64 = bias.astype(np.float64) if bias is not None else 0.0
    return w, (b64 * scale + shift).astype(w.dtype)


def check_kernel_shape(imp: Importer, node: Node, w_shape: Sequence[int]) -> None:
    """A Conv's or ConvTranspose's `kernel_shape`, if given, is the weights'
    spatial shape (ONNX infers it from them)."""
    kernel = list(w_shape[2:])
    if ints(node, "kernel_shape", kernel) != kernel:
        raise imp.error(
            f"kernel_shape {ints(node, 'kernel_shape', [])} does not match the "
            f"weights {list(w_shape)}"
        )


def check_operands(
    imp: Importer,
    x: TensorVal,
    w: Operand,
    bias: Operand | None,
    group: int,
    in_channels: int,
    out_channels: int,
) -> None:
    """A located error unless the weights have the activation's rank and
    fit its channels in `group` groups, and the bias is one per output
    channel."""
    c = x.shape[1]
    if len(w.shape) != x.rank or in_channels != c or c % group or out_channels % group:
        raise imp.error(f"weights {list(w.shape)} do not fit {c} input channels in {group} groups")
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise imp.error(
            f"bias of shape {list(bias.shape)} does not match the {out_channels} output channels"
        )


def kernel_node(
    imp: Importer, node: Node, what: str
) -> tuple[TensorVal, int, Operand, Operand | None, int]:
    """A Conv's or ConvTranspose's (`what`) activation, its spatial rank
    (1-D, 2-D and 3-D, else a located error), kernel (a compile-time one in
    the activation's type), bias and group."""
    x = imp.tensor(node.input(0))
    spatial = x.rank - 2
    if spatial not in (1, 2, 3):
        raise imp.error(f"not supported: {spatial}-D {what} (1-D, 2-D and 3-D are)")
    w, bias = kernel_operands(imp, node)
    if isinstance(w, np.ndarray):
        w = w.astype(x_dtype(imp, x))
    return x, spatial, w, bias, int(node.attrs.get("group", 1))


def conv(imp: Importer, node: Node) -> None:
    x, spatial, w, bias, group = kernel_node(imp, node, "convolution")
    out_name = node.outputs[0]
    if isinstance(w, np.ndarray):
        if node.index in imp.bn_folds:  # plan_batchnorm_folds: a constant bias
            assert bias is None or isinstance(bias, np.ndarray)
            w, bias = _folded_weights(imp, node, w, bias)
            out_name = imp.graph.node[imp.bn_folds[node.index]].output[0]
    n, c, *sizes = x.shape
    f, cg, *kernel = w.shape
    check_operands(imp, x, w, bias, group, cg * group, f)
    check_kernel_shape(imp, node, w.shape)
    strides = ints(node, "strides", [1] * spatial)
    dil = ints(node, "dilations", [1] * spatial)
    pads = spatial_pads(imp, node, sizes, kernel, strides, dil)
    cl = channels_last(x.rank)
    xp = imp.pad(imp.in_perm(x, cl), [0, *pads[:spatial], 0], [0, *pads[spatial:], 0], 0.0)
    outs = [
        (s + lo + hi - d * (k - 1) - 1) // st + 1
        for s, k, st, d, lo, hi in zip(sizes, kernel, strides, dil, pads[:spatial], pads[spatial:])
    ]
    y = conv_nd(
        imp, node, xp, Kernel.grouped(imp, w, group, node.input(1)), bias, outs, strides, dil
    )
    imp.define(out_name, y, cl)


def conv_nd(
    imp: Importer,
    node: Node,
    xp: ir.Value,
    w: Kernel,
    bias: Operand | None,
    outs: Sequence[int],
    strides: Sequence[int],
    dil: Sequence[int],
    into: ir.Value | None = None,
) -> ir.Value:
    """The channels-last result of a 1-, 2- or 3-D convolution of the padded
    channels-last `xp` with the kernel `w` (module docstring); a 2-D one
    computed in `into` where given (`_bias_init`)."""
    shape = emit.shape_of(xp)
    n, c = shape[0], shape[-1]
    f = w.group * int(w.data.shape[1])
    elem = emit.elem_type(xp)
    if len(outs) == 1:  # [N, W, C] as [1, N, W, C] (pools.pool_nd says why)
        x2 = emit.reshape(xp, [1, n, shape[1], c])
        init = _bias_init(imp, bias, node, [1, n, outs[0], f], elem)
        y = conv2d(imp, x2, w.with_unit_height(), init, [1, strides[0]], [1, dil[0]])
        return emit.reshape(y, [n, outs[0], f])
    assert into is None or len(outs) == 2
    if len(outs) == 2:
        init = _bias_init(imp, bias, node, [n, *outs, f], elem, into)
        return conv2d(imp, xp, w, init, strides, dil)
    od, oh, ow = outs
    _, _, hp, wp, _ = shape
    acc = _bias_init(imp, bias, node, [n * od, oh, ow, f], elem)
    for kd in range(int(w.data.shape[3])):
        rows = tensor.extract_slice(
            emit.tensor_type([n, od, hp, wp, c], elem),
            xp,
            [],
            [],
            [],
            [0, kd * dil[0], 0, 0, 0],
            [n, od, hp, wp, c],
            [1, strides[0], 1, 1, 1],
        )
        acc = conv2d(
            imp, emit.reshape(rows, [n * od, hp, wp, c]), w.depth(kd), acc, strides[1:], dil[1:]
        )
    return emit.reshape(acc, [n, od, oh, ow, f])


def batchnorm(imp: Importer, node: Node) -> None:
    if node.index in imp.bn_folds.values():
        # folded into the producing Conv (`_folded_weights`), which read its
        # parameters and `epsilon` off the node's proto: the same reads here,
        # so that D-COMPILE-ATTRS sees `epsilon` read (an outside review,
        # session 53: a folded BatchNormalization of epsilon 1e-3 was refused
        # as an attribute the importer does not implement)
        node.read_elsewhere()
        _batchnorm_consts(imp, node)
        return
    x = imp.tensor(node.input(0))
    sc = _batchnorm_consts(imp, node)
    if sc is None:
        raise imp.error(
            "not supported: BatchNormalization with parameters computed at run "
            "time or training outputs",
            fix="export the model in inference mode",
        )
    # f16: scale and shift kept in f32 and `x * scale + shift` computed in
    # f32, rounded once (D-COMPILE-F16): in f16 the folded constants and the
    # product each round, several ulps off where the shift cancels the
    # product (campaign seed 10101's m270, amplified by a LayerNormalization)
    half = is_f16(x.value)
    dtype = np.dtype(np.float32) if half else x_dtype(imp, x)
    extra = [1] * (x.rank - 2)
    scale = imp.weight(sc[0].astype(dtype).reshape(-1, *extra), f"{node.name}_scale")
    shift = imp.weight(sc[1].astype(dtype).reshape(-1, *extra), f"{node.name}_shift")

    def body(v: ir.Value, s: ir.Value, t: ir.Value) -> ir.Value:
        r = arith.addf(arith.mulf(arith.extf(s.type, v) if half else v, s), t)
        return arith.truncf(x.elem, r) if half else r

    value, perm = elementwise(imp, [x, scale, shift], body, elem=x.elem)
    imp.define(node.outputs[0], value, perm)
