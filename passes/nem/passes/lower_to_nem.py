"""`lower-to-nem{device=NAME memory-spaces=... entry=NAME}`: the pipeline
MLIR (func/affine/memref/linalg/arith + async + DMA) -> checked NEM.

Runs `convert-affine-to-nem`, `convert-async-to-nem`, removes dead index
arithmetic, then the NEM checks: the device-independent static rules
(`nem-verify-static`) and, with `device=`, the device validity rule
(DEV-13) for that target.  The program gets `include "NAME.nem"` and
`device NAME` so it prints as a self-contained `.nem` file.

`remarks=true`: a remark per function lists what was raised to NEM opcodes
and what fell back to `compute op="mlir.kernel"` (opt-in, D-OPT-REMARKS).

`memory-spaces`: `0:DDR,1:L2,2:L1[0]` (levels DDR, L2, L1, L1[k]; default
`0:DDR,1:L2,2:L1`).  xDSL's pipeline lexer has no `:`: `nem-opt` quotes the
value before xDSL parses the pipeline (`nem.passes.driver.quote_memory_spaces`),
so the unquoted spelling works there; with xDSL's own parser write it quoted,
`memory-spaces="0:DDR,1:L2"`, or `0-DDR,1-L2` (D-LOW-OPT-SPACES).

`!async.value<memref<..>>` results and operands of `async.execute` alias the
yielded memref's view; awaiting one waits on the execute (D-LOW-ASYNC-VALUE).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.ops import ProgramOp
from nem.dialect.verifier import verify_program
from nem.passes import pass_env
from nem.passes.convert_affine_to_nem import DEFAULT_SPACES, Lowerer, Options, parse_spaces
from nem.passes.convert_async_to_nem import ConvertAsyncToNemPass


def _dce(prog: ProgramOp) -> None:
    """Drop arith index ops nothing uses (left by the lowering)."""
    changed = True
    while changed:
        changed = False
        for op in list(prog.walk()):
            if op.name.startswith("arith.") and all(not r.uses for r in op.results):
                op.detach()
                op.erase()
                changed = True


def check(module: ModuleOp, device: str | None, include_dirs=()) -> None:
    diags = []
    for prog in [p for p in module.walk() if isinstance(p, ProgramOp)]:
        diags += verify_program(prog)
        if device and not any(d.severity == "error" for d in diags):
            from nem.devices.device_lookup import find_device
            from nem.devices.program_device import check_device_validity

            dev = find_device(device, include_dirs, None)
            diags += check_device_validity(prog, dev)
    errors = [d for d in diags if d.severity == "error"]
    for d in diags:
        if d.severity != "error":
            pass_env.report([d])
    if errors:
        for d in errors:
            d.message = "lowered NEM program fails its checks: " + d.message
        raise NemDiagnosticError(errors)


@dataclass(frozen=True)
class LowerToNemPass(ModulePass):
    """Lower MLIR (func/affine/memref/linalg/async) to a checked NEM program.

    Options:
      device: target device; the result is checked against it (DEV-13)
      memory-spaces: memref memory space to NEM level, e.g. 0:DDR,1:L2,2:L1[0]
      entry: the func.func to lower (default: the first public one)
      remarks: report what was raised to NEM opcodes and what fell back
    """

    name = "lower-to-nem"

    device: str | None = None
    memory_spaces: tuple[str, ...] = (DEFAULT_SPACES,)
    entry: str | None = None
    remarks: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # `-I` directories of the driver (nem-opt -I DIR) also find `device=NAME` (DEV-20)
        include_dirs = pass_env.current().include_dirs
        opts = Options(parse_spaces(self.memory_spaces), self.device, self.entry, include_dirs,
                       remarks=self.remarks)
        prog = Lowerer(opts).run(op)
        ConvertAsyncToNemPass().apply(ctx, op)
        _dce(prog)
        check(op, self.device, include_dirs)
