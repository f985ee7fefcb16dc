"""`linalg.softmax` in nem-compile (D-COMPILE-SOFTMAX).

NEM has a `softmax` opcode; every conformant device runs it on f16 (a MUST
variant) and none of the shipped ones on f32.  Where the target has the
variant for the element type, a softmax is one NEM task per chunk of rows
instead of four nests (row max, exp, row sum, division), each a
load-compute-store step on the critical path:

* the ONNX importer emits `linalg.softmax` for those element types
  (`softmax_types`), a scaled input (`Softmax(Mul(s, c))`) as its own
  `Mul` first, as onnxruntime computes it; for other types it keeps its
  own decomposition;
* a `.mlir` input's `linalg.softmax` of a type the target cannot run is
  decomposed by upstream (`transform.structured.decompose_interface`) on
  tensors, before bufferization (`decompose_unsupported`; upstream
  asserts on the memref form);
* after tiling, `stage` splits each remaining `linalg.softmax` on DDR into
  row chunks along its first other axis, chunk k staged in engine
  `k mod engines`'s L1 (`linalg.copy` in, `linalg.softmax` on the L1
  buffers, `linalg.copy` out), chunks small enough that input and output
  fit the tile budget (`tiling.l1_budget`); the lowering raises the copies
  to transfers and the op to `softmax` (D-LOW-SOFTMAX).  A softmax whose
  single row does not fit, or that would need more than MAX_CHUNKS chunks,
  stays one task on its DDR operands.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import linalg, memref

from nem.compile.target import FAST_SPACE, VariantTarget, softmax_types

if TYPE_CHECKING:
    from nem.compile.options import CompileOptions
    from nem.dialect.device_model import Device

MAX_CHUNKS = 64
"""Chunks are unrolled straight-line tasks: beyond this many, the softmax
stays one task on DDR."""


def _elem(t: ir.Type) -> str:
    return str(ir.ShapedType(t).element_type)


def _softmaxes(root: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.softmax":
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


DECOMPOSE = "nem_decompose"


def decompose_unsupported(module: ir.Module, device: VariantTarget) -> int:
    """Decompose (on tensors) each `linalg.softmax` whose element type has no
    softmax variant on `device`; returns how many."""
    from nem.compile.transform_scripts import apply_transform

    ok = softmax_types(device)
    todo = [op for op in _softmaxes(module.operation) if _elem(op.operands[0].type) not in ok]
    for op in todo:
        op.attributes[DECOMPOSE] = ir.UnitAttr.get()
    if todo:
        apply_transform(
            module,
            f"""module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: !transform.any_op {{transform.readonly}}) {{
    %m = transform.structured.match ops{{["linalg.softmax"]}} attributes {{{DECOMPOSE}}} in %root
      : (!transform.any_op) -> !transform.any_op
    %d = transform.structured.decompose_interface %m : (!transform.any_op) -> !transform.any_op
    transform.yield
  }}
}}""",
        )
    return len(todo)


def _chunks(
    shape: list[int], dim: int, elem_bytes: int, engines: int, budget: int
) -> tuple[int, int] | None:
    """(axis, rows per chunk) for a softmax over `dim` of `shape`; None when
    it stays whole on DDR (module docstring)."""
    axis = next((a for a in range(len(shape)) if a != dim and shape[a] > 1), None)
    total = 2 * math.prod(shape) * elem_bytes  # input and output tiles
    if axis is None:
        return (0, shape[0]) if total <= budget else None
    per_row = total // shape[axis]
    rows = -(-shape[axis] // min(engines, shape[axis]))
    while rows * per_row > budget and rows > 1:
        rows = -(-rows // 2)
    if rows * per_row > budget or -(-shape[axis] // rows) > MAX_CHUNKS:
        return None
    return axis, rows


def stage(fn: ir.Operation, device: Device, options: CompileOptions, engines: int) -> int:
    """Stage each top-level `linalg.softmax` on non-L1 memrefs in row chunks
    in the engines' L1 (module docstring); returns how many were staged."""
    from nem.compile.tiling import l1_budget

    budget = l1_budget(device, options.pipeline)
    staged = 0
    for op in _softmaxes(fn):
        if op.parent is None or op.parent.name != "func.func":
            continue
        x, y = op.operands[0], op.operands[1]
        t = ir.MemRefType(x.type)
        if not t.has_static_shape or (
            t.memory_space is not None and ir.IntegerAttr(t.memory_space).value >= FAST_SPACE
        ):
            continue
        dim = ir.IntegerAttr(op.attributes["dimension"]).value
        shape = list(t.shape)
        plan = _chunks(shape, dim, t.element_type.width // 8, engines, budget)
        if plan is None:
            continue
        axis, rows = plan
        with op.location:
            for k, lo in enumerate(range(0, shape[axis], rows)):
                sizes = list(shape)
                sizes[axis] = min(rows, shape[axis] - lo)
                offsets = [lo if a == axis else 0 for a in range(len(shape))]
                _stage_chunk(op, x, y, offsets, sizes, FAST_SPACE + k % engines)
        op.erase()
        staged += 1
    return staged


def _stage_chunk(
    op: ir.Operation, x: ir.Value, y: ir.Value, offsets: list[int], sizes: list[int], space: int
) -> None:
    """One chunk, built before `op`: copy in, softmax in L1, copy out."""
    ip = ir.InsertionPoint(op)
    whole = sizes == list(ir.MemRefType(x.type).shape)
    elem = ir.MemRefType(x.type).element_type
    fast = ir.MemRefType.get(
        sizes, elem, memory_space=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), space)
    )
    ones = [1] * len(sizes)
    src = x if whole else memref.subview(x, offsets, sizes, ones, ip=ip)
    dst = y if whole else memref.subview(y, offsets, sizes, ones, ip=ip)
    with ip:
        lx = memref.AllocOp(fast, [], []).result
        ly = memref.AllocOp(fast, [], []).result
        _copy(src, lx)
        chunk = op.clone(ip)
        chunk = chunk.operation if isinstance(chunk, ir.OpView) else chunk
        chunk.operands[0] = lx
        chunk.operands[1] = ly
        _copy(ly, dst)
        memref.DeallocOp(lx)
        memref.DeallocOp(ly)


def _copy(src: ir.Value, dst: ir.Value) -> None:
    """`linalg.copy ins(src) outs(dst)` without the opdsl builder's default
    `cast` attribute (xDSL 0.74 does not parse `#linalg.type_fn`)."""
    made = linalg.copy(src, outs=[dst]).owner
    del made.attributes["cast"]
