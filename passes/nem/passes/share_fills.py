"""`nem-share-constant-fills`: repeated constant fills made once, within L1's
capacity (D-LOW-FILL-SHARE).

A padded input's border strips get their constant from a *fill chain* per
strip: a `clamp` on `i8` with min = max over a dense L1 region (the region
is that constant whatever it held), then compute tasks reading and writing
only that region (a MaxPool's `-inf`: `clamp` (f32, -FLT_MAX), `add` x+x),
then the store of the strip (chains of `MIN_TASKS` tasks or more are
shared: a lone zero clamp is left alone).  Each chain fills an L1 buffer of its own,
which the packing (D-LOW-SHARE) puts at one offset per engine, so the
chains run one after the other.  A later chain identical to an earlier one
(opcodes, types, argument keys, bytes, level) whose buffer nothing writes
again computes the same bytes: it is dropped and its buffer's regions read
the earlier buffer (the later buffer goes).  Exact: every reader reads the
bytes it read, and `nem-synthesize-deps`, after this pass, orders them
after the earlier chain in program order.

The earlier buffer then lives until the last reader of the later ones, and
the longer lifetimes can make L1 overflow once packed, which makes the
driver tile the whole model again (D-COMPILE-L1).  So the sharing is
capacity-aware: the shares are found with a window (a later chain's last
reader at most `window` top-level tasks after the chain it reuses, else it
starts a new one), tried on a copy of the program with the widest window
first, and taken only when every L1 level then still fits the device once
packed as `nem-compile` packs it (`share_buffers.packed_footprints`); else
the next narrower window, else nothing.  A constant number of tries, each
one walk and one packing: the cost grows with the program, not its
iterations.  Without a known device nothing is known to overflow: the
widest window is taken.

The analysis (`find_shares`) is apart from the rewrite (`apply_shares`).
The rewrite is not a `RewritePattern`: which chain goes depends on the
whole program (the earlier chain, the buffers' other writers, the window),
so the walker's local matching would only replay the analysis' answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from nem.analysis.buffer_lifetimes import Lifetime, lifetimes
from nem.analysis.capacity import capacity
from nem.analysis.happens_before import region_parts, task_operands
from nem.analysis.ir_walk import block_ops, walk_ops
from nem.dialect.attributes import ArgRefAttr, MemLevelAttr
from nem.dialect.device_model import Device
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import BufferOp, ComputeOp, LoopOp, ProgramOp, RegionOp, TaskOp, programs
from nem.passes.forward_fills import Place, i8_clamp, place_of
from nem.passes.share_buffers import packed_footprints

WINDOWS: tuple[int | None, ...] = (None, 64, 16, 4)
"""The windows tried, widest (unbounded) first (D-LOW-FILL-SHARE)."""

MIN_TASKS = 2
"""The shortest chain shared: a lone zero `clamp` (a padded convolution's
border) is left to fill its own buffer; sharing those made DenseNet-121
2.3% slower (D-LOW-FILL-SHARE)."""


@dataclass
class Chain:
    """A fill chain: its tasks (top-level, in order), the region they fill,
    and where it starts and ends among the top-level statements."""

    place: Place
    tasks: list[ComputeOp]
    first: int
    last: int
    signature: tuple[object, ...] = field(default=())


@dataclass(frozen=True)
class Share:
    """`later`'s chain dropped; its buffer's regions read `earlier`'s buffer."""

    later: Chain
    earlier: Chain


def _chain_start(op: Operation, ev: Evaluator) -> Place | None:
    """The dense region an `i8` clamp with min = max, in R out R, makes a
    constant whatever it held; else None."""
    found = i8_clamp(op)
    if found is None or ev.key(found[1]) != ev.key(found[2]):
        return None
    assert isinstance(op, ComputeOp)
    p = place_of(ev, found[0])
    if p is None or not p.dense or place_of(ev, op.ins[0]) != p:
        return None
    return p


def _signature(ev: Evaluator, chain: Chain) -> tuple[object, ...]:
    """What makes two chains compute the same bytes: per task its opcode,
    operand types (element, shape, level) and attributes (an argument by its
    value's key); and the region's size."""

    def attr(c: ComputeOp, a: object) -> object:
        return ("arg", ev.key(c.args[a.index.data])) if isinstance(a, ArgRefAttr) else str(a)

    return (
        chain.place.hi - chain.place.lo,
        tuple(
            (
                c.opcode,
                tuple(str(r.type) for r in (*c.ins, *c.outs)),
                tuple(sorted((k, attr(c, v)) for k, v in c.attrs.data.items())),
            )
            for c in chain.tasks
        ),
    )


def _chains(program: ProgramOp, ev: Evaluator) -> list[Chain]:
    """The program's fill chains, in order, found in one walk of its
    top-level statements: a chain start opens a chain on its buffer; a task
    without deps reading and writing exactly that region extends it; any
    other task touching the buffer, or a loop, closes it."""
    done: list[Chain] = []
    open_: dict[SSAValue, Chain] = {}
    for k, op in enumerate(block_ops(program.block)):
        if type(op) is LoopOp:
            done.extend(open_.values())
            open_.clear()
            continue
        if not isinstance(op, TaskOp):
            continue
        start = _chain_start(op, ev)
        if start is not None:
            assert isinstance(op, ComputeOp)
            if start.buffer in open_:
                done.append(open_.pop(start.buffer))
            open_[start.buffer] = Chain(start, [op], k, k)
            continue
        reads, writes, _ = task_operands(op)
        places = [place_of(ev, r) for r in (*reads, *writes)]
        touched = {p.buffer for p in places if p is not None}
        if any(p is None for p in places):
            done.extend(open_.values())  # a place not known: it may touch any buffer
            open_.clear()
        for buf in touched:
            chain = open_.get(buf)
            if chain is None:
                continue
            if (
                isinstance(op, ComputeOp)
                and not op.deps
                and writes
                and all(p == chain.place for p in places)
            ):
                chain.tasks.append(op)
                chain.last = k
                break
            done.append(open_.pop(buf))
    done.extend(open_.values())
    done.sort(key=lambda c: c.first)
    for c in done:
        c.signature = _signature(ev, c)
    return done


def _write_counts(program: ProgramOp) -> dict[SSAValue, int]:
    """How many written regions of each buffer the program's tasks (in
    loops too) have."""
    out: dict[SSAValue, int] = {}
    for op in walk_ops(program):
        if isinstance(op, TaskOp):
            for w in task_operands(op)[1]:
                if type(w.owner) is RegionOp:
                    buf = region_parts(w.owner)[0]
                    out[buf] = out.get(buf, 0) + 1
    return out


def _within(ev: Evaluator, buf: SSAValue, p: Place) -> bool:
    """Whether every region of `buf` lies, statically, within `p`'s bytes."""
    for use in buf.uses:
        r = use.operation
        q = place_of(ev, r.results[0]) if type(r) is RegionOp else None
        if q is None or q.lo < p.lo or q.hi > p.hi:
            return False
    return True


def find_shares(program: ProgramOp, window: int | None) -> list[Share]:
    """The chains of `program` to drop, each with the earlier chain it
    reuses: of `MIN_TASKS` tasks or more; the same signature, offset and level; both buffers candidates of
    the packing (static size, only region uses), written by their chain
    only, and the later one's regions within its chain's bytes; the later
    buffer's last use before the next loop after the earlier chain, and
    (with a `window`) at most `window` top-level tasks after it.  A chain
    that could be reused but is too far starts a new run."""
    ev = Evaluator()
    stmts = block_ops(program.block)
    next_loop = [len(stmts)] * (len(stmts) + 1)
    tasks_before = [0] * (len(stmts) + 1)
    for k, st in enumerate(stmts):
        tasks_before[k + 1] = tasks_before[k] + isinstance(st, TaskOp)
    for k in range(len(stmts) - 1, -1, -1):
        next_loop[k] = k if type(stmts[k]) is LoopOp else next_loop[k + 1]
    levels = {
        op.result.type.level.data
        for op in stmts
        if type(op) is BufferOp and MemLevelAttr(op.result.type.level.data).kind == "L1"
    }
    life: dict[SSAValue, Lifetime] = {
        lt.buffer.result: lt for lt in lifetimes(program, sorted(levels), ev)
    }
    writes = _write_counts(program)
    anchor: dict[tuple[object, ...], Chain] = {}
    out: list[Share] = []
    for chain in _chains(program, ev):
        buf = chain.place.buffer
        lt = life.get(buf)
        if len(chain.tasks) < MIN_TASKS or lt is None or writes.get(buf, 0) != len(chain.tasks):
            continue
        if any(c.result.uses for c in chain.tasks):
            continue
        key = (lt.level, chain.place.lo, chain.signature)
        earlier = anchor.get(key)
        if earlier is not None and _within(ev, buf, chain.place):
            near = lt.last < next_loop[earlier.last]
            if window is not None:
                near = near and tasks_before[lt.last] - tasks_before[earlier.last] <= window
            if near:
                out.append(Share(chain, earlier))
                continue
        anchor[key] = chain
    return out


def apply_shares(shares: Sequence[Share]) -> None:
    """Drop each share's later chain, make its buffer's regions regions of
    the earlier chain's buffer, and remove the later buffer.  The chain's
    own regions, left without uses, go with it."""
    for s in shares:
        regions = {o.owner for c in s.later.tasks for o in c.operands if type(o.owner) is RegionOp}
        for c in s.later.tasks:
            Rewriter.erase_op(c)
        for r in regions:
            if isinstance(r, Operation) and not r.results[0].uses:
                Rewriter.erase_op(r)
        buf = s.later.place.buffer
        for use in list(buf.uses):
            use.operation.operands = [s.earlier.place.buffer, *use.operation.operands[1:]]
        assert isinstance(buf.owner, Operation) and not buf.uses
        Rewriter.erase_op(buf.owner)


def _fits(program: ProgramOp, device: Device) -> bool:
    """Whether every L1 level of `program` fits `device` once packed as
    `nem-compile` packs it (D-LOW-SHARE, D-COMPILE-L1)."""
    for key, need in packed_footprints(program, device).items():
        cap = capacity(device, key) if key.startswith("L1") else None
        if cap is not None and need > cap:
            return False
    return True


def share_constant_fills(program: ProgramOp, device: Device | None) -> int:
    """Rewrite `program` in place (module docstring); returns how many
    chains were dropped."""
    for window in WINDOWS:
        shares = find_shares(program, window)
        if not shares:
            return 0
        if device is None:
            apply_shares(shares)
            return len(shares)
        trial = program.clone()
        apply_shares(find_shares(trial, window))
        fits = _fits(trial, device)
        trial.erase()
        if fits:
            apply_shares(shares)
            return len(shares)
    return 0


@dataclass(frozen=True)
class ShareConstantFillsPass(ModulePass):
    """Drop fill chains identical to an earlier one, reading its buffer, where
    L1 still fits once packed (D-LOW-FILL-SHARE).

    Options:
      device: the target whose L1 capacity bounds the sharing (default: the
              program's `device` directive, nem-opt's --device)
      include-dirs: directories where device=NAME's file is found first
    """

    name = "nem-share-constant-fills"

    device: str | None = None
    include_dirs: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from nem.passes.device import target_device

        for prog in list(programs(op)):
            share_constant_fills(prog, target_device(ctx, prog, self.device, self.include_dirs))
