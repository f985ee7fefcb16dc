"""A static estimate of when each task of a block ends, for the token fit
of `nem-synthesize-deps` (D-DEPS-SYNTH, step 4, session 36): among the
tokens a later live task depends on, it waits first for those that end
first, which stalls the instruction stream least.

A task lasts what the timed cost model charges it (D-RT-COST,
`nem.dialect.semantics.cost.task_work`, the runtime's own function and
rates) on its preferred unit (`eligible_units`), its regions' static
geometry standing for the instances', and starts when its producers in
the block have ended and the stream has issued it: a `wait` or a `.sync`
task holds the stream until what it covers ends; a loop is a barrier (the
stream goes on once everything before it has ended; its own time is not
counted: a loop body's estimate changed none of the measured programs'
fits).  Units are not shared out (no contention): the fit only ranks tasks
of one block, and the estimate stays linear in the block's statements.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from xdsl.ir import Operation, SSAValue

from nem.dialect.attributes import DYNAMIC, RegionType
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.ops import ComputeOp, LoopOp, RegionOp, TaskOp, WaitOp
from nem.dialect.per_class import first_base_table
from nem.dialect.semantics.cost import DEFAULT_PROFILE, UnitChars, task_work
from nem.dialect.semantics.units import eligible_units
from nem.dialect.shape_rules import attr_int

_KINDS = first_base_table(((TaskOp, 1), (WaitOp, 2), (LoopOp, 3)), 0)
"""`FinishTimes.step`'s kind of an op class (most of a block's statements
are region ops and index constants, which take no time)."""


class StaticRegion(NamedTuple):
    """A region's geometry as its op states it (the cost model's `Geometry`):
    None where it depends on a loop variable, an extent of 0 where it is not
    static."""

    elem: str | None
    shape: tuple[int, ...] | None
    strides: tuple[int, ...] | None
    extent: int


@dataclass
class FinishTimes:
    """The estimated end of each task of one block, its statements given in
    order (`step`), the fit's own waits as it adds them (`wait`)."""

    unit_chars: UnitChars
    ev: Evaluator
    clock: int = 0
    """When the stream issues its next statement."""
    end: dict[TaskOp, int] = field(default_factory=dict)
    latest: int = 0
    """When the last of the tasks so far ends (a loop's barrier)."""

    def step(self, op: Operation) -> None:
        """Account for `op`, the block's next statement."""
        kind = _KINDS[type(op)]
        if kind == 1:
            task = cast(TaskOp, op)
            start = max((self.end.get(p, 0) for p in producers_of(task.deps)), default=0)
            done = self.end[task] = max(start, self.clock) + self.cycles(task)
            self.latest = max(self.latest, done)
            if task.is_sync:
                self.clock = done
        elif kind == 2:
            self.wait(producers_of(cast(WaitOp, op).tokens))
        elif kind == 3:
            self.clock = max(self.clock, self.latest)

    def wait(self, tasks: Iterable[TaskOp]) -> None:
        """The stream waits for `tasks` to end."""
        self.clock = max(self.clock, *(self.end.get(t, 0) for t in tasks), 0)

    def cycles(self, op: TaskOp) -> int:
        """`op`'s timed duration (D-RT-COST) by its static geometry."""
        trans_a = (attr_int(op, "trans_a", self.ev) or 0) if isinstance(op, ComputeOp) else 0
        regions = [self._region(v) for v, _ in op.operand_regions()]
        unit = eligible_units(op)[0]
        work = task_work(op, regions, unit, trans_a, self.unit_chars, DEFAULT_PROFILE)
        return work.cycles

    def _region(self, v: SSAValue) -> StaticRegion:
        t = v.type
        assert isinstance(t, RegionType)  # task operands are regions
        shape, strides = t.shape_values, t.stride_values
        extent = 0
        if isinstance(v.owner, RegionOp):
            try:
                extent = self.ev.static(v.owner.extent) or 0
            except ExprError:
                extent = 0
        return StaticRegion(t.elem_name, _static(shape), _static(strides), extent)


def _static(values: tuple[int, ...] | None) -> tuple[int, ...] | None:
    return None if values is None or DYNAMIC in values else values


def producers_of(tokens: Iterable[SSAValue]) -> list[TaskOp]:
    """The tasks whose tokens `tokens` are."""
    return [t.owner for t in tokens if isinstance(t.owner, TaskOp)]
