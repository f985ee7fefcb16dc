"""MLIR loop nests read and rewritten through the upstream bindings: a
top-level affine band and its accesses, value ranges, constants, the op
owning a value, and running a pass pipeline on one nest in isolation.
What the tiling, the engine split, the L1 plan, the DMA strides and the
FLOP count share, below all of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, func
from mlir.passmanager import PassManager


@dataclass(frozen=True)
class Access:
    memref: ir.Value
    map: ir.AffineMap
    indices: tuple[ir.Value, ...]
    write: bool
    op: ir.Operation


@dataclass
class Band:
    """A top-level affine loop nest: its perfectly nested loops (outermost
    first) with their constant trip extents, and every access below them."""

    root: ir.Operation
    loops: list[ir.Operation]
    extents: list[int]
    inner: dict[ir.Value, int]
    """Induction variables of loops below the band -> their extents."""
    accesses: list[Access]


def batch_loops(band: Band) -> frozenset[int]:
    """The loops of a batch of contractions (D-COMPILE-BATCH-TILE): in a band
    reading two operands or more and with a reduction loop (one no store's
    index uses), each loop indexing the outermost dimension of every access,
    all of rank 3 or more, as `linalg.batch_matmul`'s batch loop does.  The
    lowering raises one
    contraction per tile (a `conv2d` of one group: the batch dimension is
    not next to the channel dimension it would have to merge with,
    D-LOW-GROUPCONV), so these loops are tiled by 1."""
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in band.loops]
    if any(len(a.map.results) < 3 for a in band.accesses) or not is_contraction(band):
        return frozenset()

    def first(a: Access) -> ir.Value | None:
        e = a.map.results[0]
        return a.indices[e.position] if isinstance(e, ir.AffineDimExpr) else None

    lead = {first(a) for a in band.accesses}
    return frozenset(i for i, iv in enumerate(ivs) if lead == {iv})


def is_contraction(band: Band) -> bool:
    """Whether the nest contracts two operands or more (a convolution, a
    matmul: the NMU's work): it reads two memrefs besides those it writes
    (not a pooling or a plain reduction) and has a reduction loop, one that
    no store's index uses."""
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in band.loops]
    outs = {a.memref for a in band.accesses if a.write}
    if len({a.memref for a in band.accesses} - outs) < 2:
        return False
    written = {v for a in band.accesses if a.write for v in a.indices}
    return not all(iv in written for iv in [*ivs, *band.inner])


def const_bound(op: ir.Operation, key: str) -> int | None:
    amap = ir.AffineMapAttr(op.attributes[key]).value
    if len(amap.results) != 1 or not isinstance(amap.results[0], ir.AffineConstantExpr):
        return None
    value: int = amap.results[0].value
    return value


def _extent(op: ir.Operation) -> int | None:
    lo, hi = const_bound(op, "lowerBoundMap"), const_bound(op, "upperBoundMap")
    step = ir.IntegerAttr(op.attributes["step"]).value
    if lo is None or hi is None or step != 1 or len(op.operands):
        return None
    return hi - lo


def _body_ops(loop: ir.Operation) -> list[ir.Operation]:
    return [
        o.operation
        for o in loop.regions[0].blocks[0].operations
        if o.operation.name != "affine.yield"
    ]


def analyze_band(root: ir.Operation) -> Band | None:
    """The band of `root` (an `affine.for`), or None when a bound is not constant."""
    loops = [root]
    while True:
        body = _body_ops(loops[-1])
        if len(body) == 1 and body[0].name == "affine.for":
            loops.append(body[0])
        else:
            break
    extents = []
    for loop in loops:
        e = _extent(loop)
        if e is None:
            return None
        extents.append(e)
    inner: dict[ir.Value, int] = {}
    accesses: list[Access] = []
    ok = True

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal ok
        name = op.name
        if name == "affine.for" and op not in loops:
            e = _extent(op)
            if e is None:
                ok = False
                return ir.WalkResult.INTERRUPT
            inner[op.regions[0].blocks[0].arguments[0]] = e
        elif name in ("affine.load", "affine.store"):
            write = name == "affine.store"
            mem = op.operands[1 if write else 0]
            idx = tuple(op.operands[2 if write else 1 :])
            accesses.append(
                Access(mem, ir.AffineMapAttr(op.attributes["map"]).value, idx, write, op)
            )
        elif name in ("memref.load", "memref.store"):
            ok = False
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    if not ok:
        return None
    return Band(root, loops, extents, inner, accesses)


def _range(e: ir.AffineExpr, ranges: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """Interval of an affine expression given the intervals of its inputs."""
    if isinstance(e, ir.AffineConstantExpr):
        return e.value, e.value
    if isinstance(e, ir.AffineDimExpr):
        pos: int = e.position
        return ranges[pos]
    if isinstance(e, ir.AffineSymbolExpr):
        return 0, 0  # loop-invariant: moves the box, not its extent
    a, b = _range(e.lhs, ranges), _range(e.rhs, ranges)
    if isinstance(e, ir.AffineAddExpr):
        return a[0] + b[0], a[1] + b[1]
    if isinstance(e, ir.AffineMulExpr):
        prods = [x * y for x in a for y in b]
        return min(prods), max(prods)
    if isinstance(e, ir.AffineModExpr):
        return 0, max(b[1] - 1, 0)
    if isinstance(e, ir.AffineFloorDivExpr) and b[0] > 0:
        return a[0] // b[0], a[1] // b[0]
    if isinstance(e, ir.AffineCeilDivExpr) and b[0] > 0:
        return -(-a[0] // b[0]), -(-a[1] // b[0])
    raise ValueError(f"affine expression {e} has no interval")


def value_range(v: ir.Value, ivs: dict[ir.Value, tuple[int, int]]) -> tuple[int, int]:
    """Interval of an index value: an induction variable's from `ivs`, an
    `affine.apply` of them through its map (what -convert-linalg-to-affine-loops
    leaves for `oh + kh`), anything else (loop-invariant) 0."""
    if v in ivs:
        return ivs[v]
    owner = owner_op(v)
    if owner is not None and owner.name == "affine.apply":
        amap = ir.AffineMapAttr(owner.attributes["map"]).value
        return _range(amap.results[0], [value_range(o, ivs) for o in owner.operands])
    return 0, 0


def access_box(acc: Access, ivs: dict[ir.Value, tuple[int, int]]) -> list[tuple[int, int]]:
    """Per dimension of the memref, the interval of indices `acc` touches."""
    ranges = [value_range(v, ivs) for v in acc.indices[: acc.map.n_dims]]
    return [_range(e, ranges) for e in acc.map.results]


def _defined_inside(value: ir.Value, root: ir.Operation) -> bool:
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    while op is not None:
        op = op.operation if isinstance(op, ir.OpView) else op
        if op == root:
            return True
        op = op.parent
    return False


def outside_values(root: ir.Operation) -> tuple[list[ir.Value], list[ir.Value]]:
    """The values `root` and its regions use but do not define, in order of
    use: (those to pass in, those `arith.constant` defines, to clone)."""
    external: list[ir.Value] = []
    constants: list[ir.Value] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        for v in op.operands:
            if not _defined_inside(v, root) and v not in external and v not in constants:
                owner = owner_op(v)
                if owner is not None and owner.name == "arith.constant":
                    constants.append(v)
                else:
                    external.append(v)
        return ir.WalkResult.ADVANCE

    root.walk(collect)
    return external, constants


class Isolated:
    """A nest moved into a temporary function of its own, for upstream passes
    and transform scripts that work on a function or a whole payload:
    external values become the function's arguments, constants are cloned
    (`entry`: the function's block, `ret`: its return).  On leaving the
    `with` block, everything the function then holds moves back where the
    nest was (`moved`: those ops, in order)."""

    def __init__(self, root: ir.Operation):
        self.root = root
        self.moved: list[ir.Operation] = []

    def __enter__(self) -> Isolated:
        root = self.root
        external, constants = outside_values(root)
        with ir.Location.unknown(root.context):
            # where the results go back: a marker after the nest (finding the
            # nest's successor by listing the block made each call linear in the
            # block, the tile stage quadratic in the number of nests)
            with ir.InsertionPoint.after(root):
                self.anchor = arith.ConstantOp(ir.IndexType.get(), 0).operation
            self.module = ir.Module.create()
            with ir.InsertionPoint(self.module.body):
                fn = func.FuncOp("nem_tile_nest", ([v.type for v in external], []))
                self.entry = fn.add_entry_block()
            with ir.InsertionPoint(self.entry):
                self.ret = func.ReturnOp([]).operation
            self.fn = fn.operation
            self.spare: ir.Operation | None = None
            mapping = list(zip(external, self.entry.arguments))
            for c in constants:
                owner = owner_op(c)
                assert owner is not None, "a constant has a defining op"
                clone = owner.clone(ir.InsertionPoint(self.ret))
                mapping.append((c, clone.results[0]))
        root.move_before(self.ret)
        replace_in(root, mapping)
        self.external = external
        return self

    def ops(self) -> list[ir.Operation]:
        """The ops the temporary function holds now (but its return)."""
        return [o.operation for o in self.entry.operations if o.operation.name != "func.return"]

    def run(self, pipeline: str) -> None:
        """Run the func-level upstream `pipeline` on the temporary function."""
        PassManager.parse(f"func.func({pipeline})").run(self.fn)

    def snapshot(self) -> None:
        """Keep a copy of the function as it is now, for `restore`."""
        if self.spare is not None:
            self.spare.erase()
        self.spare = self.fn.clone(ir.InsertionPoint(self.module.body))

    def restore(self) -> None:
        """Make the function what it was at the last `snapshot` again."""
        assert self.spare is not None, "restore without snapshot"
        fresh = self.spare.clone(ir.InsertionPoint(self.module.body))
        self.fn.erase()
        self.fn = fresh
        self.entry = fresh.regions[0].blocks[0]
        self.ret = next(
            o.operation for o in self.entry.operations if o.operation.name == "func.return"
        )

    def __exit__(self, *exc: object) -> None:
        self.moved = self.ops()
        for op in self.moved:
            op.move_before(self.anchor)
        for arg, value in zip(self.entry.arguments, self.external):
            arg.replace_all_uses_with(value)
        self.anchor.erase()
        del self.module  # the Module object owns (and frees) the temporary function


def run_on_nest(root: ir.Operation, pipeline: str) -> list[ir.Operation]:
    """Run the func-level upstream `pipeline` on the nest `root` alone (in a
    temporary function, `Isolated`); returns the ops that replace the nest,
    in order."""
    with Isolated(root) as iso:
        iso.run(pipeline)
    return iso.moved


def replace_in(root: ir.Operation, mapping: Sequence[tuple[ir.Value, ir.Value]]) -> None:
    def visit(op: ir.Operation) -> ir.WalkResult:
        for old, new in mapping:
            op.replace_uses_of_with(old, new)
        return ir.WalkResult.ADVANCE

    root.walk(visit)


def top_level_nests(fn: ir.Operation) -> list[ir.Operation]:
    return [
        o.operation for o in fn.regions[0].blocks[0].operations if o.operation.name == "affine.for"
    ]


def as_operation(x: ir.Operation | ir.OpView) -> ir.Operation:
    """The generic `ir.Operation` of `x`: the bindings hand out an `OpView`
    subclass for registered ops (a use's owner, a block's ops), and two views
    of one op compare unequal, while `ir.Operation`s compare by identity."""
    return x.operation if isinstance(x, ir.OpView) else x


def owner_op(v: ir.Value) -> ir.Operation | None:
    """The op defining `v` (None for a block argument)."""
    owner = v.owner
    if isinstance(owner, ir.OpView):
        return owner.operation
    return owner if isinstance(owner, ir.Operation) else None


def const_index(v: ir.Value) -> int | None:
    """The value of an `index` constant, else None (loop bounds and steps,
    `flops.py`)."""
    owner = owner_op(v)
    if owner is not None and owner.name == "arith.constant" and isinstance(v.type, ir.IndexType):
        value: int = ir.IntegerAttr(owner.attributes["value"]).value
        return value
    return None


def scf_trips(loop: ir.Operation) -> int | None:
    """The trip count of an `scf.for` of constant bounds and step (the tile
    loops the transform route leaves), else None (`flops`, `l1_plan`)."""
    if loop.name != "scf.for":
        return None
    lo, hi, step = (const_index(v) for v in list(loop.operands)[:3])
    if lo is None or hi is None or not step:
        return None
    return max(0, -(-(hi - lo) // step))


def ops_named(root: ir.Operation, name: str) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found
