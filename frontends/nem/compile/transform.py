"""The transform-dialect tiling route (`nem-compile --route transform`).

Each linalg op of the bufferized entry function is tiled by a transform
script run in-process with the upstream interpreter
(`mlir.dialects.transform.interpreter.apply_named_sequence`):

    %op = transform.structured.match attributes{nem_tile = K} in %root
    %t, %loops:n = transform.structured.tile_using_for %op tile_sizes [s0, 0, s2, ..]
    %rest = transform.loop.peel %loops#j     (each loop whose tile does not divide it)

Tile sizes are the affine route's (D-COMPILE-TILES: `nem.compile.tiling`
sizes the op's loop nest, as `-convert-linalg-to-affine-loops` would build
it, to the L1 budget; `--tile-sizes` overrides); a size equal to its loop's
extent is 0 (not tiled).  The tiles are `scf.for` loops over static
subviews, which the lowering takes (D-LOW-SCF), as it takes the linalg ops
themselves; an op the lowering's parser lacks (`linalg.map`) is generalized
to `linalg.generic` first.  Each tile's operands are staged in L1 by

    %p = transform.structured.promote %t {operands_to_promote = [0, .., n-1], memory_space = 2}

(an L1 allocation seen through `memref.view`, `linalg.copy` in and out:
D-LOW-VIEW), before peeling, so both the full and the peeled tiles are
staged; an op whose loops fit L1 whole is tiled as one tile to be staged
too.  No double buffering and no engine split on this route (the affine
route has them).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects.transform import interpreter
from mlir.passmanager import PassManager

TAG = "nem_tile"
NO_CAST_FOLD = ("linalg.transpose",)
"""Named ops that keep the `memref.cast`s `structured.promote` puts on their
operands (they do not fold them as `linalg.generic` does; xDSL does not
parse `memref.cast`): generalized before tiling."""


def _linalg_ops(fn: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in fn.regions[0].blocks[0].operations
            if o.operation.name.startswith("linalg.")]


def _sizes(fn: ir.Operation, device, options) -> list[tuple[list[int], list[int]] | None]:
    """(extents, tile sizes) of each linalg op of `fn`, in order: a copy of the
    function converted to affine loops, one nest per op, sized as the affine
    route sizes it (None: an op without loops)."""
    from nem.compile import tiling

    copy = ir.Module.parse(str(fn), fn.context)
    PassManager.parse("builtin.module(func.func(convert-linalg-to-affine-loops))").run(
        copy.operation)
    nests = tiling.top_level_nests(copy.body.operations[0].operation)
    ops = _linalg_ops(fn)
    if len(nests) != len(ops):
        from nem.compile.pipeline import CompileError

        raise CompileError("tile", "not supported: --route transform on a function whose "
                           f"linalg ops ({len(ops)}) do not each become one loop nest "
                           f"({len(nests)}); use --route affine")
    budget = tiling.l1_budget(device, options.pipeline)
    out: list[tuple[list[int], list[int]] | None] = []
    for nest in nests:
        band = tiling.analyze_band(nest)
        if band is None or band.inner:
            out.append(None)
            continue
        out.append((band.extents, tiling.band_sizes(band, options, budget)))
    return out


def script(plans: list[tuple[int, list[int], list[int], bool, int]]) -> str:
    """The transform module tiling op `nem_tile = K` of each (K, extents,
    sizes, generalize first, operands), then staging the tile's operands in
    L1 (`structured.promote` into memory space FAST_SPACE), then peeling."""
    from nem.compile.pipeline import FAST_SPACE

    lines = ["module attributes {transform.with_named_sequence} {",
             "  transform.named_sequence @__transform_main("
             "%root: !transform.any_op {transform.readonly}) {"]
    for k, extents, sizes, generalize, operands in plans:
        # a tile size equal to its loop's extent: not tiled, except that an
        # op with no loop tiled gets one tile (its operands become subviews,
        # which promote stages)
        tiled = [s if s < e else 0 for s, e in zip(sizes, extents)]
        if not any(tiled):
            tiled = list(extents)
        n = sum(1 for s in tiled if s)
        results = ", ".join(["!transform.any_op"] * (n + 1))
        match = f"%op{k}_m" if generalize else f"%op{k}"
        lines.append(
            f"    {match} = transform.structured.match attributes{{{TAG} = {k} : i64}} in %root "
            ": (!transform.any_op) -> !transform.any_op")
        if generalize:
            lines.append(f"    %op{k} = transform.structured.generalize {match} "
                         ": (!transform.any_op) -> !transform.any_op")
        lines += [
            f"    %t{k}, %l{k}:{n} = transform.structured.tile_using_for %op{k} tile_sizes "
            f"[{', '.join(map(str, tiled))}] : (!transform.any_op) -> ({results})",
            f"    %p{k} = transform.structured.promote %t{k} {{operands_to_promote = "
            f"[{', '.join(map(str, range(operands)))}], memory_space = {FAST_SPACE} : i64}} "
            ": (!transform.any_op) -> !transform.any_op"]
        # peel innermost first: peeling a loop invalidates the handles nested in it
        loops = [(j, s, e) for j, (s, e) in enumerate((s, e) for s, e in zip(tiled, extents)
                                                     if s)]
        for j, s, e in reversed(loops):
            if e % s:
                lines += [
                    f"    %f{k}_{j} = transform.cast %l{k}#{j} : !transform.any_op to "
                    "!transform.op<\"scf.for\">",
                    f"    %m{k}_{j}, %r{k}_{j} = transform.loop.peel %f{k}_{j} : "
                    "(!transform.op<\"scf.for\">) -> (!transform.any_op, !transform.any_op)"]
    lines += ["    transform.yield", "  }", "}"]
    return "\n".join(lines)


def tile_module(module: ir.Module, entry: ir.Operation, device, options) -> str:
    """Tile `entry`'s linalg ops in place; returns the transform script run."""
    from nem.compile.lower import xdsl_context
    from nem.compile.tiling import run_on_nest

    ctx = xdsl_context()
    plans = []
    for k, (op, plan) in enumerate(zip(_linalg_ops(entry), _sizes(entry, device, options))):
        # ops the lowering's parser lacks (linalg.map) become linalg.generic
        generalize = ctx.get_optional_op(op.name) is None or op.name in NO_CAST_FOLD
        if plan is None:
            if generalize:
                run_on_nest(op, "linalg-generalize-named-ops")
            continue
        op.attributes[TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)
        plans.append((k, *plan, generalize, len(op.operands)))
    text = script(plans)
    if plans:
        transform = ir.Module.parse(text, module.context)
        seq = next(o for o in transform.body.operations
                   if o.operation.name == "transform.named_sequence")
        interpreter.apply_named_sequence(module.operation, seq, transform)
        for op in _linalg_ops_deep(entry):
            if TAG in op.attributes:
                del op.attributes[TAG]
    PassManager.parse("builtin.module(canonicalize,cse)").run(module.operation)
    return text


def _linalg_ops_deep(fn: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg."):
            found.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    return found
