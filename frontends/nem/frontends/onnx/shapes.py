"""ONNX ops that move or repeat data: Unsqueeze, Squeeze, Tile, Expand,
Gather, GatherElements, Pad, DepthToSpace, SpaceToDepth, and the
compile-time ones (Shape, Size, ConstantOfShape, Cast of constants)
(D-COMPILE-SHAPES).

Each is a view or a copy the lowering turns into transfers:

* `Squeeze`/`Unsqueeze` remove or add size-1 dimensions in the value's
  physical layout (a `tensor.collapse_shape`/`expand_shape` of the same
  bytes: an NHWC activation stays NHWC);
* `Expand` and `Tile` are one broadcasting `linalg.generic` copy (Tile:
  to `[r0, n0, r1, n1, ...]`, then a reshape to `[r0 n0, r1 n1, ...]`);
* `Gather` with constant indices is one strided `tensor.extract_slice`
  when the indices are an arithmetic progression (a view), else one slice
  per index concatenated (copies); with indices computed at run time, and
  `GatherElements`, one data-dependent load per output element (an
  escape-hatch kernel);
* `DepthToSpace` and `SpaceToDepth` are their ONNX definitions: a reshape
  to six dimensions, one transposing copy, a reshape back;
* `Pad`: `constant` mode is a `tensor.pad` (a fill and a copy; a zero
  Pad before a Conv is folded into the Conv's pads by the graph
  simplifier, D-COMPILE-SIMPLIFY), `reflect` and `edge` modes concatenate
  one slice per border row (reflect) or a broadcast of the edge (edge),
  `wrap` the slices of the rows it repeats from the other end.

Constants go through numpy (a constant Gather, Unsqueeze, ... of a weight
stays a compile-time weight); integer tensors exist only as such
constants (shapes, axes, indices).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from mlir import ir
from mlir.dialects import arith, tensor

from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.logic import to_bool
from nem.frontends.onnx.ops import elementwise, text


def axes_operand(imp: Importer, node: Node, rank: int, k: int = 1) -> list[int] | None:
    """The `axes` attribute (older opsets) or constant input `k`, normalized
    to 0..rank-1; None when neither is given."""
    given = node.attrs.get("axes")
    if given is None:
        given = imp.const_ints(node, k, "axes")
    if given is None:
        return None
    return sorted({imp.axis(int(a), rank) for a in given})


def drop_unit_dims(x: TensorVal, axes: Sequence[int]) -> TensorVal:
    """`x` without its size-1 logical dimensions `axes`, physical order kept."""
    phys_drop = {x.perm.index(a) for a in axes}
    keep = [p for i, p in enumerate(x.perm) if i not in phys_drop]
    renumber = {a: j for j, a in enumerate(sorted(keep))}
    perm = tuple(renumber[p] for p in keep)
    shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
    value = emit.reshape(x.value, [shape[p] for p in perm])
    return TensorVal(value, shape, perm)


def add_unit_dims(x: TensorVal, axes: Sequence[int]) -> TensorVal:
    """`x` with size-1 logical dimensions inserted at output positions
    `axes` (sorted), each placed physically before the dimension that
    follows it logically (so [N, C, W] kept as [N, W, C] becomes NHWC)."""
    perm = list(x.perm)
    shape = list(x.shape)
    for a in sorted(axes):
        perm = [p + 1 if p >= a else p for p in perm]
        after = [i for i, p in enumerate(perm) if p == a + 1]
        perm.insert(after[0] if after else len(perm), a)
        shape.insert(a, 1)
    value = emit.reshape(x.value, [shape[p] for p in perm])
    return TensorVal(value, tuple(shape), tuple(perm))


def squeeze(imp: Importer, node: Node) -> None:
    c = imp.const(node.input(0))
    shape = c.shape if c is not None else imp.tensor(node.input(0)).shape
    axes = axes_operand(imp, node, len(shape))
    if axes is None:
        axes = [d for d, s in enumerate(shape) if s == 1]
    if any(shape[a] != 1 for a in axes):
        raise imp.error(f"Squeeze of axes {axes} of shape {list(shape)}: not all have size 1")
    if c is not None:
        imp.set_const(node.outputs[0], c.reshape([s for d, s in enumerate(shape) if d not in axes]))
        return
    imp.vals[node.outputs[0]] = drop_unit_dims(imp.tensor(node.input(0)), axes)


def unsqueeze(imp: Importer, node: Node) -> None:
    c = imp.const(node.input(0))
    shape = c.shape if c is not None else imp.tensor(node.input(0)).shape
    given = node.attrs.get("axes") or imp.const_ints(node, 1, "axes") or []
    rank = len(shape) + len(given)
    axes = sorted({imp.axis(int(a), rank) for a in given})
    if c is not None:
        imp.set_const(node.outputs[0], c.reshape(_unsqueezed(shape, axes)))
        return
    imp.vals[node.outputs[0]] = add_unit_dims(imp.tensor(node.input(0)), axes)


def _unsqueezed(shape: Sequence[int], axes: Sequence[int]) -> list[int]:
    out = list(shape)
    for a in sorted(axes):
        out.insert(a, 1)
    return out


def _shape_operand(imp: Importer, node: Node, k: int, what: str) -> list[int] | None:
    """Integer operand `k` (Expand's shape, Tile's repeats): its constant
    value, or None when it is a graph input only fixing the output's shape
    (D-COMPILE-IFACE: the caller derives it from the declared shape)."""
    if imp.const(node.input(k)) is not None:
        return imp.const_ints(node, k, what)
    if node.input(k) in imp.unread_inputs:
        return None
    return imp.const_ints(node, k, what)  # the located "computed at run time" error


def expand(imp: Importer, node: Node) -> None:
    c = imp.const(node.input(0))
    shape = _shape_operand(imp, node, 1, "shape")
    src = c.shape if c is not None else imp.tensor(node.input(0)).shape
    if shape is None:
        out = imp.static_shape(node.outputs[0])
        assert out is not None  # driver.unread_inputs: the output's shape is known
    else:
        out = tuple(np.broadcast_shapes(tuple(src), tuple(shape)))
    if c is not None:
        imp.set_const(node.outputs[0], np.broadcast_to(c, out).copy())
        return
    x = imp.tensor(node.input(0))
    try:
        np.broadcast_shapes(x.shape, out)
    except ValueError:
        raise imp.error(
            f"Expand of {list(x.shape)} to {list(out)}: the shapes do not broadcast"
        ) from None
    if tuple(out) == x.shape:
        imp.vals[node.outputs[0]] = x
        return
    pad = len(out) - x.rank
    value = emit.broadcast(imp.logical(x), [d + pad for d in range(x.rank)], out)
    imp.define(node.outputs[0], value)


def tile(imp: Importer, node: Node) -> None:
    c = imp.const(node.input(0))
    src = c.shape if c is not None else imp.tensor(node.input(0)).shape
    reps = _shape_operand(imp, node, 1, "repeats")
    if reps is None:
        out = imp.static_shape(node.outputs[0])
        assert out is not None
        reps = [o // s for o, s in zip(out, src)]
    if len(reps) != len(src) or min(reps, default=1) < 1:
        raise imp.error(
            f"Tile repeats {reps} do not fit shape {list(src)}",
            fix="give one positive repeat count per dimension",
        )
    if c is not None:
        imp.set_const(node.outputs[0], np.tile(c, reps))
        return
    x = imp.tensor(node.input(0))
    if all(r == 1 for r in reps):
        imp.vals[node.outputs[0]] = x
        return
    wide = [d for s, r in zip(x.shape, reps) for d in (r, s)]
    value = emit.broadcast(imp.logical(x), [2 * d + 1 for d in range(x.rank)], wide)
    imp.define(node.outputs[0], emit.reshape(value, [s * r for s, r in zip(x.shape, reps)]))


def gather(imp: Importer, node: Node) -> None:
    c = imp.const(node.input(0))
    shape = c.shape if c is not None else imp.tensor(node.input(0)).shape
    axis = imp.axis(int(node.attrs.get("axis", 0)), len(shape))
    idx = imp.const(node.input(1))
    if idx is None:
        _gather_at_run_time(imp, node, axis)
        return
    dim = shape[axis]
    flat = [int(i) + dim if int(i) < 0 else int(i) for i in idx.reshape(-1)]
    if any(not 0 <= i < dim for i in flat):
        raise imp.error(f"Gather index out of range for axis {axis} of size {dim}")
    if c is not None:
        imp.set_const(node.outputs[0], np.take(c, np.array(flat).reshape(idx.shape), axis))
        return
    x = imp.tensor(node.input(0))
    out = [*x.shape[:axis], *idx.shape, *x.shape[axis + 1 :]]
    picked = pick(x, axis, flat)
    if list(picked.shape) == out:
        imp.vals[node.outputs[0]] = picked
    else:
        imp.define(node.outputs[0], emit.reshape(imp.logical(picked), out))


def _gather_at_run_time(imp: Importer, node: Node, axis: int) -> None:
    """Gather with indices computed at run time (an embedding's token ids):
    output coordinate `axis .. axis + rank(indices)` is the index's, the
    others the data's (`_extract_by_index`)."""
    data = imp.tensor(node.input(0))
    idx = imp.tensor(node.input(1))
    dims = data.shape
    out = [*dims[:axis], *idx.shape, *dims[axis + 1 :]]
    at_idx = list(range(axis, axis + idx.rank))
    others = [d if d < axis else d - 1 + idx.rank for d in range(len(dims)) if d != axis]
    imp.define(node.outputs[0], _extract_by_index(imp, node, axis, out, at_idx, others))


def gather_elements(imp: Importer, node: Node) -> None:
    """`GatherElements`: `out[i0, .., ik, ..] = data[i0, .., index[i0, .., ik, ..], ..]`
    (the output has the indices' shape; `_extract_by_index`)."""
    data = imp.tensor(node.input(0))
    idx = imp.tensor(node.input(1))
    axis = imp.axis(int(node.attrs.get("axis", 0)), data.rank)
    if idx.rank != data.rank:
        raise imp.error(f"GatherElements indices of rank {idx.rank} for data of rank {data.rank}")
    const = imp.const(node.input(1))
    if const is not None:
        flat = const.reshape(-1)
        if np.any((flat < -data.shape[axis]) | (flat >= data.shape[axis])):
            raise imp.error(
                f"GatherElements index out of range for axis {axis} of size {data.shape[axis]}"
            )
    rank = idx.rank
    others = [d for d in range(rank) if d != axis]
    imp.define(
        node.outputs[0],
        _extract_by_index(imp, node, axis, list(idx.shape), list(range(rank)), others),
    )


def _extract_by_index(
    imp: Importer,
    node: Node,
    axis: int,
    out: list[int],
    at_idx: Sequence[int],
    others: Sequence[int],
) -> ir.Value:
    """The `out`-shaped result of a gather along data axis `axis` whose
    index (input 1) is read at output dimensions `at_idx` and whose other
    data coordinates are output dimensions `others` (in data order): one
    `linalg.generic` whose body reads the index, counts a negative one from
    the end and extracts that element of the data (`tensor.extract`: a
    data-dependent load, an escape-hatch kernel).  The other coordinates
    come from constant iota inputs rather than `linalg.index`, which the
    runtime's kernel interpreter lacks."""
    data = imp.tensor(node.input(0))
    idx = imp.tensor(node.input(1))
    if not isinstance(idx.elem, ir.IntegerType):
        raise imp.error(f"{node.op_type} indices '{node.input(1)}' are not integers")
    dims = data.shape
    rank = len(out)
    operands = [
        (imp.logical(idx), ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in at_idx]))
    ]
    kept = [d for d in range(len(dims)) if d != axis]
    for d, o in zip(kept, others):
        iota = imp.weight(np.arange(dims[d], dtype=np.int32), f"{node.name}_iota{d}")
        operands.append((iota.value, ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(o)])))
    table = imp.logical(data)
    index = ir.IndexType.get()

    def body(k: ir.Value, *coords_in: ir.Value) -> ir.Value:
        i = arith.index_cast(index, k)
        n = arith.constant(index, dims[axis])
        i = arith.select(
            arith.cmpi(arith.CmpIPredicate.slt, i, arith.constant(index, 0)), arith.addi(i, n), i
        )
        coords = [arith.index_cast(index, v) for v in coords_in]
        coords.insert(axis, i)
        return tensor.extract(table, coords)

    return emit.generic(
        operands, emit.empty(out, data.elem), emit.identity(rank), [emit.PARALLEL] * rank, body
    )


def crop_negative_pads(
    imp: Importer, x: TensorVal, lo: list[int], hi: list[int], what: str
) -> TensorVal:
    """`x` cropped where its per-axis padding `lo`/`hi` is negative (Pad's
    negative pads, a pooling's negative SAME padding, D-COMPILE-SAME-NEG);
    `lo` and `hi` are left with the padding still to add (the negative
    entries set to 0)."""
    for a in range(x.rank):
        if lo[a] < 0 or hi[a] < 0:
            cut_lo, cut_hi = max(-lo[a], 0), max(-hi[a], 0)
            size = x.shape[a] - cut_lo - cut_hi
            if size <= 0:
                raise imp.error(f"{what} crops axis {a} of size {x.shape[a]} to nothing")
            x = slice_of(x, a, cut_lo, size, 1)
            lo[a], hi[a] = max(lo[a], 0), max(hi[a], 0)
    return x


def slice_of(x: TensorVal, axis: int, start: int, size: int, step: int) -> TensorVal:
    """`x[..., start : start + size * step : step, ...]` along logical `axis`,
    an extract_slice of the physical value (a view)."""
    shape = list(x.shape)
    if start == 0 and size == shape[axis] and step == 1:
        return x
    offs, sizes, strides = [0] * x.rank, list(shape), [1] * x.rank
    offs[axis], sizes[axis], strides[axis] = start, size, step
    p = [x.perm[i] for i in range(x.rank)]
    value = tensor.extract_slice(
        emit.tensor_type([sizes[d] for d in p], x.elem),
        x.value,
        [],
        [],
        [],
        [offs[d] for d in p],
        [sizes[d] for d in p],
        [strides[d] for d in p],
    )
    shape[axis] = size
    return TensorVal(value, tuple(shape), x.perm)


def pick(x: TensorVal, axis: int, indices: Sequence[int]) -> TensorVal:
    """The elements `indices` of `x` along logical `axis`, in that order:
    one strided view when they step up evenly, else the concatenation of
    the views of their runs of consecutive elements (a Gather's indices, a
    Slice's negative step, a wrapping Pad; NEM regions take no negative
    strides)."""
    step = indices[1] - indices[0] if len(indices) > 1 else 1
    if step > 0 and list(indices) == list(
        range(indices[0], indices[0] + step * len(indices), step)
    ):
        return slice_of(x, axis, indices[0], len(indices), step)
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    parts = [slice_of(x, axis, start, size, 1) for start, size in runs]
    return TensorVal(
        emit.concat([p.value for p in parts], x.perm.index(axis)),
        parts[0].shape[:axis] + (len(indices),) + parts[0].shape[axis + 1 :],
        x.perm,
    )


# --------------------------------------------------------------------------
# Pad


def pad(imp: Importer, node: Node) -> None:
    x = imp.tensor(node.input(0))
    mode = text(node, "mode", "constant")
    if imp.opset < 11:
        pads = [int(v) for v in node.attrs["pads"]]
        value = float(node.attrs.get("value", 0.0))
    else:
        pads = imp.const_ints(node, 1, "pads") or []
        value = 0.0
        if node.input(2):
            cv = imp.const(node.input(2))
            if cv is None:
                raise imp.error(
                    f"not supported: Pad value '{node.input(2)}' computed at run time",
                    fix=imp.run_time_fix(node.input(2), "value"),
                )
            if cv.dtype.kind in "iu":  # in int32's range, as data (D-COMPILE-I64)
                cv = imp.check_data(cv, node.input(2))
            value = float(cv.reshape(-1)[0]) if cv.size else 0.0
    axes = imp.const_ints(node, 3, "axes") or list(range(x.rank))
    axes = [imp.axis(a, x.rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise imp.error(f"Pad has {len(pads)} pads for {len(axes)} axes")
    lo, hi = [0] * x.rank, [0] * x.rank
    for a, b, e in zip(axes, pads[: len(axes)], pads[len(axes) :]):
        lo[a], hi[a] = b, e
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise imp.error(f"not supported: Pad mode '{mode}'")
    x = crop_negative_pads(imp, x, lo, hi, "Pad")
    if mode == "constant":
        y = emit.pad(x.value, [lo[p] for p in x.perm], [hi[p] for p in x.perm], value)
        imp.define(node.outputs[0], y, x.perm)
        return
    for a in range(x.rank):
        if lo[a] or hi[a]:
            x = _pad_border(imp, x, a, lo[a], hi[a], mode)
    imp.vals[node.outputs[0]] = x


def _pad_border(imp: Importer, x: TensorVal, axis: int, lo: int, hi: int, mode: str) -> TensorVal:
    """`x` with `lo` rows before and `hi` after along `axis`: mirrored rows
    (reflect: row lo, ..., 1 before; n-2, ... after), copies of the edge, or
    the rows of the other end (wrap: row n-lo, ..., n-1 before; 0, ... after,
    round and round when the padding is longer than the axis)."""
    n = x.shape[axis]
    if mode == "reflect" and (lo >= n or hi >= n):
        raise imp.error(
            f"Pad reflect of {max(lo, hi)} rows of an axis of size {n}: ONNX "
            "needs fewer rows than the axis has"
        )
    if mode == "wrap":
        if n == 0:
            raise imp.error("Pad wrap of an empty axis: there are no rows to repeat")
        return pick(x, axis, [(i - lo) % n for i in range(lo + n + hi)])
    parts: list[TensorVal] = []
    if mode == "reflect":
        parts += [slice_of(x, axis, i, 1, 1) for i in range(lo, 0, -1)]
        parts.append(x)
        parts += [slice_of(x, axis, n - 2 - i, 1, 1) for i in range(hi)]
    else:
        for rows, at in ((lo, 0), (0, None), (hi, n - 1)):
            if at is None:
                parts.append(x)
            elif rows:
                edge = slice_of(x, axis, at, 1, 1)
                shape = list(edge.shape)
                shape[axis] = rows
                phys = [shape[p] for p in x.perm]
                parts.append(
                    TensorVal(
                        emit.broadcast(edge.value, list(range(x.rank)), phys), tuple(shape), x.perm
                    )
                )
    shape = list(x.shape)
    shape[axis] = n + lo + hi
    return TensorVal(
        emit.concat([p.value for p in parts], x.perm.index(axis)), tuple(shape), x.perm
    )


# --------------------------------------------------------------------------
# compile-time values


def shape(imp: Importer, node: Node) -> None:
    c = imp.const(node.input(0))
    dims = c.shape if c is not None else imp.tensor(node.input(0)).shape
    start = int(node.attrs.get("start", 0))
    end = node.attrs.get("end")
    imp.set_const(
        node.outputs[0], np.array(dims[slice(start, None if end is None else int(end))], np.int64)
    )


def size(imp: Importer, node: Node) -> None:
    c = imp.const(node.input(0))
    dims = c.shape if c is not None else imp.tensor(node.input(0)).shape
    imp.set_const(node.outputs[0], np.array(int(np.prod(dims)), np.int64))


def constant_of_shape(imp: Importer, node: Node) -> None:
    from onnx import numpy_helper

    dims = imp.const_ints(node, 0, "shape") or []
    v = node.attrs.get("value")
    fill = numpy_helper.to_array(v).reshape(-1) if v is not None else np.zeros(1, np.float32)
    imp.set_const(node.outputs[0], np.full(dims, fill[0], fill.dtype))


def cast(imp: Importer, node: Node) -> None:
    """Cast: of a constant, by numpy; of a float tensor to a float type, an
    `extf`/`truncf` (f64 is f32 when demoted, D-COMPILE-F64); to bool, a
    comparison with zero (D-COMPILE-BOOL: a bool is an i32 0 or 1, so a
    Cast from bool is the Cast of that i32)."""
    to = int(node.attrs["to"])
    c = imp.const(node.input(0))
    np_to = onnx.helper.tensor_dtype_to_np_dtype(to)
    if c is not None:
        imp.set_const(node.outputs[0], c.astype(np_to))
        return
    x = imp.tensor(node.input(0))
    if to == onnx.TensorProto.BOOL:
        to_bool(imp, node, x)
        return
    if to not in imp.elem_types:
        raise imp.error(
            f"not supported: Cast of a tensor computed at run time to "
            f"{onnx.TensorProto.DataType.Name(to)} (the program computes with "
            "f32, f16 and i32)"
        )
    target = ir.Type.parse(imp.elem_types[to][0])
    if target == x.elem:
        imp.vals[node.outputs[0]] = x
        return
    src_int, dst_int = (isinstance(t, ir.IntegerType) for t in (x.elem, target))

    def body(v: ir.Value) -> ir.Value:
        if src_int:
            return arith.sitofp(target, v)
        if dst_int:
            return arith.fptosi(target, v)  # ONNX truncates toward zero, as fptosi does
        wider = isinstance(target, ir.F32Type)
        return arith.extf(target, v) if wider else arith.truncf(target, v)

    value, perm = elementwise(imp, [x], body, elem=target)
    imp.define(node.outputs[0], value, perm)


def depth_to_space(imp: Importer, node: Node) -> None:
    """ONNX's definition: [N, C, H, W] to [N, C/b², H b, W b] by a reshape
    to six dimensions (DCR: the block before the channels, CRD: after), a
    transpose and a reshape."""
    x, b = _blocked(imp, node)
    n, c, h, w = x.shape
    if c % (b * b):
        raise imp.error(f"DepthToSpace of {c} channels: not a multiple of blocksize² = {b * b}")
    split, perm = (
        ([n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2])
        if _mode(imp, node) == "DCR"
        else ([n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3])
    )
    _shuffle(imp, node, x, split, perm, [n, c // (b * b), h * b, w * b])


def space_to_depth(imp: Importer, node: Node) -> None:
    """ONNX's definition: [N, C, H, W] to [N, C b², H/b, W/b], the block
    before the channels (DCR, the default) or after them (CRD, opset 26's
    `mode`)."""
    x, b = _blocked(imp, node)
    n, c, h, w = x.shape
    if h % b or w % b:
        raise imp.error(f"SpaceToDepth of {h}x{w}: not a multiple of blocksize {b}")
    split = [n, c, h // b, b, w // b, b]
    perm = [0, 3, 5, 1, 2, 4] if _mode(imp, node) == "DCR" else [0, 1, 3, 5, 2, 4]
    _shuffle(imp, node, x, split, perm, [n, c * b * b, h // b, w // b])


def _mode(imp: Importer, node: Node) -> str:
    """DepthToSpace's or SpaceToDepth's `mode`: DCR (the default) or CRD."""
    mode = text(node, "mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise imp.error(f"{node.op_type} mode {mode!r}: ONNX defines DCR and CRD")
    return mode


def _blocked(imp: Importer, node: Node) -> tuple[TensorVal, int]:
    x = imp.tensor(node.input(0))
    if x.rank != 4:
        raise imp.error(f"{node.op_type} of a rank-{x.rank} tensor: ONNX defines rank 4")
    b = int(node.attrs.get("blocksize", 0))
    if b < 1:
        raise imp.error(f"{node.op_type} blocksize {b}: must be at least 1")
    return x, b


def _shuffle(
    imp: Importer,
    node: Node,
    x: TensorVal,
    split: Sequence[int],
    perm: Sequence[int],
    out: Sequence[int],
) -> None:
    moved = emit.transpose(emit.reshape(imp.logical(x), split), perm)
    imp.define(node.outputs[0], emit.reshape(moved, out))
