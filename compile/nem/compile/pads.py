"""Padded tensors written in place (D-COMPILE-PAD-IN-PLACE), before bufferization.

Upstream one-shot bufferization makes `tensor.pad %x` a new buffer filled
whole with the padding value, then a copy of `%x` into its interior: for
the max pooling after ResNet-50's stem, a 3.3 MB fill and a 3.2 MB copy
from DDR to DDR, in a `.sync` statement the program waits on, which alone
makes the layer's bound (50,176 cycles on npm_pro_x1's 4 sDMAs).

Here each `tensor.pad` of a constant becomes a `tensor.empty` of the padded
shape, the source inserted into its interior (`tensor.insert_slice`), and
the border filled strip by strip (a `linalg.fill` of each strip, extracted
and inserted back).  The `tensor.empty` that the chain of ops computing `%x`
starts from (`producer_root`) becomes a `tensor.extract_slice` of the
padded tensor's interior, so the op that computes `%x` writes the padded
buffer directly when One-Shot Analysis finds that safe (the insert_slice
then bufferizes to a copy of a view onto itself, erased by
`drop_self_copies`); otherwise the insert is the copy it was.  Valid
whatever the analysis decides: a `tensor.empty` has no defined content, so
any tensor of its type may replace it.  Only the pads' producers are
rewritten: upstream `eliminate-empty-tensors` over the function would make
every `tensor.insert_slice` of a producer (a concatenation's inputs) write
in place too, which was never decided and cost compile time.  The border strips
partition the padding: along axis `d`, the low and high strips span the
interior along the axes before `d` and the whole padded extent along the
axes after it, so no element is filled twice and the fills move only the
padding's bytes.

Every such pad is rewritten, whatever its source's size: a floor of 512 KiB
(session 20, against the compile time of an earlier form of the rewrite)
left the copies that bound ResNet-50's and DenseNet-121's 28x28 3x3
convolutions; without it DenseNet-121 runs 8.6% fewer cycles for about 6%
more compile CPU (session 22, D-COMPILE-PAD-IN-PLACE).

The `tensor.empty` is placed at the start of the function's block, so the
padded tensor dominates the producer chain that is made to write into it;
DDR buffers are not reused by lifetime, so where their allocation stands
does not change the program's memory.
"""

from __future__ import annotations

from typing import Any

from nem.compile.linalg_ir import MEMREF_RESHAPES
from nem.dialect.shape_rules import window_reach


def entry_blocks(module: Any) -> list[Any]:
    """The entry block of each `func.func` of `module` with a body."""
    blocks = []
    for op in module.body.operations:
        fn = op.operation
        if fn.name == "func.func" and fn.regions[0].blocks:
            blocks.append(fn.regions[0].blocks[0])
    return blocks


def write_in_place(module: Any) -> int:
    """Rewrite each `tensor.pad` of a constant with static pads in the
    entry block of a `func.func` of `module` (an `mlir.ir.Module`), in
    place, as the module docstring says.  Returns how many were rewritten."""
    from mlir import ir

    done = 0
    with module.context:
        for block in entry_blocks(module):
            pads = [o for o in block.operations if o.operation.name == "tensor.pad"]
            for pad in pads:
                done += _rewrite(pad.operation, block, ir)
    return done


def drop_self_copies(module: Any) -> int:
    """Erase each `memref.copy` of a view onto itself from the entry blocks
    of `module`'s functions: what an insert made in place bufferizes to.
    Returns how many."""
    gone = 0
    for block in entry_blocks(module):
        for o in list(block.operations):
            if o.operation.name == "memref.copy" and _unshaped(o.operands[0]) == o.operands[1]:
                o.operation.erase()
                gone += 1
            elif o.operation.name == "memref.subview" and len(o.operands) == 1:
                # right after its buffer: before every op that may write it in
                # place (a fused epilogue goes where its convolution is)
                root = o.operands[0].owner
                root = getattr(root, "operation", root)
                if getattr(root, "name", None) == "memref.alloc":
                    o.operation.move_after(root)
    return gone


def _unshaped(v: Any) -> Any:
    """`v` without the `memref.collapse_shape`s and `expand_shape`s it is
    made by: a copy from a reshaping of its own target, the shapes equal,
    copies each element onto itself (a source followed through reshapes,
    `RESHAPES`, whose reshapes bufferize to a collapse and an expand of the
    padded interior: an outside user's Conv -> Reshape 1x8x6x7 -> 1x8x1x42
    -> padded Conv failed nem-verify with that copy, HAZ-02, session 60)."""
    while True:
        owner = getattr(v, "owner", None)
        op = getattr(owner, "operation", owner)
        if op is None or getattr(op, "name", None) not in MEMREF_RESHAPES:
            return v
        v = op.operands[0]


def _padding_value(pad: Any, ir: Any) -> Any:
    """The attribute of the constant `pad` yields, or None."""
    (body,) = pad.regions[0].blocks
    yielded = list(body.operations)[-1].operands[0]
    owner = yielded.owner
    if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
        owner = owner.operation
    if not isinstance(owner, ir.Operation) or owner.name != "arith.constant":
        return None
    return owner.attributes["value"]


def static(attr: Any, ir: Any) -> list[int]:
    return list(ir.DenseI64ArrayAttr(attr))


def _rewrite(pad: Any, block: Any, ir: Any) -> int:
    from mlir.dialects import arith, tensor

    from nem.frontends.onnx import emit

    value = _padding_value(pad, ir)
    if value is None or len(pad.operands) != 1:  # dynamic pads: operands beyond the source
        return 0
    low = static(pad.attributes["static_low"], ir)
    source = pad.operands[0]
    src_shape = list(ir.RankedTensorType(source.type).shape)
    out_type = ir.RankedTensorType(pad.results[0].type)
    shape, elem = list(out_type.shape), out_type.element_type
    rank = len(shape)
    ones, parallel = [1] * rank, [emit.PARALLEL] * rank
    with pad.location:
        with ir.InsertionPoint.at_block_begin(block):
            padded = acc = tensor.EmptyOp(shape, elem).result
        with ir.InsertionPoint(pad):
            acc = tensor.insert_slice(source, acc, [], [], [], low, src_shape, ones)
            fill = arith.ConstantOp(elem, value).result
            for offsets, sizes in strips(low, src_shape, _reach(pad.results[0], shape, ir)):
                strip_type = ir.RankedTensorType.get(sizes, elem)
                strip = tensor.extract_slice(strip_type, acc, [], [], [], offsets, sizes, ones)
                filled = emit.generic([], strip, emit.identity(rank), parallel, lambda: fill)
                acc = tensor.insert_slice(filled, acc, [], [], [], offsets, sizes, ones)
    pad.results[0].replace_all_uses_with(acc)
    _read_interior(source, acc, pad, low, src_shape, ir)
    pad.erase()
    _write_source_in_place(source, padded, low, src_shape, ir)
    return 1


def _read_interior(
    source: Any, acc: Any, pad: Any, low: list[int], sizes: list[int], ir: Any
) -> None:
    """Make the ops after `pad` that read `source` read the padded tensor's
    interior (`acc` at `low`) instead: the same values.  `source` then has
    one reader, the padded tensor, which it is computed into in place; read
    by another op too (a residual block's skip, its Add; an input read by a
    padded 3x3 and an unpadded 1x1 convolution), One-Shot Analysis gave it a
    buffer of its own and copied it into the padded one (session 54)."""
    from mlir.dialects import tensor

    block = pad.block
    owners = (u.owner.operation if hasattr(u.owner, "operation") else u.owner for u in source.uses)
    later = list(dict.fromkeys(o for o in owners if o.block == block and pad.is_before_in_block(o)))
    if not later:
        return
    first = later[0]
    for op in later[1:]:
        if op.is_before_in_block(first):
            first = op
    with ir.InsertionPoint(first), pad.location:  # (after `acc`: the pad's chain is before it)
        view = tensor.extract_slice(source.type, acc, [], [], [], low, sizes, [1] * len(sizes))
    for op in later:
        for i, v in enumerate(op.operands):
            if v == source:
                op.operands[i] = view


def producer_root(value: Any, ir: Any) -> tuple[Any, int] | None:
    """The use of a `tensor.empty` that `value` is computed into: followed
    back through the destination of each linalg op (a result's tied init)
    and `tensor.insert_slice` (a concatenation) until a `tensor.empty`.
    Returns (user, operand number) of that use, or None where the chain
    stops at anything else (a function argument, a reshape)."""
    while not isinstance(value.owner, ir.Block):
        result = ir.OpResult(value)
        op = result.owner.operation if hasattr(result.owner, "operation") else result.owner
        if op.name == "tensor.insert_slice":
            number = 1
        elif op.name.startswith("linalg."):  # on tensors: one init per result, last
            number = len(op.operands) - len(op.results) + result.result_number
        else:
            return None
        init = op.operands[number]
        owner = init.owner
        if getattr(owner, "name", None) == "tensor.empty" and init.type == value.type:
            return op, number
        value = init
    return None


def _write_source_in_place(
    source: Any, padded: Any, low: list[int], sizes: list[int], ir: Any
) -> None:
    """Make the chain of ops computing `source` start from the interior of
    `padded` (an extract_slice at `low` of `sizes`, placed where the
    `tensor.empty` it replaces was) instead of its `tensor.empty`."""
    from mlir.dialects import tensor

    reshapes = []  # from the source back to the value its producer computes
    value = source
    while not isinstance(value.owner, ir.Block) and value.owner.name in RESHAPES:
        reshapes.append(value.owner)
        value = value.owner.operands[0]
    root = producer_root(value, ir)
    if root is None:
        return
    user, number = root
    empty = user.operands[number].owner
    ones = [1] * len(sizes)
    with ir.InsertionPoint(empty), empty.location:
        view = tensor.extract_slice(source.type, padded, [], [], [], low, sizes, ones)
        for op in reshapes:  # each undone: the producer computes the interior's bytes
            before = ir.RankedTensorType(op.operands[0].type)
            groups = [[ir.IntegerAttr(i).value for i in g] for g in op.attributes["reassociation"]]
            if op.name == "tensor.collapse_shape":
                view = tensor.expand_shape(before, view, groups, [], list(before.shape))
            else:
                view = tensor.collapse_shape(before, view, groups)
    # every use: a concatenation's inputs computed into its slices read them
    # through extract_slices of the same tensor.empty (`concats`)
    empty.results[0].replace_all_uses_with(view)
    empty.erase()


RESHAPES = ("tensor.collapse_shape", "tensor.expand_shape")
"""Views of the same bytes between a padded source and its producer
(`_write_source_in_place` follows them): ShuffleNet's channel shuffle, a
transpose of the channels split in two dimensions, merged back before its
padded depthwise convolution (D-COMPILE-LAYOUT, session 60)."""


def strips(low: list[int], inner: list[int], reach: list[int]) -> list[tuple[list[int], list[int]]]:
    """The (offsets, sizes) of the border strips of a tensor padded by `low`
    before an interior of `inner` elements per axis, read up to `reach`:
    along axis d, the low strip and the high one, spanning the interior
    along the axes before d and everything read along those after it (so
    they partition the read border), each cut at `reach`."""
    out = []
    rank = len(low)
    for d in range(rank):
        for start, end in ((0, low[d]), (low[d] + inner[d], reach[d])):
            lo = [low[e] if e < d else 0 for e in range(rank)]
            hi = [min(low[e] + inner[e], reach[e]) if e < d else reach[e] for e in range(rank)]
            lo[d], hi[d] = start, min(end, reach[d])
            sizes = [b - a for a, b in zip(lo, hi)]
            if min(sizes) > 0:
                out.append((lo, sizes))
    return out


WINDOWED = frozenset(
    ("linalg.conv_2d_nhwc_hwcf", "linalg.pooling_nhwc_max", "linalg.pooling_nhwc_sum")
)
"""Ops reading an NHWC input (operand 0) through windows whose rows and
columns are the first two dimensions of their kernel operand (operand 1)."""


def _reach(padded: Any, shape: list[int], ir: Any) -> list[int]:
    """Per dimension, one past the last index of `padded` that its users
    read: a windowed op (`WINDOWED`) reads rows and columns up to its
    `window_reach`; any other use reads all."""
    reach = [0] * len(shape)
    for use in padded.uses:
        user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if user.name not in WINDOWED or use.operand_number != 0 or len(shape) != 4:
            return list(shape)
        kernel = ir.ShapedType(user.operands[1].type).shape
        out = ir.ShapedType(user.results[0].type).shape
        strides = [int(v) for v in ir.DenseIntElementsAttr(user.attributes["strides"])]
        dil = [int(v) for v in ir.DenseIntElementsAttr(user.attributes["dilations"])]
        seen = list(shape)
        for j in range(2):
            seen[1 + j] = window_reach(out[1 + j], strides[j], kernel[j], dil[j])
        reach = [max(a, b) for a, b in zip(reach, seen)]
    return [min(a, b) for a, b in zip(reach, shape)]
