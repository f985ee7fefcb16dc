"""Building IR objects whose parts are known to be valid, without xDSL's
generic per-object work (decision D-IR-BUILD).

A front end makes one op and one location per statement and per operator
of an expression: 55,000 of each for a 10,000-task program.  xDSL's
generic constructors cost about 20 µs per op and location together, most
of it wrappers and checks whose outcome is known here:
`FileLineColLoc.new` verifies its three parameters against their
constraints (a `StringAttr` and two `IntAttr`s, which the caller made);
`Operation.__init__` sets an empty successor list through its property,
copies the property and attribute dicts and looks through the op
definition for defaults.

`file_loc`, `create_op` and `init_op` build the same objects the way
xDSL's own `ParametrizedAttribute.new` and `Operation.create` do --
`__new__`, then the fields set -- with the object state
`Operation.__init__` gives an op: the operands through the public
`operands` setter (the one public way to link their uses), the results,
the IRDL definition's default properties and attributes filled in as
`IRDLOperation.__post_init__` fills them, through public fields only
(D-NO-PRIVATE-API; upstream report 9 in docs/upstream-reports.md asks xDSL
for a bulk constructor).  The printed IR, the generic MLIR and the
locations are byte-identical, and `op.verify()` still checks everything
IRDL checks.  The `.nem` parser, the bytecode reader and every NEM op's
constructor build through this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from xdsl.dialects.builtin import UNKNOWN_LOC, FileLineColLoc, IntAttr, LocationAttr, StringAttr
from xdsl.ir import Attribute, Operation, OpResult, Region, SSAValue, SSAValues
from xdsl.irdl import IRDLOperation, OptionalDef

from nem.dialect.per_class import PerClass

__all__ = ["create_op", "file_loc", "init_op"]

_OpT = TypeVar("_OpT", bound=Operation)
_set = object.__setattr__  # (attributes are frozen dataclasses: how `new` sets parameters)
_NEW = object.__new__


def file_loc(file: StringAttr, line: IntAttr, col: IntAttr) -> FileLineColLoc:
    """`FileLineColLoc.new((file, line, col))` without re-verifying the
    parameters: they are a `StringAttr` and two `IntAttr`s, as its
    definition requires (each verified when it was made)."""
    loc = _NEW(FileLineColLoc)
    _set(loc, "filename", file)
    _set(loc, "line", line)
    _set(loc, "column", col)
    return loc


def create_op(
    cls: type[_OpT],
    operands: Sequence[SSAValue],
    result_types: Sequence[Attribute],
    properties: dict[str, Attribute],
    location: LocationAttr = UNKNOWN_LOC,
    regions: Sequence[Region] = (),
) -> _OpT:
    """`cls.create(operands=..., result_types=..., properties=..., location=...,
    regions=...)` for an op with no successors and no attributes but the
    definition's defaults: the same op.  `properties` is taken over (not
    copied)."""
    op = _NEW(cls)
    init_op(op, operands, result_types, properties, location, regions)
    return op


def init_op(
    op: Operation,
    operands: Sequence[SSAValue],
    result_types: Sequence[Attribute],
    properties: dict[str, Attribute],
    location: LocationAttr = UNKNOWN_LOC,
    regions: Sequence[Region] = (),
) -> None:
    """The object state `Operation.__init__` gives `op`, a new instance, for
    these arguments (no successors, no attributes but the defaults)."""
    cls = type(op)
    prop_defaults, attributes = _DEFAULTS[cls]
    for name, default in prop_defaults:
        if name not in properties:
            properties[name] = default
    # the operands through xDSL's setter (a `Use` per operand, linked at the
    # head of the value's use list); none, and the successors (never any
    # here), are the `Operation` dataclass's field defaults, empty, which a
    # new op reads until a setter gives it its own
    if operands:
        op.operands = operands
    if len(result_types) == 1:
        op.results = SSAValues((OpResult(result_types[0], op, 0),))
    else:
        op.results = SSAValues([OpResult(t, op, i) for i, t in enumerate(result_types)])
    op.properties = properties
    op.attributes = dict(attributes) if attributes else {}
    op.location = location
    op.regions = ()
    for region in regions:
        op.add_region(region)


def _defaults(
    cls: type[Operation],
) -> tuple[tuple[tuple[str, Attribute], ...], dict[str, Attribute]]:
    """The default properties and attributes IRDLOperation.__post_init__ fills in."""
    if not issubclass(cls, IRDLOperation):
        hit: tuple[tuple[tuple[str, Attribute], ...], dict[str, Attribute]] = ((), {})
    else:
        d = cls.get_irdl_definition()
        props, attrs = (
            tuple(
                (name, a.default_value)
                for name, a in defs.items()
                if not isinstance(a, OptionalDef) and a.default_value is not None
            )
            for defs in (d.properties, d.attributes)
        )
        hit = (props, dict(attrs))
    return hit


_DEFAULTS = PerClass(_defaults)
"""`_defaults` by op class."""
