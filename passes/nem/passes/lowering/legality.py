"""Whether a task has a variant on the target (D-LOW-OUTLINE's legality
half): an analysis of its own, asked with an opcode and the element types of
its operands, before or without building the task.

The type families (and a device's effective set of them) match a compute
task on its opcode, the element type of each operand's region (and whether
it is quantized: the lowering builds no quantized region) and its
`accum_type` (`operand_binding.match_operand_types`); a region's shape,
layout and strides, the task's other attributes and arguments do not count.
So the question can be put from the memref types a plan reads and writes,
ahead of the conversion, and the conversion's candidate tasks
(`staging.illegal`) put it the same way: one answer for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from xdsl.ir import Attribute

from nem.dialect.attributes import elem_name
from nem.dialect.operand_binding import match_operand_types
from nem.dialect.registry import lookup

if TYPE_CHECKING:
    from nem.dialect.device_model import Device
    from nem.dialect.families import Catalog
    from nem.dialect.family_model import VariantRef


class TaskLegality:
    """The answers for one target: the baseline's type families (`device`
    None) or `device`'s effective set (named `device_name` in reasons).
    Answers are kept per (opcode, element types, accum): a run asks the
    same few questions for every nest, and they are as many as the distinct
    signatures of its tasks, so the memo is bounded by the program's types."""

    def __init__(self, catalog: Catalog, device: Device | None, device_name: str | None) -> None:
        self.catalog = catalog
        self.device = device
        self.where = f"device {device_name}" if device is not None else "the NEM baseline"
        self._answers: dict[tuple[object, ...], str | None] = {}
        self._effective: dict[tuple[str, ...], frozenset[VariantRef] | None] = {}

    def why_not(
        self,
        opcode: str,
        ins: Sequence[Attribute],
        outs: Sequence[Attribute],
        accum: Attribute | None = None,
    ) -> str | None:
        """None when a task `opcode` whose input and output regions hold
        the element types `ins` and `outs`, with `accum_type` `accum`,
        matches a variant of its families on the target; else why not
        (`no conv2d variant for f32 on device npm_mid`, the remark's text)."""
        key = (opcode, tuple(ins), tuple(outs), accum)
        if key in self._answers:
            return self._answers[key]
        spec = lookup(opcode)
        assert spec is not None, f"the lowering builds only registry opcodes, not {opcode}"
        effective = self._effective.get(spec.families)
        if spec.families not in self._effective:
            effective = self._effective[spec.families] = (
                None if self.device is None else self.device.effective_for_family(spec.families)
            )
        accum_name = elem_name(accum) if accum is not None else None
        why = None
        if not match_operand_types(spec, ins, outs, accum_name, self.catalog, effective).ok:
            elems = "/".join(sorted({str(elem_name(e)) for e in (*ins, *outs)}))
            why = f"no {opcode} variant for {elems} on {self.where}"
        self._answers[key] = why
        return why
