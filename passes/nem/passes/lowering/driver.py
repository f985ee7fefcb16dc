"""The conversion driver of `convert-affine-to-nem`: one entry function ->
one `nem.program`, op by op through a class-keyed handler table
(`nem.passes.lowering.handlers.HANDLERS`: index_ops, memory_ops, loops, ...).

`Lowerer.lower_ops` looks each op's class up (the nearest class of its MRO
the table has: a subclass of a handled op is handled as it, `handler_of`)
and calls its handler with the
lowering context (`LoweringContext`, the state of the run) and the state of
the NEM block being filled (`BlockState`: where to build, which DMA tags are
pending, which ops were lowered with another one).  Handlers build
NEM IR with `nem.dialect.builder` at the block's insertion point; nested
regions (loop bodies, `nem_lowering.scope` bodies) are lowered by calling back
`lower_block`: their ops but the terminator, which the op holding the
block lowers with it (`block_ops`, D-LOW-WALK).  Tasks are emitted
without dependencies and waits:
`nem-synthesize-deps` adds them afterwards from the happens-before model.
A new construct is one handler function and one table entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import IsTerminator

from nem.dialect.attributes import MemLevelAttr
from nem.dialect.builder import NemBuilder
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.ops import ProgramOp
from nem.dialect.per_class import PerClass
from nem.passes.lowering import declare_allocations, declare_buffers, memref_globals
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.context import LoweringContext, Options
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.memory_ops import drop_unused_allocations
from nem.passes.lowering.memref_roots import MemrefRoots
from nem.passes.lowering.partial_tiles import PeelScope, check_narrowed
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.state import BlockState, Handler, Lowering
from nem.passes.lowering.views import View, buffer_bytes, check_elem, memref_strides


class Lowerer(Lowering):
    """Converts the entry function of a module into a NEM program."""

    def __init__(
        self,
        options: Options,
        handlers: dict[type[Operation], Handler],
        progress: Callable[[str, int, int], None] | None = None,
    ):
        self.options = options
        self.handlers = handlers
        """The lowering of each op class (`nem.passes.lowering.handlers.HANDLERS`)."""
        self._by_class = PerClass(self._handler_in_mro)
        """The handler of each op class met so far (`handler_of`)."""
        self.progress = progress
        """Told of each top-level op lowered (the driver's progress display)."""
        self.ctx: LoweringContext
        self.remarks: list[Diagnostic] = []
        """The summary remarks of `run` (with `remarks`), for the pass to report."""

    # -- blocks ---------------------------------------------------------------------
    def lower_ops(self, ops: Sequence[Operation], st: BlockState) -> None:
        """Lower `ops` (consecutive ops of one MLIR block, in order) into the
        block of `st`, skipping those lowered with another one (`st.skip`)."""
        for done, op in enumerate(ops):
            if st.top and self.progress is not None:
                self.progress("top-level ops lowered", done, len(ops))
            if op in st.skip:
                continue
            if st.top:
                # a scratch buffer reused by the next nest would be live across
                # both, and across every nest between its users: then no
                # packing can fit L1 (nem-share-buffers packs buffers by the
                # top-level statements that use them, D-LOW-SHARE)
                self.ctx.scratch.clear()
            handler = self.handler_of(type(op))
            if handler is None:
                raise reject(op, "unsupported operation")
            handler(self, op, st)

    def handler_of(self, cls: type[Operation]) -> Handler | None:
        """The handler of op class `cls`: the table's entry for the nearest
        class in its MRO (a subclass of a handled op, as NEM's contexts parse
        in place of xDSL's, `affine_ssa_maps.LoadOp`, is lowered as its base),
        None when no class there is handled.  Looked up once per class."""
        return self._by_class[cls]

    def _handler_in_mro(self, cls: type) -> Handler | None:
        handlers = self.handlers
        return next((handlers[c] for c in cls.__mro__ if c in handlers), None)

    def lower_block(self, src: Block, builder: NemBuilder) -> None:
        """Lower the ops of MLIR block `src` at `builder`'s insertion point
        (`block_ops`: its terminator is its parent's)."""
        self.lower_ops(self.block_ops(src), BlockState(builder))

    def block_ops(self, block: Block) -> list[Operation]:
        """The ops of `block` the walk lowers one by one: all but its
        terminator, which the op holding the block lowers with it, as an
        xDSL conversion pattern of a region op takes its region's
        terminator (D-LOW-WALK): a loop's `affine.yield` (the values it
        carries are the loop's, D-LOW-CARRIED), a scope's yield (its
        results, `handlers.lower_scope`), the function's return (nothing
        to lower)."""
        ops = list(block.ops)
        if ops and ops[-1].has_trait(IsTerminator):
            ops.pop()
        return ops

    # -- entry ------------------------------------------------------------------------
    def run(self, module: ModuleOp) -> ProgramOp:
        """`convert`, the entry's buffers and allocations declared first as
        `nem-declare-buffers` and `nem-declare-allocations` declare them
        (for a caller that ran neither; declared already, nothing changes)."""
        fn = entry_function(module, self.options.entry)
        declare_buffers.declare(fn)
        declare_allocations.declare(fn, self.options.spaces)
        return self.convert(module)

    def convert(self, module: ModuleOp) -> ProgramOp:
        """Convert the entry function, which the preparation passes have
        prepared (scf.for raised, dead arith dropped, ranges checked, buffers
        and allocations declared), into a `nem.program` that replaces the
        module's functions."""
        funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
        fn = entry_function(module, self.options.entry)
        self.ctx = ctx = _context(self.options, fn)
        body = Block()
        opts = self.options
        prog = ProgramOp(
            fn.sym_name.data,
            body,
            device_kind="name" if opts.device else None,
            device=opts.device,
            includes=(f"{opts.device}.nem",) if opts.device else (),
        )
        prog.location = fn.location
        for i, arg in enumerate(fn.body.block.args):
            if isinstance(arg.type, MemRefType):
                self._arg_buffer(fn, arg, i)
            elif isinstance(arg.type, IndexType):
                raise reject(
                    fn,
                    f"index argument #{i} has no NEM equivalent (NEM programs have no parameters)",
                    "make it a constant",
                )
            else:
                raise reject(fn, f"argument #{i} of type {arg.type} is not a memref")
        # the function as the scope of narrowings outside any peeled loop
        # (a DMA row leaving its memref where upstream unrolled a loop)
        globals_ = list(declare_buffers.declared_buffers(fn))
        for buffer in globals_:
            memref_globals.declare(ctx, buffer)
        root = PeelScope(fn, (fn,))
        with ctx.in_scope(root):
            self.lower_ops(
                self.block_ops(fn.body.block)[len(globals_) :],
                BlockState(NemBuilder.at_end(body, fn.location), top=True),
            )
            check_narrowed(root)
        drop_unused_allocations(ctx, fn)
        Rewriter.inline_block(ctx.decl_block, InsertPoint.at_start(body))
        memref_globals.finish(ctx, module, fn)  # its buffers name the globals: before fn goes
        for f in funcs:
            f.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
            f.erase()
        module.body.block.add_op(prog)
        if opts.remarks:
            self.remarks += summary_remarks(ctx, fn)
        return prog

    def _arg_buffer(self, fn: func.FuncOp, arg: BlockArgument, i: int) -> None:
        """A buffer at the level of its memory space, named as
        `nem-declare-buffers` named the argument."""
        ctx = self.ctx
        t = arg.type
        assert isinstance(t, MemRefType)
        elem = t.element_type
        check_elem(fn, elem)
        strides, off = memref_strides(fn, t)
        level = ctx.level(fn, t)
        if level != "DDR":
            ctx.summary.notes.append(f"argument {i} lives in {level}")
        name = declare_buffers.argument_name(fn, i)
        span = off + sum((d - 1) * s for d, s in zip(t.get_shape(), strides)) + 1
        buf = ctx.declare_buffer(name, level, buffer_bytes((span,), elem), fn.location)
        ctx.views[arg] = View(
            buf, MemLevelAttr(level), elem, tuple(t.get_shape()), strides, Aff.c(off), name
        )


def _context(options: Options, fn: func.FuncOp) -> LoweringContext:
    """The context of a run: the target's type families and token limit."""
    from nem.dialect.verifier import baseline_catalog

    catalog, device = baseline_catalog(), None
    if options.device:
        from nem.devices.device_lookup import find_device

        try:
            device = find_device(options.device, options.include_dirs, None)
        except NemDiagnosticError as e:
            for d in e.diagnostics:
                d.loc = d.loc or SourceLoc.of(fn)
            raise
        catalog = device.catalog
    return LoweringContext(
        options, catalog, device, MemrefRoots(fn), declare_buffers.resumed_names(fn)
    )


def summary_remarks(ctx: LoweringContext, fn: func.FuncOp) -> list[Diagnostic]:
    """What was raised and what fell back, then one remark per fallback at
    its nest saying why it was not raised (D-OPT-REMARKS)."""
    s = ctx.summary
    parts = [f"lowered @{fn.sym_name.data} to NEM"]
    counts: dict[str, list[str]] = {}
    for r in s.raised:
        where, _, what = r.rpartition(" -> ")
        counts.setdefault(what, []).append(where)
    raised = [
        f"{wheres[0]} -> {what}"
        if len(wheres) == 1
        else f"{len(wheres)} ops ({wheres[0]}, ...) -> {what}"
        for what, wheres in counts.items()
    ]
    parts.append("raised: " + (", ".join(raised) if raised else "none"))
    fallbacks = {f.what: f for f in s.fallback}  # a peeled loop lowers a nest twice
    # the first few only: each fallback has its own remark below (issue 12: one
    # readable line per nest, not one line listing them all)
    shown = list(fallbacks)[:FALLBACKS_LISTED]
    more = len(fallbacks) - len(shown)
    parts.append(
        "fell back to compute: "
        + (", ".join(shown) if shown else "none")
        + (f" and {more} more (a remark each)" if more else "")
    )
    if s.slotted:
        parts.append(
            f"{len(s.slotted)} buffer(s) with a slot per iteration in flight, hoisted "
            f"out of pipelined loops: {', '.join(s.slotted[:FALLBACKS_LISTED])}"
            + (", ..." if len(s.slotted) > FALLBACKS_LISTED else "")
        )
    notes = list(dict.fromkeys(s.notes))
    if notes:  # one per pipelined tile loop: a CNN has dozens (the first few, counted)
        parts.append(
            "; ".join(notes[:NOTES_LISTED])
            + (
                f"; and {len(notes) - NOTES_LISTED} more such notes"
                if len(notes) > NOTES_LISTED
                else ""
            )
        )
    return [Diagnostic("remark", "; ".join(parts), SourceLoc.of(fn))] + [
        EscapeRemark(
            "remark",
            f"{f.what} not raised, runs as an escape-hatch task "
            f'(compute op="mlir.kernel"): {_one_line(f.why)}',
            SourceLoc.of(f.op),
        )
        for f in fallbacks.values()
    ]


FALLBACKS_LISTED = 3
"""Fallbacks the summary remark names; the rest are counted."""

NOTES_LISTED = 8
"""Notes (pipelined and peeled loops, clipped DMAs) the summary remark names; the rest
are counted: a CNN has one per tile loop, dozens."""


@dataclass
class EscapeRemark(Diagnostic):
    """The remark that a nest (or linalg op) was not raised and runs as an
    escape-hatch task: its `loc` is the nest's.  Consumers that need the fact
    (`nem.compile.flops` counts escaped FLOPs by it) select these by type and
    read `loc`, never the message text, which may change."""


def _one_line(text: str, limit: int = 240) -> str:
    """`text` on one line, cut at `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."
