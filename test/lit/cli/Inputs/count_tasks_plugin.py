"""A pass plugin: `nem-opt --load-pass-plugin count_tasks_plugin.py -p count-tasks`."""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.ops import ProgramOp, TaskOp
from nem.passes.pass_context import report


@dataclass(frozen=True)
class CountTasksPass(ModulePass):
    """Report the number of task statements of each program as a remark.

    Options:
      opcode: count only the tasks of this opcode
    """

    name = "count-tasks"

    opcode: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for prog in op.walk():
            if isinstance(prog, ProgramOp):
                tasks = [
                    t
                    for t in prog.walk()
                    if isinstance(t, TaskOp)
                    and (self.opcode is None or t.name == f"nem.{self.opcode}")
                ]
                report(
                    ctx, [Diagnostic("remark", f"{len(tasks)} task statements", SourceLoc.of(prog))]
                )


class NotAPass:
    """Not a ModulePass: not registered."""
