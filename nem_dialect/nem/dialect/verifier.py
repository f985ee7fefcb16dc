"""Device-independent static verification of NEM IR (the `static` class of docs/conformance.md).

Staged like peer NPU legality pipelines: structure and names, then objects
(buffers, regions, decorators, loops), then tasks (operands, attributes,
type families, shapes).  A stage that finds errors stops the pipeline, so a
user sees the root cause rather than its echoes.  Every diagnostic carries
the op's `file:line:col`, the rule id and a fix.

Works on any NEM IR, hand-written or produced by a lowering; the `.nem`
parser resolves names but leaves these rules to this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from functools import cache

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, StringAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from nem.dialect.attributes import (
    BITWIDTH,
    region_min_bytes,
    DYNAMIC,
    ArgRefAttr,
    DecoratorAttr,
    PerGroupQuantAttr,
    PerTensorQuantAttr,
    RegionType,
    ResourceAttr,
    SeqEngineAttr,
    elem_name,
)
from nem.dialect.decorators import DECORATORS, TARGET_WORDS, allowed_on
from nem.dialect.diagnostics import Diagnostic, SourceLoc, error
from nem.dialect.iteration_space import (
    MAX_POINTS,
    MAX_SCALAR_POINTS,
    Form,
    Inexact,
    IterationSpace,
    combine,
    forms,
    point,
    vector_eval,
    witness,
)
from nem.dialect.limits import INT_MAX, MAX_EXPR_DEPTH, MAX_NESTING_DEPTH
from nem.dialect.semantics import (
    RESOURCE_UNITS,
    Evaluator,
    ExprError,
    expression_depth,
    window_error,
)
from nem.dialect.families import Catalog
from nem.dialect.ops import (
    BufferOp,
    ComputeOp,
    ConstOp,
    LetOp,
    LoopOp,
    ProgramOp,
    RegionOp,
    StoreOp,
    TaskOp,
    TransferOp,
    WaitOp,
)
from nem.dialect.operand_binding import bind_operands, match_families, value_label
from nem.dialect.registry import OpcodeSpec
from nem.dialect.shape_rules import check_shapes

EnvCheck = Callable[[dict[SSAValue, int]], bool]
"""A check at one iteration point: False when it reported an error."""


@cache
def baseline_catalog() -> Catalog:
    """The type families of the shipped `nem_baseline_1.0.nem`."""
    from nem.devices.device_resolver import load_config_file, shipped_devices_dir

    return load_config_file(shipped_devices_dir() / "nem_baseline_1.0.nem").catalog


class ProgramVerifier:
    def __init__(self, program: ProgramOp, catalog: Catalog | None = None):
        self.program = program
        self.catalog = catalog or baseline_catalog()
        self.ev = Evaluator()
        self.diags: list[Diagnostic] = []
        self._loops_of: dict[Operation, tuple[LoopOp, ...]] = {}

    # -- driver ------------------------------------------------------------
    def run(self) -> list[Diagnostic]:
        for stage in (self.stage_bounds, self.stage_names, self.stage_objects, self.stage_tasks):
            stage()
            if any(d.severity == "error" for d in self.diags):
                break
        return self.diags

    def err(self, op: Operation | SourceLoc | None, rule: str | None, message: str,
            fix: str) -> None:
        self.diags.append(error(message, op, rule, fix))

    def walk(self) -> Iterator[tuple[Operation, tuple[LoopOp, ...]]]:
        def rec(block: Block, loops: tuple[LoopOp, ...]):
            for op in block.ops:
                yield op, loops
                if isinstance(op, LoopOp):
                    yield from rec(op.block, loops + (op,))

        yield from rec(self.program.block, ())

    # -- stage 0: bounded work (D-LIMITS) -------------------------------------
    def stage_bounds(self) -> None:
        """Loop nesting and expression depth within the limits every later
        walk relies on (IR from MLIR is not bounded by the `.nem` parser)."""
        depths: dict[SSAValue, int] = {}
        for op, loops in self.walk():
            if len(loops) > MAX_NESTING_DEPTH:
                return self.err(op, None, f"loops nested more than {MAX_NESTING_DEPTH} deep "
                                "(limit D-LIMITS)", "flatten the loop nest")
            d = expression_depth(op, depths)
            if d is not None and d > MAX_EXPR_DEPTH:
                return self.err(op, None, f"integer expression more than {MAX_EXPR_DEPTH} "
                                "operations deep, counting through const and let names "
                                "(limit D-LIMITS)", "compute the value in fewer steps")
        return None

    # -- stage 1: names and structure ----------------------------------------
    def stage_names(self) -> None:
        """NAME-02, CONST-01/06/07, CONST-03/05 on every declaration."""
        scopes: list[dict[str, Operation]] = [{}]

        def declare(name: str, op: Operation, what: str) -> None:
            for scope in scopes:
                first = scope.get(name)
                if first is not None:
                    rule = "CONST-01" if isinstance(op, ConstOp) and isinstance(first, ConstOp) \
                        else ("CONST-07" if isinstance(op, ConstOp) or isinstance(first, ConstOp)
                              else "NAME-02")
                    self.err(op, rule, f"'{name}' is already declared at {SourceLoc.of(first)}",
                             f"rename this {what}; names are unique within a program and its loops")
                    return
            scopes[-1][name] = op

        def rec(block: Block, in_loop: bool) -> None:
            for op in block.ops:
                if isinstance(op, ConstOp):
                    if in_loop:
                        self.err(op, "CONST-06", f"const '{op.const_name.data}' is declared inside a loop",
                                 "move the const declaration before the loop")
                    self._check_const_expr(op)
                    declare(op.const_name.data, op, "const")
                elif isinstance(op, LetOp | BufferOp):
                    declare(op.properties["name"].data, op, "declaration")
                elif isinstance(op, RegionOp) and op.region_name is not None:
                    declare(op.region_name.data, op, "region")
                elif isinstance(op, TaskOp) and op.token_name() is not None:
                    declare(op.token_name(), op, "token")
                elif isinstance(op, LoopOp):
                    scopes.append({})
                    declare(op.iv_name.data, op, "loop variable")
                    rec(op.block, True)
                    scopes.pop()
                for v in op.operands:
                    self._check_defined(op, v)

        rec(self.program.block, False)

    def _check_const_expr(self, op: ConstOp) -> None:
        bad = _non_const_leaf(op.value)
        if bad is not None:
            self.err(op, "CONST-03", f"const '{op.const_name.data}' depends on {bad}",
                     "a const expression uses only literals, earlier consts, + - * / mod")
            return
        try:
            self.ev.static(op.value)
        except ExprError as e:
            self.err(op, "CONST-05", f"{e} in const '{op.const_name.data}'", "change the divisor")

    def _check_defined(self, user: Operation, value: SSAValue) -> None:
        """TASK-03 / NAME-01 for IR not built by the parser: every operand's
        definition precedes its use in the same or an enclosing block."""
        owner_block = value.block if isinstance(value, BlockArgument) else value.owner.parent_block()
        block = user.parent_block()
        while block is not None and block is not owner_block:
            parent = block.parent_op()
            block = parent.parent_block() if parent is not None else None
        if block is None:
            rule = "TASK-03" if isinstance(value.type, type(None)) or user.name in (
                "nem.wait",) or value.type.name == "nem.token" else "NAME-01"
            self.err(user, rule, "an operand is defined in a scope that does not enclose its use",
                     "tokens and names of a loop body are visible only inside that body")

    # -- stage 2: objects ------------------------------------------------------
    def stage_objects(self) -> None:
        for op, loops in self.walk():
            self._loops_of[op] = loops
            if isinstance(op, BufferOp):
                self._buffer(op)
            elif isinstance(op, RegionOp):
                self._region(op, loops)
            elif isinstance(op, LoopOp):
                self._loop(op)
            self._decorators(op)

    def _buffer(self, op: BufferOp) -> None:
        name = op.buffer_name.data
        try:
            size = self.ev.static(op.size)
        except ExprError as e:
            return self.err(op, "CONST-05", f"{e} in the size of buffer '{name}'", "change the divisor")
        if size is None:
            self.err(op, "BUF-01", f"the size of buffer '{name}' depends on a loop variable",
                     "buffer sizes are compile-time integers")
        elif size <= 0:
            self.err(op, "BUF-03", f"buffer '{name}' has size {size}", "give it a size > 0 bytes")
        if op.align is not None:
            a = op.align.value.data
            if a <= 0 or a & (a - 1):
                self.err(op, "BUF-04", f"align={a} of buffer '{name}' is not a power of two",
                         "use 1, 2, 4, ... 64, ...")

    def envs(self, loops: tuple[LoopOp, ...]) -> Iterator[dict[SSAValue, int]]:
        """Every binding of the enclosing loop variables (inclusive bounds), in
        program order: the scalar enumeration, for what the vectorized one
        cannot evaluate exactly in int64."""
        if not loops:
            yield {}
            return
        for outer in self.envs(loops[:-1]):
            lo = self.ev.eval(loops[-1].lower, outer)
            hi = self.ev.eval(loops[-1].upper, outer)
            if lo is None or hi is None:
                continue
            iv = loops[-1].block.args[0]
            for i in range(lo, hi + 1):
                env = dict(outer)
                env[iv] = i
                yield env

    def each_point(self, op: Operation, loops: tuple[LoopOp, ...], check: EnvCheck,
                   suspects: Callable[[dict, int], np.ndarray | None], what: str,
                   rule: str) -> None:
        """Run `check` at every iteration point of `loops` where the vectorized
        predicate `suspects(chunk, n)` may hold (None: at no point of the chunk),
        in program order, until `check` reports an error (D-VERIFY-ENUM).
        A chunk that int64 cannot evaluate exactly is checked point by point.
        After MAX_POINTS points the check stops with a warning naming `what`
        and the iterations examined (D-VERIFY-BUDGET)."""
        if not loops:
            check({})
            return
        done = scalar = 0
        last: dict[SSAValue, int] = {}
        try:
            for chunk, n in IterationSpace(self.ev, loops).chunks():
                if done >= MAX_POINTS or scalar >= MAX_SCALAR_POINTS:
                    return self._unchecked(op, loops, what, rule, last, done)
                m = min(n, MAX_POINTS - done)
                try:
                    flags = suspects(chunk, n)
                    hits = () if flags is None else np.flatnonzero(flags[:m])
                except Inexact:
                    hits = range(m)
                    scalar += m
                for k in hits:
                    if not check(point(chunk, k)):
                        return None
                done += m
                last = point(chunk, m - 1)
        except Inexact:  # loop bounds near the 64-bit limits: the exact scalar walk
            for env in self.envs(loops):
                if done >= MAX_SCALAR_POINTS:
                    return self._unchecked(op, loops, what, rule, last, done)
                if not check(env):
                    return None
                done += 1
                last = env
        return None

    def _unchecked(self, op: Operation, loops: tuple[LoopOp, ...], what: str, rule: str,
                   last: dict[SSAValue, int], done: int) -> None:
        upto = ", ".join(f"{lp.iv_name.data}={last[lp.block.args[0]]}" for lp in loops
                         if lp.block.args[0] in last)
        self.diags.append(Diagnostic(
            "warning", f"{what} checked for the first {done} iteration points only (up to "
            f"{upto}): the expressions are not affine in the loop variables, their bounds "
            f"do not prove the rule, and the loops have more than {MAX_POINTS} points",
            SourceLoc.of(op), rule,
            "the remaining iterations are checked when the program runs (decision "
            "D-VERIFY-BUDGET); affine offsets and extents (a * i + b) are checked exactly"))

    def box_forms(self, loops: tuple[LoopOp, ...],
                  values: tuple[SSAValue, ...]) -> tuple[dict | None, list[Form | None]]:
        """The box of constant loop bounds and each value's `Form` over it
        (forms are empty when the bounds are not constant)."""
        box = IterationSpace(self.ev, loops).box()
        if box is None:
            return None, []
        try:
            return box, forms(self.ev, values, box)
        except ExprError:
            return None, []

    def relevant_loops(self, loops: tuple[LoopOp, ...], values) -> tuple[LoopOp, ...]:
        """The enclosing loops whose iterations can change `values`: those
        whose variable they use (directly or through the bounds of another
        such loop), and every loop that may run zero times (whose body then
        never runs).  Enumerating only these visits every distinct value, so
        the cost does not grow with unrelated loops (a region over an inner
        index of a 2^63-iteration loop)."""
        try:
            need: set = set().union(*(self.ev.free_loop_args(v) for v in values))
        except ExprError:
            return loops
        keep = []
        for lp in reversed(loops):
            lo, hi = self.ev.static(lp.lower), self.ev.static(lp.upper)
            if lp.block.args[0] in need or lo is None or hi is None or lo > hi:
                keep.append(lp)
                try:
                    need |= self.ev.free_loop_args(lp.lower) | self.ev.free_loop_args(lp.upper)
                except ExprError:
                    return loops
        return tuple(reversed(keep))

    def _region(self, op: RegionOp, loops: tuple[LoopOp, ...]) -> None:
        rtype = op.result.type
        assert isinstance(rtype, RegionType)
        label = f"region '{op.region_name.data}'" if op.region_name else "inline region"
        buf_op = op.buffer.owner
        try:
            buf_size = self.ev.static(buf_op.size)
        except ExprError:
            buf_size = None
        if rtype.typed:
            if not self._region_type(op, rtype, label):
                return
            if not self._buffer_holds_elements(op, rtype, buf_size, label):
                return
        # operands read once: each accessor of an op with operand segments
        # decodes the segment sizes again
        offset, extent, shape, strides = op.offset, op.extent, tuple(op.shape), tuple(op.strides)
        loops = self.relevant_loops(loops, (offset, extent, *shape, *strides))
        # with a static shape and strides the element check depends on the
        # extent alone: decided once per distinct extent, and the smallest
        # extent that passes bounds it over the whole iteration space
        try:
            fixed = all(self.ev.static(v) is not None for v in (*shape, *strides))
        except ExprError:
            fixed = False
        least = (self._least_extent(rtype, shape, strides) if fixed else None) \
            if rtype.typed else 0
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
                self.err(op, "REG-01", f"{label} has offset {off} and extent {ext}"
                         f"{_iteration_text(loops, env)}",
                         "offsets are >= 0 and extents > 0 bytes")
                return False
            if buf_size is not None and off + ext > buf_size:
                self.err(op, "REG-02", f"{label} covers bytes [{off}, {off + ext}) but buffer "
                         f"'{buf_op.buffer_name.data}' has {buf_size} bytes"
                         f"{_iteration_text(loops, env)}",
                         "shrink the region or enlarge the buffer")
                return False
            if not rtype.typed or (fixed and fits.get(ext)):
                return True
            if not self._extent_fits(op, rtype, ext, env, label, loops, shape, strides):
                return False
            fits[ext] = True
            return True

        if not loops:
            check({})
            return
        box, found = self.box_forms(loops, (offset, extent))
        if box is not None and found[0] is not None and found[1] is not None and \
                self._region_proven(found[0], found[1], buf_size, least, box, check):
            return

        def suspects(chunk: dict, n: int) -> np.ndarray | None:
            off = vector_eval(self.ev, offset, chunk, n)
            ext = vector_eval(self.ev, extent, chunk, n)
            if off is None or ext is None:
                return None
            bad = (off < 0) | (ext <= 0)
            if buf_size is not None:
                bad |= off > buf_size - np.maximum(ext, 0)
            if rtype.typed:
                bad |= ext < least if least is not None else True
            return bad

        self.each_point(op, loops, check, suspects, f"the bounds of {label}", "REG-02")

    def _region_proven(self, f_off: Form, f_ext: Form, buf_size: int | None,
                       least: int | None, box: dict, check: EnvCheck) -> bool:
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
        if olo >= 0 and elo > 0 and (buf_size is None or (end_hi is not None and end_hi <= buf_size)) \
                and extent_ok:
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

    def _buffer_holds_elements(self, op: RegionOp, rtype: RegionType, buf_size: int | None,
                               label: str) -> bool:
        """BUF-02: a buffer must be large enough for the packed elements a typed
        region puts in it.  Reported on its own (rather than as a REG-02 overrun)
        because the fix is usually the buffer size, computed with the packed
        sub-byte width (TYPE-02)."""
        shape = rtype.shape_values or ()
        if buf_size is None or not shape or DYNAMIC in shape:
            return True
        bw = BITWIDTH[rtype.elem_name]
        need = math.ceil(math.prod(shape) * bw / 8)
        if need <= buf_size:
            return True
        name = op.buffer.owner.buffer_name.data
        self.err(op, "BUF-02", f"buffer '{name}' has {buf_size} bytes but {label} puts "
                 f"{math.prod(shape)} {rtype.elem_name} elements in it, which need "
                 f"ceil({math.prod(shape)} * {bw} / 8) = {need} bytes",
                 f"give buffer '{name}' size >= {need}")
        return False

    def _region_type(self, op: RegionOp, rtype: RegionType, label: str) -> bool:
        shape = rtype.shape_values or ()
        for d in shape:
            if d != DYNAMIC and d <= 0:
                self.err(op, "REG-06", f"{label} has shape entry {d}", "shape entries are positive")
                return False
        layout = rtype.layout_name
        if layout is not None and len(layout) != len(shape):
            self.err(op, "REG-05", f"{label}: layout {layout} has rank {len(layout)} but the shape "
                     f"has rank {len(shape)}",
                     "a layout names one letter per dimension (decision D-LAYOUT)")
            return False
        strides = rtype.stride_values
        if strides is not None and len(strides) != len(shape):
            self.err(op, "REG-05", f"{label}: {len(strides)} strides for a rank-{len(shape)} shape",
                     "give one stride per dimension")
            return False
        return self._quant(op, rtype, label)

    def _quant(self, op: Operation, rtype: RegionType, label: str) -> bool:
        q = rtype.quant_desc
        if q is None or isinstance(q, PerTensorQuantAttr):
            return True
        shape = rtype.shape_values or ()
        axis = q.axis.data
        if not 0 <= axis < len(shape):
            self.err(op, "QUANT-05", f"{label}: quant axis {axis} is not a dimension of a "
                     f"rank-{len(shape)} region", f"use 0 <= axis < {len(shape)}")
            return False
        dim = shape[axis]
        if dim == DYNAMIC:
            return True
        if isinstance(q, PerGroupQuantAttr):
            g = q.group_size.data
            if g <= 0:
                self.err(op, "QUANT-04", f"{label}: group_size {g}", "group_size is a positive integer")
                return False
            want, rule, why = math.ceil(dim / g), "QUANT-03", f"ceil({dim} / {g})"
        else:
            want, rule, why = dim, "QUANT-02", f"shape[{axis}]"
        for key in ("scales", "zero_points"):
            have = len(getattr(q, key).data)
            if have != want:
                self.err(op, rule, f"{label}: {key} has {have} entries but needs {want} ({why})",
                         f"give exactly {want} {key}")
                return False
        return True

    def _least_extent(self, rtype: RegionType, shape_values, stride_values) -> int:
        """The smallest extent EXT-01/EXT-02 accept for a static shape and
        strides (beyond INT_MAX when none does: negative strides)."""
        shape = [self.ev.static(v) for v in shape_values]
        strides = [self.ev.static(v) for v in stride_values]
        if any(d is None for d in shape) or any(s is None for s in strides):
            return 0
        if strides and any(s < 0 for s in strides):
            return INT_MAX + 1
        need = region_min_bytes(rtype.elem_name, shape)
        return max(need, region_min_bytes(rtype.elem_name, shape, strides)) if strides else need

    def _extent_fits(self, op: RegionOp, rtype: RegionType, ext: int, env, label: str,
                     loops: tuple[LoopOp, ...], shape_values, stride_values) -> bool:
        shape = [self.ev.eval(v, env) for v in shape_values]
        if any(d is None for d in shape):
            return True
        need = region_min_bytes(rtype.elem_name, shape)
        if ext < need:
            self.err(op, "EXT-01", f"{label} has extent {ext} bytes but {rtype.elem_name} "
                     f"shape {shape} needs {need}{_iteration_text(loops, env)}",
                     f"make the extent at least {need} bytes")
            return False
        if stride_values:
            strides = [self.ev.eval(v, env) for v in stride_values]
            if any(s is None for s in strides):
                return True
            last = sum((d - 1) * s for d, s in zip(shape, strides))
            need = region_min_bytes(rtype.elem_name, shape, strides)
            if any(s < 0 for s in strides) or need > ext:
                self.err(op, "EXT-02", f"{label}: strides {strides} address element {last}, "
                         f"beyond its {ext}-byte extent{_iteration_text(loops, env)}",
                         "fix the strides or enlarge the extent")
                return False
        return True

    def _loop(self, op: LoopOp) -> None:
        lo, hi = self.ev.static(op.lower), self.ev.static(op.upper)
        if lo is not None and hi is not None and lo > hi:
            self.err(op, "LOOP-04", f"loop '{op.iv_name.data}' runs from {lo} to {hi}",
                     "bounds are inclusive and need start <= end")
        msg = window_error(op)
        if msg is not None:
            self.err(op, "LOOP-03", msg, "use @max_in_flight(1) for sequential iterations")

    def _decorators(self, op: Operation) -> None:
        target = _target_of(op)
        if target is None:
            return
        decos = list(op.decorator_list()) if hasattr(op, "decorator_list") else []
        for d in decos:
            self._decorator(op, d, target)
        if isinstance(op, TaskOp):
            for i in range(len(op.written_operands())):
                for d in op.operand_decos(i):
                    self._decorator(op, d, "region")

    def _decorator(self, op: Operation, d: DecoratorAttr, target: str) -> None:
        info = DECORATORS[d.DECO_NAME]
        if isinstance(d, ResourceAttr) and d.unit.data not in RESOURCE_UNITS:
            self.err(op, "RES-01", f"@resource({d.unit.data}[{d.index.data}]): {d.unit.data} is not "
                     "a valid execution target",
                     "valid @resource units are " + ", ".join(RESOURCE_UNITS))
        elif target not in info.targets:
            self.err(op, "DECO-02", f"{info.usage.split('(')[0]} does not apply to "
                     f"{TARGET_WORDS[target]}",
                     f"{TARGET_WORDS[target]} takes " + (", ".join(allowed_on(target)) or "none"))

    # -- stage 3: tasks ----------------------------------------------------
    def stage_tasks(self) -> None:
        for op, loops in self.walk():
            if isinstance(op, TransferOp | StoreOp):
                self._move(op, loops)
            elif isinstance(op, ComputeOp):
                self._compute(op)
            if isinstance(op, TaskOp):
                self._placement(op)
                self._access_intent(op)

    def _move(self, op: TransferOp | StoreOp, loops) -> None:
        dst, src = op.dst.type, op.src.type
        kw = "transfer" if isinstance(op, TransferOp) else "store"
        if dst.typed and src.typed:
            if dst.elem != src.elem:
                # no implicit conversion anywhere (TYPE-03); TASK-07 is the
                # transfer-specific restatement, TYPE-03 names the fix
                return self.err(op, "TYPE-03", f"{kw} from {src.elem_name} to {dst.elem_name} "
                                "would convert element types implicitly",
                                "transfers do not convert; use an explicit cast task")
            ds, ss = dst.shape_values, src.shape_values
            if DYNAMIC not in ds + ss and math.prod(ds) != math.prod(ss):
                return self.err(op, "TASK-07", f"{kw} moves {math.prod(ss)} elements into a "
                                f"region of {math.prod(ds)}", "make the element counts equal")
        d_op, s_op = op.dst.owner, op.src.owner
        # operands read once: xDSL's operand accessors cost more than an evaluation
        d_extent, s_extent, d_offset, s_offset = d_op.extent, s_op.extent, d_op.offset, s_op.offset
        loops = self.relevant_loops(loops, (d_extent, s_extent, d_offset, s_offset))
        same_buffer = isinstance(op, TransferOp) and d_op.buffer == s_op.buffer and \
            not any(dd.DECO_NAME == "memmove" for dd in op.decorator_list())
        # TASK-07: the extent comparison is for untyped regions; typed ones
        # compare element counts above (a strided source spans more bytes)
        compare_extents = not (dst.typed and src.typed)
        if not compare_extents and not same_buffer:
            return None

        def check(env: dict[SSAValue, int]) -> bool:
            d_ext, s_ext = self.ev.eval(d_extent, env), self.ev.eval(s_extent, env)
            if d_ext is not None and s_ext is not None and d_ext < s_ext and compare_extents:
                self.err(op, "TASK-07", f"{kw} copies {s_ext} bytes into a {d_ext}-byte "
                         f"region{_iteration_text(loops, env)}",
                         "the destination extent must be at least the source extent")
                return False
            if same_buffer:
                d_off, s_off = self.ev.eval(d_offset, env), self.ev.eval(s_offset, env)
                if None not in (d_off, s_off, d_ext, s_ext) and \
                        d_off < s_off + s_ext and s_off < d_off + d_ext:
                    self.err(op, "HAZ-02", "transfer source and destination overlap "
                             f"(bytes [{s_off}, {s_off + s_ext}) and [{d_off}, {d_off + d_ext}) "
                             f"of '{d_op.buffer.owner.buffer_name.data}')"
                             f"{_iteration_text(loops, env)}",
                             "add @memmove or use disjoint regions")
                    return False
            return True

        if not loops:
            check({})
            return None
        box, f = self.box_forms(loops, (d_extent, s_extent, d_offset, s_offset))
        if box is not None and None not in f and self._move_proven(
                f, box, compare_extents, same_buffer, check):
            return None

        def suspects(chunk: dict, n: int) -> np.ndarray | None:
            d_ext, s_ext = vector_eval(self.ev, d_extent, chunk, n), vector_eval(self.ev, s_extent, chunk, n)
            if d_ext is None or s_ext is None:
                return None
            bad = d_ext < s_ext if compare_extents else np.zeros(n, dtype=bool)
            if same_buffer:
                d_off, s_off = vector_eval(self.ev, d_offset, chunk, n), vector_eval(self.ev, s_offset, chunk, n)
                if d_off is not None and s_off is not None:
                    _small(d_off, s_off, d_ext, s_ext)
                    bad |= (d_off < s_off + s_ext) & (s_off < d_off + d_ext)
            return bad

        self.each_point(op, loops, check, suspects, f"the extents and overlap of this {kw}",
                        "HAZ-02" if same_buffer else "TASK-07")
        return None

    def _move_proven(self, f: list, box: dict, compare_extents: bool, same_buffer: bool,
                     check: EnvCheck) -> bool:
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
            gaps = (combine("-", combine("-", d_off, s_off, box), s_ext, box),
                    combine("-", combine("-", s_off, d_off, box), d_ext, box))
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

    def _compute(self, op: ComputeOp) -> None:
        spec = op.SPEC
        if not self._operand_counts(op, spec):
            return
        if not self._attributes(op, spec):
            return
        operands = bind_operands(op)
        for (ospec, value) in operands:
            rtype = value.type
            if not rtype.typed:
                return self.err(op, "REG-03", f"{spec.name} operand '{ospec.name}' "
                                f"({value_label(value)}) has no elem/shape/layout",
                                "compute operands need elem=, shape= and layout= or strides=")
            if ospec.elem is not None and rtype.elem_name not in ospec.elem:
                rule = "FAM-27" if spec.name in ("argmax", "argmin") else "FAM-01"
                return self.err(op, rule, f"{spec.name} operand '{ospec.name}' has elem "
                                f"{rtype.elem_name}", f"use one of {', '.join(ospec.elem)} "
                                "(decision D-ARGMAX-INDEX)")
        if spec.families:
            self._families(op, spec)

        for rule, message, fix in check_shapes(op, self.ev):
            self.err(op, rule, message, fix)

    def _operand_counts(self, op: ComputeOp, spec: OpcodeSpec) -> bool:
        for side, values, specs in (("inputs", op.ins, spec.inputs), ("outputs", op.outs, spec.outputs)):
            required = sum(1 for s in specs if s.required)
            variadic = any(s.variadic for s in specs)
            if len(values) < required or (not variadic and len(values) > len(specs)):
                self.err(op, "TASK-12", f"{spec.name} takes {spec.signature()} but got "
                         f"{len(values)} {side}", f"write {spec.name}.async {spec.signature()}")
                return False
        return True

    def _attributes(self, op: ComputeOp, spec: OpcodeSpec) -> bool:
        given = op.attrs.data
        ok = True
        for name, a in spec.attributes.items():
            if a.required and name not in given:
                self.err(op, "TASK-13", f"{spec.name} needs attribute '{name}'",
                         f"add {name}=<{a.type}>")
                ok = False
        if not spec.open_attributes:
            for name in given:
                if name not in spec.attributes:
                    known = ", ".join(spec.attributes) or "none"
                    self.err(op, "TASK-13", f"{spec.name} has no attribute '{name}'",
                             f"its attributes are: {known}")
                    ok = False
        for name, value in given.items():
            a = spec.attributes.get(name)
            if a is not None and not _attr_has_type(value, a.type):
                self.err(op, "TASK-13", f"attribute '{name}' of {spec.name} must be {a.type}",
                         f"write {name}=<{a.type}>")
                ok = False
        return ok

    def _families(self, op: ComputeOp, spec: OpcodeSpec) -> bool:
        result = match_families(op, self.catalog)
        if result.ok:
            return True
        rule = _family_rule(spec.name, result.nearest, result.differences)
        near = f"; nearest variant {result.nearest}: " + "; ".join(result.differences) \
            if result.nearest else ""
        self.err(op, rule, f"{spec.name} matches no type-family variant of "
                 f"{', '.join(spec.families)}{near}",
                 "change the operand types/quant/accum_type to match a variant, or insert a cast")
        return False

    def _placement(self, op: TaskOp) -> None:
        engines = {}
        for value, _ in op.operand_regions():
            level = value.type.level
            if level.kind == "L1" and level.engine is not None:
                engines.setdefault(level.engine, value_label(value))
        if len(engines) > 1:
            (k, a), (j, b) = list(engines.items())[:2]
            self.err(op, "PLACE-02", f"task references L1[{k}] ({a}) and L1[{j}] ({b})",
                     "a task runs on one engine; move the data with a transfer first")
            return
        for d in op.decorator_list():
            if isinstance(d, SeqEngineAttr) and engines and d.engine.data not in engines:
                k = next(iter(engines))
                self.err(op, "PLACE-04", f"@seq_engine({d.engine.data}) conflicts with the task's "
                         f"L1[{k}] operand {engines[k]}",
                         f"use @seq_engine({k}) or drop it (decision D-DECO-SEQ)")

    def _access_intent(self, op: TaskOp) -> None:
        """DECO-07: @readonly regions are not written, @writeonly ones not read;
        the intent is the region's own decorators plus those written after
        the operand (SPEC §7, §12 `operand ::= ID decos?`)."""
        for i, (value, access) in enumerate(op.written_operands()):
            decos = value.owner.decorator_list() if isinstance(value.owner, RegionOp) else ()
            names = {d.DECO_NAME for d in (*decos, *op.operand_decos(i))}
            if {"readonly", "writeonly"} <= names:
                self.err(value.owner, "DECO-07", f"{value_label(value)} is both @readonly and "
                         "@writeonly", "keep one")
            elif access == "write" and "readonly" in names:
                self.err(op, "DECO-07", f"task writes @readonly region {value_label(value)}",
                         "drop @readonly or write another region")
            elif access == "read" and "writeonly" in names:
                self.err(op, "DECO-07", f"task reads @writeonly region {value_label(value)}",
                         "drop @writeonly or read another region")


_TARGETS = ((RegionOp, "region"), (BufferOp, "buffer"), (LoopOp, "loop"),
            (TransferOp, "transfer"), (StoreOp, "store"), (ComputeOp, "compute"),
            (WaitOp, "wait"))
"""The decorator target kind of each op (decorators.py speaks in these words)."""


def _target_of(op: Operation) -> str | None:
    t = type(op)
    if t not in _TARGET_BY_TYPE:  # one isinstance scan per op class, not per op
        _TARGET_BY_TYPE[t] = next((word for cls, word in _TARGETS if isinstance(op, cls)), None)
    return _TARGET_BY_TYPE[t]


_TARGET_BY_TYPE: dict[type, str | None] = {}


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


_FAMILY_RULES = {
    "conv2d.float": "FAM-03", "conv2d.int8": "FAM-04", "conv2d.int4": "FAM-05",
    "gemm.float": "FAM-06", "gemm.int8": "FAM-07", "gemm.int4": "FAM-08",
    "eltwise": "FAM-13", "view": "FAM-15", "norm": "FAM-18", "softmax": "FAM-19",
    "cast": "FAM-20", "quantize": "FAM-21", "dequantize": "FAM-22", "pool": "FAM-23",
}
"""The rule that defines each baseline family's typing (FAM-03..23)."""

_BINARY_ELTWISE = frozenset({"add", "sub", "mul", "div", "min", "max", "pow"})
_BIAS_BINDINGS = {"conv2d": "B", "gemm": "C"}


def _family_rule(opcode: str, nearest, differences: list[str]) -> str:
    """The most specific rule a family mismatch breaks, so the diagnostic
    points the user at the family definition that explains it: accum (FAM-12),
    quant (QUANT-07/08/09/10), bias presence (FAM-10) and type (FAM-11), then
    the element types of the nearest family (FAM-03..23, FAM-14 for mixed
    binary eltwise); FAM-01 when no family is near."""
    text = " ".join(differences)
    family = nearest.family if nearest is not None else ""
    if "accum" in text:
        return "FAM-12"
    if "quant" in text:
        if "must carry" not in text:
            return "QUANT-09"
        if family in ("quantize", "dequantize"):
            return "QUANT-10"
        if family.endswith(".int4") and ("'W'" in text or "'B'" in text) and \
                not any("'X'" in d or "'A'" in d for d in differences if "must carry" in d):
            return "QUANT-08"
        return "QUANT-07"
    bias = _BIAS_BINDINGS.get(family.split(".")[0])
    if bias is not None and f"operand '{bias}'" in text:
        if "missing" in text or "is given but" in text:
            return "FAM-10"
        if family.endswith((".int8", ".int4")) and "needs i32" in text:
            return "FAM-11"
    if "absent" in text or "must not be given" in text:
        return "FAM-10"
    if family == "eltwise" and opcode in _BINARY_ELTWISE:
        return "FAM-14"
    return _FAMILY_RULES.get(family, "FAM-01")


def _small(*arrays: np.ndarray) -> None:
    """Raise `Inexact` unless sums of these int64 values cannot overflow."""
    for x in arrays:
        if np.any(np.abs(x.astype(np.float64)) >= 1 << 61):
            raise Inexact


def _iteration_text(loops: tuple[LoopOp, ...], env: dict[SSAValue, int]) -> str:
    if not loops:
        return ""
    parts = [f"{lp.iv_name.data}={env[lp.block.args[0]]}" for lp in loops
             if lp.block.args[0] in env]
    return f" (at iteration {', '.join(parts)})"


def _non_const_leaf(value: SSAValue) -> str | None:
    """What, other than literals and consts, a const expression uses."""
    if isinstance(value, BlockArgument):
        return "a loop variable"
    op = value.owner
    if isinstance(op, ConstOp):
        return None
    if op.name == "arith.constant":
        return None
    if op.name in ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.remsi"):
        return _non_const_leaf(op.operands[0]) or _non_const_leaf(op.operands[1])
    if isinstance(op, LetOp):
        return f"let '{op.let_name.data}'"
    return f"'{op.name}'"


def verify_program(program: ProgramOp, catalog: Catalog | None = None) -> list[Diagnostic]:
    """All device-independent static diagnostics of `program`."""
    return ProgramVerifier(program, catalog).run()
