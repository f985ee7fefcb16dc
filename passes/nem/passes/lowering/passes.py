"""The lowering's passes: `convert-affine-to-nem` (the conversion) and
`lower-to-nem` (the declared pipeline MLIR -> checked NEM).

    lower-to-nem{device=D memory-spaces=M entry=F remarks=R weights=W pipeline-tiles=P
                 split-transfers=S jam-engine-loops=J}
      = nem-raise-scf-for                          (D-LOW-SCF: constant-step scf.for -> affine.for)
        nem-drop-dead-arith{entry=F}               (D-LOW-DEAD-ARITH)
        nem-check-input-ranges{entry=F}            (D-INT-RANGE)
        nem-reroll-pipelines{entry=F}              (D-LOW-PIPE: pipelined loops -> one loop)
        nem-raise-memref-dmas{entry=F}             (D-LOW-DMA: memref.dma_start, dma_wait ->
                                                    affine ones, identity maps)
        nem-outline-kernels{entry=F}               (D-LOW-OUTLINE: nests that escape on every
                                                    target -> nem_lowering.kernel)
        nem-drop-memref-hints{entry=F}             (D-LOW-MEMREF-HINTS: deallocs, alignment hints)
        nem-drop-async-groups{entry=F}             (D-LOW-ASYNC-GROUPS: create_group, add_to_group,
                                                    await_all)
        nem-drop-token-awaits{entry=F}             (D-LOW-ASYNC-AWAITS: awaits of tokens; the loops
                                                    around them marked structural)
        nem-rewrite-views{entry=F}                 (D-LOW-VIEW-OP: memref.cast, collapse_shape,
                                                    expand_shape, reinterpret_cast, subview,
                                                    view -> nem_lowering.view)
        nem-declare-buffers{entry=F}               (D-LOW-DECLARE: arguments and globals named,
                                                    get_global -> nem_lowering.buffer)
        nem-declare-allocations{memory-spaces=M    (D-LOW-DECLARE: alloc, alloca ->
                                entry=F}            nem_lowering.buffer, named)
        nem-mark-tile-loops{entry=F}               (D-LOW-TILES: the loops the conversion
                                                    keeps around raised tiles marked)
        nem-fold-index-arith{entry=F}              (D-LOW-AFFINE: arith index arithmetic ->
                                                    affine.apply, maps composed, tile loops too)
        nem-inline-async-executes{entry=F}         (D-LOW-ASYNC-INLINE: async.execute ->
                                                    nem_lowering.scope, value awaits -> the
                                                    payload, loop-carried tokens dropped)
        nem-check-task-control-flow{entry=F}       (D-LOW-TASK-CF: scf, cf, affine.if,
                                                    affine.parallel where tasks are lowered
                                                    one by one rejected)
        convert-affine-to-nem{memory-spaces=M device=D entry=F remarks=R weights=W
                              pipeline-tiles=P}    (its own preparation skipped: done above)
        nem-check-lowered{declarations-only=true}  (regions within buffers, before ordering)
        nem-forward-zero-fills                     (D-LOW-FILL-FORWARD)
        nem-jam-engine-loops                       (D-NEM-JAM-ENGINES: one loop for the engine
                                                    parts of a split nest; jam-engine-loops=false
                                                    leaves them one after the other)
        nem-share-constant-fills{device=D}         (D-LOW-FILL-SHARE: repeated constant fill
                                                    chains made once, where L1 still fits)
        nem-synthesize-deps{device=D narrow-windows=true remarks=R}
        dead-code-elimination                      (xDSL's: index arithmetic left unused)
        nem-split-transfers{device=D}              (D-NEM-SPLIT-TRANSFERS; split-transfers=false
                                                    leaves one transfer per copy)
        nem-check-lowered{device=D}                (static rules, and DEV-13 on D)

The program gets `include "D.nem"` and `device D` so it prints as a
self-contained `.nem` file.  `memory-spaces`: `0:DDR,1:L2,2:L1[0]` (levels
DDR, L2, L1, L1[k]; default `0:DDR,1:L2,2:L1`); xDSL's pipeline lexer has no
`:`, so `nem-opt` quotes the value before xDSL parses the pipeline
(`nem.passes.pipeline_spec.check_pipeline`, through `quote_option_values`' rewrite, which
quotes `weights=FILE` too); with xDSL's own parser write it
quoted, `memory-spaces="0:DDR,1:L2"`, or `0-DDR,1-L2` (D-LOW-OPT-SPACES).
`include-dirs=D1,D2`: directories where `device=NAME`'s file is found
first; `nem-opt -I DIR` (and `run_pipeline(include_dirs=...)`) adds its
directories to this option of every pass that has one (DEV-20).
`remarks=true`: a remark per function lists what was raised to NEM opcodes
and what fell back to `compute op="mlir.kernel"` (D-OPT-REMARKS), and one
per pipelined loop whose window had to shrink.
`pipeline-tiles=true`: a tile loop whose body allocates L1 buffers (what
`transform.structured.promote` leaves in a `tile_using_for` loop) runs two
iterations at once, `@max_in_flight(2)`, its buffers in two slots
(D-LOW-PIPE-BODY; `nem-compile --route transform` sets it unless
`--no-pipeline`).
"""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass, fields
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError
from nem.dialect.ops import programs
from nem.dialect.verifier import verify_declarations, verify_program
from nem.passes.dce import OnePassDeadCodeElimination
from nem.passes.forward_fills import ForwardZeroFillsPass
from nem.passes.jam_engine_loops import JamEngineLoopsPass
from nem.passes.lowering.async_awaits import DropTokenAwaitsPass
from nem.passes.lowering.async_executes import InlineAsyncExecutesPass
from nem.passes.lowering.async_groups import DropAsyncGroupsPass
from nem.passes.lowering.context import DEFAULT_SPACES, Options, parse_spaces
from nem.passes.lowering.declare_allocations import DeclareAllocationsPass
from nem.passes.lowering.declare_buffers import DeclareBuffersPass
from nem.passes.lowering.driver import Lowerer
from nem.passes.lowering.fold_index_arith import FoldIndexArithPass
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.mark_tile_loops import MarkTileLoopsPass
from nem.passes.lowering.memref_dmas import RaiseMemrefDmasPass
from nem.passes.lowering.memref_hints import DropMemrefHintsPass
from nem.passes.lowering.outline_kernels import OutlineKernelsPass
from nem.passes.lowering.prepare import (
    CheckInputRangesPass,
    DropDeadArithPass,
    RaiseScfForPass,
)
from nem.passes.lowering.reroll import RerollPipelinesPass
from nem.passes.lowering.scalar_copies import RaiseScalarCopiesPass
from nem.passes.lowering.state import Handler
from nem.passes.lowering.task_control_flow import CheckTaskControlFlowPass
from nem.passes.lowering.view_ops import RewriteViewsPass
from nem.passes.pass_context import driver_options, report
from nem.passes.share_fills import ShareConstantFillsPass
from nem.passes.split_transfers import SplitTransfersPass
from nem.passes.synthesize_deps import SynthesizeDepsPass


@dataclass(frozen=True)
class LoweringOptions(ModulePass, ABC):
    """The options of `convert-affine-to-nem` and `lower-to-nem`, declared
    once: both passes are these fields (xDSL reads a pass's options from its
    dataclass fields), and the conversion reads them as `Options`."""

    device: str | None = None
    memory_spaces: tuple[str, ...] = (DEFAULT_SPACES,)
    entry: str | None = None
    remarks: bool = False
    include_dirs: tuple[str, ...] = ()
    weights: str | None = None
    pipeline_tiles: bool = False

    def options(self) -> Options:
        """The conversion's options, `memory-spaces` parsed."""
        return Options(
            parse_spaces(self.memory_spaces),
            device=self.device,
            entry=self.entry,
            include_dirs=self.include_dirs,
            remarks=self.remarks,
            weights=self.weights,
            pipeline_tiles=self.pipeline_tiles,
        )


def preparation(
    entry: str | None, memory_spaces: tuple[str, ...] = (DEFAULT_SPACES,)
) -> tuple[ModulePass, ...]:
    """The passes that prepare `entry` for the conversion (with its
    `memory-spaces`), in order."""
    return (
        RaiseScfForPass(),
        DropDeadArithPass(entry),
        CheckInputRangesPass(entry),
        RerollPipelinesPass(entry),
        RaiseMemrefDmasPass(entry),
        OutlineKernelsPass(entry),
        DropMemrefHintsPass(entry),
        DropAsyncGroupsPass(entry),
        DropTokenAwaitsPass(entry),
        RewriteViewsPass(entry),
        DeclareBuffersPass(entry),
        DeclareAllocationsPass(memory_spaces, entry),
        MarkTileLoopsPass(entry),
        FoldIndexArithPass(entry),
        InlineAsyncExecutesPass(entry),
        RaiseScalarCopiesPass(entry),
        CheckTaskControlFlowPass(entry),
    )


@dataclass(frozen=True)
class ConvertAffineToNemPass(LoweringOptions):
    """Lower a func/affine/memref/linalg/async function (tiled, DMA or copy loops) to a NEM program.

    Options:
      device: target device (its type families guide raising)
      memory-spaces: memref memory space to NEM level, e.g. 0:DDR,1:L2,2:L1[0]
      entry: the func.func to lower (default: the first public one)
      remarks: report what was raised to NEM opcodes and what fell back
      include-dirs: directories where device=NAME's file is found first (nem-opt -I adds its own)
      weights: FILE.npz receiving the initial contents of memref.globals (nem-run --input FILE.npz)
      pipeline-tiles: two iterations in flight for tile loops that allocate their L1 buffers

    Its input is first prepared by `nem-raise-scf-for`, `nem-drop-dead-arith`,
    `nem-check-input-ranges`, `nem-reroll-pipelines`, `nem-raise-memref-dmas`,
    `nem-outline-kernels`, `nem-drop-memref-hints`, `nem-drop-async-groups`,
    `nem-drop-token-awaits`, `nem-rewrite-views`, `nem-declare-buffers`,
    `nem-declare-allocations`, `nem-mark-tile-loops`, `nem-fold-index-arith`,
    `nem-inline-async-executes`, `nem-raise-scalar-copies` and
    `nem-check-task-control-flow` (`preparation`), so that run alone
    it takes what `lower-to-nem` takes; `lower-to-nem` runs them as steps of
    its own (each with its MLIR output) and then the conversion without them
    (`PreparedConversionPass`): each walk once (D-LOW-SCF).
    """

    name = "convert-affine-to-nem"

    prepare: ClassVar[bool] = True
    """Whether `apply` runs the preparation passes first."""

    def handlers(self) -> dict[type[Operation], Handler]:
        """The conversion's table (a subclass may extend it: the differential
        test of `nem-drop-memref-hints` converts with the table before it).
        A method, not a class attribute: xDSL evaluates the annotations of a
        pass class to read its options."""
        return HANDLERS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.prepare:
            for p in preparation(self.entry, self.memory_spaces):
                p.apply(ctx, op)
        lowerer = Lowerer(self.options(), self.handlers(), progress=driver_options(ctx).progress)
        lowerer.convert(op)  # its input prepared: by the passes above, or lower-to-nem's
        report(ctx, lowerer.remarks)


@dataclass(frozen=True)
class PreparedConversionPass(ConvertAffineToNemPass):
    """`lower-to-nem`'s conversion step: `convert-affine-to-nem` on input its
    preceding steps prepared, without preparing it again.  Not registered:
    its printed spec, `convert-affine-to-nem{...}`, parses back to the pass
    that prepares its input itself (the same result, the walks twice)."""

    prepare = False


@dataclass(frozen=True)
class CheckLoweredPass(ModulePass):
    """The device-independent static rules and, with `device`, the device
    validity rule (DEV-13).  With `declarations-only`, the rules on buffers,
    regions and loops only, before `nem-synthesize-deps` orders the tasks:
    a region outside its buffer is reported there, not after ordering every
    instance of its tasks.  An access whose index leaves its memref is the
    conversion's error, at the access (D-LOW-BOUNDS); what reaches this
    check is what no index shows: a subview or a DMA past the end of its
    memref, an index with a `mod`, a loop bound the conversion does not
    resolve.  In `lower-to-nem`, which runs the declarations' check first,
    a failure of the final check is a lowering bug, and says so.

    Options:
      device: the target of the device validity rule
      declarations-only: check buffers, regions and loops, not tasks
      include-dirs: directories where device=NAME's file is found first (nem-opt -I adds its own)
    """

    name = "nem-check-lowered"

    device: str | None = None
    declarations_only: bool = False
    include_dirs: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        diags: list[Diagnostic] = []
        # found without walking the programs' bodies (a walk of DenseNet-121's
        # lowered module visited every one of its ops for the one program)
        for prog in list(programs(op)):
            if self.declarations_only:
                diags += verify_declarations(prog)
                continue
            diags += verify_program(prog)
            if self.device and not any(d.severity == "error" for d in diags):
                from nem.devices.device_lookup import find_device
                from nem.devices.program_device import check_device_validity

                dev = find_device(self.device, self.include_dirs, None)
                diags += check_device_validity(prog, dev)
        errors = [d for d in diags if d.severity == "error"]
        if errors:
            # several inline regions of one loop nest share its location:
            # the same error once
            unique: dict[tuple[str, str], Diagnostic] = {}
            for d in errors:
                d.message = "lowered NEM program fails its checks: " + d.message
                if self.declarations_only and d.rule in _OUT_OF_BOUNDS:
                    d.fix = f"{_OUT_OF_BOUNDS_FIX}; in NEM terms: {d.fix}"
                unique.setdefault((d.message, str(d.loc)), d)
            raise NemDiagnosticError(list(unique.values()))
        report(ctx, diags)


_OUT_OF_BOUNDS = {"REG-02", "BUF-02"}
"""A region past the end of its buffer: a subview, DMA or access of the input
past the end of its memref (the accesses the conversion cannot judge)."""
_OUT_OF_BOUNDS_FIX = (
    "a subview, DMA or access of the input here reaches past the end of its "
    "memref: check the subview's offsets and sizes, the loop bounds and the "
    "access indices"
)


@dataclass(frozen=True)
class LowerToNemPass(LoweringOptions):
    """Lower MLIR (func/affine/memref/linalg/async) to a checked NEM program.

    Options:
      device: target device; the result is checked against it (DEV-13)
      memory-spaces: memref memory space to NEM level, e.g. 0:DDR,1:L2,2:L1[0]
      entry: the func.func to lower (default: the first public one)
      remarks: report what was raised to NEM opcodes and what fell back
      include-dirs: directories where device=NAME's file is found first (nem-opt -I adds its own)
      weights: FILE.npz receiving the initial contents of memref.globals (nem-run --input FILE.npz)
      pipeline-tiles: two iterations in flight for tile loops that allocate their L1 buffers
      split-transfers: large L1 transfers split over the engine's DMAs (default true)
      jam-engine-loops: sibling loops on different engines jammed into one loop (default true)
    """

    name = "lower-to-nem"

    split_transfers: bool = True
    jam_engine_loops: bool = True

    def pipeline(self) -> tuple[ModulePass, ...]:
        """The passes `lower-to-nem` runs, in order."""
        dirs = self.include_dirs
        options = {f.name: getattr(self, f.name) for f in fields(LoweringOptions)}
        return (
            *preparation(self.entry, self.memory_spaces),
            PreparedConversionPass(**options),
            CheckLoweredPass(declarations_only=True),
            ForwardZeroFillsPass(),
            *((JamEngineLoopsPass(),) if self.jam_engine_loops else ()),
            ShareConstantFillsPass(device=self.device, include_dirs=dirs),
            SynthesizeDepsPass(
                device=self.device, narrow_windows=True, remarks=self.remarks, include_dirs=dirs
            ),
            OnePassDeadCodeElimination(),
            *(
                (SplitTransfersPass(device=self.device, include_dirs=dirs),)
                if self.split_transfers
                else ()
            ),
            CheckLoweredPass(self.device, include_dirs=dirs),
        )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PassPipeline(self.pipeline()).apply(ctx, op)
