"""The race detector's horizon: lower bounds of what every stream and issued
task of a run will know when it next accesses memory.  An access that all of
them already know happened before cannot race with anything still to come, so
the detector's shadow memory drops it (D-RT-RACE-GC).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from nem.runtime.checks import join
from nem.runtime.task_state import Frame, TaskInst, VectorClock


def live_vcs(frames: Collection[Frame], live: Iterable[TaskInst]) -> Iterator[VectorClock]:
    """Lower bounds of what every stream and issued task will know when it
    next accesses memory (the race detector drops what all of them know).

    A stream blocked at a loop issues nothing until every iteration's
    stream ended, and the loop's unopened iterations open knowing the
    stream's clock joined with the loop's prefix (`_open_iterations`); the
    next one, `run.next`, opens only when every iteration <= next - N has
    completed (`may_open`), so both also know what those live iterations
    will know at their end, at least `_future_vc` of their streams
    (recursively: an iteration blocked at an inner loop).  Without that,
    a long inner loop's accesses stayed in the shadow memory until its
    outer iteration completed."""
    by_run: dict[int, list[Frame]] = {}
    for f in frames:
        if f.looprun is not None:
            by_run.setdefault(id(f.looprun), []).append(f)
    memo: dict[int, VectorClock] = {}
    for f in frames:
        yield _future_vc(f, by_run, memo)
    for t in live:
        yield t.kvc


def _future_vc(
    f: Frame, by_run: dict[int, list[Frame]], memo: dict[int, VectorClock]
) -> VectorClock:
    """What stream `f` knows from now on (see `live_vcs`)."""
    run = f.loop
    if run is None:
        return f.K
    hit = memo.get(id(f))
    if hit is not None:
        return hit
    if run.last_open_vc is not None:
        # every iteration opened: only `f` issues more, once every stream
        # ended, knowing what each knew at its end (`end_vc`, LOOP_END;
        # not the tasks they left uncovered, which `done` holds)
        vc = join(join(f.K, run.last_open_vc), run.end_vc)
        upto = run.hi
    else:
        # the iterations <= next - N complete before the next one opens:
        # the prefix it opens with holds their `done_vc`, tasks included
        vc = join(f.K, run.prefix_vc)
        upto = run.next - run.tpl.n
        for i, (done_vc, _t, _chain) in run.done.items():
            if i <= upto:
                vc = join(vc, done_vc)
    for g in by_run.get(id(run), ()):
        assert g.index is not None  # an iteration's stream
        if g.index <= upto:
            vc = join(vc, _future_vc(g, by_run, memo))
    memo[id(f)] = vc
    return vc
