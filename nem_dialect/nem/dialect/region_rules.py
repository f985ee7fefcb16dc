"""Static rules of buffers and regions (BUF-*, REG-*, EXT-*, TYPE-*, QUANT-*):
one rule group of `nem.dialect.verifier.ProgramVerifier`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from xdsl.ir import Operation, SSAValue

from nem.dialect.attributes import (
    BITWIDTH,
    DYNAMIC,
    ELEM_BY_NAME,
    PerGroupQuantAttr,
    PerTensorQuantAttr,
    RegionType,
    region_min_bytes,
)
from nem.dialect.expressions import ExprError
from nem.dialect.iteration_space import (
    MAX_POINTS,
    Form,
    combine,
    vector_eval,
    witness,
)
from nem.dialect.limits import INT_MAX
from nem.dialect.ops import (
    BufferOp,
    LoopOp,
    RegionOp,
)
from nem.dialect.point_checks import (
    Box,
    Chunk,
    EnvCheck,
    PointChecks,
    iteration_text,
)

if TYPE_CHECKING:
    import numpy as np


class RegionRules(PointChecks):
    """Buffer and region declarations, at every iteration point they take."""

    @cached_property
    def _typed_passed(self) -> dict[tuple[int, int | None], RegionType]:
        """(region type id, buffer size) pairs whose type checks passed; the
        entry keeps the type, so its id stays its own."""
        return {}

    def _buffer(self, op: BufferOp) -> None:
        name = op.buffer_name.data
        try:
            size = self.ev.static(op.size)
        except ExprError as e:
            return self.err(
                op, "CONST-05", f"{e} in the size of buffer '{name}'", "change the divisor"
            )
        if size is None:
            self.err(
                op,
                "BUF-01",
                f"the size of buffer '{name}' depends on a loop variable",
                "buffer sizes are compile-time integers",
            )
        elif size <= 0:
            self.err(op, "BUF-03", f"buffer '{name}' has size {size}", "give it a size > 0 bytes")
        if op.align is not None:
            a = op.align.value.data
            if a <= 0 or a & (a - 1):
                self.err(
                    op,
                    "BUF-04",
                    f"align={a} of buffer '{name}' is not a power of two",
                    "use 1, 2, 4, ... 64, ...",
                )

    @cached_property
    def _buffer_sizes(self) -> dict[int, tuple[int | None, BufferOp]]:
        """Each buffer's static size (None when not an integer), by the
        buffer op's identity (the entry keeps the op)."""
        return {}

    @cached_property
    def _type_facts(self) -> dict[int, tuple[bool, str | None, RegionType]]:
        """Each region type's `typed` and `elem_name`, by its identity (the
        entry keeps the type)."""
        return {}

    def _region(self, op: RegionOp, loops: tuple[LoopOp, ...]) -> None:
        rtype = op.result.type
        assert isinstance(rtype, RegionType)
        # operands read once: each accessor of an op with operand segments
        # decodes the segment sizes again
        (buf,), (offset,), (extent,), shape, strides = self.groups(op)
        buf_op = buf.owner
        assert isinstance(buf_op, BufferOp)  # BufferType values have no other source
        sizes = self._buffer_sizes
        hit = sizes.get(id(buf_op))
        if hit is None:
            try:
                hit = sizes[id(buf_op)] = (self.ev.static(buf_op.size), buf_op)
            except ExprError:
                hit = sizes[id(buf_op)] = (None, buf_op)
        buf_size = hit[0]
        facts = self._type_facts
        fact = facts.get(id(rtype))
        if fact is None:
            fact = facts[id(rtype)] = (rtype.typed, rtype.elem_name, rtype)
        typed, elem = fact[0], fact[1]  # elem None for an untyped region, once TYPE-01 holds
        if typed:
            if elem is None:
                # IR from MLIR can carry any builtin type; the front ends
                # reject other element types when they build the IR
                return self.err(
                    op,
                    "TYPE-01",
                    f"{_label(op)} has element type {rtype.elem}, which is not a NEM element type",
                    "use one of " + ", ".join(ELEM_BY_NAME),
                )
            # both checks depend on the type and the buffer size alone: a pass
            # is remembered (by the type's identity, kept alive by the entry)
            passed = self._typed_passed
            key = (id(rtype), buf_size)
            if key not in passed:
                if not self._region_type(op, rtype, _label(op)):
                    return
                if not self._buffer_holds_elements(op, rtype, elem, buf_size, _label(op)):
                    return
                passed[key] = rtype
        # the regions of one loop body repeat their offset and extent
        # expressions: a check that passed is not repeated (D-VERIFY-REPEAT;
        # what follows reads of the type only its element type)
        repeat = self.check_key(loops, (offset, extent, *shape, *strides), buf_size, elem)
        if self.passed_before(repeat):
            return
        label = _label(op)
        diags_before = len(self.diags)
        loops = self.relevant_loops(loops, (offset, extent, *shape, *strides))
        # with a static shape and strides the element check depends on the
        # extent alone: decided once per distinct extent, and the smallest
        # extent that passes bounds it over the whole iteration space
        try:
            fixed = all(self.ev.static(v) is not None for v in (*shape, *strides))
        except ExprError:
            fixed = False
        least = (
            (self._least_extent(elem, shape, strides) if fixed else None) if elem is not None else 0
        )
        fits: dict[int, bool] = {}

        def check(env: dict[SSAValue, int]) -> bool:
            try:
                off, ext = self.ev.eval(offset, env), self.ev.eval(extent, env)
            except ExprError as e:
                self.err(op, "CONST-05", f"{e} in {label}", "change the divisor")
                return False
            if off is None or ext is None:
                return True
            if off < 0 or ext <= 0:
                self.err(
                    op,
                    "REG-01",
                    f"{label} has offset {off} and extent {ext}{iteration_text(loops, env)}",
                    "offsets are >= 0 and extents > 0 bytes",
                )
                return False
            if buf_size is not None and off + ext > buf_size:
                self.err(
                    op,
                    "REG-02",
                    f"{label} covers bytes [{off}, {off + ext}) but buffer "
                    f"'{buf_op.buffer_name.data}' has {buf_size} bytes"
                    f"{iteration_text(loops, env)}",
                    "shrink the region or enlarge the buffer",
                )
                return False
            # a static shape and strides: the least extent decides EXT-01/02
            # (as `_region_proven` relies on), without evaluating them again
            if elem is None or (fixed and (fits.get(ext) or (least is not None and ext >= least))):
                return True
            if not self._extent_fits(op, elem, ext, env, label, loops, shape, strides):
                return False
            fits[ext] = True
            return True

        if not loops:
            check({})
            return self.record_pass(repeat, diags_before)
        proof = self.box_forms(loops, (offset, extent))
        if proof is not None:
            box, (f_off, f_ext) = proof
            if self._region_proven(f_off, f_ext, buf_size, least, box, check):
                return self.record_pass(repeat, diags_before)

        def suspects(chunk: Chunk, n: int) -> np.ndarray | None:
            import numpy as np  # (on the first enumeration, not at start-up)

            off = vector_eval(self.ev, offset, chunk, n)
            ext = vector_eval(self.ev, extent, chunk, n)
            if off is None or ext is None:
                return None
            bad = (off < 0) | (ext <= 0)
            if buf_size is not None:
                bad |= off > buf_size - np.maximum(ext, 0)
            if elem is not None:
                bad |= ext < least if least is not None else True
            return bad

        self.each_point(op, loops, check, suspects, f"the bounds of {label}", "REG-02")
        return self.record_pass(repeat, diags_before)

    def _region_proven(
        self,
        f_off: Form,
        f_ext: Form,
        buf_size: int | None,
        least: int | None,
        box: Box,
        check: EnvCheck,
    ) -> bool:
        """Decide REG-01/REG-02 (and the extent rules of a typed region with a
        fixed shape, through the least extent they accept) from the value
        intervals over the box of loop bounds: True when they prove every
        iteration correct, or when the expressions are affine and the space too
        large to enumerate, in which case the corner of the box that breaks a
        rule is checked (and reported) exactly."""
        if f_off.interval is None or f_ext.interval is None or not (f_off.fits and f_ext.fits):
            return False
        f_end = combine("+", f_off, f_ext, box)
        (olo, _), (elo, _) = f_off.interval, f_ext.interval
        end_hi = f_end.interval[1] if f_end.interval is not None else None
        extent_ok = least is not None and elo >= least
        if (
            olo >= 0
            and elo > 0
            and (buf_size is None or (end_hi is not None and end_hi <= buf_size))
            and extent_ok
        ):
            return True
        n = 1
        for lo, hi in box.values():
            n *= hi - lo + 1
        if n <= MAX_POINTS or f_off.affine is None or f_ext.affine is None or least is None:
            return False
        # affine over a huge box: the extremes are at corners (exact)
        if olo < 0:
            env = witness(f_off, box, minimize=True)
        elif elo <= 0 or not extent_ok:
            env = witness(f_ext, box, minimize=True)
        else:
            env = witness(f_end, box, minimize=False)
        check(env)
        return True

    def _buffer_holds_elements(
        self, op: RegionOp, rtype: RegionType, elem: str, buf_size: int | None, label: str
    ) -> bool:
        """BUF-02: a buffer must be large enough for the packed elements a typed
        region puts in it.  Reported on its own (rather than as a REG-02 overrun)
        because the fix is usually the buffer size, computed with the packed
        sub-byte width (TYPE-02)."""
        shape = rtype.shape_values or ()
        if buf_size is None or not shape or DYNAMIC in shape:
            return True
        bw = BITWIDTH[elem]
        need = math.ceil(math.prod(shape) * bw / 8)
        if need <= buf_size:
            return True
        name = op.buffer_decl.buffer_name.data
        self.err(
            op,
            "BUF-02",
            f"buffer '{name}' has {buf_size} bytes but {label} puts "
            f"{math.prod(shape)} {elem} elements in it, which need "
            f"ceil({math.prod(shape)} * {bw} / 8) = {need} bytes",
            f"give buffer '{name}' size >= {need}",
        )
        return False

    def _region_type(self, op: RegionOp, rtype: RegionType, label: str) -> bool:
        if rtype.shape_values is None or (rtype.layout_name is None) == (
            rtype.stride_values is None
        ):
            # the front ends parse nothing else; IR from MLIR can hold any parameters
            self.err(
                op,
                "GRAM-08",
                f"{label} has an element type but not a shape and exactly "
                "one of layout and strides",
                "a typed region carries elem, shape and layout or strides together",
            )
            return False
        shape = rtype.shape_values
        for d in shape:
            if d != DYNAMIC and d <= 0:
                self.err(op, "REG-06", f"{label} has shape entry {d}", "shape entries are positive")
                return False
        layout = rtype.layout_name
        if layout is not None and len(layout) != len(shape):
            self.err(
                op,
                "REG-05",
                f"{label}: layout {layout} has rank {len(layout)} but the shape "
                f"has rank {len(shape)}",
                "a layout names one letter per dimension (decision D-LAYOUT)",
            )
            return False
        strides = rtype.stride_values
        if strides is not None and len(strides) != len(shape):
            self.err(
                op,
                "REG-05",
                f"{label}: {len(strides)} strides for a rank-{len(shape)} shape",
                "give one stride per dimension",
            )
            return False
        return self._quant(op, rtype, label)

    def _quant(self, op: Operation, rtype: RegionType, label: str) -> bool:
        q = rtype.quant_desc
        if q is None or isinstance(q, PerTensorQuantAttr):
            return True
        shape = rtype.shape_values or ()
        axis = q.axis.data
        if not 0 <= axis < len(shape):
            self.err(
                op,
                "QUANT-05",
                f"{label}: quant axis {axis} is not a dimension of a rank-{len(shape)} region",
                f"use 0 <= axis < {len(shape)}",
            )
            return False
        dim = shape[axis]
        if dim == DYNAMIC:
            return True
        if isinstance(q, PerGroupQuantAttr):
            g = q.group_size.data
            if g <= 0:
                self.err(
                    op, "QUANT-04", f"{label}: group_size {g}", "group_size is a positive integer"
                )
                return False
            want, rule, why = math.ceil(dim / g), "QUANT-03", f"ceil({dim} / {g})"
        else:
            want, rule, why = dim, "QUANT-02", f"shape[{axis}]"
        for key in ("scales", "zero_points"):
            have = len(getattr(q, key).data)
            if have != want:
                self.err(
                    op,
                    rule,
                    f"{label}: {key} has {have} entries but needs {want} ({why})",
                    f"give exactly {want} {key}",
                )
                return False
        return True

    def _least_extent(
        self, elem: str, shape_values: Sequence[SSAValue], stride_values: Sequence[SSAValue]
    ) -> int:
        """The smallest extent EXT-01/EXT-02 accept for a static shape and
        strides (beyond INT_MAX when none does: negative strides)."""
        shape = _all_known([self.ev.static(v) for v in shape_values])
        strides = _all_known([self.ev.static(v) for v in stride_values])
        if shape is None or strides is None:
            return 0
        if strides and any(s < 0 for s in strides):
            return INT_MAX + 1
        need = region_min_bytes(elem, shape)
        return max(need, region_min_bytes(elem, shape, strides)) if strides else need

    def _extent_fits(
        self,
        op: RegionOp,
        elem: str,
        ext: int,
        env: Mapping[SSAValue, int],
        label: str,
        loops: tuple[LoopOp, ...],
        shape_values: Sequence[SSAValue],
        stride_values: Sequence[SSAValue],
    ) -> bool:
        shape = _all_known([self.ev.eval(v, env) for v in shape_values])
        if shape is None:
            return True
        need = region_min_bytes(elem, shape)
        if ext < need:
            self.err(
                op,
                "EXT-01",
                f"{label} has extent {ext} bytes but {elem} "
                f"shape {shape} needs {need}{iteration_text(loops, env)}",
                f"make the extent at least {need} bytes",
            )
            return False
        if stride_values:
            strides = _all_known([self.ev.eval(v, env) for v in stride_values])
            if strides is None:
                return True
            last = sum((d - 1) * s for d, s in zip(shape, strides))
            need = region_min_bytes(elem, shape, strides)
            if any(s < 0 for s in strides) or need > ext:
                self.err(
                    op,
                    "EXT-02",
                    f"{label}: strides {strides} address element {last}, "
                    f"beyond its {ext}-byte extent{iteration_text(loops, env)}",
                    "fix the strides or enlarge the extent",
                )
                return False
        return True


def _label(op: RegionOp) -> str:
    """How the region rules' diagnostics name a region."""
    return f"region '{op.region_name.data}'" if op.region_name else "inline region"


def _all_known(values: list[int | None]) -> list[int] | None:
    """The values when every one is known (evaluated), else None."""
    known = [v for v in values if v is not None]
    return known if len(known) == len(values) else None
