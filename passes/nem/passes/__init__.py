"""NEM passes (installed as `nem.passes`)."""

from nem.passes.forward_fills import ForwardZeroFillsPass
from nem.passes.lowering.passes import ConvertAffineToNemPass, LowerToNemPass
from nem.passes.share_buffers import ShareBuffersPass
from nem.passes.synthesize_deps import SynthesizeDepsPass
from nem.passes.verify import PASSES as _VERIFY_PASSES

PASSES = dict(_VERIFY_PASSES)
PASSES.update({p.name: p for p in (ConvertAffineToNemPass, LowerToNemPass,
                                   ForwardZeroFillsPass, SynthesizeDepsPass, ShareBuffersPass)})

__all__ = ["PASSES"]

# Checking passes and the `nem-verify` pipeline (passes/nem/passes/device.py, placement.py,
# fold.py, pipeline.py; tokens.py and hazards.py by the token/hazard checks).
from nem.passes.device import VerifyDevicePass  # noqa: E402
from nem.passes.fold import FoldConstsPass  # noqa: E402
from nem.passes.hazards import CheckHazardsPass  # noqa: E402
from nem.passes.pipeline import VerifyPipelinePass  # noqa: E402
from nem.passes.placement import CheckPlacementPass  # noqa: E402
from nem.passes.tokens import CheckTokensPass  # noqa: E402

PASSES.update({p.name: p for p in (VerifyDevicePass, CheckPlacementPass, FoldConstsPass,
                                   CheckTokensPass, CheckHazardsPass, VerifyPipelinePass)})
