"""The share of compute raised to NEM opcodes, by FLOPs (issue 16 "Numbers").

Counted on the tiled program (`STEM.tile.mlir`, what the lowering reads):
every floating-point `arith`/`math` op counts one FLOP per execution, i.e.
times the trip counts of the `affine.for` loops around it (a multiply-add
is two).  A FLOP belongs to the compute nest around it: its outermost
enclosing loop with no DMA inside, the unit the lowering raises or not.  A
nest is escaped when the lowering says so (`loop nest at L:C not raised,
runs as an escape-hatch task`); every other one was raised to NEM opcodes.

On the transform route a FLOP in a linalg op's body counts once per
iteration of the op (the trip counts of the loops it converts to) and of
the `scf.for` tile loops around it.

Trip counts: constant bounds exactly; a bound that moves with an outer loop
(`%i to %i + 32`, `min(%i + 32, 100)`) counts the largest constant
difference of its results, i.e. a partial last tile as a whole one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlir import ir

FLOAT_OPS = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf",
             "arith.negf", "arith.maximumf", "arith.minimumf", "arith.maxnumf",
             "arith.minnumf", "arith.cmpf")
ESCAPED = re.compile(r"(?:loop nest|linalg\.\w+) at (\d+):(\d+) not raised")


@dataclass(frozen=True)
class FlopShare:
    raised: int
    escaped: int

    @property
    def share(self) -> float:
        total = self.raised + self.escaped
        return self.raised / total if total else 1.0

    def remark(self) -> str:
        return (f"compute raised to NEM opcodes by FLOPs: {self.share * 100:.1f}% "
                f"({self.raised} raised, {self.escaped} in escape-hatch kernels)")


def _trips(loop: ir.Operation) -> int:
    lb = ir.AffineMapAttr(loop.attributes["lowerBoundMap"]).value
    ub = ir.AffineMapAttr(loop.attributes["upperBoundMap"]).value
    step = ir.IntegerAttr(loop.attributes["step"]).value
    n_lb = lb.n_inputs
    lb_ops, ub_ops = list(loop.operands[:n_lb]), list(loop.operands[n_lb:])
    best = 1
    if len(lb.results) == 1 and lb_ops == ub_ops[:len(lb_ops)]:
        for r in ub.results:
            # constant when the bounds move together (the map downcasts the expression)
            diff = ir.AffineMap.get(ub.n_dims, ub.n_symbols, [r - lb.results[0]]).results[0]
            if isinstance(diff, ir.AffineConstantExpr):
                best = max(best, -(-diff.value // step))
    return best


def _domain(op: ir.Operation) -> int:
    """Iterations of a linalg op: a clone of it converted to affine loops
    (-convert-linalg-to-affine-loops), its loops' trip counts (the clone is
    then erased)."""
    from nem.compile.tiling import run_on_nest

    clone = op.clone(ir.InsertionPoint(op))
    clone = clone.operation if isinstance(clone, ir.OpView) else clone
    block = op.block
    before = {o.operation for o in block.operations}
    run_on_nest(clone, "convert-linalg-to-affine-loops")
    made = [o.operation for o in block.operations if o.operation not in before]
    n = 1

    def visit(o: ir.Operation) -> ir.WalkResult:
        nonlocal n
        if o.name == "affine.for":
            n *= _trips(o)
        return ir.WalkResult.ADVANCE

    for o in made:
        o.walk(visit)
    for o in reversed(made):
        o.erase()
    return n


def _scf_trips(loop: ir.Operation) -> int:
    from nem.compile.tiling import _const_index

    lo, hi, step = (_const_index(v) for v in list(loop.operands)[:3])
    if lo is None or hi is None or not step:
        return 1
    return -(-(hi - lo) // step)


def _is_float_op(op: ir.Operation) -> bool:
    return op.name in FLOAT_OPS or (op.name.startswith("math.") and any(
        isinstance(r.type, ir.FloatType) for r in op.results))


def flop_share(tiled: str, remarks: list[str]) -> FlopShare:
    """Raised and escaped FLOPs of the tiled program `tiled` given the
    lowering's `remarks` on it."""
    escaped_at = {(int(m.group(1)), int(m.group(2)))
                  for r in remarks for m in [ESCAPED.search(r)] if m}
    counts = {"raised": 0, "escaped": 0}
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(tiled)

        dma: dict[ir.Operation, bool] = {}

        def has_dma(loop: ir.Operation) -> bool:
            if loop in dma:
                return dma[loop]
            found = False

            def visit(op: ir.Operation) -> ir.WalkResult:
                nonlocal found
                found = found or op.name in ("affine.dma_start", "affine.dma_wait")
                return ir.WalkResult.INTERRUPT if found else ir.WalkResult.ADVANCE

            loop.walk(visit)
            dma[loop] = found
            return found

        def visit(op: ir.Operation) -> ir.WalkResult:
            if not _is_float_op(op):
                return ir.WalkResult.ADVANCE
            n, root, parent = 1, None, op.parent
            while parent is not None and parent.name != "func.func":
                if parent.name == "affine.for":
                    n *= _trips(parent.operation)
                    if not has_dma(parent.operation):
                        root = parent.operation
                elif parent.name == "scf.for":       # the transform route's tile loops
                    n *= _scf_trips(parent.operation)
                elif parent.name.startswith("linalg."):
                    n *= domains[parent.operation]
                    root = parent.operation
                parent = parent.parent
            loc = root.location if root is not None else op.location
            key = "escaped" if (loc.start_line, loc.start_col) in escaped_at else "raised"
            counts[key] += n
            return ir.WalkResult.ADVANCE

        linalg: list[ir.Operation] = []

        def collect(op: ir.Operation) -> ir.WalkResult:
            if op.name.startswith("linalg.") and op.name != "linalg.yield":
                linalg.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(collect)
        domains = {op: _domain(op) for op in linalg}
        module.operation.walk(visit)
    return FlopShare(counts["raised"], counts["escaped"])
