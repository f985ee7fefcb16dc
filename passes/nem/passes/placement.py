"""`nem-check-placement{device=NAME remarks=false}`: task placement (SPEC §8).

PLACE-02 (two different `L1[k]`) and PLACE-04 (`@seq_engine(k)` against the
task's `L1[j]`) on indexed levels are static rules of the verifier.  This
pass adds what needs the target or the loop structure (decision
D-DEV-PLACE):

* with a target device, an unindexed `L1` is `L1[0]` (D-DEV-L1), so a task
  mixing `L1` with `L1[k]`, k != 0, is PLACE-02, and `@seq_engine(k)` needs
  k < num_engines (PLACE-04);
* PLACE-05: a task in a loop body must use one engine in every iteration.
  The engine of an L1 operand is part of its type (`L1[k]` takes a constant
  index), so a task's engine cannot change between iterations: the rule
  holds exactly when PLACE-02/04 hold for the task, and the pass reports a
  violation inside a loop body as PLACE-05 (naming the loop);
* `remarks=true`: one remark per task giving its engine: the engine of its
  L1 operands (PLACE-02), or for an engine-agnostic task (only L2/DDR
  operands, PLACE-03) the engine it is assigned to: its `@seq_engine(k)`,
  else the engine of its first dependency that has one, else round-robin
  over the device's engines in program order (IA §4.4).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass

from nem.analysis.ir_walk import ops_of
from nem.dialect.attributes import RegionType, SeqEngineAttr
from nem.dialect.device_model import Device
from nem.dialect.diagnostics import Diagnostic, SourceLoc, error
from nem.dialect.operand_binding import value_label
from nem.dialect.ops import LoopOp, ProgramOp, TaskOp
from nem.dialect.task_rules import cross_engine_fix
from nem.passes.device import target_device
from nem.passes.pass_context import report


def _engines(op: TaskOp, device: Device | None) -> dict[int, str]:
    """Engine -> first operand label, over the task's L1 operands."""
    engines: dict[int, str] = {}
    for value, _ in op.operand_regions():
        rtype = value.type
        assert isinstance(rtype, RegionType)  # task operands are regions
        level = rtype.level
        if level.kind != "L1":
            continue
        k = level.engine
        if k is None:
            if device is None:
                continue  # engine not known without a target
            k = 0
        engines.setdefault(k, value_label(value))
    return engines


def _task_name(op: TaskOp) -> str:
    return f"task '{op.token_name()}'" if op.token_name() else "task"


def _unindexed_l1(op: TaskOp) -> bool:
    return any(
        isinstance(v.type, RegionType) and v.type.level.data == "L1"
        for v, _ in op.operand_regions()
    )


def placement_diagnostics(
    prog: ProgramOp, device: Device | None, remarks: bool
) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    assigned: dict[SSAValue, int] = {}
    rr = [0]
    n_engines = device.topology.num_engines if device is not None else None

    def visit(block: Block, loops: tuple[LoopOp, ...]) -> None:
        for op in block.ops:
            if isinstance(op, LoopOp):
                visit(op.block, loops + (op,))
                continue
            if not isinstance(op, TaskOp):
                continue
            engines = _engines(op, device)
            seq = [d.engine.data for d in op.decorator_list() if isinstance(d, SeqEngineAttr)]
            in_loop = f" in the body of loop '{loops[-1].iv_name.data}'" if loops else ""
            rule2 = "PLACE-05" if loops else "PLACE-02"
            if len(engines) > 1:
                (k, a), (j, b) = list(engines.items())[:2]
                note = "; an unindexed L1 is L1[0]" if device is not None else ""
                diags.append(
                    error(
                        f"task{in_loop} references L1[{k}] ({a}) and L1[{j}] ({b}){note}",
                        op,
                        rule2,
                        cross_engine_fix(op, "a task runs on one engine in every iteration"),
                    )
                )
                continue
            bad_seq = False
            for k in seq:
                if device is not None and n_engines is not None and k >= n_engines:
                    diags.append(
                        error(
                            f"@seq_engine({k}) names engine {k} but device '{device.name}' has "
                            f"{n_engines} engine{'s' if n_engines != 1 else ''}",
                            op,
                            "PLACE-04",
                            f"use @seq_engine(k) with 0 <= k < {n_engines}",
                        )
                    )
                    bad_seq = True
                elif engines and k not in engines:
                    j = next(iter(engines))
                    diags.append(
                        error(
                            f"@seq_engine({k}){in_loop} conflicts with the task's L1[{j}] operand "
                            f"{engines[j]} (an unindexed L1 is L1[0])",
                            op,
                            "PLACE-05" if loops else "PLACE-04",
                            f"use @seq_engine({j}) or drop it (decisions D-DECO-SEQ, D-DEV-L1)",
                        )
                    )
                    bad_seq = True
            if bad_seq:
                continue
            if engines:
                k, operand = next(iter(engines.items()))
                assigned[op.results[0]] = k
                if remarks:
                    unindexed = (
                        " (an unindexed L1 is L1[0])"
                        if device is not None and _unindexed_l1(op)
                        else ""
                    )
                    diags.append(
                        Diagnostic(
                            "remark",
                            f"{_task_name(op)} runs on engine {k}: its L1 operand "
                            f"{operand}{unindexed}",
                            SourceLoc.of(op),
                            "PLACE-02",
                        )
                    )
                continue
            # engine-agnostic (PLACE-03)
            if seq:
                engine, why = seq[0], f"@seq_engine({seq[0]})"
            else:
                dep = next((assigned[v] for v in op.dep_values() if v in assigned), None)
                if dep is not None:
                    engine, why = dep, "the engine of its first placed dependency"
                elif n_engines is not None:
                    engine, why = rr[0] % n_engines, f"round-robin over {n_engines} engine(s)"
                    rr[0] += 1
                else:
                    engine, why = None, None
            if engine is not None:
                assigned[op.results[0]] = engine
            if remarks:
                name = _task_name(op)
                if engine is None:
                    msg = (
                        f"{name} is engine-agnostic (only L2/DDR operands); no target device, "
                        "so its engine is chosen at lowering"
                    )
                else:
                    msg = (
                        f"{name} is engine-agnostic (only L2/DDR operands): assigned to engine "
                        f"{engine} ({why})"
                    )
                diags.append(
                    Diagnostic(
                        "remark",
                        msg,
                        SourceLoc.of(op),
                        "PLACE-03",
                        "add @seq_engine(k) to choose the engine",
                    )
                )

    visit(prog.block, ())
    return diags


@dataclass(frozen=True)
class CheckPlacementPass(ModulePass):
    """Check task placement on engines (PLACE-02..05).

    Options:
      device: the target (default: nem-opt --device, else the program's directive)
      remarks: report the engine of each task (of its L1 operands; for an engine-agnostic task, the one assigned, PLACE-03)
    """

    name = "nem-check-placement"

    device: str | None = None
    remarks: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        diags: list[Diagnostic] = []
        for prog in ops_of(op, ProgramOp):
            diags += placement_diagnostics(
                prog, target_device(ctx, prog, self.device), self.remarks
            )
        report(ctx, diags)
