"""Shared machinery of the MLIR -> NEM lowering (`convert-affine-to-nem`,
`convert-async-to-nem`, `lower-to-nem`): affine index algebra, memref views,
region construction and diagnostics.  Decisions cited as D-LOW-* are in
docs/spec-decisions.md ("Lowering").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import (
    AffineMapAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from nem.dialect.attributes import BITWIDTH, MemLevelAttr, RegionType, elem_name
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.ops import RegionOp


# ---------------------------------------------------------------------------
# Diagnostics
# ---------------------------------------------------------------------------


def reject(op: Operation | None, reason: str, fix: str | None = None) -> NemDiagnosticError:
    """An error naming the op (its name and location) and the reason; an op
    without a location (an implicit module) is reported at the first op it
    holds that has one, else at the input's first line."""
    where = f"'{op.name}'" if op is not None else "input"
    return NemDiagnosticError([Diagnostic("error", f"cannot lower {where}: {reason}",
                                          _where(op), None, fix)])


def _where(op: Operation | None) -> SourceLoc | None:
    from nem.passes import pass_env

    for o in op.walk() if op is not None else ():
        loc = SourceLoc.of(o)
        if loc is not None:
            return loc
    file = pass_env.current().file
    return SourceLoc(file, 1, 1) if file else None


def depends_on(v: SSAValue, target: SSAValue,
               through: Callable[[Operation], bool] = lambda op: True) -> bool:
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


def check_value_ranges(fn: Operation) -> None:
    """D-INT-RANGE on the lowering's input: memref dimensions, loop bounds and
    steps, and index constants must fit NEM's signed 64-bit integers (and a
    memref's size in bytes too), so that no shape or offset built from them
    overflows.  Constants inside affine maps are read without recursion."""
    from xdsl.ir.affine import AffineBinaryOpExpr, AffineConstantExpr

    from nem.dialect.limits import INT_MAX

    def out_of_range(v: int) -> bool:
        return not -INT_MAX - 1 <= v <= INT_MAX

    def shown(v: int) -> str:
        text = str(v)
        return text if len(text) <= 24 else f"{text[:10]}...{text[-6:]} ({len(text)} digits)"

    for op in fn.walk():
        for t in [*(r.type for r in op.results), *(a.type for b in
                  (op.regions[0].blocks if op.regions else ()) for a in b.args)]:
            if isinstance(t, MemRefType):
                shape = t.get_shape()
                size = 1
                for d in shape:
                    size *= max(d, 1)
                if any(out_of_range(d) for d in shape) or out_of_range(size * 8):
                    raise reject(op, f"{t} is larger than NEM's 64-bit sizes (D-INT-RANGE)",
                                 "use smaller shapes")
        for name, attr in op.properties.items():
            exprs = []
            if isinstance(attr, IntegerAttr) and out_of_range(attr.value.data):
                raise reject(op, f"{name} = {shown(attr.value.data)} is outside NEM's 64-bit integers "
                             "(D-INT-RANGE)", "use smaller values")
            if hasattr(attr, "data") and hasattr(attr.data, "results"):
                exprs = list(attr.data.results)
            while exprs:
                e = exprs.pop()
                if isinstance(e, AffineConstantExpr) and out_of_range(e.value):
                    raise reject(op, f"{name} holds {shown(e.value)}, outside NEM's 64-bit integers "
                                 "(D-INT-RANGE)", "use smaller values")
                if isinstance(e, AffineBinaryOpExpr):
                    exprs += [e.lhs, e.rhs]


# ---------------------------------------------------------------------------
# Affine index algebra (D-LOW-AFFINE).  An `Aff` is  const + sum(coeff * atom)
# where an atom is a NEM loop variable (`Var`), a nest dimension (`Dim`, only
# during compute-nest analysis), or `(aff mod m)` / `(aff floordiv d)` of a
# non-linear remainder.
# ---------------------------------------------------------------------------


class Var:
    """A NEM loop variable (value range [0, trip-1])."""

    __slots__ = ("arg", "name", "key", "trip")
    _n = 0

    def __init__(self, arg: BlockArgument | None, name: str, trip: int):
        Var._n += 1
        self.arg, self.name, self.key, self.trip = arg, name, ("v", Var._n), trip

    def __repr__(self) -> str:
        return self.name


class Dim:
    """Dimension k of a compute nest (normalized to [0, extent))."""

    __slots__ = ("k", "key")

    def __init__(self, k: int):
        self.k, self.key = k, ("d", k)

    def __repr__(self) -> str:
        return f"d{self.k}"


@dataclass(frozen=True)
class Mod:
    inner: "Aff"
    m: int

    @property
    def key(self):
        return ("mod", self.inner.key, self.m)


@dataclass(frozen=True)
class FloorDiv:
    inner: "Aff"
    d: int

    @property
    def key(self):
        return ("div", self.inner.key, self.d)


class Aff:
    __slots__ = ("terms", "const", "_key")

    def __init__(self, terms: dict | None = None, const: int = 0):
        # terms: key -> (atom, coeff)
        self.terms = {k: v for k, v in (terms or {}).items() if v[1] != 0}
        self.const = const
        self._key = None

    @staticmethod
    def c(v: int) -> Aff:
        return Aff(None, v)

    @staticmethod
    def atom(a) -> Aff:
        if isinstance(a, Var) and a.trip == 1:
            return Aff.c(0)  # the variable of a one-iteration loop (a tile loop over one tile)
        return Aff({a.key: (a, 1)})

    @property
    def key(self):
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

    def __eq__(self, o) -> bool:
        return isinstance(o, Aff) and self.key == o.key

    def __hash__(self) -> int:
        return hash(self.key)

    def mod(self, m: int) -> Aff:
        if m <= 0:
            raise ValueError("mod by a non-positive value")
        rest = Aff({k: (a, c % m) for k, (a, c) in self.terms.items()}, self.const % m)
        if rest.is_const():
            return Aff.c(rest.const % m)
        if rest.nonneg() and rest.upper() is not None and rest.upper() < m:
            return rest
        return Aff.atom(Mod(rest, m))

    def floordiv(self, d: int) -> Aff:
        if d <= 0:
            raise ValueError("floordiv by a non-positive value")
        q = Aff({k: (a, c // d) for k, (a, c) in self.terms.items() if c % d == 0})
        rest = Aff({k: (a, c) for k, (a, c) in self.terms.items() if c % d != 0}, self.const)
        if rest.is_const():
            return q + Aff.c(rest.const // d)
        if rest.nonneg() and rest.upper() is not None and rest.upper() < d:
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

    def atoms(self):
        for a, _ in self.terms.values():
            yield a

    def split_dims(self) -> tuple[list[tuple[Dim, int]], Aff]:
        """(dim terms, the rest) for nest analysis."""
        dims = [(a, c) for a, c in self.terms.values() if isinstance(a, Dim)]
        rest = Aff({k: v for k, v in self.terms.items() if not isinstance(v[0], Dim)}, self.const)
        return dims, rest

    def has_dims(self) -> bool:
        return any(_has_dims(a) for a in self.atoms())

    def subst(self, mapping: dict) -> Aff:
        """Replace atoms by keys in `mapping` (key -> Aff)."""
        out = Aff.c(self.const)
        for k, (a, c) in self.terms.items():
            if k in mapping:
                out = out + mapping[k].scale(c)
            elif isinstance(a, Mod):
                out = out + a.inner.subst(mapping).mod(a.m).scale(c)
            elif isinstance(a, FloorDiv):
                out = out + a.inner.subst(mapping).floordiv(a.d).scale(c)
            else:
                out = out + Aff({k: (a, c)})
        return out

    def __repr__(self) -> str:
        parts = [f"{c}*{a}" for a, c in self.terms.values()]
        return " + ".join(parts + [str(self.const)])


def _atom_nonneg(a) -> bool:
    if isinstance(a, Var | Dim):
        return True
    return a.inner.nonneg()


def _atom_upper(a) -> int | None:
    if isinstance(a, Var):
        return a.trip - 1
    if isinstance(a, Mod):
        return a.m - 1 if a.inner.nonneg() else None
    if isinstance(a, FloorDiv):
        u = a.inner.upper()
        return None if u is None else u // a.d
    return None


def _atom_range(a) -> tuple[int, int] | None:
    if isinstance(a, Var):
        return 0, a.trip - 1
    if isinstance(a, Mod):
        return (0, a.m - 1) if a.inner.nonneg() else None
    if isinstance(a, FloorDiv):
        r = a.inner.bounds()
        return None if r is None else (r[0] // a.d, r[1] // a.d)
    return None


def pick_minmax(vals: list[Aff], is_min: bool) -> Aff | None:
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


def _has_dims(a) -> bool:
    if isinstance(a, Dim):
        return True
    if isinstance(a, Mod | FloorDiv):
        return a.inner.has_dims()
    return False


def eval_affine_expr(e: AffineExpr, dims: list[Aff], syms: list[Aff]) -> Aff:
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


def eval_map(m: AffineMap, operands: list[Aff]) -> list[Aff]:
    dims, syms = operands[: m.num_dims], operands[m.num_dims:]
    return [eval_affine_expr(r, dims, syms) for r in m.results]


# ---------------------------------------------------------------------------
# Emitting NEM index expressions
# ---------------------------------------------------------------------------


CONST_POOL: list[tuple[dict, list]] = []
"""While a lowering runs: (value -> constant, the program-scope declaration
list); integer constants are then created once, at program scope."""


def is_identity(m: AffineMap) -> bool:
    """`(d0, ..., dn) -> (d0, ..., dn)` (xDSL 0.74's AffineMap has no such test)."""
    return m.num_symbols == 0 and m == AffineMap.identity(m.num_dims)


def resolve_index(v: SSAValue, *envs: dict) -> "Aff | None":
    """The affine value of index `v`: from the first environment that binds
    it, else through `affine.apply` and index constants; None when it depends
    on anything else (e.g. the variable of a loop not lowered yet)."""
    for env in envs:
        if v in env:
            return env[v]
    owner = v.owner
    if isinstance(owner, affine.ApplyOp):
        args = [resolve_index(o, *envs) for o in owner.mapOperands]
        return None if None in args else eval_map(owner.map.data, args)[0]
    if isinstance(owner, arith.ConstantOp) and isinstance(v.type, IndexType):
        return Aff.c(owner.value.value.data)
    return None


class ExprEmitter:
    """Materializes `Aff`s as `arith` index ops in a NEM block (appended
    before the statement that uses them; the printer folds them into the
    statement's text)."""

    def __init__(self, block: Block, loc):
        self.block, self.loc = block, loc
        self.ops: list[Operation] = []

    def _add(self, op: Operation) -> SSAValue:
        op.location = self.loc
        self.ops.append(op)
        return op.results[0]

    def const(self, v: int) -> SSAValue:
        if CONST_POOL:
            cache, decls = CONST_POOL[-1]
            c = cache.get(v)
            if c is None:
                op = arith.ConstantOp(IntegerAttr(v, IndexType()))
                op.location = self.loc
                decls.append(op)
                c = cache[v] = op.result
            return c
        return self._add(arith.ConstantOp(IntegerAttr(v, IndexType())))

    def emit(self, a: Aff, anchor: Operation | None = None) -> SSAValue:
        pos = [(atom, c) for atom, c in a.terms.values() if c > 0]
        neg = [(atom, -c) for atom, c in a.terms.values() if c < 0]
        pos.sort(key=lambda t: _atom_order(t[0]))
        neg.sort(key=lambda t: _atom_order(t[0]))
        acc: SSAValue | None = None
        for atom, c in pos:
            term = self._term(atom, c, anchor)
            acc = term if acc is None else self._add(arith.AddiOp(acc, term))
        if a.const > 0 or acc is None:
            if acc is None:
                acc = self.const(a.const) if a.const >= 0 or not neg else self.const(0)
                if a.const < 0 and neg:
                    acc = self._add(arith.SubiOp(acc, self.const(-a.const)))
            else:
                acc = self._add(arith.AddiOp(acc, self.const(a.const)))
        elif a.const < 0:
            acc = self._add(arith.SubiOp(acc, self.const(-a.const)))
        for atom, c in neg:
            acc = self._add(arith.SubiOp(acc, self._term(atom, c, anchor)))
        return acc

    def _term(self, atom, c: int, anchor) -> SSAValue:
        v = self._atom(atom, anchor)
        return v if c == 1 else self._add(arith.MuliOp(v, self.const(c)))

    def _atom(self, atom, anchor) -> SSAValue:
        if isinstance(atom, Var):
            return atom.arg
        if isinstance(atom, Mod | FloorDiv):
            if not atom.inner.nonneg():
                raise reject(anchor, f"index expression '{atom.inner}' may be negative inside a "
                             "mod/floordiv; NEM's `/` and `mod` truncate (D-EXPR-MOD)")
            inner = self.emit(atom.inner, anchor)
            k = atom.m if isinstance(atom, Mod) else atom.d
            cls = arith.RemSIOp if isinstance(atom, Mod) else arith.DivSIOp
            return self._add(cls(inner, self.const(k)))
        raise reject(anchor, "internal: a nest dimension escaped into a NEM expression")

    def flush(self, before: Operation | None = None) -> None:
        for op in self.ops:
            if before is None:
                self.block.add_op(op)
            else:
                self.block.insert_op_before(op, before)
        self.ops = []


def _atom_order(a) -> tuple:
    if isinstance(a, Var):
        return (0, a.key[1])
    return (1, str(a.key))


# ---------------------------------------------------------------------------
# Memref views
# ---------------------------------------------------------------------------


@dataclass
class View:
    """A memref value seen as (NEM buffer, element offset, shape, strides)."""

    buffer: SSAValue  # the nem.buffer result
    level: MemLevelAttr
    elem: Attribute
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # elements
    base: Aff  # element offset of index [0, ..., 0] in the buffer
    name: str

    @property
    def elem_bytes(self) -> int:
        return BITWIDTH[elem_name(self.elem)] // 8


def memref_strides(op: Operation | None, t: MemRefType) -> tuple[tuple[int, ...], int]:
    """Element strides and static offset of a memref type's layout."""
    shape = t.get_shape()
    if any(d < 0 for d in shape):
        raise reject(op, f"dynamic shape {t} is not supported: NEM buffers and regions have "
                     "static sizes", "tile with static sizes")
    layout = t.layout
    if isinstance(layout, NoneAttr):
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        return tuple(reversed(strides)), 0
    if isinstance(layout, StridedLayoutAttr):
        s, off = layout.get_strides(), layout.get_offset()
        if None in s or off is None:
            raise reject(op, f"dynamic strides or offset in {t} are not supported")
        return tuple(s), off
    if isinstance(layout, AffineMapAttr) and is_identity(layout.data):
        return memref_strides(op, MemRefType(t.element_type, shape))
    raise reject(op, f"memref layout {layout} is not strided; NEM regions need strides")


def check_elem(op: Operation | None, t: Attribute) -> str:
    name = elem_name(t)
    if name is None or name == "i4":
        raise reject(op, f"element type {t} has no NEM equivalent",
                     "use i8/i16/i32/ui8/ui16/ui32/f16/bf16/f32")
    return name


DEFAULT_LAYOUTS = {1: "C", 2: "MN", 3: "CHW", 4: "NHWC", 5: "NDHWC"}


# Stack of region logs: while a peeled partial tile is lowered, every region
# made is recorded as (view, start, shape, strides, anchor) in each active log,
# to check that narrowed DMAs are exact (D-LOW-PEEL).
REGION_LOGS: list[list] = []


def make_region(view: View, start: Aff, shape: list[int], strides: list[int], loc, emitter:
                ExprEmitter, anchor: Operation | None, layout: str | None = None) -> RegionOp:
    """An inline typed region of `view.buffer` starting at element `start`
    (absolute in the buffer) with `shape`/element `strides` (D-LOW-REGION)."""
    eb = view.elem_bytes
    if not shape:
        shape, strides = [1], [1]
    for log in REGION_LOGS:
        log.append((view, start, list(shape), list(strides), anchor))
    contiguous = True
    acc = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != acc:
            contiguous = False
        acc *= d
    last = sum((d - 1) * s for d, s in zip(shape, strides))
    extent = (last + 1) * eb
    off = emitter.emit(start.scale(eb), anchor)
    ext = emitter.const(extent)
    shape_v = [emitter.const(d) for d in shape]
    if contiguous:
        lay = layout if layout and len(layout) == len(shape) else DEFAULT_LAYOUTS.get(len(shape))
        if lay is None:
            lay = "ABCDEFGH"[: len(shape)]
        rtype = RegionType(view.level, view.elem, shape, layout=lay)
        strides_v: list[SSAValue] = []
    else:
        rtype = RegionType(view.level, view.elem, shape, strides=strides)
        strides_v = [emitter.const(s) for s in strides]
    emitter.flush()
    op = RegionOp(rtype, view.buffer, off, ext, shape_v, strides_v, None, "inline", [])
    op.location = loc
    return op


def buffer_bytes(shape: tuple[int, ...], elem: Attribute) -> int:
    return math.prod(shape) * BITWIDTH[elem_name(elem)] // 8


@dataclass
class TaskRec:
    """A task emitted in the current block, for dependency tracking (D-LOW-DEPS)."""

    token: SSAValue
    reads: set
    writes: set
    deps: list["TaskRec"] = field(default_factory=list)
    waited: bool = False

    def mark_waited(self) -> None:
        stack = [self]
        while stack:
            t = stack.pop()
            if not t.waited:
                t.waited = True
                stack.extend(t.deps)


def is_index_arith(op: Operation) -> bool:
    """Pure index arithmetic (`affine.apply`, `arith.constant`), which the
    lowering evaluates symbolically instead of lowering to tasks."""
    return isinstance(op, affine.ApplyOp | arith.ConstantOp)


def is_index(v: SSAValue) -> bool:
    return isinstance(v.type, IndexType)


def int_type_width(t: Attribute) -> int | None:
    return t.width.data if isinstance(t, IntegerType) else None


NEM_KEYWORDS = frozenset({"in", "out", "loop", "endloop", "region", "const", "let", "buffer",
                          "transfer", "store", "wait", "deps", "program", "device", "include",
                          "mod", "elem", "shape", "layout", "strides", "quant", "size", "align"})
