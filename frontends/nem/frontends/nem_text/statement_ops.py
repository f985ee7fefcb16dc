"""The `.nem` parser's most frequent statement ops built flat (D-IR-BUILD).

A region, a transfer or store and a compute task are most of a program's
statements (12,000, 6,000 and 4,000 in a 10,000-task program).  Their
constructors (`RegionOp(...)`, `MoveOp(...)`, `ComputeOp(...)`) take operand
groups, which `NemOp.__init__` flattens and sizes for any caller, and name
the result through IRDL's `result` accessor.  Here the parser, which has
the groups at hand, gives `create_op` the flat operand list, the segment
sizes and its location directly: the same op -- the properties in the
constructors' order, absent ones left out, `operandSegmentSizes` last --
which test/unit/test_final_check_fast_paths.py compares with the
constructors' on every repository program.
"""

from __future__ import annotations

from operator import itemgetter

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FileLineColLoc, FloatAttr, StringAttr
from xdsl.ir import Attribute, SSAValue

from nem.dialect.attributes import DecoratorAttr, RegionType
from nem.dialect.op_build import create_op
from nem.dialect.ops import (
    BINDING_ATTRS,
    NO_ATTRS,
    SYNC,
    TOKEN,
    ComputeOp,
    MoveOp,
    RegionOp,
    decorators_attr,
    operand_decorators_attr,
    segment_sizes_attr,
    ssa_name_hint,
)

_first = itemgetter(0)
_TOKEN_RESULT = (TOKEN,)


def region_op(
    rtype: RegionType,
    buffer: SSAValue,
    offset: SSAValue,
    extent: SSAValue,
    shape: list[SSAValue],
    strides: list[SSAValue],
    name: str | None,
    binding: str,
    decorators: list[DecoratorAttr],
    loc: FileLineColLoc,
) -> RegionOp:
    """`RegionOp(rtype, buffer, offset, extent, shape, strides, name,
    binding, decorators)` located at `loc`."""
    props: dict[str, Attribute] = {}
    if name:
        props["name"] = StringAttr(name)
    props["binding"] = BINDING_ATTRS.get(binding) or StringAttr(binding)
    if decorators:
        props["decorators"] = decorators_attr(decorators)  # type: ignore[assignment]  # not None
    props["operandSegmentSizes"] = segment_sizes_attr((1, 1, 1, len(shape), len(strides)))
    op = create_op(RegionOp, (buffer, offset, extent, *shape, *strides), (rtype,), props, loc)
    if name:
        _first(op.results).name_hint = ssa_name_hint(name)
    return op


def _task_props(
    token: str | None,
    sync: bool,
    decorators: list[DecoratorAttr],
    operand_decorators: list[list[DecoratorAttr]],
) -> dict[str, Attribute]:
    props: dict[str, Attribute] = {}
    if token:
        props["token"] = StringAttr(token)
    if sync:
        props["sync"] = SYNC
    if decorators:
        props["decorators"] = decorators_attr(decorators)  # type: ignore[assignment]  # not None
    op_decos = operand_decorators_attr(operand_decorators)
    if op_decos is not None:
        props["operand_decorators"] = op_decos
    return props


def move_op(
    cls: type[MoveOp],
    dst: SSAValue,
    src: SSAValue,
    deps: list[SSAValue],
    sync: bool,
    token: str | None,
    decorators: list[DecoratorAttr],
    operand_decorators: list[list[DecoratorAttr]],
    loc: FileLineColLoc,
) -> MoveOp:
    """`cls(dst, src, deps, sync, token, decorators, operand_decorators)`
    (a transfer or a store) located at `loc`."""
    props = _task_props(token, sync, decorators, operand_decorators)
    props["operandSegmentSizes"] = segment_sizes_attr((1, 1, len(deps)))
    op = create_op(cls, (dst, src, *deps), _TOKEN_RESULT, props, loc)
    if token:
        _first(op.results).name_hint = ssa_name_hint(token)
    return op


def compute_op(
    cls: type[ComputeOp],
    ins: list[SSAValue],
    outs: list[SSAValue],
    deps: list[SSAValue],
    args: list[SSAValue],
    attrs: DictionaryAttr,
    sync: bool,
    token: str | None,
    decorators: list[DecoratorAttr],
    operand_decorators: list[list[DecoratorAttr]],
    loc: FileLineColLoc,
) -> ComputeOp:
    """`cls(ins, outs, deps, args, attrs.data, sync, token, decorators,
    operand_decorators)` located at `loc` (`attrs`: `SharedAttrs.get`)."""
    props = _task_props(token, sync, decorators, operand_decorators)
    props["attrs"] = attrs
    props["operandSegmentSizes"] = segment_sizes_attr((len(ins), len(outs), len(deps), len(args)))
    op = create_op(cls, (*ins, *outs, *deps, *args), _TOKEN_RESULT, props, loc)
    if token:
        _first(op.results).name_hint = ssa_name_hint(token)
    return op


class SharedAttrs:
    """The `attrs` property of a parse's compute tasks, one attribute per
    distinct entry (names, values and their order): attributes are
    immutable values, and the verifier checks a compute task's rules once
    per distinct (opcode, operand types, attribute entry by identity,
    argument keys) (D-VERIFY-REPEAT), which an equal entry made again per
    task would defeat (2,000 gemm tasks with `accum_type=f32`).  An entry
    holding a FLOAT value is not shared: whether two floats are equal
    (signed zeros, NaN) is not whether they print the same."""

    def __init__(self) -> None:
        self._known: dict[tuple[tuple[str, Attribute], ...], DictionaryAttr] = {}

    def get(self, attrs: dict[str, Attribute]) -> DictionaryAttr:
        if not attrs:
            return NO_ATTRS
        if any(map(_holds_float, attrs.values())):
            return DictionaryAttr(attrs)
        key = tuple(attrs.items())
        hit = self._known.get(key)
        if hit is None:
            hit = self._known[key] = DictionaryAttr(attrs)
        return hit


def _holds_float(value: Attribute) -> bool:
    if type(value) is ArrayAttr:
        return any(map(_holds_float, value.data))
    return isinstance(value, FloatAttr)
