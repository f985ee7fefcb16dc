"""Skipping the steady state of a long loop in the hazard analysis (D-HAZ-STEADY).

The hazard analysis (`hazard_finder.HazardFinder`) replays a program's task
instances against shadow memory.  A loop of 10^6 iterations is 10^6 replays
of its body, although after a few iterations nothing new can be learned:
when every access of iteration `o + P` is the access of iteration `o`
shifted by `D_b` bytes (one shift per buffer `b`, `P` the period of the
`mod`/`/` slots), the analysis is *translation invariant*.  This module
proves that and lets the analysis jump from iteration `c` to `c + m*P`.

Why the jump is exact (the finder's diagnostics are word for word those of
the full replay; `test/unit/test_hazard_steady_state.py` compares both on
random programs):

1. *Accesses are periodic* (`regular_body`): the offsets and extents of
   every access of the body, and the buffer instances (`P` a multiple of the
   loop-body buffers' windows), repeat every `P` iterations, offsets shifted
   by `D_b`.  Proven first on the expression tapes, for any trip count
   (`symbolic_shifts`): quasi-affine expressions in the loop variable (`+`,
   `-`, `*` by a loop-invariant, `/` and `mod` by a nonzero loop-invariant)
   move by an amount per period computed node by node, every node's interval
   over the loop's whole range (`iteration_space.combine`) lies in int64 so
   the replay evaluates every iteration exactly, and `P` is raised until
   every division is exact (`_tape_shift` states the induction).  What it
   refuses (e.g. `(i * i) mod 2`) is, for loops of at most
   `MAX_REGULAR_TRIP` iterations, evaluated for every iteration at once
   (`iteration_space.vector_eval`, exact int64 or it refuses) and compared
   with the values `P` iterations later.
2. *Dead entries*: an access of iteration `j` is ordered before every access
   of iteration `>= j + N` (`window_orders`) and, for `j` below the last `N`,
   before everything after the loop (`complete_at_loop_end`); with every
   enclosing loop at `@max_in_flight(1)` also before all later iterations of
   those loops.  A dead shadow entry never yields a hazard: the *effective*
   state (`canonical_state`) drops it, and a byte whose entries are all dead
   behaves as an untouched byte.
3. *Entries from before the loop* keep their bytes.  In buffers with `D_b != 0`
   they would not move with the loop's accesses, so a live one there refuses
   the jump; in buffers with `D_b = 0` they are compared by identity.  From
   iteration `N` on, whether such an entry is ordered before an access of
   the loop does not depend on the iteration (`ordered`: a dep, a barrier,
   or the window `window_orders(ord, N)`).
4. *Induction*: the replay of iteration `j + P` on the shifted state is the
   shifted replay of iteration `j` (1, 2, 3), and yields the same hazard keys
   (task pair, regions, access kinds), which were recorded at `j`.  So once
   the effective state at the start of iteration `c` is the shift of the one
   at `c - P` (`c - P >= N`, checked by comparing `canonical_state`s), the
   state at `c + m*P` is the shift of the state at `c` (built by
   `shifted_shadow`), and iterations `c .. c + m*P - 1` record no new hazard.
   The remaining iterations are replayed from that exact state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from math import gcd
from typing import TYPE_CHECKING

import numpy as np
from xdsl.ir import BlockArgument, SSAValue

from nem.analysis.shadow_memory import Access, SegmentState, Shadow

if TYPE_CHECKING:
    from nem.analysis.happens_before import Instance
from nem.dialect.iteration_space import Form, Inexact, combine, vector_eval
from nem.dialect.ops import LoopOp
from nem.dialect.semantics import _ARG, _BINOP, _CONST, _FORWARD, Evaluator, ExprError, apply_binop

MAX_REGULAR_TRIP = 1 << 23
"""Longest loop whose accesses are evaluated at once to prove them periodic
when the symbolic proof (`symbolic_shifts`) does not apply."""
MAX_PERIOD = 1 << 12
"""Largest period of `mod`/`/` slots the steady state is looked for."""


@dataclass(frozen=True)
class Regularity:
    """A loop body whose accesses repeat, shifted, every `period` iterations."""

    period: int
    shift: dict[SSAValue, int]
    """Buffer -> bytes its accesses move per period."""


def _lcm(a: int, b: int) -> int:
    return a * b // gcd(a, b)


def _divisors(ev: Evaluator, values: list[SSAValue]) -> int:
    """The lcm of the constant divisors (`/`, `mod`) in the values' tapes:
    the candidate period of a quasi-affine expression."""
    p = 1
    for v in values:
        if ev.static(v) is not None:
            continue
        tape = ev.tape(v)
        for kind, x, _y, z in tape:
            if kind == _BINOP and x in ("/", "mod") and tape[z][0] == _CONST and tape[z][1]:
                p = _lcm(p, abs(tape[z][1]))
    return p


class _Refused(Exception):
    """The symbolic proof does not apply (not quasi-affine, not exact in int64)."""


class _Raise(Exception):
    """The period must be multiplied by `factor` for a divisibility to hold."""

    def __init__(self, factor: int):
        super().__init__(factor)
        self.factor = factor


def _tape_shift(ev: Evaluator, value: SSAValue, var: BlockArgument, env: Mapping[BlockArgument, int],
                box: Mapping[BlockArgument, tuple[int, int]], period: int) -> int:
    """The amount `value` moves when loop variable `var` advances by `period`
    (every other variable fixed by `env`), for every `var` in `box[var]` such
    that `var + period` is there too.  Walks the tape once, each node getting
    its shift `k` and its `Form` over `box` (the interval of every value it
    takes, `iteration_space.combine`).  Proven per node, by induction:
    `k(var) = period`, `k(const or env variable) = 0`, `k(a +- b) = k(a) +- k(b)`,
    `k(a * c) = k(a) * c` for a loop-invariant `c`; `a / c` and `a mod c` for a
    loop-invariant `c != 0` need `k(a) = 0`, or `c | k(a)` and `a` of one sign
    over the box (truncated division is floor division of `|a|` there), and
    give `k(a) / c` and 0.  Every node's interval must lie in int64, so the
    replay evaluates every iteration exactly, as the shifts say (D-INT-RANGE).
    Raises `_Raise` when `c` does not divide `k(a)` (a longer period may),
    `_Refused` for anything else."""
    s = ev.static(value)
    if s is not None:
        return 0
    shift: list[int] = []
    inv: list[int | None] = []   # the node's value when it does not depend on `var`
    form: list[Form] = []
    for kind, x, y, z in ev.tape(value):
        k, c = 0, None
        if kind == _CONST:
            c = x
        elif kind == _ARG and x is var:
            k = period
        elif kind == _ARG and x in env:
            c = env[x]
        elif kind == _FORWARD:
            k, c = shift[x], inv[x]
        elif kind == _BINOP:
            a, b = inv[y], inv[z]
            if a is not None and b is not None:
                try:
                    c = apply_binop(x, a, b)
                except ExprError:
                    raise _Refused from None
            elif x in ("+", "-"):
                k = shift[y] + shift[z] if x == "+" else shift[y] - shift[z]
            elif x == "*" and (a is not None or b is not None):
                k = shift[y] * b if b is not None else shift[z] * a  # type: ignore[operator]
            elif x in ("/", "mod") and b:
                ka, (lo, hi) = shift[y], form[y].interval or (-1, 1)
                if ka and lo < 0 < hi:
                    raise _Refused
                if ka % b:
                    raise _Raise(abs(b) // gcd(ka, b))
                k = ka // b if x == "/" else 0
            else:
                raise _Refused
        else:
            raise _Refused
        if c is not None:
            f = Form((c, c), (c, {}))
        elif kind == _ARG:
            f = Form(box[x], (0, {x: 1}))
        elif kind == _FORWARD:
            f = form[x]
        else:
            f = combine(x, form[y], form[z], box)
        if not f.fits:
            raise _Refused
        shift.append(k)
        inv.append(c)
        form.append(f)
    return shift[-1]


def symbolic_shifts(ev: Evaluator, loop: LoopOp, accesses: list[tuple[SSAValue, SSAValue, SSAValue]],
                    env: Mapping[BlockArgument, int], lo: int, trip: int,
                    period: int) -> Regularity | None:
    """`regular_body` without evaluating any iteration: the shortest multiple
    of `period` (at most `MAX_PERIOD`) for which every extent's shift is 0 and
    the offsets of each buffer share one shift, all proven on the expression
    tapes (`_tape_shift`) over the loop's whole range, whatever its trip count."""
    var = loop.block.args[0]
    box = {x: (v, v) for x, v in env.items()}
    box[var] = (lo, lo + trip - 1)
    while period <= MAX_PERIOD:
        shift: dict[SSAValue, int] = {}
        try:
            for buffer, off, ext in accesses:
                d = _tape_shift(ev, off, var, env, box, period)
                if _tape_shift(ev, ext, var, env, box, period) or \
                        shift.setdefault(buffer, d) != d:
                    return None
        except _Raise as r:
            period *= r.factor
            continue
        except (_Refused, ExprError):
            return None
        return Regularity(period, shift)
    return None


def regular_body(ev: Evaluator, loop: LoopOp, accesses: list[tuple[SSAValue, SSAValue, SSAValue]],
                 env: Mapping[BlockArgument, int], lo: int, trip: int,
                 windows: list[int]) -> Regularity | None:
    """Prove that the accesses `(buffer, offset, extent)` of the body of `loop`
    (which holds no nested loop) repeat with a period: the extents every
    `period` iterations, the offsets shifted by one amount per buffer.
    `env` binds the enclosing loop variables, the loop runs `trip` iterations
    from `lo`, `windows` are the instance windows (at this loop) of the
    loop-body buffers it uses.  The symbolic proof (`symbolic_shifts`) comes
    first, for any trip count; what it refuses (not quasi-affine in the loop
    variable, e.g. `(i * i) mod 2`) is evaluated for every iteration at once
    when the loop is at most `MAX_REGULAR_TRIP` long.  None when not proven:
    an expression int64 cannot evaluate exactly, no period short enough, or
    shifts that differ between accesses of one buffer."""
    base = 1
    for w in windows:
        base = _lcm(base, w)
    reg = symbolic_shifts(ev, loop, accesses, env, lo, trip, base)
    if reg is not None and 2 * reg.period < trip:
        return reg
    if trip > MAX_REGULAR_TRIP:
        return None
    try:
        period = _lcm(base, _divisors(ev, [v for _, off, ext in accesses for v in (off, ext)]))
    except ExprError:
        return None
    if period > MAX_PERIOD or 2 * period >= trip:
        return None
    full: dict[BlockArgument, object] = {x: np.int64(v) for x, v in env.items()}
    full[loop.block.args[0]] = np.arange(lo, lo + trip, dtype=np.int64)
    shift: dict[SSAValue, int] = {}
    for buffer, off, ext in accesses:
        try:
            o = vector_eval(ev, off, full, trip)  # type: ignore[arg-type]
            e = vector_eval(ev, ext, full, trip)  # type: ignore[arg-type]
        except (Inexact, ExprError):
            return None
        if o is None or e is None or not np.array_equal(e[period:], e[:-period]):
            return None
        d = o[period:] - o[:-period]
        if not np.all(d == d[0]) or shift.setdefault(buffer, int(d[0])) != int(d[0]):
            return None
    return Regularity(period, shift)


@dataclass(frozen=True)
class LoopRun:
    """One run of a loop in the replay: the loop inside `chain` (loops at
    `@max_in_flight(1)`, at ordinals `outer`), its window `n`, and the
    regularity of its body."""

    loop: LoopOp
    chain: tuple[LoopOp, ...]
    """The enclosing loops, outermost first (`level` of them)."""
    outer: tuple[int, ...]
    n: int
    reg: Regularity

    @property
    def level(self) -> int:
        return len(self.chain)

    def _entry(self, acc: Access, ord_: int, shift: int) -> tuple | None:
        """The canonical form of a shadow entry at the start of iteration
        `ord_` (None when dead: ordered before everything still to come)."""
        inst, lvl = acc.inst, self.level
        loops = inst.task.loops
        if len(loops) > lvl and loops[lvl] is self.loop and inst.ords[:lvl] == self.outer:
            rel = inst.ords[lvl] - ord_
            if -rel >= self.n:
                return None
            return (inst.task.pos, id(acc.region), acc.write, rel, acc.lo - shift, acc.hi - shift)
        for m in range(min(len(loops), lvl)):
            if loops[m] is not self.chain[m]:
                break
            if inst.ords[m] != self.outer[m]:
                return None  # an earlier iteration of a @max_in_flight(1) loop
        return ("before", id(acc))

    def _loop_shadows(self, shadows: Mapping[tuple[SSAValue, int], Shadow]
                      ) -> Iterator[tuple[tuple[SSAValue, int], int, list]]:
        """(key, shift per period, touched spans) of the shadows of the
        buffers the loop accesses."""
        for key, sh in shadows.items():
            d = self.reg.shift.get(key[0])
            if d is not None:
                yield key, d, [(lo, hi, st) for lo, hi, st in sh.spans() if st is not None]

    def canonical_state(self, shadows: Mapping[tuple[SSAValue, int], Shadow], ord_: int,
                        periods: int) -> dict | None:
        """The effective shadow state of the loop's buffers at the start of
        iteration `ord_`, bytes taken relative to `periods` periods of shift;
        None when a live entry from before the loop sits in a buffer whose
        accesses move (the jump would have to keep it in place)."""
        out: dict[tuple[SSAValue, int], list] = {}
        for key, d, touched in self._loop_shadows(shadows):
            s = d * periods
            spans: list = []
            for lo, hi, st in touched:
                w = st[0] and self._entry(st[0], ord_, s)
                rs = tuple(e for e in (self._entry(r, ord_, s) for r in st[1]) if e is not None)
                if d and any(e[0] == "before" for e in ((w,) if w else ()) + rs):
                    return None
                if w is None and not rs:
                    continue
                if spans and spans[-1][1] == lo - s and spans[-1][2:] == (w, rs):
                    spans[-1] = (spans[-1][0], hi - s, w, rs)
                else:
                    spans.append((lo - s, hi - s, w, rs))
            if spans:
                out[key] = spans
        return out

    def shifted(self, shadows: Mapping[tuple[SSAValue, int], Shadow], ord_: int,
                periods: int) -> dict[tuple[SSAValue, int], Shadow] | None:
        """The loop's shadows at iteration `ord_ + periods * period`, from their
        state at `ord_` (dead entries dropped, the loop's own entries moved
        `periods` periods on); None when a byte would fall below 0."""
        steps = periods * self.reg.period
        moved: dict[int, Instance] = {}

        def move(acc: Access, d: int) -> Access:
            inst = acc.inst
            new = moved.get(id(inst))
            if new is None:
                lvl = self.level
                ords = inst.ords[:lvl] + (inst.ords[lvl] + steps,) + inst.ords[lvl + 1:]
                ivs = inst.ivs[:lvl] + (inst.ivs[lvl] + steps,) + inst.ivs[lvl + 1:]
                new = moved[id(inst)] = replace(inst, ords=ords, ivs=ivs)
            return replace(acc, inst=new, lo=acc.lo + d, hi=acc.hi + d)

        out: dict[tuple[SSAValue, int], Shadow] = {}
        for key, b, touched in self._loop_shadows(shadows):
            d = b * periods
            spans: list[tuple[int, int, SegmentState]] = []
            for lo, hi, st in touched:
                w, rs = st
                ew = w and self._entry(w, ord_, 0)
                keep_rs = []
                for r in rs:
                    e = self._entry(r, ord_, 0)
                    if e is not None:
                        keep_rs.append(r if e[0] == "before" else move(r, d))
                new_w = None if w is None or not ew else (w if ew[0] == "before" else move(w, d))
                if new_w is None and not keep_rs:
                    continue
                if lo + d < 0:
                    return None
                spans.append((lo + d, hi + d, (new_w, keep_rs)))
            out[key] = Shadow.of_spans(spans)
        return out
