"""Compiling NEM IR into executable templates and executing task instances.

The runtime interprets the NEM IR (`nem.program`) directly.  Each block
(program body, loop bodies) is compiled once into a list of instructions:
region declarations, tasks, waits and loops; `arith`/`nem.const`/`nem.let`
ops are pure and are folded into the compiled integer expressions that use
them.  An expression becomes a Python closure over the loop-variable vector
`iv` (`iv[d]` = value of the loop variable at nesting depth d+1), with `/`
and `mod` going through `expressions.apply_binop` (D-EXPR-MOD).

Task execution: transfers and stores copy the whole source extent into the
destination (TASK-06, TASK-10); compute tasks call the kernel table
`nem.runtime.kernels.KERNELS[opcode](inputs, outputs, attrs)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from nem.dialect.attributes import (
    ArgRefAttr,
    ResourceAttr,
    SeqEngineAttr,
    elem_name,
)
from nem.dialect.diagnostics import SourceLoc
from nem.dialect.elements import ELEM_BITS as BITS
from nem.dialect.elements import ELEM_DTYPES as DTYPES
from nem.dialect.expressions import Compiled, Evaluator, ExprError, NotAnExpression
from nem.dialect.ops import (
    BufferOp,
    ComputeOp,
    LoopOp,
    ProgramOp,
    RegionOp,
    StoreOp,
    TaskOp,
    WaitOp,
)
from nem.dialect.semantics.instances import instance_index, loop_copies, static_windows
from nem.dialect.semantics.transfers import fills_range
from nem.runtime.kernel_support import Attrs, BoundKernel, Kernel, Preparable, Tensor, UserKernel
from nem.runtime.kernels import KERNELS
from nem.runtime.memory import (
    BufferInfo,
    BufferSpec,
    Memory,
    MemoryError_,
    RegionInst,
)
from nem.runtime.numerics import NotSupported, NumericError, UserKernelError
from nem.runtime.quant import quant_of

if TYPE_CHECKING:
    from nem.dialect.families import Catalog
    from nem.runtime.escape_hatch import EscapeHatch

Profile = dict[str, dict[str, Any]]
"""The timed mode's throughputs and latencies by unit type (`DEFAULT_PROFILE`):
ints, or the numbers a user's profile gives (`set_timing_profile`)."""

UnitChars = Mapping[str, Mapping[str, Any]]
"""A device's unit characteristics by unit type (the MAC rates of its NMU)."""

BufferInstances = dict[BufferOp, tuple[list[BufferInfo], tuple[int, ...]]]
"""Each buffer's instances (one per concurrently active iteration) and the
windows of its enclosing loops (D-SEM-INSTANCES)."""

AccumResolver = Callable[[ComputeOp], str | None]
"""The accumulator type of a compute op's type family (`family_accum` defaults)."""


def default_kernels(escape_hatch: Callable[[], EscapeHatch]) -> dict[str, Kernel]:
    """The reference kernels, one per opcode of the registry (`nem.runtime.kernels`);
    `compute op="mlir.kernel"` runs in `escape_hatch()` (an interpreter's, made
    when the first escape-hatch task runs: D-RT-MLIR-KERNEL)."""
    registry = KERNELS["compute"]

    def compute(ins: list[Tensor], outs: list[Tensor],
                attrs: dict[str, object]) -> list[np.ndarray]:
        if attrs.get("op") == "mlir.kernel":
            return escape_hatch().run_task(ins, outs, attrs)
        return registry(ins, outs, attrs)

    def prepare(ins: list[Tensor], outs: list[Tensor],
                attrs: dict[str, object]) -> BoundKernel | None:
        if attrs.get("op") == "mlir.kernel":
            return escape_hatch().prepare_task(ins, outs, attrs)
        return registry.prepare(ins, outs, attrs) if isinstance(registry, Preparable) else None
    return {**KERNELS, "compute": Preparable(compute, prepare)}


class RunError(Exception):
    """A runtime error at a task or statement: rule id, message, op, iteration
    and how to fix it (the `fix:` line of the diagnostic)."""

    def __init__(self, message: str, rule: str | None, op: Operation | None = None,
                 where: str = "", fix: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.op = op
        self.where = where
        self.fix = fix

    @property
    def loc(self) -> SourceLoc | None:
        return SourceLoc.of(self.op) if self.op is not None else None


# ---------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------


class ExprCompiler:
    """Compiles the program's integer expressions with the one evaluator
    (`expressions.Evaluator.compile`); `iv[d]` is the loop variable at depth d+1."""

    def __init__(self) -> None:
        self.ev = Evaluator()
        self.index_of: dict[BlockArgument, int] = {}

    def enter_loop(self, var: BlockArgument, depth: int) -> None:
        """Loop variable `var` of a loop whose body is at `depth` is `iv[depth - 1]`."""
        self.index_of[var] = depth - 1

    def static(self, value: SSAValue) -> int | None:
        return self.ev.static(value)

    def compile(self, value: SSAValue) -> Compiled:
        """An int (static) or a closure `f(iv) -> int`."""
        try:
            return self.ev.compile(value, self.index_of)
        except NotAnExpression as e:
            raise RunError(str(e), None, value.owner if isinstance(value.owner, Operation) else None) from None


def ev(x: Compiled, iv: Sequence[int]) -> int:
    return x if isinstance(x, int) else x(iv)


# ---------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------


SEEN_REGIONS = 64
"""Region instances a `RegionTpl` keeps, by geometry, for the iterations that
meet the same one again (a ping-pong slot `(i mod 2) * 64`, an L1 tile reused
by every iteration): the instance, its bounds check and its typed view are
made once, and the scheduler finds the effects bound to it (`Scheduler._effect`,
D-RT-SHARE)."""


class RegionTpl:
    __slots__ = ("op", "value", "name", "buffer", "offset", "extent", "shape", "strides",
                 "elem", "quant", "static_inst", "depth", "level_name", "static_mem",
                 "instances", "windows", "static", "slot", "_seen", "_seen_mem", "fixed_shape")

    def __init__(self, op: RegionOp, comp: ExprCompiler, buffers: BufferInstances,
                 depth: int) -> None:
        self.op = op
        self.value = op.result
        self.depth = depth
        t = op.result.type
        bop = op.buffer.owner
        # a region's buffer operand is a buffer declaration (the verifier's BUF rules)
        self.instances, self.windows = buffers[cast(BufferOp, bop)]
        self.buffer: BufferInfo = self.instances[0]
        self.name = op.region_name.data if op.region_name is not None else \
            f"region({self.buffer.name}, ...)"
        self.offset = comp.compile(op.offset)
        self.extent = comp.compile(op.extent)
        self.elem = t.elem_name if t.typed else None
        self.shape = tuple(comp.compile(v) for v in op.shape) if t.typed and op.shape else None
        self.strides = tuple(comp.compile(v) for v in op.strides) if op.strides else None
        self.quant = quant_of(t.quant_desc)
        self.static_inst: RegionInst | None = None
        self.static_mem: Memory | None = None
        self.static = self.is_static()
        self.fixed_shape = all(isinstance(p, int) for p in (*(self.shape or ()),
                                                            *(self.strides or ())))
        self.slot = -1     # its key in streams' environments (compile_program)
        self._seen: dict[RegionKey, RegionInst] = {}   # geometry -> RegionInst (`instantiate`)
        self._seen_mem: Memory | None = None

    def is_static(self) -> bool:
        parts = [self.offset, self.extent, *(self.shape or ()), *(self.strides or ())]
        return all(isinstance(p, int) for p in parts)

    def instantiate(self, memory: Memory, iv: Sequence[int],
                    ords: Sequence[int] = ()) -> RegionInst:
        """The region in the iteration with loop variables `iv` and ordinals
        `ords`: a loop-body buffer's instance is chosen by `ords` (D-SEM-INSTANCES)."""
        if self.static_mem is memory and self.static_inst is not None:
            return self.static_inst
        shape: tuple[int, ...] | None
        strides: tuple[int, ...] | None
        if self.static:     # every part an int (`is_static`)
            off, ext = cast(int, self.offset), cast(int, self.extent)
            shape, strides = cast(_Dims, self.shape), cast(_Dims, self.strides)
        else:
            try:
                off = ev(self.offset, iv)
                ext = ev(self.extent, iv)
                if self.fixed_shape:
                    shape, strides = cast(_Dims, self.shape), cast(_Dims, self.strides)
                else:
                    shape = tuple(ev(s, iv) for s in self.shape) \
                        if self.shape is not None else None
                    strides = tuple(ev(s, iv) for s in self.strides) \
                        if self.strides is not None else None
            except ExprError as e:
                raise RunError(str(e), "CONST-05", self.op,
                               fix="make the expression defined for every iteration of its "
                               "loops (check the loop bounds)") from None
        b = self.instances[instance_index(ords[:len(self.windows)], self.windows)] \
            if self.windows and len(ords) >= len(self.windows) else self.buffer
        key = (b.instance, off, ext, shape, strides)
        if self._seen_mem is memory:
            r = self._seen.get(key)
            if r is not None:
                return r
        else:
            self._seen, self._seen_mem = {}, memory
        lv = memory.levels[b.level]
        if shape is None and self.elem is not None:
            shape = (ext * 8 // BITS[self.elem],)
        r = RegionInst(self.name, lv, b, b.offset + off, ext, self.elem, shape, strides,
                       self.quant, strides is None)
        try:
            r.check()
        except MemoryError_ as e:
            raise RunError(str(e), e.rule, self.op, fix=e.fix) from None
        if self.depth == 0 and self.static:
            self.static_inst, self.static_mem = r, memory
        if len(self._seen) < SEEN_REGIONS:
            self._seen[key] = r
        else:
            self._seen.clear()
        return r


_Dims = tuple[int, ...] | None
RegionKey = tuple[int, int, int, _Dims, _Dims]
"""A region instance's geometry: (buffer instance, offset, extent, shape, strides)."""


# unit types (RES-07)
TRANSFER, STORE, COMPUTE = "transfer", "store", "compute"


class TaskTpl:
    __slots__ = ("op", "kind", "label", "opcode", "sync", "dep_refs", "region_refs",
                 "attrs_static", "attrs_dyn", "resource", "seq_engine", "line", "seq_id",
                 "produced", "consumed", "value", "depth", "unit_type", "memmove",
                 "n_in", "slot")

    def __init__(self, op: TaskOp, depth: int, seq_id: int) -> None:
        self.op = op
        self.value = op.result
        self.depth = depth
        self.seq_id = seq_id
        self.sync = op.is_sync
        if isinstance(op, ComputeOp):
            self.kind, self.opcode = COMPUTE, op.opcode
            self.unit_type = op.SPEC.unit
            self.n_in = len(op.ins)
        else:
            self.kind = STORE if isinstance(op, StoreOp) else TRANSFER
            self.opcode = self.kind
            self.unit_type = "CSTL" if self.kind == STORE else "DMA"
            self.n_in = 1
        name = op.token_name()
        loc = SourceLoc.of(op)
        self.label = name or f"{self.opcode}@{loc.line if loc else '?'}"
        self.line = loc.line if loc else 0
        self.dep_refs: list[ValueRef] = []
        self.region_refs: list[tuple[ValueRef, bool]] = []   # (value, is_write)
        self.attrs_static: Attrs = {}
        self.attrs_dyn: Attrs = {}       # values with closures of the loop variables
        self.resource: tuple[str, int] | None = None
        self.seq_engine: int | None = None
        self.memmove = False
        for d in op.decorator_list():
            if isinstance(d, ResourceAttr):
                self.resource = (d.unit.data, d.index.data)
            elif isinstance(d, SeqEngineAttr):
                self.seq_engine = d.engine.data
            elif d.DECO_NAME == "memmove":
                self.memmove = True
        self.produced = 0
        self.consumed = 0
        self.slot = -1     # its token's key in streams' environments (compile_program)


class WaitTpl:
    __slots__ = ("op", "dep_refs", "line")

    def __init__(self, op: WaitOp) -> None:
        self.op = op
        self.dep_refs: list[ValueRef] = []
        loc = SourceLoc.of(op)
        self.line = loc.line if loc else 0


class LoopTpl:
    __slots__ = ("op", "lower", "upper", "n", "body", "var", "depth", "line")

    def __init__(self, op: LoopOp, comp: ExprCompiler, depth: int) -> None:
        self.op = op
        self.lower = comp.compile(op.lower)
        self.upper = comp.compile(op.upper)
        self.n = op.max_in_flight()
        self.var = op.iv_name.data
        self.depth = depth   # depth of the loop's body
        self.body: list[Instr] = []
        loc = SourceLoc.of(op)
        self.line = loc.line if loc else 0


Instr = RegionTpl | TaskTpl | WaitTpl | LoopTpl
"""An instruction of a compiled block (a stream runs them in order)."""


@dataclass
class ValueRef:
    """Where an SSA value lives: `up` frames above the user's frame."""

    value: SSAValue
    depth: int      # depth of the defining block
    pos: int        # index of the defining instruction in its block (-1: unknown)
    slot: int       # its key in a stream's environment (`CompiledProgram.values`)


@dataclass
class CompiledProgram:
    prog: ProgramOp
    body: list[Instr]
    buffers: BufferInstances
    tasks: list[TaskTpl] = field(default_factory=list)
    regions: list[RegionTpl] = field(default_factory=list)
    loops: list[LoopTpl] = field(default_factory=list)
    replay: object = None         # nem.runtime.replay.Plan of the last recorded run
    values: list[SSAValue] = field(default_factory=list)
    """Region and task results by slot: streams' environments are keyed by slot
    numbers (hashing an int is cheaper than an xDSL value's `__hash__`)."""

    task_count: tuple[int | None, ...] = ()   # static_task_count's answer, once computed

    def static_task_count(self) -> int | None:
        """Tasks the program will run when all loop bounds are static (progress
        bar, D-RT-REPLAY's eligibility); counted once (the body never changes)."""
        if not self.task_count:
            self.task_count = (self._count_tasks(),)
        return self.task_count[0]

    def _count_tasks(self) -> int | None:
        def count(body: list[Instr]) -> int | None:
            n = 0
            for ins in body:
                if isinstance(ins, TaskTpl):
                    n += 1
                elif isinstance(ins, LoopTpl):
                    if not isinstance(ins.lower, int) or not isinstance(ins.upper, int):
                        return None
                    inner = count(ins.body)
                    if inner is None:
                        return None
                    n += max(0, ins.upper - ins.lower + 1) * inner
            return n
        return count(self.body)


def compile_program(prog: ProgramOp, memory: Memory, catalog: Catalog | None,
                    accum_resolver: AccumResolver) -> CompiledProgram:
    """Allocate buffers (declaration order) and compile every block."""
    buffers: BufferInstances = {}
    comp = ExprCompiler()
    cp = CompiledProgram(prog, [], buffers)
    defs: dict[SSAValue, ValueRef] = {}

    specs: list[BufferSpec] = []
    ops: list[BufferOp] = []
    windows: list[tuple[int, ...]] = []
    for op in prog.walk():
        if isinstance(op, BufferOp):
            size = comp.static(op.size)
            if size is None:
                raise RunError(f"the size of buffer '{op.buffer_name.data}' is not static",
                               "BUF-01", op, fix="give the buffer a size made of integers and "
                               "consts")
            level = op.result.type.level.data
            align = op.align.value.data if op.align is not None else None
            w = static_windows(_loops_of(op), comp.ev)
            specs.append(BufferSpec(op.buffer_name.data, level, size, align, loop_copies(w)))
            ops.append(op)
            windows.append(w)
    try:
        placed = memory.allocate_all(specs)
    except MemoryError_ as e:
        at = next((op for op in ops if op.buffer_name.data == getattr(e, "buffer", None)), None)
        raise RunError(str(e), e.rule, at or (ops[-1] if ops else None), fix=e.fix) from None
    for op, insts, w in zip(ops, placed, windows):
        buffers[op] = (insts, w)

    def define(v: SSAValue, depth: int, pos: int) -> int:
        defs[v] = ValueRef(v, depth, pos, len(cp.values))
        cp.values.append(v)
        return len(cp.values) - 1

    def compile_block(block: Block, depth: int) -> list[Instr]:
        out: list[Instr] = []
        for op in block.ops:
            if isinstance(op, RegionOp):
                t = RegionTpl(op, comp, buffers, depth)
                if t.elem and t.buffer.elem_hint is None:
                    t.buffer.elem_hint = t.elem
                t.slot = define(op.result, depth, len(out))
                cp.regions.append(t)
                out.append(t)
            elif isinstance(op, TaskOp):
                task = TaskTpl(op, depth, len(cp.tasks))
                task.slot = define(op.result, depth, len(out))
                cp.tasks.append(task)
                out.append(task)
            elif isinstance(op, WaitOp):
                out.append(WaitTpl(op))
            elif isinstance(op, LoopOp):
                lt = LoopTpl(op, comp, depth + 1)
                comp.enter_loop(op.block.args[0], depth + 1)
                cp.loops.append(lt)
                out.append(lt)
                lt.body = compile_block(op.block, depth + 1)
        return out

    cp.body = compile_block(prog.block, 0)

    def ref(v: SSAValue) -> ValueRef:
        r = defs.get(v)
        if r is None:
            raise RunError("operand is not a region or task of this program", None,
                           v.owner if isinstance(v.owner, Operation) else None)
        return r

    for ins in _walk(cp.body):
        if isinstance(ins, TaskTpl):
            op = ins.op
            ins.dep_refs = [ref(v) for v in op.dep_values()]
            ins.region_refs = [(ref(v), mode == "write") for v, mode in op.operand_regions()]
            if isinstance(op, ComputeOp):
                _compile_attrs(ins, op, comp, accum_resolver)
        elif isinstance(ins, WaitTpl):
            ins.dep_refs = [ref(v) for v in ins.op.tokens]
    return cp


def _loops_of(op: Operation) -> tuple[LoopOp, ...]:
    out: list[LoopOp] = []
    p = op.parent_op()
    while isinstance(p, LoopOp):
        out.append(p)
        p = p.parent_op()
    return tuple(reversed(out))


def _walk(body: list[Instr]) -> Iterator[Instr]:
    for ins in body:
        yield ins
        if isinstance(ins, LoopTpl):
            yield from _walk(ins.body)


def _attr_py(a: Attribute, comp: ExprCompiler, args: Sequence[SSAValue]) -> object:
    """Python value of a compute attribute; ints may be closures (loop-dependent)."""
    if isinstance(a, ArgRefAttr):
        return comp.compile(args[a.index.data])
    if isinstance(a, ArrayAttr):
        return [_attr_py(x, comp, args) for x in a.data]
    if isinstance(a, FloatAttr):
        return float(a.value.data)
    if isinstance(a, IntegerAttr):
        return int(a.value.data)
    if isinstance(a, StringAttr):
        return a.data
    name = elem_name(a)
    if name is not None:
        return name
    return a


def _has_fn(v: object) -> bool:
    if callable(v):
        return True
    if isinstance(v, list):
        return any(_has_fn(x) for x in v)
    return False


def _resolve(v: object, iv: Sequence[int]) -> object:
    if callable(v):
        return v(iv)
    if isinstance(v, list):
        return [_resolve(x, iv) for x in v]
    return v


def _compile_attrs(t: TaskTpl, op: ComputeOp, comp: ExprCompiler,
                   accum_resolver: AccumResolver) -> None:
    args = tuple(op.args)
    for name, a in op.attrs.data.items():
        v = _attr_py(a, comp, args)
        (t.attrs_dyn if _has_fn(v) else t.attrs_static)[name] = v
    for name, spec in op.SPEC.attributes.items():
        if name in op.attrs.data or spec.default is None:
            continue
        if spec.default == "family_accum":
            acc = accum_resolver(op)
            if acc is not None:
                t.attrs_static[name] = acc
        else:
            t.attrs_static[name] = spec.default


def task_attrs(t: TaskTpl, iv: Sequence[int]) -> Attrs:
    if not t.attrs_dyn:
        return t.attrs_static
    d = dict(t.attrs_static)
    for k, v in t.attrs_dyn.items():
        d[k] = _resolve(v, iv)
    return d


# ---------------------------------------------------------------------------
# Executing a task's data effect
# ---------------------------------------------------------------------------


_SAME_DATA_FIX = ("a transfer copies elements as they are: give source and destination the same "
                  "element type and element count (convert with a compute task)")
_FILLS_FIX = ("a typed region facing an untyped one must be dense (row-major, its extent exactly "
              "its elements' bytes): type both regions, or make the typed one dense")


def _fills(r: RegionInst) -> bool:
    """A typed region whose elements are its whole byte range (D-SEM-TRANSFER)."""
    assert r.elem is not None
    return fills_range(r.elem, r.shape or (), r.strides, r.extent)


WIDE_MIN = 8
"""Bytes an element-wise copy must move per contiguous run for `_wide_views`
to copy the runs as opaque elements instead."""


def _wide_views(src: RegionInst, s: np.ndarray, dst: RegionInst,
                d: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(dst, src) views of the same bytes as the typed views `d` and `s`
    (same shape and element type), their innermost dimensions that are
    contiguous in both merged into one opaque element (numpy's void type,
    copied as bytes): a strided tile copy then moves its contiguous runs
    (a weight tile's 16 output channels: 64 bytes) with one `memcpy` each
    instead of element by element.  The bytes moved are the same, in the
    same places: a move copies elements bit for bit (D-SEM-TRANSFER).  None
    when the runs are too short to gain (`WIDE_MIN` bytes), the views
    overlap, or an operand is i4."""
    if src.elem == "i4" or s.shape != d.shape or s.ndim == 0:
        return None
    if src.level is dst.level and src.start < dst.start + dst.extent and \
            dst.start < src.start + src.extent:
        return None
    run = s.itemsize
    i = s.ndim
    while i > 0:
        n = s.shape[i - 1]
        if n != 1 and (s.strides[i - 1] != run or d.strides[i - 1] != run):
            break
        run *= n
        i -= 1
    if run < WIDE_MIN or run == s.itemsize:
        return None
    wt = np.dtype((np.void, run))
    shape = s.shape[:i]
    out = []
    for r, v in ((dst, d), (src, s)):
        out.append(np.ndarray(shape, wt, buffer=r.level.data, offset=r.start,
                              strides=v.strides[:i]))
    return out[0], out[1]


def prepare_move(t: TaskTpl, dst: RegionInst, src: RegionInst) -> Callable[[], None]:
    """The data effect of a transfer/store as a call without arguments: what
    depends on the region instances only (element types, sizes, the byte
    views) is checked and bound once, so a replayed run (D-RT-REPLAY), which
    performs the same instance's effect again, pays only for the copy.

    What moves (D-SEM-TRANSFER, `nem.dialect.semantics.transfers.moved_bytes`): a
    typed region's elements (row-major over its shape, gaps between strided
    elements and extent past the last one untouched), an untyped region's
    whole byte range.  Two typed regions: same element type and count,
    element i to element i; a typed region facing an untyped one must fill
    its range, and then both are byte ranges."""
    if src.elem is not None and dst.elem is not None:
        if src.elem != dst.elem:
            raise RunError(f"{t.opcode} from {src.elem} region {src.name} to {dst.elem} region "
                           f"{dst.name}: element types differ", "TASK-07", t.op,
                           fix=_SAME_DATA_FIX)
        s, d = src.read(), dst.read()
        if s.size != d.size:
            raise RunError(f"{t.opcode}: {src.name} has {s.size} elements, {dst.name} has "
                           f"{d.size}", "TASK-07", t.op, fix=_SAME_DATA_FIX)
        if not (_fills(src) and _fills(dst)):
            shape = d.shape
            wide = _wide_views(src, s, dst, d)
            if wide is not None:
                return partial(np.copyto, *wide)

            def typed() -> None:
                v = src.read()          # i4: unpacked now, not when prepared
                dst.write(v.reshape(shape) if v.shape != shape else v)
            return typed
    else:
        for side in (src, dst):
            if side.elem is not None and not _fills(side):
                raise RunError(f"{t.opcode} between a typed and an untyped region: the typed "
                               f"{side.name} ({side.elem}{list(side.shape or ())}, "
                               f"{side.extent} bytes) is not dense", "TASK-07", t.op,
                               fix=_FILLS_FIX)
    n = src.extent
    if dst.extent < n:
        raise RunError(f"{t.opcode}: source {src.name} has {n} bytes but destination "
                       f"{dst.name} only {dst.extent}", "TASK-07", t.op, fix=_SAME_DATA_FIX)
    a, b = src.start, dst.start
    sv = src.level.data[a:a + n]
    dv = dst.level.data[b:b + n]
    if src.level is dst.level and a < b + n and b < a + n:
        def overlapping() -> None:     # @memmove (HAZ-02): copy through a temporary
            dv[...] = sv.copy()
        return overlapping
    return partial(np.copyto, dv, sv)


_KERNEL_FIX = ("use an opcode and element types the runtime implements (docs/ops.md), or pass "
               "your own kernel for the opcode: NemInterpreter(kernels={opcode: fn}) "
               "(docs/python-api.md)")
_USER_KERNEL_FIX = ("your kernel for this opcode refused these operands (it raised NotSupported): "
                    "extend it, or leave the opcode to the reference kernel")
_NUMERIC_FIX = ("the input values have no defined result (decision D-NUM-UNSUPPORTED): check "
                "the data this task reads, or the tasks that write it")
_KERNEL_RESULT_FIX = ("a kernel takes (inputs, outputs, attrs) and returns a list of one array per "
                      "output operand, of that operand's element type and size; it does not "
                      "write its inputs (docs/python-api.md)")


def prepare_compute(t: TaskTpl, regions: list[RegionInst], attrs: Attrs,
                    kernels: Mapping[str, Kernel]) -> Callable[[], None]:
    """The data effect of a compute task as a call without arguments (see
    `prepare_move`): the kernel and its operand tensors (views of the regions,
    whose contents the kernel reads when called) are bound once; i4 operands
    are unpacked at each call."""
    fn = kernels.get(t.opcode)
    n_in = t.n_in
    outs = regions[n_in:]
    if fn is None:
        raise RunError(f"not supported: no kernel for opcode '{t.opcode}' "
                       f"({', '.join(r.elem or 'untyped' for r in regions)})", "EXEC-03", t.op,
                       fix=_KERNEL_FIX)
    refused = _USER_KERNEL_FIX if isinstance(fn, UserKernel) else _KERNEL_FIX
    wants = [DTYPES[r.elem] if r.elem else np.dtype(np.uint8) for r in outs]
    views = [r.read() if r.elem != "i4" else None for r in regions]
    static = all(v is not None for v in views)

    def tensors() -> tuple[list[Tensor], list[Tensor]]:
        # compute operands have an element type (REG-03)
        ts = [Tensor(r.read() if v is None else v, cast(str, r.elem), r.quant)
              for r, v in zip(regions, views)]
        return ts[:n_in], ts[n_in:]
    bound = tensors() if static else None
    call = None
    prepare = getattr(fn, "prepare", None)
    if bound is not None and prepare is not None:
        try:
            call = prepare(*bound, attrs)
        except NotSupported as e:
            raise RunError(f"not supported: {e}", "EXEC-03", t.op, fix=e.fix or refused) from None

    def compute() -> None:
        try:
            if call is not None:
                results = call()
                if results is None:     # written into the output views (Preparable)
                    return
            else:
                tin, tout = bound if bound is not None else tensors()
                results = fn(tin, tout, attrs)
        except NotSupported as e:
            raise RunError(f"not supported: {e}", "EXEC-03", t.op, fix=e.fix or refused) from None
        except NumericError as e:
            raise RunError(f"no defined result: {e}", "EXEC-03", t.op, fix=_NUMERIC_FIX) from None
        except UserKernelError as e:
            raise RunError(str(e), "EXEC-03", t.op, fix=_KERNEL_RESULT_FIX) from None
        if len(results) != len(outs):
            raise RunError(f"kernel '{t.opcode}' returned {len(results)} arrays for {len(outs)} "
                           "outputs", "EXEC-03", t.op, fix=_KERNEL_RESULT_FIX)
        for r, arr, want in zip(outs, results, wants):
            arr = np.asarray(arr)
            if arr.dtype != want:
                raise RunError(f"kernel '{t.opcode}' returned {arr.dtype} for output {r.name} of "
                               f"type {r.elem}", "EXEC-03", t.op, fix=_KERNEL_RESULT_FIX)
            if r.shape is not None and arr.size != math.prod(r.shape):
                raise RunError(f"kernel '{t.opcode}' returned {arr.size} elements for output "
                               f"{r.name} of shape {list(r.shape)}", "EXEC-03", t.op,
                               fix=_KERNEL_RESULT_FIX)
            r.write(arr)
    return compute


# ---------------------------------------------------------------------------
# Cost model (timed mode)
# ---------------------------------------------------------------------------

DEFAULT_PROFILE: Profile = {
    "DMA": {"bandwidth": 32, "latency": 4},       # bytes/cycle, cycles
    "sDMA": {"bandwidth": 16, "latency": 16},
    "CSTL": {"throughput": 256, "latency": 1},    # elements/cycle
    "VPU": {"throughput": 64, "latency": 2},
    "NMU": {"macs": 1024, "latency": 2},          # fallback MACs/cycle
}
MAC_KEYS = {"i4": ("int4_macs", "int8_macs"), "i8": ("int8_macs",), "u8": ("int8_macs",),
            "i16": ("int16_macs", "int8_macs"), "u16": ("int16_macs", "int8_macs"),
            "f16": ("fp16_macs",), "bf16": ("bf16_macs", "fp16_macs"),
            "f32": ("fp32_macs",)}


def macs_per_cycle(elem: str | None, unit_chars: UnitChars, profile: Profile) -> int:
    nmu = unit_chars.get("NMU", {})
    for key in MAC_KEYS.get(elem or "", ()):
        if key in nmu:
            return max(1, int(nmu[key]))
    if elem == "f32" and "fp16_macs" in nmu:
        return max(1, int(nmu["fp16_macs"]) // 4)
    return int(profile["NMU"]["macs"])


class Work(NamedTuple):
    """What a task asks of its unit under D-RT-COST: `amount` units of work
    (bytes for a transfer, MACs for an NMU task, elements for CSTL and VPU),
    `rate` of them per cycle, plus a fixed `latency`.  The timed mode's cost
    (`Work.cycles`) and the roofline's bound (`nem.runtime.roofline`,
    D-RT-ROOFLINE) are both computed from it: one home for the throughputs."""

    amount: int
    rate: int
    latency: int

    @property
    def cycles(self) -> int:
        """The task's duration in timed mode."""
        return math.ceil(self.amount / self.rate) + self.latency


def task_work(t: TaskTpl, regions: list[RegionInst], unit_type: str, unit_chars: UnitChars,
              profile: Profile) -> Work:
    if t.kind != COMPUTE:
        p = profile.get(unit_type, profile["DMA"])
        if "bandwidth" not in p:
            p = profile["DMA"]
        return Work(regions[1].extent, p["bandwidth"], p["latency"])
    n_in = t.n_in
    if unit_type == "NMU":
        y = regions[n_in]
        ny = math.prod(y.shape or (1,))
        a, w = regions[0], regions[1]
        op = t.op
        assert isinstance(op, ComputeOp)  # an NMU task is a compute op
        if op.SPEC.category == "convolution":
            ws: tuple[int, ...] = w.shape or (1,)
            k = math.prod(ws[:-2]) * (1 if t.opcode == "depthwise_conv2d" else ws[-2])
        else:
            trans_a = t.attrs_static.get("trans_a", 0)
            k = (a.shape or (1,))[-2 if trans_a else -1]
        return Work(ny * k, macs_per_cycle(a.elem, unit_chars, profile),
                    profile["NMU"]["latency"])
    p = profile.get(unit_type) or profile["CSTL"]
    if "throughput" not in p:
        p = profile["CSTL"]
    n = max(math.prod(r.shape) if r.shape else r.extent for r in regions)
    return Work(n, p["throughput"], p["latency"])
