"""`nem-raise-memref-dmas` (D-LOW-DMA): upstream's two spellings of a DMA,
one form before the conversion, which then has one handler for each of
`dma_start` and `dma_wait` (issue 36 item 1: a handler of the conversion's
table as a rewrite pattern in a pass of its own).

`memref.dma_start %src[%i, ...], %dst[%k, ...], %n, %tag[%t] (, %stride, %per)?`
and `affine.dma_start %src[%i, ...], %dst[%k, ...], %tag[%t], %n (, ...)?`
say the same thing once every index is an operand of an identity map: the
affine op's maps applied to its operands are the memref op's indices.  The
conversion evaluated a memref DMA's indices one by one (`context.index`) and
an affine one's through its maps (`context.affine`, which evaluates the same
operands and applies the map), so the identity map gives the same regions,
tag slots and diagnostics.  The new op carries the name the user wrote
(`nem_lowering.replaces`, read by `written_name`) so that messages still
name `memref.dma_start`.

The pass runs after `nem-reroll-pipelines`, whose recognition of
`-affine-pipeline-data-transfer`'s output reads affine DMAs only (a memref
DMA loop is not one of its pipelines, as before), and before
`nem-outline-kernels`, so every analysis from there on (`is_structural`,
`only_dma_tags`, the conversion) sees one form.  No outlined kernel exists
yet; none would hold a DMA (a loop holding one is structural: lowered op by
op, never a kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import AffineMapAttr, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from nem.dialect.view_op import REPLACES
from nem.frontends.upstream_dialects.dma import (
    AffineDmaStartOp,
    AffineDmaWaitOp,
    MemRefDmaStartOp,
    MemRefDmaWaitOp,
)
from nem.passes.lowering.prepare import entry_function, rewrite_once


def _identity(memref: SSAValue) -> AffineMapAttr:
    """The identity map over `memref`'s indices (one dim each)."""
    t = memref.type
    assert isinstance(t, MemRefType)  # the memref op's verifier checked it
    return AffineMapAttr(AffineMap.identity(len(t.get_shape())))


def _replace(rewriter: PatternRewriter, op: Operation, new: Operation) -> None:
    new.attributes.update(op.attributes)
    new.attributes[REPLACES] = StringAttr(op.name)
    new.location = op.location
    rewriter.replace_op(op, new)


class DmaStartToAffine(RewritePattern):
    """`memref.dma_start` -> `affine.dma_start` with identity maps."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MemRefDmaStartOp, rewriter: PatternRewriter) -> None:
        stride = op.stride_info or ()
        new = AffineDmaStartOp.create(
            operands=[
                op.src,
                *op.src_indices,
                op.dst,
                *op.dst_indices,
                op.tag,
                *op.tag_indices,
                op.num_elements,
                *stride,
            ],
            attributes={
                "src_map": _identity(op.src),
                "dst_map": _identity(op.dst),
                "tag_map": _identity(op.tag),
            },
        )
        _replace(rewriter, op, new)


class DmaWaitToAffine(RewritePattern):
    """`memref.dma_wait` -> `affine.dma_wait` with an identity map."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MemRefDmaWaitOp, rewriter: PatternRewriter) -> None:
        new = AffineDmaWaitOp.create(
            operands=[op.tag, *op.tag_indices, op.num_elements],
            attributes={"tag_map": _identity(op.tag)},
        )
        _replace(rewriter, op, new)


@dataclass(frozen=True)
class RaiseMemrefDmasPass(ModulePass):
    """Rewrite the entry function's `memref.dma_start`/`dma_wait` as
    `affine.dma_start`/`dma_wait` with identity maps (D-LOW-DMA).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-raise-memref-dmas"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_once(entry_function(op, self.entry).body, DmaStartToAffine(), DmaWaitToAffine())
