"""Transposed graph inputs read through a strided view (D-COMPILE-LAYOUT, session 26).

The importer turns an NCHW graph input into the program's NHWC by a
`linalg.transpose` into a new tensor.  Bufferized, that is a DDR buffer
the transpose fills and its consumers read:

    %t = memref.alloc() : memref<1x56x56x32xf32>
    linalg.transpose ins(%x : memref<1x32x56x56xf32>) outs(%t) permutation = [0, 2, 3, 1]
    linalg.conv_2d_nhwc_hwcf ins(%t, %w ..) outs(..)

Tiled, the transpose stages `%x` in L1, transposes it there and writes it
back to DDR, and each consumer stages it again: four passes over the
tensor (MobileNetV2's first block, 1x32x56x56 f32: 4 x 401,408 bytes,
56% of its expand layer's DMA bytes).  Here the consumers read `%x`
through a view with the permuted strides instead,

    %v = memref.reinterpret_cast %x to offset: [0], sizes: [1, 56, 56, 32],
           strides: [100352, 56, 1, 3136] : ... to memref<1x56x56x32xf32, strided<..>>

so each consumer's staging copy transposes on its way from DDR to L1 (a
transfer with strides, D-SEM-TRANSFER): one pass.  D-RT-COST charges a
transfer the bytes it moves, not their order, so the strided read costs
what the contiguous one did and the other three passes are gone.

Only where that is the same program: the source is a function argument
that every use only reads (a graph input), the destination a
`memref.alloc` of the entry block with the identity layout that only the
transpose writes and only linalg ops of the entry block read (as inputs),
so every read sees the values the transpose would have written.  A
transpose into another buffer (the interior of a padded one, a stem's:
D-COMPILE-PAD-IN-PLACE) is left as it is.  And only for f32 inputs: the
view changes the consumers' tiles, and an f16 1x1 conv over 2,048
channels read through it was cut along its channels, its partial sums
rounded to f16 between the cuts (D-COMPILE-F16), 1.24 tolerances from
onnxruntime where the NHWC copy's one tile matched (`test_bisect.py`'s
f16 reduction, session 26); f32 partial sums kept in f32 are the same
sums.
"""

from __future__ import annotations

from typing import Any


def _reads_only(value: Any, skip: Any = None) -> bool:
    """Every use of `value` but `skip` and deallocations is an input
    operand of a linalg op (destination style: inputs first).  Of the
    transpose's buffer, those reads come after the transpose: before it the
    buffer holds nothing a valid program reads."""
    from mlir import ir

    for use in value.uses:
        owner = use.owner
        if skip is not None and owner == skip:
            continue
        if owner.name == "memref.dealloc":
            continue
        if _inputs(owner, ir) <= use.operand_number:
            return False
    return True


def _inputs(op: Any, ir: Any) -> int:
    """How many input operands linalg op `op` has (0: not a linalg op)."""
    if op.name in ONE_INPUT:
        return 1
    if not op.name.startswith("linalg.") or "operandSegmentSizes" not in op.attributes:
        return 0
    return int(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0])


ONE_INPUT = ("linalg.transpose", "linalg.broadcast")
"""Linalg ops of one input and one init, without `operandSegmentSizes`."""


def read_through_views(module: Any) -> int:
    """Replace each transpose of a read-only function argument into a
    buffer of its own, in the entry blocks of `module`'s functions (an
    `mlir.ir.Module`, bufferized), by a strided view of the argument, as
    the module docstring says.  Returns how many were replaced."""
    from mlir import ir

    from nem.compile.pads import entry_blocks

    done = 0
    with module.context, ir.Location.unknown():  # types built here
        for block in entry_blocks(module):
            for op in list(block.operations):
                if op.operation.name == "linalg.transpose":
                    done += _replace(op.operation, block, ir)
    return done


def _replace(t: Any, block: Any, ir: Any) -> int:
    """Replace transpose `t` of `block` if the module docstring's conditions
    hold (1: replaced, 0: left)."""
    src, dst = t.operands[0], t.operands[1]
    if not isinstance(src, ir.BlockArgument) or src.owner != block:
        return 0
    if not isinstance(dst, ir.OpResult):
        return 0
    alloc = getattr(dst.owner, "operation", dst.owner)
    if alloc.name != "memref.alloc" or list(alloc.operands) or alloc.parent != t.parent:
        return 0
    st, dt = ir.MemRefType(src.type), ir.MemRefType(dst.type)
    identity = all(
        isinstance(x.layout, ir.AffineMapAttr)
        and ir.AffineMapAttr(x.layout).value == ir.AffineMap.get_identity(x.rank)
        for x in (st, dt)
    )
    if not identity or st.memory_space != dt.memory_space:
        return 0
    if not isinstance(st.element_type, ir.F32Type):
        return 0  # f16: a consumer tiled otherwise may round partial sums (docstring)
    if not _reads_only(src) or not _reads_only(dst, skip=t):
        return 0
    perm = list(ir.DenseI64ArrayAttr(t.attributes["permutation"]))
    strides, acc = [0] * st.rank, 1
    for d in reversed(range(st.rank)):
        strides[d] = acc
        acc *= st.shape[d]
    view_strides = [strides[p] for p in perm]
    layout = ir.StridedLayoutAttr.get(0, view_strides)
    vt = ir.MemRefType.get(dt.shape, dt.element_type, layout, st.memory_space)
    with ir.InsertionPoint(t), t.location:
        view = ir.Operation.create(
            "memref.reinterpret_cast",
            results=[vt],
            operands=[src],
            attributes={
                "static_offsets": ir.DenseI64ArrayAttr.get([0]),
                "static_sizes": ir.DenseI64ArrayAttr.get(list(dt.shape)),
                "static_strides": ir.DenseI64ArrayAttr.get(view_strides),
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 0, 0, 0]),
            },
        )
    for use in list(dst.uses):
        if use.owner != t and use.owner.name != "memref.dealloc":
            use.owner.operands[use.operand_number] = view.result
    t.erase()
    for use in list(dst.uses):
        use.owner.erase()
    alloc.erase()
    return 1
