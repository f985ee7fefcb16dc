"""Emission helpers of the lowering: affine values as NEM integer
expressions, and typed regions, built with `nem.dialect.builder`.

An `Aff` becomes a builder `Expr` (`Sym` loop variables, literals, `+ - *`,
NEM `mod` and `/`), which the builder materializes as `arith` index ops
right before the statement that uses it; the printer folds them back into
the statement's text (`region(alloc, (i mod 2) * 16384, 16384)`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from nem.dialect.builder import Expr, Lit, NemBuilder, Sym
from nem.passes.lowering.affine_algebra import Aff, Atom, FloorDiv, Mod, Var
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.partial_tiles import RegionAccess
from nem.passes.lowering.views import View, last_offset

DEFAULT_LAYOUTS = {1: "C", 2: "MN", 3: "CHW", 4: "NHWC", 5: "NDHWC"}
"""Layout ids of contiguous regions by rank (D-LOW-REGION)."""


def expr(a: Aff, anchor: Operation | None = None) -> Expr:
    """`a` as a NEM integer expression: positive terms (outer loop variables
    first), the constant, then the negative terms subtracted (NEM literals
    are non-negative).  `mod`/`floordiv` atoms must be provably
    non-negative: NEM's `/` and `mod` truncate (D-EXPR-MOD)."""
    pos = sorted(((atom, c) for atom, c in a.terms.values() if c > 0), key=_order)
    neg = sorted(((atom, -c) for atom, c in a.terms.values() if c < 0), key=_order)
    acc: Expr | None = None
    for atom, c in pos:
        term = _term(atom, c, anchor)
        acc = term if acc is None else acc + term
    if acc is None:
        acc = Lit(a.const) if a.const >= 0 or not neg else Lit(0)
        if a.const < 0 and neg:
            acc = acc - Lit(-a.const)
    elif a.const > 0:
        acc = acc + Lit(a.const)
    elif a.const < 0:
        acc = acc - Lit(-a.const)
    for atom, c in neg:
        acc = acc - _term(atom, c, anchor)
    return acc


def _order(t: tuple[Atom, int]) -> tuple[int, int, str]:
    atom = t[0]
    if isinstance(atom, Var):
        return (0, atom.order, "")
    return (1, 0, str(atom.key))


def _term(atom: Atom, c: int, anchor: Operation | None) -> Expr:
    v = _atom(atom, anchor)
    return v if c == 1 else v * Lit(c)


def _atom(atom: Atom, anchor: Operation | None) -> Expr:
    if isinstance(atom, Var):
        assert atom.arg is not None
        return Sym(atom.arg)
    if isinstance(atom, Mod | FloorDiv):
        if not atom.inner.nonneg():
            raise reject(
                anchor,
                f"index expression '{atom.inner}' may be negative inside a "
                "mod/floordiv; NEM's `/` and `mod` truncate (D-EXPR-MOD)",
            )
        inner = expr(atom.inner, anchor)
        return inner.mod(Lit(atom.m)) if isinstance(atom, Mod) else inner / Lit(atom.d)
    raise reject(anchor, "internal: a nest dimension escaped into a NEM expression")


PLAIN_LAYOUT = "ABCDEFGH"
"""The layout id of a contiguous region of up to 8 dimensions without a
named layout (one letter per dimension, D-LAYOUT)."""


def log_region(
    ctx: LoweringContext,
    view: View,
    start: Aff,
    shape: Sequence[int],
    strides: Sequence[int],
    anchor: Operation | None,
) -> tuple[Sequence[int], Sequence[int]]:
    """Log the region `region` builds for the partial-tile checks; its shape
    and strides (a scalar is one element)."""
    if not shape:
        shape, strides = [1], [1]
    ctx.log_region(RegionAccess(view, start, tuple(shape), tuple(strides), anchor))
    return shape, strides


def region(
    ctx: LoweringContext,
    b: NemBuilder,
    view: View,
    start: Aff,
    shape: Sequence[int],
    strides: Sequence[int],
    anchor: Operation | None,
    layout: str | None = None,
) -> SSAValue:
    """An inline typed region of `view.buffer` starting at element `start`
    (absolute in the buffer) with `shape` and element `strides`
    (D-LOW-REGION): contiguous regions get a layout id (`layout` when its
    rank fits; `ABCDEFGH` cut to the rank when none is given), others, and
    those of more than 8 dimensions, `strides=[..]`.  The region is logged
    for the partial-tile checks."""
    eb = view.elem_bytes
    shape, strides = log_region(ctx, view, start, shape, strides, anchor)
    contiguous, acc = True, 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != acc:
            contiguous = False
        acc *= d
    extent = (last_offset(shape, strides) + 1) * eb
    offset = expr(start.scale(eb), anchor)
    lay = layout if layout and len(layout) == len(shape) else DEFAULT_LAYOUTS.get(len(shape))
    lay = lay or (PLAIN_LAYOUT[: len(shape)] if len(shape) <= len(PLAIN_LAYOUT) else None)
    if contiguous and lay is not None:
        return b.region(
            None, view.buffer, offset, extent, elem=view.elem, shape=list(shape), layout=lay
        )
    return b.region(
        None, view.buffer, offset, extent, elem=view.elem, shape=list(shape), strides=list(strides)
    )
