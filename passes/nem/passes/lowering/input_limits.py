"""The lowering's input within NEM's 64-bit integers (D-INT-RANGE): a pure
check, run on the entry function before anything is lowered, so that no
shape, stride or offset the lowering builds from the input overflows."""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects.builtin import AffineMapAttr, IntegerAttr, MemRefType
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineBinaryOpExpr, AffineConstantExpr, AffineExpr

from nem.dialect.limits import INT_MAX
from nem.dialect.per_class import first_base_table
from nem.passes.lowering.diagnostics import reject


def _out_of_range(v: int) -> bool:
    return not -INT_MAX - 1 <= v <= INT_MAX


def _shown(v: int) -> str:
    """`v` as text, its middle cut when it is long (a 10^5-digit literal)."""
    text = str(v)
    return text if len(text) <= 24 else f"{text[:10]}...{text[-6:]} ({len(text)} digits)"


def _constants(e: AffineExpr) -> Iterator[int]:
    """The constants of an affine expression, without recursion (a map may
    nest as deep as its text allows)."""
    todo = [e]
    while todo:
        x = todo.pop()
        if isinstance(x, AffineConstantExpr):
            yield x.value
        elif isinstance(x, AffineBinaryOpExpr):
            todo += [x.lhs, x.rhs]


def check_value_ranges(fn: Operation) -> None:
    """Memref dimensions and byte sizes (8 bytes an element at most), loop
    bounds and steps, index constants and the constants of affine maps must
    fit NEM's signed 64-bit integers; else a located error (D-INT-RANGE).
    The types checked are those of the values each op defines: its results
    and the arguments of its first region's blocks; each type object once,
    and each class's kind once (xDSL's attribute classes are ABCs, whose
    `isinstance` runs Python code: this runs for every op of the input)."""
    seen: dict[int, Attribute] = {}  # the types found in range, by id (kept alive here)
    kind = _KINDS

    def check_type(op: Operation, t: Attribute) -> None:
        if id(t) in seen:
            return
        if kind[type(t)] == _MEMREF:
            assert isinstance(t, MemRefType)
            shape = t.get_shape()
            size = 1
            for d in shape:
                size *= max(d, 1)
            if any(_out_of_range(d) for d in shape) or _out_of_range(size * 8):
                raise reject(
                    op,
                    f"{t} is larger than NEM's 64-bit sizes (D-INT-RANGE)",
                    "use smaller shapes",
                )
        seen[id(t)] = t

    for op in fn.walk():
        for r in op.results:
            check_type(op, r.type)
        if op.regions:
            for b in op.regions[0].blocks:
                for a in b.args:
                    check_type(op, a.type)
        for name, attr in op.properties.items():
            k = kind[type(attr)]
            if k == _INT:
                assert isinstance(attr, IntegerAttr)
                if _out_of_range(attr.value.data):
                    raise reject(
                        op,
                        f"{name} = {_shown(attr.value.data)} is outside NEM's 64-bit "
                        "integers (D-INT-RANGE)",
                        "use smaller values",
                    )
            elif k == _MAP:
                assert isinstance(attr, AffineMapAttr)
                for c in (c for e in attr.data.results for c in _constants(e)):
                    if _out_of_range(c):
                        raise reject(
                            op,
                            f"{name} holds {_shown(c)}, outside NEM's 64-bit "
                            "integers (D-INT-RANGE)",
                            "use smaller values",
                        )


_MEMREF, _INT, _MAP = 1, 2, 3
_KINDS = first_base_table(((MemRefType, _MEMREF), (IntegerAttr, _INT), (AffineMapAttr, _MAP)), 0)
"""`check_value_ranges`' kind of each attribute class."""
