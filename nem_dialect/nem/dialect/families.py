"""The type-family catalog and the opcode type matcher (FAM-01/02, QUANT-07..10).

The catalog is built from parsed `type_family` declarations (the normative
source is devices/nem/devices/nem_baseline_1.0.nem).  Every conformance entry is expanded
once into a concrete `_Candidate` (operand binding -> element type, accum,
quant rule), so matching an opcode instance is a few dict look-ups per
candidate and results are memoised by the instance's type signature: the
matcher runs once per compute op in programs with tens of thousands of tasks.

Quantization rules as implemented (decision D-QUANT-REQ):
* `quant = required`: every *input* operand must carry a quant descriptor,
  except a bias binding, i.e. a binding the variant block fixes to `i32`
  (QUANT-07, QUANT-08; for int4 families this also requires it on the i8
  activation, which the appendix's "quant = required" says literally).
  Outputs may carry quant but need not.
* `quant = required on X`: the operands bound to X must carry quant (QUANT-10).
* `quant = absent`: no operand, input or output, may carry quant (QUANT-09).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

from nem.dialect.elements import ELEM_TYPES as ELEM_TABLE
from nem.dialect.family_model import ABSENT, ANY_SUPPORTED, ELEM_TYPES, MUST, TypeFamily, VariantRef


class OperandInfo(NamedTuple):
    """What the matcher needs to know about one operand of an opcode instance.

    The operand's name for diagnostics comes from `label`, called only when
    a difference is reported: the static verifier and the device check both
    match every compute op, nearly always successfully, so naming each
    operand up front was a tenth of their time on large programs."""

    elem: str | None  # None: not an element type of the spec
    has_quant: bool
    is_input: bool
    label: Callable[[], str]

    @property
    def name(self) -> str:
        return self.label()


@dataclass
class MatchResult:
    """Matching variants; on failure the nearest variant and what differs."""

    matched: list[VariantRef]
    nearest: VariantRef | None = None
    differences: list[str] = field(default_factory=list)
    unavailable: list[VariantRef] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.matched)


@dataclass(frozen=True)
class _Candidate:
    ref: VariantRef
    cls: str
    types: dict[str, str]  # binding -> elem | ABSENT | ANY_SUPPORTED
    accum: str | None
    quant: str | None  # "required" | "absent" | None
    quant_on: frozenset[str]  # bindings that must carry quant
    bias: frozenset[str]  # bindings exempt from `quant = required`


_Signature = tuple[tuple[str, tuple[tuple[str | None, bool, bool], ...]], ...]
"""What `Catalog.match` depends on in its bindings: (name, (elem, has_quant,
is_input) per operand) for every bound name, sorted."""

_MatchHit = tuple[tuple["VariantRef", ...], tuple["VariantRef", ...], "_Candidate | None"]
"""`Catalog._match`'s result: matched refs, unavailable refs, nearest candidate."""


class Catalog:
    """All type families in scope, indexed for conformance queries and matching."""

    def __init__(self, families: Iterable[TypeFamily]):
        self.families: dict[str, TypeFamily] = {f.id: f for f in families}
        self._candidates: dict[str, tuple[_Candidate, ...]] = {
            fid: tuple(_expand(f)) for fid, f in self.families.items()
        }
        self._classes: dict[VariantRef, str] = {
            c.ref: c.cls for cands in self._candidates.values() for c in cands
        }
        self._memo: dict[
            tuple[tuple[str, ...], _Signature, str | None, frozenset[VariantRef] | None], _MatchHit
        ] = {}

    def all_variant_refs(self) -> tuple[VariantRef, ...]:
        return tuple(self._classes)

    def must_refs(self) -> tuple[VariantRef, ...]:
        return tuple(r for r, c in self._classes.items() if c == MUST)

    def conformance(self, ref: VariantRef) -> str | None:
        """ "MUST", "MAY", or None when the catalog does not define `ref`."""
        return self._classes.get(ref)

    def ref_problem(self, ref: VariantRef) -> str | None:
        """Why `ref` names no catalog instantiation (for DEV-10), or None if it does."""
        fam = self.families.get(ref.family)
        if fam is None:
            return f"no type family '{ref.family}' is in scope"
        variant = fam.variant(ref.variant)
        if variant is None:
            names = ", ".join(v.name for v in fam.variants)
            return f"type family {fam.id} has no variant '{ref.variant}' (it has {names})"
        if len(ref.inst) != len(fam.params):
            return (
                f"{fam.id} takes {len(fam.params)} type argument(s), "
                f"the reference gives {len(ref.inst)}"
            )
        if ref in self._classes:
            return None
        listed = " ".join(f"{c} <{', '.join(i)}>" if i else c for c, i in variant.conformance)
        return f"{ref} has no conformance class; {fam.id}.{variant.name} lists only {listed}"

    # -- matching -------------------------------------------------------------
    def match(
        self,
        family_ids: Iterable[str],
        bindings: dict[str, list[OperandInfo]],
        accum: str | None,
        allowed: frozenset[VariantRef] | set[VariantRef] | None = None,
    ) -> MatchResult:
        """Match one opcode instance against the families governing its opcode.

        `bindings` maps a family binding name to the operands bound there (a
        missing name means the operand is absent); `allowed`, when given,
        restricts matches to a device's effective set.  On failure `nearest`
        is the allowed candidate with the fewest differences (ties: the
        closest element types, `_type_distance`, then MUST before MAY, then
        catalog order), and `unavailable` lists catalog
        variants the instance does match but the device does not offer.
        """
        family_ids = tuple(family_ids)
        if allowed is not None and not isinstance(allowed, frozenset):
            allowed = frozenset(allowed)
        signature: _Signature = tuple(
            sorted(
                (k, tuple((o.elem, o.has_quant, o.is_input) for o in v))
                for k, v in bindings.items()
                if v
            )
        )
        key = (family_ids, signature, accum, allowed)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._match(family_ids, bindings, accum, allowed)
        matched, unavailable, nearest = hit
        if matched:
            return MatchResult(list(matched))
        # (only a device's `allowed` set makes a candidate unavailable): the
        # instance matches variants the device lacks, and no offered variant
        # is near, so there is no nearest *available* variant to name
        if unavailable and allowed is not None and (nearest is None or nearest.ref not in allowed):
            return MatchResult(
                [],
                None,
                [
                    f"{unavailable[0]} is not in the target device's effective set "
                    "(opcode.mandatory / opcode.extended)"
                ],
                list(unavailable),
            )
        if nearest is None:
            return MatchResult([], None, [f"no type family of {', '.join(family_ids)} is in scope"])
        return MatchResult(
            [], nearest.ref, _differences(nearest, bindings, accum), list(unavailable)
        )

    def _match(
        self,
        family_ids: tuple[str, ...],
        bindings: dict[str, list[OperandInfo]],
        accum: str | None,
        allowed: frozenset[VariantRef] | None,
    ) -> _MatchHit:
        matched: list[VariantRef] = []
        unavailable: list[VariantRef] = []
        best: _Candidate | None = None
        best_score: tuple[bool, int, int, bool] | None = None
        for fid in family_ids:
            for cand in self._candidates.get(fid, ()):
                n = len(_differences(cand, bindings, accum))
                offered = allowed is None or cand.ref in allowed
                if n == 0:
                    (matched if offered else unavailable).append(cand.ref)
                    continue
                score = (not offered, n, _type_distance(cand, bindings), cand.cls != MUST)
                if best_score is None or score < best_score:
                    best, best_score = cand, score
        return tuple(matched), tuple(unavailable), (None if matched else best)


def _expand(fam: TypeFamily) -> Iterable[_Candidate]:
    """One concrete candidate per (variant, conformance entry) of a family."""
    pnames = [p for p, _ in fam.params]
    for variant in fam.variants:
        raw = dict(fam.operands)
        raw.update(variant.bindings)
        bias = frozenset(b for b, t in variant.bindings if t == "i32")
        for cls, inst in variant.conformance:
            subst = dict(zip(pnames, inst))
            types = {b: subst.get(t, t) for b, t in raw.items()}
            yield _Candidate(
                VariantRef(fam.id, inst, variant.name),
                cls,
                types,
                fam.accum,
                fam.quant,
                frozenset(fam.quant_required_on),
                bias,
            )


def _type_distance(cand: _Candidate, bindings: dict[str, list[OperandInfo]]) -> int:
    """How far the operands' element types are from the candidate's: per
    operand, 0 for the same type, else 1 + 2 if the kind differs (float
    against integer) + 1 if the width does.  An f32 add on a device with
    f16 and i8 variants is nearest to f16, not to whichever comes first
    (D-FAM-NEAREST)."""
    total = 0
    for name, want in cand.types.items():
        w = ELEM_TABLE.get(want)
        for op in bindings.get(name) or ():
            have = ELEM_TABLE.get(op.elem) if op.elem is not None else None
            if w is None or have is None or have is w:
                continue
            total += 1 + 2 * (have.is_float != w.is_float) + (have.bits != w.bits)
    return total


def _who(name: str, ops: list[OperandInfo]) -> str:
    return f"operand '{name}' ({', '.join(o.name for o in ops)})"


def _differences(
    cand: _Candidate, bindings: dict[str, list[OperandInfo]], accum: str | None
) -> list[str]:
    """Human-readable reasons why an instance does not match `cand` (empty = match)."""
    diffs: list[str] = []
    for name, want in cand.types.items():
        ops = bindings.get(name) or []
        if want == ABSENT:
            if ops:
                diffs.append(f"{_who(name, ops)} is given but {cand.ref} has no '{name}'")
            continue
        if not ops:
            diffs.append(f"operand '{name}' is missing but {cand.ref} needs it")
            continue
        for op in ops:
            if want == ANY_SUPPORTED:
                if op.elem not in ELEM_TYPES:
                    diffs.append(f"{_who(name, [op])} has unsupported elem {op.elem}")
            elif op.elem != want:
                diffs.append(f"{_who(name, [op])} has elem {op.elem} but the variant needs {want}")
    for name, ops in bindings.items():
        if ops and name not in cand.types:
            diffs.append(f"{_who(name, ops)} is not allowed by {cand.ref}")
    if cand.accum is not None and accum != cand.accum:
        have = f"accum_type is {accum}" if accum else "accum_type is missing"
        diffs.append(f"{have} but the family needs {cand.accum}")
    diffs.extend(_quant_differences(cand, bindings))
    return diffs


def _quant_differences(cand: _Candidate, bindings: dict[str, list[OperandInfo]]) -> list[str]:
    diffs = []
    for name, ops in bindings.items():
        if name not in cand.types:
            continue
        for op in ops:
            if cand.quant == ABSENT and op.has_quant:
                diffs.append(
                    f"{_who(name, [op])} carries a quant descriptor but "
                    f"{cand.ref.family} requires quant = absent"
                )
            elif not op.has_quant and (
                name in cand.quant_on
                or (
                    cand.quant == "required"
                    and not cand.quant_on
                    and op.is_input
                    and name not in cand.bias
                )
            ):
                diffs.append(f"{_who(name, [op])} must carry a quant descriptor")
    return diffs
