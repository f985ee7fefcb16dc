"""Differential tests across a rewrite of the lowering (issue 36 item 1):
`lower-to-nem{device=npm_pro_x1 remarks=true}` of every public function of
the lowering's inputs, with the pipeline as declared and with it edited (a
pass left out, the conversion with another table or walk,
test_lowering_walk.py), must print the same
`.nem` and the same remarks or errors (test_lowering_outline_kernels.py,
test_lowering_memref_hints.py, test_lowering_async_groups.py,
test_lowering_async_awaits.py, test_lowering_declare_buffers.py,
test_lowering_declare_allocations.py, test_lowering_fold_index_arith.py);
so must `nem-compile` of the ONNX samples (`sample_before_and_after`).  A
handler two of them keep as it was lives here (`old_alloc`, whose unused
buffers every old pipeline's conversion drops: `old_allocations`), so does
the record of the globals' contents every old pipeline's conversion writes
(`old_globals`), the stack of the pipelined loops it lowers
(`old_pipelined`), and the table before `arith.addi`/`subi` left it
(`WITH_ADD_SUB`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields, replace
from pathlib import Path
from weakref import WeakKeyDictionary

import pytest
from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass, PassPipeline
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import ParseError

from nem.compile.lower import xdsl_context
from nem.dialect.attributes import MemLevelAttr
from nem.dialect.builder import NemBuilder
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError
from nem.dialect.ops import BufferOp
from nem.frontends.nem_text.printer import print_nem
from nem.frontends.upstream_dialects import parse_mlir
from nem.frontends.upstream_dialects.memref_global import GlobalOp
from nem.passes.driver import run_pipeline
from nem.passes.lowering import loops, memory_ops, memref_globals, staging
from nem.passes.lowering.affine_algebra import Aff, Var
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.index_ops import lower_index_binop
from nem.passes.lowering.memory_ops import allocation_buffers
from nem.passes.lowering.memref_globals import global_view as _global_view
from nem.passes.lowering.memref_roots import only_dma_tags
from nem.passes.lowering.passes import LowerToNemPass, PreparedConversionPass
from nem.passes.lowering.state import BlockState, Handler, Lowering
from nem.passes.lowering.views import View, buffer_bytes, check_elem, memref_strides

INPUTS = Path(__file__).resolve().parents[1] / "lit" / "lowering" / "Inputs"
MLIR_INPUTS = sorted(INPUTS.rglob("*.mlir"))
LIT_MLIR = sorted(INPUTS.parent.glob("*.mlir"))
"""The lit tests of the lowering that are MLIR themselves (globals.mlir, ...)."""

Steps = tuple[ModulePass, ...]
Outcome = tuple[str | None, list[tuple[str, str, str, str | None]]]


def entries(path: Path) -> list[str]:
    """The public functions of `path` (each an entry `lower-to-nem` may take)."""
    return entries_in(path.read_text())


def entries_in(text: str) -> list[str]:
    """The public functions of MLIR `text`; a text xDSL does not parse is
    skipped, with xDSL's reason (a transform script or its payload, a lit
    test of split inputs, an op xDSL lacks: lit runs them).  A test that
    needs its inputs to lower (a guard, a sweep's programs) takes
    `parsed_entries`, which fails where this skips."""
    try:
        return parsed_entries(text)
    except ParseError as e:
        reason = [ln.strip() for ln in str(e).splitlines() if ln.strip()][-1:]
        pytest.skip(f"xDSL does not parse it, lit runs it: {' '.join(reason)}")


def parsed_entries(text: str) -> list[str]:
    """The public functions of MLIR `text`, which xDSL must parse: a
    `ParseError` fails the test rather than skipping it, so a guard whose
    inputs stopped parsing cannot pass by being skipped."""
    module = parse_mlir(xdsl_context(), text)
    return [
        f.sym_name.data
        for f in module.ops
        if isinstance(f, func.FuncOp)
        and f.body.blocks
        and (f.sym_visibility is None or f.sym_visibility.data == "public")
    ]


def entries_if_parsed(path: Path) -> list[str]:
    """`parsed_entries` of `path`, none where xDSL does not parse it (a
    transform script: lit runs it), for a guard that counts what its
    parsed inputs raise or lower."""
    try:
        return parsed_entries(path.read_text())
    except ParseError:
        return []


def lower(
    text: str,
    entry: str,
    edit: Callable[[Steps], Steps] | None = None,
    weights: str | None = None,
    pipeline_tiles: bool = False,
) -> Outcome:
    """`lower-to-nem{device=npm_pro_x1 remarks=true}` of `entry` (with
    `weights=` and `pipeline-tiles=true` when given), its steps changed by
    `edit` when given: the `.nem` (None on an error) and the diagnostics
    (remarks, or the errors)."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    passes = LowerToNemPass(
        device="npm_pro_x1",
        entry=entry,
        remarks=True,
        weights=weights,
        pipeline_tiles=pipeline_tiles,
    ).pipeline()
    if edit is not None:
        passes = edit(passes)
    try:
        diags = run_pipeline(module, PassPipeline(passes), ctx=ctx)
    except NemDiagnosticError as e:
        return None, [_text(d) for d in e.diagnostics]
    return print_nem(module), [_text(d) for d in diags]


def assert_unchanged(path: Path, edit: Callable[[Steps], Steps]) -> None:
    """Every public function of `path` lowers to the same `.nem`, remarks
    and errors with `lower-to-nem`'s steps as declared and as `edit` gives
    them (the differential test of a rewrite)."""
    text = path.read_text()
    for entry in entries_in(text):
        assert lower(text, entry) == lower(text, entry, edit), entry


def _text(d: Diagnostic) -> tuple[str, str, str, str | None]:
    return d.severity, d.message, str(d.loc), d.fix


def before(
    dropped: type[ModulePass] | None,
    table: dict[type[Operation], Handler],
    pushed: list[int] | None = None,
) -> Callable[[Steps], Steps]:
    """The edit that gives `lower-to-nem`'s steps as they were before a pass
    of rewrite patterns took ops out of the conversion's table: pass
    `dropped` left out (None: none, the conversion's walk changed,
    D-LOW-WALK), the conversion converting with `table` (the old one) and
    the records of the old conversion (`old_allocations`, `old_globals`,
    `old_pipelined`, which appends the windows it pushes to `pushed`)."""

    class Conversion(PreparedConversionPass):
        def handlers(self) -> dict[type[Operation], Handler]:
            return table

        def apply(self, ctx: Context, op: ModuleOp) -> None:
            with old_allocations(), old_globals(), old_pipelined(pushed):
                super().apply(ctx, op)

    def edit(steps: Steps) -> Steps:
        out: list[ModulePass] = []
        for p in steps:
            if isinstance(p, PreparedConversionPass):
                p = Conversion(**{f.name: getattr(p, f.name) for f in fields(p)})
            if dropped is None or not isinstance(p, dropped):
                out.append(p)
        return tuple(out)

    return edit


def assert_old_pipeline(
    edit: Callable[[Steps], Steps],
    dropped: type[ModulePass],
    table: dict[type[Operation], Handler],
    cases: list[tuple[str, str]],
) -> None:
    """Lowering `cases` ((text, entry) pairs holding the ops the pass took
    out of the table) with `edit` (a `before`) runs the old pipeline: pass
    `dropped` never applies and the old table's own handlers (those not in
    `HANDLERS`) are called, where the new pipeline applies the pass; so a
    differential test with it compares with the old pipeline, not the new
    one with itself.  Counted by running them, not by reading the edit."""
    assert cases
    applied = [0]
    # each of the old table's own handlers (keyed by the function, not its
    # name: two handlers may share a name) -> the op classes it handles
    # there, and how often it ran
    handles: dict[Handler, list[str]] = {}
    calls: dict[Handler, int] = {}
    apply = dropped.apply

    def counted_apply(self: ModulePass, ctx: Context, op: ModuleOp) -> None:
        applied[0] += 1
        apply(self, ctx, op)

    def ran() -> dict[str, int]:
        return {", ".join(handles[h]): n for h, n in calls.items()}

    def counted(handler: Handler) -> Handler:
        def run(lw: Lowering, op: Operation, st: BlockState) -> None:
            calls[handler] += 1
            handler(lw, op, st)

        return run

    own = [cls for cls in table if HANDLERS.get(cls) is not table[cls]]
    assert own, "the old table has no handler of its own"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dropped, "apply", counted_apply)
        for cls in own:
            if not cls.has_trait(IsTerminator):  # its op's to lower (D-LOW-WALK)
                handler = table[cls]
                handles.setdefault(handler, []).append(cls.name)
                calls[handler] = 0
                m.setitem(table, cls, counted(handler))
        for text, entry in cases:
            lower(text, entry)
        assert applied[0] > 0 and not any(calls.values()), ran()
        applied[0] = 0
        for text, entry in cases:
            lower(text, entry, edit)
    # every handler of its own ran but a terminator's, which the walk leaves
    # to the op holding it: one the edit left out would go unseen if another
    # ran (an async.execute's and its await's)
    assert applied[0] == 0 and all(calls.values()), ran()


WITH_ADD_SUB: dict[type[Operation], Handler] = {
    **HANDLERS,
    arith.AddiOp: lower_index_binop,
    arith.SubiOp: lower_index_binop,
}
"""The conversion's table before `arith.addi`/`subi` left it (D-LOW-AFFINE,
session 34): a pipeline without `nem-fold-index-arith`, or without
`nem-mark-tile-loops` (the fold then leaves the tile loops' bodies), hands
them to the conversion."""


def old_alloc(lw: Lowering, op: memref.AllocOp | memref.AllocaOp, st: BlockState) -> None:
    """The conversion's handler of allocations before `nem-declare-allocations`
    (53cdc1f9: `memory_ops.lower_alloc`): each named when the conversion
    reaches it."""
    ctx = lw.ctx
    result = op.results[0]
    t = result.type
    assert isinstance(t, MemRefType)
    if op.operands:
        raise reject(
            op,
            f"dynamic shape {t} is not supported: NEM buffers have static sizes",
            "tile with static sizes",
        )
    seen = ctx.views.get(result)
    if seen is not None and seen.base.is_const():
        return
    if only_dma_tags(result):
        return
    elem = t.element_type
    check_elem(op, elem)
    strides, off = memref_strides(op, t)
    if off:
        raise reject(op, "an allocation with a layout offset")
    level = ctx.level(op, t)
    nbytes = buffer_bytes(t.get_shape(), elem)
    if seen is not None:
        n_el = nbytes // View(seen.buffer, seen.level, elem, (), (), Aff.c(0), "").elem_bytes
        ctx.views[result] = replace(seen, base=ctx.slot_base(st.block, op, n_el))
        return
    slots = ctx.slots(st.block)
    name = ctx.names.fresh(result.name_hint, f"{level.split('[')[0]}_buf")
    buf = ctx.declare_buffer(name, level, nbytes * slots, op.location)
    _OLD_ALLOCATED.setdefault(ctx.decl_block, []).append(buf)
    base = Aff.c(0)
    if slots >= 2:
        n_el = nbytes // View(buf, MemLevelAttr(level), elem, (), (), Aff.c(0), "").elem_bytes
        base = ctx.slot_base(st.block, op, n_el)
        ctx.summary.slotted.append(name)
    ctx.views[result] = View(
        buf, MemLevelAttr(level), elem, tuple(t.get_shape()), strides, base, name
    )


_OLD_ALLOCATED: WeakKeyDictionary[Block, list[SSAValue]] = WeakKeyDictionary()
"""The buffers `old_alloc` declared, by the declarations' block of the run
(the context's `allocated` before `memory_ops.allocation_buffers`)."""


def old_allocation_buffers(fn: func.FuncOp, decls: Block) -> list[BufferOp]:
    """`memory_ops.allocation_buffers` in the old pipeline: the buffers
    `old_alloc` declared, whose names no op of `fn` holds (the
    conversion named them), besides those the new one finds."""
    old = [b.owner for b in _OLD_ALLOCATED.pop(decls, [])]
    return allocation_buffers(fn, decls) + [op for op in old if isinstance(op, BufferOp)]


@contextmanager
def old_allocations() -> Iterator[None]:
    """The old pipeline's conversion drops the unused buffers `old_alloc`
    declared too (`old_allocation_buffers` in place of
    `memory_ops.allocation_buffers`)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(memory_ops, "allocation_buffers", old_allocation_buffers)
        yield


_OLD_INITIAL: WeakKeyDictionary[Operation, dict[str, tuple[GlobalOp, DenseIntOrFPElementsAttr]]]
_OLD_INITIAL = WeakKeyDictionary()
"""The initial contents of the globals whose buffers the conversion declared,
by their module, as it declared them (the context's `initial` before
`memref_globals.initial_contents`)."""


def old_global_view(ctx: LoweringContext, glob: GlobalOp, name: str) -> View:
    """`memref_globals.global_view` as it was (afca041d): the global's
    contents, when it has some, kept as its buffer is declared."""
    view = _global_view(ctx, glob, name)
    if isinstance(init := glob.initial_value, DenseIntOrFPElementsAttr):
        _OLD_INITIAL.setdefault(glob.parent_op(), {})[name] = (glob, init)
    return view


def old_initial_contents(
    fn: func.FuncOp,
) -> dict[str, tuple[GlobalOp, DenseIntOrFPElementsAttr]]:
    """`memref_globals.initial_contents` in the old pipeline: the contents
    `old_global_view` kept for `fn`'s module, in the order it kept them."""
    return _OLD_INITIAL.pop(fn.parent_op(), {})


@contextmanager
def old_globals() -> Iterator[None]:
    """The old pipeline's conversion writes the contents its declarations
    kept (`old_global_view`, `old_initial_contents`), not those its
    buffers name in the IR."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(memref_globals, "global_view", old_global_view)
        m.setattr(memref_globals, "initial_contents", old_initial_contents)
        yield


@contextmanager
def old_pipelined(pushed: list[int] | None = None) -> Iterator[None]:
    """The old pipeline's conversion keeps the pipelined loops it lowers on
    a stack (the context's `pipelined` before `context.pipelined_loop`,
    374a547d): `loops.nem_loop` pushes a loop with a window, its variable
    and window, while its body is lowered, and the slots, the slot base and
    the scratch buffers' key read the innermost, not the NEM block being
    filled.  Each push appends the window to `pushed` when given."""
    stack: list[tuple[Var, int]] = []
    nem_loop = loops.nem_loop

    @contextmanager
    def pushing(
        lw: Lowering, op: affine.ForOp, trip: int, st: BlockState, max_in_flight: int | None = None
    ) -> Iterator[tuple[NemBuilder, Var]]:
        with nem_loop(lw, op, trip, st, max_in_flight) as (body, var):
            if max_in_flight:
                stack.append((var, max_in_flight))
                if pushed is not None:
                    pushed.append(max_in_flight)
            try:
                yield body, var
            finally:
                if max_in_flight:
                    stack.pop()

    def slot_base(ctx: LoweringContext, at: Block, op: Operation, n_el: int) -> Aff:
        if not stack:
            return Aff.c(0)
        var, slots = stack[-1]
        return Aff.atom(var).mod(slots).scale(n_el)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(loops, "nem_loop", pushing)
        m.setattr(loops, "pipelined_loop", lambda at: stack[-1] if stack else None)
        m.setattr(staging, "pipelined_loop", lambda at: stack[-1][0].key if stack else None)
        m.setattr(LoweringContext, "slots", lambda ctx, at: stack[-1][1] if stack else 1)
        m.setattr(LoweringContext, "slot_base", slot_base)
        yield


OLD_ALLOCATIONS: dict[type[Operation], Handler] = {
    memref.AllocOp: old_alloc,
    memref.AllocaOp: old_alloc,
}
"""The table's entries of allocations before `nem-declare-allocations`."""


def sample_before_and_after(
    name: str,
    rewrite: type[ModulePass],
    made_by: Callable[[Operation], bool],
    table: dict[type[Operation], Handler],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> tuple[str, str, int]:
    """`nem-compile` of the ONNX sample `name` with the pass `rewrite`,
    counting the ops it made (`made_by`), and as before it (the pass left
    out, the conversion with `table`): (`.nem` with it, `.nem` before it,
    ops made)."""
    pytest.importorskip("onnx")
    from nem.compile import compile_onnx
    from nem.frontends.onnx import samples

    model = samples.MODELS[name]("f32")
    made: list[int] = []
    apply = rewrite.apply

    def counted(self: ModulePass, ctx: Context, op: ModuleOp) -> None:
        apply(self, ctx, op)
        made.append(sum(1 for o in op.walk() if made_by(o)))

    with monkeypatch.context() as m:
        m.setattr(rewrite, "apply", counted)
        after = compile_onnx(model, stem=str(tmp_path / "after")).nem
        m.setattr(PreparedConversionPass, "handlers", lambda self: table)
        m.setattr(memory_ops, "allocation_buffers", old_allocation_buffers)
        m.setattr(memref_globals, "global_view", old_global_view)
        m.setattr(memref_globals, "initial_contents", old_initial_contents)
        m.setattr(rewrite, "apply", lambda self, ctx, op: None)
        with old_pipelined():
            old = compile_onnx(model, stem=str(tmp_path / "before")).nem
    return after, old, sum(made)
