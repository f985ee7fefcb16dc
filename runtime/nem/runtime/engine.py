"""Compiling NEM IR into executable templates and executing task instances.

The runtime interprets the NEM IR (`nem.program`) directly.  Each block
(program body, loop bodies) is compiled once into a list of instructions:
region declarations, tasks, waits and loops; `arith`/`nem.const`/`nem.let`
ops are pure and are folded into the compiled integer expressions that use
them.  An expression becomes a Python closure over the loop-variable vector
`iv` (`iv[d]` = value of the loop variable at nesting depth d+1), with `/`
and `mod` going through `expressions.apply_binop` (D-EXPR-MOD).

Task execution: transfers and stores copy the source into the destination
(TASK-06, TASK-10, D-SEM-TRANSFER); compute tasks call the kernel table
`nem.runtime.kernels.KERNELS[opcode](inputs, outputs, attrs)`.  Those effects
are bound per instance in `task_effects`; the timed cost is `task_cost`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

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
from nem.runtime.kernel_support import Attrs, BoundKernel, Kernel, Preparable, Tensor
from nem.runtime.kernels import KERNELS
from nem.runtime.memory import (
    BufferInfo,
    BufferSpec,
    Memory,
    MemoryError_,
    RegionInst,
)
from nem.runtime.quant import quant_of

if TYPE_CHECKING:
    from nem.dialect.families import Catalog
    from nem.runtime.escape_hatch import EscapeHatch

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

    def compute(
        ins: list[Tensor], outs: list[Tensor], attrs: dict[str, object]
    ) -> list[np.ndarray]:
        if attrs.get("op") == "mlir.kernel":
            return escape_hatch().run_task(ins, outs, attrs)
        return registry(ins, outs, attrs)

    def prepare(
        ins: list[Tensor], outs: list[Tensor], attrs: dict[str, object]
    ) -> BoundKernel | None:
        if attrs.get("op") == "mlir.kernel":
            return escape_hatch().prepare_task(ins, outs, attrs)
        return registry.prepare(ins, outs, attrs) if isinstance(registry, Preparable) else None

    return {**KERNELS, "compute": Preparable(compute, prepare)}


class RunError(Exception):
    """A runtime error at a task or statement: rule id, message, op, iteration
    and how to fix it (the `fix:` line of the diagnostic)."""

    def __init__(
        self,
        message: str,
        rule: str | None,
        op: Operation | None = None,
        where: str = "",
        fix: str | None = None,
    ) -> None:
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
            raise RunError(
                str(e), None, value.owner if isinstance(value.owner, Operation) else None
            ) from None


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
    __slots__ = (
        "op",
        "value",
        "name",
        "buffer",
        "offset",
        "extent",
        "shape",
        "strides",
        "elem",
        "quant",
        "static_inst",
        "depth",
        "level_name",
        "static_mem",
        "instances",
        "windows",
        "static",
        "slot",
        "_seen",
        "_seen_mem",
        "fixed_shape",
    )

    def __init__(
        self, op: RegionOp, comp: ExprCompiler, buffers: BufferInstances, depth: int
    ) -> None:
        self.op = op
        self.value = op.result
        self.depth = depth
        t = op.result.type
        bop = op.buffer.owner
        # a region's buffer operand is a buffer declaration (the verifier's BUF rules)
        self.instances, self.windows = buffers[cast(BufferOp, bop)]
        self.buffer: BufferInfo = self.instances[0]
        self.name = (
            op.region_name.data
            if op.region_name is not None
            else f"region({self.buffer.name}, ...)"
        )
        self.offset = comp.compile(op.offset)
        self.extent = comp.compile(op.extent)
        self.elem = t.elem_name if t.typed else None
        self.shape = tuple(comp.compile(v) for v in op.shape) if t.typed and op.shape else None
        self.strides = tuple(comp.compile(v) for v in op.strides) if op.strides else None
        self.quant = quant_of(t.quant_desc)
        self.static_inst: RegionInst | None = None
        self.static_mem: Memory | None = None
        self.static = self.is_static()
        self.fixed_shape = all(
            isinstance(p, int) for p in (*(self.shape or ()), *(self.strides or ()))
        )
        self.slot = -1  # its key in streams' environments (compile_program)
        self._seen: dict[RegionKey, RegionInst] = {}  # geometry -> RegionInst (`instantiate`)
        self._seen_mem: Memory | None = None

    def is_static(self) -> bool:
        parts = [self.offset, self.extent, *(self.shape or ()), *(self.strides or ())]
        return all(isinstance(p, int) for p in parts)

    def instantiate(
        self, memory: Memory, iv: Sequence[int], ords: Sequence[int] = ()
    ) -> RegionInst:
        """The region in the iteration with loop variables `iv` and ordinals
        `ords`: a loop-body buffer's instance is chosen by `ords` (D-SEM-INSTANCES)."""
        if self.static_mem is memory and self.static_inst is not None:
            return self.static_inst
        shape: tuple[int, ...] | None
        strides: tuple[int, ...] | None
        if self.static:  # every part an int (`is_static`)
            off, ext = cast(int, self.offset), cast(int, self.extent)
            shape, strides = cast(_Dims, self.shape), cast(_Dims, self.strides)
        else:
            try:
                off = ev(self.offset, iv)
                ext = ev(self.extent, iv)
                if self.fixed_shape:
                    shape, strides = cast(_Dims, self.shape), cast(_Dims, self.strides)
                else:
                    shape = tuple(ev(s, iv) for s in self.shape) if self.shape is not None else None
                    strides = (
                        tuple(ev(s, iv) for s in self.strides) if self.strides is not None else None
                    )
            except ExprError as e:
                raise RunError(
                    str(e),
                    "CONST-05",
                    self.op,
                    fix="make the expression defined for every iteration of its "
                    "loops (check the loop bounds)",
                ) from None
        b = (
            self.instances[instance_index(ords[: len(self.windows)], self.windows)]
            if self.windows and len(ords) >= len(self.windows)
            else self.buffer
        )
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
        r = RegionInst(
            self.name,
            lv,
            b,
            b.offset + off,
            ext,
            self.elem,
            shape,
            strides,
            self.quant,
            strides is None,
        )
        r.exact = self.elem is not None and self.shape is not None and self.fixed_shape
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
    __slots__ = (
        "op",
        "kind",
        "label",
        "opcode",
        "sync",
        "dep_refs",
        "region_refs",
        "attrs_static",
        "attrs_dyn",
        "resource",
        "seq_engine",
        "line",
        "seq_id",
        "produced",
        "consumed",
        "value",
        "depth",
        "unit_type",
        "memmove",
        "n_in",
        "slot",
    )

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
        self.region_refs: list[tuple[ValueRef, bool]] = []  # (value, is_write)
        self.attrs_static: Attrs = {}
        self.attrs_dyn: Attrs = {}  # values with closures of the loop variables
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
        self.slot = -1  # its token's key in streams' environments (compile_program)


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
        self.depth = depth  # depth of the loop's body
        self.body: list[Instr] = []
        loc = SourceLoc.of(op)
        self.line = loc.line if loc else 0


Instr = RegionTpl | TaskTpl | WaitTpl | LoopTpl
"""An instruction of a compiled block (a stream runs them in order)."""


@dataclass
class ValueRef:
    """Where an SSA value lives: `up` frames above the user's frame."""

    value: SSAValue
    depth: int  # depth of the defining block
    pos: int  # index of the defining instruction in its block (-1: unknown)
    slot: int  # its key in a stream's environment (`CompiledProgram.values`)


@dataclass
class CompiledProgram:
    prog: ProgramOp
    body: list[Instr]
    buffers: BufferInstances
    tasks: list[TaskTpl] = field(default_factory=list)
    regions: list[RegionTpl] = field(default_factory=list)
    loops: list[LoopTpl] = field(default_factory=list)
    replay: object = None  # nem.runtime.replay.Plan of the last recorded run
    values: list[SSAValue] = field(default_factory=list)
    """Region and task results by slot: streams' environments are keyed by slot
    numbers (hashing an int is cheaper than an xDSL value's `__hash__`)."""

    task_count: tuple[int | None, ...] = ()  # static_task_count's answer, once computed

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


def compile_program(
    prog: ProgramOp, memory: Memory, catalog: Catalog | None, accum_resolver: AccumResolver
) -> CompiledProgram:
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
                raise RunError(
                    f"the size of buffer '{op.buffer_name.data}' is not static",
                    "BUF-01",
                    op,
                    fix="give the buffer a size made of integers and consts",
                )
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
            raise RunError(
                "operand is not a region or task of this program",
                None,
                v.owner if isinstance(v.owner, Operation) else None,
            )
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


def _compile_attrs(
    t: TaskTpl, op: ComputeOp, comp: ExprCompiler, accum_resolver: AccumResolver
) -> None:
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
