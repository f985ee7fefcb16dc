"""Which buffer each memref value of a function lives in, from the MLIR
alone (D-LOW-OUTLINE): `MemrefRoots`, an analysis computed once per
function, maps each memref value to its `MemrefFact` (root, element type,
static shape).

The raise-or-escape decision (`RaiseAnalysis`) needs three facts of a memref
operand: which buffer it is (a copy within one buffer escapes, D-LOW-ALIAS),
its element type (whether a sum wraps, D-LOW-INT-WRAP) and its shape (a
`linalg.generic`'s extents).  The conversion's views know them, but only as
it walks; a pass deciding before the conversion (`nem-outline-kernels`)
has the MLIR only.  The three are the MLIR's: the buffer is the root the
value is a view of (a `memref.alloc`/`alloca` result, a function argument,
or a `memref.get_global` symbol: two `get_global`s of one symbol are one
buffer, as is the `nem_lowering.buffer` that `nem-declare-buffers` makes of them), followed through the ops that make views (subview, view,
collapse/expand_shape, cast, the `nem_lowering.view` that
`nem-rewrite-views` makes of the last three, and the `async` payloads,
or the `nem_lowering.scope` results `nem-inline-async-executes` makes of them); the element type and
shape are the value's type's.  One value has one root even where the
conversion lowers its op twice (a peeled iteration reuses its loop's
buffers, D-LOW-PEEL).

The facts mirror the conversion's handlers exactly: a value has a fact
where the conversion gives it a view, so a memref it has none of (a DMA tag
memref, D-LOW-BUF; one from an op with no handler) is left to the
conversion's located reject (`RaiseAnalysis.fact`).  A shape the type leaves
dynamic (a subview sized by an `affine.min`, constant only in a peeled copy)
is the conversion's per lowered copy: `shape` is None there.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType
from xdsl.ir import Attribute, Operation, SSAValue

from nem.dialect.buffer_op import BufferOp
from nem.dialect.scope_op import ScopeYieldOp
from nem.dialect.view_op import ViewOp
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects.dma import (
    AffineDmaStartOp,
    AffineDmaWaitOp,
)

MEMREF_VIEWS = (
    memref.SubviewOp,
    memref.ViewOp,
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.ReinterpretCastOp,
    memref.CastOp,
)
"""The memref ops whose result is a view of their first operand's buffer
(`MemrefRoots` follows them; an escape-hatch kernel takes what they view)."""


@dataclass(frozen=True)
class MemrefFact:
    """What the decision needs of a memref value."""

    root: Hashable
    """The buffer it is a view of: the `alloc`/`alloca` result or function
    argument (an `SSAValue`), or the `get_global` symbol (a `str`); equal
    roots are one buffer."""
    elem: Attribute
    shape: tuple[int, ...] | None
    """The static shape, None where the type leaves a size dynamic."""


def only_dma_tags(v: SSAValue) -> bool:
    """`v` (an allocation) is used as the tag of DMA starts and waits and
    deallocated, nothing else: no buffer (D-LOW-BUF)."""
    uses = [u.operation for u in v.uses]
    return (
        bool(uses)
        and all(_is_tag_use(u, v) or isinstance(u, memref.DeallocOp) for u in uses)
        and any(not isinstance(u, memref.DeallocOp) for u in uses)
    )


def _is_tag_use(u: Operation, v: SSAValue) -> bool:
    if isinstance(u, AffineDmaStartOp):
        return u.tag == v and u.src != v and u.dst != v
    return isinstance(u, AffineDmaWaitOp)


def _static_shape(t: MemRefType) -> tuple[int, ...] | None:
    shape = tuple(t.get_shape())
    return None if DYNAMIC_INDEX in shape else shape


class MemrefRoots:
    """The `MemrefFact` of each memref value of function `fn` (its memref
    arguments, and the values of its ops, in one walk)."""

    def __init__(self, fn: func.FuncOp) -> None:
        self.facts: dict[SSAValue, MemrefFact] = {}
        for arg in fn.body.block.args:
            self._root(arg)
        for op in fn.walk():
            self._visit(op)

    def get(self, v: SSAValue) -> MemrefFact | None:
        """The fact of `v`, None where the conversion has no view of it."""
        return self.facts.get(v)

    def _root(self, v: SSAValue, key: Hashable | None = None) -> None:
        t = v.type
        if isinstance(t, MemRefType):
            self.facts[v] = MemrefFact(v if key is None else key, t.element_type, _static_shape(t))

    def _alias(
        self,
        result: SSAValue,
        source: SSAValue,
        keep_shape: bool = False,
    ) -> None:
        """`result` a view of `source`'s buffer (`keep_shape`: with
        `source`'s shape, as the conversion copies a cast's view)."""
        src, t = self.facts.get(source), result.type
        if src is None or not isinstance(t, MemRefType):
            return
        shape = src.shape if keep_shape else _static_shape(t)
        self.facts[result] = MemrefFact(src.root, t.element_type, shape)

    def _flow(self, to: SSAValue, source: SSAValue) -> None:
        """An `async` payload: `to` is `source`'s view (memref or `!async.value`)."""
        fact = self.facts.get(source)
        if fact is not None:
            self.facts[to] = fact

    def _visit(self, op: Operation) -> None:
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            if not op.operands and not only_dma_tags(op.results[0]):
                self._root(op.results[0])
        elif isinstance(op, memref.GetGlobalOp):
            self._root(op.memref, op.name_.root_reference.data)
        elif isinstance(op, BufferOp) and op.global_ is not None:  # nem-declare-buffers'
            self._root(op.result, op.global_.root_reference.data)
        elif isinstance(op, BufferOp):  # an allocation (nem-declare-allocations)
            if not op.sizes and not only_dma_tags(op.result):
                self._root(op.result)
        elif isinstance(op, memref.SubviewOp | memref.ViewOp):
            self._alias(op.result, op.source)
        elif isinstance(op, memref.CollapseShapeOp | memref.ExpandShapeOp):
            self._alias(op.result, op.src)
        elif isinstance(op, memref.ReinterpretCastOp):
            self._alias(op.result, op.source)
        elif isinstance(op, memref.CastOp):
            self._alias(op.results[0], op.source, keep_shape=True)
        elif isinstance(op, ViewOp):  # what nem-rewrite-views makes of the ones above
            # a cast's (no shape) is its source's view; else the type's shape,
            # which is the op's (None where a size is dynamic, as a subview's)
            self._alias(op.result, op.source, keep_shape=op.is_cast)
        elif isinstance(op, asy.ExecuteOp):
            for v, arg in zip(op.body_operands, op.body_region.block.args):
                self._flow(arg, v)
        elif isinstance(op, asy.YieldOp) and isinstance(op.parent_op(), asy.ExecuteOp):
            execute = op.parent_op()
            assert isinstance(execute, asy.ExecuteOp)
            for r, v in zip(execute.body_results, op.operands):
                if isinstance(v.type, MemRefType):
                    self._flow(r, v)
        elif isinstance(op, asy.AwaitOp) and op.result is not None:
            self._flow(op.result, op.operand)
        elif isinstance(op, ScopeYieldOp):  # nem-inline-async-executes' (D-LOW-ASYNC-INLINE)
            scope = op.parent_op()
            assert scope is not None
            for r, v in zip(scope.results, op.operands):
                self._flow(r, v)
