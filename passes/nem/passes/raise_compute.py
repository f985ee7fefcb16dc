"""Compute in the MLIR -> NEM lowering: raising to NEM opcodes (D-LOW-RAISE)
and the `compute` escape hatch (D-LOW-ESCAPE).

Escape-hatch contract (for the runtime): a loop nest (or linalg op) that is
not raised becomes

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
with xDSL's interpreter, with one semantics (D-RT-MLIR-KERNEL, D-RT-MLIR-JIT).
"""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO

from xdsl.dialects import affine, arith, func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.printer import Printer

from nem.dialect.attributes import ArgRefAttr
from nem.dialect.semantics import postorder
from nem.dialect.ops import COMPUTE_OPS, TransferOp
from nem.dialect.operand_binding import match_families
from nem.passes.lowering_core import (
    Aff,
    Dim,
    ExprEmitter,
    View,
    depends_on,
    eval_map,
    is_identity,
    is_index_arith,
    make_region,
    pick_minmax,
    REGION_LOGS,
    reject,
    resolve_index,
)


class NotRaisable(Exception):
    pass


BINARY = {"arith.addf": "add", "arith.addi": "add", "arith.subf": "sub", "arith.subi": "sub",
          "arith.mulf": "mul", "arith.muli": "mul", "arith.divf": "div", "arith.divsi": "div",
          "arith.maximumf": "max", "arith.maxnumf": "max", "arith.maxsi": "max",
          "arith.minimumf": "min", "arith.minnumf": "min", "arith.minsi": "min",
          "math.powf": "pow"}
UNARY = {"arith.negf": "neg", "math.exp": "exp", "math.log": "log", "math.sqrt": "sqrt",
         "math.absf": "abs", "math.absi": "abs", "math.tanh": "tanh"}
LINALG_ELTWISE = {"linalg.add": "add", "linalg.sub": "sub", "linalg.mul": "mul",
                  "linalg.div": "div", "linalg.max": "max", "linalg.min": "min",
                  "linalg.exp": "exp", "linalg.log": "log", "linalg.sqrt": "sqrt",
                  "linalg.abs": "abs", "linalg.tanh": "tanh", "linalg.negf": "neg",
                  "linalg.powf": "pow"}


# ---------------------------------------------------------------------------
# Loop-nest analysis
# ---------------------------------------------------------------------------


class Nest:
    def __init__(self):
        self.loops: list[tuple[affine.ForOp, int]] = []
        self.env: dict[SSAValue, Aff] = {}
        self.body: list[Operation] = []


def analyze(L, top: affine.ForOp) -> Nest:
    nest = Nest()
    op = top
    while True:
        lbm, ubm = op.lowerBoundMap.data, op.upperBoundMap.data
        lb = pick_minmax(eval_map(lbm, [_idx(L, nest, v) for v in op.lowerBoundOperands]), False)
        ub = pick_minmax(eval_map(ubm, [_idx(L, nest, v) for v in op.upperBoundOperands]), True)
        if lb is None or ub is None:
            raise NotRaisable("min/max loop bounds")
        if lb.has_dims() or ub.has_dims():
            raise NotRaisable("non-rectangular nest")
        if op.step.value.data != 1:
            raise NotRaisable("non-unit step")
        ext = ub - lb
        if not ext.is_const() or ext.const <= 0:
            raise NotRaisable("non-constant trip count")
        d = Dim(len(nest.loops))
        nest.env[op.body.block.args[0]] = lb + Aff.atom(d)
        nest.loops.append((op, ext.const))
        inner = [o for o in op.body.block.ops if not isinstance(o, affine.YieldOp)]
        nested = _only_loop(inner)
        if nested is not None:
            op = nested
            continue
        nest.body = inner
        return nest


def _only_loop(ops: list[Operation]) -> affine.ForOp | None:
    """The loop of a loop body holding one loop and otherwise only index
    values `_idx` evaluates (as `-affine-loop-normalize` leaves tile
    offsets), else None: the nest is perfect up to index arithmetic."""
    loops = [o for o in ops if isinstance(o, affine.ForOp)]
    if len(loops) == 1 and all(o is loops[0] or is_index_arith(o) for o in ops):
        return loops[0]
    return None


def _idx(L, nest: Nest, v: SSAValue) -> Aff:
    r = resolve_index(v, nest.env, L.env)
    if r is None:
        raise NotRaisable("an index that is not an affine function of the loop indices")
    return r


def _access(L, nest: Nest, op: Operation) -> tuple[SSAValue, list[tuple[int | None, Aff]]]:
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        idx = eval_map(op.map.data, [_idx(L, nest, v) for v in op.indices])
    else:
        idx = [_idx(L, nest, v) for v in op.indices]
    out = []
    for a in idx:
        dims, rest = a.split_dims()
        if rest.has_dims():
            raise NotRaisable("a nest index inside mod/floordiv")
        if len(dims) > 1 or (dims and dims[0][1] != 1):
            raise NotRaisable("a strided or skewed access")
        out.append((dims[0][0].k if dims else None, rest))
    return op.memref, out


def _tree(L, nest: Nest, v: SSAValue, inside: set[Operation]):
    owner = v.owner
    if not isinstance(owner, Operation) or owner not in inside:
        if isinstance(owner, arith.ConstantOp):
            return ("const", owner.value)
        raise NotRaisable("a value defined outside the nest")
    if isinstance(owner, affine.LoadOp | memref.LoadOp):
        return ("load", *_access(L, nest, owner))
    if isinstance(owner, arith.ConstantOp):
        return ("const", owner.value)
    if owner.name in BINARY:
        return (owner.name, _tree(L, nest, owner.operands[0], inside),
                _tree(L, nest, owner.operands[1], inside))
    if owner.name in UNARY:
        return (owner.name, _tree(L, nest, owner.operands[0], inside))
    raise NotRaisable(f"'{owner.name}' in the nest body")


MAX_RAISED_OPS = 64
"""Most operations one raised computation may expand to (each becomes a task)."""


def _raisable_size(root: SSAValue, within: Callable[[Operation], bool]) -> None:
    """NotRaisable when the computation of `root` (its ops that satisfy
    `within`, expanded as a tree, as raising does) has more than
    MAX_RAISED_OPS operations.  Counted iteratively over the DAG with each
    value once, so a 1500-op chain or a body whose values reuse each other
    (`%x2 = arith.addf %x1, %x1`, 2^40 as a tree) falls back to a compute
    task (D-LOW-FALLBACK) in linear time instead of recursing (issue 11)."""
    def operands(v: SSAValue) -> list[SSAValue]:
        owner = v.owner
        return list(owner.operands) if isinstance(owner, Operation) and within(owner) else []

    size: dict[SSAValue, int] = {}
    for v in postorder(root, operands, size):
        size[v] = min(1 + sum(size[o] for o in operands(v)), MAX_RAISED_OPS + 1)
    if size[root] > MAX_RAISED_OPS:
        raise NotRaisable(f"a computation of more than {MAX_RAISED_OPS} operations")


def _order(acc) -> list[int | None]:
    return [k for k, _ in acc]


def _is_zero(t) -> bool:
    if t[0] != "const":
        return False
    a = t[1]
    return isinstance(a, FloatAttr | IntegerAttr) and a.value.data == 0


def match_nest(L, nest: Nest):
    """A raise plan: ("eltwise", opcode, [loads], store) or ("matmul", ...)."""
    inside = set()
    for o in nest.loops[0][0].walk():
        inside.add(o)
    stores = [o for o in nest.body if isinstance(o, affine.StoreOp | memref.StoreOp)]
    for o in nest.body:
        if not (isinstance(o, affine.StoreOp | memref.StoreOp | affine.LoadOp | memref.LoadOp
                           | arith.ConstantOp | affine.ApplyOp)
                or o.name in BINARY or o.name in UNARY):
            raise NotRaisable(f"'{o.name}' in the nest body")
    if len(stores) != 1:
        raise NotRaisable(f"{len(stores)} stores in the nest body")
    st = stores[0]
    smem, sacc = _access(L, nest, st)
    _raisable_size(st.value, lambda op: op in inside)
    tree = _tree(L, nest, st.value, inside)
    n = len(nest.loops)
    sorder = [k for k in _order(sacc) if k is not None]
    # matmul: C[i,j] = C[i,j] + A[i,k] * B[k,j]
    if n == 3 and len(sorder) == 2 and tree[0] in ("arith.addf", "arith.addi"):
        mul = "arith.mulf" if tree[0] == "arith.addf" else "arith.muli"
        for acc_t, prod in ((tree[1], tree[2]), (tree[2], tree[1])):
            if acc_t[0] == "load" and acc_t[1] == smem and _same(acc_t[2], sacc) \
                    and prod[0] == mul and prod[1][0] == "load" and prod[2][0] == "load":
                ki, kj = sorder
                kk = ({0, 1, 2} - {ki, kj}).pop()
                for a, b in ((prod[1], prod[2]), (prod[2], prod[1])):
                    ao, bo = [k for k in _order(a[2]) if k is not None], \
                        [k for k in _order(b[2]) if k is not None]
                    if sorted(ao) == sorted([ki, kk]) and sorted(bo) == sorted([kk, kj]) \
                            and len(ao) == 2 and len(bo) == 2:
                        return ("matmul", a, b, (smem, sacc), int(ao != [ki, kk]),
                                int(bo != [kk, kj]), [nest.loops[ki][1], nest.loops[kk][1],
                                                      nest.loops[kj][1]])
    if sorted(sorder) != list(range(n)):
        raise NotRaisable("the store does not cover the iteration space once")
    if tree[0] == "load":  # a copy nest, as generate-dma=false leaves it (D-LOW-COPYNEST)
        if [k for k in _order(tree[2]) if k is not None] != sorder:
            raise NotRaisable("a copy that transposes or broadcasts")
        if L.view(tree[1], st).buffer is L.view(smem, st).buffer:
            raise NotRaisable("a copy within one buffer")
        return ("copy", tree, (smem, sacc))
    return ("eltwise", _eltwise_tree(tree, sorder), (smem, sacc))


def _eltwise_tree(t, sorder: list[int]):
    """The elementwise computation `t` (a `_tree`) as NEM ops: ("op", opcode,
    [children]) down to its loads, which must all be indexed like the store
    (no broadcast or transpose); `max(x, 0)` is `relu`.  Each op becomes one
    task (D-LOW-RAISE), so a fused body (e.g. bias add + relu) is raised."""
    if t[0] == "load":
        if [k for k in _order(t[2]) if k is not None] != sorder:
            raise NotRaisable("operands are indexed in different orders (broadcast/transpose)")
        return t
    if t[0] in ("arith.maximumf", "arith.maxsi", "arith.maxnumf"):
        for x, z in ((t[1], t[2]), (t[2], t[1])):
            if _is_zero(z):
                return ("op", "relu", [_eltwise_tree(x, sorder)])
    if t[0] in BINARY:
        return ("op", BINARY[t[0]], [_eltwise_tree(t[1], sorder), _eltwise_tree(t[2], sorder)])
    if t[0] in UNARY:
        return ("op", UNARY[t[0]], [_eltwise_tree(t[1], sorder)])
    raise NotRaisable("the body is not a tree of elementwise operations over loads")


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] and x[1] == y[1] for x, y in zip(a, b))


# ---------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------


def _region_for(L, tmp: Block, mem: SSAValue, acc, exts: dict[int, int], anchor, layout=None):
    vw: View = L.view(mem, anchor)
    start = vw.base
    shape, strides = [], []
    for (k, outer), s in zip(acc, vw.strides):
        start = start + outer.scale(s)
        if k is not None:
            shape.append(exts[k])
            strides.append(s)
    e = ExprEmitter(tmp, anchor.location)
    r = make_region(vw, start, shape, strides, anchor.location, e, anchor, layout)
    tmp.add_op(r)
    return r, vw


def _full_region(L, tmp: Block, mem: SSAValue, anchor, layout=None):
    vw: View = L.view(mem, anchor)
    e = ExprEmitter(tmp, anchor.location)
    r = make_region(vw, vw.base, list(vw.shape), list(vw.strides), anchor.location, e, anchor,
                    layout)
    tmp.add_op(r)
    return r, vw


def _legal(L, opcode: str, ins, outs, attrs=None, args=()) -> str | None:
    """None when the op matches a variant (of the device when one is set)."""
    from nem.dialect.semantics import Evaluator

    ev = Evaluator()
    key = (opcode, tuple(v.type for v in ins), tuple(v.type for v in outs),
           tuple(sorted((k, str(a)) for k, a in (attrs or {}).items())),
           tuple(ev.static(a) for a in args))
    cache = L.__dict__.setdefault("legal_cache", {})
    if key in cache:
        return cache[key]
    cache[key] = why = _legal_uncached(L, opcode, ins, outs, attrs, args)
    return why


def _legal_uncached(L, opcode: str, ins, outs, attrs=None, args=()) -> str | None:
    op = COMPUTE_OPS[opcode](list(ins), list(outs), [], list(args), attrs or {}, False, None,
                             [], [[] for _ in range(len(ins) + len(outs))])
    effective = None
    if L.device_obj is not None:
        effective = L.device_obj.effective_for_family(op.SPEC.families)
    res = match_families(op, L.catalog, effective)
    op.erase(safe_erase=False)
    if res.ok:
        return None
    where = f"device {L.opts.device}" if L.device_obj is not None else "the NEM baseline"
    elems = "/".join(sorted({v.type.elem_name for v in (*ins, *outs)}))
    return f"no {opcode} variant for {elems} on {where}"


def _move_ops(tmp: Block, dst: Block) -> None:
    """Append the region ops built in scratch block `tmp` to `dst`."""
    for o in list(tmp.ops):
        o.detach()
        dst.add_op(o)


def _drop_ops(tmp: Block) -> None:
    """Discard the region ops built in scratch block `tmp` (a plan that fell back)."""
    for o in reversed(list(tmp.ops)):
        o.detach()
        o.erase(safe_erase=False)


def _drop_unused_scratch(L) -> None:
    """Forget the scratch buffers no region uses (made for a plan that fell
    back), so the program declares only buffers it uses."""
    cache = L.__dict__.get("scratch_cache", {})
    for key, vw in list(cache.items()):
        op = vw.buffer.owner
        if not vw.buffer.uses and op in L.decls:
            L.decls.remove(op)
            op.erase()
            del cache[key]


def _commit(L, tmp: Block, dst: Block, scope, opcode: str, ins, outs, reads, writes, anchor,
            attrs=None, args=()):
    _move_ops(tmp, dst)

    def build(deps, tok):
        op = COMPUTE_OPS[opcode](list(ins), list(outs), deps, list(args), attrs or {}, False, tok,
                                 [], [[] for _ in range(len(ins) + len(outs))])
        op.location = anchor.location
        return op

    return L.add_task(dst, scope, build, reads, writes, opcode)


def _scratch(L, like: View, shape: list[int], anchor, ident: int = 0) -> View:
    """A hoisted scratch buffer for a partial result (D-LOW-ACCUM); `ident`
    tells apart the temporaries one computation needs at the same time.  The
    tasks of different `async.execute`s (and of the main stream) do not
    share one."""
    from nem.passes.lowering_core import buffer_bytes

    n = 1
    for d in shape:
        n *= d
    slots = 2 if L.pipe_stack else 1
    # one set per async.execute (their tasks run concurrently, D-LOW-ASYNC)
    context = L.exec_stack[-1]["id"] if L.exec_stack else None
    key = (like.level.data, tuple(shape), like.elem, slots,
           L.pipe_stack[-1].key if slots == 2 else None, ident, context)
    cache = L.__dict__.setdefault("scratch_cache", {})
    if key in cache and cache[key].buffer.owner in L.decls:
        return cache[key]
    name = L.fresh(None, f"{like.level.kind}_{'tmp' if ident else 'acc'}")
    buf = L._declare_buffer(name, like.level.data, buffer_bytes(tuple(shape), like.elem) * slots,
                            anchor.location)
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    base = Aff.atom(L.pipe_stack[-1]).mod(2).scale(n) if slots == 2 else Aff.c(0)
    cache[key] = View(buf, like.level, like.elem, tuple(shape), tuple(reversed(strides)), base,
                      name)
    return cache[key]


def emit_matmul(L, dst, scope, anchor, a_reg, b_reg, c_reg, vws, trans, what: str) -> str | None:
    """C += A x B.  One `matmul in A, B, C out C` when that variant is legal,
    else `matmul in A, B out T` + `add in C, T out C` (D-LOW-ACCUM).  Returns
    the reason when neither is legal (the caller falls back)."""
    av, bv, cv = vws
    attrs, args = {}, []
    tmp = a_reg.parent_block()
    if trans[0] or trans[1]:
        e = ExprEmitter(tmp, anchor.location)
        for key, flag in (("trans_a", trans[0]), ("trans_b", trans[1])):
            if flag:
                attrs[key] = ArgRefAttr(len(args))
                args.append(e.const(1))
        e.flush()
    why = _legal(L, "matmul", [a_reg.result, b_reg.result, c_reg.result], [c_reg.result],
                 attrs, args)
    if why is None:
        _commit(L, tmp, dst, scope, "matmul", [a_reg.result, b_reg.result, c_reg.result],
                [c_reg.result], {av.buffer, bv.buffer, cv.buffer}, {cv.buffer}, anchor, attrs,
                args)
        L.raised.append(f"{what} -> matmul (accumulating bias)")
        return None
    shape = list(c_reg.result.type.shape_values)
    tv = _scratch(L, cv, shape, anchor)
    e = ExprEmitter(tmp, anchor.location)
    t_reg = make_region(tv, tv.base, shape, list(tv.strides), anchor.location, e, anchor, "MN")
    tmp.add_op(t_reg)
    why1 = _legal(L, "matmul", [a_reg.result, b_reg.result], [t_reg.result], attrs, args)
    why2 = _legal(L, "add", [c_reg.result, t_reg.result], [c_reg.result])
    if why1 or why2:
        return why1 or why2
    add_tmp = Block()
    _commit(L, tmp, dst, scope, "matmul", [a_reg.result, b_reg.result], [t_reg.result],
            {av.buffer, bv.buffer}, {tv.buffer}, anchor, attrs, args)
    _commit(L, add_tmp, dst, scope, "add", [c_reg.result, t_reg.result], [c_reg.result],
            {cv.buffer, tv.buffer}, {cv.buffer}, anchor)
    L.raised.append(f"{what} -> matmul + add (accumulation)")
    return None


_INDEX_OPS = ("affine.apply", "affine.min", "affine.max", "affine.yield", "arith.constant",
              "arith.addi", "arith.subi", "arith.muli")


def is_tile_loop(L, loop: affine.ForOp) -> bool:
    """A loop over tiles as `affine-loop-tile` leaves it (a body of index
    arithmetic and loops) whose innermost nests are all point-loop nests
    that `match_nest` may raise: a loop with a non-unit step, or a unit-step
    one (after `-affine-loop-normalize`) whose body computes offsets or
    inner loop bounds from its variable and that is not raisable as one nest.
    It becomes a NEM loop, so each tile is one raised task (D-LOW-TILES); a
    tile loop around anything else stays one escape-hatch task for the
    whole nest."""
    if loop.results or not _tiles_of_point_nests(loop.body.block):
        return False
    if loop.step.value.data != 1:
        return True
    iv = loop.body.block.args[0]
    offsets = [v for o in loop.body.block.ops if o.name in _INDEX_OPS for v in o.results]
    offsets += [v for o in loop.body.walk() if isinstance(o, affine.ForOp) and o is not loop
                for v in (*o.lowerBoundOperands, *o.upperBoundOperands)]
    if not any(_derives_from(v, iv) for v in offsets):
        return False
    try:
        match_nest(L, analyze(L, loop))
    except (NotRaisable, ValueError):
        return True
    return False


def _derives_from(v: SSAValue, iv: SSAValue) -> bool:
    """Whether index `v` is computed from `iv` (through index arithmetic)."""
    return depends_on(v, iv, lambda op: op.name in _INDEX_OPS)


def _tiles_of_point_nests(block: Block) -> bool:
    nests = 0
    for o in block.ops:
        if o.name in _INDEX_OPS:
            continue
        if not isinstance(o, affine.ForOp):
            return False
        inner = o.body.block
        if not (_tiles_of_point_nests(inner) if o.step.value.data != 1 else _point_nest(o)):
            return False
        nests += 1
    return nests > 0


def _point_nest(loop: affine.ForOp) -> bool:
    """A unit-step chain of loops, perfect up to index arithmetic, around
    one store of loads combined by raisable ops (the shape `match_nest`
    accepts)."""
    while True:
        if loop.step.value.data != 1:
            return False
        body = [o for o in loop.body.block.ops if not isinstance(o, affine.YieldOp)]
        nested = _only_loop(body)
        if nested is not None:
            loop = nested
            continue
        stores = [o for o in body if isinstance(o, affine.StoreOp | memref.StoreOp)]
        return len(stores) == 1 and all(
            isinstance(o, affine.StoreOp | memref.StoreOp | affine.LoadOp | memref.LoadOp
                       | arith.ConstantOp | affine.ApplyOp) or o.name in BINARY
            or o.name in UNARY for o in body)


def lower_nest(L, top: affine.ForOp, dst: Block, scope) -> None:
    what = f"loop nest at {_loc(top)}"
    try:
        nest = analyze(L, top)
        plan = match_nest(L, nest)
    except (NotRaisable, ValueError) as e:
        return emit_escape(L, top, dst, scope, str(e), what)
    exts = {k: ext for k, (_, ext) in enumerate(nest.loops)}
    tmp = Block()
    if plan[0] == "matmul":
        _, a, b, (cmem, cacc), ta, tb, _dims = plan
        a_reg, av = _region_for(L, tmp, a[1], a[2], exts, top, "KM" if ta else "MK")
        b_reg, bv = _region_for(L, tmp, b[1], b[2], exts, top, "NK" if tb else "KN")
        c_reg, cv = _region_for(L, tmp, cmem, cacc, exts, top, "MN")
        why = emit_matmul(L, dst, scope, top, a_reg, b_reg, c_reg, (av, bv, cv), (ta, tb), what)
        if why is None:
            return
        _drop_ops(tmp)
        return emit_escape(L, top, dst, scope, why, what)
    if plan[0] == "copy":
        _, ld, (smem, sacc) = plan
        src, sv = _region_for(L, tmp, ld[1], ld[2], exts, top)
        out, dv = _region_for(L, tmp, smem, sacc, exts, top)

        def build(deps, tok):
            t = TransferOp(out.result, src.result, deps, False, tok, [])
            t.location = top.location
            return t

        _move_ops(tmp, dst)
        L.add_task(dst, scope, build, {sv.buffer}, {dv.buffer}, "copy")
        L.raised.append(f"{what} -> transfer (copy)")
        return
    _, root, (smem, sacc) = plan
    out = _region_for(L, tmp, smem, sacc, exts, top)
    _raise_eltwise(L, tmp, dst, scope, root, out, top, what,
                   lambda ld: _region_for(L, tmp, ld[1], ld[2], exts, top))


def _raise_eltwise(L, tmp: Block, dst: Block, scope, root, out, anchor, what: str,
                   leaf_region) -> None:
    """One task per op of the elementwise tree `root` (D-LOW-RAISE) writing
    `out`, when every op has a legal variant and all operands have one
    shape; else the whole computation falls back to the escape hatch."""
    steps = _tree_steps(L, tmp, root, out, anchor, leaf_region)
    shapes = {tuple(r.result.type.shape_values) for _, ins, _ in steps for r, _ in ins}
    why = ("operand shapes differ (broadcast)" if len(shapes | {tuple(
        out[0].result.type.shape_values)}) > 1 else next(
        (w for w in (_legal(L, op, [r.result for r, _ in ins], [o.result])
                     for op, ins, (o, _) in steps) if w), None))
    if why is not None:
        _drop_ops(tmp)
        return emit_escape(L, anchor, dst, scope, why, what)
    for opcode, ins, (o, ov) in steps:
        _commit(L, tmp, dst, scope, opcode, [r.result for r, _ in ins], [o.result],
                {v.buffer for _, v in ins}, {ov.buffer}, anchor)
    L.raised.append(f"{what} -> {' + '.join(op for op, _, _ in steps)}")


def _tree_steps(L, tmp: Block, root, out, anchor, leaf_region) -> list:
    """The tasks of an elementwise tree, in evaluation order: (opcode,
    [(in region, view)], (out region, view)); the root writes `out`, every
    inner op a hoisted scratch region of the same shape (D-LOW-ACCUM's
    scratch buffers, one per inner op)."""
    steps = []
    shape = list(out[0].result.type.shape_values)

    def emit(node, target):
        if node[0] != "op":
            return leaf_region(node)
        ins = [emit(c, None) for c in node[2]]
        if target is None:
            sv = _scratch(L, out[1], shape, anchor, ident=len(steps) + 1)
            e = ExprEmitter(tmp, anchor.location)
            reg = make_region(sv, sv.base, shape, list(sv.strides), anchor.location, e, anchor)
            tmp.add_op(reg)
            target = (reg, sv)
        steps.append((node[1], ins, target))
        return target

    emit(root, out)
    return steps


def _loc(op: Operation) -> str:
    loc = op.location
    try:
        return f"{loc.line.data}:{loc.column.data}"
    except AttributeError:
        return "?"


# ---------------------------------------------------------------------------
# linalg
# ---------------------------------------------------------------------------


def linalg_operands(op: Operation) -> tuple[list[SSAValue], list[SSAValue]]:
    """(ins, outs) of a linalg op: the structured ops' `inputs`/`outputs`,
    `linalg.reduce`/`linalg.broadcast`'s `input`/`init` (xDSL's names)."""
    for i, o in (("inputs", "outputs"), ("input", "init")):
        if hasattr(op, i) and hasattr(op, o):
            ins, outs = getattr(op, i), getattr(op, o)
            return ([ins] if isinstance(ins, SSAValue) else list(ins),
                    [outs] if isinstance(outs, SSAValue) else list(outs))
    return [], list(op.operands)


def lower_linalg(L, op: Operation, dst: Block, scope) -> None:
    what = f"{op.name} at {_loc(op)}"
    ins, outs = linalg_operands(op)
    if op.results:
        raise reject(op, "linalg on tensors is not supported; bufferize first "
                     "(one-shot-bufferize)")
    for v in (*ins, *outs):
        if not isinstance(v.type, MemRefType):
            return emit_escape(L, op, dst, scope, "scalar operands", what)
    tmp = Block()
    if op.name == "linalg.matmul":
        a_reg, av = _full_region(L, tmp, ins[0], op, "MK")
        b_reg, bv = _full_region(L, tmp, ins[1], op, "KN")
        c_reg, cv = _full_region(L, tmp, outs[0], op, "MN")
        why = emit_matmul(L, dst, scope, op, a_reg, b_reg, c_reg, (av, bv, cv), (0, 0), what)
        if why is not None:
            _drop_ops(tmp)
            emit_escape(L, op, dst, scope, why, what)
        return
    if op.name == "linalg.conv_2d_nhwc_hwcf":
        return _lower_conv(L, op, ins, outs, dst, scope, tmp, what)
    if op.name in LINALG_ELTWISE:
        root = ("op", LINALG_ELTWISE[op.name], [("arg", v) for v in ins])
    elif op.name == "linalg.generic":
        try:
            root = _generic_tree(op)
        except NotRaisable as e:
            return emit_escape(L, op, dst, scope, str(e), what)
    else:
        return emit_escape(L, op, dst, scope, "no NEM opcode for this linalg op", what)
    out = _full_region(L, tmp, outs[0], op)
    _raise_eltwise(L, tmp, dst, scope, root, out, op, what,
                   lambda leaf: _full_region(L, tmp, leaf[1], op))


def _generic_tree(op):
    """The elementwise tree (see `_eltwise_tree`) of an identity-map,
    all-parallel `linalg.generic` over memrefs: leaves ("arg", memref) are
    its ins (or its out, read before it is written)."""
    maps = [m.data for m in op.indexing_maps.data]
    if not all(is_identity(m) for m in maps) or any(
            str(it.data).split(".")[-1].lower() != "parallel" for it in op.iterator_types.data):
        raise NotRaisable("not an identity-map, all-parallel linalg.generic")
    block = op.body.block
    operands = [*op.inputs, *op.outputs]

    def node(v: SSAValue):
        if isinstance(v, BlockArgument) and v.block is block:
            return ("arg", operands[v.index])
        owner = v.owner
        if isinstance(owner, arith.ConstantOp):
            return ("const", owner.value)
        if owner.name in ("arith.maximumf", "arith.maxsi", "arith.maxnumf"):
            for x, z in ((owner.operands[0], owner.operands[1]),
                         (owner.operands[1], owner.operands[0])):
                if _is_zero(node(z)):
                    return ("op", "relu", [node(x)])
        if owner.name in BINARY:
            return ("op", BINARY[owner.name], [node(o) for o in owner.operands])
        if owner.name in UNARY:
            return ("op", UNARY[owner.name], [node(owner.operands[0])])
        raise NotRaisable(f"'{owner.name}' in the linalg.generic body")

    _raisable_size(block.last_op.operands[0], lambda o: o.parent_block() is block)
    root = node(block.last_op.operands[0])
    if root[0] != "op" or any(leaf[0] == "const" for leaf in _leaves(root)):
        raise NotRaisable("no NEM opcode for this linalg op")
    return root


def _leaves(node) -> list:
    return [x for c in node[2] for x in _leaves(c)] if node[0] == "op" else [node]


def _lower_conv(L, op, ins, outs, dst, scope, tmp, what) -> None:
    x_reg, xv = _full_region(L, tmp, ins[0], op, "NHWC")
    w_reg, wv = _full_region(L, tmp, ins[1], op, "HWIO")
    y_reg, yv = _full_region(L, tmp, outs[0], op, "NHWC")
    e = ExprEmitter(tmp, op.location)
    args, attrs = [], {}
    for key in ("strides", "dilations"):
        a = op.attributes.get(key) or op.properties.get(key)
        vals = list(a.get_values()) if a is not None and hasattr(a, "get_values") else [1, 1]
        refs = []
        for v in vals:
            refs.append(ArgRefAttr(len(args)))
            args.append(e.const(int(v)))
        attrs[key] = ArrayAttr(refs)
    refs = []
    for _ in range(4):
        refs.append(ArgRefAttr(len(args)))
        args.append(e.const(0))
    attrs["pads"] = ArrayAttr(refs)
    e.flush()
    shape = list(y_reg.result.type.shape_values)
    tv = _scratch(L, yv, shape, op)
    e2 = ExprEmitter(tmp, op.location)
    t_reg = make_region(tv, tv.base, shape, list(tv.strides), op.location, e2, op, "NHWC")
    tmp.add_op(t_reg)
    why = _legal(L, "conv2d", [x_reg.result, w_reg.result], [t_reg.result], attrs, args) or \
        _legal(L, "add", [y_reg.result, t_reg.result], [y_reg.result])
    if why is not None:
        _drop_ops(tmp)
        return emit_escape(L, op, dst, scope, why, what)
    _commit(L, tmp, dst, scope, "conv2d", [x_reg.result, w_reg.result], [t_reg.result],
            {xv.buffer, wv.buffer}, {tv.buffer}, op, attrs, args)
    _commit(L, Block(), dst, scope, "add", [y_reg.result, t_reg.result], [y_reg.result],
            {yv.buffer, tv.buffer}, {yv.buffer}, op)
    L.raised.append(f"{what} -> conv2d + add (accumulation)")


# ---------------------------------------------------------------------------
# Escape hatch
# ---------------------------------------------------------------------------


def _log_accessed_boxes(L, top: affine.ForOp) -> None:
    """In a peeled partial tile (D-LOW-PEEL), log what an escape-hatch nest
    really touches of each memref (the bounding box of its affine accesses,
    when they all share one) instead of the whole buffer its region passes:
    the narrowing checks are about the elements a task reads or writes."""
    try:
        nest = analyze(L, top)
        boxes: dict = {}
        for o in top.walk():
            if not isinstance(o, affine.LoadOp | affine.StoreOp | memref.LoadOp
                              | memref.StoreOp):
                continue
            mem, acc = _access(L, nest, o)
            vw = L.view(mem, o)
            start = vw.base
            for (_, rest), st in zip(acc, vw.strides):
                start = start + rest.scale(st)
            box = (start, [nest.loops[k][1] if k is not None else 1 for k, _ in acc])
            seen = boxes.setdefault(vw.buffer, box)
            if seen is not None and (seen[1] != box[1] or not (seen[0] - box[0]).is_const()
                                     or (seen[0] - box[0]).const != 0):
                boxes[vw.buffer] = None  # several boxes: keep the whole region
    except (NotRaisable, ValueError):
        return
    for log in REGION_LOGS:
        for i, (vw, _start, _shape, strides, anchor) in enumerate(log):
            box = boxes.get(vw.buffer)
            if anchor is top and box is not None:
                log[i] = (vw, box[0], box[1], list(vw.strides), anchor)


def _sunk_loads(L, top: Operation) -> list[Operation]:
    """The scalar loads outside `top` whose values it uses (e.g. a scale
    factor read before the nest): the lowering deferred them (a scalar
    access has no task of its own, `Lowerer.lower_op`), and the kernel does
    them itself (D-LOW-ESCAPE).  That reads the memref later than MLIR does,
    so nothing between the load and `top` may touch the loaded buffer."""
    inside = set(top.walk())
    loads = {v.owner: None for o in inside for v in o.operands
             if isinstance(v.owner, Operation) and v.owner in L.deferred_loads}
    for load in loads:
        buf = L.view(load.memref, load).buffer
        block = load.parent_block()
        anchor = top
        while anchor is not None and anchor.parent_block() is not block:
            anchor = anchor.parent_op()
        if anchor is None:
            raise reject(top, "this loop nest uses a value loaded in another block")
        ops = list(block.ops)
        for o in ops[ops.index(load) + 1:ops.index(anchor)]:
            for x in o.walk():
                if any(isinstance(v.type, MemRefType) and v in L.views
                       and L.views[v].buffer is buf for v in x.operands):
                    raise reject(top, f"this loop nest uses the value loaded at "
                                 f"{_loc(load)}, and {x.name} at {_loc(x)} accesses "
                                 f"{L.views[load.memref].name} in between",
                                 "load the value inside the loop nest")
    return list(loads)


def emit_escape(L, top: Operation, dst: Block, scope, reason: str, what: str) -> None:
    _drop_unused_scratch(L)
    reads: dict[SSAValue, None] = {}
    writes: dict[SSAValue, None] = {}
    index_vals: dict[SSAValue, None] = {}
    consts: dict[SSAValue, None] = {}
    sunk = _sunk_loads(L, top)
    inside = set(top.walk()) | set(sunk)
    for o in [*sunk, *top.walk()]:
        for i, v in enumerate(o.operands):
            owner = v.owner
            if isinstance(owner, Operation) and owner in inside:
                continue
            if hasattr(v, "block") and v.block.parent_op() in inside:
                continue
            if isinstance(v.type, MemRefType):
                if isinstance(o, affine.StoreOp | memref.StoreOp):
                    writes[v] = None
                elif isinstance(o, affine.LoadOp | memref.LoadOp):
                    reads[v] = None
                elif o.name.startswith("linalg."):
                    (reads if i < len(linalg_operands(o)[0]) else writes)[v] = None
                else:
                    reads[v] = None
                    writes[v] = None
            elif isinstance(owner, arith.ConstantOp):
                consts[v] = None
            elif isinstance(v.type, IndexType):
                index_vals[v] = None
            else:
                raise reject(o, f"operand of type {v.type} defined outside the loop nest cannot "
                             "be passed to a compute kernel")
    ins_m = [m for m in reads if m not in writes]
    outs_m = list(writes)
    if not outs_m:
        raise reject(top, "this loop nest writes no memref (nothing to lower)")
    tmp = Block()
    in_regs = [_full_region(L, tmp, m, top) for m in ins_m]
    out_regs = [_full_region(L, tmp, m, top) for m in outs_m]
    if not in_regs:  # `compute in [] out ...` cannot be written: pass the first out as input
        in_regs = [out_regs[0]]
        ins_m = [outs_m[0]]
    if REGION_LOGS and isinstance(top, affine.ForOp):
        _log_accessed_boxes(L, top)
    # kernel function
    arg_types = [MemRefType(L.views[m].elem, L.views[m].shape) for m in (*ins_m, *outs_m)]
    arg_types += [IndexType()] * len(index_vals)
    block = Block(arg_types=arg_types)
    mapper: dict[SSAValue, SSAValue] = {}
    for m, a in zip((*ins_m, *outs_m), block.args):
        mapper.setdefault(m, a)
    for v, a in zip(index_vals, block.args[len(ins_m) + len(outs_m):]):
        mapper[v] = a
    for c in consts:
        cl = c.owner.clone()
        block.add_op(cl)
        mapper[c] = cl.results[0]
    for load in sunk:
        block.add_op(load.clone(value_mapper=mapper))
    block.add_op(top.clone(value_mapper=mapper))
    block.add_op(func.ReturnOp())
    kfn = func.FuncOp("kernel", FunctionType.from_lists(arg_types, []), Region(block))
    buf = StringIO()
    Printer(stream=buf, print_generic_format=True, print_debuginfo=False).print_op(kfn)
    text = " ".join(line.strip() for line in buf.getvalue().splitlines())
    kfn.erase(safe_erase=False)
    e = ExprEmitter(tmp, top.location)
    args = [e.emit(L.index(v, top), top) for v in index_vals]
    e.flush()
    attrs = {"op": StringAttr("mlir.kernel"), "kernel": StringAttr(text)}
    if args:
        attrs["index_args"] = ArrayAttr([ArgRefAttr(i) for i in range(len(args))])
    _commit(L, tmp, dst, scope, "compute", [r.result for r, _ in in_regs],
            [r.result for r, _ in out_regs], {v.buffer for _, v in in_regs},
            {v.buffer for _, v in out_regs}, top, attrs, args)
    L.fallback.append((top, what, reason))
