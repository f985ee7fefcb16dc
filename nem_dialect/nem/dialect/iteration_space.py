"""Loop-dependent static checks over whole iteration spaces (D-VERIFY-ENUM, D-VERIFY-BUDGET).

A region's offset or a transfer's extents may depend on the variables of the
enclosing loops; the verifier must check them at every iteration, and a
loop may run 10^9 times.  This module gives the verifier two tools, both
built on the integer-expression tapes of `nem.dialect.expressions.Evaluator`
(so the arithmetic is the one of the execution model, D-INT-RANGE):

* `Form` (`forms`): per expression, an exact affine form `c + sum(a_k * x_k)`
  when the expression is affine in the loop variables, and an interval that
  holds every value it takes over the *box* of constant loop bounds (exact
  for affine expressions: an affine function's extremes over a box are at
  corners, `witness` names the corner; conservative across `mod` and `/`,
  which are bounded by case analysis on the signs of their operands).  A
  check proven by the intervals needs no enumeration at all.
* `IterationSpace.chunks`: the iteration points, in program order (outer
  loop slowest), as numpy arrays of at most `CHUNK` points each (loop bounds
  that depend on outer variables included), and `vector_eval`, which
  evaluates a tape on a chunk at once.  numpy's int64 wraps silently where
  NEM integers must not (D-INT-RANGE): `vector_eval` raises `Inexact` when a
  result may have left the 64-bit range or a divisor is zero, and the caller
  checks that chunk point by point with the exact scalar evaluator.

What is neither proven by intervals nor enumerated within `MAX_POINTS` is
reported by the verifier as a warning that names the check and the
iterations examined (D-VERIFY-BUDGET); no check stops silently.

numpy loads on the first enumeration, not with this module: a program whose
checks the intervals prove (most) is verified without it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.ir import BlockArgument, SSAValue

from nem.dialect.expressions import (
    TAPE_ARG,
    TAPE_BINOP,
    TAPE_CONST,
    TAPE_FORWARD,
    Evaluator,
    ExprError,
)
from nem.dialect.limits import INT_MAX, INT_MIN
from nem.dialect.ops import LoopOp

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MAX_POINTS = 1 << 22
"""Iteration points one check enumerates (vectorized) before it stops with a warning."""
MAX_SCALAR_POINTS = 1 << 16
"""Of those, points checked one by one (where int64 is not exact) before it stops."""
CHUNK = 1 << 16
"""Iteration points evaluated at once."""

Interval = tuple[int, int]


class Inexact(Exception):
    """A vectorized evaluation that int64 arithmetic cannot do exactly."""


@dataclass(frozen=True)
class Form:
    """What is known of an expression over a box of loop-variable values."""

    interval: Interval | None
    """Every value lies in [lo, hi]; None when unbounded (a divisor that may be 0)."""
    affine: tuple[int, dict[BlockArgument, int]] | None
    """(c, {x: a}): the expression is exactly c + sum(a * x); None when not affine."""
    fits: bool = True
    """No intermediate result can leave the 64-bit range (D-INT-RANGE)."""


def affine_interval(
    aff: tuple[int, dict[BlockArgument, int]], box: Mapping[BlockArgument, Interval]
) -> Interval:
    """[min, max] of `c + sum(a * x)` over `box` (at its corners)."""
    c, coeffs = aff
    lo = hi = c
    for x, a in coeffs.items():
        xl, xh = box[x]
        lo += min(a * xl, a * xh)
        hi += max(a * xl, a * xh)
    return lo, hi


def _in_range(iv: Interval | None) -> bool:
    return iv is not None and INT_MIN <= iv[0] and iv[1] <= INT_MAX


def _mul_iv(a: Interval, b: Interval) -> Interval:
    p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(p), max(p)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _div_iv(a: Interval, b: Interval) -> Interval | None:
    """Truncated division is monotone in each operand on a sign-definite
    divisor, so its extremes are at corners."""
    if b[0] <= 0 <= b[1]:
        return None
    p = [_trunc_div(x, y) for x in a for y in b]
    return min(p), max(p)


def _mod_iv(a: Interval, b: Interval) -> Interval | None:
    """The truncated remainder has the sign of `a` and |r| < |b|, |r| <= |a|;
    it is `a` itself when 0 <= a < |b| (ping-pong slots `i mod K`)."""
    if b[0] <= 0 <= b[1]:
        return None
    m = max(abs(b[0]), abs(b[1])) - 1
    if a[0] >= 0 and a[1] <= min(abs(b[0]), abs(b[1])) - 1:
        return a
    lo = 0 if a[0] >= 0 else -min(m, -a[0])
    hi = 0 if a[1] <= 0 else min(m, a[1])
    return lo, hi


def combine(op: str, a: Form, b: Form, box: Mapping[BlockArgument, Interval]) -> Form:
    """`a op b` (`op` one of `+ - * / mod`) as a Form over `box`."""
    aff = None
    if a.affine is not None and b.affine is not None:
        (ca, xa), (cb, xb) = a.affine, b.affine
        if op in "+-":
            s = 1 if op == "+" else -1
            coeffs = dict(xa)
            for x, k in xb.items():
                coeffs[x] = coeffs.get(x, 0) + s * k
            aff = (ca + s * cb, {x: k for x, k in coeffs.items() if k})
        elif op == "*" and (not xa or not xb):
            k, (c, xs) = (ca, b.affine) if not xa else (cb, a.affine)
            aff = (k * c, {x: k * v for x, v in xs.items()} if k else {})
    if aff is not None:
        iv: Interval | None = affine_interval(aff, box)
    elif a.interval is None or b.interval is None:
        iv = None
    elif op == "+":
        iv = (a.interval[0] + b.interval[0], a.interval[1] + b.interval[1])
    elif op == "-":
        iv = (a.interval[0] - b.interval[1], a.interval[1] - b.interval[0])
    elif op == "*":
        iv = _mul_iv(a.interval, b.interval)
    elif op == "/":
        iv = _div_iv(a.interval, b.interval)
    else:
        iv = _mod_iv(a.interval, b.interval)
    return Form(iv, aff, a.fits and b.fits and _in_range(iv))


def forms(
    ev: Evaluator, values: Sequence[SSAValue], box: Mapping[BlockArgument, Interval]
) -> list[Form | None]:
    """The `Form` of each value over `box` (the constant bounds of the loops
    its variables belong to); None for a value that is not an integer
    expression of those variables."""
    out: list[Form | None] = []
    for v in values:
        s = ev.static(v)
        if s is not None:
            out.append(Form((s, s), (s, {})))
            continue
        regs: list[Form | None] = []
        for kind, x, y, z in ev.tape(v):
            if kind == TAPE_CONST:
                regs.append(Form((x, x), (x, {})))
            elif kind == TAPE_ARG:
                regs.append(Form(box[x], (0, {x: 1})) if x in box else None)
            elif kind == TAPE_FORWARD:
                regs.append(regs[x])
            elif kind == TAPE_BINOP:
                a, b = regs[y], regs[z]
                regs.append(None if a is None or b is None else combine(x, a, b, box))
            else:
                regs.append(None)
        out.append(regs[-1])
    return out


def witness(
    form: Form, box: Mapping[BlockArgument, Interval], minimize: bool
) -> dict[SSAValue, int]:
    """The corner of `box` where affine `form` takes its minimum (or maximum):
    a binding of the loop variables, as `point` gives."""
    assert form.affine is not None
    _, coeffs = form.affine
    env: dict[SSAValue, int] = {x: lo for x, (lo, _) in box.items()}
    for x, a in coeffs.items():
        lo, hi = box[x]
        env[x] = (lo if a > 0 else hi) if minimize else (hi if a > 0 else lo)
    return env


# ---------------------------------------------------------------------------
# vectorized enumeration
# ---------------------------------------------------------------------------

_LIMIT = 1 << 62
"""|values| below this are products and sums int64 computes exactly."""


def vector_eval(
    ev: Evaluator, value: SSAValue, env: Mapping[BlockArgument, np.ndarray], n: int
) -> np.ndarray | None:
    """`value` at `n` points (`env[x]` the values of loop variable x), as int64;
    None when it is not an integer expression.  Raises `Inexact` when a value
    may leave the 64-bit range or a divisor is 0 (then the scalar evaluator
    decides, with its exact errors)."""
    import numpy as np

    s = ev.static(value)
    if s is not None:
        return np.full(n, s, dtype=np.int64)
    regs: list[np.ndarray | None] = []
    for kind, x, y, z in ev.tape(value):
        if kind == TAPE_CONST:
            regs.append(np.array(x, dtype=np.int64))
        elif kind == TAPE_ARG:
            regs.append(env.get(x))
        elif kind == TAPE_FORWARD:
            regs.append(regs[x])
        elif kind == TAPE_BINOP:
            a, b = regs[y], regs[z]
            regs.append(None if a is None or b is None else _vec_binop(x, a, b))
        else:
            regs.append(None)
    r = regs[-1]
    return None if r is None else np.broadcast_to(r, (n,))


def _vec_binop(
    op: str, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    import numpy as np

    with np.errstate(over="ignore"):
        if op == "+":
            r = a + b
            bad = ((a ^ r) & (b ^ r)) < 0
        elif op == "-":
            r = a - b
            bad = ((a ^ b) & (a ^ r)) < 0
        elif op == "*":
            r = a * b
            bad = np.abs(np.multiply(a, b, dtype=np.float64)) >= _LIMIT
        else:
            if np.any(b == 0) or np.any(a == INT_MIN):
                raise Inexact
            mag = np.abs(a) // np.abs(b)
            q: npt.NDArray[np.int64] = np.where((a >= 0) == (b >= 0), mag, -mag)
            return q if op == "/" else a - q * b
    if np.any(bad):
        raise Inexact
    return r


class IterationSpace:
    """The iteration points of `loops` (outermost first) in program order."""

    def __init__(self, ev: Evaluator, loops: Sequence[LoopOp]):
        self.ev = ev
        self.loops = tuple(loops)
        self.args = tuple(lp.block.args[0] for lp in self.loops)

    def box(self) -> dict[BlockArgument, Interval] | None:
        """Each loop variable's constant bounds; None when a bound is not constant
        or a loop runs zero times (then its body is never checked)."""
        box = {}
        for lp, x in zip(self.loops, self.args):
            try:
                lo, hi = self.ev.static(lp.lower), self.ev.static(lp.upper)
            except ExprError:
                return None
            if lo is None or hi is None or lo > hi:
                return None
            box[x] = (lo, hi)
        return box

    def size(self) -> int | None:
        box = self.box()
        if box is None:
            return None
        n = 1
        for lo, hi in box.values():
            n *= hi - lo + 1
        return n

    def chunks(self) -> Iterator[tuple[dict[BlockArgument, np.ndarray], int]]:
        """(values of each loop variable, point count) per chunk of points,
        in program order.  Raises `Inexact` when a bound cannot be computed
        exactly (the caller then enumerates point by point)."""
        yield from self._expand(0, {}, 1)

    def _expand(
        self, level: int, prefix: dict[BlockArgument, np.ndarray], n: int
    ) -> Iterator[tuple[dict[BlockArgument, np.ndarray], int]]:
        import numpy as np

        if level == len(self.loops):
            yield prefix, n
            return
        lp = self.loops[level]
        lo = vector_eval(self.ev, lp.lower, prefix, n)
        hi = vector_eval(self.ev, lp.upper, prefix, n)
        if lo is None or hi is None:
            return  # bounds that are not integer expressions: nothing runs
        if np.any(hi == INT_MAX):
            raise Inexact  # the range's end, hi + 1, is not an int64
        span = _vec_binop("-", hi, lo)  # raises Inexact on overflow
        counts = np.where(hi >= lo, span + 1, 0)
        capped = np.minimum(counts, CHUNK + 1)  # cumulative sums that cannot overflow
        start = 0
        while start < n:
            if counts[start] > CHUNK:  # one outer point, a long inner range
                first, total = int(lo[start]), int(counts[start])
                for s in range(0, total, CHUNK):
                    m = min(CHUNK, total - s)
                    sub = {x: np.full(m, v[start]) for x, v in prefix.items()}
                    sub[self.args[level]] = np.arange(first + s, first + s + m, dtype=np.int64)
                    yield from self._expand(level + 1, sub, m)
                start += 1
                continue
            cum = np.cumsum(capped[start:])
            end = start + max(1, int(np.searchsorted(cum, CHUNK, side="right")))
            reps = counts[start:end]
            m = int(reps.sum())
            if m:
                rows = np.repeat(np.arange(start, end), reps)
                before = np.repeat(np.cumsum(reps) - reps, reps)
                sub = {x: v[rows] for x, v in prefix.items()}
                sub[self.args[level]] = lo[rows] + (np.arange(m) - before)
                yield from self._expand(level + 1, sub, m)
            start = end


def point(chunk: Mapping[BlockArgument, np.ndarray], k: int) -> dict[SSAValue, int]:
    """The loop-variable bindings of point `k` of a chunk (for the scalar check)."""
    return {x: int(v[k]) for x, v in chunk.items()}
