"""Binding a compute op's positional operands to its registry operands and
to the type-family bindings they are matched against (one home for both the
static family check and the device validity check)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TypeVar

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, Operation, SSAValue

from nem.dialect.attributes import RegionType, elem_name
from nem.dialect.families import Catalog, MatchResult, OperandInfo
from nem.dialect.family_model import VariantRef
from nem.dialect.ops import ComputeOp, LoopOp, RegionOp
from nem.dialect.point_checks import operand_groups
from nem.dialect.registry import OpcodeSpec, OperandSpec

T = TypeVar("T")


def bind_operands(op: ComputeOp) -> list[tuple[OperandSpec, SSAValue]]:
    """(registry operand, value) pairs; a variadic operand takes the surplus."""
    ins, outs, _, _ = operand_groups(op)  # (one segment decoding for both groups)
    return bind(op.SPEC, ins, outs)


def bind(spec: OpcodeSpec, ins: Sequence[T], outs: Sequence[T]) -> list[tuple[OperandSpec, T]]:
    """(registry operand, item) pairs for an instance of `spec` whose inputs
    and outputs are `ins` and `outs` (values, or their types when no op is
    built); a variadic operand takes the surplus."""
    out: list[tuple[OperandSpec, T]] = []
    for specs, items in ((spec.inputs, ins), (spec.outputs, outs)):
        i = 0
        for s in specs:
            if s.variadic:
                n = len(items) - (len(specs) - 1)
                out.extend((s, v) for v in items[i : i + n])
                i += n
            elif i < len(items):
                out.append((s, items[i]))
                i += 1
    return out


def value_label(value: SSAValue) -> str:
    """How diagnostics name a region operand: its name, or `region(BUF, ...)`."""
    op = value.owner
    if isinstance(op, RegionOp):
        if op.region_name is not None:
            return op.region_name.data
        return f"region({op.buffer_decl.buffer_name.data}, ...)"
    return "value"


DECLARED_KINDS = {
    "nem.buffer": "buffer",
    "nem.region": "region",
    "nem.const": "const",
    "nem.let": "let",
}
"""Ops that declare a named value, by op name; every other named op is a
task, whose value is its token."""


def user_name(value: SSAValue) -> str | None:
    """A value as the user named it in diagnostics (`token 't'`, `region
    'R'`, `buffer 'B'`, `loop variable 'i'`), None when it has no name."""
    owner = value.owner
    if not isinstance(owner, Operation):  # a block argument: a loop's variable
        loop = owner.parent_op()
        return f"loop variable '{loop.iv_name.data}'" if isinstance(loop, LoopOp) else None
    name = owner.properties.get("name") or owner.properties.get("token")
    if not isinstance(name, StringAttr):
        return None
    return f"{DECLARED_KINDS.get(owner.name, 'token')} '{name.data}'"


def family_bindings(op: ComputeOp) -> dict[str, list[OperandInfo]]:
    bindings: dict[str, list[OperandInfo]] = {}
    for s, v in bind_operands(op):
        t = v.type
        assert isinstance(t, RegionType)  # `ins` and `outs` are RegionType operands
        if s.binds is not None and t.typed:
            bindings.setdefault(s.binds, []).append(
                OperandInfo(
                    t.elem_name, t.quant_desc is not None, s.dir == "in", partial(value_label, v)
                )
            )
    return bindings


def accum_of(op: ComputeOp) -> str | None:
    accum = op.attrs.data.get("accum_type")
    return elem_name(accum) if accum is not None else None


def match_families(
    op: ComputeOp, catalog: Catalog, allowed: frozenset[VariantRef] | set[VariantRef] | None = None
) -> MatchResult:
    """Match `op` against its opcode's families (restricted to `allowed`).

    An omitted `accum_type` whose registry default is `family_accum` takes
    the accum of the family being matched (TYPE-06: written *or defaulted*),
    so it never counts as a mismatch; the best of those matches is returned.
    """
    return _match_bindings(op.SPEC, family_bindings(op), accum_of(op), catalog, allowed)


def match_operand_types(
    spec: OpcodeSpec,
    ins: Sequence[Attribute],
    outs: Sequence[Attribute],
    accum: str | None,
    catalog: Catalog,
    allowed: frozenset[VariantRef] | None = None,
) -> MatchResult:
    """`match_families` for an instance of `spec` not built yet, whose
    inputs and outputs are unquantized typed regions of the element types
    `ins` and `outs` (`f32`, ...) and whose `accum_type` is `accum` (None:
    omitted): the families match on nothing else of a region (a lowering
    asks before it builds a task, D-LOW-OUTLINE)."""
    bindings: dict[str, list[OperandInfo]] = {}
    for s, elem in bind(spec, ins, outs):
        if s.binds is not None:
            bindings.setdefault(s.binds, []).append(
                OperandInfo(elem_name(elem), False, s.dir == "in", partial(str, s.name))
            )
    return _match_bindings(spec, bindings, accum, catalog, allowed)


def _match_bindings(
    spec: OpcodeSpec,
    bindings: dict[str, list[OperandInfo]],
    accum: str | None,
    catalog: Catalog,
    allowed: frozenset[VariantRef] | set[VariantRef] | None,
) -> MatchResult:
    aspec = spec.attributes.get("accum_type")
    if accum is not None or aspec is None or aspec.default != "family_accum":
        return catalog.match(spec.families, bindings, accum, allowed)
    defaults: list[str | None] = []
    for fid in spec.families:
        fam = catalog.families.get(fid)
        a = fam.accum if fam is not None else None
        if a not in defaults:
            defaults.append(a)
    results = [catalog.match(spec.families, bindings, a, allowed) for a in defaults or [None]]
    return min(
        results,
        key=lambda r: (not r.ok, any("accum" in d for d in r.differences), len(r.differences)),
    )
