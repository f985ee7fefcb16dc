"""The convolutions and poolings D-COMPILE-FUSE-L1 fuses epilogues into, as
one description each (`Form`): the dense `linalg.conv_2d_nhwc_hwcf`, the
grouped `linalg.conv_2d_nhwgc_gfhwc` (the importer's Conv with group > 1,
depthwise included: a group of one input channel), and the window sum and
max `linalg.pooling_nhwc_sum`/`_max` (an AveragePool's scale, LRN's
normalization after its window sum of squares; session 63), whose second
operand is only the window's shape: no weight is read, and each output
channel reads its own input channel.

Both accumulate into a buffer O of the ONNX output's NHWC shape that the
bias broadcast writes and the epilogues read; the grouped convolution
writes it through a `memref.expand_shape` that splits the channels into
(group, channel in the group).  The fused op runs on the convolution's
loops, so on the grouped form it reads and writes every buffer in that
split shape: `split` views each epilogue buffer so, and rewrites its map
(the channel loop d3 becomes d3, d4).  Everything else of the fusion is
the same for both: one home, `fusion.py`, parametrized by the form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, linalg, memref

from nem.compile.linalg_ir import users_of
from nem.compile.nest_ir import owner_op

RANK = 4
"""The rank of the ONNX output's NHWC buffer (O, each epilogue's)."""


@dataclass(frozen=True)
class Form:
    """How one convolution op is fused: its name, the rank of the output it
    writes, its loops (the parallel ones first: the output's), the positions
    of its reduction loops and of the weight's dimensions they index."""

    name: str
    rank: int
    reduction: tuple[int, ...]
    weight_reduction: tuple[int, ...]
    pool: str | None = None
    """A pooling's scalar op on the window ("add", "max"), None for a
    convolution."""

    @property
    def loops(self) -> int:
        return self.rank + len(self.reduction)

    @property
    def grouped(self) -> bool:
        return self.rank > RANK

    @property
    def out_channels(self) -> int:
        """The loop of the output's (last) channel dimension: a parallel
        loop, in the output's order (NHWC, NHWGC)."""
        return self.rank - 1

    def dims(self) -> str:
        return "(" + ", ".join(f"d{i}" for i in range(self.loops)) + ")"

    def input_map(self, s: list[int], d: list[int]) -> str:
        """X's map over the loops (strides `s`, dilations `d`)."""
        if self.pool:  # (a pooling reads the output's channel)
            kh, kw = self.reduction
            return (
                f"affine_map<{self.dims()} -> (d0, d1 * {s[0]} + d{kh} * {d[0]}, "
                f"d2 * {s[1]} + d{kw} * {d[1]}, d3)>"
            )
        kh, kw, c = self.reduction
        chan = "d3, " if self.grouped else ""
        return (
            f"affine_map<{self.dims()} -> (d0, d1 * {s[0]} + d{kh} * {d[0]}, "
            f"d2 * {s[1]} + d{kw} * {d[1]}, {chan}d{c})>"
        )

    def weight_map(self) -> str:
        if self.pool:  # (the window's shape)
            kh, kw = self.reduction
            return f"affine_map<{self.dims()} -> (d{kh}, d{kw})>"
        kh, kw, c = self.reduction
        if self.grouped:
            return f"affine_map<{self.dims()} -> (d3, d4, d{kh}, d{kw}, d{c})>"
        return f"affine_map<{self.dims()} -> (d{kh}, d{kw}, d{c}, d3)>"

    def output_map(self) -> str:
        """The output's map over the loops: its parallel loops in order."""
        return f"affine_map<{self.dims()} -> ({', '.join(f'd{i}' for i in range(self.rank))})>"

    def iterator_types(self) -> list[ir.Attribute]:
        """The loops' iterator types: the output's parallel, then the reductions."""
        kinds = ["parallel"] * self.rank + ["reduction"] * len(self.reduction)
        return [ir.Attribute.parse(f"#linalg.iterator_type<{k}>") for k in kinds]

    def window(self, op: ir.Operation) -> tuple[list[int], list[int]] | None:
        """(strides, dilations) of `op` when it is this form's convolution as
        a `linalg.generic` (the tile stage generalizes the grouped one):
        X's row and column results read as `d1 * s + dkh * d` and
        `d2 * s + dkw * d`, then all three maps and the iterator types
        compared with the ones this form builds from those (so any other
        map, even one printing alike, is None)."""
        if op.name != "linalg.generic" or "indexing_maps" not in op.attributes:
            return None
        maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
        if len(maps) != 3 or maps[0].n_dims != self.loops or len(maps[0].results) < 3:
            return None
        kh, kw, _ = self.reduction
        rows, cols = (_coefficients(maps[0].results[i]) for i in (1, 2))
        if rows is None or cols is None or set(rows) != {1, kh} or set(cols) != {2, kw}:
            return None
        s, d = [rows[1], cols[2]], [rows[kh], cols[kw]]
        want = [self.input_map(s, d), self.weight_map(), self.output_map()]
        if maps != [ir.AffineMapAttr(ir.Attribute.parse(m)).value for m in want]:
            return None
        iters = list(ir.ArrayAttr(op.attributes["iterator_types"]))
        return (s, d) if iters == self.iterator_types() else None

    def channel_map(self, n: int) -> str:
        """The bias's map over `n` loops: its output channel."""
        dims = ", ".join(f"d{i}" for i in range(n))
        return f"affine_map<({dims}) -> ({'d3, d4' if self.grouped else 'd3'})>"

    def kernel(self, w: ir.Value) -> tuple[int, int, int]:
        """(kh, kw, input channels per output channel) of the weight `w` (a
        pooling's window: one channel, its own)."""
        shape = list(ir.MemRefType(w.type).shape)
        if self.pool:
            kh, kw = (shape[i] for i in self.weight_reduction)
            return kh, kw, 1
        kh, kw, c = (shape[i] for i in self.weight_reduction)
        return kh, kw, c

    def input_channels(self, sizes: list[int], c: int) -> int:
        """The input channels a tile of `sizes` (the output's loops) reads,
        `c` per output channel group."""
        return c * sizes[3] if self.grouped or self.pool else c

    def weight_bytes(self, kh: int, kw: int, c: int, f: int, width: int) -> int:
        """The bytes of a tile's weights for `f` output channels (a pooling
        has none: its window operand is never read, so never staged)."""
        return 0 if self.pool else width * kh * kw * c * f

    def accumulate(self, acc: ir.Value, x: ir.Value, w: ir.Value) -> ir.Value:
        """One step of the reduction on scalars, as upstream generalizes the
        named op: `acc + x * w`, a window sum's `acc + x`, a window max's
        `max(acc, x)`."""
        if self.pool == "max":
            return arith.MaximumFOp(acc, x).result
        if self.pool == "add":
            return arith.AddFOp(acc, x).result
        return arith.AddFOp(acc, arith.MulFOp(x, w).result).result

    def output(self, conv: ir.Operation) -> ir.Value | None:
        """The buffer O of the output's NHWC shape that `conv` writes (its
        output, or the source of the expand_shape that is), else None."""
        out = conv.operands[2]
        if not self.grouped:
            return out
        view = owner_op(out)
        if view is None or view.name != "memref.expand_shape" or not _splits_channels(view):
            return None
        return view.operands[0]

    def split(
        self, v: ir.Value, m: str, ip: ir.InsertionPoint, groups: int
    ) -> tuple[ir.Value, str]:
        """An epilogue buffer `v` read at map `m` (over the output's 4 loops)
        as the fused op reads it: on the grouped form, viewed with its
        channel dimension (the one d3 indexes) split in `groups` groups and
        the map over the output's 5 loops, d3 -> d3, d4; else unchanged."""
        if not self.grouped:
            return v, m
        parsed = ir.AffineMapAttr(ir.Attribute.parse(m)).value
        results, groups_of, at = [], [], 0
        for e in parsed.results:
            if isinstance(e, ir.AffineDimExpr) and e.position == 3:
                results += ["d3", "d4"]
                groups_of.append([at, at + 1])
                at += 2
            else:
                results.append(str(e))
                groups_of.append([at])
                at += 1
        dims = ", ".join(f"d{i}" for i in range(self.rank))
        return expand(v, groups_of, groups, ip), f"affine_map<({dims}) -> ({', '.join(results)})>"

    def generic(
        self, x: ir.Value, w: ir.Value, out: ir.Value, maps: list[str], ip: ir.InsertionPoint
    ) -> None:
        """The convolution or pooling of `x` and `w` (read at `maps`, over the
        loops) into `out` at `ip`, in the generic form
        `linalg-generalize-named-ops` gives the named op (`accumulate`): a
        fused tile's grouped convolution or pooling as the tiling makes the
        unfused one's (the lowering's xDSL has no named grouped convolution
        or pooling: the tiling generalizes them)."""
        op = linalg.GenericOp(
            [],
            [x, w],
            [out],
            ir.ArrayAttr.get(
                [ir.AffineMapAttr(ir.Attribute.parse(m)) for m in [*maps, self.output_map()]]
            ),
            ir.ArrayAttr.get(self.iterator_types()),
            ip=ip,
        )
        elem = ir.MemRefType(out.type).element_type  # the fused group's (one type)
        a = list(op.regions[0].blocks.append(elem, elem, elem).arguments)
        with ir.InsertionPoint(op.regions[0].blocks[0]):
            linalg.YieldOp([self.accumulate(a[2], a[0], a[1])])


def conv_output(v: ir.Value) -> bool:
    """Whether a convolution of a form accumulates into `v` (directly, or
    through the grouped form's view)."""
    for u in users_of(v):
        if u.name == "memref.expand_shape" and conv_output_view(u.results[0], v):
            return True
        if u.name in FORMS and u.operands[2] == v and not FORMS[u.name].grouped:
            return True
    return False


def conv_output_view(view: ir.Value, v: ir.Value) -> bool:
    """Whether `view` of `v` is a grouped convolution's output."""
    return any(u.name == GROUPED.name and GROUPED.output(u) == v for u in users_of(view))


def _coefficients(e: ir.AffineExpr) -> dict[int, int] | None:
    """{dimension: coefficient} of `e` when it is a sum of distinct
    dimensions each times a constant (or once), else None."""
    if isinstance(e, ir.AffineDimExpr):
        return {e.position: 1}
    if (
        isinstance(e, ir.AffineMulExpr)
        and isinstance(e.lhs, ir.AffineDimExpr)
        and isinstance(e.rhs, ir.AffineConstantExpr)
    ):
        return {e.lhs.position: e.rhs.value}
    if isinstance(e, ir.AffineAddExpr):
        lhs, rhs = _coefficients(e.lhs), _coefficients(e.rhs)
        if lhs is None or rhs is None or lhs.keys() & rhs.keys():
            return None
        return lhs | rhs
    return None


def _splits_channels(view: ir.Operation) -> bool:
    """`view` expands a rank-4 buffer's last dimension into two."""
    reassociation = [
        [int(ir.IntegerAttr(i).value) for i in ir.ArrayAttr(g)]
        for g in ir.ArrayAttr(view.attributes["reassociation"])
    ]
    return reassociation == [[0], [1], [2], [3, 4]]


def expand(v: ir.Value, groups_of: list[list[int]], groups: int, ip: ir.InsertionPoint) -> ir.Value:
    """`v` with each dimension of `groups_of` that has two entries split into
    (`groups`, the rest), as a `memref.expand_shape` at `ip` (its layout the
    source's, the split dimension's stride the inner one's times its size)."""
    t = ir.MemRefType(v.type)
    shape = list(t.shape)
    strides, offset = t.get_strides_and_offset()
    new_shape: list[int] = []
    new_strides: list[int] = []
    for size, stride, group in zip(shape, strides, groups_of):
        if len(group) == 2:
            new_shape += [groups, size // groups]
            new_strides += [stride * (size // groups), stride]
        else:
            new_shape.append(size)
            new_strides.append(stride)
    contiguous = new_strides == [math.prod(new_shape[i + 1 :]) for i in range(len(new_shape))]
    layout = None if contiguous and offset == 0 else ir.StridedLayoutAttr.get(offset, new_strides)
    result = ir.MemRefType.get(new_shape, t.element_type, layout, t.memory_space)
    reassociation = ir.ArrayAttr.get(
        [
            ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), i) for i in g])
            for g in groups_of
        ]
    )
    with ip:
        op = memref.ExpandShapeOp(result, v, reassociation, [], new_shape)
    return op.result


DENSE = Form("linalg.conv_2d_nhwc_hwcf", RANK, (4, 5, 6), (0, 1, 2))
GROUPED = Form("linalg.conv_2d_nhwgc_gfhwc", RANK + 1, (5, 6, 7), (2, 3, 4))
POOL_SUM = Form("linalg.pooling_nhwc_sum", RANK, (4, 5), (0, 1), pool="add")
POOL_MAX = Form("linalg.pooling_nhwc_max", RANK, (4, 5), (0, 1), pool="max")
FORMS = {f.name: f for f in (DENSE, GROUPED, POOL_SUM, POOL_MAX)}
