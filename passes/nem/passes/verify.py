"""`nem-verify-static`: the device-independent static rules as a pass.

Thin wrapper so the checks of `nem.dialect.verifier` can be scheduled in a
pipeline after any lowering (`nem-opt -p nem-verify-static`).  Only errors
stop it: they raise one `NemDiagnosticError` carrying every diagnostic of the
run, warnings included.  A run without errors reports nothing, so its
warnings are not shown by this pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.analysis.ir_walk import ops_of
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.ops import ProgramOp
from nem.dialect.verifier import verify_program
from nem.passes.pass_context import take_built_facts


@dataclass(frozen=True)
class VerifyStaticPass(ModulePass):
    """Check the device-independent static rules (names, objects, tasks, type families)."""

    name = "nem-verify-static"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # the facts of a program exactly as its front end built it, when the
        # driver handed them over (`verify_nem`; D-BC-SEED): taken once
        diags = [
            d
            for prog in ops_of(op, ProgramOp)
            for d in verify_program(prog, facts=take_built_facts(ctx, prog))
        ]
        if any(d.severity == "error" for d in diags):
            raise NemDiagnosticError(diags)


PASSES: dict[str, type[ModulePass]] = {VerifyStaticPass.name: VerifyStaticPass}
"""This module's pass, by name; `nem.passes.PASSES` collects every NEM pass
(which `nem-opt` registers)."""
