"""`affine.dma_start`/`affine.dma_wait` and `memref.dma_start`/`memref.dma_wait`
with upstream MLIR's exact custom syntax and generic form (xDSL 0.74 has no
affine DMA ops, and its memref DMA ops differ from upstream: segment sizes,
no stride operands, no custom syntax).

    affine.dma_start %src[%i, %j], %dst[%k, %l], %tag[%t], %n (, %stride, %per)?
        : memref<..>, memref<..>, memref<..>
    affine.dma_wait %tag[%t], %n : memref<..>
    memref.dma_start %src[%i, %j], %dst[%k, %l], %n, %tag[%t] (, %stride, %per)?
        : memref<..>, memref<..>, memref<..>
    memref.dma_wait %tag[%t], %n : memref<..>

Upstream stores every operand in one list; the affine ops also carry
`src_map`/`dst_map`/`tag_map` attributes whose input counts split that list.
The accessors below (`src`, `src_operands`, ...) decode it.

The custom form's `[...]` affine accesses are read and printed as upstream
does (`%i` a dim, `symbol(%n)` a symbol: `affine_ssa_maps`, D-XDSL-AFFINE-SSA).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from xdsl.dialects.builtin import AffineMapAttr, IndexType, MemRefType
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, attr_def, irdl_op_definition, var_operand_def
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nem.frontends.upstream_dialects.affine_ssa_maps import (
    parse_unresolved_access,
    print_affine_map_of_ssa_ids,
)


def _parse_plain_access(parser: Parser) -> tuple[UnresolvedOperand, list[SSAValue]]:
    memref = parser.parse_unresolved_operand()
    indices = parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
    )
    return memref, list(indices)


def _trailing_counts(parser: Parser) -> list[SSAValue]:
    """`, %n (, %stride, %per)?` before the `:`."""
    vals: list[SSAValue] = []
    while parser.parse_optional_punctuation(",") is not None:
        vals.append(parser.parse_operand(IndexType()))
    return vals


class _DmaBase(IRDLOperation):
    operands_ = var_operand_def()


@irdl_op_definition
class AffineDmaStartOp(_DmaBase):
    name = "affine.dma_start"
    src_map = attr_def(AffineMapAttr)
    dst_map = attr_def(AffineMapAttr)
    tag_map = attr_def(AffineMapAttr)

    # --- accessors -------------------------------------------------------
    # Operand layout (upstream): src, src map operands, dst, dst map operands,
    # tag, tag map operands, element count, [stride, elements per stride].
    def _groups(self) -> tuple[int, int, int, int]:
        """Positions of src, dst, tag and the element count."""
        arity = [
            m.data.num_dims + m.data.num_symbols for m in (self.src_map, self.dst_map, self.tag_map)
        ]
        dst = 1 + arity[0]
        tag = dst + 1 + arity[1]
        return 0, dst, tag, tag + 1 + arity[2]

    def _after(self, pos: int, next_pos: int) -> tuple[SSAValue, ...]:
        return tuple(self.operands[pos + 1 : next_pos])

    @property
    def src(self) -> SSAValue:
        return self.operands[0]

    @property
    def src_operands(self) -> tuple[SSAValue, ...]:
        src, dst, _, _ = self._groups()
        return self._after(src, dst)

    @property
    def dst(self) -> SSAValue:
        return self.operands[self._groups()[1]]

    @property
    def dst_operands(self) -> tuple[SSAValue, ...]:
        _, dst, tag, _ = self._groups()
        return self._after(dst, tag)

    @property
    def tag(self) -> SSAValue:
        return self.operands[self._groups()[2]]

    @property
    def tag_operands(self) -> tuple[SSAValue, ...]:
        _, _, tag, count = self._groups()
        return self._after(tag, count)

    @property
    def _count_pos(self) -> int:
        return self._groups()[3]

    @property
    def num_elements(self) -> SSAValue:
        return self.operands[self._count_pos]

    @property
    def stride_info(self) -> tuple[SSAValue, SSAValue] | None:
        rest = self.operands[self._count_pos + 1 :]
        return (rest[0], rest[1]) if len(rest) == 2 else None

    # --- syntax ----------------------------------------------------------
    @classmethod
    def parse(cls, parser: Parser) -> AffineDmaStartOp:
        src, smap, sidx = parse_unresolved_access(parser)
        parser.parse_punctuation(",")
        dst, dmap, didx = parse_unresolved_access(parser)
        parser.parse_punctuation(",")
        tag, tmap, tidx = parse_unresolved_access(parser)
        counts = _trailing_counts(parser)
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if len(types) != 3:
            parser.raise_error("expected three memref types", pos)
        s, d, t = (parser.resolve_operand(u, ty) for u, ty in zip((src, dst, tag), types))
        op = cls.create(
            operands=[s, *sidx, d, *didx, t, *tidx, *counts],
            attributes={
                "src_map": AffineMapAttr(smap),
                "dst_map": AffineMapAttr(dmap),
                "tag_map": AffineMapAttr(tmap),
            },
        )
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        for i, (m, mp, ops) in enumerate(
            (
                (self.src, self.src_map, self.src_operands),
                (self.dst, self.dst_map, self.dst_operands),
                (self.tag, self.tag_map, self.tag_operands),
            )
        ):
            if i:
                printer.print_string(", ")
            printer.print_ssa_value(m)
            print_affine_map_of_ssa_ids(printer, mp.data, ops)
        for v in self.operands[self._count_pos :]:
            printer.print_string(", ")
            printer.print_ssa_value(v)
        printer.print_op_attributes(
            {k: v for k, v in self.attributes.items() if k not in ("src_map", "dst_map", "tag_map")}
        )
        printer.print_string(" : ")
        printer.print_list([self.src.type, self.dst.type, self.tag.type], printer.print_attribute)

    def verify_(self) -> None:
        try:
            extra = len(self.operands) - self._count_pos
        except IndexError:  # pragma: no cover
            extra = -1
        if extra not in (1, 3):
            raise VerifyException(
                "affine.dma_start: expected num_elements and optionally "
                "stride and num_elt_per_stride"
            )
        for v in (self.src, self.dst, self.tag):
            if not isinstance(v.type, MemRefType):
                raise VerifyException("affine.dma_start: src, dst and tag must be memrefs")
        for v, mp in ((self.src, self.src_map), (self.dst, self.dst_map), (self.tag, self.tag_map)):
            if len(mp.data.results) != len(cast(MemRefType, v.type).get_shape()):
                raise VerifyException("affine.dma_start: map result count must match memref rank")


@irdl_op_definition
class AffineDmaWaitOp(_DmaBase):
    name = "affine.dma_wait"
    tag_map = attr_def(AffineMapAttr)

    @property
    def tag(self) -> SSAValue:
        return self.operands[0]

    @property
    def tag_operands(self) -> tuple[SSAValue, ...]:
        n = self.tag_map.data.num_dims + self.tag_map.data.num_symbols
        return tuple(self.operands[1 : 1 + n])

    @property
    def num_elements(self) -> SSAValue:
        return self.operands[-1]

    @classmethod
    def parse(cls, parser: Parser) -> AffineDmaWaitOp:
        tag, tmap, tidx = parse_unresolved_access(parser)
        counts = _trailing_counts(parser)
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls.create(
            operands=[parser.resolve_operand(tag, t), *tidx, *counts],
            attributes={"tag_map": AffineMapAttr(tmap)},
        )
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.tag)
        print_affine_map_of_ssa_ids(printer, self.tag_map.data, self.tag_operands)
        printer.print_string(", ")
        printer.print_ssa_value(self.num_elements)
        printer.print_op_attributes({k: v for k, v in self.attributes.items() if k != "tag_map"})
        printer.print_string(" : ")
        printer.print_attribute(self.tag.type)

    def verify_(self) -> None:
        n = self.tag_map.data.num_dims + self.tag_map.data.num_symbols
        if len(self.operands) != n + 2:
            raise VerifyException("affine.dma_wait: expected tag, tag indices and num_elements")


@irdl_op_definition
class MemRefDmaStartOp(_DmaBase):
    """Upstream operand order: src, src indices, dst, dst indices, num_elements,
    tag, tag indices, (stride, num_elt_per_stride)?; ranks split the list."""

    name = "memref.dma_start"

    def _rank(self, v: SSAValue) -> int:
        t = v.type
        if not isinstance(t, MemRefType):
            raise VerifyException("memref.dma_start: src, dst and tag must be memrefs")
        return len(t.get_shape())

    @property
    def src(self) -> SSAValue:
        return self.operands[0]

    @property
    def src_indices(self) -> tuple[SSAValue, ...]:
        return tuple(self.operands[1 : 1 + self._rank(self.src)])

    @property
    def dst(self) -> SSAValue:
        return self.operands[1 + self._rank(self.src)]

    @property
    def dst_indices(self) -> tuple[SSAValue, ...]:
        p = 2 + self._rank(self.src)
        return tuple(self.operands[p : p + self._rank(self.dst)])

    @property
    def num_elements(self) -> SSAValue:
        return self.operands[2 + self._rank(self.src) + self._rank(self.dst)]

    @property
    def tag(self) -> SSAValue:
        return self.operands[3 + self._rank(self.src) + self._rank(self.dst)]

    @property
    def tag_indices(self) -> tuple[SSAValue, ...]:
        p = 4 + self._rank(self.src) + self._rank(self.dst)
        return tuple(self.operands[p : p + self._rank(self.tag)])

    @property
    def stride_info(self) -> tuple[SSAValue, SSAValue] | None:
        p = 4 + self._rank(self.src) + self._rank(self.dst) + self._rank(self.tag)
        rest = self.operands[p:]
        return (rest[0], rest[1]) if len(rest) == 2 else None

    @classmethod
    def parse(cls, parser: Parser) -> MemRefDmaStartOp:
        src, sidx = _parse_plain_access(parser)
        parser.parse_punctuation(",")
        dst, didx = _parse_plain_access(parser)
        parser.parse_punctuation(",")
        num = parser.parse_operand(IndexType())
        parser.parse_punctuation(",")
        tag, tidx = _parse_plain_access(parser)
        counts = _trailing_counts(parser)
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if len(types) != 3:
            parser.raise_error("expected three memref types", pos)
        s, d, t = (parser.resolve_operand(u, ty) for u, ty in zip((src, dst, tag), types))
        op = cls.create(operands=[s, *sidx, d, *didx, num, t, *tidx, *counts])
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        def access(m: SSAValue, idx: Sequence[SSAValue]) -> None:
            printer.print_ssa_value(m)
            printer.print_string("[")
            printer.print_list(idx, printer.print_ssa_value)
            printer.print_string("]")

        printer.print_string(" ")
        access(self.src, self.src_indices)
        printer.print_string(", ")
        access(self.dst, self.dst_indices)
        printer.print_string(", ")
        printer.print_ssa_value(self.num_elements)
        printer.print_string(", ")
        access(self.tag, self.tag_indices)
        if (si := self.stride_info) is not None:
            printer.print_string(", ")
            printer.print_list(si, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list([self.src.type, self.dst.type, self.tag.type], printer.print_attribute)

    def verify_(self) -> None:
        n = 4 + self._rank(self.src) + self._rank(self.dst) + self._rank(self.tag)
        if len(self.operands) not in (n, n + 2):
            raise VerifyException("memref.dma_start: wrong number of operands")


@irdl_op_definition
class MemRefDmaWaitOp(_DmaBase):
    name = "memref.dma_wait"

    @property
    def tag(self) -> SSAValue:
        return self.operands[0]

    @property
    def tag_indices(self) -> tuple[SSAValue, ...]:
        return tuple(self.operands[1:-1])

    @property
    def num_elements(self) -> SSAValue:
        return self.operands[-1]

    @classmethod
    def parse(cls, parser: Parser) -> MemRefDmaWaitOp:
        tag, tidx = _parse_plain_access(parser)
        parser.parse_punctuation(",")
        num = parser.parse_operand(IndexType())
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls.create(operands=[parser.resolve_operand(tag, t), *tidx, num])
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.tag)
        printer.print_string("[")
        printer.print_list(self.tag_indices, printer.print_ssa_value)
        printer.print_string("], ")
        printer.print_ssa_value(self.num_elements)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.tag.type)

    def verify_(self) -> None:
        t = self.tag.type
        if not isinstance(t, MemRefType) or len(self.operands) != len(t.get_shape()) + 2:
            raise VerifyException("memref.dma_wait: expected tag, tag indices and num_elements")


def _affine_extra_ops() -> list[type[IRDLOperation]]:
    from nem.frontends.upstream_dialects.affine_if import AffineIfOp
    from nem.frontends.upstream_dialects.affine_max import AffineMaxOp
    from nem.frontends.upstream_dialects.affine_ssa_maps import ACCESS_OPS

    return [AffineDmaStartOp, AffineDmaWaitOp, AffineMaxOp, AffineIfOp, *ACCESS_OPS]


AFFINE_EXTRA_OPS: list[type[IRDLOperation]] = _affine_extra_ops()


def _memref_extra_ops() -> list[type[IRDLOperation]]:
    from nem.frontends.upstream_dialects.memref_copy import MemRefCopyOp
    from nem.frontends.upstream_dialects.memref_global import MemRefGlobalOp

    return [MemRefDmaStartOp, MemRefDmaWaitOp, MemRefCopyOp, MemRefGlobalOp]


MEMREF_EXTRA_OPS: list[type[IRDLOperation]] = _memref_extra_ops()
