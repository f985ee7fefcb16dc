"""Which convolution and epilogues form one fused group (D-COMPILE-FUSE-L1):
the analysis of `nem.compile.fusion`, apart from its rewrite.

A group is a bias broadcast (or, without a bias, the fill of the output
with zero), the convolution accumulating into its output and up to MAX_EPILOGUES elementwise ops reading that output (a
BatchNormalization's scale and shift, a ReLU or clip, a residual add),
each only read elsewhere, so the tile can run them while it is in L1
(`find_groups`; `fusion.fuse` rewrites each group into one op).  A dense
convolution's group may also hold a prologue: the elementwise op that
alone writes the convolution's input (a pre-activation network's
BatchNormalization and Relu before each convolution, DenseNet's), which
each tile then runs on its input tile in L1 (`_prologue`).  Only before a
1x1 convolution: a larger window's tiles overlap (their halo rows computed
again) and stage their rows in pieces, so that the prologue runs out of
place with smaller tiles (an outside user's 3x3 layers moved 1.6x the
bytes, up to 20% slower).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from mlir import ir

from nem.compile.conv_forms import FORMS, RANK, Form
from nem.compile.linalg_ir import (
    FUSED_TYPES,
    MEMREF_RESHAPES,
    all_parallel,
    body_of,
    elem_of,
    identity_map,
    map_strings,
    operand_segments,
    typed,
    users_of,
)
from nem.compile.nest_ir import owner_op
from nem.compile.slices import whole_buffer, written_apart
from nem.compile.writers import Writers

MAX_EPILOGUES = 3


@dataclass
class Group:
    """A bias broadcast, the convolution into its output, and the
    elementwise ops fused after it (`find_groups`)."""

    bias: ir.Operation
    """The op the output starts from: the bias broadcast, or for a
    convolution without a bias the `linalg.fill` of a constant (its zero)."""
    conv: ir.Operation
    form: Form
    out: ir.Value
    """O, the output's NHWC buffer (the convolution's output, or what it
    views: `Form.output`)."""
    epilogues: list[ir.Operation]
    others: list[list[ir.Value]]
    """Each epilogue's inputs besides the previous result, in order."""
    prevs: list[ir.Value]
    """Each epilogue's input that the chain computes (O, P1, ..)."""
    prologue: ir.Operation | None = None
    """The elementwise op computing the convolution's input X from `source`
    (and per-channel inputs), run on each input tile in L1 (`_prologue`)."""
    source: ir.Value | None = None
    """What the prologue reads at the identity: the fused op's input."""

    def start(self) -> ir.Value:
        """What the output starts from: the 1-d bias, or the fill's scalar."""
        start: ir.Value = self.bias.operands[0]
        return start

    def filled(self) -> bool:
        """Whether the output starts from a fill's scalar (no bias)."""
        filled: bool = self.bias.name == "linalg.fill"
        return filled

    def outputs(self) -> list[ir.Value]:
        """O, P1, .., Pk."""
        return [self.out, *(operand_segments(e)[1][0] for e in self.epilogues)]

    def mine(self) -> list[ir.Operation]:
        """The ops of the group: the bias, the convolution (and the view it
        writes O through), the epilogues."""
        view = owner_op(self.conv.operands[2])
        views = [view] if view is not None and self.out != self.conv.operands[2] else []
        pro = [] if self.prologue is None else [self.prologue]
        return [*pro, self.bias, self.conv, *views, *self.epilogues]

    def pro_others(self) -> list[ir.Value]:
        """The prologue's inputs besides `source`, in order."""
        if self.prologue is None:
            return []
        return [v for v in operand_segments(self.prologue)[0] if v != self.source]

    def without_prologue(self) -> Group:
        return replace(self, prologue=None, source=None)

    def keep(self) -> list[bool]:
        """Per output: whether it is copied out of the tile (the last one;
        a function argument, read by the caller; a view of a buffer, such
        as a padded tensor's interior, whose other readers read the buffer,
        not the view; one something else reads).  A fuzzed model (session
        63): an AveragePool's scale wrote the interior of a MaxPool's padded
        input, and a BatchNormalization read it as the next epilogue; the
        MaxPool reads the padded buffer, not the interior's view, so the
        view's users were all the group's, and its copy-out was dropped."""
        ours = self.mine()
        outs = self.outputs()
        block = self.conv.block
        return [
            owner_op(v) is None
            or not whole_buffer(v, block)
            or any(all(u != s for s in ours) for u in users_of(v))
            for v in outs[:-1]
        ] + [True]

    def first(self, n: int) -> Group:
        """The group with its first `n` epilogues only."""
        return replace(
            self,
            epilogues=self.epilogues[:n],
            others=self.others[:n],
            prevs=self.prevs[:n],
        )


def _is_bias(op: ir.Operation, out: ir.Value) -> bool:
    """`op` broadcasts a 1-d buffer over the last dimension of `out`."""
    if op.name != "linalg.generic" or not all_parallel(op):
        return False
    ins, outs = operand_segments(op)
    if len(ins) != 1 or outs != [out] or ir.MemRefType(ins[0].type).rank != 1:
        return False
    if map_strings(op) != ["affine_map<(d0, d1, d2, d3) -> (d3)>", identity_map(RANK)]:
        return False
    body = list(body_of(op).operations)
    copies: bool = len(body) == 1 and body[0].operands[0] == body_of(op).arguments[0]
    return copies


def _is_fill(op: ir.Operation, out: ir.Value, elem: ir.Type) -> bool:
    """`op` fills `out` with a constant of its element type defined before
    it: a convolution without a bias starts from the fill (its zero) as one
    with a bias starts from the bias (session 54, an outside review: no
    epilogue fused after a Conv without a bias)."""
    if op.name != "linalg.fill":
        return False
    ins, outs = operand_segments(op)
    cst = owner_op(ins[0]) if len(ins) == 1 else None
    fills: bool = (
        outs == [out]
        and cst is not None
        and cst.name == "arith.constant"
        and ins[0].type == elem
        and cst.block == op.block
        and cst.is_before_in_block(op)
    )
    return fills


def _between(op: ir.Operation, first: ir.Operation, last: ir.Operation) -> bool:
    between: bool = first.is_before_in_block(op) and op.is_before_in_block(last)
    return between


def _only_read(
    v: ir.Value,
    skip: Sequence[ir.Operation],
    apart: tuple[ir.Operation, ir.Operation] | None = None,
) -> bool:
    """Every user of `v` but `skip` is a linalg op reading it (not writing),
    directly or through a reshaping view whose users only read it (session
    29: a depthwise convolution's output read by the next grouped one through
    the view that splits its channels in groups, ShuffleNet's), none
    strictly between the two ops `apart` (when given)."""
    for u in users_of(v):
        if any(u == s for s in skip):
            continue
        if u.name in MEMREF_RESHAPES:
            if not _only_read(u.results[0], (), apart):
                return False
        elif not u.name.startswith("linalg.") or v in operand_segments(u)[1]:
            return False
        elif apart is not None and _between(u, *apart):
            return False
    return True


def _read_view(u: ir.Operation, conv: ir.Operation, op: ir.Operation) -> bool:
    """`u` is a reshaping view whose users only read it, none between `conv`
    and `op`: an epilogue's other input read so is not written before the
    epilogue, and the fused op may read it at the convolution's place.
    ShuffleNet's residual Sum reads its unit's input, which the unit's
    first grouped convolution reads through a `memref.expand_shape`: the
    Sum and the Relu after it were not fused, two round trips of the tensor
    through DDR per unit (session 60)."""
    return u.name in MEMREF_RESHAPES and _only_read(u.results[0], (), (conv, op))


def _epilogue(
    op: ir.Operation, prev: ir.Value, conv: ir.Operation
) -> tuple[list[ir.Value], ir.Value] | None:
    """(its other inputs, its output) when `op` is an elementwise op on
    `prev` that can run where `conv` is, else None."""
    if op.name != "linalg.generic":
        return None
    if not all_parallel(op) or op.block != conv.block:
        return None
    ins, outs = operand_segments(op)
    if len(outs) != 1 or sum(1 for v in ins if v == prev) != 1:
        return None
    out = outs[0]
    elem = elem_of(prev)  # the convolution's: one type through the chain
    maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
    if str(maps[-1]) != identity_map(RANK) or not all(
        typed(v, elem) and ir.MemRefType(v.type).rank == RANK for v in [prev, out]
    ):
        return None
    for v, m in zip(ins, maps):  # prev at the identity, the others also broadcast
        if not typed(v, elem) or (v == prev and str(m) != identity_map(RANK)):
            return None
        if not _broadcast(ir.AffineMapAttr(m).value, ir.MemRefType(v.type).shape):
            return None
    block = body_of(op)
    if list(block.arguments[len(ins)].uses) or any(len(o.regions) for o in block.operations):
        return None  # reads its output's old value, or has regions
    for o in block.operations:  # values from outside: defined before the convolution
        for v in o.operands:
            owner = owner_op(v)
            if owner is not None and owner.block != block and not owner.is_before_in_block(conv):
                return None
            if owner is None and v.owner != block:
                return None
    if not whole_buffer(out, conv.block) and not written_apart(out, op, conv):
        return None
    if any(u != op and not op.is_before_in_block(u) for u in users_of(out)):
        return None  # something uses the output before the epilogue
    others = [v for v in ins if v != prev]
    for y in others:  # nothing between the convolution and `op` touches an input
        if y in (out,) or any(
            (u.name.startswith("memref.") and not (_copied_from(u, y) or _read_view(u, conv, op)))
            or _between(u, conv, op)
            for u in users_of(y)
        ):
            return None
        owner = owner_op(y)
        if owner is not None and (owner.block != conv.block or not owner.is_before_in_block(conv)):
            return None
    return others, out


def _copied_from(u: ir.Operation, y: ir.Value) -> bool:
    """`u` is a `memref.copy` that only reads `y` (its source, not its
    target): a residual block's skip, copied into the next convolution's
    padded input as well as read by the Add (session 53, an outside review:
    no residual Add fused, and with fusion on the chain rule did not take it
    either)."""
    reads: bool = u.name == "memref.copy" and u.operands[0] == y and u.operands[1] != y
    return reads


def _broadcast(m: ir.AffineMap, shape: Sequence[int]) -> bool:
    """`m` reads an operand of `shape` at loop dimensions in loop order, or
    at 0 on a dimension of size 1: the identity or a broadcast the lowering
    raises (D-LOW-BCAST-OPERAND)."""
    if m.n_dims != RANK or m.n_symbols or len(m.results) != len(shape):
        return False
    last = -1
    for e, size in zip(m.results, shape):
        if isinstance(e, ir.AffineDimExpr):
            if e.position <= last:
                return False
            last = e.position
        elif not (isinstance(e, ir.AffineConstantExpr) and e.value == 0 and size == 1):
            return False
    return True


def other_maps(e: ir.Operation, prev: ir.Value) -> list[str]:
    """The maps (over the 4 loops of the output) of epilogue `e`'s inputs
    besides `prev`, in order."""
    return [m for v, m in zip(operand_segments(e)[0], map_strings(e)) if v != prev]


def widen(m: str, n: int) -> str:
    """A map of the output's 4 loops over the first 4 of `n` loops (the
    fused op's 7: n, oh, ow, f, kh, kw, c), or back with `n` = 4."""
    head = m[: m.index("->")]
    dims = ", ".join(f"d{i}" for i in range(n))
    return f"affine_map<({dims}) " + m[len(head) :]


def conv_group(conv: ir.Operation, form: Form, writers: Writers) -> Group | None:
    """The fusable group of convolution `conv` of `form` (module doc), or
    None; `writers`: its block's (`find_groups`)."""
    x, w, o_conv = list(conv.operands)
    o = form.output(conv)
    elem = elem_of(x)
    if (
        o is None
        or not whole_buffer(o, conv.block)
        or not isinstance(elem, FUSED_TYPES)
        or not all(typed(v, elem) for v in (w, o_conv, o))
    ):
        return None
    view = [] if o == o_conv else [owner_op(o_conv)]
    users = [u for u in users_of(o) if all(u != v for v in view)]
    if view and users_of(o_conv) != [conv]:
        return None  # (O's view: the convolution's output only)
    before = [u for u in users if u.block == conv.block and u.is_before_in_block(conv)]
    if len(before) != 1 or any(u.block != conv.block for u in users):
        return None
    bias = before[0]
    if _is_bias(bias, o):
        b = bias.operands[0]  # a weight: the function's argument
        if owner_op(b) is not None or writers.between(b, bias, conv):
            return None  # (the tiles read it at the convolution's place)
    elif not _is_fill(bias, o, elem):
        return None
    if not _only_read(o, [bias, conv, *view]):
        return None
    epilogues: list[ir.Operation] = []
    others: list[list[ir.Value]] = []
    outs = [o]
    prev, skip = o, [bias, conv, *view]
    prevs: list[ir.Value] = []
    while len(epilogues) < MAX_EPILOGUES:
        later = [u for u in users_of(prev) if all(u != s for s in skip)]
        if not later:
            break
        first = _first(later)
        found = _epilogue(first, prev, conv)
        if found is None or any(y == v for y in found[0] for v in outs):
            break  # (an input the fused op computes: not there before it)
        prevs.append(prev)
        epilogues.append(first)
        others.append(found[0])
        prev, skip = found[1], [first]
        outs.append(prev)
        if not _only_read(prev, skip):
            break  # (its output is written again after it: the chain ends)
    pro = _prologue(conv, form, outs, writers)
    if form.pool and not epilogues:
        return None  # (a pooling starts its tiles from the fill in L1 unfused too)
    return Group(bias, conv, form, o, epilogues, others, prevs, *(pro or (None, None)))


def _prologue(
    conv: ir.Operation, form: Form, outs: list[ir.Value], writers: Writers
) -> tuple[ir.Operation, ir.Value] | None:
    """(P, its source) when the dense convolution `conv` reads its input X
    from an elementwise op P alone, so that each tile can compute its input
    tile from P's inputs in L1: X a buffer of its own that only P writes
    (whole, at the identity) and only `conv` reads (whole: no padding
    between them, which P would have to skip), P's one input read at the
    identity (its source) and the others broadcast (per channel), none
    written between P and `conv` (so they hold the same values at the
    convolution's place) nor among the group's outputs `outs`.  The
    per-channel inputs must be the function's arguments (weights): the
    tiles read them where they are (`fusion.finish`)."""
    if form.grouped or form.pool or list(ir.MemRefType(conv.operands[1].type).shape[:2]) != [1, 1]:
        return None  # (a k x k window: see the module doc)
    x = conv.operands[0]
    alloc = owner_op(x)
    users = users_of(x)
    if alloc is None or alloc.name != "memref.alloc" or len(users) != 2:
        return None
    p = users[0] if users[1] == conv else users[1] if users[0] == conv else None
    source = None if p is None or p.name != "linalg.generic" else _source(p)
    if p is None or source is None or p.block != conv.block or not p.is_before_in_block(conv):
        return None
    found = _epilogue(p, source, conv)
    if found is None or found[1] != x:
        return None
    ins = operand_segments(p)[0]
    if any(v == o for v in ins for o in outs):
        return None
    if any(owner_op(y) is not None for y in found[0]):
        return None  # (a per-channel input computed in the function)
    if any(writers.between(v, p, conv) for v in ins):
        return None
    return p, source


def _source(p: ir.Operation) -> ir.Value | None:
    """The one input of elementwise op `p` read at the identity map."""
    ins = operand_segments(p)[0]
    ident = [v for v, m in zip(ins, map_strings(p)) if m == identity_map(RANK)]
    return ident[0] if len(ident) == 1 and ins.count(ident[0]) == 1 else None


def _first(ops: list[ir.Operation]) -> ir.Operation:
    first = ops[0]
    for op in ops[1:]:
        if op.is_before_in_block(first):
            first = op
    return first


def find_groups(fn: ir.Operation) -> list[Group]:
    """The fusable groups of `fn`'s body, one per convolution with a bias
    broadcast or a constant fill before it (module doc)."""
    groups = []
    block = fn.regions[0].blocks[0]
    writers = Writers(block)
    for op in block.operations:
        if op.operation.name in FORMS:
            g = conv_group(op.operation, FORMS[op.operation.name], writers)
            if g is not None:
                groups.append(g)
    return groups


def tile_steps(fn: ir.Operation, ops: list[ir.Operation]) -> dict[int, int]:
    """Index in `ops` -> the elementwise ops each tile of that convolution
    runs on its output after it when fused (D-COMPILE-FUSE-L1: its bias
    broadcast, each epilogue body's ops), for `tile_cost.channel_cut`'s
    per-tile chain."""
    index = {op: k for k, op in enumerate(ops)}
    return {
        index[g.conv]: 1 + sum(len(body_of(e).operations) - 1 for e in g.epilogues)
        for g in find_groups(fn)
    }
