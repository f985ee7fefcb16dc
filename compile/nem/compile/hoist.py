"""Read-only tile copies hoisted out of the tile loops (decision D-COMPILE-HOIST).

`structured.promote` stages every operand of a tile in L1 inside the
innermost tile loop (D-LOW-VIEW): a convolution's weight tile, whose box
depends on the output-channel loop only, is copied from DDR again for each
spatial tile.  Here such a copy moves out of every loop it does not depend
on, with its L1 buffer:

    scf.for %i ... {                        %a = memref.alloc() : memref<N x i8, 2>
      %a = memref.alloc() ...               %v = memref.view %a ...
      %v = memref.view %a ...               linalg.copy ins(%w) outs(%v)
      linalg.copy ins(%w) outs(%v)   ==>    scf.for %i ... {
      linalg.conv ins(%x, %v) ...             linalg.conv ins(%x, %v) ...
      memref.dealloc %a                     }
    }                                       memref.dealloc %a

when (1) the copy's source is defined outside the loop, (2) nothing in the
loop writes the memref the source views (its root: a function argument,
global or allocation), (3) the L1 buffer is only read in the loop, as an
input of linalg ops, besides this one copy into it, and freed after it.
The buffer then holds the same bytes in every iteration, so each compute op
reads what it read before: the results are bit-identical, each output sums
over the same tiles in the same order (the loops are not reordered).
The L1 the hoisted buffer takes is measured with the rest of the tile
(`l1_plan.measure`, D-COMPILE-L1), so a tiling that no longer fits is tiled
again smaller.

`share_copies` then, on the canonical tiled function, lets a peeled partial
tile read the buffer its loop staged instead of staging the same source
again (D-COMPILE-SHARE-STAGED).

Both are on unless `CompileOptions.hoist` / `share_staged` say otherwise
(`nem-compile --no-hoist` / `--no-share-staged`, for before/after
measurements and for bisecting a wrong result to one transformation).
"""

from __future__ import annotations

from mlir import ir

from nem.compile.nest_ir import as_operation, owner_op
from nem.compile.target import FAST_SPACE
from nem.compile.writers import VIEWS, Writers, linalg_inputs, root_of

LOOPS = ("scf.for", "affine.for")


def _inside(op: ir.Operation | None, loop: ir.Operation) -> bool:
    while op is not None:
        if op == loop:
            return True
        op = op.parent
    return False


def _defined_inside(v: ir.Value, loop: ir.Operation) -> bool:
    op = owner_op(v)
    if op is not None:
        return _inside(op, loop)
    return _inside(ir.BlockArgument(v).owner.owner, loop)


def _only_read(v: ir.Value, loop: ir.Operation, allowed: set[ir.Operation]) -> bool:
    """Whether every use of `v` (and of its views) inside `loop`, but the ops
    in `allowed`, reads it as a linalg input."""
    stack = [v]
    while stack:
        for use in stack.pop().uses:
            user = as_operation(use.owner)
            if user.name in VIEWS and use.operand_number == 0:
                stack.extend(user.results)
            elif user in allowed or not _inside(user, loop):
                continue
            elif (
                user.name.startswith("linalg.")
                and "operandSegmentSizes" in user.attributes
                and use.operand_number < linalg_inputs(user)
            ):
                continue
            else:
                return False
    return True


def _hoist_one(loop: ir.Operation, copies: list[ir.Operation]) -> ir.Operation | None:
    """Hoist the first hoistable staging copy of `loop`'s body (`copies`: its
    `linalg.copy`s of two operands, in order); the copy hoisted, if any."""
    for cp in copies:
        src, dst = cp.operands[0], cp.operands[1]
        lift = _invariant(src, loop)
        if lift is None:
            continue
        view = owner_op(dst)
        chain = []
        while view is not None and view.name in VIEWS and view.parent == loop:
            chain.append(view)
            view = owner_op(view.operands[0])
        alloc = view
        if (
            alloc is None
            or alloc.name != "memref.alloc"
            or alloc.parent != loop
            or len(alloc.operands)
        ):
            continue
        space = ir.MemRefType(alloc.results[0].type).memory_space
        if space is None or ir.IntegerAttr(space).value < FAST_SPACE:
            continue
        # the chain's other operands (offsets) must be available before the loop
        if any(
            _defined_inside(x, loop) and not _is_const(x)
            for v in chain
            for x in list(v.operands)[1:]
        ):
            continue
        deallocs = [
            as_operation(u.owner)
            for u in alloc.results[0].uses
            if as_operation(u.owner).name == "memref.dealloc"
        ]
        if len(deallocs) != 1 or deallocs[0].parent != loop:
            continue
        if not _only_read(alloc.results[0], loop, {cp, deallocs[0], *chain}):
            continue
        if not _source_unwritten(src, loop):
            continue
        for v in reversed(chain):
            for i, x in enumerate(list(v.operands)[1:], start=1):
                if _defined_inside(x, loop):
                    v.operands[i] = (
                        as_operation(owner_op(x)).clone(ir.InsertionPoint(loop)).results[0]
                    )
        for op in lift:  # the source's subviews, constants
            op.move_before(loop)
        alloc.move_before(loop)
        for v in reversed(chain):
            v.move_before(loop)
        cp.move_before(loop)
        deallocs[0].move_after(loop)
        return cp
    return None


def _staging(cp: ir.Operation) -> tuple[ir.Operation, ir.Operation] | None:
    """The (allocation, view) a `linalg.copy` stages into: a `memref.view` at
    offset 0 of a static fast-memory `memref.alloc`, both in the copy's
    block; else None."""
    view = owner_op(cp.operands[1])
    if view is None or view.name != "memref.view" or view.parent != cp.parent:
        return None
    alloc = staged_buffer(view)
    return None if alloc is None else (alloc, view)


def staged_buffer(view: ir.Operation) -> ir.Operation | None:
    """The allocation a `memref.view` views at a constant offset: a static
    fast-memory `memref.alloc` in the view's block; else None."""
    alloc = owner_op(view.operands[0])
    if alloc is None or alloc.name != "memref.alloc" or alloc.parent != view.parent:
        return None
    space = ir.MemRefType(alloc.results[0].type).memory_space
    if len(alloc.operands) or space is None or ir.IntegerAttr(space).value < FAST_SPACE:
        return None
    if len(view.operands) != 2 or not _is_const(view.operands[1]):
        return None
    return alloc


def dealloc_of(alloc: ir.Operation) -> ir.Operation | None:
    """The one `memref.dealloc` of `alloc`, in its block; else None."""
    frees = [
        as_operation(u.owner)
        for u in alloc.results[0].uses
        if as_operation(u.owner).name == "memref.dealloc"
    ]
    if len(frees) != 1 or frees[0].parent != alloc.parent:
        return None
    return frees[0]


def _top(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """`op`'s ancestor among the ops of `block` (None: it is not inside it)."""
    while op.block != block:
        op = op.parent
        if op is None or op.name == "func.func":
            return None
    return op


def _share_group(fn: ir.Operation, group: list[tuple[ir.Operation, ...]], writers: Writers) -> int:
    """`share_copies` on the (copy, allocation, view)s of one block copying one
    source into views of one type, in order; returns how many copies went."""
    removed, at = 0, writers.at
    kept: list[tuple[ir.Operation, ...]] = []
    for cp, alloc, view in group:
        free = dealloc_of(alloc)
        if free is None or not _only_read(alloc.results[0], fn, {cp, free}):
            continue
        src = cp.operands[0]
        prior = next(
            (
                k
                for k in kept
                if at[alloc] > at[k[0]]
                and at[view] > at[k[0]]
                and not writers.between(src, k[0], cp)
            ),
            None,
        )
        if prior is None:
            kept.append((cp, alloc, view))
            continue
        _, keep_alloc, keep_view = prior
        # an ir.Operation hashes by its contents, operands included: the ops
        # whose operands change leave `at` before and come back after, rehashed
        changed = {_top(as_operation(u.owner), cp.block) for u in view.results[0].uses} | {free}
        position = [(op, at.pop(op)) for op in changed if op is not None]
        view.results[0].replace_all_uses_with(keep_view.results[0])
        keep_free = dealloc_of(keep_alloc)
        assert keep_free is not None
        free.operands[0] = keep_alloc.results[0]
        for op, k in position:
            writers.place(op, k)
        keep_free.erase()
        cp.erase()
        view.erase()
        alloc.erase()
        removed += 1
    return removed


def share_copies(fn: ir.Operation) -> int:
    """Stage a read-only copy once where two staging copies of one block copy
    the same source into buffers of the same type (decision
    D-COMPILE-SHARE-STAGED): a tile loop's hoisted weight slice and its peeled
    partial tile's, which `structured.peel` stages again after the loop.

        %a = memref.alloc()                   %a = memref.alloc()
        %v = memref.view %a ...               %v = memref.view %a ...
        linalg.copy ins(%w) outs(%v)          linalg.copy ins(%w) outs(%v)
        scf.for ... { reads %v }              scf.for ... { reads %v }
        memref.dealloc %a             ==>     ... reads %v ...
        %b = memref.alloc()                   memref.dealloc %a
        %u = memref.view %b ...
        linalg.copy ins(%w) outs(%u)
        ... reads %u ...
        memref.dealloc %b

    when both buffers are only read (as linalg inputs) besides their copy and
    dealloc, and nothing between the two copies may write the source's
    memref: the first buffer then holds the bytes the second copy would
    write, so every op reads the same values (bit-identical results) and
    the bytes are moved once.  The second buffer's view and allocation must
    come after the first copy (the first view dominates their uses).
    Returns how many copies were removed."""
    blocks: dict[ir.Block, list[ir.Operation]] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name.startswith("linalg."):
            if name == "linalg.copy" and len(op.operands) == 2:
                blocks.setdefault(op.block, []).append(op)
            return ir.WalkResult.SKIP  # a body of scalar ops
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    removed = 0
    for block, copies in blocks.items():
        if len(copies) < 2:
            continue
        # by source and view type: only such groups of two or more are checked
        by_key: dict[tuple[ir.Value, str], list[tuple[ir.Operation, ...]]] = {}
        for cp in copies:
            staged = _staging(cp)
            if staged is not None:
                key = (cp.operands[0], str(staged[1].results[0].type))
                by_key.setdefault(key, []).append((cp, *staged))
        groups = [g for g in by_key.values() if len(g) > 1]
        if not groups:
            continue
        writers = Writers(block)
        for group in groups:
            removed += _share_group(fn, group, writers)
    return removed


PURE = (*VIEWS, "arith.constant", "affine.apply", "arith.addi", "arith.muli", "arith.subi")


def _invariant(v: ir.Value, loop: ir.Operation) -> list[ir.Operation] | None:
    """The ops inside `loop` that compute `v` from values defined outside it,
    in order (to move before the loop with it), or None when `v` depends on
    the loop (its induction variable, or an op with effects)."""
    if not _defined_inside(v, loop):
        return []
    op = owner_op(v)
    if op is None or op.name not in PURE or op.parent != loop or len(op.regions):
        return None
    ops: list[ir.Operation] = []
    for x in op.operands:
        sub = _invariant(x, loop)
        if sub is None:
            return None
        ops += [o for o in sub if o not in ops]
    return ops + [op]


def varies(v: ir.Value, loop: ir.Operation) -> bool:
    """Whether `v` depends on `loop`: it is defined inside it by an op that
    is not PURE (an allocation, a copy) or from its induction variable,
    through any number of PURE ops (views, index arithmetic).  A staging
    copy of a source that does not vary is hoisted out of every loop up to
    and including `loop` (`hoist_op`), its buffers then outside."""
    if not _defined_inside(v, loop):
        return False
    op = owner_op(v)
    if op is None or op.name not in PURE or len(op.regions):
        return True
    return any(varies(x, loop) for x in op.operands)


def hoist_op(op: ir.Operation) -> int:
    """Hoist one staging op (a `linalg.copy`, or any linalg op of one input
    and one output that only reads the input and writes the output whole:
    a broadcast of a per-channel tile, D-COMPILE-FUSE-L1) out of each loop
    around it that it does not depend on, under `hoist_copies`' conditions;
    returns how many loops it left."""
    moved = 0
    while (loop := as_operation(op.parent)).name in LOOPS and _hoist_one(loop, [op]) is not None:
        moved += 1
    return moved


def _is_const(v: ir.Value) -> bool:
    op = owner_op(v)
    return op is not None and op.name == "arith.constant"


def _source_unwritten(src: ir.Value, loop: ir.Operation) -> bool:
    """Whether no op inside `loop` may write the memref `src` views: every
    use of its root (and of the root's views) inside the loop reads it."""
    return _only_read(root_of(src), loop, set())


def hoist_copies(fn: ir.Operation) -> int:
    """Hoist every read-only staging copy of `fn` out of the loops it does
    not depend on (the module doc); returns how many moves were made.

    One sweep over the loops in post-order is a fixpoint: a copy hoisted
    out of a loop lands in the enclosing block, whose loop (if any) comes
    later in the sweep; a hoist changes nothing inside any other loop (only
    loop-invariant ops move, never a loop), so no loop visited earlier can
    gain a hoistable copy.

    The walk notes each block's copies and loops (`items`, in order: the
    post-order visits a block's ops in order), so that a loop's body is not
    listed again for each copy hoisted (listing a block makes a Python
    object per op); a hoisted copy joins its new block's items before the
    loop it left."""
    items: dict[ir.Operation, list[tuple[ir.Operation, bool]]] = {}
    inner: dict[ir.Operation | None, list[ir.Operation]] = {}  # loops by enclosing loop

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name in LOOPS:
            parent = as_operation(op.parent)
            items.setdefault(parent, []).append((op, False))
            while parent is not None and parent.name not in LOOPS and parent != fn:
                parent = parent.parent
            inner.setdefault(parent if parent is not None and parent != fn else None, []).append(op)
        elif name.startswith("linalg."):
            if name == "linalg.copy" and len(op.operands) == 2:
                items.setdefault(as_operation(op.parent), []).append((op, True))
            return ir.WalkResult.SKIP  # a body of scalar ops
        return ir.WalkResult.ADVANCE

    # in pre-order, not into linalg bodies; the loops then in post-order
    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    loops: list[ir.Operation] = []

    def post(outer: ir.Operation | None) -> None:
        for loop in inner.get(outer, ()):
            post(loop)
            loops.append(loop)

    post(None)
    moved = 0
    for loop in loops:
        mine = items.get(loop)
        if not mine:
            continue
        while (cp := _hoist_one(loop, [op for op, copy in mine if copy])) is not None:
            moved += 1
            mine[:] = [item for item in mine if item[0] != cp]
            outer = items.setdefault(as_operation(loop.parent), [])
            at = next(k for k, (op, _) in enumerate(outer) if op == loop)
            outer.insert(at, (cp, True))
    return moved
