"""Making any stage's MLIR runnable by the reference path (`nem.compile.reference`).

The import and bufferize stages are plain linalg, which upstream lowers to
LLVM.  The tile stage holds what the CPU has no lowering for:

* memory spaces (`memref<8x8xf32, 2>`: engine k's L1 is space 2 + k): the
  program's meaning does not depend on them, so they are dropped from the
  text;
* DMAs (`affine.dma_start` / `affine.dma_wait`, from
  `affine-data-copy-generate` and `affine-pipeline-data-transfer`): each
  start becomes a call to a copy function with upstream's semantics (the
  `memref.dma_start` documentation): `num_elements` consecutive elements
  from the source indices to the destination indices, or, with the stride
  operands, chunks of `num_elt_per_stride` elements every `stride` elements
  on the slower side (the lower memory space) and consecutive on the other;
  a wait does nothing (the copy is done when the start returns, which is one
  of the orders the program allows);
* `linalg.softmax` (kept for the NEM `softmax` opcode, D-COMPILE-SOFTMAX):
  on tensors (the import stage) upstream decomposes it
  (`softmax.decompose_unsupported`); on memrefs, which upstream does not
  decompose, each becomes a call to a loop nest computing it in f32 (max,
  exp, sum, divide), rounded once to the element type, as NEM's softmax is
  defined.

So a wrong DMA (a missing stride, a wrong offset) makes the tile stage's
result wrong: the bisector (`nem.compile.bisect`) blames the step that wrote
it.  A DMA on a non-identity layout is not modeled: `NotRunnable`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import func
from mlir.passmanager import PassManager

if TYPE_CHECKING:
    from nem.dialect.family_model import VariantRef


class NotRunnable(Exception):
    """The text holds something the reference path does not model."""


def strip_memory_spaces(text: str) -> str:
    """`memref<..., 2>` -> `memref<...>` (an integer memory space only)."""
    out, i = [], 0
    while True:
        j = text.find("memref<", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        k, depth = j + len("memref<"), 1
        while depth:  # the matching '>' ('->' is not one)
            c = text[k]
            if c == "<":
                depth += 1
            elif c == ">" and text[k - 1] != "-":
                depth -= 1
            k += 1
        body = text[j + len("memref<") : k - 1]
        body = re.sub(r",\s*\d+(\s*:\s*i64)?\s*$", "", body)
        out.append(text[i:j] + "memref<" + body + ">")
        i = k


def runnable(text: str) -> str:
    """`text` with its DMAs and memref softmaxes replaced and its memory
    spaces dropped (module docstring); raises NotRunnable."""
    if "dma_start" not in text and "linalg.softmax" not in text:
        return strip_memory_spaces(text)
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        if "linalg.softmax" in text and "memref<" not in text:
            # on tensors (the import stage): upstream decomposes them
            from nem.compile.softmax import decompose_unsupported

            decompose_unsupported(module, _NoSoftmax())
        if "dma_start" in text:
            PassManager.parse("builtin.module(lower-affine)").run(module.operation)
        found: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name in ("memref.dma_start", "memref.dma_wait") or (
                op.name == "linalg.softmax" and isinstance(op.operands[0].type, ir.MemRefType)
            ):
                found.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        helpers: dict[str, str] = {}
        for op in found:
            if op.name == "memref.dma_wait":
                op.erase()
                continue
            name, args, helper = (
                _dma(op, len(helpers))
                if op.name == "memref.dma_start"
                else _softmax(op, len(helpers))
            )
            name = next((n for n, h in helpers.items() if h == helper.replace("@HELPER", n)), name)
            helpers.setdefault(name, helper.replace("@HELPER", name))
            with ir.InsertionPoint(op):
                func.CallOp([], ir.FlatSymbolRefAttr.get(name.lstrip("@")), args)
            op.erase()
        first = next(iter(module.body.operations)).operation
        for helper in helpers.values():
            for fn in ir.Module.parse(helper).body.operations:
                fn.operation.move_before(first)
        return strip_memory_spaces(str(module))


class _NoSoftmax:
    """A target without a softmax variant: `decompose_unsupported` then
    decomposes every `linalg.softmax` on tensors."""

    def effective_for_family(self, family_ids: str | Iterable[str]) -> Set[VariantRef]:
        return frozenset()


def _memref(t: ir.Type) -> ir.MemRefType:
    mt = ir.MemRefType(t)
    layout = mt.layout
    if not (
        isinstance(layout, ir.AffineMapAttr) and layout.value == ir.AffineMap.get_identity(mt.rank)
    ):
        raise NotRunnable(f"a DMA or softmax on {t} (not an identity layout) is not modeled")
    return mt


def _space(mt: ir.MemRefType) -> int:
    s = mt.memory_space
    return ir.IntegerAttr(s).value if s is not None else 0


def _flat(name: str, mt: ir.MemRefType, out: list[str]) -> str:
    """A 1-D view of an identity-layout memref (SSA name of it, lines to `out`)."""
    if mt.rank == 1:
        return name
    n = 1
    for d in mt.shape:
        n *= d
    flat = ir.MemRefType.get([n], mt.element_type, memory_space=mt.memory_space)
    if mt.rank == 0:
        out.append(f"{name}_f = memref.expand_shape {name} [] output_shape [1] : {mt} into {flat}")
    else:
        groups = "[[" + ", ".join(str(i) for i in range(mt.rank)) + "]]"
        out.append(f"{name}_f = memref.collapse_shape {name} {groups} : {mt} into {flat}")
    return f"{name}_f"


def _linear(mt: ir.MemRefType) -> str:
    """An affine map from indices to the element's offset in the flat view."""
    strides, acc = [], 1
    for d in reversed(mt.shape):
        strides.append(acc)
        acc *= d
    strides.reverse()
    dims = ", ".join(f"d{i}" for i in range(mt.rank))
    expr = " + ".join(f"d{i} * {s}" for i, s in enumerate(strides)) or "0"
    return f"affine_map<({dims}) -> ({expr})>"


def _dma(op: ir.Operation, k: int) -> tuple[str, list[ir.Value], str]:
    """A copy function for one `memref.dma_start` and its call's arguments."""
    ops = list(op.operands)
    src = _memref(ops[0].type)
    r1 = src.rank
    dst = _memref(ops[1 + r1].type)
    r2 = dst.rank
    n = ops[2 + r1 + r2]
    tag_rank = ir.MemRefType(ops[3 + r1 + r2].type).rank
    rest = ops[4 + r1 + r2 + tag_rank :]
    stride, per = (rest[0], rest[1]) if rest else (n, n)
    strided_src = _space(src) <= _space(dst)  # the slower side carries the stride
    args = [ops[0], *ops[1 : 1 + r1], ops[1 + r1], *ops[2 + r1 : 2 + r1 + r2], n, stride, per]
    sidx = ", ".join(f"%s{i}: index" for i in range(r1))
    didx = ", ".join(f"%d{i}: index" for i in range(r2))
    body: list[str] = []
    fs, fd = _flat("%src", src, body), _flat("%dst", dst, body)
    svals = ", ".join(f"%s{i}" for i in range(r1))
    dvals = ", ".join(f"%d{i}" for i in range(r2))
    s_elems = ir.MemRefType.get([_size(src)], src.element_type, memory_space=src.memory_space)
    d_elems = ir.MemRefType.get([_size(dst)], dst.element_type, memory_space=dst.memory_space)
    helper = f"""func.func private @HELPER(%src: {src}, {sidx}{", " if r1 else ""}%dst: {dst}, \
{didx}{", " if r2 else ""}%n: index, %stride: index, %per: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  {chr(10).join("  " + b for b in body).strip()}
  %si = affine.apply {_linear(src)}({svals})
  %di = affine.apply {_linear(dst)}({dvals})
  scf.for %k = %c0 to %n step %c1 {{
    %q = arith.divui %k, %per : index
    %r = arith.remui %k, %per : index
    %qs = arith.muli %q, %stride : index
    %sk = arith.addi %qs, %r : index
    %so = arith.addi %si, {"%sk" if strided_src else "%k"} : index
    %do = arith.addi %di, {"%k" if strided_src else "%sk"} : index
    %v = memref.load {fs}[%so] : {s_elems}
    memref.store %v, {fd}[%do] : {d_elems}
  }}
  return
}}"""
    return f"@__nem_dma_{k}", args, helper


def _size(mt: ir.MemRefType) -> int:
    n = 1
    for d in mt.shape:
        n *= d
    return n


def _softmax(op: ir.Operation, k: int) -> tuple[str, list[ir.Value], str]:
    """A loop nest computing `linalg.softmax` on memrefs in f32, rounded once."""
    x, y = op.operands[0], op.operands[1]
    mt = _memref(x.type)
    _memref(y.type)
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    elem = str(mt.element_type)
    shape = list(mt.shape)
    outer = [i for i in range(mt.rank) if i != dim]
    lines = [
        "%c0 = arith.constant 0 : index",
        "%c1 = arith.constant 1 : index",
        "%ninf = arith.constant 0xFF800000 : f32",
        "%zero = arith.constant 0.0 : f32",
    ]
    lines += [f"%n{i} = arith.constant {shape[i]} : index" for i in range(mt.rank)]
    opens = [f"scf.for %i{i} = %c0 to %n{i} step %c1 {{" for i in outer]
    idx = ", ".join(f"%i{i}" if i != dim else "%j" for i in range(mt.rank))

    def load(into: str) -> list[str]:
        if elem == "f32":
            return [f"{into} = memref.load %x[{idx}] : {mt}"]
        return [
            f"{into}_n = memref.load %x[{idx}] : {mt}",
            f"{into} = arith.extf {into}_n : {elem} to f32",
        ]

    body = [
        f"%m = scf.for %j = %c0 to %n{dim} step %c1 iter_args(%a = %ninf) -> (f32) {{",
        *load("%v"),
        "%b = arith.maximumf %a, %v : f32",
        "scf.yield %b : f32",
        "}",
        f"%s = scf.for %j = %c0 to %n{dim} step %c1 iter_args(%a = %zero) -> (f32) {{",
        *load("%v"),
        "%d = arith.subf %v, %m : f32",
        "%e = math.exp %d : f32",
        "%b = arith.addf %a, %e : f32",
        "scf.yield %b : f32",
        "}",
        f"scf.for %j = %c0 to %n{dim} step %c1 {{",
        *load("%v"),
        "%d = arith.subf %v, %m : f32",
        "%e = math.exp %d : f32",
        "%q = arith.divf %e, %s : f32",
        *(
            [f"memref.store %q, %y[{idx}] : {ir.MemRefType(y.type)}"]
            if elem == "f32"
            else [
                "%t = arith.truncf %q : f32 to " + elem,
                f"memref.store %t, %y[{idx}] : {ir.MemRefType(y.type)}",
            ]
        ),
        "}",
    ]
    text = "\n  ".join(lines + opens + body + ["}"] * len(opens))
    helper = f"""func.func private @HELPER(%x: {mt}, %y: {y.type}) {{
  {text}
  return
}}"""
    return f"@__nem_softmax_{k}", [x, y], helper
