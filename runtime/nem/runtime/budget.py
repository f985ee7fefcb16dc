"""How much work a run will be, known before it starts (D-LIMITS).

`estimate_task_count(prog)` counts the task instances a program executes,
plus one for every loop iteration (an empty 2^59-iteration nest is work too):
exact when every loop bound is static; a loop whose bounds depend on
enclosing loop variables is counted at the larger of its trip counts with
those variables at all-first and at all-last values (an estimate, exact for
the rectangular nests the lowering produces).  `nem-run` refuses a program
whose estimate exceeds `--max-tasks` (default `DEFAULT_MAX_TASKS`) before
allocating anything, naming the estimate and the flag: a `[0..10**14]` loop
is an error, not a run that never ends.
"""

from __future__ import annotations

from xdsl.ir import Block, SSAValue

from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.ops import LoopOp, ProgramOp, TaskOp


def estimate_task_count(prog: ProgramOp) -> int:
    ev = Evaluator()
    return _count(prog.block, ev, [])


def _count(block: Block, ev: Evaluator, loops: list[LoopOp]) -> int:
    n = 0
    for op in block.ops:
        if isinstance(op, TaskOp):
            n += 1
        elif isinstance(op, LoopOp):
            trips = _trips(op, ev, loops)
            if trips:
                n += trips * (1 + _count(op.block, ev, [*loops, op]))
    return n


def _trips(loop: LoopOp, ev: Evaluator, outer: list[LoopOp]) -> int:
    """The loop's trip count, at most over two samples of the enclosing loops."""
    lo, hi = ev.static(loop.lower), ev.static(loop.upper)
    if lo is not None and hi is not None:
        return max(0, hi - lo + 1)
    best = 0
    for pick in (0, 1):
        env: dict[SSAValue, int] = {}
        for o in outer:
            bound = o.lower if pick == 0 else o.upper
            value = _value(ev, bound, env)
            if value is None:
                break
            env[o.block.args[0]] = value
        lo_v, hi_v = _value(ev, loop.lower, env), _value(ev, loop.upper, env)
        if lo_v is not None and hi_v is not None:
            best = max(best, hi_v - lo_v + 1)
    return best


def _value(ev: Evaluator, v: SSAValue, env: dict[SSAValue, int]) -> int | None:
    try:
        return ev.eval(v, env)
    except ExprError:
        return None


__all__ = ["estimate_task_count"]
