"""Deps that a barrier already covers, dropped where they hold a token
across the loops before their task (decision D-NEM-SPLIT-TRANSFERS,
session 40), before `nem-split-transfers` shares out the live tokens; and
a transfer's deps that another of its deps reaches through deps
(`drop_reached_deps`, session 43).

A task in a loop body may name a token from outside the body (a later
layer's tile loop reading what an earlier layer staged in L1).  The token is
then live from its task's issue to that loop (D-TOK-LIVE): at every
statement and loop in between, where it takes a token the split of those
statements' copies needed (or, `retire_held`, a wait right before the
consumer's loop ends it there, still live up to it).  When a barrier
issued before the consumer already covers the producer (`cover`: a wait or
a `.sync` task, or a loop statement whose body waits for something that
depends on it), the producer has completed whenever the consumer is issued
(D-HAZ-ORDER): the dep orders nothing, and without it the token dies at
its previous use.  Such deps arise when `nem-share-buffers` orders the
reuse of packed L1 bytes after the first ordering (D-LOW-SHARE): the reuse
adds deps from an intermediate loop to the earlier tasks, whose closing
wait then covers them, and the ordering prunes only the deps it added
(D-DEPS-SYNTH).

Inception v2's n315 and n322 (block 4d's 1x1 and 3x3_reduce, both reading
block 4c's concatenation): n315's four engine parts stage their input rows
(129 KB each) and block 4d's double3x3_reduce (n336) reads them again in
its tile loop, so their tokens were live across n322's two tile loops and
n329's, where the 32 tokens were all taken: n315's input copies ran whole
on one DMA (4,036 cycles, on its path) and n322's last weight copy
(294,912 bytes) whole too (9,220 cycles).  n322's first tile loop waits for n315's
stores, which depend on those copies, so the loop covers them: the deps
are dropped, n315's inputs take 4 slices, n322's weights 4, 4, 3 and 3
(n322 19,008 -> 9,081 busy cycles, n315 12,496 -> 10,248).

Exact: the happens-before relation is unchanged (what the dropped dep
ordered, the barrier orders; a task that followed the consumer is issued
after the barrier too), so every schedule computes what it did; `nem-verify`
checks the final program independently.  Each token keeps one use (the
consumers whose deps are dropped are never its only one: TASK-01).  Only
deps from outside the task's loop body: dropping the covered deps of
straight-line statements too (a padded input's border strips, which a
layer's later engine parts load after an earlier wait covered them) moved
`retire_shared`'s gate on SqueezeNet (144,266 -> 144,627 cycles), and
dropping covered wait operands too slowed DenseNet-121 (1,121,223 ->
1,122,112)."""

from __future__ import annotations

from nem.analysis.happens_before import Structure
from nem.dialect.ops import ProgramOp, TransferOp


def drop_covered_loop_deps(program: ProgramOp) -> int:
    """Drop, from each task in a loop body, the deps on tokens from outside
    that body whose producer a barrier covers before the task
    (`Structure.covered_before`), each token keeping one use; how many
    were dropped.  One build of the happens-before facts: dropping a
    covered dep leaves every cover that matters as it was (the producer
    and what it depends on were covered before the task, so before all
    that follows it)."""
    s = Structure(program)
    dropped = 0
    for st in list(s.tasks.values()):
        if not st.loops:
            continue
        deps = list(st.op.deps)
        keep = []
        for d in deps:
            p = s.producer(d)
            if (
                p is not None
                and p.block is not st.block
                and d.has_more_than_one_use()
                and s.covered_before(p, st.op)
            ):
                dropped += 1
                continue
            keep.append(d)
        if len(keep) != len(deps):
            st.op.set_deps(keep)
    return dropped


def drop_reached_deps(program: ProgramOp) -> int:
    """Drop, from each transfer of `program`'s own block (in no loop), the
    deps on tasks that another of its deps reaches through deps
    (`Structure.reached_deps`); how many were dropped (D-NEM-SPLIT-TRANSFERS,
    session 43).  The transfer is issued after that other dep completes,
    which completes after them (D-HAZ-ORDER): the happens-before relation
    is the same, and the dropped tokens die at their earlier uses.  Each
    token keeps a use: the first task that names it keeps it (another of
    that task's deps reaching it would do so through an earlier one naming
    it).  A layer's
    input load names the previous layers' stores it reads (RAW through
    DDR) and the border strips stored after them on the same engine's
    fill chain, which reach them (Inception v1's inception_4b loads, after
    block 4a's 13x13 parts: 15 tokens of 32 held across the MaxPool n63,
    whose engine 0 input copy then ran whole on one DMA).  Transfers only:
    dropping a compute task's reached deps too freed a bias copy's token
    across SqueezeNet's fire4 (n18-n22), where the split then gave it to a
    DDR copy and took a slice from a store (144,266 -> 144,534 cycles).
    One build of the happens-before facts; each task's question
    O(deps)."""
    s = Structure(program)
    dropped = 0
    for st in list(s.tasks.values()):
        if st.loops or type(st.op) is not TransferOp:
            continue
        gone = {d.op for d in s.reached_deps(st)}
        if gone:
            deps = list(st.op.deps)
            st.op.set_deps([d for d in deps if d.owner not in gone])
            dropped += len(gone)
    return dropped
