"""Affine index algebra of the MLIR -> NEM lowering (D-LOW-AFFINE): a pure
analysis, no IR is built here.

An `Aff` is `const + sum(coeff * atom)`, where an atom is a NEM loop
variable (`Var`, range `[0, trip-1]`), a compute-nest dimension (`Dim`, only
while a loop nest is analysed for raising) or the non-linear remainder
`(aff mod m)` / `(aff floordiv d)` of an affine value (`Mod`, `FloorDiv`).
MLIR index values (affine maps, `affine.apply`, `arith` index ops) are
evaluated to `Aff`s; they are materialized as NEM integer expressions only
where a statement uses them (`nem.passes.lowering.emit`).  Interval bounds
over the atoms' ranges decide `affine.min`/`max` (`pick_minmax`) and
partial tiles (D-LOW-PEEL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

AtomKey = tuple[Any, ...]
"""Identifies an atom; orderable (terms are sorted by it)."""


@dataclass(eq=False)
class Var:
    """A NEM loop variable (value range `[0, trip-1]`).  `order` orders the
    terms of emitted expressions (outer loops first); atoms are told apart by
    identity, so two loops never share a variable."""

    arg: BlockArgument | None
    name: str
    trip: int
    order: int = 1 << 30
    key: AtomKey = field(init=False)

    def __post_init__(self) -> None:
        self.key = ("v", self.order, id(self))

    def __repr__(self) -> str:
        return self.name


@dataclass(eq=False)
class Dim:
    """Dimension `k` of a compute nest (normalized to `[0, extent)`)."""

    k: int
    key: AtomKey = field(init=False)

    def __post_init__(self) -> None:
        self.key = ("d", self.k)

    def __repr__(self) -> str:
        return f"d{self.k}"


@dataclass(frozen=True)
class Mod:
    inner: Aff
    m: int

    @property
    def key(self) -> AtomKey:
        return ("mod", self.inner.key, self.m)


@dataclass(frozen=True)
class FloorDiv:
    inner: Aff
    d: int

    @property
    def key(self) -> AtomKey:
        return ("div", self.inner.key, self.d)


Atom = Var | Dim | Mod | FloorDiv
Terms = dict[AtomKey, tuple[Atom, int]]


class Aff:
    """`const + sum(coeff * atom)`; immutable, compared by value."""

    __slots__ = ("_key", "const", "terms")

    def __init__(
        self, terms: Mapping[AtomKey, tuple[Atom, int]] | None = None, const: int = 0
    ) -> None:
        self.terms: Terms = {k: v for k, v in (terms or {}).items() if v[1] != 0}
        self.const = const
        self._key: tuple[Any, ...] | None = None

    @staticmethod
    def c(v: int) -> Aff:
        return Aff(None, v)

    @staticmethod
    def atom(a: Atom) -> Aff:
        if isinstance(a, Var) and a.trip == 1:
            return Aff.c(0)  # the variable of a one-iteration loop (a tile loop over one tile)
        return Aff({a.key: (a, 1)})

    @property
    def key(self) -> tuple[Any, ...]:
        if self._key is None:
            self._key = (tuple(sorted((k, c) for k, (_, c) in self.terms.items())), self.const)
        return self._key

    def is_const(self) -> bool:
        return not self.terms

    def __add__(self, o: Aff) -> Aff:
        t = dict(self.terms)
        for k, (a, c) in o.terms.items():
            t[k] = (a, t[k][1] + c) if k in t else (a, c)
        return Aff(t, self.const + o.const)

    def scale(self, s: int) -> Aff:
        return Aff({k: (a, c * s) for k, (a, c) in self.terms.items()}, self.const * s)

    def __sub__(self, o: Aff) -> Aff:
        return self + o.scale(-1)

    def __eq__(self, o: object) -> bool:
        return isinstance(o, Aff) and self.key == o.key

    def __hash__(self) -> int:
        return hash(self.key)

    def mod(self, m: int) -> Aff:
        if m <= 0:
            raise ValueError("mod by a non-positive value")
        rest = Aff({k: (a, c % m) for k, (a, c) in self.terms.items()}, self.const % m)
        if rest.is_const():
            return Aff.c(rest.const % m)
        upper = rest.upper()
        if rest.nonneg() and upper is not None and upper < m:
            return rest
        return Aff.atom(Mod(rest, m))

    def floordiv(self, d: int) -> Aff:
        if d <= 0:
            raise ValueError("floordiv by a non-positive value")
        q = Aff({k: (a, c // d) for k, (a, c) in self.terms.items() if c % d == 0})
        rest = Aff({k: (a, c) for k, (a, c) in self.terms.items() if c % d != 0}, self.const)
        if rest.is_const():
            return q + Aff.c(rest.const // d)
        upper = rest.upper()
        if rest.nonneg() and upper is not None and upper < d:
            return q
        return q + Aff.atom(FloorDiv(rest, d))

    def nonneg(self) -> bool:
        """Provably >= 0 (vars, dims, mod/div atoms of nonneg values are >= 0)."""
        return self.const >= 0 and all(c >= 0 and _atom_nonneg(a) for a, c in self.terms.values())

    def upper(self) -> int | None:
        """An upper bound when every atom has a known range."""
        total = self.const
        for a, c in self.terms.values():
            hi = _atom_upper(a)
            if hi is None or c < 0:
                return None
            total += c * hi
        return total

    def bounds(self) -> tuple[int, int] | None:
        """[lo, hi] over the ranges of the atoms (loop variables in [0, trip-1]),
        or None when some atom has no known range (D-LOW-PEEL)."""
        lo = hi = self.const
        for a, c in self.terms.values():
            r = _atom_range(a)
            if r is None:
                return None
            lo, hi = (lo + c * r[0], hi + c * r[1]) if c >= 0 else (lo + c * r[1], hi + c * r[0])
        return lo, hi

    def atoms(self) -> Iterator[Atom]:
        for a, _ in self.terms.values():
            yield a

    def split_dims(self) -> tuple[list[tuple[Dim, int]], Aff]:
        """(dim terms, the rest) for nest analysis."""
        dims = [(a, c) for a, c in self.terms.values() if isinstance(a, Dim)]
        rest = Aff({k: v for k, v in self.terms.items() if not isinstance(v[0], Dim)}, self.const)
        return dims, rest

    def has_dims(self) -> bool:
        return any(_has_dims(a) for a in self.atoms())

    def __repr__(self) -> str:
        parts = [f"{c}*{a}" for a, c in self.terms.values()]
        return " + ".join(parts + [str(self.const)])


def _atom_nonneg(a: Atom) -> bool:
    if isinstance(a, Var | Dim):
        return True
    return a.inner.nonneg()


def _atom_upper(a: Atom) -> int | None:
    if isinstance(a, Var):
        return a.trip - 1
    if isinstance(a, Mod):
        return a.m - 1 if a.inner.nonneg() else None
    if isinstance(a, FloorDiv):
        u = a.inner.upper()
        return None if u is None else u // a.d
    return None


def _atom_range(a: Atom) -> tuple[int, int] | None:
    if isinstance(a, Var):
        return 0, a.trip - 1
    if isinstance(a, Mod):
        return (0, a.m - 1) if a.inner.nonneg() else None
    if isinstance(a, FloorDiv):
        r = a.inner.bounds()
        return None if r is None else (r[0] // a.d, r[1] // a.d)
    return None


def _has_dims(a: Atom) -> bool:
    if isinstance(a, Dim):
        return True
    if isinstance(a, Mod | FloorDiv):
        return a.inner.has_dims()
    return False


def pick_minmax(vals: Sequence[Aff], is_min: bool) -> Aff | None:
    """The result of `affine.min`/`max` over `vals` when one candidate is the
    minimum (maximum) for every value of the loop variables, else None."""
    for a in vals:
        ok = True
        for b in vals:
            d = (a - b) if is_min else (b - a)
            r = d.bounds()
            if r is None or r[1] > 0:
                ok = False
                break
        if ok:
            return a
    return None


def eval_affine_expr(e: AffineExpr, dims: Sequence[Aff], syms: Sequence[Aff]) -> Aff:
    """The value of one affine expression on evaluated operands; raises
    ValueError for what is not affine (a product of two indices, a division
    by a non-constant)."""
    if isinstance(e, AffineConstantExpr):
        return Aff.c(e.value)
    if isinstance(e, AffineDimExpr):
        return dims[e.position]
    if isinstance(e, AffineSymExpr):
        return syms[e.position]
    assert isinstance(e, AffineBinaryOpExpr)
    lhs, rhs = eval_affine_expr(e.lhs, dims, syms), eval_affine_expr(e.rhs, dims, syms)
    if e.kind == AffineBinaryOpKind.Add:
        return lhs + rhs
    if e.kind == AffineBinaryOpKind.Mul:
        if rhs.is_const():
            return lhs.scale(rhs.const)
        if lhs.is_const():
            return rhs.scale(lhs.const)
        raise ValueError("product of two non-constant indices")
    if not rhs.is_const() or rhs.const <= 0:
        raise ValueError(f"{e.kind.name} by a non-constant or non-positive value")
    if e.kind == AffineBinaryOpKind.Mod:
        return lhs.mod(rhs.const)
    if e.kind == AffineBinaryOpKind.FloorDiv:
        return lhs.floordiv(rhs.const)
    # ceildiv a, b == floordiv(a + b - 1, b)
    return (lhs + Aff.c(rhs.const - 1)).floordiv(rhs.const)


def eval_map(m: AffineMap, operands: Sequence[Aff]) -> list[Aff]:
    """The results of affine map `m` on evaluated operands (dims and symbols
    alike: xDSL's custom-form parser makes every SSA id a symbol)."""
    dims, syms = operands[: m.num_dims], operands[m.num_dims :]
    return [eval_affine_expr(r, dims, syms) for r in m.results]


def is_identity(m: AffineMap) -> bool:
    """`(d0, ..., dn) -> (d0, ..., dn)` (xDSL 0.74's AffineMap has no such test)."""
    return m.num_symbols == 0 and m == AffineMap.identity(m.num_dims)


def is_index_arith(op: Operation) -> bool:
    """Pure index arithmetic (`affine.apply`, `arith.constant`), which the
    lowering evaluates symbolically instead of lowering to tasks."""
    return isinstance(op, affine.ApplyOp | arith.ConstantOp)


def depends_on(
    v: SSAValue, target: SSAValue, through: Callable[[Operation], bool] = lambda op: True
) -> bool:
    """Whether `v` is computed from `target` through ops accepted by
    `through`.  Iterative, each value visited once: a chain of ops that reuse
    each other (`%c2 = arith.muli %c1, %c1`, ...) costs linear time and no
    recursion depth (issue 11)."""
    seen: set[SSAValue] = set()
    todo = [v]
    while todo:
        x = todo.pop()
        if x is target:
            return True
        if x not in seen and isinstance(x.owner, Operation) and through(x.owner):
            seen.add(x)
            todo.extend(x.owner.operands)
    return False


INDEX_BINOPS: tuple[type[Operation], ...] = (
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.DivSIOp,
    arith.RemSIOp,
    arith.FloorDivSIOp,
    arith.DivUIOp,
    arith.RemUIOp,
    arith.CeilDivSIOp,
)
"""The `arith` ops the lowering evaluates on `index` values (`arith_value`)."""


def arith_value(op: Operation, a: Aff, b: Aff) -> Aff:
    """The value of `arith` index op `op` (one of `INDEX_BINOPS`) on operand
    values `a`, `b`; raises ValueError (the reason) when it is not affine
    there.  The one home of that arithmetic: the conversion's handler
    (`index_ops.index_binop`, which rejects at `op` with the reason), the
    marks' walk and the peeling decision (`resolve_index` with `arith`)."""
    if isinstance(op, arith.AddiOp):
        return a + b
    if isinstance(op, arith.SubiOp):
        return a - b
    if isinstance(op, arith.MuliOp):
        if not (a.is_const() or b.is_const()):
            raise ValueError("product of two non-constant indices is not affine")
        return a.scale(b.const) if b.is_const() else b.scale(a.const)
    if not b.is_const() or b.const <= 0:
        raise ValueError("division by a non-constant or non-positive value")
    if not isinstance(op, arith.FloorDivSIOp) and not a.nonneg():
        raise ValueError("signed division of a possibly negative index")
    if isinstance(op, arith.RemSIOp | arith.RemUIOp):
        return a.mod(b.const)
    if isinstance(op, arith.CeilDivSIOp):
        return (a + Aff.c(b.const - 1)).floordiv(b.const)
    return a.floordiv(b.const)


IndexEnv = Mapping[SSAValue, Aff]


def resolve_index(v: SSAValue, *envs: IndexEnv, arith_ops: bool = False) -> Aff | None:
    """The affine value of index `v`: from the first environment that binds
    it, else through `affine.apply` and index constants, and with
    `arith_ops` through the `arith` index ops as well (`arith_value`: the
    peeling decision reads a value computed by `arith` as the same value
    computed by an apply, D-LOW-AFFINE session 34); None when it depends on
    anything else (e.g. the variable of a loop not lowered yet) or is not
    affine."""
    for env in envs:
        if v in env:
            return env[v]
    owner = v.owner
    if isinstance(owner, affine.ApplyOp):
        args = [resolve_index(o, *envs, arith_ops=arith_ops) for o in owner.mapOperands]
        if any(a is None for a in args):
            return None
        return eval_map(owner.map.data, [a for a in args if a is not None])[0]
    if isinstance(owner, arith.ConstantOp) and isinstance(v.type, IndexType):
        value = owner.value
        assert isinstance(value, IntegerAttr)
        return Aff.c(value.value.data)
    if arith_ops and isinstance(owner, INDEX_BINOPS) and isinstance(v.type, IndexType):
        a, b = (resolve_index(o, *envs, arith_ops=True) for o in owner.operands)
        if a is None or b is None:
            return None
        try:
            return arith_value(owner, a, b)
        except ValueError:
            return None  # (rejected where the conversion evaluates it)
    return None
