"""Task instances as integer points: the isl side of the hazard analysis
(decision D-HAZ-SYMBOLIC).

A task inside loops L0..Lm runs once per vector of iteration *ordinals*
(o0..om, 0-based, outermost first, as `happens_before.Instance.ords`).
`InstanceSpace` is an isl set space holding one such vector per task
instance a question is about (two for "do these race", three for "is there
a write between them"), plus free variables (a byte address).  `Nest`
gives, on one vector of a space, the task's loop variables (`ordinal +
lower bound`), trip counts and domain (`0 <= ordinal < trip`), and turns an
integer expression of those loop variables into an isl piecewise
quasi-affine function (`expr`), reading the one expression form there is,
the `Evaluator`'s tape (`nem.dialect.semantics`): `+`, `-`, `*` by a
constant, and `/`, `mod` by a constant are exact in isl (`tdiv_q`,
`tdiv_r`: truncation toward zero, as `arith.divsi` / `remsi`); anything
else raises `NotQuasiAffine` and the caller enumerates instead.  Interval
bounds over the box of loop-variable ranges (`iteration_space.forms`,
`combine`) let a division whose numerator is never negative be the simpler
floor division, which isl handles without a case split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import islpy as isl
from xdsl.ir import BlockArgument, SSAValue

from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.expressions import (
    TAPE_ARG,
    TAPE_BINOP,
    TAPE_CONST,
    TAPE_FORWARD,
    Evaluator,
    ExprError,
    NotAnExpression,
)
from nem.dialect.iteration_space import Form, Interval, combine, forms
from nem.dialect.ops import LoopOp

CTX = isl.DEFAULT_CONTEXT


class NotQuasiAffine(Exception):
    """An expression isl cannot represent exactly (a product of loop
    variables, a division by a non-constant)."""


class InstanceSpace:
    """An isl set space: `groups[g][k]` is ordinal k of instance vector g
    (as a function on the space), `extra` the free variables after them."""

    def __init__(self, sizes: Sequence[int], extra: int = 0):
        names = [f"o{g}_{k}" for g, n in enumerate(sizes) for k in range(n)]
        names += [f"x{k}" for k in range(extra)]
        self.sizes = tuple(sizes)
        self.space = isl.Space.create_from_names(CTX, set=names)
        self.universe = isl.Set.universe(self.space)
        self.empty = isl.Set.empty(self.space)
        self._equal: dict[tuple[object, ...], isl.Set] = {}
        self._memo: dict[tuple[object, ...], isl.Set] = {}
        self._consts: dict[int, isl.PwAff] = {}
        ls = isl.LocalSpace.from_space(self.space)
        var = [isl.PwAff.var_on_domain(ls, isl.dim_type.set, d) for d in range(len(names))]
        self.starts: list[int] = []
        self.groups: list[list[isl.PwAff]] = []
        at = 0
        for n in sizes:
            self.starts.append(at)
            self.groups.append(var[at : at + n])
            at += n
        self.extra = var[at:]

    def const(self, value: int) -> isl.PwAff:
        hit = self._consts.get(value)
        if hit is None:
            hit = self._consts[value] = isl.PwAff.val_on_domain(self.universe, value)
        return hit

    def equal(self, a: Sequence[isl.PwAff], b: Sequence[isl.PwAff], n: int) -> isl.Set:
        """Where the first `n` entries of `a` and `b` are equal (memoized: the
        entries are the space's own variables, which live as long as it)."""
        key = (tuple(map(id, a[:n])), tuple(map(id, b[:n])))
        hit = self._equal.get(key)
        if hit is None:
            hit = self.universe
            for k in range(n):
                hit = hit & a[k].eq_set(b[k])
            self._equal[key] = hit
        return hit

    def memo(self, key: tuple[object, ...], build: Callable[[], isl.Set]) -> isl.Set:
        """A set of this space built once per `key` (what it depends on)."""
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = build().coalesce()
        return hit


_SPACES: BoundedCache[tuple[tuple[int, ...], int], InstanceSpace] = BoundedCache(256)
"""Spaces by group sizes (a program's analyses use a handful): their memos
outlive one analysis, so a process analysing many programs reuses them."""


def point(s: isl.Set) -> list[int]:
    """The coordinates of a point of non-empty `s` (of `lexmin`/`lexmax`: the extreme one)."""
    p = s.sample_point()
    return [
        p.get_coordinate_val(isl.dim_type.set, d).to_python()
        for d in range(s.dim(isl.dim_type.set))
    ]


def instance_space(sizes: Sequence[int], extra: int = 0) -> InstanceSpace:
    """The (shared) space of these group sizes."""
    key = (tuple(sizes), extra)
    hit = _SPACES.get(key)
    if hit is None:
        hit = _SPACES[key] = InstanceSpace(sizes, extra)
    return hit


class Boxes:
    """Per loop variable, an interval holding every value it takes (its
    bounds' intervals over the enclosing loops' boxes): what decides that a
    numerator is never negative, and the cheap interval pre-filter."""

    def __init__(self, ev: Evaluator):
        self.ev = ev
        self.box: dict[BlockArgument, Interval] = {}
        self._unbounded: set[BlockArgument] = set()

    def add(self, loop: LoopOp) -> None:
        """Record `loop`'s variable (its enclosing loops' first)."""
        try:
            lo, hi = forms(self.ev, [loop.lower, loop.upper], self.box)
        except ExprError:
            lo = hi = None
        arg = loop.block.args[0]
        if lo is None or hi is None or lo.interval is None or hi.interval is None:
            self._unbounded.add(arg)
        else:
            self.box[arg] = (lo.interval[0], max(lo.interval[0], hi.interval[1]))

    def interval(self, value: SSAValue) -> Interval | None:
        """Bounds of `value` over the box (None: unknown)."""
        try:
            s = self.ev.static(value)
            if s is not None:  # most offsets and extents (`HazardFinder._bounds`): no Form
                return s, s
            f = forms(self.ev, [value], self.box)[0]
        except ExprError:
            return None
        return None if f is None else f.interval


class Nest:
    """The loops of one task on group `g` of `sp`: `env` maps each loop
    variable to `ordinal + lower bound`, `trips` the trip counts, `domain`
    the iterations that run.  Raises NotAnExpression / ExprError (a loop the
    program never runs: the caller drops the task) or NotQuasiAffine.  The
    functions are built once per task, on a space of its own, and moved to
    the group of each space a question needs (`embed`)."""

    def __init__(
        self,
        ev: Evaluator,
        boxes: Boxes,
        loops: Sequence[LoopOp],
        sp: InstanceSpace,
        g: int,
        base: Nest | None = None,
    ):
        self.ev, self.boxes, self.sp, self.g, self.base = ev, boxes, sp, g, base
        self.ords = sp.groups[g][: len(loops)]
        self._memo: dict[int, isl.PwAff] = {}
        self.trips: list[isl.PwAff] = []
        self.domain: isl.Set = sp.universe
        self.env: dict[BlockArgument, isl.PwAff] = {}
        if base is not None:
            self.trips = [self.embed(t) for t in base.trips]
            self.domain = self.embed_set(base.domain)
            return
        dom = sp.universe
        for k, lp in enumerate(loops):
            o = sp.groups[g][k]
            lo, hi = self.expr(lp.lower), self.expr(lp.upper)
            trip = hi - lo + 1
            dom = dom & o.nonneg_set() & (trip - 1 - o).nonneg_set()
            self.env[lp.block.args[0]] = o + lo
            self.trips.append(trip)
        self.domain = dom

    def _shape(self) -> tuple[int, int]:
        """Dimensions before and after this nest's group in its space."""
        n = len(self.ords)
        before = self.sp.starts[self.g]
        return before, sum(self.sp.sizes) + len(self.sp.extra) - before - n

    def embed(self, f: isl.PwAff) -> isl.PwAff:
        """A function of the base nest's space, on this nest's group."""
        before, after = self._shape()
        n = len(self.ords)
        return f.insert_dims(isl.dim_type.in_, n, after).insert_dims(isl.dim_type.in_, 0, before)

    def embed_set(self, t: isl.Set) -> isl.Set:
        before, after = self._shape()
        n = len(self.ords)
        return t.insert_dims(isl.dim_type.set, n, after).insert_dims(isl.dim_type.set, 0, before)

    def expr(self, value: SSAValue) -> isl.PwAff:
        hit = self._memo.get(id(value))
        if hit is None:
            if self.base is not None:
                hit = self.embed(self.base.expr(value))
            else:
                hit = quasi_affine(self.ev, value, self.env, self.sp, self.boxes.box)
            self._memo[id(value)] = hit
        return hit


def quasi_affine(
    ev: Evaluator,
    value: SSAValue,
    env: Mapping[BlockArgument, isl.PwAff],
    sp: InstanceSpace,
    box: Mapping[BlockArgument, Interval],
) -> isl.PwAff:
    """`value` as a piecewise quasi-affine function on `sp` (`env` gives the
    loop variables).  Raises NotAnExpression for an operand that is not an
    integer expression of `env`'s variables, ExprError for a constant
    division by zero, NotQuasiAffine beyond `+ - *const /const mod const`."""
    s = ev.static(value)
    if s is not None:
        return sp.const(s)
    regs: list[tuple[isl.PwAff, Form | None, int | None]] = []  # (function, bounds, constant)
    for kind, x, y, z in ev.tape(value):
        if kind == TAPE_CONST:
            regs.append((sp.const(x), Form((x, x), (x, {})), x))
        elif kind == TAPE_ARG:
            if x not in env:
                raise NotAnExpression("a block argument that is not a loop variable")
            regs.append((env[x], Form(box[x], (0, {x: 1})) if x in box else None, None))
        elif kind == TAPE_FORWARD:
            regs.append(regs[x])
        elif kind == TAPE_BINOP:
            (fa, ba, ca), (fb, bb, cb) = regs[y], regs[z]
            bounds = None if ba is None or bb is None else combine(x, ba, bb, box)
            regs.append((_binop(x, fa, ba, fb, ca, cb, sp), bounds, None))
        else:
            raise NotAnExpression(f"cannot evaluate '{x}' as an integer expression")
    return regs[-1][0]


def check_quasi_affine(ev: Evaluator, loops: Sequence[LoopOp], values: Sequence[SSAValue]) -> None:
    """Raise what building the `Nest` of `loops` and its `expr` of each of
    `values` raises, in the same order, without building an isl object: the
    hazard analysis asks this of every access of a program (whether isl can
    take its buffer), the sets only of the accesses that pair (D-HAZ-QA-CHECK)."""
    scope: set[BlockArgument] = set()
    for lp in loops:
        _check(ev, lp.lower, scope)
        _check(ev, lp.upper, scope)
        scope.add(lp.block.args[0])
    for value in values:
        _check(ev, value, scope)


def _check(ev: Evaluator, value: SSAValue, scope: set[BlockArgument]) -> None:
    """`quasi_affine`'s walk of `value`'s tape, keeping only each node's
    constant (what its refusals read)."""
    if ev.static(value) is not None:
        return
    consts: list[int | None] = []
    for kind, x, y, z in ev.tape(value):
        if kind == TAPE_CONST:
            consts.append(x)
        elif kind == TAPE_ARG:
            if x not in scope:
                raise NotAnExpression("a block argument that is not a loop variable")
            consts.append(None)
        elif kind == TAPE_FORWARD:
            consts.append(consts[x])
        elif kind == TAPE_BINOP:
            _refuse(x, consts[y], consts[z])
            consts.append(None)
        else:
            raise NotAnExpression(f"cannot evaluate '{x}' as an integer expression")


def _refuse(op: str, ca: int | None, cb: int | None) -> None:
    """Raise when isl cannot take `a op b` exactly (`ca`, `cb`: the operands'
    constants, None when loop-dependent)."""
    if op in ("+", "-"):
        return
    if op == "*":
        if ca is None and cb is None:
            raise NotQuasiAffine("a product of two loop-dependent values")
        return
    if cb is None:
        raise NotQuasiAffine(f"'{op}' by a loop-dependent value")
    if cb == 0:
        raise ExprError(f"{'division' if op == '/' else 'mod'} by zero")


def _binop(
    op: str,
    fa: isl.PwAff,
    ba: Form | None,
    fb: isl.PwAff,
    ca: int | None,
    cb: int | None,
    sp: InstanceSpace,
) -> isl.PwAff:
    _refuse(op, ca, cb)
    if op == "+":
        return fa + fb
    if op == "-":
        return fa - fb
    if op == "*":
        return fa * fb
    assert cb is not None  # `_refuse`: a division by a constant
    nonneg = ba is not None and ba.interval is not None and ba.interval[0] >= 0
    if op == "/":
        if nonneg:  # truncation is floor: one piece
            q = fa.div(sp.const(abs(cb))).floor()
            return q if cb > 0 else -q
        return fa.tdiv_q(fb)
    if nonneg:
        return fa.mod_val(abs(cb))
    return fa.tdiv_r(fb)
