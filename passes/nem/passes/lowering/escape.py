"""The escape hatch (D-LOW-ESCAPE): a loop nest or linalg op that is not
raised becomes

    t = compute.async in R_in0, ... out R_out0, ... op="mlir.kernel"
          kernel="<generic MLIR text of func.func @kernel>" index_args=[e0, e1, ...]

`kernel` is one line of generic MLIR holding `func.func @kernel(...)`; its
arguments are, in order: one memref per task operand (ins, then outs) whose
shape and element type are the region's (`memref<SHAPExELEM>`, identity
layout: index the region's elements by their logical indices), then one
`index` per entry of `index_args` (NEM integer expressions, evaluated per
iteration: the outer loop indices and values the nest uses).  Memrefs that
the nest both reads and writes are outs only, so outs are read-modify-write:
the runtime passes their current contents.  Executing the body once on those
arguments is the whole task: the runtime compiles it natively or interprets it
with xDSL's interpreter, with one semantics (D-RT-MLIR-KERNEL, D-RT-MLIR-JIT;
`runtime/nem/runtime/mlir_kernel.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from io import StringIO
from typing import Any

from xdsl.dialects import affine, arith, func, linalg, memref
from xdsl.dialects.builtin import FunctionType, IndexType, MemRefType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.printer import Printer

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.view_op import LOWERING_MARKS, written_name
from nem.frontends.upstream_dialects.linalg_softmax import SoftmaxOp
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.context import Fallback, LoweringContext
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.emit import expr
from nem.passes.lowering.loop_ranges import Box, accessed_boxes
from nem.passes.lowering.memref_roots import MEMREF_VIEWS
from nem.passes.lowering.partial_tiles import RegionAccess
from nem.passes.lowering.staging import drop_unused_scratch, full_region, name_task
from nem.passes.lowering.state import BlockState, Lowering


def location_text(op: Operation) -> str:
    """`LINE:COL` of an op, as the remark names it."""
    loc = op.location
    line, col = getattr(loc, "line", None), getattr(loc, "column", None)
    return f"{line.data}:{col.data}" if line is not None and col is not None else "?"


def memref_label(v: SSAValue) -> str:
    """A memref as a message names it: `%A` for a function argument, `%alloc
    (memref.alloc at 20:5)` for an op's result (xDSL keeps `%alloc_8`'s
    name as `alloc`, so the op's position tells such names apart)."""
    owner = v.owner
    hint = f"%{v.name_hint}" if v.name_hint else None
    if isinstance(owner, Operation):
        where = f"{written_name(owner)} at {location_text(owner)}"
        return f"{hint} ({where})" if hint else f"the result of {where}"
    assert isinstance(v, BlockArgument)
    return hint or f"argument #{v.index}"


def linalg_operands(op: Operation) -> tuple[list[SSAValue], list[SSAValue]]:
    """(ins, outs) of a linalg op: the structured ops' `inputs`/`outputs`,
    `linalg.reduce`/`linalg.broadcast`'s `input`/`init` (xDSL's names),
    `linalg.softmax`'s `input`/`output`."""
    for i, o in (("inputs", "outputs"), ("input", "init"), ("input", "output")):
        # each accessor once (an operand group's accessor builds it per call)
        ins: Any = getattr(op, i, _ABSENT)
        if ins is _ABSENT:
            continue
        outs: Any = getattr(op, o, _ABSENT)
        if outs is _ABSENT:
            continue
        return (
            [ins] if isinstance(ins, SSAValue) else list(ins),
            [outs] if isinstance(outs, SSAValue) else list(outs),
        )
    return [], list(op.operands)


_ABSENT = object()

LINALG_OPS: tuple[type[Operation], ...] = (*linalg.Linalg.operations, SoftmaxOp)
"""The linalg op classes the conversion lowers (`compute.lower_linalg`), and
`nem-outline-kernels` decides too (D-LOW-OUTLINE)."""


def emit_escape(
    lw: Lowering,
    top: Operation,
    st: BlockState,
    reason: str,
    what: str,
    after: Sequence[Operation] = (),
) -> None:
    """One `compute op="mlir.kernel"` task running `top` (the contract above),
    then the ops `after` it that use its results (`carried_out`), which the
    block then skips."""
    ctx = lw.ctx
    body = [*top.walk(), *(x for a in after for x in a.walk())]
    sunk = _sunk_loads(ctx, top, body)
    ins_m, outs_m, index_vals, consts = kernel_operands(top, body, sunk)

    def kernel() -> str:  # once the regions exist: each memref has its view
        arg_types = [MemRefType(ctx.views[m].elem, ctx.views[m].shape) for m in (*ins_m, *outs_m)]
        kfn = kernel_function([top, *after], ins_m, outs_m, index_vals, consts, sunk, arg_types)
        text = kernel_line(kfn)
        kfn.erase(safe_erase=False)
        return text

    def log_boxes() -> None:
        if ctx.scopes and isinstance(top, affine.ForOp) and not after:
            log_accessed_boxes(ctx, top, accessed_boxes(top, ctx.env))

    emit_kernel(lw, top, st, (ins_m, outs_m, index_vals), kernel, what, reason, log_boxes)
    st.skip.update(after)


def kernel_operands(
    top: Operation, body: Sequence[Operation], sunk: Sequence[Operation]
) -> tuple[list[SSAValue], list[SSAValue], list[SSAValue], list[SSAValue]]:
    """The values the kernel of `body` (`top`'s ops and those run after it)
    and its `sunk` loads takes from outside, in order of first use: the
    memrefs it reads only (ins), those it writes (outs, read-modify-write),
    the index values (its `index_args`), and the constants it clones; a
    located error for another operand (a scalar defined outside) or a
    kernel that writes no memref.  With no memref read only, the first out
    is an in too."""
    reads: dict[SSAValue, None] = {}
    writes: dict[SSAValue, None] = {}
    index_vals: dict[SSAValue, None] = {}
    consts: dict[SSAValue, None] = {}
    inside = set(body) | set(sunk)
    for o in [*sunk, *body]:
        # a view's source is read or written where the view is; the view
        # itself reads it (the kernel takes it: a view no access uses too)
        view = isinstance(o, MEMREF_VIEWS)
        linalg_ins = len(linalg_operands(o)[0]) if o.name.startswith("linalg.") else 0
        for i, v in enumerate(o.operands):
            if isinstance(v.type, MemRefType):
                v = _viewed(v, inside)
            owner = v.owner
            if isinstance(owner, Operation) and owner in inside:
                continue
            if isinstance(v, BlockArgument) and v.block.parent_op() in inside:
                continue
            if isinstance(v.type, MemRefType):
                if isinstance(o, affine.StoreOp | memref.StoreOp):
                    writes[v] = None
                elif isinstance(o, affine.LoadOp | memref.LoadOp) or (view and i == 0):
                    reads[v] = None
                elif o.name.startswith("linalg."):
                    (reads if i < linalg_ins else writes)[v] = None
                else:
                    reads[v] = None
                    writes[v] = None
            elif isinstance(owner, arith.ConstantOp):
                consts[v] = None
            elif isinstance(v.type, IndexType):
                index_vals[v] = None
            else:
                raise reject(
                    o,
                    f"operand of type {v.type} defined outside the loop nest cannot "
                    "be passed to a compute kernel",
                )
    if not writes:
        raise reject(top, "this loop nest writes no memref (nothing to lower)")
    ins = [m for m in reads if m not in writes]
    # `compute in [] out ...` cannot be written: a kernel reading no memref
    # it does not write takes its first out as an in too (its first argument)
    return ins or [next(iter(writes))], list(writes), list(index_vals), list(consts)


def emit_kernel(
    lw: Lowering,
    anchor: Operation,
    st: BlockState,
    operands: tuple[Sequence[SSAValue], Sequence[SSAValue], Sequence[SSAValue]],
    kernel: Callable[[], str],
    what: str,
    why: str,
    log_boxes: Callable[[], None] = lambda: None,
) -> None:
    """The `compute op="mlir.kernel"` task of `kernel()` (one line of
    generic MLIR, made once the regions are: a memref without a view fails
    there) on `operands`: the regions of its (ins, outs) memrefs and its
    index values' NEM expressions; `log_boxes` logs what it touches in
    D-LOW-PEEL's scopes, after its regions.  Both the escape hatch and
    `nem_lowering.kernel` (D-LOW-OUTLINE) emit it."""
    ctx = lw.ctx
    drop_unused_scratch(ctx)
    ins_m, outs_m, index_vals = (list(x) for x in operands)
    b = st.builder
    with b.located(anchor.location):
        own = {m: full_region(ctx, b, m, anchor)[0] for m in ins_m if m not in outs_m}
        out_regs = [full_region(ctx, b, m, anchor)[0] for m in outs_m]
    # an in that is also an out (the first out of a kernel reading no other
    # memref, `kernel_operands`) passes the out's region
    in_regs = [own[m] if m in own else out_regs[outs_m.index(m)] for m in ins_m]
    log_boxes()
    attrs: dict[str, object] = {"op": "mlir.kernel", "kernel": kernel()}
    if index_vals:
        attrs["index_args"] = [expr(ctx.index(v, anchor), anchor) for v in index_vals]
    with b.located(anchor.location):
        tok = b.compute("compute", in_regs, out_regs, attrs=attrs)
    name_task(ctx, tok, "compute")
    ctx.summary.fallback.append(Fallback(anchor, what, why))


CARRIED = (
    "a value carried out of the loop (iter_args) is stored after it: the task runs "
    "the loop and the ops storing its result (D-LOW-CARRIED)"
)
"""Why a loop with results is not raised (the remark)."""


def carried_out(top: affine.ForOp) -> list[Operation]:
    """The ops after loop `top` in its block that its results (values
    carried out of it by `iter_args`) flow into: `arith`/`math` ops on them
    and the stores of the outcome, which its kernel runs after the loop
    (D-LOW-CARRIED); a located error when a result has any other use (a
    loop nest, an op in another block: NEM tasks pass values only through
    memory) or when an op between the loop and the last of them may access
    memory (running the stores before it could change what it sees)."""
    block = top.parent_block()
    assert block is not None
    ops = list(block.ops)
    later = ops[ops.index(top) + 1 :]
    # in program order, so that the use reported first is the same every run
    flowing: dict[SSAValue, None] = dict.fromkeys(top.results)
    taken: list[Operation] = []
    for o in later:
        if not any(v in flowing for v in o.operands):
            continue
        stored = isinstance(o, affine.StoreOp | memref.StoreOp) and not any(
            v in flowing for v in o.operands[1:]
        )
        if not (stored or _pure(o)):
            raise _carried_use(top, o)
        taken.append(o)
        flowing.update(dict.fromkeys(o.results))
    for v in flowing:
        for use in v.uses:
            if use.operation not in taken:
                raise _carried_use(top, use.operation)
    span = later[: later.index(taken[-1])] if taken else []
    for o in span:
        if o not in taken and not _pure(o):
            raise reject(
                top,
                f"not supported: {o.name} at {location_text(o)} runs between "
                "this loop and the store of the value it carries out (iter_args) at "
                f"{location_text(taken[-1])}; the loop and the store are one task "
                "(D-LOW-CARRIED)",
                f"move the {o.name} before the loop, or store the loop's result right after it",
            )
    return taken


SCALAR = (
    "arithmetic on scalars outside a loop nest (a 0-d tensor): the task runs the "
    "loads, the arithmetic and the stores (D-LOW-SCALAR)"
)
"""Why a scalar statement is one escape-hatch task (the remark)."""


def scalar_statement(load: Operation) -> list[Operation] | None:
    """The ops of `load`'s block, in order, that compute and store scalar
    values from it outside any loop nest (D-LOW-SCALAR): the scalars it
    meets through their uses and operands (`arith`/`math` ops, other scalar
    loads of the block, stores of an outcome; constants, indices and
    memrefs are operands); None when one of those values has another user
    (e.g. a loop nest, whose kernel loads it itself) or when an op that may
    access memory runs among them (running the group at once could change
    what it reads or what that op sees)."""
    block = load.parent_block()
    assert block is not None
    group: dict[Operation, None] = {}
    todo = [load]
    while todo:
        o = todo.pop()
        if o in group:
            continue
        if o.parent_block() is not block or not _scalar_member(o):
            return None
        group[o] = None
        todo += [use.operation for r in o.results for use in r.uses]
        todo += [
            v.owner
            for v in o.operands
            if isinstance(v.owner, Operation)
            and not isinstance(v.owner, arith.ConstantOp)
            and not isinstance(v.type, IndexType | MemRefType)
        ]
    ops = list(block.ops)
    members = sorted(group, key=ops.index)
    if not any(isinstance(o, affine.StoreOp | memref.StoreOp) for o in members):
        return None
    span = ops[ops.index(members[0]) : ops.index(members[-1]) + 1]
    if any(
        o not in group and (o.regions or any(isinstance(v.type, MemRefType) for v in o.operands))
        for o in span
    ):
        return None
    return members


def _scalar_member(o: Operation) -> bool:
    """A load, an `arith`/`math` op on scalars (not index arithmetic) or a
    store of a scalar: what a scalar statement may hold."""
    if isinstance(o, affine.LoadOp | memref.LoadOp | affine.StoreOp | memref.StoreOp):
        return True
    return (
        _pure(o)
        and not isinstance(o, affine.ApplyOp)
        and not any(isinstance(r.type, IndexType) for r in o.results)
    )


def _pure(op: Operation) -> bool:
    """Arithmetic without memory effects (`arith`, `math`, `affine.apply`)."""
    return not op.regions and (
        op.dialect_name() in ("arith", "math") or isinstance(op, affine.ApplyOp)
    )


def _carried_use(top: Operation, user: Operation) -> NemDiagnosticError:
    """The error for a use of a carried-out value that the kernel cannot take."""
    where, parent = user, user.parent_op()
    while where.parent_block() is not top.parent_block() and parent is not None:
        where, parent = parent, parent.parent_op()
    what = (
        "which is neither arith/math arithmetic nor a store"
        if where is user
        else f"inside the {where.name} at {location_text(where)}"
    )
    return reject(
        top,
        f"not supported: the value this loop carries out (iter_args) is used by "
        f"{user.name} at {location_text(user)}, {what}: NEM tasks pass values only "
        "through memory (D-LOW-CARRIED)",
        "store the loop's result to a memref right after the loop, and load it where it is used",
    )


def copied_by(load: Operation) -> Operation | None:
    """The store that only copies what `load` read (its one use, in the
    same block), else None."""
    if not isinstance(load, affine.LoadOp | memref.LoadOp):
        return None
    uses = list(load.results[0].uses)
    if len(uses) != 1:
        return None
    st = uses[0].operation
    ok = (
        isinstance(st, affine.StoreOp | memref.StoreOp)
        and st.value is load.results[0]
        and st.parent_block() is load.parent_block()
    )
    return st if ok else None


def _in_loop_below(op: Operation | None, block: Block | None) -> bool:
    """Whether `op` is inside an `affine.for` that is inside `block`."""
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
        if isinstance(op, affine.ForOp):
            return True
    return False


def kernel_function(
    ops: Sequence[Operation],
    ins_m: Sequence[SSAValue],
    outs_m: Sequence[SSAValue],
    index_vals: Sequence[SSAValue],
    consts: Sequence[SSAValue],
    sunk: Sequence[Operation],
    arg_types: Sequence[Attribute],
) -> func.FuncOp:
    """`func.func @kernel` (the contract above) running clones of `sunk`
    then `ops` on its arguments: one per memref of `ins_m` then `outs_m`,
    of the region types `arg_types` (one per memref), then one `index` per
    value of `index_vals`; the constants `consts` are cloned into it.  The
    originals are untouched, so the conversion can print it as the task's
    `kernel` and `nem_lowering.kernel` (D-LOW-OUTLINE) can hold it."""
    types = [*arg_types, *[IndexType()] * len(index_vals)]
    block = Block(arg_types=types)
    mapper: dict[SSAValue, SSAValue] = {}
    for m, a in zip((*ins_m, *outs_m), block.args):
        mapper.setdefault(m, a)
    for v, a in zip(index_vals, block.args[len(ins_m) + len(outs_m) :]):
        mapper[v] = a
    for c in consts:
        owner = c.owner
        assert isinstance(owner, Operation)
        cl = owner.clone()
        block.add_op(cl)
        mapper[c] = cl.results[0]
    for load in sunk:
        block.add_op(load.clone(value_mapper=mapper))
    for op in ops:
        block.add_op(op.clone(value_mapper=mapper))
    block.add_op(func.ReturnOp())
    _drop_lowering_marks(block)
    return func.FuncOp("kernel", FunctionType.from_lists(types, []), Region(block))


def _drop_lowering_marks(block: Block) -> None:
    """The kernel is the user's nest: the marks preparation passes leave
    for the conversion (`scf.for` raised to `affine.for` names what it
    replaces, D-LOW-SCF) are dropped from the clones, not printed."""
    for op in block.walk():
        for name in [n for n in op.attributes if n.startswith(LOWERING_MARKS)]:
            del op.attributes[name]


def kernel_line(kfn: func.FuncOp) -> str:
    """A kernel function as the task's `kernel` attribute holds it: one
    line of generic MLIR, without locations."""
    buf = StringIO()
    Printer(stream=buf, print_generic_format=True, print_debuginfo=False).print_op(kfn)
    return " ".join(line.strip() for line in buf.getvalue().splitlines())


def log_accessed_boxes(ctx: LoweringContext, top: Operation, accessed: dict[SSAValue, Box]) -> None:
    """In a scope of D-LOW-PEEL's narrowing checks, log what the kernel task
    emitted at `top` (an escape-hatch nest, a `nem_lowering.kernel`) really
    touches of each memref operand (`accessed`: the bounding box of its
    accesses over its loops' ranges, `loop_ranges.accessed_boxes`) instead
    of the whole buffer its region passes: the checks are about the elements
    a task reads or writes, and the kernel runs the nest's accesses as
    written."""
    boxes: dict[SSAValue, tuple[Aff, list[int]] | None] = {}
    for mem, (firsts, extents) in accessed.items():
        if mem not in ctx.views:  # a view the nest makes itself (the kernel runs it):
            source = _viewed(mem, set(top.walk()))
            boxes[ctx.view(source, top).buffer] = None  # the whole region
            continue
        vw = ctx.view(mem, top)
        start = vw.base
        for a, s in zip(firsts, vw.strides):
            start = start + a.scale(s)
        box = (start, extents)
        seen = boxes.setdefault(vw.buffer, box)
        if seen is not None and (seen[1] != extents or seen[0] != start):
            boxes[vw.buffer] = None  # several views or boxes: keep the whole region
    for scope in ctx.scopes:
        for i, acc_r in enumerate(scope.log):
            found = boxes.get(acc_r.view.buffer)
            if acc_r.anchor is top and found is not None:
                scope.log[i] = RegionAccess(
                    acc_r.view, found[0], tuple(found[1]), acc_r.view.strides, top
                )


def _viewed(mem: SSAValue, inside: Container[Operation]) -> SSAValue:
    """The memref that `mem` is a view of when views made by the kernel's
    ops `inside` make it (the first source defined outside them), else
    `mem`: a kernel that makes a view reads or writes that memref, whole
    (D-LOW-ESCAPE)."""
    while isinstance(owner := mem.owner, MEMREF_VIEWS) and owner in inside:
        mem = owner.operands[0]
    return mem


def loaded_by_kernels(op: Operation) -> bool:
    """Whether `op` is a scalar load whose value only loop nests below its
    block use (e.g. a scale factor read before the nest; a one-element
    copy's load is a `nem_lowering.element_copy`'s by now, D-LOW-SCALAR-COPY):
    it has no task of its own, and the kernel of each nest using the
    value loads it itself (`_sunk_loads`, D-LOW-ESCAPE).  Read from the MLIR
    alone, so that what the conversion skips and what a kernel sinks are one
    fact (D-LOW-OUTLINE)."""
    if not isinstance(op, affine.LoadOp | memref.LoadOp):
        return False
    uses = op.results[0].uses
    block = op.parent_block()
    return bool(uses) and all(_in_loop_below(u.operation, block) for u in uses)


def _sunk_loads(ctx: LoweringContext, top: Operation, body: list[Operation]) -> list[Operation]:
    """The scalar loads outside the kernel's ops `body` (`top` and what runs
    after it) whose values they use (`loaded_by_kernels`), in the order the
    body uses them: the kernel does them itself (D-LOW-ESCAPE).  That reads
    the memref later than MLIR does, so nothing between the load and `top`
    may touch the loaded buffer."""
    inside = set(body)
    loads = {
        v.owner: None
        for o in body
        for v in o.operands
        if isinstance(v.owner, Operation) and v.owner not in inside and loaded_by_kernels(v.owner)
    }
    for load in loads:
        assert isinstance(load, affine.LoadOp | memref.LoadOp)
        buf = ctx.view(load.memref, load).buffer
        block = load.parent_block()
        anchor: Operation | None = top
        while anchor is not None and anchor.parent_block() is not block:
            anchor = anchor.parent_op()
        if anchor is None or block is None:
            raise reject(top, "this loop nest uses a value loaded in another block")
        ops = list(block.ops)
        for o in ops[ops.index(load) + 1 : ops.index(anchor)]:
            for x in o.walk():
                if any(
                    isinstance(v.type, MemRefType) and v in ctx.views and ctx.views[v].buffer is buf
                    for v in x.operands
                ):
                    raise reject(
                        top,
                        f"this loop nest uses the value loaded at "
                        f"{location_text(load)}, and {x.name} at {location_text(x)} "
                        f"accesses {ctx.views[load.memref].name} in between",
                        "load the value inside the loop nest",
                    )
    return [ld for ld in loads if isinstance(ld, Operation)]
