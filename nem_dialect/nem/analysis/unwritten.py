"""Buffers a program reads and never writes (D-RT-UNSET).

Every buffer starts at zero (D-RT-INITIAL) and a `.nem` program does not
mark which buffers hold inputs or weights: a buffer that some task reads
and no task writes can only hold what the run was given (`--input`, a
`.nemb`'s Data section, `--random-inputs`).  `nem-run` names those it was
not given: the run would compute with zeros, which is how a forgotten
weights archive looked like a working program.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from nem.analysis.happens_before import region_parts, task_operands
from nem.analysis.ir_walk import walk_ops
from nem.dialect.ops import BufferOp, ProgramOp, RegionOp, TaskOp


def read_never_written(program: ProgramOp) -> list[BufferOp]:
    """The buffers of `program` that a task reads (a region over them is a
    source or input operand) and no task writes, in declaration order; one
    walk of the program."""
    read: set[SSAValue] = set()
    written: set[SSAValue] = set()
    buffers: list[BufferOp] = []
    for op in walk_ops(program):
        if isinstance(op, BufferOp):
            buffers.append(op)
        elif isinstance(op, TaskOp):
            reads, writes, _ = task_operands(op)
            for values, into in ((reads, read), (writes, written)):
                for v in values:
                    if isinstance(v.owner, RegionOp):
                        into.add(region_parts(v.owner)[0])
    return [b for b in buffers if b.result in read and b.result not in written]
