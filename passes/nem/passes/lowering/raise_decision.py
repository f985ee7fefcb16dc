"""The raise-or-escape decision (D-LOW-RAISE, D-LOW-ESCAPE, D-LOW-OUTLINE):
for a loop nest or a linalg op, the plan that raises it to NEM opcodes, or
`Escape` with the reason the remark prints when it runs as one escape-hatch
task (`compute op="mlir.kernel"`).

An analysis apart from the rewrite: `RaiseAnalysis` reads the MLIR (the
buffer, element type and shape of a memref from `MemrefRoots`; through `env`
and `view_of`, what only the conversion knows of the values defined outside
the nest: the affine value of an index, the box a view covers) and builds
nothing; `compute.lower_nest` / `compute.lower_linalg` emit what it
decides.  It answers on the structure of the computation: which NEM
computation it is (matmul, convolution or pooling window, elementwise trees,
copy, broadcast, fill), and why none (a carried value, an access no plan
takes, operands that overlap).  Whether the target's type families have a
variant for the resulting tasks is the other half of the decision, made
where the candidate tasks are built (`staging.illegal`): a plan may still
fall back there, with that reason (D-LOW-OUTLINE says why the two halves
are apart, and what moving the second one here takes).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.dialects.builtin import IntegerType, MemRefType
from xdsl.dialects.linalg.ops import GenericOp  # (not the deprecated lazy attribute)
from xdsl.ir import Attribute, Operation, SSAValue

from nem.frontends.upstream_dialects.linalg_softmax import SoftmaxOp
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.aliasing import ViewOf, alias_reason, linalg_alias_reason, nest_touches
from nem.passes.lowering.broadcasts import BroadcastPlan, match_broadcast
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.escape import CARRIED, carried_out, linalg_operands
from nem.passes.lowering.fills import (
    Box,
    access_box,
    box_elem,
    constant_of,
    fill_steps,
    nest_fill,
    view_box,
)
from nem.passes.lowering.generic_analysis import (
    NOT_ELTWISE_GENERIC,
    generic_accesses,
    generic_copy,
    generic_trees,
)
from nem.passes.lowering.memref_roots import MemrefFact, MemrefRoots
from nem.passes.lowering.nest_analysis import (
    LINALG_ELTWISE,
    LINALG_WRAPPING,
    Access,
    CopyPlan,
    EltOp,
    MatmulPlan,
    Nest,
    NotRaisable,
    Operand,
    analyze,
    match_nest,
    saturating_add,
)
from nem.passes.lowering.windows import (
    NotWindow,
    WindowPlan,
    match_window_generic,
    match_window_nest,
)


@dataclass(frozen=True)
class Escape:
    """Not raised: one escape-hatch task runs the nest (D-LOW-ESCAPE)."""

    why: str
    """The reason, as the remark prints it (D-OPT-REMARKS)."""
    after: tuple[Operation, ...] = ()
    """The ops after the loop that its kernel runs too: those storing the
    values it carries out (D-LOW-CARRIED)."""


@dataclass(frozen=True)
class Fill:
    """A constant stored over a box by the tasks of `steps` (D-LOW-FILL, `fill_steps`)."""

    box: Box
    steps: tuple[tuple[str, float | int], ...]

    @staticmethod
    def of(box: Box, value: Attribute) -> Fill | Escape:
        """The fill of `value` over `box`, or why it stays a kernel (a NaN, a -0.0)."""
        try:
            return Fill(box, tuple(fill_steps(value, box_elem(box))))
        except NotRaisable as e:
            return Escape(str(e))


@dataclass(frozen=True)
class Copy:
    """One transfer from `src` to `dst`, indexed alike over `extents` (D-LOW-COPYNEST)."""

    src: Access
    dst: Access
    extents: dict[int, int]


@dataclass(frozen=True)
class NestMatmul:
    """A loop nest that is C += A x B (D-LOW-ACCUM)."""

    plan: MatmulPlan
    extents: dict[int, int]


@dataclass(frozen=True)
class Eltwise:
    """Elementwise trees, the k-th writing `outs[k]`, over loads indexed by
    the loops of `extents` (a nest's, or a `linalg.generic`'s: D-LOW-RAISE)."""

    roots: tuple[EltOp, ...]
    outs: tuple[Access, ...]
    extents: dict[int, int]


@dataclass(frozen=True)
class NamedEltwise:
    """A named elementwise linalg op (`linalg.add`, ...) over whole memrefs."""

    root: EltOp


@dataclass(frozen=True)
class NamedLinalg:
    """`linalg.matmul`, `linalg.conv_2d_nhwc_hwcf`, `linalg.softmax`, or a
    `linalg.copy` between views of one shape and element type: one NEM
    opcode (or two, D-LOW-ACCUM) over the whole operands."""

    kind: str
    """The op's name: what the conversion emits."""


Decision = (
    Escape
    | Fill
    | Copy
    | NestMatmul
    | Eltwise
    | NamedEltwise
    | NamedLinalg
    | BroadcastPlan
    | WindowPlan
)
"""How a loop nest or linalg op is lowered."""

WINDOW_LIKE = ("a strided or skewed access", NOT_ELTWISE_GENERIC)
"""Why `match_nest` / `generic_trees` refuse what may be a convolution or pooling."""

COPY_LIKE = (
    "a copy that transposes or broadcasts",
    "the body is not a tree of elementwise operations over loads",
)
"""Why `match_nest` refuses what may be a transposing or broadcasting copy."""


class RaiseAnalysis:
    """The decision for the nests and linalg ops of one block of the
    conversion: `env` the affine value of each index defined outside them,
    `view_of(memref, user)` the view the conversion gives a memref (the
    boxes it covers, for D-LOW-ALIAS and fills), `roots` the function's
    `MemrefRoots` (which buffer a memref is, its element type and shape)."""

    def __init__(self, env: dict[SSAValue, Aff], view_of: ViewOf, roots: MemrefRoots) -> None:
        self.env = env
        self.view_of = view_of
        self.roots = roots

    def fact(self, m: SSAValue, user: Operation) -> MemrefFact:
        """The `MemrefFact` of memref operand `m` of `user`; the
        conversion's located reject for a memref it has no view of (a DMA
        tag, a value of an op it has no handler for)."""
        fact = self.roots.get(m)
        if fact is None:
            self.view_of(m, user)  # raises: MemrefRoots mirrors the views' handlers
            raise AssertionError(f"a view of {m} that MemrefRoots does not know")
        return fact

    def buffer_of(self, m: SSAValue, user: Operation) -> Hashable:
        """Which buffer `m` is (equal answers: one buffer)."""
        return self.fact(m, user).root

    def shape_of(self, m: SSAValue, user: Operation) -> tuple[int, ...]:
        """The shape of `m`: its type's, or where the type leaves a size
        dynamic the conversion's view's (known per lowered copy of a peeled
        loop, D-LOW-OUTLINE)."""
        shape = self.fact(m, user).shape
        return self.view_of(m, user).shape if shape is None else shape

    # -- loop nests ---------------------------------------------------------------
    def nest(self, top: affine.ForOp) -> Decision:
        """How the nest rooted at `top` is lowered; a located error for a
        value it carries out that no kernel can pass on (D-LOW-CARRIED)."""
        if top.results:  # values carried out of the loop (D-LOW-CARRIED)
            return Escape(CARRIED, tuple(carried_out(top)))
        env = self.env
        try:
            nest = analyze(top, env)
        except (NotRaisable, ValueError) as e:
            return Escape(str(e))

        def aliased() -> str | None:  # checked once a plan matched (D-LOW-ALIAS)
            return alias_reason(nest_touches(nest, env, self.view_of))

        try:
            plan = match_nest(nest, env, self.buffer_of)
        except (NotRaisable, ValueError) as e:
            if str(e) in COPY_LIKE:
                return self._broadcast_or_escape(str(e), nest, env, aliased)
            return self._window_or_escape(
                str(e), lambda: match_window_nest(nest, env), aliased, top
            )
        why = aliased()
        if why is not None:
            return Escape(why)
        exts = nest.extents
        if isinstance(plan, MatmulPlan):
            return NestMatmul(plan, exts)
        if isinstance(plan, CopyPlan):
            return Copy(plan.src.access, plan.dst, exts)
        return Eltwise((plan.root,), (plan.out,), exts)

    def _broadcast_or_escape(
        self, why: str, nest: Nest, env: dict[SSAValue, Aff], aliased: Callable[[], str | None]
    ) -> Decision:
        """A constant fill (D-LOW-FILL) or a transposing or broadcasting copy
        (D-LOW-BCAST), else the escape hatch with the reason (`aliased()`:
        D-LOW-ALIAS's, once a copy matched)."""
        try:
            fill = nest_fill(nest, env, self.view_of)
            if fill is not None:
                return Fill.of(*fill)
            plan = match_broadcast(nest, env, why)
        except (NotRaisable, ValueError) as e:
            return Escape(str(e))
        return Escape(overlap) if (overlap := aliased()) is not None else plan

    def _window_or_escape(
        self,
        why: str,
        match: Callable[[], WindowPlan],
        aliased: Callable[[], str | None],
        anchor: Operation,
    ) -> Decision:
        """A convolution or a max or sum pooling (D-LOW-WINDOW), else the
        escape hatch with the reason: the window matcher's when the
        computation looked like one (skewed accesses), else `why`;
        `aliased()`: why a matched plan may not be raised (D-LOW-ALIAS); a
        window sum of integers would wrap (D-LOW-SUMPOOL, D-LOW-INT-WRAP)."""
        try:
            plan = match()
        except NotWindow:
            return Escape(why)
        except (NotRaisable, ValueError) as e:
            return Escape(str(e) if why in WINDOW_LIKE else why)
        if (overlap := aliased()) is not None:
            return Escape(overlap)
        if plan.kind == "sumpool":  # no NEM opcode sums a window: adds do (D-LOW-SUMPOOL)
            wraps = saturating_add(self.fact(plan.y.memref, anchor).elem)
            if wraps is not None:
                return Escape(wraps)
        return plan

    # -- linalg -----------------------------------------------------------------------
    def linalg(self, op: Operation) -> Decision:
        """How linalg op `op` is lowered: `linalg.fill`, `linalg.matmul`,
        `linalg.conv_2d_nhwc_hwcf`, `linalg.softmax`, a same-shape
        `linalg.copy`, named elementwise ops and elementwise or copying
        `linalg.generic` are raised; other linalg ops fall back.  A located
        error for linalg on tensors."""
        ins, outs = linalg_operands(op)
        if op.results:
            raise reject(
                op, "linalg on tensors is not supported; bufferize first (one-shot-bufferize)"
            )
        if op.name == "linalg.fill":
            value = constant_of(ins[0]) if ins else None
            if value is None or not outs:
                return Escape("a fill with a value that is not an arith.constant")
            return Fill.of(view_box(self.view_of(outs[0], op)), value)
        for v in (*ins, *outs):
            if not isinstance(v.type, MemRefType):
                return Escape("scalar operands")
        # NEM's softmax reads a row before it writes it: in place on the very
        # same memref is what it computes; any other overlap is checked
        # (operands of buffers of their own, found on the roots, do not overlap:
        # then no view is asked for, D-LOW-OUTLINE)
        mems = (*ins, *outs)
        if not (isinstance(op, SoftmaxOp) and ins[0] is outs[0]) and len(
            {self.buffer_of(v, op) for v in mems}
        ) < len(mems):
            why = linalg_alias_reason(op, self.view_of, (ins, outs))  # D-LOW-ALIAS
            if why is not None:
                return Escape(why)
        if op.name in ("linalg.matmul", "linalg.conv_2d_nhwc_hwcf", "linalg.softmax"):
            return NamedLinalg(op.name)
        if op.name == "linalg.copy":
            a, b = self.fact(ins[0], op), self.fact(outs[0], op)
            if a.elem == b.elem and self.shape_of(ins[0], op) == self.shape_of(outs[0], op):
                # what promote copies (D-LOW-VIEW)
                return NamedLinalg(op.name)
        if isinstance(op, GenericOp):
            return self._generic(op)
        if op.name not in LINALG_ELTWISE:
            return Escape("no NEM opcode for this linalg op")
        elem = self.fact(outs[0], op).elem
        wraps = LINALG_WRAPPING.get(op.name) if isinstance(elem, IntegerType) else None
        return NamedEltwise(
            EltOp(LINALG_ELTWISE[op.name], tuple(Operand(v) for v in ins), wraps=wraps)
        )

    def _generic(self, op: GenericOp) -> Decision:
        """An elementwise `linalg.generic` (one tree per output), one that
        yields an input or a constant (a fill, one transfer, or D-LOW-BCAST's
        transfers for a transposing or broadcasting copy), a window."""

        def shape_of(v: SSAValue) -> tuple[int, ...]:
            return self.shape_of(v, op)

        try:
            copy = generic_copy(op, shape_of)
            roots = generic_trees(op, shape_of) if copy is None else []
        except NotRaisable as e:
            return self._window_or_escape(
                str(e), lambda: match_window_generic(op, shape_of), lambda: None, op
            )
        if copy is not None:
            src, dst, exts = copy
            if not isinstance(src, Access):
                return Fill.of(access_box(self.view_of(dst.memref, op), dst, exts), src)
            if self.buffer_of(src.memref, op) == self.buffer_of(dst.memref, op):
                return Escape("a copy within one buffer")
            if src.dims == dst.dims:
                return Copy(src, dst, exts)
            return BroadcastPlan(src, dst, exts)
        accesses, exts = generic_accesses(op, shape_of)
        return Eltwise(tuple(roots), tuple(accesses[len(linalg_operands(op)[0]) :]), exts)
