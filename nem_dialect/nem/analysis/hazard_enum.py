"""The hazard analysis's fallback for buffers isl cannot represent an access
of (an offset, extent or loop bound that is not quasi-affine: a product of
loop variables, a division by one): the task instances accessing such a
buffer are enumerated with the execution model's evaluator and replayed in
issue order against shadow memory (per buffer instance, a sorted map of
byte segments to their last writer and the readers since that write), each
access compared with the accesses it overlaps only (D-HAZ-SCALE) through
the happens-before model's `ordered`.  At most `max_instances` task
instances are enumerated in all; a loop cut short by that budget gets a
warning naming the iterations examined (D-HAZ-WINDOW).  `ShadowReplay` is
also the core of the enumerating oracle of the tests (test/unit/hazard_replay.py).
"""

from __future__ import annotations

import bisect

from xdsl.ir import SSAValue

from nem.analysis.element_access import ElementPattern
from nem.analysis.happens_before import Instance, Order, StaticTask, Structure, issue_key, ordered
from nem.analysis.hazard_report import Access, StaticAccess
from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.ops import LoopOp
from nem.dialect.semantics.instances import instance_index

RaceKey = tuple[object, ...]
"""(earlier task, later task, earlier region, later region, earlier writes, later writes)."""


class Shadow:
    """Byte segments of one buffer instance: [starts[k], starts[k+1]) -> state[k],
    None (untouched) or (last writer | None, readers since that write)."""

    def __init__(self) -> None:
        self.starts: list[int] = [0]
        self.state: list[tuple[Access | None, list[Access]] | None] = [None]

    def _split(self, x: int) -> int:
        k = bisect.bisect_right(self.starts, x) - 1
        if self.starts[k] == x:
            return k
        st = self.state[k]
        self.starts.insert(k + 1, x)
        self.state.insert(k + 1, None if st is None else (st[0], list(st[1])))
        return k + 1

    def segments(self, lo: int, hi: int) -> tuple[int, int]:
        """Split at `lo` and `hi`; the indices of the segments [lo, hi) covers."""
        return self._split(lo), self._split(hi)

    def write(self, acc: Access, lo: int, hi: int) -> None:
        a, b = self.segments(lo, hi)
        del self.starts[a + 1 : b]
        del self.state[a + 1 : b]
        self.state[a] = (acc, [])


class ShadowReplay:
    """Accesses replayed in issue order; `found` keeps, per race key, the first
    unordered pair met: each access against the last writer and the readers
    since, of every byte it touches."""

    def __init__(self, s: Structure):
        self.s = s
        self.found: dict[RaceKey, tuple[Access, Access, Order]] = {}
        self.byte: dict[RaceKey, int] = {}
        """The first byte where each race was met."""
        self.work = 0

    def access(self, acc: Access, sh: Shadow, runs: list[tuple[int, int]] | None = None) -> None:
        """Replay `acc` on the bytes of `runs` (`element_runs`: a strided
        region's elements, D-HAZ-ELEMENTS), else on its whole range."""
        checked: set[int] = set()
        superseded: dict[int, bool] = {}
        for lo, hi in runs if runs is not None else [(acc.lo, acc.hi)]:
            self._run(acc, sh, lo, hi, checked, superseded)
            if acc.write:
                sh.write(acc, lo, hi)

    def _run(
        self,
        acc: Access,
        sh: Shadow,
        lo: int,
        hi: int,
        checked: set[int],
        superseded: dict[int, bool],
    ) -> None:
        a, b = sh.segments(lo, hi)
        self.work += b - a
        for k in range(a, b):
            st = sh.state[k]
            if st is None:
                if not acc.write:
                    sh.state[k] = (None, [acc])
                continue
            writer, readers = st
            if acc.write:
                if writer is not None:
                    self._check(writer, acc, checked, sh.starts[k])
                for r in readers:
                    self._check(r, acc, checked, sh.starts[k])
                continue
            kept = [
                r
                for r in readers
                if r.region is not acc.region or not self._superseded(r, acc, superseded)
            ]
            if writer is not None and len(kept) == len(readers):
                # else a dropped reader was compared with this writer: ordered
                # after it (so is acc) or a race with the same key was found
                self._check(writer, acc, checked, sh.starts[k])
            kept.append(acc)
            readers[:] = kept

    def _superseded(self, r: Access, acc: Access, memo: dict[int, bool]) -> bool:
        """Reader `r` can be forgotten once the read `acc` of the same task
        operand is ordered after it: a later write unordered with `r` is
        unordered with `acc` too (ordering is transitive), and the race it
        reports names the same tasks and operands; and `acc` need not be
        compared with the segment's writer, which `r` was (D-HAZ-SCALE,
        issue 11)."""
        if r.inst.task is not acc.inst.task:
            return False
        hit = memo.get(id(r))
        if hit is None:
            self.work += 1
            hit = memo[id(r)] = r.inst is acc.inst or ordered(self.s, r.inst, acc.inst).ordered
        return hit

    def _check(self, prev: Access, acc: Access, checked: set[int], byte: int) -> None:
        if prev.inst is acc.inst or id(prev) in checked:
            return
        checked.add(id(prev))
        self.work += 1
        order = ordered(self.s, prev.inst, acc.inst)
        if order.ordered:
            return
        key = (prev.inst.task, acc.inst.task, prev.region, acc.region, prev.write, acc.write)
        if key not in self.found:
            self.found[key] = (prev, acc, order)
            self.byte[key] = max(byte, acc.lo)


class Enumeration:
    """The replay of the buffers the symbolic analysis cannot take."""

    def __init__(self, s: Structure, ev: Evaluator, max_instances: int, warnings: list[Diagnostic]):
        self.s, self.ev, self.max_instances = s, ev, max_instances
        self.left = max_instances
        self.warnings = warnings
        self._instances: dict[StaticTask, list[Instance]] = {}
        self._warned: set[LoopOp] = set()
        self._pattern_runs: dict[tuple[ElementPattern, int], list[tuple[int, int]]] = {}

    def replay(self, accs: list[StaticAccess]) -> ShadowReplay:
        """Replay the accesses `accs` (those of one buffer) in issue order."""
        points = []
        for acc in accs:
            t = self.s.tasks[acc.op]
            for inst in self.instances(t):
                env: dict[SSAValue, int] = {lp.block.args[0]: v for lp, v in zip(t.loops, inst.ivs)}
                try:
                    lo, ext = self.ev.eval(acc.offset, env), self.ev.eval(acc.extent, env)
                except ExprError:
                    continue
                if lo is None or ext is None or ext <= 0:
                    continue
                w = acc.windows
                slot = instance_index(inst.ords[: len(w)], w) if w else 0
                runs = None
                if acc.pattern is not None:  # its elements' bytes (D-HAZ-ELEMENTS)
                    runs = [(lo + a, lo + b) for a, b in self._runs(acc.pattern, ext)]
                points.append(
                    (
                        issue_key(self.s, inst),
                        acc.rank,
                        slot,
                        Access(inst, acc.region, lo, lo + ext, acc.write),
                        runs,
                    )
                )
        points.sort(key=lambda p: (p[0], p[1]))
        rep = ShadowReplay(self.s)
        shadows: dict[int, Shadow] = {}
        for _, _, slot, a, runs in points:
            sh = shadows.get(slot)
            if sh is None:
                sh = shadows[slot] = Shadow()
            rep.access(a, sh, runs)
        return rep

    def _runs(self, pattern: ElementPattern, extent: int) -> list[tuple[int, int]]:
        hit = self._pattern_runs.get((pattern, extent))
        if hit is None:
            hit = self._pattern_runs[pattern, extent] = pattern.runs(extent)
        return hit

    def instances(self, t: StaticTask) -> list[Instance]:
        """The instances of `t` in issue order (within the budget)."""
        hit = self._instances.get(t)
        if hit is None:
            hit = self._instances[t] = []
            self._walk(t, 0, (), (), (), {}, hit)
            self.left -= len(hit)
        return hit

    def _walk(
        self,
        t: StaticTask,
        k: int,
        ords: tuple[int, ...],
        trips: tuple[int, ...],
        ivs: tuple[int, ...],
        env: dict[SSAValue, int],
        out: list[Instance],
    ) -> None:
        if k == len(t.loops):
            out.append(Instance(t, ords, trips, ivs))
            return
        loop = t.loops[k]
        try:
            lo, hi = self.ev.eval(loop.lower, env), self.ev.eval(loop.upper, env)
        except ExprError:
            return
        if lo is None or hi is None or hi < lo:
            return
        trip = hi - lo + 1
        arg = loop.block.args[0]
        for o in range(trip):
            if len(out) >= self.left:
                self._warn(loop, lo, hi, o)
                break
            env[arg] = lo + o
            self._walk(t, k + 1, ords + (o,), trips + (trip,), ivs + (lo + o,), env, out)
        env.pop(arg, None)

    def _warn(self, loop: LoopOp, lo: int, hi: int, n: int) -> None:
        if loop in self._warned:
            return
        self._warned.add(loop)
        self.warnings.append(window_warning(loop, lo, hi, n, self.max_instances))


def window_warning(loop: LoopOp, lo: int, hi: int, n: int, max_instances: int) -> Diagnostic:
    """The D-HAZ-WINDOW warning: iterations lo..lo+n-1 of lo..hi were examined."""
    return Diagnostic(
        "warning",
        f"hazard analysis of loop '{loop.iv_name.data}' examined "
        f"iterations {lo}..{lo + n - 1} of {lo}..{hi} only (more than "
        f"{max_instances} task instances)",
        SourceLoc.of(loop),
        "HAZ-03",
        "accesses of the remaining iterations are not checked (decision D-HAZ-WINDOW)",
    )
