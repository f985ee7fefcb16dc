"""The timed mode's cost of a task instance (D-RT-COST): the cost model of
`nem.dialect.semantics.cost` applied to a task template and its evaluated
regions.

The scheduler's timed durations and the roofline's bounds
(`nem.runtime.roofline`, D-RT-ROOFLINE) both come from `task_work`; the
throughputs have one home, which the compiler's token fit reads too
(D-DEPS-SYNTH).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nem.dialect.semantics.cost import Profile, UnitChars, Work
from nem.dialect.semantics.cost import task_work as work_of
from nem.runtime.memory import RegionInst

if TYPE_CHECKING:
    from nem.runtime.engine import TaskTpl


def task_work(
    t: TaskTpl, regions: list[RegionInst], unit_type: str, unit_chars: UnitChars, profile: Profile
) -> Work:
    trans_a = t.attrs_static.get("trans_a", 0)
    return work_of(t.op, regions, unit_type, trans_a, unit_chars, profile)
