"""`nem-verify{device=NAME remarks=false reject-future=false}`: every check, staged.

Runs, in order, and stops after the first stage that reports an error:

1. `nem-verify-static`   device-independent rules (names, objects, tasks)
2. `nem-verify-device`   the target's rules; skipped with a remark (DEV-20)
                         when no device is known
3. `nem-check-placement`
4. `nem-check-tokens`
5. `nem-check-hazards`

Each stage's warnings and remarks are kept; the first failing stage's
diagnostics end the run.  `nem-opt x.nem -p nem-verify` skips the driver's
own default verification (the pipeline's first stage is the same check).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.analysis.ir_walk import ops_of
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.ops import ProgramOp
from nem.passes.device import VerifyDevicePass, no_device_remark, target_device
from nem.passes.hazards import CheckHazardsPass
from nem.passes.pass_context import NemPassContext, collecting, report
from nem.passes.placement import CheckPlacementPass
from nem.passes.tokens import STRUCTURES, CheckTokensPass
from nem.passes.verify import VerifyStaticPass

STAGES: tuple[type[ModulePass], ...] = (
    VerifyStaticPass,
    VerifyDevicePass,
    CheckPlacementPass,
    CheckTokensPass,
    CheckHazardsPass,
)


def _instantiate(cls: type[ModulePass], options: Mapping[str, object]) -> ModulePass:
    names = {f.name for f in fields(cls)} if hasattr(cls, "__dataclass_fields__") else set()
    return cls(**{k: v for k, v in options.items() if k in names and v is not None})


@dataclass(frozen=True)
class VerifyPipelinePass(ModulePass):
    """Every check, staged: static, device, placement, tokens, hazards (stops at the first failing stage).

    Options:
      device: the target (default: nem-opt --device, else the program's directive)
      remarks: placement remarks (as nem-check-placement{remarks=true})
      reject-future: make opcodes with hardware status `future` errors (DEV-18)
    """

    name = "nem-verify"

    device: str | None = None
    remarks: bool = False
    reject_future: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        stages = collecting(ctx)  # the stages' warnings and remarks, reported together
        options = {
            "device": self.device,
            "remarks": self.remarks,
            "reject_future": self.reject_future,
        }
        # the token stage's Structure of each program, for the hazard stage (STRUCTURES)
        stages.cache[STRUCTURES] = {}
        try:
            self._stages(stages, op, options)
        finally:
            stages.cache.pop(STRUCTURES, None)
        report(ctx, stages.diagnostics)

    def _stages(self, stages: NemPassContext, op: ModuleOp, options: Mapping[str, object]) -> None:
        for cls in STAGES:
            if cls is VerifyDevicePass:
                progs = ops_of(op, ProgramOp)
                try:
                    devices = [target_device(stages, p, self.device) for p in progs]
                except NemDiagnosticError as e:  # a directive naming no device (DEV-20)
                    raise NemDiagnosticError(stages.diagnostics + e.diagnostics) from None
                if all(d is None for d in devices):
                    stages.diagnostics += [
                        no_device_remark(p, "device stage (nem-verify-device)") for p in progs
                    ]
                    continue
            try:
                _instantiate(cls, options).apply(stages, op)
            except NemDiagnosticError as e:
                raise NemDiagnosticError(stages.diagnostics + e.diagnostics) from None
