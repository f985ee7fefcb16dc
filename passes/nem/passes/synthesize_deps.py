"""`nem-synthesize-deps`: make a NEM program race-free and within its
device's live-token limit by adding `deps` and `wait`s, on the one
happens-before model (`nem.analysis.happens_before`, decisions D-HAZ-*,
D-TOK-LIVE).  Usable on any NEM program; `lower-to-nem` runs it on what
`convert-affine-to-nem` emits (tasks without any ordering, D-LOW-DEPS).

1. Ordering.  The hazard analysis lists the conflicting accesses it does not
   order (`find_races`: per buffer, each access against the last writer and
   the readers since, so only the nearest conflicts).  Each is repaired
   where the model allows: the later task gets the earlier task's token in
   its `deps` (the earlier task is directly in the block holding the later
   one or one of its enclosing loops); an access after a loop to a task
   inside it is ordered by the loop body's closing wait (3.).  Deps implied
   by other deps are left out.  Iterations of one loop cannot be ordered by
   tokens (D-NAME-SCOPE): a conflict between iterations that
   `@max_in_flight(N)` lets overlap is an error, or with
   `narrow-windows=true` the window shrinks to the conflict's distance (a
   remark says why).  The analysis runs again until it finds nothing.
2. Nothing else is ordered: independent tasks stay concurrent.
3. Leaks.  Tokens cannot leave their block, and a token nobody consumes is
   a TASK-01 warning: every block (each loop body, the program) ends with
   one `wait` on its tasks whose tokens nothing consumes (its sinks; the
   rest are covered through their consumers).
4. Live tokens (DEV-17).  With the device's `SEQ.max_active_tokens` (or
   `max-tokens=N`), the liveness of `block_liveness` is walked statement by
   statement; where it exceeds the limit, a `wait` before that statement
   ends live tokens (first those only the closing wait held, then those a
   later live task depends on, then the rest; in each class the task that
   ends first by a static D-RT-COST estimate, `finish_times`, as it stalls
   the stream least), and their later uses become redundant and are removed.  A loop whose
   in-flight iterations alone exceed the limit gets its body fitted to
   `limit // iterations in flight`.

Decision D-DEPS-SYNTH in docs/spec-decisions.md.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from nem.analysis.happens_before import Structure
from nem.analysis.hazard_finder import MAX_TASK_INSTANCES, find_races
from nem.analysis.hazard_report import Race
from nem.analysis.race_memos import RaceCache, ShapeMemos
from nem.analysis.token_liveness import block_liveness, live_token_peak
from nem.dialect.attributes import MaxInFlightAttr
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.ops import BufferOp, LoopOp, ProgramOp, RegionOp, TaskOp, WaitOp, programs
from nem.dialect.per_class import first_base_table
from nem.dialect.semantics.cost import UnitChars
from nem.passes.finish_times import FinishTimes, producers_of
from nem.passes.pass_context import report, shape_memos

MAX_ROUNDS = 8
"""Analysis rounds before giving up (one repairs all it finds; the next confirms)."""
MINIMIZE_BUDGET = 1 << 18
"""Work the minimization may do in all (added deps x the work of one scan of
the program, `RaceScan.work`): beyond it, it is skipped (D-DEPS-SYNTH).
Counted in shadow segments visited and ordering queries, not task instances:
one instance reading a buffer that many earlier ones wrote piecewise visits
a segment per writer."""

_LISTED_KINDS = first_base_table(((TaskOp, 1), (LoopOp, 2)), 0)
"""`Synthesizer._list_blocks`' kind of an op class: 1 a task, 2 a loop (its
block is listed too), 0 anything else."""


@dataclass
class Synthesizer:
    """Adds the deps and waits of one program (see the module doc)."""

    program: ProgramOp
    limit: int | None
    narrow_windows: bool
    max_instances: int = MAX_TASK_INSTANCES
    buffers: Collection[SSAValue] | None = None
    """Order only the accesses of these buffers (None: all)."""
    members: Mapping[Operation, object] | None = None
    """Region op -> the buffer it was a region of: pairs of accesses of one
    member are known race-free (`find_races`: an arena's packed buffers,
    D-LOW-SHARE)."""
    memos: ShapeMemos = field(default_factory=ShapeMemos)
    """Answers by shape, shared with the driver's other analyses of the
    program (`shape_memos`, D-HAZ-SYMBOLIC)."""
    remarks: list[Diagnostic] = field(default_factory=list)
    closing: dict[Block, WaitOp] = field(default_factory=dict)
    """The wait this pass put at the end of each block."""
    added: dict[TaskOp, list[SSAValue]] = field(default_factory=dict)
    """The deps this pass added, per task."""
    blocks: list[Block] | None = None
    """The program's block and its loop bodies (`close_blocks`)."""
    tasks_of: dict[Block, list[TaskOp]] | None = None
    """Each block's tasks, in order (`close_blocks`), and their ranks in the
    program (`reduce`): the pass adds and removes no task, so listing every
    op of the program once is enough (nine in ten are index constants)."""
    rank: dict[Operation, int] | None = None
    unit_chars: UnitChars = field(default_factory=dict)
    """The device's unit characteristics (its NMU's MAC rates), which the
    token fit's estimate of when tasks end reads (`FinishTimes`)."""
    cache: RaceCache = field(default_factory=RaceCache)
    """What the scans share while only deps and waits change (the accesses,
    their candidate pairs and conflict sets, each pair's verdict under the
    ordering facts it was decided with): a round re-decides only the pairs
    whose facts changed (D-DEPS-SYNTH)."""

    def run(self) -> None:
        self.order()
        if self.limit is not None and self.fit(self.program.block, self.limit):
            # fit checked every statement of a program it left as it was
            # (DenseNet-121: no wait added, 0.2 s per run of the pass)
            peak, where = live_token_peak(self.program)
            if peak > self.limit:  # pragma: no cover - fit() guarantees it
                raise _error(
                    f"internal: {peak} live tokens remain above the limit {self.limit}",
                    where or self.program,
                )

    # -- 1-3: ordering and leaks ----------------------------------------------------
    def order(self) -> None:
        races: list[Race] = []
        for _ in range(MAX_ROUNDS):
            self.close_blocks()
            scan = find_races(
                self.program, self.max_instances, self.cache, self.buffers, self.members, self.memos
            )
            races = scan.races
            if not races:
                self.minimize(scan.work)
                return
            pending: dict[TaskOp, dict[SSAValue, bool]] = {}
            changed = [self.repair(r, pending) for r in races]
            for later, tokens in pending.items():  # one rewrite of each task's operands
                new = [t for t, added in tokens.items() if added]
                if new:
                    later.set_deps([*later.deps, *new])
                    self.added.setdefault(later, []).extend(new)
            self.reduce()
            if not any(changed):
                break
            # pruning keeps the ordering (it drops only deps a barrier covers,
            # the closing waits included): the next scan, which would find the
            # same races without it, also confirms the pruned program
            self.close_blocks()
            self.prune()
        raise NemDiagnosticError([_cannot(r) for r in races])

    def repair(self, race: Race, pending: dict[TaskOp, dict[SSAValue, bool]]) -> bool:
        """Order one race, the dep it needs added to `pending` (later task ->
        its deps, each True when added, set once the round's races are all
        repaired: the task's deps are read once, not per race); False when
        this pass cannot."""
        a, b, order = race.earlier.inst.task, race.later.inst.task, race.order
        if order.loop is not None:
            return self.narrow(order.loop, order.distance or 1, race)
        if order.after_loop is not None:
            return False  # the closing wait of a's block covers it once a is a sink
        token = a.op.results[0]
        later = b.op
        deps = pending.get(later)
        if deps is None:
            deps = pending[later] = dict.fromkeys(later.deps, False)
        if token in deps:
            return False
        deps[token] = True
        return True

    def narrow(self, loop: LoopOp, distance: int, race: Race) -> bool:
        n = loop.max_in_flight()
        if not self.narrow_windows or distance >= n:
            return False
        decos = [d for d in loop.decorator_list() if d.DECO_NAME != "max_in_flight"]
        if distance > 1:
            decos.insert(0, MaxInFlightAttr(distance))
        from xdsl.dialects.builtin import ArrayAttr

        if decos:
            loop.properties["decorators"] = ArrayAttr(tuple(decos))
        else:
            loop.properties.pop("decorators", None)
        self.cache = self.cache.narrowed(loop)  # buffer instances follow the window
        at_once = "one iteration" if distance == 1 else f"at most {distance} iterations"
        self.remarks.append(
            Diagnostic(
                "remark",
                f"loop '{loop.iv_name.data}' runs {at_once} at a time: "
                f"{_window_reason(race, distance)}; it was @max_in_flight({n}), and tokens "
                "cannot order iterations (D-NAME-SCOPE)",
                SourceLoc.of(loop),
            )
        )
        return True

    def reduce(self) -> None:
        """Drop the added deps that other deps of the same task imply."""
        # the tasks' ranks in program order: `_reaches` only compares them
        # (every op of a lowered program, its index constants, was 8x more)
        if self.rank is None:
            self._list_blocks()
        pos = self.rank
        assert pos is not None
        # each task's producers, read once per call (`_reaches` visits a task
        # once per query; its deps come through the segment accessor) and
        # replaced where this call sets a task's deps: always current
        producers: dict[Operation, list[TaskOp]] = {}
        for task, mine in self.added.items():
            deps = list(task.deps)
            keep = [
                d
                for d in deps
                if d not in mine
                or not any(e is not d and _reaches(e, d, pos, producers) for e in deps)
            ]
            if len(keep) != len(deps):
                task.set_deps(keep)
                producers[task] = producers_of(keep)
                self.added[task] = [d for d in mine if d in keep]

    def prune(self) -> None:
        """Drop the added deps whose producer a barrier (a wait, a `.sync`
        task) already covers before the consumer: a round repairs all races
        it sees at once, so a dep added for one may be subsumed by the wait
        that closes a loop body ordered by another."""
        s = Structure(self.program, self.cache.skeleton)
        for task, mine in self.added.items():
            keep = list(task.deps)
            for d in mine:
                producer = s.producer(d)
                if producer is not None and s.covered_before(producer, task):
                    keep.remove(d)
            if len(keep) != len(task.deps):
                task.set_deps(keep)
                self.added[task] = [d for d in mine if d in keep]

    def minimize(self, work: int) -> None:
        """Drop, one at a time, each added dep without which the analysis
        still finds no race (latest added first).  Removing ordering only adds
        races, so one pass leaves every remaining added dep needed; a dep
        whose token then has no consumer is waited for by its block's closing
        wait.  Skipped when the scans would exceed MINIMIZE_BUDGET, `work`
        being that of the last scan (D-DEPS-SYNTH)."""
        candidates = [(task, d) for task, mine in self.added.items() for d in mine]
        if not candidates or len(candidates) * work > MINIMIZE_BUDGET:
            return
        for task, d in reversed(candidates):
            deps = list(task.deps)
            task.set_deps([x for x in deps if x is not d])
            if find_races(
                self.program, self.max_instances, self.cache, self.buffers, self.members, self.memos
            ).races:
                task.set_deps(deps)
                continue
            self.added[task].remove(d)
            self.close_blocks()

    def close_blocks(self) -> None:
        """Each block ends with a wait on its sinks (tokens nothing consumes)."""
        if self.blocks is None or self.tasks_of is None:
            self._list_blocks()
        assert self.blocks is not None and self.tasks_of is not None
        for block in self.blocks:
            old = self.closing.pop(block, None)
            if old is not None:
                old.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
                old.erase()
            sinks = [
                op.results[0]
                for op in self.tasks_of[block]
                if not op.is_sync and not op.results[0].uses
            ]
            if sinks:
                wait = WaitOp(sinks, [])
                last = block.last_op
                wait.location = last.location if last is not None else self.program.location
                block.add_op(wait)
                self.closing[block] = wait

    def _list_blocks(self) -> None:
        """`blocks`, `tasks_of` and `rank` in one walk of the program: the
        pass adds and removes no loop and no task, so once is enough (three
        walks of every op before, issue 30).  Only loops hold blocks in a
        program, so a block's loops are all the walk descends into; blocks
        and tasks come in preorder, as `walk_ops` lists them."""
        blocks: list[Block] = []
        tasks_of: dict[Block, list[TaskOp]] = {}
        rank: dict[Operation, int] = {}

        kinds = _LISTED_KINDS

        def visit(block: Block) -> None:
            blocks.append(block)
            mine: list[TaskOp] = []
            tasks_of[block] = mine
            op = block.first_op
            while op is not None:
                kind = kinds[type(op)]
                if kind == 1:
                    mine.append(op)  # type: ignore[arg-type]
                    rank[op] = len(rank)
                elif kind == 2:
                    visit(op.block)  # type: ignore[attr-defined]
                op = op.next_op

        visit(self.program.block)
        self.blocks, self.tasks_of, self.rank = blocks, tasks_of, rank

    # -- 4: live tokens ---------------------------------------------------------------
    def fit(self, block: Block, budget: int) -> bool:
        """Waits in `block` (and its loops) so that no statement has more
        than `budget` live tokens; whether it added one."""
        if budget < 1:
            raise _error(
                f"SEQ.max_active_tokens = {self.limit} leaves no token for the "
                "iterations in flight of this loop",
                block.parent_op() or self.program,
                "lower @max_in_flight or target a device with more tokens",
            )
        lv = block_liveness(block)
        ops, nested = lv.ops, list(lv.nested)
        closing = self.closing.get(block)
        end_k = ops.index(closing) if closing is not None else len(ops)
        ends = {t: last for t, (_, last) in lv.intervals.items()}
        starting: dict[int, list[TaskOp]] = {}
        for t, (first, _) in lv.intervals.items():
            starting.setdefault(first, []).append(t)
        live: dict[TaskOp, None] = {}  # in issue order
        expiry: list[tuple[int, int, TaskOp]] = []  # (last use, issue, token): a heap
        order = itertools.count()
        waits: list[tuple[int, list[TaskOp]]] = []
        nested_fit = False
        ev = Evaluator()
        times = FinishTimes(self.unit_chars, ev)
        for k, op in enumerate(ops):
            while expiry and expiry[0][0] < k:
                live.pop(heapq.heappop(expiry)[2], None)
            for t in starting.get(k, ()):
                live[t] = None
                heapq.heappush(expiry, (ends[t], next(order), t))
            count = len(live) + nested[k]
            if count > budget:
                # those only the closing wait holds first, then those a later
                # live task depends on, then the rest (the tail of a chain, such
                # as a long store nothing live follows yet); in each class what
                # ends first by the static estimate, the oldest among equals
                # (session 36: what ends first stalls the stream least)
                followed = {p for t in live for p in producers_of(t.deps)}
                end = times.end
                held = sorted(
                    (t for t in live if t is not op),
                    key=lambda t: (ends[t] != end_k, t not in followed, end[t]),
                )
                sinks = sum(1 for t in held if ends[t] == end_k)
                take = held[: max(min(count - budget, len(held)), sinks)]
                if take:
                    waits.append((k, take))
                    times.wait(take)
                    for t in take:
                        del live[t]
                count -= len(take)
                if count > budget and isinstance(op, LoopOp):
                    copies = _copies(op, ev)
                    nested_fit |= self.fit(op.block, (budget - (count - nested[k])) // copies)
                    nested[k] = block_liveness(op.block).peak()[0] * copies
            times.step(op)
        at: dict[Operation, float] = {o: k for k, o in enumerate(ops)}
        for k, tokens in reversed(waits):
            at[self._wait_before(ops[k], [t.results[0] for t in tokens], at)] = k - 0.5
        return nested_fit or bool(waits)

    def _wait_before(
        self, op: Operation, tokens: list[SSAValue], at: Mapping[Operation, float]
    ) -> WaitOp:
        """`wait(tokens)` before `op`; the later uses of what it covers (the
        tokens and, transitively, their deps) are then redundant.  `at`: the
        position of each statement of `op`'s block.  The uses are found from
        the tokens, not by walking the statements from `op` on: one wait per
        crowded statement of a DenseNet's thousands made that walk quadratic
        (issue 30 item 3, session 50)."""
        block = op.parent_block()
        assert block is not None
        gone = _covered(tokens)
        start = at[op]
        users: dict[Operation, None] = {}
        for token in gone:
            for use in token.uses:
                stmt: Operation | None = use.operation
                while stmt is not None and stmt.parent_block() is not block:
                    stmt = stmt.parent_op()
                if stmt is not None and at[stmt] >= start:
                    users[use.operation] = None
        for inner in users:
            if isinstance(inner, TaskOp) and gone & set(inner.deps):
                inner.set_deps([d for d in inner.deps if d not in gone])
            elif isinstance(inner, WaitOp):
                keep = [t for t in inner.tokens if t not in gone]
                if keep:
                    inner.operands = keep
                else:
                    if self.closing.get(block) is inner:
                        del self.closing[block]
                    inner.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
                    inner.erase()
        wait = WaitOp(tokens, [])
        wait.location = op.location
        Rewriter.insert_op(wait, InsertPoint.before(op))
        return wait


def _covered(tokens: Iterable[SSAValue]) -> set[SSAValue]:
    """`tokens` and every token they depend on, transitively: what a wait on
    `tokens` completes (D-HAZ-WAIT)."""
    out: set[SSAValue] = set()
    stack = list(tokens)
    while stack:
        t = stack.pop()
        if t in out:
            continue
        out.add(t)
        owner = t.owner
        if isinstance(owner, TaskOp):
            stack.extend(owner.deps)
    return out


def _copies(loop: LoopOp, ev: Evaluator) -> int:
    """Iterations of `loop` in flight at once (D-TOK-LIVE)."""
    copies = loop.max_in_flight()
    try:
        lo, hi = ev.static(loop.lower), ev.static(loop.upper)
    except ExprError:
        lo = hi = None
    if lo is not None and hi is not None:
        copies = max(1, min(copies, hi - lo + 1))
    return copies


def _reaches(
    start: SSAValue,
    target: SSAValue,
    pos: dict[Operation, int],
    producers: dict[Operation, list[TaskOp]],
) -> bool:
    """Whether the task of token `target` is among the tasks the task of
    `start` depends on, transitively (deps point to earlier statements, so
    the search stops before `target`'s position).  `producers`: each task's
    `producers_of` its deps as known so far (filled here)."""
    goal = target.owner
    first = start.owner
    if not isinstance(goal, TaskOp) or not isinstance(first, TaskOp):
        return False
    bound = pos.get(goal, 0)
    stack, seen = [first], set()
    while stack:
        t = stack.pop()
        if t is goal:
            return True
        before = producers.get(t)
        if before is None:
            before = producers[t] = producers_of(t.deps)
        for owner in before:
            if owner not in seen and pos.get(owner, -1) >= bound:
                seen.add(owner)
                stack.append(owner)
    return False


def _window_reason(race: Race, distance: int) -> str:
    a, b = race.earlier, race.later
    region = a.region.owner
    assert isinstance(region, RegionOp) and isinstance(region.buffer.owner, BufferOp)
    name = region.buffer.owner.buffer_name.data
    if (a.lo, a.hi) == (b.lo, b.hi):
        return f"{name} is written by every iteration (loop-carried)"
    apart = "consecutive iterations" if distance == 1 else f"iterations {distance} apart"
    return f"{name} is accessed at overlapping bytes by {apart} (HAZ-03)"


def _cannot(race: Race) -> Diagnostic:
    d = race.diagnostic()
    d.message = f"nem-synthesize-deps cannot order this: {d.message}"
    return d


def _error(message: str, at: Operation, fix: str | None = None) -> NemDiagnosticError:
    return NemDiagnosticError([Diagnostic("error", message, SourceLoc.of(at), "DEV-17", fix)])


def synthesize(
    program: ProgramOp,
    limit: int | None,
    narrow_windows: bool = False,
    max_instances: int = MAX_TASK_INSTANCES,
    buffers: Collection[SSAValue] | None = None,
    members: Mapping[Operation, object] | None = None,
    memos: ShapeMemos | None = None,
    unit_chars: UnitChars | None = None,
) -> list[Diagnostic]:
    """Add the deps and waits of `program`; returns the remarks (narrowed
    windows).  With `buffers`, only the races on those buffers are ordered
    (the rest of the program is known race-free: ordering added for them
    leaves it so); with `members`, only those between different members
    (`find_races`); `memos`: the driver's (`shape_memos`)."""
    s = Synthesizer(
        program,
        limit,
        narrow_windows,
        max_instances,
        buffers,
        members,
        memos or ShapeMemos(),
        unit_chars=unit_chars or {},
    )
    s.run()
    return s.remarks


@dataclass(frozen=True)
class SynthesizeDepsPass(ModulePass):
    """Add the deps and waits a program needs: race-free, no leaked token, within the live-token limit.

    Options:
      device: the target whose SEQ.max_active_tokens bounds live tokens (default: --device, else the program's directive)
      max-tokens: the live-token limit (overrides the device's)
      narrow-windows: shrink @max_in_flight where iterations conflict, instead of failing
      remarks: report each narrowed window
      include-dirs: directories where device=NAME's file is found first (nem-opt -I adds its own)
    """

    name = "nem-synthesize-deps"

    device: str | None = None
    max_tokens: int | None = None
    narrow_windows: bool = False
    remarks: bool = False
    include_dirs: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from nem.passes.device import target_device

        diags: list[Diagnostic] = []
        # programs do not nest: the module's ops are read, not every op of
        # their bodies (a lowered CNN's hundreds of thousands)
        for prog in list(programs(op)):
            device = target_device(ctx, prog, self.device, self.include_dirs)
            limit = self.max_tokens
            if limit is None and device is not None:
                limit = device.max_active_tokens
            chars = device.unit_characteristics if device is not None else None
            found = synthesize(
                prog, limit, self.narrow_windows, memos=shape_memos(ctx), unit_chars=chars
            )
            if self.remarks:
                diags += found
        report(ctx, diags)
