"""The share of compute raised to NEM opcodes, by FLOPs (issue 16 "Numbers").

Counted on the tiled program (`STEM.tile.mlir`, what the lowering reads):
every floating-point `arith`/`math` op counts one FLOP per execution, i.e.
times the trip counts of the `affine.for` loops around it (a multiply-add
is two).  A FLOP belongs to the compute nest around it: its outermost
enclosing loop with no DMA inside, the unit the lowering raises or not.  A
nest is escaped when the lowering reports it so: its `EscapeRemark`
(`nem.passes.lowering.driver`), read by type and location (line, col in the
tiled text), not by its wording; every other nest was raised to NEM opcodes.

Each nest also gets a category, from the shape of its stores, so the share
can be read against issue 16's target (100% of conv/matmul/pool/eltwise):

* `conv/matmul`: a store accumulates (`M[i] = M[i] + ...`, same access) a
  product of two loads;
* `pool`: a store accumulates (sum, max, min) a load whose index slides a
  window (one index adds two loop variables of the nest, `2*oh + kh`);
* `reduction`: any other accumulation (softmax's row max and sum, layer
  norm's mean and variance, global pooling over whole axes);
* `eltwise`: no accumulating store (activations, bias adds, normalizing
  bodies, fills).

A linalg op (transform route) is categorized by its name (matmul, conv,
pooling) or, for `linalg.generic`, by whether it has a reduction iterator.

On the transform route a FLOP in a linalg op's body counts once per
iteration of the op (the trip counts of the loops it converts to) and of
the `scf.for` tile loops around it.

Trip counts: constant bounds exactly; a bound that moves with an outer loop
(`%i to %i + 32`, `min(%i + 32, 100)`) counts the largest constant
difference of its results, i.e. a partial last tile as a whole one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mlir import ir

FLOAT_OPS = (
    "arith.addf",
    "arith.subf",
    "arith.mulf",
    "arith.divf",
    "arith.remf",
    "arith.negf",
    "arith.maximumf",
    "arith.minimumf",
    "arith.maxnumf",
    "arith.minnumf",
    "arith.cmpf",
)
CATEGORIES = ("conv/matmul", "pool", "eltwise", "reduction")
TARGET = ("conv/matmul", "pool", "eltwise")
"""The categories issue 16 targets at 100% raised."""
CASTS = ("arith.extf", "arith.truncf")
SOFTMAX_FLOPS = 5
"""Per element of a `linalg.softmax` (no body to count; category reduction):
the row max, the subtraction, exp, the row sum and the division."""
SELECTING = ("arith.maximumf", "arith.maxnumf", "arith.minimumf", "arith.minnumf")
"""Float combiners that return one of their operands: exact in any type."""
ACCUMULATE = ("arith.addf", *SELECTING)


LOW_SHARE = 0.5
"""Below this raised share of the FLOPs a compile warns without -v (D-COMPILE-LOW-SHARE)."""
REASONS_SHOWN = 2
"""The reasons the low-share warning quotes (the escaped FLOPs' largest)."""


@dataclass(frozen=True)
class FlopShare:
    raised: int
    """FLOPs in nests raised to NEM opcodes."""
    escaped: int
    """FLOPs in nests that run as escape-hatch kernels."""
    by_category: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Category -> (raised, escaped) FLOPs."""
    reasons: tuple[tuple[str, int], ...] = ()
    """(why a nest was not raised, its escaped FLOPs), the most FLOPs first:
    the lowering's reason for each escaped nest, summed over the nests that
    share it."""

    @property
    def share(self) -> float:
        """The raised share of the FLOPs, 0..1 (1 when there are none)."""
        total = self.raised + self.escaped
        return self.raised / total if total else 1.0

    def warning(self) -> str | None:
        """One line when less than `LOW_SHARE` of the FLOPs were raised (the
        rest runs as escape-hatch kernels, far slower on the device): the
        share and the first reasons; None otherwise (D-COMPILE-LOW-SHARE)."""
        if self.share >= LOW_SHARE:
            return None
        shown = "; ".join(why for why, _ in self.reasons[:REASONS_SHOWN])
        more = len(self.reasons) - REASONS_SHOWN
        return (
            f"only {_percent(self.share)} of the model's FLOPs run as NEM opcodes "
            f"({self.escaped} of {self.raised + self.escaped} in escape-hatch kernels)"
            + (f": {shown}" if shown else "")
            + (f"; {more} more reason(s)" if more > 0 else "")
            + " (-v: a remark per op)"
        )

    def category_share(self, names: Iterable[str] = TARGET) -> float:
        """The raised share of the FLOPs in categories `names`."""
        raised = sum(self.by_category.get(n, (0, 0))[0] for n in names)
        total = raised + sum(self.by_category.get(n, (0, 0))[1] for n in names)
        return raised / total if total else 1.0

    def remark(self) -> str:
        if not self.raised + self.escaped:
            return (
                "compute raised to NEM opcodes by FLOPs: n/a (no floating-point "
                "operations; integer operations are not counted)"
            )
        parts = [
            f"{name} {_percent(r / (r + e))} of {r + e}"
            for name in CATEGORIES
            for r, e in [self.by_category.get(name, (0, 0))]
            if r + e
        ]
        return (
            f"compute raised to NEM opcodes by FLOPs: {_percent(self.share)} "
            f"({self.raised} raised, {self.escaped} in escape-hatch kernels); "
            f"conv/matmul/pool/eltwise {self._target_percent()}; by category: " + ", ".join(parts)
        )

    def _target_percent(self) -> str:
        if not any(sum(self.by_category.get(n, (0, 0))) for n in TARGET):
            return "n/a"
        return _percent(self.category_share())


def _percent(share: float) -> str:
    """`share` as a percentage to 0.1, never rounded up to 100.0% unless whole."""
    return f"{min(share * 100, 99.9) if share < 1 else 100:.1f}%"


def _trips(loop: ir.Operation) -> int:
    lb = ir.AffineMapAttr(loop.attributes["lowerBoundMap"]).value
    ub = ir.AffineMapAttr(loop.attributes["upperBoundMap"]).value
    step = ir.IntegerAttr(loop.attributes["step"]).value
    n_lb = lb.n_inputs
    lb_ops, ub_ops = list(loop.operands[:n_lb]), list(loop.operands[n_lb:])
    best = 1
    if len(lb.results) == 1 and lb_ops == ub_ops[: len(lb_ops)]:
        for r in ub.results:
            # constant when the bounds move together (the map downcasts the expression)
            diff = ir.AffineMap.get(ub.n_dims, ub.n_symbols, [r - lb.results[0]]).results[0]
            if isinstance(diff, ir.AffineConstantExpr):
                best = max(best, -(-diff.value // step))
    return best


def domain(op: ir.Operation) -> int:
    """Iterations of a linalg op: the product of its loops' ranges, each
    read from an operand dimension that an indexing map sends it to as a
    plain dimension (as MLIR's `getStaticLoopRanges`); when some loop has
    none such (or a shape is dynamic), a clone of the op converted to affine
    loops (-convert-linalg-to-affine-loops) and its loops' trip counts."""
    ranges = _map_ranges(op)
    return math.prod(ranges) if ranges is not None else _converted_domain(op)


MEMOIZED_MAPS = "linalg.memoized_indexing_maps"
"""The indexing maps of a named linalg op (a convolution), which MLIR
records on the op once asked for them (the tile stage's tiling does)."""


def _map_ranges(op: ir.Operation) -> list[int] | None:
    key = next((k for k in ("indexing_maps", MEMOIZED_MAPS) if k in op.attributes), None)
    if key is None:
        return None
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes[key])]
    if not maps or len(maps) != len(op.operands):
        return None
    ranges: list[int | None] = [None] * maps[0].n_dims
    for m, v in zip(maps, op.operands):
        if not isinstance(v.type, ir.ShapedType):
            continue
        t = ir.ShapedType(v.type)
        if not t.has_static_shape:
            return None
        for size, expr in zip(t.shape, m.results):
            if isinstance(expr, ir.AffineDimExpr) and ranges[expr.position] is None:
                ranges[expr.position] = size
    if any(r is None for r in ranges):
        return None
    return [r for r in ranges if r is not None]


def _converted_domain(op: ir.Operation) -> int:
    from nem.compile.nest_ir import run_on_nest

    clone = op.clone(ir.InsertionPoint(op))
    clone = clone.operation if isinstance(clone, ir.OpView) else clone
    made = run_on_nest(clone, "convert-linalg-to-affine-loops")
    n = 1

    def visit(o: ir.Operation) -> ir.WalkResult:
        nonlocal n
        if o.name == "affine.for":
            n *= _trips(o)
        return ir.WalkResult.ADVANCE

    for o in made:
        o.walk(visit)
    for o in reversed(made):
        o.erase()
    return n


_ShapeKey = tuple[str, tuple[object, ...], tuple[tuple[str, str], ...]]
"""An op's name, its operands' (shape, element type) or type, its attributes."""


def _shape_key(op: ir.Operation) -> _ShapeKey | None:
    """What `_converted_domain(op)` depends on, when every operand's shape is
    static: the op's name, its operands' shapes and element types (not their
    layouts or memory spaces) and its attributes (the loops
    `convert-linalg-to-affine-loops` makes come from the op's maps and
    shapes, their bounds are then constants); None otherwise."""
    types: list[object] = []
    for v in op.operands:
        t = v.type
        if isinstance(t, ir.ShapedType):
            shaped = ir.ShapedType(t)
            if not shaped.has_static_shape:
                return None
            types.append((tuple(shaped.shape), str(shaped.element_type)))
        else:
            types.append(str(t))
    attrs = tuple((name, str(op.attributes[name])) for name in op.attributes)
    return (op.name, tuple(types), attrs)


class _Domains(dict[ir.Operation, int]):
    """`domain` of each linalg op holding a float op, made when asked; the
    converted domains by `_shape_key` too (D-COMPILE-FLOPS-SHAPES): a tiled
    CNN converts each of its few convolution shapes once, not each of its
    hundreds of convolutions."""

    def __init__(self) -> None:
        super().__init__()
        self.by_shape: dict[_ShapeKey, int] = {}

    def __missing__(self, op: ir.Operation) -> int:
        ranges = _map_ranges(op)
        if ranges is not None:
            n = math.prod(ranges)
        else:
            key = _shape_key(op)
            if key is None:
                n = _converted_domain(op)
            elif key in self.by_shape:
                n = self.by_shape[key]
            else:
                n = self.by_shape[key] = _converted_domain(op)
        self[op] = n
        return n


def _is_float_op(op: ir.Operation) -> bool:
    return op.name in FLOAT_OPS or (
        op.name.startswith("math.") and any(isinstance(r.type, ir.FloatType) for r in op.results)
    )


def _strip(v: ir.Value) -> ir.Operation | None:
    """The op defining `v`, through float casts (None for a block argument)."""
    while isinstance(v.owner, ir.Operation) or isinstance(v.owner, ir.OpView):
        op = v.owner.operation if isinstance(v.owner, ir.OpView) else v.owner
        if op.name not in CASTS:
            return op
        v = op.operands[0]
    return None


def _dims(expr: ir.AffineExpr) -> set[int]:
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position}
    if isinstance(expr, ir.AffineBinaryExpr):
        return _dims(expr.lhs) | _dims(expr.rhs)
    return set()


def _slides(load: ir.Operation, inner: set[ir.Value]) -> bool:
    """Whether an index of `load` adds two loop variables of the nest (`inner`)."""
    amap = ir.AffineMapAttr(load.attributes["map"]).value
    idx = list(load.operands)[1:]

    def ivs(expr: ir.AffineExpr) -> set[ir.Value]:
        return {idx[d] for d in _dims(expr) if d < len(idx) and idx[d] in inner}

    def visit(expr: ir.AffineExpr) -> bool:
        if isinstance(expr, ir.AffineAddExpr):
            lhs, rhs = ivs(expr.lhs), ivs(expr.rhs)
            if lhs and rhs and lhs != rhs:
                return True
        if isinstance(expr, ir.AffineBinaryExpr):
            return visit(expr.lhs) or visit(expr.rhs)
        return False

    return any(visit(r) for r in amap.results)


def _same_access(load: ir.Operation, store: ir.Operation) -> bool:
    return (
        load.operands[0] == store.operands[1]
        and str(load.attributes["map"]) == str(store.attributes["map"])
        and list(load.operands)[1:] == list(store.operands)[2:]
    )


def _generic_reduction_category(op: ir.Operation) -> str:
    """A `linalg.generic` with a reduction iterator: conv/matmul when its body
    multiplies two of its inputs, pool when an input's map slides a window
    (adds two loop dimensions), else reduction."""
    args = list(op.regions[0].blocks[0].arguments)
    inputs = set(args[: len(args) - 1])
    for o in op.regions[0].blocks[0].operations:
        if o.operation.name == "arith.mulf" and all(
            _through_casts(v) in inputs for v in o.operation.operands
        ):
            return "conv/matmul"
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    for amap in maps[:-1]:
        for r in amap.results:
            if (
                isinstance(r, ir.AffineAddExpr)
                and _dims(r.lhs)
                and _dims(r.rhs)
                and _dims(r.lhs) != _dims(r.rhs)
            ):
                return "pool"
    return "reduction"


def _through_casts(v: ir.Value) -> ir.Value:
    """`v` before any float casts."""
    while isinstance(v.owner, ir.Operation | ir.OpView):
        op = v.owner.operation if isinstance(v.owner, ir.OpView) else v.owner
        if op.name not in CASTS:
            break
        v = op.operands[0]
    return v


def _nest_category(root: ir.Operation) -> str:
    """The category of a compute nest or linalg op (module docstring)."""
    if root.name.startswith("linalg."):
        if "matmul" in root.name or "conv" in root.name:
            return "conv/matmul"
        if "pooling" in root.name:
            return "pool"
        kinds = (
            str(root.attributes["iterator_types"]) if "iterator_types" in root.attributes else ""
        )
        if "reduction" not in kinds:
            return "eltwise"
        return _generic_reduction_category(root)
    stores: list[ir.Operation] = []
    inner: set[ir.Value] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "affine.store":
            stores.append(op)
        elif op.name == "affine.for":
            inner.add(op.regions[0].blocks[0].arguments[0])
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    category = "eltwise"
    for store in stores:
        acc = _strip(store.operands[0])
        if acc is None or acc.name not in ACCUMULATE:
            continue
        ops = [_strip(v) for v in acc.operands]
        if not any(
            o is not None and o.name == "affine.load" and _same_access(o, store) for o in ops
        ):
            continue
        other = [
            o
            for o in ops
            if o is not None and not (o.name == "affine.load" and _same_access(o, store))
        ]
        if any(
            o.name == "arith.mulf"
            and all((f := _strip(v)) is not None and f.name == "affine.load" for v in o.operands)
            for o in other
        ):
            return "conv/matmul"
        if any(o.name == "affine.load" and _slides(o, inner) for o in other):
            category = "pool"
        elif category == "eltwise":
            category = "reduction"
    return category


def flop_share(
    tiled: str, escaped_at: Mapping[tuple[int, int], str], module: ir.Module | None = None
) -> FlopShare:
    """Raised and escaped FLOPs of the tiled program `tiled`, by category,
    given the (line, col) of each nest the lowering did not raise and why
    (its `EscapeRemark`s, `nem.compile.lower.lower_and_verify`).  `module`:
    the module `tiled` was printed from (`str(module)`, the tile stage's),
    counted as it is, each op's (line, col) in `tiled` read from the text
    (`_positions`) instead of parsing it again (D-COMPILE-FLOPS-TEXT); the
    text is parsed when the two do not line up op by op."""
    if module is not None:
        with module.context:
            got = _Count(escaped_at, tiled).run(module.operation)
        if got is not None:
            return got
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        parsed = ir.Module.parse(tiled)
        got = _Count(escaped_at).run(parsed.operation)
        assert got is not None, "a parsed module has its own positions"
        return got


ELIDED = ("affine.yield", "scf.yield")
"""Terminators the printer leaves out when they yield nothing (a loop's)."""


def _positions(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The lines of `text` (an MLIR module as upstream prints it) and the
    (line, col) of each op printed there, in order: where the parser would
    locate it, its name after any results (`%0 = arith.addf`).  Every line
    starts an op but closing braces, block labels (`^bb0`), the aliases
    (`#map = ...`) and the resources after the module (`{-#`)."""
    cut = text.find("\n{-#")
    lines = (text if cut < 0 else text[:cut]).split("\n")
    at: list[tuple[int, int]] = []
    for i, line in enumerate(lines):
        s = line.lstrip(" ")
        if s and s[0] not in "}^#":
            col = len(line) - len(s) + 1
            if s[0] == "%":
                col += s.find(" = ") + 3
            at.append((i + 1, col))
    return lines, at


class _Count:
    """One pre-order walk of a module counting its FLOPs; positions from
    each op's location (a parsed module) or from `text` (`_positions`)."""

    def __init__(self, escaped_at: Mapping[tuple[int, int], str], text: str | None = None):
        self.escaped_at = escaped_at
        self.counts = {"raised": 0, "escaped": 0}
        self.reasons: dict[str, int] = {}
        self.by_category: dict[str, list[int]] = {}
        self.categories: dict[ir.Operation, str] = {}
        self.dma: dict[ir.Operation, bool] = {}
        self.domains = _Domains()
        self.softmaxes: list[tuple[ir.Operation, tuple[int, int]]] = []
        self.text = text
        self.lines: list[str] = []
        self.at: list[tuple[int, int]] = []
        self.index: dict[ir.Operation, tuple[int, int]] = {}
        """The position of each loop and linalg op (a nest's root), from the text."""
        self.k = 0
        """Ops printed so far (text positions)."""
        self.hidden = 0
        """Ops still to visit in regions the printer leaves out (named linalg ops' bodies)."""
        self.aligned = True

    def run(self, root: ir.Operation) -> FlopShare | None:
        """The share; None when the text does not line up with the module."""
        if self.text is not None:
            self.lines, self.at = _positions(self.text)
            root.walk(self._visit_text, ir.WalkOrder.PRE_ORDER)
            if not self.aligned or self.k != len(self.at):
                return None
        else:
            root.walk(self._visit_parsed, ir.WalkOrder.PRE_ORDER)
        for op, pos in self.softmaxes:  # no body: upstream's decomposition, 5 FLOPs an element
            n = SOFTMAX_FLOPS * math.prod(ir.ShapedType(op.operands[0].type).shape)
            key = _count(self.counts, self.reasons, self.escaped_at, pos, n)
            self.by_category.setdefault("reduction", [0, 0])[key == "escaped"] += n
        return FlopShare(
            self.counts["raised"],
            self.counts["escaped"],
            {k: (v[0], v[1]) for k, v in self.by_category.items()},
            tuple(sorted(self.reasons.items(), key=lambda r: -r[1])),
        )

    def _visit_parsed(self, op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name == "linalg.softmax":
            self.softmaxes.append((op, _position(op)))
        elif _is_float_op(op):
            self._float_op(op, _position)
        return ir.WalkResult.ADVANCE

    def _visit_text(self, op: ir.Operation) -> ir.WalkResult:
        if not self.aligned:
            return ir.WalkResult.INTERRUPT
        name = op.name
        if self.hidden:
            self.hidden -= 1
            pos = None
        elif name in ELIDED and not len(op.operands):
            pos = None
        else:
            pos = self._next(op, name)
            if pos is None:
                return ir.WalkResult.INTERRUPT
            if name.startswith("linalg.") or name in ("affine.for", "scf.for"):
                self.index[op] = pos
        if name == "linalg.softmax" and pos is not None:
            self.softmaxes.append((op, pos))
        elif _is_float_op(op):
            if pos is None:  # a body the printer leaves out: its op is the root
                pos = (0, 0)
            here = pos
            self._float_op(op, lambda o: here if o == op else self.index[o])
        return ir.WalkResult.ADVANCE

    def _next(self, op: ir.Operation, name: str) -> tuple[int, int] | None:
        """The position of the next printed op, `op` (None, and no longer
        aligned, when the text has another op there)."""
        if self.k >= len(self.at):
            self.aligned = False
            return None
        line, col = self.at[self.k]
        text = self.lines[line - 1]
        short = name.partition(".")[2]  # a default dialect's ops print without it (`return`)
        if not (
            text.startswith(name, col - 1)
            or text.startswith(f'"{name}"', col - 1)
            or (short and text.startswith(short, col - 1))
        ):
            self.aligned = False
            return None
        self.k += 1
        if name.startswith("linalg.") and not text.endswith("{") and len(op.regions):
            counted = -1  # the op itself

            def count(_: ir.Operation) -> ir.WalkResult:
                nonlocal counted
                counted += 1
                return ir.WalkResult.ADVANCE

            op.walk(count, ir.WalkOrder.PRE_ORDER)
            self.hidden = counted
        return line, col

    def _float_op(
        self, op: ir.Operation, position: Callable[[ir.Operation], tuple[int, int]]
    ) -> None:
        from nem.compile.nest_ir import scf_trips

        n, root, parent = 1, None, op.parent
        while parent is not None and parent.name != "func.func":
            if parent.name == "affine.for":
                n *= _trips(parent.operation)
                if not self._has_dma(parent.operation):
                    root = parent.operation
            elif parent.name == "scf.for":  # the transform route's tile loops
                trips = scf_trips(parent.operation)
                n *= 1 if trips is None else trips
            elif parent.name.startswith("linalg."):
                n *= self.domains[parent.operation]
                root = parent.operation
            parent = parent.parent
        pos = position(root if root is not None else op)
        key = _count(self.counts, self.reasons, self.escaped_at, pos, n)
        if root is None:
            category = "eltwise"
        elif root in self.categories:
            category = self.categories[root]
        else:
            category = self.categories[root] = _nest_category(root)
        self.by_category.setdefault(category, [0, 0])[key == "escaped"] += n

    def _has_dma(self, loop: ir.Operation) -> bool:
        if loop in self.dma:
            return self.dma[loop]
        found = False

        def visit(op: ir.Operation) -> ir.WalkResult:
            nonlocal found
            found = found or op.name in ("affine.dma_start", "affine.dma_wait")
            return ir.WalkResult.INTERRUPT if found else ir.WalkResult.ADVANCE

        loop.walk(visit)
        self.dma[loop] = found
        return found


def _position(op: ir.Operation) -> tuple[int, int]:
    loc = op.location
    return loc.start_line, loc.start_col


def _count(
    counts: dict[str, int],
    reasons: dict[str, int],
    escaped_at: Mapping[tuple[int, int], str],
    pos: tuple[int, int],
    n: int,
) -> str:
    """Count `n` FLOPs of the nest at `pos` (line, col) as raised or escaped
    (and under its reason); returns which."""
    why = escaped_at.get(pos)
    if why is None:
        counts["raised"] += n
        return "raised"
    counts["escaped"] += n
    reasons[why] = reasons.get(why, 0) + n
    return "escaped"
