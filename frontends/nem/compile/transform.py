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
too.

Engines (D-COMPILE-ENGINES, as on the affine route): the op whose nest the
affine route would split over N engines (`nem.compile.engines.choose_split`
on the same affine copy) is split into N ops along that loop first,

    %s = transform.structured.split %op after CHUNK {dimension = D}
    %part0, %rest = transform.split_handle %s        (and again on %rest)

and part k is tiled and promoted into memory space 2 + k (engine k's L1);
an op left whole goes to the next engine round-robin.  A split the affine
route would privatize (a sum over the split loop, `Split.partials`) is not
made here: the op stays whole (D-COMPILE-TRANSFORM-ENGINES).  Double
buffering: promote allocates each tile's L1 buffers in the tile loop's body,
so the lowering's `pipeline-tiles` option (D-LOW-PIPE-BODY) runs two
iterations of such a loop at once, each with its own instance of the
buffers; `nem-compile --no-pipeline` leaves it off.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects.transform import interpreter
from mlir.passmanager import PassManager

from nem.compile.pipeline import FAST_SPACE

TAG = "nem_tile"
NO_CAST_FOLD = ("linalg.transpose",)
"""Named ops that keep the `memref.cast`s `structured.promote` puts on their
operands (they do not fold them as `linalg.generic` does; xDSL does not
parse `memref.cast`): generalized before tiling."""


def _linalg_ops(fn: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in fn.regions[0].blocks[0].operations
            if o.operation.name.startswith("linalg.")]


@dataclass(frozen=True)
class Plan:
    """How one linalg op is tiled: its loops' extents, tile sizes, and the
    engine of each part (one part when the op is not split)."""

    extents: list[int]
    sizes: list[int]
    engines: list[int]
    split_dim: int = 0
    chunk: int = 0
    """Parts 0..n-2 have `chunk` iterations of loop `split_dim`, the last the rest."""

    def part_extents(self, k: int) -> list[int]:
        if len(self.engines) == 1:
            return self.extents
        ext = list(self.extents)
        ext[self.split_dim] = min(self.chunk, self.extents[self.split_dim] - k * self.chunk)
        return ext


def _sizes(fn: ir.Operation, device, options, engines: int = 1) -> list[Plan | None]:
    """The plan of each linalg op of `fn`, in order: a copy of the function
    converted to affine loops, one nest per op, sized as the affine route
    sizes it and split over the engines as it splits it (None: an op
    without loops)."""
    from nem.compile import tiling
    from nem.compile.engines import choose_split, preloaded_memrefs

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
    preloaded = preloaded_memrefs(copy.body.operations[0].operation)
    out: list[Plan | None] = []
    turn, ready = 0, 0
    for nest in nests:
        band = tiling.analyze_band(nest)
        if band is None or band.inner:
            out.append(None)
            continue
        sizes = tiling.band_sizes(band, options, budget)
        split, ready = choose_split(band, engines, preloaded, ready)
        if split is None or split.partials is not None:
            out.append(Plan(band.extents, sizes, [turn % engines]))
            turn += 1
        else:
            out.append(Plan(band.extents, sizes, list(range(split.parts)), split.loop,
                            split.chunk))
    return out


def script(plans: list[tuple[int, Plan, bool, int]]) -> str:
    """The transform module tiling op `nem_tile = K` of each (K, plan,
    generalize first, operands): split over the engines, then each part
    tiled, its tile's operands staged in its engine's L1 (`structured.promote`
    into memory space FAST_SPACE + engine), then peeled."""
    lines = ["module attributes {transform.with_named_sequence} {",
             "  transform.named_sequence @__transform_main("
             "%root: !transform.any_op {transform.readonly}) {"]
    for k, plan, generalize, operands in plans:
        match = f"%op{k}_m" if generalize else f"%op{k}"
        lines.append(
            f"    {match} = transform.structured.match attributes{{{TAG} = {k} : i64}} in %root "
            ": (!transform.any_op) -> !transform.any_op")
        if generalize:
            lines.append(f"    %op{k} = transform.structured.generalize {match} "
                         ": (!transform.any_op) -> !transform.any_op")
        parts = [f"%op{k}"]
        for j in range(1, len(plan.engines)):   # split off part j-1, keep splitting the rest
            lines += [
                f"    %s{k}_{j} = transform.structured.split {parts[-1]} after {plan.chunk} "
                f"{{dimension = {plan.split_dim}}} : !transform.any_op",
                f"    %op{k}p{j - 1}, %op{k}r{j} = transform.split_handle %s{k}_{j} "
                ": (!transform.any_op) -> (!transform.any_op, !transform.any_op)"]
            parts[-1:] = [f"%op{k}p{j - 1}", f"%op{k}r{j}"]
        for j, (handle, engine) in enumerate(zip(parts, plan.engines)):
            lines += _tile_part(f"{k}_{j}", handle, plan.part_extents(j), plan.sizes,
                                operands, FAST_SPACE + engine)
    lines += ["    transform.yield", "  }", "}"]
    return "\n".join(lines)


def _tile_part(tag: str, handle: str, extents: list[int], sizes: list[int], operands: int,
               space: int) -> list[str]:
    """Tile, promote and peel one op (or part of a split op)."""
    # a tile size equal to its loop's extent: not tiled, except that an op
    # with no loop tiled gets one tile (its operands become subviews, which
    # promote stages)
    tiled = [s if s < e else 0 for s, e in zip(sizes, extents)]
    if not any(tiled):
        tiled = list(extents)
    n = sum(1 for s in tiled if s)
    results = ", ".join(["!transform.any_op"] * (n + 1))
    lines = [
        f"    %t{tag}, %l{tag}:{n} = transform.structured.tile_using_for {handle} tile_sizes "
        f"[{', '.join(map(str, tiled))}] : (!transform.any_op) -> ({results})",
        f"    %p{tag} = transform.structured.promote %t{tag} {{operands_to_promote = "
        f"[{', '.join(map(str, range(operands)))}], memory_space = {space} : i64}} "
        ": (!transform.any_op) -> !transform.any_op"]
    # peel innermost first: peeling a loop invalidates the handles nested in it
    loops = [(j, s, e) for j, (s, e) in enumerate((s, e) for s, e in zip(tiled, extents) if s)]
    for j, s, e in reversed(loops):
        if e % s:
            lines += [
                f"    %f{tag}_{j} = transform.cast %l{tag}#{j} : !transform.any_op to "
                "!transform.op<\"scf.for\">",
                f"    %m{tag}_{j}, %r{tag}_{j} = transform.loop.peel %f{tag}_{j} : "
                "(!transform.op<\"scf.for\">) -> (!transform.any_op, !transform.any_op)"]
    return lines


def tile_module(module: ir.Module, entry: ir.Operation, device, options, engines: int = 1
                ) -> str:
    """Tile `entry`'s linalg ops in place, spread over `engines`; returns the
    transform script run."""
    from nem.compile.lower import xdsl_context
    from nem.compile.tiling import run_on_nest

    ctx = xdsl_context()
    plans = []
    for k, (op, plan) in enumerate(zip(_linalg_ops(entry),
                                       _sizes(entry, device, options, engines))):
        # ops the lowering's parser lacks (linalg.map) become linalg.generic
        generalize = ctx.get_optional_op(op.name) is None or op.name in NO_CAST_FOLD
        if plan is None:
            if generalize:
                run_on_nest(op, "linalg-generalize-named-ops")
            continue
        op.attributes[TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)
        plans.append((k, plan, generalize, len(op.operands)))
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
