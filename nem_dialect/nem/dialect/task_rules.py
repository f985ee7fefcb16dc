"""Static rules of tasks: transfers and stores (overlap, extents, types),
compute operands, attributes and type families (FAM-*), placement and access
intent: one rule group of `nem.dialect.verifier.ProgramVerifier`."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, cast

from xdsl.dialects.builtin import ArrayAttr, FloatAttr, StringAttr
from xdsl.ir import Attribute, OpResult, SSAValue

from nem.dialect.attributes import (
    DYNAMIC,
    ArgRefAttr,
    RegionType,
    SeqEngineAttr,
    elem_name,
)
from nem.dialect.expressions import ExprError
from nem.dialect.family_rules import family_rule
from nem.dialect.iteration_space import (
    MAX_POINTS,
    Form,
    Inexact,
    combine,
    vector_eval,
    witness,
)
from nem.dialect.operand_binding import bind_operands, match_families, value_label
from nem.dialect.ops import (
    ComputeOp,
    LoopOp,
    RegionOp,
    StoreOp,
    TaskOp,
    TransferOp,
)
from nem.dialect.point_checks import (
    Box,
    Chunk,
    EnvCheck,
    PointChecks,
    iteration_text,
)
from nem.dialect.registry import OpcodeSpec
from nem.dialect.semantics.transfers import fills_range
from nem.dialect.shape_rules import check_shapes

if TYPE_CHECKING:
    import numpy as np

IN_PLACE_CATEGORIES = frozenset(
    {"elementwise", "conversion", "normalization", "softmax", "generic"}
)
"""Registry categories whose tasks may write an output over an input that is
the very same region (D-HAZ-INPLACE): each output element is computed from
input elements of the same index, or of the same row read whole first
(normalization, softmax), or by an escape-hatch kernel whose MLIR text gives
the aliasing its meaning (generic).  Other opcodes may do so on an operand of
role `bias` only (gemm's and matmul's C: `Y = A @ B + Y`, MLIR's
accumulating matmul)."""


def _names(out: SSAValue, inp: SSAValue) -> str:
    """How an aliasing diagnostic names an output and an input (only on an
    error: the labels are looked up)."""
    return f"output {value_label(out)} and input {value_label(inp)}"


def _elements(value: SSAValue) -> tuple[object, ...] | None:
    """Which elements region `value` addresses, relative to its offset: its
    element type, shape and strides (a layout id is dense row-major:
    D-LAYOUT); None when a shape or stride is not static."""
    rtype = value.type
    assert isinstance(rtype, RegionType)
    shape, strides = rtype.shape_values, rtype.stride_values
    if shape is None or DYNAMIC in shape or (strides is not None and DYNAMIC in strides):
        return None
    if strides is None:
        strides = tuple(math.prod(shape[k + 1 :]) for k in range(len(shape)))
    return rtype.elem_name, shape, strides


MAX_ENUMERATED_ELEMENTS = 1 << 20
"""Outputs with interleaved strides up to this many elements have their
addresses enumerated (D-HAZ-INPLACE); larger ones must be nested."""


def _two_indices_one_element(shape: tuple[int, ...], strides: tuple[int, ...]) -> str | None:
    """Why a region of `shape` and `strides` (in elements) addresses one
    element twice (two such indices), or None when every index has its own.
    Nested strides (each larger than the span of the smaller ones) are
    one-to-one; others are enumerated up to MAX_ENUMERATED_ELEMENTS, beyond
    which they are reported as not shown one-to-one."""
    dims = sorted((abs(st), n, k) for k, (st, n) in enumerate(zip(strides, shape)) if n > 1)
    span = 0
    for st, n, _ in dims:
        if st <= span:
            break
        span += (n - 1) * st
    else:
        return None
    if math.prod(shape) > MAX_ENUMERATED_ELEMENTS:
        return (
            f"strides that are not nested, over more than {MAX_ENUMERATED_ELEMENTS} "
            "elements, are not checked one-to-one"
        )
    import numpy as np  # (not at start-up: most strides are nested)

    grid = np.indices(shape).reshape(len(shape), -1)
    addr = np.asarray(strides, dtype=np.int64) @ grid
    order = np.argsort(addr, kind="stable")
    same = np.nonzero(addr[order][1:] == addr[order][:-1])[0]
    if same.size == 0:
        return None
    k = int(same[0])
    return (
        f"indices {grid[:, order[k]].tolist()} and {grid[:, order[k + 1]].tolist()} are one element"
    )


class TaskRules(PointChecks):
    """Transfer, store and compute tasks."""

    def _move(self, op: TransferOp | StoreOp, loops: tuple[LoopOp, ...]) -> None:
        (d_value,), (s_value,), _ = self.groups(op)
        dst, src = d_value.type, s_value.type
        assert isinstance(dst, RegionType) and isinstance(src, RegionType)  # operand types
        kw = "transfer" if isinstance(op, TransferOp) else "store"
        if dst.typed and src.typed:
            if dst.elem != src.elem:
                # no implicit conversion anywhere (TYPE-03); TASK-07 is the
                # transfer-specific restatement, TYPE-03 names the fix
                return self.err(
                    op,
                    "TYPE-03",
                    f"{kw} from {src.elem_name} to {dst.elem_name} "
                    "would convert element types implicitly",
                    "transfers do not convert; use an explicit cast task",
                )
            ds, ss = dst.shape_values, src.shape_values  # typed: shaped (GRAM-08)
            if (
                ds is not None
                and ss is not None
                and DYNAMIC not in ds + ss
                and math.prod(ds) != math.prod(ss)
            ):
                return self.err(
                    op,
                    "TASK-07",
                    f"{kw} moves {math.prod(ss)} elements into a region of {math.prod(ds)}",
                    "make the element counts equal",
                )
        d_op, s_op = d_value.owner, s_value.owner
        # region values have one source, the `nem.region` op
        assert isinstance(d_op, RegionOp) and isinstance(s_op, RegionOp)
        if dst.typed != src.typed:
            typed_op, typed = (d_op, dst) if dst.typed else (s_op, src)
            if not self._fills(op, loops, kw, typed_op, typed):
                return None
        # operands read once: xDSL's operand accessors cost more than an evaluation
        (d_buffer,), (d_offset,), (d_extent,), _, _ = self.groups(d_op)
        (s_buffer,), (s_offset,), (s_extent,), _, _ = self.groups(s_op)
        same_buffer = (
            isinstance(op, TransferOp)
            and d_buffer == s_buffer
            and not any(dd.DECO_NAME == "memmove" for dd in op.decorator_list())
        )
        # TASK-07: the extent comparison is for untyped regions; typed ones
        # compare element counts above (a strided source spans more bytes)
        compare_extents = not (dst.typed and src.typed)
        if not compare_extents and not same_buffer:
            return None
        buffer = d_op.buffer_decl.buffer_name.data

        def overlap(s_lo: int, s_hi: int, d_lo: int, d_hi: int) -> tuple[str, str]:
            return (
                f"transfer source and destination overlap (bytes [{s_lo}, {s_hi}) and "
                f"[{d_lo}, {d_hi}) of '{buffer}')",
                "add @memmove or use disjoint regions",
            )

        self._extents_and_overlap(
            op,
            loops,
            kw,
            (d_extent, s_extent, d_offset, s_offset),
            compare_extents,
            same_buffer,
            overlap,
        )

    def _fills(
        self, op: TaskOp, loops: tuple[LoopOp, ...], kw: str, rop: RegionOp, rtype: RegionType
    ) -> bool:
        """TASK-07 for a typed region facing an untyped one: its elements are
        its whole byte range in every iteration (`semantics.fills_range`,
        D-SEM-TRANSFER), so both sides are byte ranges."""
        elem = rtype.elem_name
        assert elem is not None
        _, _, (extent,), shape, strides = self.groups(rop)
        values = (extent, *shape, *strides)
        loops = self.relevant_loops(loops, values)
        diags_before = len(self.diags)

        def check(env: dict[SSAValue, int]) -> bool:
            vals = [x for x in (self.ev.eval(v, env) for v in values) if x is not None]
            if len(vals) < len(values):
                return True  # what cannot be evaluated is another rule's (CONST-05)
            ext, dims = vals[0], vals[1 : 1 + len(shape)]
            steps = vals[1 + len(shape) :] or None
            if fills_range(elem, dims, steps, ext):
                return True
            self.err(
                op,
                "TASK-07",
                f"{kw} between a typed and an untyped region: the typed "
                f"one ({elem}, shape {dims}{f', strides {steps}' if steps else ''}, "
                f"{ext} bytes) is not dense, so which of its bytes move is "
                f"ambiguous{iteration_text(loops, env)}",
                "type both regions (elements move), or make the typed one dense "
                "(row-major, extent exactly its elements' bytes) (D-SEM-TRANSFER)",
            )
            return False

        self.each_point(
            op, loops, check, lambda chunk, n: _ones(n), f"the typed side of this {kw}", "TASK-07"
        )
        return len(self.diags) == diags_before

    def _extents_and_overlap(
        self,
        op: TaskOp,
        loops: tuple[LoopOp, ...],
        kw: str,
        exprs: tuple[SSAValue, SSAValue, SSAValue, SSAValue],
        compare_extents: bool,
        same_buffer: bool,
        overlap: Callable[[int, int, int, int], tuple[str, str]],
        same_ok: bool = False,
    ) -> None:
        """For every iteration: the destination extent is at least the
        source's (TASK-07, when `compare_extents`), and the two byte ranges
        of one buffer are disjoint (HAZ-02 when `same_buffer`; `overlap`
        gives the message and fix from the two ranges), or, when `same_ok`,
        the same range (an in-place compute, D-HAZ-INPLACE).  `exprs`: the
        destination's extent, the source's, the destination's offset, the
        source's."""
        d_extent, s_extent, d_offset, s_offset = exprs
        # what follows reads the four expressions and the two flags only: a
        # pass is not repeated for another move of the loop body with equal
        # ones (D-VERIFY-REPEAT)
        repeat = self.check_key(
            loops, (d_extent, s_extent, d_offset, s_offset), compare_extents, same_buffer, same_ok
        )
        if self.passed_before(repeat):
            return None
        diags_before = len(self.diags)
        loops = self.relevant_loops(loops, (d_extent, s_extent, d_offset, s_offset))

        def check(env: dict[SSAValue, int]) -> bool:
            d_ext, s_ext = self.ev.eval(d_extent, env), self.ev.eval(s_extent, env)
            if d_ext is not None and s_ext is not None and d_ext < s_ext and compare_extents:
                self.err(
                    op,
                    "TASK-07",
                    f"{kw} copies {s_ext} bytes into a {d_ext}-byte "
                    f"region{iteration_text(loops, env)}",
                    "the destination extent must be at least the source extent",
                )
                return False
            if same_buffer:
                d_off, s_off = self.ev.eval(d_offset, env), self.ev.eval(s_offset, env)
                if (
                    d_off is not None
                    and s_off is not None
                    and d_ext is not None
                    and s_ext is not None
                    and d_off < s_off + s_ext
                    and s_off < d_off + d_ext
                    and not (same_ok and d_off == s_off and d_ext == s_ext)
                ):
                    message, fix = overlap(s_off, s_off + s_ext, d_off, d_off + d_ext)
                    self.err(op, "HAZ-02", f"{message}{iteration_text(loops, env)}", fix)
                    return False
            return True

        if not loops:
            check({})
            return self.record_pass(repeat, diags_before)
        proof = self.box_forms(loops, (d_extent, s_extent, d_offset, s_offset))
        if proof is not None and self._move_proven(
            proof[1], proof[0], compare_extents, same_buffer, check
        ):
            return self.record_pass(repeat, diags_before)

        def suspects(chunk: Chunk, n: int) -> np.ndarray | None:
            import numpy as np

            d_ext, s_ext = (
                vector_eval(self.ev, d_extent, chunk, n),
                vector_eval(self.ev, s_extent, chunk, n),
            )
            if d_ext is None or s_ext is None:
                return None
            bad = d_ext < s_ext if compare_extents else np.zeros(n, dtype=bool)
            if same_buffer:
                d_off, s_off = (
                    vector_eval(self.ev, d_offset, chunk, n),
                    vector_eval(self.ev, s_offset, chunk, n),
                )
                if d_off is not None and s_off is not None:
                    _small(d_off, s_off, d_ext, s_ext)
                    over = (d_off < s_off + s_ext) & (s_off < d_off + d_ext)
                    if same_ok:
                        over &= (d_off != s_off) | (d_ext != s_ext)
                    bad |= over
            return bad

        self.each_point(
            op,
            loops,
            check,
            suspects,
            f"the extents and overlap of this {kw}",
            "HAZ-02" if same_buffer else "TASK-07",
        )
        return self.record_pass(repeat, diags_before)

    def _move_proven(
        self, f: list[Form], box: Box, compare_extents: bool, same_buffer: bool, check: EnvCheck
    ) -> bool:
        """Decide TASK-07 and HAZ-02 from value intervals over the box of loop
        bounds (see `_region_proven`): True when proven for every iteration, or
        when an affine TASK-07 violation is reported at its corner of a box too
        large to enumerate."""
        d_ext, s_ext, d_off, s_off = f
        if not all(x.fits for x in f):
            return False
        slack = combine("-", d_ext, s_ext, box)
        extents_ok = not compare_extents or (slack.interval is not None and slack.interval[0] >= 0)
        apart = True
        if same_buffer:
            gaps = (
                combine("-", combine("-", d_off, s_off, box), s_ext, box),
                combine("-", combine("-", s_off, d_off, box), d_ext, box),
            )
            apart = any(g.interval is not None and g.interval[0] >= 0 for g in gaps)
        if extents_ok and apart:
            return True
        n = 1
        for lo, hi in box.values():
            n *= hi - lo + 1
        if n > MAX_POINTS and not extents_ok and slack.affine is not None:
            check(witness(slack, box, minimize=True))
            return True
        return False

    def _compute_aliasing(self, op: ComputeOp, loops: tuple[LoopOp, ...]) -> None:
        """D-HAZ-INPLACE: an output may be one of the inputs (the same buffer,
        offset, extent and region type: in place) only for an elementwise
        opcode, where each output element depends on the input elements of
        the same index; any other common byte of an input and an output of one
        compute task is HAZ-02, as for a transfer, at every iteration.  An
        output with a zero stride on a dimension of more than one element
        writes several results to one element (TYPE-04's strides count
        elements; which write wins is undefined): an error too."""
        _, outs, _, _ = self.groups(op)
        by_index = op.SPEC.category in IN_PLACE_CATEGORIES
        # (whether each input is read at its output element's index)
        ins = [(v, by_index or s.role == "bias") for s, v in bind_operands(op) if s.dir == "in"]
        for out in outs:
            self._self_overlapping_output(op, out)
            o_op = out.owner
            assert isinstance(o_op, RegionOp)  # region values have one source
            (o_buffer,), (o_offset,), (o_extent,), _, _ = self.groups(o_op)
            for inp, elementwise in ins:
                i_op = inp.owner
                assert isinstance(i_op, RegionOp)
                (i_buffer,), (i_offset,), (i_extent,), _, _ = self.groups(i_op)
                if i_buffer != o_buffer:
                    continue
                try:
                    same = inp is out or (
                        self._elements_of(inp) == self._elements_of(out) is not None
                        and self.ev.key(i_offset) == self.ev.key(o_offset)
                        and self.ev.key(i_extent) == self.ev.key(o_extent)
                    )
                except ExprError:
                    continue  # reported by the region rules (CONST-05)
                if same:
                    if not elementwise:
                        only = (
                            "may do only on its bias (accumulator) operand"
                            if any(s.role == "bias" for s in op.SPEC.inputs)
                            else "may not do"
                        )
                        self.err(
                            op,
                            "HAZ-02",
                            f"{op.opcode} computes in place ({_names(out, inp)} are "
                            f"the same region), which a {op.SPEC.category} opcode {only}",
                            "write the output to a region of its own (decision D-HAZ-INPLACE)",
                        )
                    continue
                why = (
                    "without being the same region"
                    if elementwise
                    else f"(a {op.SPEC.category} opcode may not write over its input)"
                )

                def overlap(
                    s_lo: int,
                    s_hi: int,
                    d_lo: int,
                    d_hi: int,
                    out: SSAValue = out,
                    inp: SSAValue = inp,
                    o_op: RegionOp = o_op,
                    why: str = why,
                ) -> tuple[str, str]:
                    return (
                        f"{op.opcode}'s {_names(out, inp)} overlap (bytes [{d_lo}, {d_hi}) and "
                        f"[{s_lo}, {s_hi}) of '{o_op.buffer_decl.buffer_name.data}') {why}",
                        "use disjoint regions, or the very same region for an elementwise "
                        "opcode (decision D-HAZ-INPLACE)",
                    )

                self._extents_and_overlap(
                    op,
                    loops,
                    op.opcode,
                    (o_extent, i_extent, o_offset, i_offset),
                    False,
                    True,
                    overlap,
                    elementwise and self._elements_of(inp) == self._elements_of(out),
                )

    @cached_property
    def _elements_memo(self) -> dict[int, tuple[RegionType, tuple[object, ...] | None]]:
        """`_elements` of each region type, by its identity (the entry keeps the type)."""
        return {}

    def _elements_of(self, value: SSAValue) -> tuple[object, ...] | None:
        """`_elements(value)`, decided once per region type (it reads the type only)."""
        rtype = cast(RegionType, value.type)
        memo = self._elements_memo
        hit = memo.get(id(rtype))
        if hit is None:
            hit = memo[id(rtype)] = (rtype, _elements(value))
        return hit[1]

    def _self_overlapping_output(self, op: ComputeOp, out: SSAValue) -> None:
        rtype = out.type
        assert isinstance(rtype, RegionType)
        strides, shape = rtype.stride_values, rtype.shape_values
        if strides is None or shape is None or DYNAMIC in strides or DYNAMIC in shape:
            return
        why = _two_indices_one_element(shape, strides)
        if why is not None:
            self.err(
                op,
                "HAZ-02",
                f"{op.opcode}'s output {value_label(out)} (shape {list(shape)}, "
                f"strides {list(strides)}) would write results over each other: {why}",
                "give the output strides that address each element once, e.g. its layout "
                "(decision D-HAZ-INPLACE)",
            )

    @cached_property
    def _computes_passed(self) -> set[tuple[object, ...]]:
        """Keys (`_compute_key`) of compute tasks whose rules all passed."""
        return set()

    def _compute(self, op: ComputeOp) -> None:
        """The compute rules, once per distinct signature: a task whose
        opcode, operand types, attribute entry and argument values equal
        those of a task that passed passes too (D-VERIFY-REPEAT)."""
        key = self._compute_key(op)
        passed = self._computes_passed
        if key is not None and key in passed:
            return
        diags_before = len(self.diags)
        self._compute_rules(op)
        if key is not None and len(self.diags) == diags_before:
            passed.add(key)

    def _compute_key(self, op: ComputeOp) -> tuple[object, ...] | None:
        """Everything `_compute_rules` reads of `op`: its class (the opcode),
        the types of its inputs and of its outputs, its attributes and the
        values of its integer arguments (structural keys: `shape_rules`
        reads them through the evaluator).  Types and the attribute entry by
        identity: the IR holds them alive while it is verified, and the
        bytecode reader shares equal ones (an unshared equal one only misses
        the cache).  None when an argument raises ExprError."""
        ins, outs, _, args = self.groups(op)
        try:
            arg_keys = tuple(map(self.ev.key, args))
        except ExprError:
            return None
        return (
            type(op),
            tuple(id(v.type) for v in ins),
            tuple(id(v.type) for v in outs),
            id(op.attrs),
            arg_keys,
        )

    def _compute_rules(self, op: ComputeOp) -> None:
        spec = op.SPEC
        if not self._operand_counts(op, spec):
            return
        if not self._attributes(op, spec):
            return
        operands = bind_operands(op)
        for ospec, value in operands:
            rtype = value.type
            assert isinstance(rtype, RegionType)  # `ins` and `outs` are RegionType operands
            if not rtype.typed:
                return self.err(
                    op,
                    "REG-03",
                    f"{spec.name} operand '{ospec.name}' "
                    f"({value_label(value)}) has no elem/shape/layout",
                    "compute operands need elem=, shape= and layout= or strides=",
                )
            if ospec.elem is not None and rtype.elem_name not in ospec.elem:
                rule = "FAM-27" if spec.name in ("argmax", "argmin") else "FAM-01"
                return self.err(
                    op,
                    rule,
                    f"{spec.name} operand '{ospec.name}' has elem {rtype.elem_name}",
                    f"use one of {', '.join(ospec.elem)} (decision D-ARGMAX-INDEX)",
                )
        if spec.families:
            self._families(op, spec)

        for rule, message, fix in check_shapes(op, self.ev):
            self.err(op, rule, message, fix)

    def _operand_counts(self, op: ComputeOp, spec: OpcodeSpec) -> bool:
        for side, values, specs in (
            ("inputs", op.ins, spec.inputs),
            ("outputs", op.outs, spec.outputs),
        ):
            required = sum(1 for s in specs if s.required)
            variadic = any(s.variadic for s in specs)
            if len(values) < required or (not variadic and len(values) > len(specs)):
                self.err(
                    op,
                    "TASK-12",
                    f"{spec.name} takes {spec.signature()} but got {len(values)} {side}",
                    f"write {spec.name}.async {spec.signature()}",
                )
                return False
        return True

    def _attributes(self, op: ComputeOp, spec: OpcodeSpec) -> bool:
        given = op.attrs.data
        ok = True
        for name, a in spec.attributes.items():
            if a.required and name not in given:
                self.err(
                    op, "TASK-13", f"{spec.name} needs attribute '{name}'", f"add {name}=<{a.type}>"
                )
                ok = False
        if not spec.open_attributes:
            for name in given:
                if name not in spec.attributes:
                    known = ", ".join(spec.attributes) or "none"
                    self.err(
                        op,
                        "TASK-13",
                        f"{spec.name} has no attribute '{name}'",
                        f"its attributes are: {known}",
                    )
                    ok = False
        for name, value in given.items():
            aspec = spec.attributes.get(name)
            if aspec is not None and not _attr_has_type(value, aspec.type):
                self.err(
                    op,
                    "TASK-13",
                    f"attribute '{name}' of {spec.name} must be {aspec.type}",
                    f"write {name}=<{aspec.type}>",
                )
                ok = False
            elif (
                aspec is not None
                and aspec.values is not None
                and isinstance(value, StringAttr)
                and value.data not in aspec.values
            ):
                allowed = ", ".join(f'"{v}"' for v in aspec.values)
                self.err(
                    op,
                    "TASK-13",
                    f"attribute '{name}' of {spec.name} is \"{value.data}\", not one of {allowed}",
                    f"write {name}={allowed.split(', ')[0]}",
                )
                ok = False
        return ok

    def _families(self, op: ComputeOp, spec: OpcodeSpec) -> bool:
        result = match_families(op, self.catalog)
        if result.ok:
            return True
        rule = family_rule(spec.name, result.nearest, result.differences)
        near = (
            f"; nearest variant {result.nearest}: " + "; ".join(result.differences)
            if result.nearest
            else ""
        )
        self.err(
            op,
            rule,
            f"{spec.name} matches no type-family variant of {', '.join(spec.families)}{near}",
            "change the operand types/quant/accum_type to match a variant, or insert a cast",
        )
        return False

    @cached_property
    def _task_signatures_passed(self) -> set[tuple[object, ...]]:
        """Signatures (`_task_signature`) of tasks whose placement and
        access-intent rules passed."""
        return set()

    def _task_operand_rules(self, op: TaskOp) -> None:
        """PLACE-02/04 and DECO-07, once per distinct signature (D-VERIFY-REPEAT)."""
        key = _task_signature(op)
        passed = self._task_signatures_passed
        if key in passed:
            return
        diags_before = len(self.diags)
        self._placement(op)
        self._access_intent(op)
        if len(self.diags) == diags_before:
            passed.add(key)

    def _placement(self, op: TaskOp) -> None:
        # each engine's first operand (labelled only for a diagnostic)
        engines: dict[int, SSAValue] = {}
        for value, _ in op.operand_regions():
            rtype = value.type
            assert isinstance(rtype, RegionType)  # task operands are regions
            level = rtype.level
            if level.kind == "L1" and level.engine is not None:
                engines.setdefault(level.engine, value)
        if len(engines) > 1:
            (k, a), (j, b) = list(engines.items())[:2]
            self.err(
                op,
                "PLACE-02",
                f"task references L1[{k}] ({value_label(a)}) and L1[{j}] ({value_label(b)})",
                cross_engine_fix(op),
            )
            return
        for d in op.decorator_list():
            if isinstance(d, SeqEngineAttr) and engines and d.engine.data not in engines:
                k = next(iter(engines))
                self.err(
                    op,
                    "PLACE-04",
                    f"@seq_engine({d.engine.data}) conflicts with the task's "
                    f"L1[{k}] operand {value_label(engines[k])}",
                    f"use @seq_engine({k}) or drop it (decision D-DECO-SEQ)",
                )

    def _access_intent(self, op: TaskOp) -> None:
        """DECO-07: @readonly regions are not written, @writeonly ones not read;
        the intent is the region's own decorators plus those written after
        the operand (SPEC §7, §12 `operand ::= ID decos?`)."""
        for i, (value, access) in enumerate(op.written_operands()):
            region = value.owner if isinstance(value.owner, RegionOp) else None
            decos = region.decorator_list() if region is not None else ()
            names = {d.DECO_NAME for d in (*decos, *op.operand_decos(i))}
            if {"readonly", "writeonly"} <= names:
                self.err(
                    region or op,
                    "DECO-07",
                    f"{value_label(value)} is both @readonly and @writeonly",
                    "keep one",
                )
            elif access == "write" and "readonly" in names:
                self.err(
                    op,
                    "DECO-07",
                    f"task writes @readonly region {value_label(value)}",
                    "drop @readonly or write another region",
                )
            elif access == "read" and "writeonly" in names:
                self.err(
                    op,
                    "DECO-07",
                    f"task reads @writeonly region {value_label(value)}",
                    "drop @writeonly or read another region",
                )


def cross_engine_fix(op: TaskOp, prefix: str = "a task runs on one engine") -> str:
    """The fix of a task touching two engines' L1 (PLACE-02/05): a transfer or
    store already moves data, and the L1 levels of two engines are joined
    only through L2, so it becomes two; any other task needs its data moved
    to one engine first."""
    if isinstance(op, TransferOp | StoreOp):
        src, dst = (
            next(
                v.type.level.data  # type: ignore[attr-defined]
                for v, how in op.operand_regions()
                if how == want
            )
            for want in ("read", "write")
        )
        return (
            f"{prefix}; L1 levels of two engines are joined only through L2: transfer "
            f"{src} -> L2, then L2 -> {dst} with deps on the first"
        )
    return (
        f"{prefix}: write the same L1[k] for all its L1 operands, or move the data "
        "there with a transfer first"
    )


def _task_signature(op: TaskOp) -> tuple[object, ...]:
    """Everything the placement and access-intent rules read of a task: its
    class and operand segments (which operand is read, which written), each
    operand's type and its region's decorator list, the task's decorators and
    operand decorators.  Attributes by identity (the IR holds them alive
    while it is verified; the bytecode reader shares equal ones, and an
    unshared equal one only misses the cache)."""
    props = op.properties
    seg = props.get("operandSegmentSizes")
    operands = tuple(
        (
            id(v.type),
            id(v.owner.properties.get("decorators"))
            if type(v) is OpResult and type(v.owner) is RegionOp
            else None,
        )
        for v in op.operands
    )
    return (
        type(op),
        id(seg),
        operands,
        id(props.get("decorators")),
        id(props.get("operand_decorators")),
    )


def _attr_has_type(value: Attribute, type_: str) -> bool:
    if type_ == "int":
        return isinstance(value, ArgRefAttr)
    if type_ == "int_list":
        return isinstance(value, ArrayAttr) and all(isinstance(v, ArgRefAttr) for v in value.data)
    if type_ == "float":
        return isinstance(value, FloatAttr)
    if type_ == "number":
        return isinstance(value, FloatAttr | ArgRefAttr)
    if type_ == "elem":
        return elem_name(value) is not None
    if type_ == "string":
        return isinstance(value, StringAttr)
    return False


def _ones(n: int) -> np.ndarray:
    """`n` True flags: every point is a suspect."""
    import numpy as np

    return np.ones(n, dtype=bool)


def _small(*arrays: np.ndarray) -> None:
    """Raise `Inexact` unless sums of these int64 values cannot overflow."""
    import numpy as np

    for x in arrays:
        if np.any(np.abs(x.astype(np.float64)) >= 1 << 61):
            raise Inexact
