"""`convert-affine-to-nem`: func/affine/memref/linalg/arith (with the upstream
DMA ops of `nem.frontends.upstream_dialects`) -> one `nem.program`.

What becomes what (decisions D-LOW-* in docs/spec-decisions.md, "Lowering"):

- the entry `func.func` (option `entry`, default: the first public one)
  -> `nem.program` named after it; each memref argument -> a DDR buffer
  named after the argument (`%A` -> `A`, unnamed -> `argN`);
- `memref.alloc` (static shape; integer memory space mapped to a level by
  `memory-spaces`, default 0:DDR,1:L2,2:L1) -> a buffer declared at program
  scope (hoisted), with one slot per iteration in flight; `memref.dealloc`
  is dropped; a `memref<..xi32>` used only as DMA tags is no buffer;
- `affine.for` containing data movement -> `nem.loop v in [0..trip-1]`
  (inclusive, step 1; the MLIR index is `lb + v*step`, D-LOW-LOOP);
- `affine.dma_start`/`memref.dma_start` -> `transfer.async` with typed
  regions; the matching `dma_wait` (same tag memref, same tag index) ->
  `wait(token)` (D-LOW-DMA); an ambiguous or missing pairing is an error;
- `memref.copy` -> `transfer.sync`; `memref.subview` -> a view (offset,
  shape, strides) used for the regions;
- compute: `linalg.matmul`, `linalg.conv_2d_nhwc_hwcf`, elementwise named
  ops / `linalg.generic`, and affine loop nests computing a matmul or an
  elementwise op -> the NEM opcode (D-LOW-RAISE); any other loop nest -> a
  `compute` escape-hatch task (`nem.passes.kernel`, D-LOW-ESCAPE);
- software-pipelined loops as `affine-pipeline-data-transfer` produces them
  -> one loop over the original iterations under `@max_in_flight(2)` with
  ping-pong slots (D-LOW-PIPE);
- `async.execute`/`async.await`/groups are kept (bodies lowered) for
  `convert-async-to-nem`.

With `remarks=true`, a remark per function lists what was raised and what fell
back (opt-in, D-OPT-REMARKS).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass

from nem.dialect.attributes import BufferType, MaxInFlightAttr, MemLevelAttr
from nem.dialect.semantics import Evaluator
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.ops import BufferOp, LoopOp, ProgramOp, TransferOp, WaitOp
from nem.frontends.upstream_dialects.memref_copy import COPY_OPS, MemRefCopyOp
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects.dma import (
    AffineDmaStartOp,
    AffineDmaWaitOp,
    MemRefDmaStartOp,
    MemRefDmaWaitOp,
)
from nem.passes import pass_env
from nem.passes.raise_compute import is_tile_loop, lower_linalg, lower_nest
from nem.passes.lowering_core import (
    NEM_KEYWORDS,
    Aff,
    ExprEmitter,
    TaskRec,
    REGION_LOGS,
    Var,
    View,
    buffer_bytes,
    check_elem,
    check_value_ranges,
    depends_on,
    eval_map,
    is_index_arith,
    make_region,
    memref_strides,
    pick_minmax,
    reject,
    resolve_index,
)

DEFAULT_SPACES = "0:DDR,1:L2,2:L1"


def parse_spaces(text: str | tuple[str, ...]) -> dict[int, str]:
    """The `memory-spaces` option: `SPACE:LEVEL` (or `SPACE-LEVEL`) items
    separated by commas, e.g. `0:DDR,1:L2,2:L1[0]`; one string or xDSL's tuple
    of items.  `nem-opt` accepts the `:` form unquoted in a pass's `{...}`
    (it quotes the value before xDSL parses the pipeline, D-LOW-OPT-SPACES).  A bad
    item (space not an integer, unknown level, space mapped twice) is a
    one-line error naming the option and the item."""
    if not isinstance(text, str):
        text = ",".join(text)

    def bad(why: str) -> NemDiagnosticError:
        return NemDiagnosticError([Diagnostic("error", f"bad memory-spaces {why}")])

    items = [p.strip() for p in text.split(",")]
    if items == [""]:
        raise bad("value: empty (write memory-spaces=0:DDR,1:L2,2:L1)")
    out: dict[int, str] = {}
    for item in items:
        sep = ":" if ":" in item else "-"
        k, found, lvl = (s.strip() for s in item.partition(sep))
        if not found:
            raise bad(f"item '{item}': expected SPACE:LEVEL, e.g. 1:L2")
        if not (k.isascii() and k.isdigit()):
            raise bad(f"item '{item}': memory space '{k}' is not a non-negative integer")
        if lvl not in ("DDR", "L2", "L1") and not (
                lvl.startswith("L1[") and lvl.endswith("]") and lvl[3:-1].isascii()
                and lvl[3:-1].isdigit()):
            raise bad(f"item '{item}': unknown level '{lvl}' (levels: DDR, L2, L1, L1[k])")
        if int(k) in out:
            raise bad(f"item '{item}': memory space {int(k)} is already mapped to "
                      f"{out[int(k)]}")
        out[int(k)] = lvl
    return out


def _one_line(text: str, limit: int = 240) -> str:
    """`text` on one line, cut at `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


@dataclass
class Options:
    spaces: dict[int, str]
    device: str | None = None
    entry: str | None = None
    include_dirs: tuple[str, ...] = ()
    remarks: bool = False
    """Report the summary remark (what was raised, what fell back)."""


class Lowerer:
    def __init__(self, opts: Options):
        self.opts = opts
        self.names: set[str] = set()
        self.views: dict[SSAValue, View] = {}
        self.env: dict[SSAValue, Aff] = {}
        self.tags: set[SSAValue] = set()
        self.decls: list[Operation] = []
        self.raised: list[str] = []
        self.fallback: list[tuple[Operation, str, str]] = []   # (op, "what at L:C", why)
        self.notes: list[str] = []
        self.pipe_stack: list[Var] = []
        self.peeled = 0  # > 0 while lowering a peeled partial tile (D-LOW-PEEL)
        self.peel_stack: list[dict] = []  # per peeled iteration: loop, region log, narrowed DMAs
        self.tok_n = 0
        self.buf_n = 0
        self.async_map: dict[SSAValue, SSAValue] = {}
        # the executes being lowered, innermost last, each with the buffers its
        # tasks read and write and the regions it makes (`_execute_deps`)
        self.exec_stack: list[dict] = []
        # per NEM block, the executes lowered into it and not awaited yet
        self.block_execs: dict[Block, list[dict]] = {}
        self.completed: set[SSAValue] = set()  # execute tokens awaited early (`_await_now`)
        self.deferred_loads: dict[Operation, None] = {}  # scalar loads the kernels do
        self.catalog = None
        self.device_obj = None

    @property
    def token_limit(self) -> int | None:
        """The device's `SEQ.max_active_tokens` (DEV-17), None without one.
        The lowering keeps below it by waiting early (`add_task`,
        `_execute_deps`); `nem-verify` checks the exact count."""
        return self.device_obj.max_active_tokens if self.device_obj is not None else None

    # -- names ---------------------------------------------------------------
    def fresh(self, hint: str | None, default: str) -> str:
        base = hint if hint and hint.isidentifier() and hint not in NEM_KEYWORDS else None
        if base is None:
            base = default
            while f"{base}{self.buf_n}" in self.names:
                self.buf_n += 1
            name = f"{base}{self.buf_n}"
            self.buf_n += 1
        else:
            name, k = base, 1
            while name in self.names:
                name, k = f"{base}_v{k}", k + 1
        self.names.add(name)
        return name

    def token_name(self, kind: str) -> str:
        self.tok_n += 1
        name = f"{kind}{self.tok_n}"
        while name in self.names:
            self.tok_n += 1
            name = f"{kind}{self.tok_n}"
        self.names.add(name)
        return name

    # -- entry ---------------------------------------------------------------
    def run(self, module: ModuleOp) -> ProgramOp:
        funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
        if self.opts.entry:
            cands = [f for f in funcs if f.sym_name.data == self.opts.entry]
            if not cands:
                raise reject(funcs[0] if funcs else module, f"no func.func @{self.opts.entry} (option entry)")
        else:
            cands = [f for f in funcs if f.sym_visibility is None
                     or f.sym_visibility.data == "public"]
            if not cands:
                raise reject(funcs[0] if funcs else module, "no public func.func to lower",
                             "name one with entry=NAME")
        fn = cands[0]
        if not fn.body.blocks:
            raise reject(fn, "the entry function is only a declaration")
        if len(fn.body.blocks) > 1:
            raise reject(fn, "the entry function has several blocks (unstructured control flow)")
        self.fn = fn
        check_value_ranges(fn)
        self._setup_device(fn)
        body = Block()
        prog = ProgramOp(fn.sym_name.data, body,
                         device_kind="name" if self.opts.device else None,
                         device=self.opts.device,
                         includes=(f"{self.opts.device}.nem",) if self.opts.device else ())
        prog.location = fn.location
        self.loc = fn.location
        for i, arg in enumerate(fn.body.block.args):
            t = arg.type
            if isinstance(t, MemRefType):
                self._arg_buffer(fn, arg, i)
            elif isinstance(t, IndexType):
                raise reject(fn, f"index argument #{i} has no NEM equivalent (NEM programs "
                             "have no parameters)", "make it a constant")
            else:
                raise reject(fn, f"argument #{i} of type {t} is not a memref")
        from nem.passes.lowering_core import CONST_POOL

        CONST_POOL.append(({}, self.decls))
        # the function as the scope of narrowings outside any peeled loop
        # (a DMA row leaving its memref where upstream unrolled a loop)
        self.root_scope = dict(loop=fn, owners=(fn,), log=[], narrowed=[])
        REGION_LOGS.append(self.root_scope["log"])
        try:
            self.lower_block(fn.body.block, body, scope=[])
            self._check_narrowed(self.root_scope)
        finally:
            CONST_POOL.pop()
            REGION_LOGS.pop()
        for op in reversed(self.decls):
            if body.first_op is None:
                body.add_op(op)
            else:
                body.insert_op_before(op, body.first_op)
        for f in funcs:
            f.detach()
            f.erase()
        for op in list(module.ops):
            if op.name == "memref.global":
                raise reject(op, "memref.global has no NEM equivalent")
        module.body.block.add_op(prog)
        if self.opts.remarks:
            self._remark(fn)
        return prog

    def _setup_device(self, fn: func.FuncOp) -> None:
        from nem.dialect.verifier import baseline_catalog

        self.catalog = baseline_catalog()
        if self.opts.device:
            from nem.devices.device_lookup import find_device

            try:
                self.device_obj = find_device(self.opts.device, self.opts.include_dirs, None)
            except NemDiagnosticError as e:
                for d in e.diagnostics:
                    d.loc = d.loc or SourceLoc.of(fn)
                raise
            self.catalog = self.device_obj.catalog

    def _remark(self, fn: func.FuncOp) -> None:
        parts = [f"lowered @{fn.sym_name.data} to NEM"]
        counts: dict[str, list[str]] = {}
        for r in self.raised:
            where, _, what = r.rpartition(" -> ")
            counts.setdefault(what, []).append(where)
        raised = [f"{wheres[0]} -> {what}" if len(wheres) == 1 else
                  f"{len(wheres)} ops ({wheres[0]}, ...) -> {what}"
                  for what, wheres in counts.items()]
        parts.append("raised: " + (", ".join(raised) if raised else "none"))
        fallbacks = {what: (op, why) for op, what, why in self.fallback}
        parts.append("fell back to compute: " + (", ".join(fallbacks) if fallbacks else "none"))
        if self.notes:  # a loop lowered twice (in a peeled iteration) notes things twice
            parts.append("; ".join(dict.fromkeys(self.notes)))
        diags = [Diagnostic("remark", "; ".join(parts), SourceLoc.of(fn))]
        # one line per fallback, at the nest: why it was not raised
        diags += [Diagnostic("remark", f"{what} not raised, runs as an escape-hatch task "
                             f'(compute op="mlir.kernel"): {_one_line(why)}', SourceLoc.of(op))
                  for what, (op, why) in fallbacks.items()]
        pass_env.report(diags)

    # -- buffers ---------------------------------------------------------------
    def _declare_buffer(self, name: str, level: str, size: int, loc) -> SSAValue:
        e = ExprEmitter(Block(), loc)
        size_v = e.const(size)
        self.decls.extend(e.ops)
        lvl = MemLevelAttr(level)
        op = BufferOp(name, BufferType(lvl), size_v, 64, [])
        op.location = loc
        self.decls.append(op)
        return op.result

    def _arg_buffer(self, fn, arg, i: int) -> None:
        t = arg.type
        elem = t.element_type
        check_elem(fn, elem)
        strides, off = memref_strides(fn, t)
        level = self._level(fn, t)
        if level != "DDR":
            self.notes.append(f"argument {i} lives in {level}")
        name = self.fresh(arg.name_hint, "arg")
        if not arg.name_hint:
            self.names.discard(name)
            name = f"arg{i}" if f"arg{i}" not in self.names else name
            self.names.add(name)
        span = off + sum((d - 1) * s for d, s in zip(t.get_shape(), strides)) + 1
        size = buffer_bytes((span,), elem)
        buf = self._declare_buffer(name, level, size, fn.location)
        self.views[arg] = View(buf, MemLevelAttr(level), elem, t.get_shape(), strides,
                               Aff.c(off), name)

    def _level(self, op: Operation | None, t: MemRefType) -> str:
        ms = t.memory_space
        if isinstance(ms, IntegerAttr):
            k = ms.value.data
        elif ms is None or ms.name == "builtin.none" or type(ms).__name__ == "NoneAttr":
            k = 0
        else:
            raise reject(op, f"memory space {ms} is not an integer",
                         "use integer memory spaces and memory-spaces=0:DDR,1:L2,2:L1")
        if k not in self.opts.spaces:
            raise reject(op, f"memory space {k} is not mapped to a NEM level",
                         f"add {k}:LEVEL to the memory-spaces option")
        return self.opts.spaces[k]

    # -- blocks ------------------------------------------------------------------
    def lower_block(self, src: Block, dst: Block, scope: list[TaskRec],
                    skip: set[Operation] | None = None, stage_env=None) -> None:
        """Lower the ops of `src` into `dst`.  `scope` tracks the tasks of this
        NEM block (dependencies, pending waits)."""
        self.lower_ops(list(src.ops), dst, scope, skip, stage_env)
        # end of block: every task finishes before the block ends (D-LOW-DEPS)
        self.flush(dst, scope, src.parent_op() or self.fn)

    def lower_ops(self, ops: list[Operation], dst: Block, scope: list[TaskRec],
                  skip: set[Operation] | None = None, stage_env=None) -> None:
        """Lower `ops` (consecutive ops of one block, in order) into `dst`;
        `stage_env(op)` sets the environment of each op (a pipelined loop's
        stages)."""
        skip = set(skip or ())
        pipes: dict[Operation, tuple] = {}
        for op in ops:
            if isinstance(op, affine.ForOp):
                pl = self.detect_pipeline(op)
                if pl is not None:
                    pipes[op] = pl
                    skip.update(pl[0])
                    skip.update(pl[1])
        pending_tags: dict = {}
        for op in ops:
            if op in skip:
                continue
            if stage_env is not None:
                stage_env(op)
            self.lower_op(op, dst, scope, pending_tags, pipes)

    def flush(self, dst: Block, scope: list[TaskRec], at: Operation) -> None:
        pending = [t for t in scope if not t.waited]
        # only the sinks: tasks no other pending task depends on
        covered = {id(d) for t in pending for d in t.deps}
        sinks = [t for t in pending if id(t) not in covered]
        if sinks:
            w = WaitOp([t.token for t in sinks], [])
            w.location = self.loc_of(at)
            dst.add_op(w)
            for t in sinks:
                t.mark_waited()

    def loc_of(self, op: Operation | None):
        return op.location if op is not None and op.location is not None else self.loc

    # -- ops -----------------------------------------------------------------------
    def lower_op(self, op: Operation, dst: Block, scope, tags, pipes) -> None:  # noqa: C901
        name = op.name
        if isinstance(op, arith.ConstantOp):
            if isinstance(op.result.type, IndexType):
                self.env[op.result] = Aff.c(op.value.value.data)
            return
        if name in ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.remsi",
                    "arith.floordivsi", "arith.divui", "arith.remui", "arith.ceildivsi") \
                and isinstance(op.results[0].type, IndexType):
            a, b = (self.index(v, op) for v in op.operands)
            if name == "arith.addi":
                r = a + b
            elif name == "arith.subi":
                r = a - b
            elif name == "arith.muli":
                if not (a.is_const() or b.is_const()):
                    raise reject(op, "product of two non-constant indices is not affine")
                r = a.scale(b.const) if b.is_const() else b.scale(a.const)
            else:
                if not b.is_const() or b.const <= 0:
                    raise reject(op, "division by a non-constant or non-positive value")
                if name != "arith.floordivsi" and not a.nonneg():
                    raise reject(op, "signed division of a possibly negative index")
                if name in ("arith.remsi", "arith.remui"):
                    r = a.mod(b.const)
                elif name == "arith.ceildivsi":
                    r = (a + Aff.c(b.const - 1)).floordiv(b.const)
                else:
                    r = a.floordiv(b.const)
            self.env[op.results[0]] = r
            return
        if isinstance(op, affine.ApplyOp):
            self.env[op.result] = self.affine(op, op.map.data, op.mapOperands)[0]
            return
        if name in ("affine.min", "affine.max"):
            vals = self.affine(op, op.map.data, op.operands)
            r = pick_minmax(vals, name == "affine.min")
            if r is None:
                raise reject(op, "the operands of this affine.min/max differ across iterations "
                             "(a partial tile); NEM shapes are static",
                             "choose tile sizes that divide the iteration space")
            self.env[op.results[0]] = r
            return
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            self.lower_alloc(op)
            return
        if isinstance(op, memref.DeallocOp) or name in ("affine.yield", "func.return", "async.yield",
                                                         "memref.assume_alignment"):
            return
        if isinstance(op, memref.SubviewOp):
            self.lower_subview(op)
            return
        if isinstance(op, memref.CastOp):
            src = self.view(op.source, op)
            self.views[op.results[0]] = src
            return
        if isinstance(op, COPY_OPS):
            self.lower_copy(op, dst, scope)
            return
        if isinstance(op, AffineDmaStartOp | MemRefDmaStartOp):
            self.lower_dma_start(op, dst, scope, tags)
            return
        if isinstance(op, AffineDmaWaitOp | MemRefDmaWaitOp):
            self.lower_dma_wait(op, dst, scope, tags)
            return
        if isinstance(op, affine.ForOp):
            if op in pipes:
                self.lower_pipelined(op, pipes[op], dst, scope)
            elif self.is_structural(op) or is_tile_loop(self, op):
                self.lower_loop(op, dst, scope)
            else:
                lower_nest(self, op, dst, scope)
            return
        if name.startswith("linalg."):
            lower_linalg(self, op, dst, scope)
            return
        if isinstance(op, asy.ExecuteOp):
            self.lower_execute(op, dst, scope)
            return
        if isinstance(op, asy.AwaitOp | asy.CreateGroupOp | asy.AddToGroupOp | asy.AwaitAllOp):
            self.lower_async_misc(op, dst, scope)
            return
        if name in ("affine.load", "affine.store", "memref.load", "memref.store"):
            load = op if name.endswith("load") else op.value.owner
            if isinstance(load, Operation) and _copied_by(load) is not None:
                if load is not op:  # the store of a one-element copy (D-LOW-COPYNEST)
                    self.lower_scalar_copy(load, op, dst, scope)
                return
            if load is op and op.results[0].uses and all(
                    _in_loop_below(u.operation, op.parent_block()) for u in op.results[0].uses):
                # a scalar read only by loop nests: each kernel that uses it
                # loads it (`raise_compute._sunk_loads`, D-LOW-ESCAPE)
                self.deferred_loads[op] = None
                return
            raise reject(op, "a scalar access outside a loop nest has no NEM equivalent",
                         "wrap it in a loop nest (it becomes a compute task)")
        if name in ("affine.if", "affine.parallel") or name.startswith(("scf.", "cf.")):
            raise reject(op, "control flow other than affine.for is not supported at task level",
                         "keep conditionals inside a compute loop nest (its kernel runs them)")
        raise reject(op, "unsupported operation")

    # -- helpers ----------------------------------------------------------------
    def index(self, v: SSAValue, user: Operation) -> Aff:
        a = self.env.get(v)
        if a is None:
            if isinstance(v.type, IndexType):
                raise reject(user, f"index operand {v.name_hint or ''} is not an affine "
                             "function of loop indices and constants")
            raise reject(user, "expected an index operand")
        return a

    def affine(self, op: Operation, m, operands) -> list[Aff]:
        vals = [self.index(v, op) for v in operands]
        try:
            return eval_map(m, vals)
        except ValueError as e:
            raise reject(op, f"non-affine index: {e}") from None

    def view(self, v: SSAValue, user: Operation) -> View:
        vw = self.views.get(v)
        if vw is None:
            if v in self.tags:
                raise reject(user, "a DMA tag memref is used as data")
            raise reject(user, "memref operand does not come from a function argument, "
                         "memref.alloc or memref.subview")
        return vw

    def is_structural(self, loop: affine.ForOp) -> bool:
        """A loop that moves data or allocates becomes a NEM loop; a pure
        load/compute/store nest becomes one compute task."""
        for op in loop.walk():
            if op is loop:
                continue
            if isinstance(op, AffineDmaStartOp | AffineDmaWaitOp | MemRefDmaStartOp
                          | MemRefDmaWaitOp | memref.AllocOp | memref.AllocaOp | COPY_OPS
                          | asy.ExecuteOp | asy.AwaitOp) or op.name.startswith("linalg."):
                return True
        return False

    # -- allocs ------------------------------------------------------------------
    def lower_alloc(self, op) -> None:
        t = op.results[0].type
        if op.operands:
            raise reject(op, f"dynamic shape {t} is not supported: NEM buffers have static sizes",
                         "tile with static sizes")
        if op.results[0] in self.tags:
            return
        seen = self.views.get(op.results[0])
        if seen is not None and seen.base.is_const():
            return  # lowered before: a peeled iteration reuses its loop's buffers (D-LOW-PEEL)
        uses = [u.operation for u in op.results[0].uses]
        if uses and all(self._is_tag_use(u, op.results[0]) or isinstance(u, memref.DeallocOp)
                        for u in uses) and any(not isinstance(u, memref.DeallocOp) for u in uses):
            self.tags.add(op.results[0])
            return
        elem = t.element_type
        check_elem(op, elem)
        strides, off = memref_strides(op, t)
        if off:
            raise reject(op, "an allocation with a layout offset")
        level = self._level(op, t)
        nbytes = buffer_bytes(t.get_shape(), elem)
        slots = 2 if self.pipe_stack else 1
        name = self.fresh(op.results[0].name_hint, f"{level.split('[')[0]}_buf")
        buf = self._declare_buffer(name, level, nbytes * slots, op.location)
        base = Aff.c(0)
        if slots == 2:
            n_el = nbytes // View(buf, MemLevelAttr(level), elem, (), (), Aff.c(0), "").elem_bytes
            base = Aff.atom(self.pipe_stack[-1]).mod(2).scale(n_el)
            self.notes.append(f"{name} hoisted out of a pipelined loop with 2 slots")
        self.views[op.results[0]] = View(buf, MemLevelAttr(level), elem, t.get_shape(),
                                         strides, base, name)

    @staticmethod
    def _is_tag_use(u: Operation, v: SSAValue) -> bool:
        if isinstance(u, AffineDmaStartOp | MemRefDmaStartOp):
            return u.tag == v and u.src != v and u.dst != v
        if isinstance(u, AffineDmaWaitOp | MemRefDmaWaitOp):
            return True
        return False

    def lower_subview(self, op: memref.SubviewOp) -> None:
        src = self.view(op.source, op)
        dyn = -9223372036854775808
        offs, sizes, strs = (op.static_offsets.get_values(), op.static_sizes.get_values(),
                             op.static_strides.get_values())
        doff, dsz, dstr = list(op.offsets), list(op.sizes), list(op.strides)
        o_aff = []
        for v in offs:
            o_aff.append(self.index(doff.pop(0), op) if v == dyn else Aff.c(v))
        if dsz or dstr or dyn in sizes or dyn in strs:
            raise reject(op, "dynamic sizes or strides in memref.subview are not supported")
        base = src.base
        for o, s in zip(o_aff, src.strides):
            base = base + o.scale(s)
        rt = op.result.type
        kept_shape = rt.get_shape()
        # drop unit dims the result type removed (rank reduction)
        full = [(sz, src.strides[k] * strs[k]) for k, sz in enumerate(sizes)]
        if len(kept_shape) != len(full):
            kept, i = [], 0
            for sz, st in full:
                if i < len(kept_shape) and sz == kept_shape[i]:
                    kept.append((sz, st))
                    i += 1
                elif sz != 1:
                    raise reject(op, "unsupported rank-reducing subview")
            full = kept
        self.views[op.result] = View(src.buffer, src.level, src.elem, tuple(s for s, _ in full),
                                     tuple(st for _, st in full), base, src.name)

    # -- tasks -------------------------------------------------------------------
    def add_task(self, dst: Block, scope: list[TaskRec], build, reads: set, writes: set,
                 kind: str) -> TaskRec:
        """Create a task whose deps are the pending tasks it conflicts with.
        At the device's live-token budget (`SEQ.max_active_tokens`, DEV-17:
        the pending tasks of this block and of its executes not awaited yet)
        the pending tasks are waited first."""
        limit = self.token_limit
        if limit is not None and 1 + sum(not t.waited for t in scope) + sum(
                e["tasks"] for e in self.block_execs.get(dst, [])) >= limit:
            self.flush(dst, scope, None)
        if len(scope) > 8:
            scope[:] = [t for t in scope if not t.waited]
        deps = [t for t in scope if not t.waited and
                (t.writes & (reads | writes) or t.reads & writes)]
        # drop deps implied by other deps
        implied = set()
        for t in deps:
            stack = list(t.deps)
            while stack:
                x = stack.pop()
                if id(x) not in implied:
                    implied.add(id(x))
                    stack.extend(x.deps)
        deps = [t for t in deps if id(t) not in implied]
        op = build([t.token for t in deps], self.token_name(kind))
        dst.add_op(op)
        for ex in self.exec_stack:
            ex["reads"] |= reads
            ex["writes"] |= writes
            ex["tasks"] += 1
        rec = TaskRec(op.results[0], set(reads), set(writes), deps)
        scope.append(rec)
        return rec

    def dma_regions(self, op, dst_block: Block):
        """(src region op, dst region op, src view, dst view) of a DMA start."""
        if isinstance(op, AffineDmaStartOp):
            sidx = self.affine(op, op.src_map.data, op.src_operands)
            didx = self.affine(op, op.dst_map.data, op.dst_operands)
        else:
            sidx = [self.index(v, op) for v in op.src_indices]
            didx = [self.index(v, op) for v in op.dst_indices]
        sv, dv = self.view(op.src, op), self.view(op.dst, op)
        if sv.elem != dv.elem:
            raise reject(op, f"DMA from {sv.elem} to {dv.elem} would convert element types")
        n = self.index(op.num_elements, op)
        if not n.is_const():
            raise reject(op, "the element count of a DMA must be a constant")
        n = n.const
        stride = None
        if op.stride_info is not None:
            st, per = (self.index(v, op) for v in op.stride_info)
            if not (st.is_const() and per.is_const()) or per.const <= 0 or n % per.const:
                raise reject(op, "DMA stride and elements-per-stride must be constants dividing "
                             "the element count")
            stride = (st.const, per.const)
        # the strided side is the one in memory space 0 (upstream's definition),
        # else the source (D-LOW-DMA)
        s_space0 = self._space(op.src) == 0
        d_space0 = self._space(op.dst) == 0
        strided_is_src = s_space0 or not d_space0
        cols = None
        n, cols, stride = self._clip_partial(op, n, stride, strided_is_src,
                                             ((sv, sidx), (dv, didx)))
        regs = []
        for side, (vw, idx) in (("src", (sv, sidx)), ("dst", (dv, didx))):
            start = vw.base
            for a, s in zip(idx, vw.strides):
                start = start + a.scale(s)
            is_strided = stride is not None and (side == "src") == strided_is_src
            if cols is not None:  # narrowed rows of a partial innermost tile (D-LOW-PEEL)
                shape = [n // stride[1], cols]
                strides = [stride[0], 1] if is_strided else [stride[1], 1]
            elif is_strided and stride[0] != stride[1]:
                shape, strides = [n // stride[1], stride[1]], [stride[0], 1]
            else:
                shape, strides = self._contig_shape(vw, idx, n)
            self._check_bounds(op, vw, start, shape, strides)
            e = ExprEmitter(dst_block, op.location)
            regs.append(make_region(vw, start, shape, strides, op.location, e, op))
            dst_block.add_op(regs[-1])
        return regs[0], regs[1], sv, dv

    def _clip_partial(self, op, n: int, stride, strided_is_src: bool,
                      sides) -> tuple[int, int | None, tuple[int, int] | None]:
        """The element count of a DMA clipped to the prefix that lies inside
        both memrefs: affine-data-copy-generate copies the full tile's
        constant bounding box, whose rest is out of bounds (undefined in MLIR)
        and never used by a partial tile (D-LOW-PEEL; also outside a peeled
        loop, where upstream unrolled a pipelined loop).  Strided rows that
        run past the end of the dimension they step along (into the next
        slice of an outer dimension) are clipped to those inside it
        (`_spilled_rows`).  Also the narrowed row length (`cols`, else None)
        when the DMA's rows run past the end of a dimension (`_narrow_run`),
        in a peeled partial tile or not (upstream's unrolled pipelined loops:
        a write-back would otherwise store the fast buffer's undefined rest
        over the next row or slice).  A contiguous DMA is narrowed as one
        strided row of `n` (the stride it returns).  Every narrowing is
        checked for exactness by `_check_narrowed`."""
        keep = n
        cols = rows = None
        if stride is None:
            vw, idx = sides[0 if strided_is_src else 1]
            cols = self._narrow_run(op, n, vw, idx, (n, n), sides)
            if cols is not None:
                self._register_narrowed(op, n, None, cols, (n, n), strided_is_src, sides)
                return n, cols, (n, n)
        for k, (vw, idx) in enumerate(sides):
            start = vw.base
            for a, s in zip(idx, vw.strides):
                start = start + a.scale(s)
            rng = (start - vw.base).bounds()
            if rng is None or not vw.shape:
                continue
            span = sum((d - 1) * s for d, s in zip(vw.shape, vw.strides)) + 1
            strided = stride is not None and stride[0] != stride[1] and (k == 0) == strided_is_src
            if strided:
                st, per = stride
                rows = self._spilled_rows(op, n, vw, idx, stride)
                count = n // per if rows is None else rows
                cols = self._narrow_run(op, n, vw, idx, stride, sides)
            oks = []
            for lo in rng:  # the count must not depend on the loop variables
                if strided:
                    kept = 0
                    width = per if cols is None else cols
                    while kept < count and lo + kept * st + width <= span:
                        kept += 1
                    if kept < count and lo + kept * st < span and not self.peel_stack:
                        # outside a peeled tile nothing proves the in-bounds
                        # part of that row unused: dropping it could be wrong
                        raise reject(op, f"the access runs outside {vw.name} ({span} "
                                     "elements) in the middle of a strided row",
                                     "choose tile sizes that divide the iteration space")
                    oks.append(kept * per)
                else:
                    _, strides = self._contig_shape(vw, idx, n)
                    step = strides[-1] if strides else 1
                    oks.append(min(n, max(0, -(-(span - lo) // step))))
            if oks[0] != oks[1]:
                raise reject(op, f"the part of this DMA of a partial tile inside {vw.name} "
                             "depends on the loop variables; NEM shapes are static")
            keep = min(keep, oks[0])
        if cols is not None or rows is not None:
            self._register_narrowed(op, n, rows, cols, stride, strided_is_src, sides)
        if keep == n:
            return n, cols, stride
        if keep <= 0 or (stride is not None and keep % stride[1]):
            raise reject(op, "this DMA of a partial tile lies outside its memref and cannot be "
                         "clipped to whole rows")
        if rows is None or keep < rows * stride[1]:
            self.notes.append(f"DMA at {SourceLoc.of(op)} of the partial tile clipped to {keep} "
                              f"of {n} elements (the rest is outside the memref)")
        return keep, cols, stride

    def _spilled_rows(self, op, n: int, vw: View, idx: list[Aff], stride) -> int | None:
        """The number of rows of a strided DMA that lie inside the dimension
        they step along when they run past its end into the next slice of an
        outer dimension (a partial tile along a middle dimension, e.g. of a
        3-D tile copied one slice per DMA), else None.  The rows are
        `stride[0]` elements apart, the stride of dimension d of `vw`; rows
        that start at index 0 of d and cover whole slices of it continue in
        dimension d - 1 (a tile spanning all of d), where the same applies.
        Rows past the end of dimension 0 leave the memref: `_clip_partial`
        clips those.  The rows dropped here are checked by `_check_narrowed`
        (D-LOW-PEEL)."""
        st, per = stride
        count = n // per
        dims = [d for d in range(1, len(vw.shape)) if vw.strides[d] == st]
        unit = 1  # rows per index of dimension k
        for k in range(dims[0] if dims else 0, 0, -1):
            b = idx[k].bounds()
            if b is None or b[1] + -(-count // unit) <= vw.shape[k]:
                return None
            if b == (0, 0) and count % (vw.shape[k] * unit) == 0 \
                    and vw.strides[k - 1] == vw.shape[k] * vw.strides[k]:
                unit *= vw.shape[k]  # whole slices of k: rows go on along k - 1
                continue
            if b[0] != b[1]:
                raise reject(op, f"the rows of this strided DMA run past the end of dimension "
                             f"{k} of {vw.name} from a start that depends on the loop "
                             "variables; NEM shapes are static",
                             "choose tile sizes that divide the iteration space")
            rows = (vw.shape[k] - b[0]) * unit
            self.notes.append(f"DMA at {SourceLoc.of(op)} of the partial tile clipped to {rows} "
                              f"of {count} rows (a partial tile along dimension {k} of "
                              f"{vw.name})")
            return rows
        return None

    def _narrow_run(self, op, n: int, vw: View, idx: list[Aff], stride, sides) -> int | None:
        """The in-range element count of each row (`stride[1]` elements) of a
        DMA of `n` elements whose rows pass the end of a dimension of `vw`
        from a constant position (`_overflowing_run`): the elements past the
        end belong to the next row or slice.  None when they stay inside it."""
        run = _overflowing_run(vw, idx, stride[1])
        if run is None:
            return None
        d, lo, inner = run
        cols = (vw.shape[d] - lo) * inner
        if vw.strides[-1] != 1 or cols <= 0:
            raise reject(op, f"the rows of this DMA run past the end of dimension {d} of "
                         f"{vw.name} (a partial tile along it); NEM cannot narrow them exactly: "
                         + ("the innermost dimension is not contiguous" if vw.strides[-1] != 1
                            else "the rows start outside the memref"),
                         "choose tile sizes that divide the iteration space")
        self.notes.append(f"DMA at {SourceLoc.of(op)} of the partial tile narrowed to rows of "
                          f"{cols} of {stride[1]} elements (a partial tile along dimension {d} "
                          f"of {vw.name})")
        return cols

    def _register_narrowed(self, op, n: int, rows: int | None, cols: int | None, stride,
                           strided_is_src: bool, sides) -> None:
        """Record a DMA narrowed to `rows` rows (None: all) of `cols` columns
        (None: all) for the exactness checks of its scope (`_check_narrowed`):
        the peeled iteration, else the function.  Its fast-side buffer must be
        private to that scope (a `memref.alloc` in the peeled loop, or used
        only by it), so no use outside the scope sees the elements left out."""
        fast_val = op.dst if strided_is_src else op.src
        fvw, fidx = sides[1] if strided_is_src else sides[0]
        sv, sidx = sides[0] if strided_is_src else sides[1]

        def no(why: str):
            return reject(op, f"the rows of this DMA run past the end of a dimension of "
                          f"{sv.name} (a partial tile along it); NEM cannot narrow them "
                          f"exactly: {why}", "choose tile sizes that divide the iteration space")
        acc, rowmajor = 1, []
        for d in reversed(fvw.shape):
            rowmajor.append(acc)
            acc *= d
        if list(reversed(rowmajor)) != list(fvw.strides):
            raise no(f"{fvw.name} is not a contiguous buffer")
        top = self.peel_stack[-1] if self.peel_stack else self.root_scope
        alloc = fast_val.owner
        if not (isinstance(alloc, memref.AllocOp) and (top["loop"].is_ancestor(alloc) or all(
                isinstance(u.operation, memref.DeallocOp)
                or any(o.is_ancestor(u.operation) for o in top["owners"])
                for u in alloc.results[0].uses))):
            raise no(f"{fvw.name} is used outside the peeled loop")
        fstart = fvw.base
        for a, s in zip(fidx, fvw.strides):
            fstart = fstart + a.scale(s)
        sstart = sv.base
        for a, s in zip(sidx, sv.strides):
            sstart = sstart + a.scale(s)
        top["narrowed"].append(dict(
            op=op, read=strided_is_src, fast=fvw, fstart=fstart,
            mem=op.src if strided_is_src else op.dst, start=sstart, stride=stride,
            cols=stride[1] if cols is None else cols,
            rows=n // stride[1] if rows is None else rows, n=n, at=len(top["log"])))

    def _check_narrowed(self, entry: dict) -> None:
        """Exactness of the narrowed DMAs of one peeled iteration (D-LOW-PEEL).
        (1) Every region on a narrowed fast buffer made in the iteration (the
        buffer is allocated in the loop body, so these are all its uses) lies in
        the first `cols` elements of its `per`-element rows, and in the first
        `rows` rows of the DMA: the elements the narrowing leaves out are never
        read, so a narrowed read changes nothing observable.  (2) A narrowed
        write-back skips elements that in MLIR hold either nothing defined (no
        DMA wrote the fresh buffer: a fresh `memref.alloc` is undefined, so
        storing them stores undefined values) or what a read DMA of the same
        memref at the same start brought in, with no region on that memref in
        between: storing them back is the identity."""
        log = entry["log"]
        for rec in entry["narrowed"]:
            op, fvw, per, cols = rec["op"], rec["fast"], rec["stride"][1], rec["cols"]
            for vw, start, shape, strides, _anchor in log:
                if vw.buffer is not fvw.buffer:
                    continue
                rel = start - rec["fstart"]
                span = sum((d - 1) * s for d, s in zip(shape, strides))
                bounds = rel.bounds()
                if bounds is not None and (bounds[1] + span < 0 or bounds[0] >= rec["n"]):
                    continue  # outside what the DMA fills (e.g. the other ping-pong slot)
                acc = (rel, start, rec["fstart"], shape, strides)
                kept = rec["rows"] * per
                if not (shape and _fits(acc, per, cols) and _fits(acc, rec["n"], kept)):
                    raise reject(op, f"this strided DMA of a partial tile cannot be narrowed to "
                                 f"{rec['rows']} rows of {cols} of {per} elements: another "
                                 f"access to {fvw.name} may use the elements left out",
                                 "choose tile sizes that divide the iteration space")
            if rec["read"]:
                continue
            fills = [r for r in entry["narrowed"] if r["read"] and r["fast"].buffer is fvw.buffer]
            for r in fills:
                same = (r["mem"] is rec["mem"] and r["start"] == rec["start"]
                        and r["stride"] == rec["stride"] and r["at"] < rec["at"])
                between = [x for x in log[r["at"]:rec["at"]]
                           if x[0].buffer is self.views[rec["mem"]].buffer and x[4] is not r["op"]]
                if not same or between:
                    raise reject(op, f"this write-back of a partial tile cannot be narrowed: "
                                 f"the elements it would skip hold data of {fvw.name} that is "
                                 "not what the same addresses held",
                                 "choose tile sizes that divide the iteration space")

    def _space(self, v: SSAValue) -> int:
        ms = v.type.memory_space
        return ms.value.data if isinstance(ms, IntegerAttr) else 0

    @staticmethod
    def _contig_shape(vw: View, idx: list[Aff], n: int) -> tuple[list[int], list[int]]:
        """`n` contiguous elements from `idx`: the trailing dims when they fit."""
        shape = list(vw.shape)
        for k in range(len(shape)):
            tail = shape[k:]
            prod = 1
            for d in tail:
                prod *= d
            if prod == n and all(a.is_const() and a.const == 0 for a in idx[k:]):
                rowmajor, acc = [], 1
                for d in reversed(tail):
                    rowmajor.append(acc)
                    acc *= d
                if list(reversed(rowmajor)) == list(vw.strides[k:]):
                    return tail, list(vw.strides[k:])
        if vw.strides and vw.strides[-1] != 1:
            return [n], [vw.strides[-1]]
        return [n], [1]

    def _check_bounds(self, op, vw: View, start: Aff, shape, strides) -> None:
        last = sum((d - 1) * s for d, s in zip(shape, strides))
        span = sum((d - 1) * s for d, s in zip(vw.shape, vw.strides)) + 1 if vw.shape else 1
        lo = start - vw.base
        hi = lo.upper()
        if lo.is_const() and lo.const < 0 or (hi is not None and hi + last >= span
                                               and lo.nonneg()):
            raise reject(op, f"the access runs outside {vw.name} ({span} elements)")

    def lower_dma_start(self, op, dst: Block, scope, tags) -> None:
        key = self._tag_key(op)
        for k in tags:
            if k[0] == key[0] and tags[k] is not None and not self._distinct(k[1], key[1]):
                raise reject(op, "this DMA reuses a tag slot whose previous DMA has not been "
                             "waited (ambiguous pairing)", "wait on the earlier DMA first or use "
                             "another tag index")
        s, d, sv, dv = self.dma_regions(op, dst)

        def build(deps, tok):
            t = TransferOp(d.result, s.result, deps, False, tok, [])
            t.location = op.location
            return t

        rec = self.add_task(dst, scope, build, {sv.buffer}, {dv.buffer}, "dma")
        tags[key] = rec

    def _tag_key(self, op):
        if isinstance(op, AffineDmaStartOp | AffineDmaWaitOp):
            idx = self.affine(op, op.tag_map.data, op.tag_operands)
        else:
            idx = [self.index(v, op) for v in (op.tag_indices)]
        return (op.tag, tuple(idx))

    @staticmethod
    def _distinct(a: tuple, b: tuple) -> bool:
        for x, y in zip(a, b):
            diff = x - y
            if diff.is_const() and diff.const != 0:
                return True
        return False

    def lower_dma_wait(self, op, dst: Block, scope, tags) -> None:
        key = self._tag_key(op)
        rec = tags.get(key)
        others = [k for k, r in tags.items() if r is not None and k[0] == key[0] and k != key
                  and not self._distinct(k[1], key[1])]
        if rec is None and not others:
            raise reject(op, "no dma_start with this tag and index is pending in this block "
                         "(a DMA started in another iteration or scope cannot be paired)",
                         "start and wait the DMA in the same loop body, or use the form "
                         "affine-pipeline-data-transfer produces")
        if others:
            raise reject(op, "this dma_wait may match several pending DMAs (the tag indices "
                         "cannot be told apart)", "use distinct constant tag indices")
        tags[key] = None
        if rec.waited:
            return
        w = WaitOp([rec.token], [])
        w.location = op.location
        dst.add_op(w)
        rec.mark_waited()

    def lower_copy(self, op: memref.CopyOp | MemRefCopyOp, dst: Block, scope) -> None:
        sv, dv = self.view(op.source, op), self.view(op.destination, op)
        if sv.elem != dv.elem or sv.shape != dv.shape:
            raise reject(op, "memref.copy between different shapes or element types")
        regs = []
        for vw in (sv, dv):
            e = ExprEmitter(dst, op.location)
            regs.append(make_region(vw, vw.base, list(vw.shape), list(vw.strides), op.location,
                                    e, op))
            dst.add_op(regs[-1])

        def build(deps, tok):
            t = TransferOp(regs[1].result, regs[0].result, deps, True, tok, [])
            t.location = op.location
            return t

        rec = self.add_task(dst, scope, build, {sv.buffer}, {dv.buffer}, "copy")
        rec.mark_waited()  # .sync

    def lower_scalar_copy(self, load: Operation, store: Operation, dst: Block, scope) -> None:
        """`%v = load A[i]; store %v, B[j]` outside a loop nest (what
        affine-data-copy-generate emits for a one-element copy): a transfer
        of one element."""
        regs, views = [], []
        for acc in (load, store):
            vw = self.view(acc.memref, acc)
            idx = (self.affine(acc, acc.map.data, acc.indices)
                   if isinstance(acc, affine.LoadOp | affine.StoreOp)
                   else [self.index(v, acc) for v in acc.indices])
            start = vw.base
            for a, st in zip(idx, vw.strides):
                start = start + a.scale(st)
            self._check_bounds(acc, vw, start, [1], [1])
            e = ExprEmitter(dst, acc.location)
            regs.append(make_region(vw, start, [1], [1], acc.location, e, acc))
            dst.add_op(regs[-1])
            views.append(vw)

        def build(deps, tok):
            t = TransferOp(regs[1].result, regs[0].result, deps, False, tok, [])
            t.location = store.location
            return t

        self.add_task(dst, scope, build, {views[0].buffer}, {views[1].buffer}, "copy")

    # -- loops -----------------------------------------------------------------
    def loop_bounds(self, op: affine.ForOp) -> tuple[Aff, int, int]:
        lbm, ubm = op.lowerBoundMap.data, op.upperBoundMap.data
        # a max/min bound is taken when one candidate wins for every value of
        # the enclosing loop variables (e.g. in a peeled loop, D-LOW-PEEL)
        lb = pick_minmax(self.affine(op, lbm, op.lowerBoundOperands), False)
        ub = pick_minmax(self.affine(op, ubm, op.upperBoundOperands), True)
        if lb is None or ub is None:
            raise reject(op, "max/min loop bounds (partial tiles) are not supported: NEM loop "
                         "trip counts are static", "choose tile sizes that divide the "
                         "iteration space")
        step = op.step.value.data
        diff = ub - lb
        if not diff.is_const():
            raise reject(op, "the trip count of this loop depends on outer loops; NEM loops "
                         "need it static")
        trip = max(0, -(-diff.const // step))
        return lb, step, trip

    def new_loop(self, op: affine.ForOp, trip: int, dst: Block, decos) -> tuple[LoopOp, Var]:
        e = ExprEmitter(dst, op.location)
        lo, hi = e.const(0), e.const(trip - 1)
        e.flush()
        body = Block(arg_types=[IndexType()])
        hint = op.body.block.args[0].name_hint
        name = self.fresh(hint, "i")
        loop = LoopOp(name, lo, hi, body, decos)
        loop.location = op.location
        dst.add_op(loop)
        return loop, Var(body.args[0], name, trip)

    def lower_loop(self, op: affine.ForOp, dst: Block, scope) -> None:
        lb, step, trip = self.loop_bounds(op)
        self._carried_tokens(op, dst)
        if trip == 0:
            return
        self.flush(dst, scope, op)
        iv = op.body.block.args[0]
        partial = self._partial_tile_op(op, lb, step, trip)
        if partial is None:
            loop, var = self.new_loop(op, trip, dst, [])
            self.env[iv] = lb + Aff.atom(var).scale(step)
            self.lower_block(op.body.block, loop.block, [])
            return
        # D-LOW-PEEL: a NEM loop over the full tiles, then the last (partial)
        # iteration as straight-line tasks with its own static shapes
        def full_tiles():
            if trip > 1:
                loop, var = self.new_loop(op, trip - 1, dst, [])
                self.env[iv] = lb + Aff.atom(var).scale(step)
                self.lower_block(op.body.block, loop.block, [])

        def last_tile():
            self.env[iv] = lb + Aff.c((trip - 1) * step)
            self.lower_block(op.body.block, dst, [])

        self._peeled(op, partial, full_tiles, last_tile)

    def _carried_tokens(self, op: affine.ForOp, dst: Block) -> None:
        """Loop-carried `!async.token`s (`iter_args`): a NEM loop iteration
        starts after everything before the loop and the previous iteration
        completed (D-LOW-DEPS, D-LOW-ASYNC), so the carried token and the
        loop's result stand for completed work and add no dependency.  The
        initial token's execute is awaited before the loop to make that so
        (the first iteration depends on it in MLIR)."""
        for init, arg, res in zip(op.inits, op.body.block.args[1:], op.results):
            if not isinstance(arg.type, asy.TokenType):
                raise reject(op, f"not supported: a loop-carried value of type {arg.type} in a "
                             "loop that moves data (NEM loops carry no values)",
                             "carry only !async.token, or keep the reduction inside a "
                             "compute loop nest")
            if init not in self.async_map:
                raise reject(op, "the initial value of this loop-carried token does not come "
                             "from a lowered async op")
            if self.async_map[init] is not None and self.async_map[init] not in self.completed:
                self._await_now(self.async_map[init], dst, op)
            self.async_map[arg] = None
            self.async_map[res] = None

    def _peeled(self, op: affine.ForOp, partial: Operation, full_tiles, last_tile,
                owners: tuple[Operation, ...] = ()) -> None:
        """Lower a loop with a partial last tile: `full_tiles()` emits the loop
        over the others, `last_tile()` the peeled iteration, whose narrowed
        DMAs are then checked (D-LOW-PEEL).  `owners`: the ops besides the
        loop that belong to it (a pipelined loop's prologue and epilogue), so a
        buffer used only by them is private to the loop.  A failure is
        reported at the first min/max of the body, with the inner reason."""
        try:
            full_tiles()
            self.peeled += 1
            entry = dict(loop=op, owners=(op, *owners), log=[], narrowed=[])
            self.peel_stack.append(entry)
            REGION_LOGS.append(entry["log"])
            try:
                last_tile()
                self._check_narrowed(entry)
            finally:
                self.peeled -= 1
                self.peel_stack.pop()
                REGION_LOGS.pop()  # by position: equal logs may be nested
        except NemDiagnosticError as e:
            if any("peeling the last iteration" in d.message for d in e.diagnostics):
                raise  # an inner peeled loop already explains it
            why = "; ".join(d.message.removeprefix("cannot lower ") for d in e.diagnostics)
            head = ("the operands of this affine.min/max differ across iterations (a partial "
                    "tile)" if partial.name in ("affine.min", "affine.max") else
                    "max/min loop bounds (partial tiles) are not supported"
                    if isinstance(partial, affine.ForOp) else
                    "the epilogue of a pipelined loop that differs from its body (its last "
                    "iteration) is lowered on its own")
            raise reject(partial, f"{head}: peeling the last iteration of the loop at "
                         f"{SourceLoc.of(op)} fails: {why}",
                         "choose tile sizes that divide the iteration space") from None
        self.notes.append(f"loop at {SourceLoc.of(op)}: partial last tile peeled")

    def _partial_tile_op(self, op: affine.ForOp, lb: Aff, step: int,
                         trip: int) -> Operation | None:
        """The affine.min/max (op or max/min loop bound) that makes the last
        tile partial: one whose winning candidate is not the same in every
        iteration (e.g. `min(32, 100 - 32 * i)` after -affine-loop-normalize),
        else the first one of the body when the loop's step does not divide
        its range."""
        found = self._nonuniform_minmax(op, lb, step, trip)
        if found is not None:
            return found
        ub = pick_minmax(self.affine(op, op.upperBoundMap.data, op.upperBoundOperands), True)
        if ub is None or not (ub - lb).is_const() or (ub - lb).const % step == 0:
            return None
        for o in op.walk():
            if o is op:
                continue
            if o.name in ("affine.min", "affine.max") or (
                    isinstance(o, affine.ForOp) and (len(o.lowerBoundMap.data.results) > 1
                                                     or len(o.upperBoundMap.data.results) > 1)):
                return o
        return None

    # -- software pipelining (D-LOW-PIPE) ------------------------------------------
    def detect_pipeline(self, loop: affine.ForOp):
        """(prologue ops, epilogue ops, stage-0 ops) when `loop` is a loop
        produced by affine-pipeline-data-transfer, else None."""
        body = [o for o in loop.body.block.ops if not isinstance(o, affine.YieldOp)]
        iv = loop.body.block.args[0]
        stage0 = []
        for o in body:
            if isinstance(o, AffineDmaStartOp) and self._uses_mod2(o, iv):
                stage0.append(o)
            else:
                break
        if not stage0:
            return None
        rest = body[len(stage0):]
        parent = loop.parent_block()
        ops = list(parent.ops)
        i = ops.index(loop)
        # the prologue: the same starts just before the loop, up to index
        # arithmetic (which -affine-loop-invariant-code-motion may leave there)
        pro = [o for o in ops[:i] if not is_index_arith(o)][-len(stage0):]
        if len(pro) != len(stage0) or not all(
                isinstance(p, AffineDmaStartOp) and (p.src, p.dst, p.tag) == (s.src, s.dst, s.tag)
                for p, s in zip(pro, stage0)):
            return None
        # the epilogue: the rest of the body again, just after the loop, up
        # to index arithmetic, which may be interleaved, moved or gone (the
        # last iteration's value when the loop's upper bound is not a
        # constant; what -affine-loop-invariant-code-motion hoists); the
        # re-rolled loop computes its own indices, so only the other ops
        # are matched (and skipped)
        core = [o for o in rest if not is_index_arith(o)]
        epi = []
        for o in ops[i + 1:]:
            if len(epi) == len(core):
                break
            if not is_index_arith(o):
                epi.append(o)
        if len(epi) == len(core) and all(_shape_sig(a) == _shape_sig(b)
                                         for a, b in zip(epi, core)):
            return (pro, epi, stage0)
        return None

    @staticmethod
    def _uses_mod2(o: AffineDmaStartOp, iv) -> bool:
        for v, m, ops in ((o.dst, o.dst_map, o.dst_operands), (o.src, o.src_map, o.src_operands)):
            shape = v.type.get_shape()
            if shape and shape[0] == 2 and iv in ops and "mod 2" in str(m.data.results[0]):
                return True
        return False

    def lower_pipelined(self, op: affine.ForOp, pl, dst: Block, scope) -> None:
        _pro, epi, stage0 = pl
        lb, step, trip = self.loop_bounds(op)
        lb0 = lb - Aff.c(step)  # the original loop started one iteration earlier
        trip0 = trip + 1
        self.flush(dst, scope, op)
        iv = op.body.block.args[0]
        st0 = set(stage0)

        def at(x: Aff):
            # stage 0 (DMA starts) runs for iteration x, the rest for x when iv = x + step
            def stage_env(o):
                self.env[iv] = x if o in st0 else x + Aff.c(step)
            return stage_env

        partial = self._nonuniform_minmax(op, lb0, step, trip0, st0)
        last = lb0 + Aff.c((trip0 - 1) * step)
        rest = [o for o in op.body.block.ops if o not in st0 and not isinstance(o, affine.YieldOp)]
        as_body = self._epilogue_is_body(rest, epi, iv, last + Aff.c(step))
        if not as_body:
            partial = partial or epi[0]
        n_loop = trip0 - 1 if partial is not None else trip0

        def full_tiles():
            if n_loop == 0:
                return
            loop, var = self.new_loop(op, n_loop, dst, [MaxInFlightAttr(2)])
            self.pipe_stack.append(var)
            body_scope: list[TaskRec] = []
            self.lower_block(op.body.block, loop.block, body_scope,
                             stage_env=at(lb0 + Aff.atom(var).scale(step)))
            self.pipe_stack.pop()
            carried = self._carried(loop, var, body_scope)
            if carried:
                loop.properties.pop("decorators", None)
                self.notes.append(f"pipelined loop at {SourceLoc.of(op)} runs one iteration "
                                  f"at a time: {carried}")
            else:
                self.notes.append(f"pipelined loop at {SourceLoc.of(op)} -> ping-pong slots "
                                  "under @max_in_flight(2)")

        if partial is None:
            full_tiles()
            return

        def last_tile():
            if as_body:
                self.lower_block(op.body.block, dst, [], stage_env=at(last))
                return
            # the last iteration's DMA starts from the body, then the epilogue
            # itself (with the index arithmetic around it) for the rest
            ops = list(op.parent_block().ops)
            tail = ops[ops.index(op) + 1:ops.index(epi[-1]) + 1]
            last_scope: list[TaskRec] = []
            self.lower_ops([*stage0, *tail], dst, last_scope, stage_env=at(last))
            self.flush(dst, last_scope, op)

        self._peeled(op, partial, full_tiles, last_tile, (*pl[0], *pl[1]))

    def _epilogue_is_body(self, rest: list[Operation], epi: list[Operation], iv,
                          value: Aff) -> bool:
        """Whether the epilogue `epi` of a pipelined loop is the rest of its
        body `rest` at `iv = value` (the last iteration), as upstream's
        affine-pipeline-data-transfer emits it: op for op (index arithmetic
        aside), the same ops and attributes, every affine index of the same
        value, every other operand the same value or the corresponding one.
        Clean-ups after upstream (e.g. -canonicalize folding the last
        iteration's min bounds to constants) make them differ, and then the
        last iteration is lowered from the epilogue itself (D-LOW-PIPE)."""
        a_ops = [o for r in rest for o in r.walk() if not is_index_arith(o)]
        b_ops = [o for e in epi for o in e.walk() if not is_index_arith(o)]
        if len(a_ops) != len(b_ops):
            return False
        env_a, env_b, same = {iv: value}, {}, {}

        def bind(x: SSAValue, y: SSAValue) -> None:
            if isinstance(x.type, IndexType):  # a shared unknown for both sides
                env_a[x] = env_b[y] = Aff.atom(Var(None, "epilogue", 1))
            else:
                same[x] = y

        def index_of(v: SSAValue, env: dict) -> Aff | None:
            return resolve_index(v, env, self.env)

        for a, b in zip(a_ops, b_ops):
            shape_a = [len(blk.args) for r in a.regions for blk in r.blocks]
            shape_b = [len(blk.args) for r in b.regions for blk in r.blocks]
            if (a.name, len(a.operands), len(a.results), shape_a) != \
                    (b.name, len(b.operands), len(b.results), shape_b) \
                    or _plain_attrs(a) != _plain_attrs(b):
                return False
            grouped: set[SSAValue] = set()
            for (ma, va), (mb, vb) in zip(_index_groups(a), _index_groups(b)):
                grouped.update(va)
                xs = [index_of(v, env_a) for v in va]
                ys = [index_of(v, env_b) for v in vb]
                if None in xs or None in ys or eval_map(ma, xs) != eval_map(mb, ys):
                    return False
            for x, y in zip(a.operands, b.operands):
                if x in grouped:
                    continue
                if isinstance(x.type, IndexType):
                    ix, iy = index_of(x, env_a), index_of(y, env_b)
                    if ix is None or iy is None or ix != iy:
                        return False
                elif same.get(x, x) is not y:
                    return False
            for x, y in zip(a.results, b.results):
                bind(x, y)
            for ra, rb in zip(a.regions, b.regions):
                for ba, bb in zip(ra.blocks, rb.blocks):
                    for x, y in zip(ba.args, bb.args):
                        bind(x, y)
        return True

    def _nonuniform_minmax(self, op: affine.ForOp, lb: Aff, step: int, trip: int,
                           stage0: set | None = None) -> Operation | None:
        """The first affine.min/max (op or min/max loop bound) in the body of
        `op` whose winning candidate is not the same in every iteration: the
        last tile is partial and is peeled (D-LOW-PEEL).  In a re-rolled
        pipelined loop (D-LOW-PIPE) the ops of `stage0` run for iteration x
        and the others with the loop variable at x + step; there only these
        bounds tell, since `affine-pipeline-data-transfer` rounds the loop's
        upper bound up to whole steps."""
        var = Var(None, "x", trip)
        x = lb + Aff.atom(var).scale(step)
        iv = op.body.block.args[0]
        outside = _OutsideEnv(self.env, op)
        for top in op.body.block.ops:
            later = stage0 is not None and top not in stage0
            local = {iv: x + Aff.c(step) if later else x}
            for o in top.walk():
                if o.name in ("affine.min", "affine.max"):
                    bounds = [(o.map.data, o.operands, o.name == "affine.min")]
                elif isinstance(o, affine.ForOp):
                    bounds = [(o.lowerBoundMap.data, o.lowerBoundOperands, False),
                              (o.upperBoundMap.data, o.upperBoundOperands, True)]
                else:
                    continue
                for m, operands, is_min in bounds:
                    vals = [resolve_index(v, local, outside) for v in operands]
                    if len(m.results) < 2 or None in vals:
                        continue
                    try:
                        if pick_minmax(eval_map(m, vals), is_min) is None:
                            return o
                    except ValueError:
                        continue
        return None

    def _carried(self, loop: LoopOp, var: Var, scope: list[TaskRec]) -> str | None:
        """Why iterations may not overlap: a region written in every iteration
        that does not move with the loop variable (D-LOW-PIPE)."""
        from nem.dialect.ops import RegionOp, TaskOp

        accesses = []
        for op in loop.walk():
            if not isinstance(op, TaskOp):
                continue
            for v, mode in op.operand_regions():
                r = v.owner
                assert isinstance(r, RegionOp)
                if mode == "write" and not depends_on(r.offset, var.arg):
                    return (f"{r.buffer.owner.buffer_name.data} is written by every "
                            "iteration (loop-carried)")
                inner, up = [], op.parent_op()
                while up is not loop:  # the loops between the task and `loop`
                    if isinstance(up, LoopOp):
                        inner.append(up)
                    up = up.parent_op()
                accesses.append((r, mode == "write", inner))
        # Regions that move with the loop variable may still overlap between
        # consecutive iterations (e.g. interleaved strided DDR tiles, whose
        # extents cover the whole tile bounding box): compare the byte ranges
        # [offset, offset + extent) of iterations k and k + 1 (other loop
        # variables at 0; offsets are affine or `mod 2`, so k = 0, 1 covers
        # them), as nem-check-hazards does (D-HAZ-ACCESS, HAZ-03).
        ev = Evaluator()

        class Env(dict):
            def get(self, k, d=None):
                return super().get(k, 0)

        def ranges(k):
            # a task in an inner loop: the hull of its ranges at the corners
            # of the inner loops' ranges (exact for affine offsets)
            out = []
            for r, w, inner in accesses:
                lo = hi = None
                for corner in itertools.product(*[(ev.eval(lp.lower, Env()),
                                                   ev.eval(lp.upper, Env())) for lp in inner]):
                    env = Env({var.arg: k, **{lp.block.args[0]: c
                                              for lp, c in zip(inner, corner)}})
                    off, ext = ev.eval(r.offset, env), ev.eval(r.extent, env)
                    if None in (off, ext):
                        lo = hi = None
                        break
                    lo = off if lo is None else min(lo, off)
                    hi = off + ext if hi is None else max(hi, off + ext)
                out.append((r.buffer, lo, None if lo is None else hi - lo, w, r))
            return out

        for k in (0, 1):
            for b1, o1, e1, w1, r1 in ranges(k):
                for b2, o2, e2, w2, _ in ranges(k + 1):
                    if b1 is not b2 or not (w1 or w2):
                        continue
                    if None in (o1, e1, o2, e2) or (o1 < o2 + e2 and o2 < o1 + e1):
                        return (f"{r1.buffer.owner.buffer_name.data} is accessed at overlapping "
                                "bytes by consecutive iterations (HAZ-03)")
        return None

    # -- async -------------------------------------------------------------------
    def lower_execute(self, op: asy.ExecuteOp, dst: Block, scope) -> None:
        """An execute keeps its place with a NEM body (convert-async-to-nem
        inlines it).  `!async.value<T>` results (D-LOW-ASYNC-VALUE): a
        memref payload is the view of the memref the body yields (no copy),
        an index payload its affine value; each such value stands for the
        execute's token, so a body operand makes the execute depend on its
        producer and its block argument aliases the payload.  A used value
        of any other type is rejected."""
        for i, r in enumerate(op.body_results):
            if r.uses and not isinstance(r.type.value_type, MemRefType | IndexType):
                raise reject(op, f"not supported: result #{i + 1} of type {r.type} is used; "
                             "a scalar !async.value has no NEM equivalent (NEM tasks "
                             "exchange data only through buffers)",
                             "yield a memref holding the value (e.g. memref<1xf32>)")
        self.flush(dst, scope, op)
        deps = []
        for d in op.dependencies:
            if d not in self.async_map:
                raise reject(op, "dependency token does not come from an async.execute")
            if self.async_map[d] is not None:  # None: completed (a loop-carried token)
                deps.append(self.async_map[d])
        for v, arg in zip(op.body_operands, op.body_region.block.args):
            tok = self._async_val(op, v, payload_to=arg)
            if tok is not None and tok not in deps:
                deps.append(tok)
        body = Block()
        ex = dict(id=op, reads=set(), writes=set(), tasks=0, log=[])
        self.exec_stack.append(ex)
        REGION_LOGS.append(ex["log"])
        try:
            self.lower_block(op.body_region.block, body, [])
        finally:
            self.exec_stack.pop()
            REGION_LOGS.pop()
        y = asy.YieldOp()
        y.location = op.location
        body.add_op(y)
        deps += self._execute_deps(ex, dst, deps, op)
        new = asy.ExecuteOp(deps, [], [], Region(body))
        new.location = op.location
        dst.add_op(new)
        ex["token"] = new.token
        self.block_execs.setdefault(dst, []).append(ex)
        self.async_map[op.token] = new.token
        yielded = op.body_region.block.last_op
        for r, v in zip(op.body_results, yielded.operands if yielded is not None else ()):
            self.async_map[r] = new.token
            if isinstance(v.type, MemRefType) and r.uses:
                self.views[r] = self.view(v, yielded)
            elif isinstance(v.type, IndexType) and r.uses:
                self.env[r] = self.index(v, yielded)

    def _execute_deps(self, ex: dict, dst: Block, deps: list, op) -> list[SSAValue]:
        """Tokens of earlier executes of this NEM block that the execute `ex`
        must also wait for.  (1) Conflicts: MLIR runs independent executes
        in any order, and their accesses are disjoint in a valid program, but
        NEM's hazard rule compares byte extents (D-HAZ-ACCESS), so strided
        tiles of one buffer (e.g. two column tiles) overlap there; an
        execute whose regions overlap an earlier one's on a buffer either
        writes depends on it (an order MLIR allows, D-LOW-ASYNC).  (2) The
        device's live-token budget (`SEQ.max_active_tokens`, DEV-17): when the
        tasks of the executes not yet awaited would exceed it, the oldest ones
        are awaited first (`async.await`, emitted before the execute)."""
        earlier = [e for e in self.block_execs.get(dst, []) if e["token"] not in deps]
        extra = [e["token"] for e in earlier if _exec_conflict(e, ex)]
        limit = self.token_limit
        pending = self.block_execs.get(dst, [])
        while limit is not None and pending and \
                sum(e["tasks"] for e in pending) + ex["tasks"] >= limit:
            self._await_now(pending.pop(0)["token"], dst, op)
        return extra

    def _await_now(self, token: SSAValue, dst: Block, at: Operation) -> None:
        """Await an execute's token here, before MLIR does: it is complete
        from now on, so later awaits of it and its group membership (added
        before) are dropped, which ends its tokens' lives (D-TOK-LIVE)."""
        for use in list(token.uses):
            user = use.operation
            if isinstance(user, asy.AddToGroupOp) and not user.rank.uses:
                user.detach()
                user.erase()
        wait = asy.AwaitOp(token)
        wait.location = self.loc_of(at)
        dst.add_op(wait)
        self.completed.add(token)

    def lower_async_misc(self, op, dst: Block, scope) -> None:
        self.flush(dst, scope, op)
        if isinstance(op, asy.AwaitOp | asy.AddToGroupOp):
            # awaiting a value waits on its execute's token; the result
            # aliases the payload (D-LOW-ASYNC-VALUE)
            tok = self._async_val(op, op.operand, payload_to=op.result
                                  if isinstance(op, asy.AwaitOp) else None)
            if tok is None or tok in self.completed:
                return  # a completed (loop-carried or awaited) token: nothing to wait for
            if isinstance(op, asy.AwaitOp):
                for execs in self.block_execs.values():  # no longer pending
                    execs[:] = [e for e in execs if e["token"] is not tok]
                new = asy.AwaitOp(tok)
            else:
                new = asy.AddToGroupOp.create(operands=[tok, self._async_val(op, op.group)],
                                              result_types=[IndexType()])
        elif isinstance(op, asy.CreateGroupOp):
            e = ExprEmitter(dst, op.location)
            size = e.emit(self.index(op.size, op), op)
            e.flush()
            new = asy.CreateGroupOp.create(operands=[size], result_types=[asy.GroupType()])
        else:
            new = asy.AwaitAllOp.create(operands=[self._async_val(op, op.operand)])
        new.location = op.location
        dst.add_op(new)
        for o, n in zip(op.results, new.results):
            self.async_map[o] = n

    def _async_val(self, op, v: SSAValue, payload_to: SSAValue | None = None) -> SSAValue:
        """The lowered token or group of `v`; an `!async.value` maps to the
        token of the execute that produces it (D-LOW-ASYNC-VALUE), and
        `payload_to` (an await result or an execute body argument) becomes
        its payload: the same NEM view (memref) or affine value (index)."""
        if v not in self.async_map:
            if isinstance(v.type, asy.ValueType):
                raise reject(op, f"not supported: an {v.type} that does not come from an "
                             "async.execute")
            raise reject(op, "async operand does not come from a lowered async op")
        if payload_to is not None and isinstance(v.type, asy.ValueType):
            if v in self.views:
                self.views[payload_to] = self.views[v]
            elif v in self.env:
                self.env[payload_to] = self.env[v]
            elif payload_to.uses:
                raise reject(op, f"not supported: {v.type} (only memref and index payloads "
                             "have a NEM equivalent)",
                             "yield a memref holding the value (e.g. memref<1xf32>)")
        return self.async_map[v]


class _OutsideEnv:
    """The bindings of `env` for values defined outside `op`: those defined
    in its body may be stale, from an earlier lowering of the loop (a
    peeled outer iteration lowers it again)."""

    def __init__(self, env: dict, op: Operation):
        self.env, self.op = env, op

    def __contains__(self, v: SSAValue) -> bool:
        return v in self.env and not _defined_in(v, self.op)

    def __getitem__(self, v: SSAValue) -> Aff:
        return self.env[v]


def _col_bounds(a: Aff, per: int) -> tuple[int, int] | None:
    """The range of the column that the offset `a` falls in, in rows of `per`
    elements, when its terms that do not move it by whole rows keep it inside
    one row (else None): those terms plus the remainder of the constant."""
    b = Aff({k: v for k, v in a.terms.items() if v[1] % per}, a.const % per).bounds()
    return b if b is not None and b[0] >= 0 and b[1] < per else None


def _fits(access: tuple, pitch: int, width: int) -> bool:
    """Whether an access `(rel, start, fstart, shape, strides)` of a buffer a
    narrowed DMA fills from `fstart` (`rel` = start - fstart) stays in the
    first `width` of each `pitch` elements: counted from the DMA's start, or
    on the buffer's own grid when the DMA starts on it (e.g. a ping-pong
    slot).  True when nothing is left out (`width == pitch`)."""
    rel, start, fstart, shape, strides = access
    starts = ([rel] if rel.nonneg() else []) + (
        [start] if _col_bounds(fstart, pitch) == (0, 0) else [])
    return width == pitch or any(_offsets_within(x, pitch, width, shape, strides)
                                 for x in starts)


def _offsets_within(x: Aff, pitch: int, width: int, shape, strides) -> bool:
    """Whether every element `x + sum(i_d * strides[d])` of an access of
    `shape` provably lies in the first `width` elements of its `pitch`-element
    row: the column of `x` plus what the dimensions that do not step whole
    rows add stays below `width`."""
    col = _col_bounds(x, pitch)
    in_row = sum((d - 1) * s for d, s in zip(shape, strides) if s % pitch)
    return col is not None and col[1] + in_row < width


def _overflowing_run(vw: View, idx: list[Aff], n: int) -> tuple[int, int, int] | None:
    """For a contiguous DMA of `n` elements from `idx` of `vw`: (d, start,
    inner) when the run covers whole trailing dimensions after dimension
    d > 0 (`inner` elements per index of d) and its n // inner indices of d,
    from the constant `start`, pass the end of dimension d (a partial tile
    along it whose run spills into the next slice), else None."""
    inner = 1
    for d in reversed(range(len(vw.shape))):
        if vw.strides[d] != inner:
            return None
        if n % inner == 0 and n // inner <= vw.shape[d] and all(
                a.is_const() and a.const == 0 for a in idx[d + 1:]):
            b = idx[d].bounds()
            if d == 0 or b is None or b[1] + n // inner <= vw.shape[d]:
                return None  # (past the end of the memref: clipped, not narrowed)
            return (d, b[0], inner) if b[0] == b[1] else None
        inner *= vw.shape[d]
    return None


def _copied_by(load: Operation) -> Operation | None:
    """The store that only copies what `load` read (its one use, in the
    same block), else None."""
    if not isinstance(load, affine.LoadOp | memref.LoadOp):
        return None
    uses = list(load.results[0].uses)
    if len(uses) != 1:
        return None
    st = uses[0].operation
    ok = (isinstance(st, affine.StoreOp | memref.StoreOp) and st.value is load.results[0]
          and st.parent_block() is load.parent_block())
    return st if ok else None


def _defined_in(v: SSAValue, op: Operation) -> bool:
    """Whether `v` is a result or block argument inside `op`."""
    owner = v.owner
    if isinstance(owner, Block):
        owner = owner.parent_op()
    return owner is not None and op.is_ancestor(owner)


def _in_loop_below(op: Operation, block: Block) -> bool:
    """Whether `op` is inside an `affine.for` that is inside `block`."""
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
        if isinstance(op, affine.ForOp):
            return True
    return False


def _exec_conflict(a: dict, b: dict) -> bool:
    """Whether two executes (`Lowerer.exec_stack` records) access a common
    buffer, one of them writing it, in regions whose byte extents may overlap
    (D-HAZ-ACCESS; bounds over the loop variables, unknown bounds overlap)."""
    shared = (a["writes"] & (b["reads"] | b["writes"])) | (a["reads"] & b["writes"])

    def extents(log, buf):
        for vw, start, shape, strides, _anchor in log:
            if vw.buffer is buf:
                last = sum((d - 1) * s for d, s in zip(shape, strides))
                yield start.bounds(), last, vw.elem_bytes

    for buf in shared:
        for ra, la, ea in extents(a["log"], buf):
            for rb, lb, eb in extents(b["log"], buf):
                if ra is None or rb is None or (
                        ra[0] * ea < (rb[1] + lb + 1) * eb and rb[0] * eb < (ra[1] + la + 1) * ea):
                    return True
    return False


def _index_groups(op: Operation) -> list[tuple[AffineMap, tuple[SSAValue, ...]]]:
    """The affine maps of an op with the operands each applies to."""
    if isinstance(op, affine.ForOp):
        return [(op.lowerBoundMap.data, tuple(op.lowerBoundOperands)),
                (op.upperBoundMap.data, tuple(op.upperBoundOperands))]
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        return [(op.map.data, tuple(op.indices))]
    if isinstance(op, AffineDmaStartOp):
        return [(op.src_map.data, op.src_operands), (op.dst_map.data, op.dst_operands),
                (op.tag_map.data, op.tag_operands)]
    if isinstance(op, AffineDmaWaitOp):
        return [(op.tag_map.data, op.tag_operands)]
    if op.name in ("affine.min", "affine.max", "affine.apply"):
        return [(op.map.data, tuple(op.operands))]
    return []


def _plain_attrs(op: Operation) -> dict:
    """An op's properties and attributes but its affine maps (compared by
    their values, `_index_groups`) and operand segment sizes."""
    return {k: v for k, v in (*op.properties.items(), *op.attributes.items())
            if not isinstance(v, AffineMapAttr) and k != "operandSegmentSizes"}


def _shape_sig(op: Operation) -> tuple:
    """The structure of an op (names of it and its nested ops but index
    arithmetic), to match a pipelined loop's epilogue with its body."""
    return tuple(o.name for o in op.walk() if not is_index_arith(o))


@dataclass(frozen=True)
class ConvertAffineToNemPass(ModulePass):
    """Lower a func/affine/memref/linalg function (tiled, DMA or copy loops) to a NEM program.

    Options:
      memory-spaces: memref memory space to NEM level, e.g. 0:DDR,1:L2,2:L1[0]
      device: target device (its type families and token limit guide the lowering)
      entry: the func.func to lower (default: the first public one)
      remarks: report what was raised to NEM opcodes and what fell back
    """

    name = "convert-affine-to-nem"

    memory_spaces: tuple[str, ...] = (DEFAULT_SPACES,)
    device: str | None = None
    entry: str | None = None
    remarks: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        opts = Options(parse_spaces(self.memory_spaces), self.device, self.entry,
                       pass_env.current().include_dirs,
                       remarks=self.remarks)
        Lowerer(opts).run(op)

