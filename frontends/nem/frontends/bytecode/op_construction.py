"""Ops built for the bytecode reader without xDSL's generic construction path.

`create_op` sets the object state `Operation.__init__` gives an op directly
(the generic wrappers cost most of the reader's IR construction time); it is
one of the private-API sites listed in docs/upstream-reports.md (reports
9-11), kept apart from the reader's decoding so that its one home is plain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, cast

from xdsl.dialects.builtin import UNKNOWN_LOC
from xdsl.ir import Attribute, Operation, OpResult, SSAValue, SSAValues, Use
from xdsl.irdl import IRDLOperation, OptionalDef

_item = tuple.__getitem__
_NEW_OP = object.__new__
_Op = TypeVar("_Op", bound=IRDLOperation)


def create_op(cls: type[_Op], operands: Sequence[SSAValue], result_types: Sequence[Attribute],
            properties: dict[str, Attribute]) -> _Op:
    """`cls.create(operands=..., result_types=..., properties=...)` for the
    reader's ops (no attributes, successors or regions; `properties` is
    taken over): the object state xDSL's `Operation.__init__` gives an op
    (operand uses linked at the head of each value's use list, as
    `add_use` links them; results; the IRDL definition's default properties
    and attributes), set directly rather than through its generic wrappers,
    which cost most of the IR construction time."""
    op = _NEW_OP(cls)
    uses = []
    for i, value in enumerate(operands):
        first = value.first_use
        use = Use(op, i, None, first)
        if first is not None:
            first._prev_use = use  # noqa: SLF001 - IRWithUses.add_use's link
        value.first_use = use
        uses.append(use)
    prop_defaults, attributes = _DEFAULTS.get(cls) or _defaults(cls)
    for name, default in prop_defaults:
        if name not in properties:
            properties[name] = default
    d = op.__dict__
    d["_operands"] = SSAValues(operands)
    d["_operand_uses"] = tuple(uses)
    d["results"] = SSAValues([OpResult(t, op, i) for i, t in enumerate(result_types)])
    d["properties"] = properties
    d["attributes"] = dict(attributes)
    d["location"] = UNKNOWN_LOC
    d["_successors"] = d["_successor_uses"] = d["regions"] = ()
    return op


def _defaults(cls: type[IRDLOperation]) -> tuple[tuple[tuple[str, Attribute], ...], dict[str, Attribute]]:
    """The default properties and attributes IRDLOperation.__post_init__ fills in."""
    d = cls.get_irdl_definition()
    props, attrs = (tuple((name, a.default_value) for name, a in defs.items()
                          if not isinstance(a, OptionalDef) and a.default_value is not None)
                    for defs in (d.properties, d.attributes))
    hit = _DEFAULTS[cls] = (props, dict(attrs))
    return hit


_DEFAULTS: dict[type, tuple[tuple[tuple[str, Attribute], ...], dict[str, Attribute]]] = {}


def first_result(op: Operation) -> SSAValue:
    """`op.results[0]`, without SSAValues' indexing (Python code that
    type-checks the index) on the path of every value the reader makes."""
    return cast(SSAValue, _item(op.results, 0))
