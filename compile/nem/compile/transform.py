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
themselves; an op the lowering's parser lacks (`linalg.map`), or one the
lowering raises from its generic form (grouped convolutions:
`GENERALIZED_KNOWN`, as the parser does for `.mlir` input, D-LOW-UPSTREAM),
is generalized to `linalg.generic` first.  Each tile's operands are staged in L1 by

    %p = transform.structured.promote %t {operands_to_promote = [0, .., n-1], memory_space = 2}

(an L1 allocation seen through `memref.view`, `linalg.copy` in and out:
D-LOW-VIEW), before peeling, so both the full and the peeled tiles are
staged; an op whose loops fit L1 whole is tiled as one tile to be staged
too.  A `linalg.transpose` stages its output only (`UNSTAGED`): each
tile reads its permuted box from where the input is, one transfer.

Engines (D-COMPILE-ENGINES, as on the affine route): the op whose nest the
affine route would split over N engines (`nem.compile.engines.choose_split`
on the same affine copy) is split into N ops along that loop first,

    %s = transform.structured.split %op after CHUNK {dimension = D}
    %part0, %rest = transform.split_handle %s        (and again on %rest)

and part k is tiled and promoted into memory space 2 + k (engine k's L1);
an op left whole goes to the next engine round-robin
(D-COMPILE-TRANSFORM-ENGINES).  A split the affine route privatizes (a sum
over the split loop, `Split.partials`: a matmul split along its reduction
loop) is privatized here too (D-COMPILE-TRANSFORM-PARTIALS): the op is split
by `transform.structured.split` first, then parts 1..N-1 get zeroed
accumulators of their own (a `linalg.fill` with 0 each) and one
`linalg.generic` after the parts adds them into the output, as the affine
route's `engines._privatize` does; each of these ops is pinned to its
engine (`nem_engine`) and the function is planned again.  Upstream's
`structured.split_reduction` and `tile_reduction_using_for/forall` take
tensors only, and this route tiles the bufferized function.  Double
buffering: promote allocates each tile's L1 buffers in the tile loop's body,
so the lowering's `pipeline-tiles` option (D-LOW-PIPE-BODY) runs two
iterations of such a loop at once, each with its own instance of the
buffers; `nem-compile --no-pipeline` leaves it off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects import arith, linalg, memref
from mlir.passmanager import PassManager

from nem.compile import fusion_groups, zero_init
from nem.compile.l1_plan import Need
from nem.compile.plan import Plan
from nem.compile.target import variant_types
from nem.compile.transform_scripts import (
    PIN,
    TAG,
    Parsed,
    apply_parsed,
    apply_transform,
    parse_transform,
    script,
    split_script,
)
from nem.frontends.upstream_dialects.upstream_ops import GENERALIZED_KNOWN

if TYPE_CHECKING:
    from nem.compile.engines import Clock, Split
    from nem.compile.nest_ir import Band
    from nem.compile.options import CompileOptions
    from nem.dialect.device_model import Device

NO_CAST_FOLD = ("linalg.transpose", "linalg.broadcast", "linalg.reduce")
"""Named ops that keep the `memref.cast`s `structured.promote` puts on their
operands (they do not fold them as `linalg.generic` does; xDSL does not
parse `memref.cast`): generalized before tiling."""


def linalg_ops(fn: ir.Operation) -> list[ir.Operation]:
    return [
        o.operation
        for o in fn.regions[0].blocks[0].operations
        if o.operation.name.startswith("linalg.") and o.operation.name != "linalg.softmax"
    ]


def has_loops(op: ir.Operation) -> bool:
    """Whether a linalg op iterates: one of its operands has a dimension
    (an op on 0-d operands only, e.g. arithmetic on a reduction to a scalar,
    becomes no loop nest)."""
    return any(
        isinstance(v.type, ir.ShapedType) and ir.ShapedType(v.type).rank > 0 for v in op.operands
    )


def plan_ops(
    fn: ir.Operation, device: Device, options: CompileOptions, engines: int = 1
) -> list[Plan | None]:
    """The plan of each linalg op of `fn`, in order: a copy of the function
    converted to affine loops, one nest per op, sized as the affine route
    sizes it and split over the engines as it splits it (None: an op
    without loops)."""
    return _plan_ops(fn, device, options, engines).plans


@dataclass
class Planned:
    """`plan_ops`'s plans, with what planning the same function again needs
    to keep a prefix of them: the round-robin turn and the engines' estimated
    finish (`choose_split`'s `Clock`) after each op, and the positions of
    the function's arguments that nothing writes (`preloaded_memrefs`)."""

    plans: list[Plan | None]
    after: list[tuple[int, Clock]]
    preloaded: frozenset[int]


def _plan_ops(
    fn: ir.Operation,
    device: Device,
    options: CompileOptions,
    engines: int = 1,
    reuse: tuple[Planned, int] | None = None,
) -> Planned:
    """`plan_ops`; reuse = (an earlier call's result, n): the first n ops of
    `fn` are those of that call, unchanged (the privatization rewrites ops
    from the first one it splits on: `tile_module`), so their plans are its
    plans when the preloaded arguments are the same too (each plan depends
    on its op, the ops before it through the turn and the clock, and those
    arguments only)."""
    from nem.compile import nest_ir, tile_cost, tiling
    from nem.compile.engines import (
        Clock,
        choose_split,
        mac_bytes,
        narrow_sums,
        part_sizes,
        preloaded_memrefs,
    )

    # the whole module: the function may read its globals (constant weights)
    copy = ir.Module.parse(str(fn.parent), fn.context)
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    cfn = next(
        o.operation
        for o in copy.body.operations
        if o.operation.name == "func.func"
        and ir.StringAttr(o.operation.attributes["sym_name"]).value == name
    )
    convert = PassManager.parse("builtin.module(func.func(convert-linalg-to-affine-loops))")
    convert.enable_verifier(False)  # a copy, to read the nests only (the parse verified it)
    convert.run(copy.operation)
    all_nests = nest_ir.top_level_nests(cfn)
    nests = iter(all_nests)
    ops = linalg_ops(fn)
    looped = [op for op in ops if has_loops(op)]
    if len(all_nests) != len(looped):
        from nem.compile.errors import CompileError

        raise CompileError(
            "tile",
            "not supported: --route transform on a function whose "
            f"linalg ops with loops ({len(looped)}) do not each become one "
            f"loop nest ({len(all_nests)}); use --route affine",
        )
    budget = tiling.l1_budget(device, options.pipeline)
    dmas = device.units("DMA")  # the tile estimate splits copies over them
    preloaded = preloaded_memrefs(cfn)
    per_mac = mac_bytes(dmas, device.units("NMU"))
    unwritten = frozenset(ir.BlockArgument(a).arg_number for a in preloaded)
    turn, clock = 0, Clock.start(engines)
    forced = dict(options.op_tile_sizes)
    shares = dict(options.op_l1_scales)
    uncut: dict[int, list[int]] = {}  # op -> its sizes before `channel_cut`
    retiled: dict[int, Callable[[list[int]], bool]] = {}  # op -> `tile_cost.retiled_wins`
    steps = fusion_groups.tile_steps(fn, ops) if options.fuse else {}
    one_tile: dict[int, bool] = {}  # contraction -> every part one tile
    chooses = replace(options, tile_sizes=None)  # the compiler's own sizes (`Plan.own`)

    def plan_of(op: ir.Operation, key: str) -> Plan | None:
        nonlocal turn, clock
        if not has_loops(op):  # on 0-d operands only: nothing to tile, lowered as is
            return None
        band = nest_ir.analyze_band(next(nests))
        if band is None or band.inner:
            return None
        given = list(forced[key]) if key in forced else None  # --tune's (D-COMPILE-TUNE)
        share = shares.get(key, 1.0)  # --tune's L1 share: the rules run on less of L1
        own = max(int(budget * share), 1)
        pin = ir.IntegerAttr(op.attributes[PIN]).value if PIN in op.attributes else None
        whole = turn % engines if pin is None else pin
        most, before = engines if pin is None else 1, clock
        sized = tiling.sizer(band, options, own, dmas)
        # tuned or the user's sizes (`given`, `--tile-sizes`) tile every
        # part: no part of one tile
        split, clock = choose_split(
            band,
            most,
            preloaded,
            clock,
            whole,
            per_mac,
            sized,
            None if given or options.tile_sizes else lambda s: tiling.fits(band, s, own),
        )
        parts = _parts(band, split)
        if split is not None and split.whole:
            sizes = part_sizes(band, split.loop, split.chunk)
            # parts of one tile each only where the split the byte spans
            # allow is no reduction split with partial sums (those stand,
            # D-COMPILE-TRANSFORM-PARTIALS, session 28) and `tile_time`
            # estimates it slower, tiled or not: the channel parts' loops
            # jam by their elements (D-COMPILE-ENGINES, session 57)
            other, other_clock = choose_split(band, most, preloaded, before, whole, per_mac, sized)
            other_parts = _parts(band, other)
            other_sizes = sized(other_parts)
            mine = tile_cost.part_cycles(band, sizes, parts, dmas)
            theirs = tile_cost.part_cycles(band, other_sizes, other_parts, dmas)
            if (
                other is None
                or other.partials is not None
                or mine is None
                or theirs is None
                or mine >= theirs
            ):
                split, clock, parts, sizes = other, other_clock, other_parts, other_sizes
        else:
            sizes = given or sized(parts)
        if (
            op.name.startswith("linalg.conv")
            and not given
            and not options.tile_sizes
            and (split is None or split.partials is None)
        ):
            # one-tile parts of a convolution cut along their output channels
            # (session 45; not the user's sizes or partial sums, not a
            # matmul: the samples' small ones, ff2's 32 x 16 weights, would
            # be cut into tiles of a few hundred bytes; channel parts too
            # since their loops jam by elements, session 57; a pinned part
            # of a partial-sum split, planned here whole: not a window's)
            whole_sizes = list(sizes)
            nmus, epilogue = device.units("NMU"), steps.get(len(out), 0)
            sizes = tile_cost.channel_cut(
                band, sizes, parts, own, dmas, nmus, epilogue, options.split_nmus, pin is not None
            )
            if sizes != whole_sizes:
                uncut[len(out)] = whole_sizes
                retiled[len(out)] = partial(tile_cost.retiled_wins, band, sizes, parts, dmas)
        if nest_ir.is_contraction(band):
            lengths = [max((parts or {}).get(i, [e])) for i, e in enumerate(band.extents)]
            one_tile[len(out)] = all(s >= x for s, x in zip(sizes, lengths))

        def resize(
            b: int,
            band: Band = band,
            keep: ir.Module = copy,
            parts: dict[int, list[int]] | None = parts,
            sizes: list[int] = sizes,
        ) -> list[int]:
            # (keeps the copy alive) the first budget's sizes are `sizes`
            # (tuned ones stand for it; l1_plan.fit starts there: not
            # searched again), smaller ones are L1's
            if b == budget:
                return list(sizes)
            return tiling.band_sizes(band, options, max(int(b * share), 1), parts, dmas)

        narrow = narrow_sums(band)
        free = (
            (lambda b: tiling.band_sizes(band, chooses, max(int(b * share), 1), parts, dmas))
            if options.tile_sizes
            else None
        )
        if pin is not None:
            return Plan(band.extents, sizes, [pin], resize=resize, narrow=narrow, own=free)
        if split is None:
            turn += 1
            engine = [(turn - 1) % engines]
            return Plan(band.extents, sizes, engine, resize=resize, narrow=narrow, own=free)
        return Plan(
            band.extents,
            sizes,
            list(range(split.parts)),
            split.loop,
            split.chunk,
            split.partials is not None,
            resize,
            narrow,
            free,
        )

    earlier, n = reuse if reuse is not None and reuse[0].preloaded == unwritten else (None, 0)
    out: list[Plan | None] = []
    after: list[tuple[int, Clock]] = []
    last = -1  # the last contraction planned (-1: none yet)
    for k, (op, key) in enumerate(zip(ops, op_keys(ops))):
        if earlier is not None and k < n:
            if has_loops(op):
                next(nests)  # its nest, as the earlier call planned it
            out.append(earlier.plans[k])
            turn, clock = earlier.after[k]
        else:
            plan = plan_of(op, key)
            if plan is not None and k in uncut:
                plan = replace(plan, one_tile=uncut[k], retiled=retiled[k])
            out.append(plan)
        if k in one_tile:
            if one_tile[k] and last in uncut and (cut := out[last]) is not None:
                out[last] = cut.whole(budget)
            last = k
        after.append((turn, clock))
    return Planned(out, after, unwritten)


def _parts(band: Band, split: Split | None) -> dict[int, list[int]] | None:
    """Loop -> the extents of the parts `split` cuts it into (None: none)."""
    if split is None:
        return None
    last = band.extents[split.loop] - (split.parts - 1) * split.chunk
    return {split.loop: sorted({split.chunk, last})}


def op_keys(ops: list[ir.Operation]) -> list[str]:
    """A name for each op that the tensor program and the bufferized one give
    alike (`--tune`'s, D-COMPILE-TUNE): its name, its location (the ONNX
    node) and how many ops of that name and location come before it."""
    seen: dict[str, int] = {}
    keys = []
    for op in ops:
        base = f"{op.name} {op.location}"
        seen[base] = seen.get(base, 0) + 1
        keys.append(f"{base} #{seen[base]}")
    return keys


def tile_module(
    module: ir.Module,
    entry: ir.Operation,
    device: Device,
    options: CompileOptions,
    engines: int = 1,
    progress: Callable[[str, int, int], None] | None = None,
) -> str:
    """Tile `entry`'s linalg ops in place, spread over `engines`; returns the
    transform scripts run (the split script of each round of
    privatization, then the tiling one)."""
    from nem.compile import dma_split, fill_tiles, hoist, nmu_split
    from nem.compile.checkpoints import checkpoint
    from nem.compile.lower import xdsl_context
    from nem.compile.nest_ir import run_on_nest

    ctx = xdsl_context()
    texts = []
    seen = Seen()
    reuse: tuple[Planned, int] | None = None
    if options.fuse_chains:  # elementwise chains into one op each (D-COMPILE-FUSE-CHAIN)
        from nem.compile.chains import fuse_chains

        fuse_chains(entry, options.fuse)
    while True:  # each round replaces the ops it privatizes by pinned ones
        ops = linalg_ops(entry)
        planned = _plan_ops(entry, device, options, engines, reuse)
        sized = planned.plans
        todo = [
            (k, op, plan)
            for k, (op, plan) in enumerate(zip(ops, sized))
            if plan is not None and plan.partials
        ]
        if not todo:
            break
        texts.append(_privatize(module, entry, todo))
        reuse = (planned, todo[0][0])  # the ops before the first one privatized: unchanged
        checkpoint("partial sums", module)  # the stage bisector's steps (nem.compile.bisect)
    if options.fuse:  # bias and epilogues into the convolutions' tiles (D-COMPILE-FUSE-L1)
        from nem.compile import fusion, tiling

        budget = tiling.l1_budget(device, options.pipeline)
        ops, sized = fusion.fuse(entry, ops, sized, budget, prologues=options.hoist)
    # a constant fill and the op accumulating into it: the fill is tiled after
    # the op, and only if the op's tiles cannot fill their outputs in L1
    # (D-COMPILE-ZERO-INIT)
    fills = {
        k: j
        for k, j in zero_init.pairs(entry.regions[0].blocks[0], ops).items()
        if (plan := sized[k]) is not None
        and sized[j] is not None
        and (len(plan.engines) == 1 or plan.split_dim not in zero_init.reductions(ops[k]))
    }

    def tile_one(k: int) -> bool:
        """Tile op k (True: its output's fill is no longer needed)."""
        op, plan = ops[k], sized[k]
        # ops the lowering's parser lacks (linalg.map) or raises from their
        # generic form (grouped convolutions) become linalg.generic
        generalize = (
            ctx.get_optional_op(op.name) is None
            or op.name in NO_CAST_FOLD
            or op.name in GENERALIZED_KNOWN
        )
        if plan is None:
            for key in (TAG, PIN):  # (those of tiled ops: `_tile_op` drops them)
                if key in op.attributes:
                    del op.attributes[key]
            if generalize:
                run_on_nest(op, "linalg-generalize-named-ops")
            return False
        op.attributes[TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)
        if k in fills:  # the mark holds the fill's constant, for its tiles' fills
            value = zero_init.fill_value(ops[fills[k]])
            assert value is not None  # (what `pairs` pairs)
            op.attributes[zero_init.MARK] = value
        where = str(op.location)
        text, zeroed = _tile_op(op, k, plan, generalize, device, options, seen)
        texts.append(text)
        checkpoint(f"op {k + 1}/{len(ops)}", module, f"{where}, tiled by\n{text}")
        return zeroed

    deferred = set(fills.values())
    for k in range(len(ops)):
        if progress is not None:
            progress("ops tiled", k, len(ops))
        if k in deferred:
            continue
        zeroed = tile_one(k)
        if k in fills:
            if zeroed:
                ops[fills[k]].erase()
            else:
                tile_one(fills[k])
    # verified once, after both passes (the pass manager's verifier checks
    # the whole module after each pass: 0.3 s each on DenseNet-121)
    tidy = PassManager.parse("builtin.module(canonicalize,cse)")
    tidy.enable_verifier(False)
    tidy.run(module.operation)
    if options.fuse:  # on the tiles' static shapes (D-COMPILE-FUSE-L1)
        fusion.finish(entry, options.hoist)
    # a peeled tile reads the weights its loop staged (D-COMPILE-SHARE-STAGED);
    # on the canonical IR, where the peel is straight-line code beside the loop
    if options.share_staged:
        hoist.share_copies(entry)
        fill_tiles.share_fill_tiles(entry)  # a border's fill tiles (D-COMPILE-FILL-TILES)
    module.operation.verify()
    # large convolutions over the engine's NMUs (D-COMPILE-NMU-SPLIT): the
    # straight-line ones always, the tile loops' unless `--no-split-nmus`;
    # opt-in (D-COMPILE-SPLIT-OPT): large staging copies over the engine's DMAs
    # (D-COMPILE-DMA-SPLIT; static shapes now), before the NMU split
    nmus, native = device.units("NMU"), variant_types(device, "conv2d")
    split = nmu_split.split_convs(entry, nmus, native, looped=False)
    if options.split_units:
        split += dma_split.split_copies(entry, device.units("DMA"))
    if options.split_nmus:
        split += nmu_split.split_convs(entry, nmus, native)
    if split:
        tidy.run(module.operation)
        module.operation.verify()
    return "\n".join(texts)


def _tile_op(
    op: ir.Operation,
    k: int,
    plan: Plan,
    generalize: bool,
    device: Device,
    options: CompileOptions,
    seen: Seen,
) -> tuple[str, bool]:
    """Tile op `nem_tile = k` by its plan, in a temporary function of its own
    (`nest_ir.Isolated`), with sizes whose L1 need fits the device
    (D-COMPILE-L1: tiled again with a smaller budget while it does not);
    returns the script applied.  One script per op, applied to that op alone
    (D-COMPILE-TRANSFORM-SCALE): its `structured.match` walks the op, not the
    whole function, and the interpreter tracks this op's handles only, so
    the stage is linear in the number of ops (one script for all of them
    was quadratic: 1000 ops, 18 s).  The op is tagged 0 and the script run
    is the one of `nem_tile = 0` (the tag is stripped after tiling), so that
    ops tiled alike share what `seen` keeps of them: DenseNet-121 repeats
    its layers' shapes.  An op marked `zero_init.MARK` (the constant of
    the fill dropped) fills its tiles' outputs in L1 with it if the sizes
    leave its reduction loops whole (the bool returned: whether it did)."""
    from nem.compile import flops, hoist, l1_plan, nest_ir, tiling

    applied: list[str] = []
    zeroed = [False]  # the last attempt's tiles fill their outputs (D-COMPILE-ZERO-INIT)
    operands = len(op.operands)
    staged = (operands - 1,) if op.name in UNSTAGED else tuple(range(operands))
    fill = zero_init.MARK in op.attributes
    value = op.attributes[zero_init.MARK] if fill else None  # the fill's constant
    reductions = zero_init.reductions(op) if fill else set()
    macs = flops.domain(op) if zero_init.reductions(op) else 0  # l1_plan.compute_bound
    zero = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)
    with nest_ir.Isolated(op) as iso:
        pristine = op.clone(ir.InsertionPoint(op))  # tiled again from this copy
        pristine.attributes[TAG] = zero
        if fill:
            del pristine.attributes[zero_init.MARK]
        op.erase()
        base = set(iso.ops())  # the copy and the cloned constants
        before = str(iso.fn)  # what each attempt starts from
        last: list[ir.Operation] = []  # what the last attempt made

        def tile(sizes: list[int]) -> l1_plan.Need:
            for old in reversed(last):  # users before what they use
                old.erase()
            target = pristine.clone(ir.InsertionPoint(iso.ret))
            if fill and zero_init.untiled(reductions, plan.extents, sizes):
                target.attributes[zero_init.MARK] = ir.UnitAttr.get()
            tiled = replace(plan, sizes=sizes)
            marked = zero_init.MARK in target.attributes
            keep = (zero_init.MARK,) if marked and generalize else ()
            run = script([(0, tiled, generalize, staged)], keep)
            if run not in seen.scripts:
                seen.scripts[run] = parse_transform(run, target.context)
            apply_parsed(target, seen.scripts[run])
            zeroed[0] = zero_init.stage_zeros(iso.fn, value)
            if options.hoist:  # weight tiles out of the spatial loops
                hoist.hoist_copies(iso.fn)
            applied[:] = [script([(k, tiled, generalize, staged)], keep)]
            last[:] = [o for o in iso.ops() if o not in base]
            # the markers go (the tiled ops carry the op's) as it measures
            known = seen.needs.get((before, run))
            if known is not None:
                l1_plan.strip(last, (TAG, PIN))
                if known[1]:
                    l1_plan.mark(l1_plan.innermost_loops(last), known[1])
                return known[0]
            known = seen.needs[before, run] = l1_plan.plan(
                last,
                options.pipeline,
                device.topology.l1_size_bytes,
                device.units("DMA"),
                macs,
                device.units("NMU"),
                strip=(TAG, PIN),
            )
            return known[0]

        budget, capacity = tiling.l1_budget(device, options.pipeline), device.topology.l1_size_bytes
        plan = l1_plan.one_tile_retiled(plan, budget, capacity, tile)
        assert plan.resize is not None
        try:
            halve = not l1_plan.compute_bound_op(
                pristine, macs, device.units("NMU"), device.units("DMA")
            )
            sizes = l1_plan.fit(budget, capacity, plan.resize, tile, halve)
            l1_plan.refuse_narrow_cut(
                pristine, plan.narrow, plan.extents, sizes, device, options.tile_sizes
            )
        except l1_plan.DoesNotFit as e:
            own, forced = plan.own, options.tile_sizes
            parts, extents = len(plan.engines), plan.part_extents(0)
            fitting = (
                l1_plan.smaller_fit(
                    budget, capacity, forced, e.sizes, own, tile, plan.narrow, extents
                )
                if own and forced
                else None
            )
            raise l1_plan.too_big(pristine, e, device, extents, parts, forced, fitting) from None
        finally:
            pristine.erase()
    return applied[0], zeroed[0]


UNSTAGED = ("linalg.transpose",)
"""Ops whose tiles stage their output only: each tile's input box, permuted,
is copied from where the input is into L1 by one transfer
(D-LOW-GENERIC-COPY); staged too, it was copied in, then permuted in L1 by
a second (ShuffleNet's channel shuffle: 51,858 -> 26,460 timed cycles over
its 16 shuffles, D-COMPILE-LAYOUT session 60)."""


@dataclass
class Seen:
    """What tiling the ops of one function learns that tiling an op like an
    earlier one can take again (`_tile_op`): each script parsed, and the L1
    need measured of each (isolated function before tiling, as printed;
    script) pair: the transforms and the hoisting are deterministic, so the
    same text tiled by the same script is the same IR, whose need and
    window (`l1_plan.plan`) are the same."""

    scripts: dict[str, Parsed] = field(default_factory=dict)
    needs: dict[tuple[str, str], tuple[Need, int]] = field(default_factory=dict)


def _privatize(
    module: ir.Module, fn: ir.Operation, todo: list[tuple[int, ir.Operation, Plan]]
) -> str:
    """Split each (K, op, plan) of `todo`, a sum into its output C over loop
    `plan.split_dim` (`choose_split`'s `Split.partials`), into its parts, and
    privatize them as the affine route does (`engines._privatize`,
    D-COMPILE-TRANSFORM-PARTIALS): part j >= 1 accumulates into a buffer of
    its own that a `linalg.fill` zeroes first, and one
    `linalg.generic` after the parts computes `C = ((C + P1) + P2) + ...`.
    The fills and parts are pinned to the part's engine; the sum is split
    over the engines as any elementwise op (session 28: on engine 0 alone,
    its reads of every partial took AlexNet's 3x3 convolutions' splits
    10,722 cycles of their 34,576).  Returns the split script run."""
    outputs = {}
    for k, op, _ in todo:
        op.attributes[TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)
        outputs[k] = op.operands[len(op.operands) - 1]  # the one output (one store)
    text = split_script([(k, plan) for k, _, plan in todo])
    apply_transform(module, text)
    i64 = ir.IntegerType.get_signless(64)
    for k, _, plan in todo:
        parts = [
            op
            for op in linalg_ops(fn)
            if TAG in op.attributes and ir.IntegerAttr(op.attributes[TAG]).value == k
        ]
        assert len(parts) == len(plan.engines), (k, len(parts))
        c = outputs[k]
        with parts[0].location:
            t = ir.MemRefType(c.type)
            plain = ir.MemRefType.get(t.shape, t.element_type)
            partials = []
            for part, engine in zip(parts[1:], plan.engines[1:]):
                # (just before its part: the tiling fills its tiles in L1, D-COMPILE-ZERO-INIT)
                buf = memref.AllocOp(plain, [], [], ip=ir.InsertionPoint(part)).result
                with ir.InsertionPoint(part):
                    zero = arith.ConstantOp(t.element_type, 0.0).result
                    fill = linalg.fill(zero, outs=[buf]).owner
                fill.attributes[PIN] = ir.IntegerAttr.get(i64, engine)
                part.operands[len(part.operands) - 1] = buf
                partials.append(buf)
            # (not pinned: planned as any elementwise op, split over the engines)
            _sum(partials, c, ir.InsertionPoint.after(parts[-1]))
        for part, engine in zip(parts, plan.engines):
            del part.attributes[TAG]
            part.attributes[PIN] = ir.IntegerAttr.get(i64, engine)
    return text


def _sum(ins: list[ir.Value], out: ir.Value, ip: ir.InsertionPoint) -> ir.Operation:
    """The elementwise `linalg.generic` computing `out = ((out + ins[0]) +
    ins[1]) + ...` (the affine route's order of the partial sums)."""
    t = ir.MemRefType(out.type)
    ident = ir.AffineMapAttr.get(ir.AffineMap.get_identity(t.rank))
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    op = linalg.GenericOp(
        [],
        ins,
        [out],
        ir.ArrayAttr.get([ident] * (len(ins) + 1)),
        ir.ArrayAttr.get([parallel] * t.rank),
        ip=ip,
    )
    block = op.regions[0].blocks.append(*([t.element_type] * (len(ins) + 1)))
    with ir.InsertionPoint(block):
        value = block.arguments[len(ins)]
        for x in list(block.arguments)[: len(ins)]:
            value = arith.AddFOp(value, x).result
        linalg.YieldOp([value])
    return op.operation
