"""NEM passes (installed as `nem.passes`).

`PASSES` (name -> pass class) is built on first use (PEP 562): importing one
pass module, or the pass driver, does not load every pass (the lowering and
the analyses are a tenth of a second of `nem-opt`'s start-up, for runs that
apply no pass).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xdsl.passes import ModulePass

    PASSES: dict[str, type[ModulePass]]  # what __getattr__ makes, for the type checker

__all__ = ["PASSES"]


def _passes() -> dict[str, type[ModulePass]]:
    from nem.passes.forward_fills import ForwardZeroFillsPass
    from nem.passes.jam_engine_loops import JamEngineLoopsPass
    from nem.passes.lowering.async_awaits import DropTokenAwaitsPass
    from nem.passes.lowering.async_executes import InlineAsyncExecutesPass
    from nem.passes.lowering.async_groups import DropAsyncGroupsPass
    from nem.passes.lowering.declare_allocations import DeclareAllocationsPass
    from nem.passes.lowering.declare_buffers import DeclareBuffersPass
    from nem.passes.lowering.fold_index_arith import FoldIndexArithPass
    from nem.passes.lowering.mark_tile_loops import MarkTileLoopsPass
    from nem.passes.lowering.memref_dmas import RaiseMemrefDmasPass
    from nem.passes.lowering.memref_hints import DropMemrefHintsPass
    from nem.passes.lowering.outline_kernels import OutlineKernelsPass
    from nem.passes.lowering.passes import ConvertAffineToNemPass, LowerToNemPass
    from nem.passes.lowering.prepare import (
        CheckInputRangesPass,
        DropDeadArithPass,
        RaiseScfForPass,
    )
    from nem.passes.lowering.reroll import RerollPipelinesPass
    from nem.passes.lowering.scalar_copies import RaiseScalarCopiesPass
    from nem.passes.lowering.task_control_flow import CheckTaskControlFlowPass
    from nem.passes.lowering.view_ops import RewriteViewsPass
    from nem.passes.share_buffers import ShareBuffersPass
    from nem.passes.share_fills import ShareConstantFillsPass
    from nem.passes.split_transfers import SplitTransfersPass
    from nem.passes.synthesize_deps import SynthesizeDepsPass
    from nem.passes.verify import PASSES as _VERIFY_PASSES

    passes: dict[str, type[ModulePass]] = dict(_VERIFY_PASSES)
    passes.update(
        {
            p.name: p
            for p in (
                RaiseScfForPass,
                DropDeadArithPass,
                CheckInputRangesPass,
                RerollPipelinesPass,
                RaiseMemrefDmasPass,
                OutlineKernelsPass,
                DropMemrefHintsPass,
                DropAsyncGroupsPass,
                DropTokenAwaitsPass,
                RewriteViewsPass,
                DeclareBuffersPass,
                DeclareAllocationsPass,
                MarkTileLoopsPass,
                FoldIndexArithPass,
                InlineAsyncExecutesPass,
                RaiseScalarCopiesPass,
                CheckTaskControlFlowPass,
                ConvertAffineToNemPass,
                LowerToNemPass,
                ForwardZeroFillsPass,
                JamEngineLoopsPass,
                ShareConstantFillsPass,
                SynthesizeDepsPass,
                ShareBuffersPass,
                SplitTransfersPass,
            )
        }
    )
    # Checking passes and the `nem-verify` pipeline (passes/nem/passes/device.py,
    # placement.py, fold.py, pipeline.py; tokens.py and hazards.py by the token/hazard checks).
    from nem.passes.device import VerifyDevicePass
    from nem.passes.fold import FoldConstsPass
    from nem.passes.hazards import CheckHazardsPass
    from nem.passes.pipeline import VerifyPipelinePass
    from nem.passes.placement import CheckPlacementPass
    from nem.passes.tokens import CheckTokensPass

    passes.update(
        {
            p.name: p
            for p in (
                VerifyDevicePass,
                CheckPlacementPass,
                FoldConstsPass,
                CheckTokensPass,
                CheckHazardsPass,
                VerifyPipelinePass,
            )
        }
    )
    return passes


def __getattr__(name: str) -> object:
    if name == "PASSES":
        passes = globals()["PASSES"] = _passes()  # made once, then a plain attribute
        return passes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
