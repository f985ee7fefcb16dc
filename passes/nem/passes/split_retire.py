"""`nem-split-transfers`' retire rules: the small transfers whose tokens
the pass waits for instead of holding them live, so that the tokens go to
the slices of the large copies (decision D-NEM-SPLIT-TRANSFERS, sessions
23, 37-38 and 40), and the bands a loop holds taken as their join
(`join_held`, session 42b) and those a transfer names (`join_named`,
sessions 43c and 44), with the helpers the rules and the pass share (the
bytes a transfer moves, a consumer's tokens rewritten, the slices of an
earlier split)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate

from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from nem.analysis.range_max import MaxTree, MinTable
from nem.analysis.token_liveness import BlockLiveness, ancestor_in, block_liveness, loop_copies
from nem.dialect.attributes import BITWIDTH, DYNAMIC, RegionType
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import ComputeOp, LoopOp, RegionOp, TaskOp, TransferOp, WaitOp
from nem.passes.finish_times import FinishTimes, producers_of


def moved_bytes(op: TransferOp) -> int:
    """The bytes a transfer moves: its destination box's elements (0 when
    untyped or of a dynamic shape)."""
    t = op.dst.type
    if not isinstance(t, RegionType) or t.shape_values is None or DYNAMIC in t.shape_values:
        return 0
    n = BITWIDTH.get(t.elem_name or "", 0) // 8
    for d in t.shape_values:
        n *= d
    return n


def retoken(user: Operation, old: SSAValue, new: Sequence[SSAValue]) -> None:
    """`user`'s tokens (a task's deps, a wait's) with `old` replaced by `new`,
    each token once."""
    tokens = user.dep_values() if isinstance(user, TaskOp) else tuple(user.operands)
    out: list[SSAValue] = []
    for t in tokens:
        for r in new if t is old else (t,):
            if r not in out:
                out.append(r)
    if isinstance(user, TaskOp):
        user.set_deps(out)
    else:
        user.operands = out


def retire_held(live: BlockLiveness, below: int) -> bool:
    """Wait, right before each loop statement of `live`'s block, for the
    block's async transfers moving fewer than `below` bytes whose tokens the
    loop's body consumes (the last use of each is the loop, D-TOK-LIVE), and
    drop those tokens from the body's deps and waits: the wait orders every
    statement after it after them (D-HAZ-WAIT).  Held, each token counts at
    every statement of the loop, a slice fewer for its copies (VGG-19's
    14x14 layers: the 16 border fills of the padded input held across the
    tile loop left its weight copies on one or two DMAs); waited for, the
    stream pauses once for a copy of a few hundred cycles issued before it.
    A wait already right before the loop takes them too.  Whether any was
    retired (the block's liveness is then stale)."""
    held: dict[int, list[SSAValue]] = {}
    for op, (first, last) in live.intervals.items():
        if (
            type(op) is TransferOp
            and first < last < len(live.ops)
            and type(live.ops[last]) is LoopOp
            and not op.is_sync
            and moved_bytes(op) < below
        ):
            held.setdefault(last, []).append(op.result)
    for k, tokens in held.items():
        loop = live.ops[k]
        for token in tokens:
            for user in {u.operation for u in token.uses}:
                if user is not loop and loop.is_ancestor(user):
                    retoken(user, token, [])
                    if type(user) is WaitOp and not user.operands:
                        Rewriter.erase_op(user)
        wait_before(loop, tokens)
    return bool(held)


def async_compute(op: Operation) -> bool:
    """Whether `op` is a compute task issued `.async` (its token a join may take)."""
    return isinstance(op, ComputeOp) and not op.is_sync


def join_held(live: BlockLiveness) -> bool:
    """Where a loop's body consumes two or more tokens of compute tasks of
    its block whose last use is the loop, all direct deps of one async
    compute task issued before it (their join: the bias add after a
    convolution's two NMU bands, D-COMPILE-NMU-SPLIT), the body's
    consumers take the join's token instead (D-NEM-SPLIT-TRANSFERS,
    session 42b).  A token a loop's body consumes is live at every
    statement of the loop (D-TOK-LIVE): k of them become one (none where
    the join's is live across the loop already), the others dying at the
    join.  Exact: the
    join completes after each token it replaces, so every consumer is
    ordered after what it was and after the join, later and never earlier
    (D-HAZ-ORDER); the first iteration may wait for the join's run.  Such
    deps arise where the packing (D-LOW-SHARE) lays a tile loop's buffers
    on bytes both bands of an earlier layer read (Inception v2's n322 over
    n315's bands; SqueezeNet's fire4 expand3x3 over its expand1x1's once
    the even engine parts re-laid L1: 14 tokens across the loop, its
    iterations 9 tokens each instead of 10).  Whether any deps were
    rewritten (the block's liveness is then stale).  Linear: one pass over
    the intervals gives each loop the tokens it holds (a token's last use is
    one statement), and a loop's joins are the users of those tokens."""
    index = {op: i for i, op in enumerate(live.ops)}
    holds: dict[int, set[SSAValue]] = {}
    for op, (first, last) in live.intervals.items():
        if first < last and type(live.ops[last]) is LoopOp and async_compute(op):
            holds.setdefault(last, set()).add(op.result)
    changed = False
    for k, held in sorted(holds.items()):
        if len(held) < 2:
            continue
        loop = live.ops[k]
        joins = sorted(
            {
                index[u.operation]
                for t in held
                for u in t.uses
                if index.get(u.operation, k) < k and async_compute(u.operation)
            }
        )
        for j in joins:
            join = live.ops[j]
            assert isinstance(join, ComputeOp)  # `async_compute`
            joined = [t for t in join.dep_values() if t in held]
            if len(joined) < 2:
                continue
            for token in joined:
                for user in {u.operation for u in token.uses}:
                    if user is not loop and loop.is_ancestor(user):
                        retoken(user, token, [join.result])
                held.discard(token)
            changed = True
    return changed


def join_named(live: BlockLiveness, times: FinishTimes, tree: MaxTree, budget: int) -> bool:
    """The straight-line form of `join_held` (session 43c): where a transfer
    of the block names two or more tokens of async compute tasks of the
    block that are all direct deps of one async compute task issued before
    it (their join: the bias add after a convolution's two NMU bands), the
    transfer takes the join's token instead and the band tokens die at the
    join, where either
    - the join ends, by the static estimate (`times`), no later than
      another dep of the transfer (so the join delays it by nothing the
      estimate sees: Inception v1's n67 loads, which named block 4b's bands
      and the stores of block 4a, held two band pairs across n63's engine 0
      copies), or
    - the join frees a token (session 44): the transfer is the last use of
      each band it replaces, and no loop stands between the join and the
      transfer (`frees_token`: ShuffleNet's weight loads after their
      layer's bands, 12 of them, 41 -> 44 of 49 convolutions within 2x).
    Exact: the join completes after each token it replaces (D-HAZ-ORDER),
    so the transfer is ordered after what it was and after the join.
    Either way only where the block's live tokens, its loops' included
    (`tree`: `unsplit_counts` under the rewrites made so far), stay within
    `budget` over the statements the rewrite changes, or do not grow there
    (`_within`, session 47): the join's token, live to the transfer, is one
    more at each statement between its last use and the transfer that the
    bands it replaces do not free (Inception v1's n49 border fills with the
    one-tile 1x1s at `HOISTED_SHARE` 0.5: 32 tokens before, 34 after).
    Elsewhere the transfer keeps its bands: one naming its bands only, whose
    bands a later task names too, would wait for the join's run and free
    nothing (SqueezeNet's fire9 copies, +936 cycles at n37 and n40); one
    freeing a token across a loop gave it to a store live across that loop
    (SqueezeNet's `copy658` across n22's tile loop: +268 cycles at n18 and
    n22).  Whether any deps were rewritten.  Linear: the estimate is one
    pass over the block, the loops before each statement one prefix sum,
    and a transfer's joins are the users of its deps issued before it."""
    index = {op: i for i, op in enumerate(live.ops)}
    # loops[i]: the loops among the block's first i statements
    loops = list(accumulate((type(o) is LoopOp for o in live.ops), initial=0))
    # each token's last use, as the rewrites made so far leave it
    ends = {t: last for t, (_, last) in live.intervals.items()}
    changed = False
    for k, op in enumerate(live.ops):
        named: set[SSAValue] = set()
        if isinstance(op, TransferOp):
            named = {
                t
                for t in op.dep_values()
                if isinstance(t.owner, Operation) and t.owner in index and async_compute(t.owner)
            }
        joins = sorted(
            {
                index[u.operation]
                for t in named
                for u in t.uses
                if index.get(u.operation, k) < k and async_compute(u.operation)
            }
        )
        for j in joins if len(named) >= 2 else ():
            assert isinstance(op, TransferOp)  # `named`
            join = live.ops[j]
            assert isinstance(join, ComputeOp)  # `async_compute`
            joined = [t for t in join.dep_values() if t in named]
            if len(joined) < 2:
                continue
            others = (times.end.get(p, 0) for p in producers_of(op.deps) if p.result not in joined)
            later = times.end.get(join, 0) <= max(others, default=-1)
            if not later and not frees_token(live, joined, j, k, loops):
                continue
            if not _within(tree, budget, ends, join, joined, k, index):
                continue
            for token in joined:
                retoken(op, token, [join.result])
                named.discard(token)
            changed = True
        times.step(op)
    return changed


def _within(
    tree: MaxTree,
    budget: int,
    ends: dict[TaskOp, int],
    join: ComputeOp,
    joined: Sequence[SSAValue],
    k: int,
    index: dict[Operation, int],
) -> bool:
    """Whether the transfer at statement `k` may take `join`'s token instead
    of the bands `joined` (`join_named`): the join's token lives on to `k`
    (one more at each statement after its last use), and a band whose last
    use was the transfer dies at its last other use (one fewer from there).
    The rewrite is kept in `tree` and `ends` where the largest count over
    the statements it changes stays within `budget` or does not grow, and
    taken back from `tree` otherwise.  O(uses of the bands + log n)."""
    changes: list[tuple[int, int, int]] = []
    if ends[join] < k:
        changes.append((ends[join] + 1, k, 1))
    cut: dict[TaskOp, int] = {}
    for token in joined:
        band = token.owner
        assert isinstance(band, TaskOp)  # `async_compute`
        if ends[band] == k:
            # the join uses the band: its last use is at the join or later
            block = band.parent_block()
            assert block is not None  # a statement of the block
            held = (ancestor_in(u.operation, block) for u in token.uses)
            last = max(i for s in held if s is not None and (i := index.get(s, k)) != k)
            changes.append((last + 1, k, -1))
            cut[band] = last
    lo = min((first for first, _, _ in changes), default=k)
    before = tree.max(lo, k)
    for first, last, v in changes:
        tree.add(first, last, v)
    if tree.max(lo, k) > max(budget, before):
        for first, last, v in changes:
            tree.add(first, last, -v)
        return False
    ends.update(cut)
    ends[join] = max(ends[join], k)
    return True


def frees_token(
    live: BlockLiveness, joined: Sequence[SSAValue], j: int, k: int, loops: Sequence[int]
) -> bool:
    """Whether the transfer at statement `k` taking the join at statement
    `j` instead of the bands `joined` frees a token (`join_named`, session
    44): it is the last use of each band (else the join's token is one more,
    live from the join to the transfer), and no loop stands between them
    (`loops`: the loops among the block's first i statements; the token
    freed across a loop counts at the program's level only, where the
    sharing gave it to a store live across the loop rather than to a copy
    the loop waits for: SqueezeNet's `copy514` took a slice from `copy491`,
    the store its next layer loads)."""
    return loops[k] == loops[j + 1] and all(
        isinstance(t.owner, TaskOp) and live.intervals[t.owner][1] == k for t in joined
    )


def retire_shared(live: BlockLiveness, below: int, crowded: Callable[[int, int], bool]) -> bool:
    """Wait, right before the first of them, for the block's async transfers
    under `below` bytes whose tokens two or more statements of the block
    consume, none a loop (`shared_small`), and drop them from the later deps
    and waits (a wait orders what follows, D-HAZ-WAIT): SqueezeNet's n37's
    16 border strips, which its four parts each load, were live from the
    first load to the last, whose copies ran whole on one DMA.  With a wait
    or a loop between its issue and its first consumer a transfer had that
    stretch of the stream to run; one issued right before it only where
    `crowded` (the tokens at the limit in its interval, session 38:
    test_hoist's staged bias copies queued behind the weight copies issued
    just before, and the wait held the stream, the next engine's weights,
    until those had run).  Whether any was retired (session 37).
    The pass run on its own output changes nothing here (session 41): a wait
    the retire rules added is no stretch (`stops_stream`), and `crowded`
    asks the counts before the split (`unsplit_counts`)."""
    # stops[j]: the waits and loops among the block's first j statements
    stops = list(accumulate((stops_stream(o, below) for o in live.ops), initial=0))
    held: dict[int, list[SSAValue]] = {}
    for op, first, _ in shared_small(live, below):
        issued = live.intervals[op][0]
        if stops[first] > stops[issued + 1] or crowded(*live.intervals[op]):
            held.setdefault(first, []).append(op.result)
    return _retire_before(live, held)


def stops_stream(op: Operation, below: int) -> bool:
    """Whether `op` gives the transfers issued before it a stretch of the
    stream to run (`retire_shared`'s session 38 branch): a loop, or a wait
    but the retire rules' own, for async transfers under `below` bytes
    alone, each waited for there only (`_retire_before` puts it right before
    their first consumer and drops them from the others).  The pass adds
    such a wait where it found no stretch; counted, a second run waited for
    a strip `retire_crowded` had kept (its wait would hold back a copy,
    `stalls`), the wait for another strip standing between it and its first
    load (session 41, `LATE` in the tests)."""
    if type(op) is LoopOp:
        return True
    return type(op) is WaitOp and not all(
        type(t.owner) is TransferOp
        and not t.owner.is_sync
        and moved_bytes(t.owner) < below
        and not t.has_more_than_one_use()
        for t in op.operands
    )


def unsplit_counts(block: Block, ev: Evaluator) -> list[int]:
    """The live tokens at each statement of `block`, its loops' included
    (D-TOK-LIVE), as before the split: the slices of an earlier split
    (`split_already`) count as the one transfer they were (the first slice's
    live interval).  `retire_shared`'s gate (the tokens at the limit) asks
    these: on the pass's own output the counts with the slices reached the
    limit where the first run's, before the split, did not, and a second run
    retired strips the first had kept (session 41)."""
    live = block_liveness(block, ev, bodies=False)
    transfers = [op for op in live.intervals if type(op) is TransferOp]
    sliced = split_already(transfers)
    delta = [0] * (len(live.ops) + 2)
    groups: set[tuple[object, ...]] = set()
    for op in transfers:  # in program order: the first slice of each group stays
        if op not in sliced:
            continue
        key = _slice_key(op)
        if key in groups:
            first, last = live.intervals[op]
            delta[first] -= 1
            delta[last + 1] += 1
        groups.add(key)
    out: list[int] = []
    for count, fewer, stmt in zip(live.counts(), accumulate(delta), live.ops):
        if type(stmt) is LoopOp:
            count += max(unsplit_counts(stmt.block, ev), default=0) * loop_copies(stmt, ev)
        out.append(count + fewer)
    return out


def retire_crowded(
    live: BlockLiveness,
    below: int,
    whole: Iterable[tuple[int, int]],
    at_limit: Callable[[int, int], bool],
    holds: Callable[[TransferOp, int, int], bool],
) -> bool:
    """After the block's tokens are shared out: wait, right before the first
    of them, for the transfers `shared_small` finds that have deps, between
    whose first and last consumer a copy the split left whole is live
    (`whole`: the live intervals of the copies that got one slice of a plan
    of several) and the tokens reach the limit (`at_limit`, on the counts
    with the slices), unless the wait `holds` back a copy (`stalls`); and
    drop them from the later deps and waits.
    `retire_shared`'s gate is asked before the split, on counts that peak
    under the limit (Inception v1's n75: 30 of 32 in its 12 border strips'
    intervals, each first consumed by the next `clamp` of its engine's fill
    chain, issued right after it); the split takes the last tokens there
    and leaves engines 0-2's loads and weight copies whole (session 39).  A
    transfer without deps is late only behind the copies queued before it
    on its DMAs (test_hoist's staged bias copies, session 38), so it stays.
    One prefix sum over the whole copies' intervals, one `at_limit` and one
    `holds` question per transfer.  Whether any was retired (the caller
    shares the tokens again)."""
    n = len(live.ops)
    diff = [0] * (n + 2)
    for first, last in whole:
        diff[first] += 1
        diff[last + 1] -= 1
    # covered[j]: the statements among the first j where a whole copy is live
    covered = list(accumulate((c > 0 for c in accumulate(diff[: n + 1])), initial=0))
    held: dict[int, list[SSAValue]] = {}
    for op, first, last in shared_small(live, below):
        if (
            op.dep_values()
            and covered[last + 1] > covered[first]
            and at_limit(first, last)
            and not holds(op, first, last)
        ):
            held.setdefault(first, []).append(op.result)
    return _retire_before(live, held)


def retire_across_short(
    live: BlockLiveness,
    below: int,
    short: Sequence[tuple[TransferOp, tuple[int, int]]],
    at_limit: Callable[[int, int], bool],
    holds: Callable[[TransferOp, int, int], bool],
) -> bool:
    """After the block's tokens are shared out: wait, right before a copy
    the split left short of its plan (`short`: with its live interval,
    issued at its first statement) that moves `below` bytes or more (not
    another border strip), for the transfers under `below` bytes with
    deps issued before it and first consumed after it, each of whose
    producers has no deps of its own (a fill chain's copy: a border strip
    zeroed in scratch runs as soon as its engine's units are free; a
    store of a computed tile held back the next parts' loads and
    convolutions, which `stalls` does not see), where the tokens reach
    the limit in its interval (`at_limit`) and the wait holds back no
    copy issued from it to their first consumer (`holds`, `stalls`); and
    drop them from their consumers.  `retire_crowded` waits at a
    small transfer's first consumer, which leaves it live across the copy
    where that consumer is the wait before the loop that reads them all
    (`retire_held`): Inception v2's n51 (3x3 64 -> 96 at 28x28) holds
    16 border strips (a fill chain's copies, done in tens of cycles), its
    four engines' input loads, biases, scale broadcasts and weights to the
    wait before its tile loop, 32 tokens of 32, and engine 3's 221 KB of
    weights ran whole on one DMA for 6,916 cycles (session 58).  Each
    transfer is waited for before the first short copy after it, once."""
    starts = sorted(span for op, span in short if moved_bytes(op) >= below)
    if not starts:
        return False
    issued = [first for first, _ in starts]
    held: dict[int, list[SSAValue]] = {}
    for op, at in small_transfers(live, below):
        deps = op.dep_values()
        if not deps or any(not isinstance(d.owner, TaskOp) or d.owner.dep_values() for d in deps):
            continue
        k, first_use = live.intervals[op][0], min(at, default=len(live.ops))
        j = bisect_right(issued, k)
        if j == len(starts):
            continue
        w, w_last = starts[j]
        if w < first_use and at_limit(w, w_last) and not holds(op, w - 1, first_use):
            held.setdefault(w, []).append(op.result)
    return _retire_before(live, held)


def stalls(
    live: BlockLiveness, piece: int, times: FinishTimes
) -> Callable[[TransferOp, int, int], bool]:
    """Whether a wait for a transfer of `live`'s block right before its
    statement `first` holds back a copy issued after it up to statement
    `last`: by the static estimate of when tasks end (`times`,
    `finish_times`: D-RT-COST's durations, no contention), the transfer ends
    after the copy could start.  The stream stops at the wait until the
    transfer has run, so that copy would start later than its producers let
    it.  DenseNet-121's n337 (session 40): engine 3's border strips follow,
    on its fill chain, the store of the previous layer's last engine part,
    issued last with nothing waiting for it, and end after the other
    engines' strips (by about 1,300 cycles in the timed run, 3,300 in the
    estimate); waited for, they held engines 0-2's weight copies, which
    follow only their own engines' strips.  The copies: the block's
    transfers with deps (one without starts when the stream issues it,
    behind whatever its engine's DMAs still run, which the estimate does
    not know) moving `piece` bytes or more (another border strip is no copy
    the tokens are for).  The estimate is made once for the block, the
    copies' starts kept in a `MaxTree` (negated): one query per transfer."""
    never = -(1 << 62)
    starts = [never] * (len(live.ops) + 1)
    for k, op in enumerate(live.ops):
        times.step(op)
        if type(op) is TransferOp and op.dep_values() and moved_bytes(op) >= piece:
            starts[k] = times.cycles(op) - times.end[op]  # its start, negated
    tree = MaxTree(starts)

    def holds(op: TransferOp, first: int, last: int) -> bool:
        return last > first and -tree.max(first + 1, last) < times.end[op]

    return holds


def small_transfers(live: BlockLiveness, below: int) -> Iterator[tuple[TransferOp, list[int]]]:
    """The block's async transfers under `below` bytes (the slices of an
    earlier split left out), each with the statements of the block that
    consume its token (`ancestor_in`: a use in a loop body counts at the
    loop), by index: the retire rules' candidates."""
    block = live.ops[0].parent_block() if live.ops else None
    idx = {op: k for k, op in enumerate(live.ops)}
    sliced = split_already(op for op in live.intervals if type(op) is TransferOp)
    for op in live.intervals:
        if type(op) is not TransferOp or op in sliced or op.is_sync or moved_bytes(op) >= below:
            continue
        users = (ancestor_in(u.operation, block) for u in op.result.uses) if block else ()
        yield op, sorted({idx[a] for a in users if a is not None})


def shared_small(live: BlockLiveness, below: int) -> Iterator[tuple[TransferOp, int, int]]:
    """`small_transfers` whose tokens two or more statements of the block
    consume, none a loop, with the first and last of them (the slices of
    one split count once: the pass stays idempotent)."""
    sliced = split_already(op for op in live.intervals if type(op) is TransferOp)
    for op, at in small_transfers(live, below):
        users = {
            _slice_key(o) if isinstance(o, TransferOp) and o in sliced else o
            for o in (live.ops[k] for k in at)
        }
        if len(users) >= 2 and not any(type(live.ops[k]) is LoopOp for k in at):
            yield op, at[0], at[-1]


def _retire_before(live: BlockLiveness, held: dict[int, list[SSAValue]]) -> bool:
    """Wait for each of `held`'s tokens right before the statement it is
    keyed by (its first consumer) and drop it from its other consumers;
    whether there were any."""
    for k, tokens in held.items():
        first = live.ops[k]
        keep = first if type(first) is WaitOp else None  # a wait first: it takes them
        for token in tokens:
            for user in {u.operation for u in token.uses} - {keep}:
                retoken(user, token, [])
                if type(user) is WaitOp and not user.operands:
                    Rewriter.erase_op(user)
        if keep is not None:
            continue
        wait_before(first, tokens)
    return bool(held)


def wait_before(op: Operation, tokens: Sequence[SSAValue]) -> None:
    """A `wait` on `tokens` right before `op`: the wait already there takes
    them, else a new one at `op`'s location (the retire rules' one way to
    wait, D-HAZ-WAIT)."""
    before = op.prev_op
    if type(before) is WaitOp:
        before.operands = [*before.operands, *tokens]
        return
    wait = WaitOp(tokens, [])
    wait.location = op.location
    Rewriter.insert_op(wait, InsertPoint.before(op))


def split_already(transfers: Iterable[TransferOp]) -> set[TransferOp]:
    """The transfers of one block that are the slices of a split: two or
    more between the same two buffers, with the same deps and the same
    consumers, whose boxes are `even_parts` of one along one dimension (in
    program order, sizes that differ by at most one, the larger first), as
    `SplitTransfer` makes them.  They are left whole, so the pass run on
    its own output changes nothing: the group already runs on as many DMAs
    as it has slices.  One pass over the block's transfers, grouped by
    that key."""
    groups: dict[tuple[object, ...], list[TransferOp]] = {}
    for op in transfers:
        groups.setdefault(_slice_key(op), []).append(op)
    return {op for g in groups.values() if len(g) > 1 and _even_slices(g) for op in g}


def _slice_key(op: TransferOp) -> tuple[object, ...]:
    """What the slices of one split share: their two buffers, deps and consumers."""
    users = frozenset(u.operation for u in op.result.uses)
    ends = tuple(v.owner.buffer if isinstance(v.owner, RegionOp) else v for v in (op.dst, op.src))
    return (ends, op.dep_values(), users)


def _even_slices(group: Sequence[TransferOp]) -> bool:
    """The boxes of `group` (in program order) are `even_parts` of one box:
    the same shape but along one dimension, there non-increasing sizes
    within one of each other."""
    shapes = []
    for op in group:
        t = op.dst.type
        if not isinstance(t, RegionType) or t.shape_values is None:
            return False
        shapes.append(t.shape_values)
    if len({len(s) for s in shapes}) != 1:
        return False
    differ = [d for d in range(len(shapes[0])) if len({s[d] for s in shapes}) > 1]
    if len(differ) > 1:
        return False
    sizes = [s[differ[0]] for s in shapes] if differ else []
    return all(a >= b for a, b in zip(sizes, sizes[1:])) and (
        not sizes or sizes[0] - sizes[-1] <= 1
    )


def retire_done(
    live: BlockLiveness,
    whole: Sequence[tuple[TransferOp, int, int]],
    room: Callable[[int, int], bool],
    times: FinishTimes,
) -> bool:
    """Wait for a transfer the split left whole, at the first statement
    from which, by the static estimate of when tasks end (`times`), every
    task issued up to its last consumer starts after it has ended (a loop
    statement counted at the stream's time when it is reached), where its
    tokens have `room` from its own statement to that one; and drop it from
    the consumers from there on.  Its token then dies at the wait rather
    than at a far consumer (a layer's store into a concatenation that the
    next block reads, held across the whole block), and the split can give
    it its slices.  Whether any was retired (the caller shares the tokens
    again)."""
    if not whole:
        return False
    n = len(live.ops)
    starts = [0] * n  # each statement's estimated start (its stream time for a loop)
    for k, op in enumerate(live.ops):
        clock = times.clock
        times.step(op)
        if isinstance(op, TaskOp):
            starts[k] = times.end[op] - times.cycles(op)
        else:
            starts[k] = clock if type(op) is LoopOp else 1 << 62
    held: dict[int, list[SSAValue]] = {}
    table = MinTable(starts)  # no rescan of a store's interval per store
    for op, first, last in whole:
        end = times.end.get(op)
        if end is None:
            continue
        at = table.first_at_least(first + 1, last, end)
        if at >= last or not room(first, at):
            continue
        held.setdefault(at, []).append(op.result)
    if not held:
        return False
    block = live.ops[0].parent_block()
    assert block is not None  # the block of `live`'s statements
    idx = {o: k for k, o in enumerate(live.ops)}
    for k, tokens in held.items():
        for token in tokens:
            for user in {u.operation for u in token.uses}:
                cur = ancestor_in(user, block)
                if cur is not None and idx[cur] >= k:
                    retoken(user, token, [])
                    if type(user) is WaitOp and not user.operands:
                        Rewriter.erase_op(user)
        wait_before(live.ops[k], tokens)
    return True
