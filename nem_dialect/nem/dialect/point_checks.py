"""The iteration-point machinery of the static verifier (D-VERIFY-ENUM,
D-VERIFY-BUDGET): the base class of its rule groups, with the shared state
(program, catalog, evaluator, diagnostics) and the tools that check a rule at
every iteration point of the enclosing loops -- interval proofs over the loop
box first (`box_forms`), then vectorized enumeration (`each_point`), and a
warning for what neither covers (`_unchecked`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from operator import itemgetter
from typing import TYPE_CHECKING, cast

from xdsl.ir import BlockArgument, Operation, SSAValue

from nem.dialect.bounded_cache import SEGMENT_CACHE_SIZE, BoundedCache
from nem.dialect.diagnostics import Diagnostic, SourceLoc, error
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.families import Catalog
from nem.dialect.iteration_space import (
    MAX_POINTS,
    MAX_SCALAR_POINTS,
    Form,
    Inexact,
    Interval,
    IterationSpace,
    forms,
    point,
)
from nem.dialect.ops import (
    LoopOp,
    ProgramOp,
)

if TYPE_CHECKING:
    import numpy as np
    from xdsl.dialects.builtin import DenseArrayBase, IntegerType

EnvCheck = Callable[[dict[SSAValue, int]], bool]
"""A check at one iteration point: False when it reported an error."""

Chunk = dict[BlockArgument, "np.ndarray"]
"""A chunk of iteration points: each loop variable's values (`IterationSpace.chunks`)."""

Box = dict[BlockArgument, Interval]
"""Each loop variable's inclusive bounds (`IterationSpace.box`)."""

LoopFacts = tuple[BlockArgument, bool, frozenset[BlockArgument] | None]
"""A loop's variable, whether it may run zero times, the loop variables of its bounds."""


class PointChecks:
    """State and iteration-point tools shared by the verifier's rule groups."""

    program: ProgramOp
    catalog: Catalog
    ev: Evaluator
    diags: list[Diagnostic]

    def err(
        self, op: Operation | SourceLoc | None, rule: str | None, message: str, fix: str
    ) -> None:
        self.diags.append(error(message, op, rule, fix))

    # caches of the rule groups, filled on first use (the verifier runs once
    # per program: nothing invalidates them)
    @cached_property
    def _boxes(self) -> dict[tuple[int, ...], Box | None]:
        return {}

    @cached_property
    def _forms(self) -> dict[tuple[int, tuple[int, ...]], Form | None]:
        return {}

    @cached_property
    def _loop_facts_of(self) -> dict[int, LoopFacts]:
        return {}

    @cached_property
    def _groups_of(self) -> dict[int, tuple[tuple[SSAValue, ...], ...]]:
        return {}

    def groups(self, op: Operation) -> tuple[tuple[SSAValue, ...], ...]:
        """`operand_groups(op)`, decoded once per op: a region's groups are
        read by its own rules and again by every task that reads the region
        (each move, each (output, input) pair of a compute task's aliasing
        check).  By id: the program keeps its ops alive, and the verifier
        does not change them."""
        known = self._groups_of
        hit = known.get(id(op))
        if hit is None:
            hit = known[id(op)] = operand_groups(op)
        return hit

    def walk(self) -> list[tuple[Operation, tuple[LoopOp, ...]]]:
        """Every op with its enclosing loops, in program order; built once
        (each stage walks it again) and iteratively."""
        return self._walked

    @cached_property
    def _walked(self) -> list[tuple[Operation, tuple[LoopOp, ...]]]:
        walked: list[tuple[Operation, tuple[LoopOp, ...]]] = []
        stack: list[tuple[Operation | None, tuple[LoopOp, ...]]] = [
            (self.program.block.first_op, ())
        ]
        while stack:
            op, loops = stack.pop()
            while op is not None:
                walked.append((op, loops))
                if type(op) is LoopOp:  # not isinstance: ops are ABCs (slow checks)
                    stack.append((op.next_op, loops))
                    loops, op = loops + (op,), op.block.first_op
                    continue
                op = op.next_op
        return walked

    def envs(self, loops: tuple[LoopOp, ...]) -> Iterator[dict[SSAValue, int]]:
        """Every binding of the enclosing loop variables (inclusive bounds), in
        program order: the scalar enumeration, for what the vectorized one
        cannot evaluate exactly in int64."""
        if not loops:
            yield {}
            return
        for outer in self.envs(loops[:-1]):
            lo = self.ev.eval(loops[-1].lower, outer)
            hi = self.ev.eval(loops[-1].upper, outer)
            if lo is None or hi is None:
                continue
            iv = loops[-1].block.args[0]
            for i in range(lo, hi + 1):
                env = dict(outer)
                env[iv] = i
                yield env

    def each_point(
        self,
        op: Operation,
        loops: tuple[LoopOp, ...],
        check: EnvCheck,
        suspects: Callable[[Chunk, int], np.ndarray | None],
        what: str,
        rule: str,
    ) -> None:
        """Run `check` at every iteration point of `loops` where the vectorized
        predicate `suspects(chunk, n)` may hold (None: at no point of the chunk),
        in program order, until `check` reports an error (D-VERIFY-ENUM).
        A chunk that int64 cannot evaluate exactly is checked point by point.
        After MAX_POINTS points the check stops with a warning naming `what`
        and the iterations examined (D-VERIFY-BUDGET)."""
        if not loops:
            check({})
            return
        import numpy as np  # (not at start-up: most programs need no enumeration)

        done = scalar = 0
        last: dict[SSAValue, int] = {}
        try:
            for chunk, n in IterationSpace(self.ev, loops).chunks():
                if done >= MAX_POINTS or scalar >= MAX_SCALAR_POINTS:
                    return self._unchecked(op, loops, what, rule, last, done)
                m = min(n, MAX_POINTS - done)
                try:
                    flags = suspects(chunk, n)
                    hits: Iterable[int] = (
                        () if flags is None else np.flatnonzero(flags[:m]).tolist()
                    )
                except Inexact:
                    hits = range(m)
                    scalar += m
                for k in hits:
                    if not check(point(chunk, k)):
                        return None
                done += m
                last = point(chunk, m - 1)
        except Inexact:  # loop bounds near the 64-bit limits: the exact scalar walk
            for env in self.envs(loops):
                if done >= MAX_SCALAR_POINTS:
                    return self._unchecked(op, loops, what, rule, last, done)
                if not check(env):
                    return None
                done += 1
                last = env
        return None

    def _unchecked(
        self,
        op: Operation,
        loops: tuple[LoopOp, ...],
        what: str,
        rule: str,
        last: dict[SSAValue, int],
        done: int,
    ) -> None:
        upto = ", ".join(
            f"{lp.iv_name.data}={last[lp.block.args[0]]}"
            for lp in loops
            if lp.block.args[0] in last
        )
        self.diags.append(
            Diagnostic(
                "warning",
                f"{what} checked for the first {done} iteration points only (up to "
                f"{upto}): the expressions are not affine in the loop variables, their bounds "
                f"do not prove the rule, and the loops have more than {MAX_POINTS} points",
                SourceLoc.of(op),
                rule,
                "the remaining iterations are checked when the program runs (decision "
                "D-VERIFY-BUDGET); affine offsets and extents (a * i + b) are checked exactly",
            )
        )

    def box_forms(
        self, loops: tuple[LoopOp, ...], values: tuple[SSAValue, ...]
    ) -> tuple[Box, list[Form]] | None:
        """The box of constant loop bounds and each value's `Form` over it;
        None when the bounds are not constant or a value is not an integer
        expression of the loop variables."""
        boxes = self._boxes
        key = tuple(map(id, loops))  # the loops are alive: ids are theirs
        if key not in boxes:  # one box per loop nest, not per op in it (read-only)
            boxes[key] = IterationSpace(self.ev, loops).box()
        box = boxes[key]
        if box is None:
            return None
        # a value's Form over one box is computed once: a region's offset and
        # extent come back in every transfer and store that reads the region
        # (Forms are frozen; `forms` asks the evaluator, which keeps `v` alive)
        known = self._forms
        out: list[Form] = []
        for v in values:
            fkey = (id(v), key)
            if fkey in known:
                f = known[fkey]
            else:
                try:
                    (f,) = forms(self.ev, (v,), box)
                except ExprError:
                    return None
                known[fkey] = f
            if f is None:
                return None
            out.append(f)
        return box, out

    def check_key(
        self, loops: tuple[LoopOp, ...], values: tuple[SSAValue, ...], *context: object
    ) -> tuple[object, ...] | None:
        """The key of a check over the iteration points of `loops` that reads
        `values` (their structural keys, `Evaluator.key`) and `context`
        (hashable facts it also depends on): equal keys give the same
        outcome.  Outside loops the keys are static values (the regions of
        one tile share offset, extent and shape values).  None when a value
        raises ExprError."""
        key = self.ev.key
        try:
            return (id(loops), *context, *map(key, values))
        except ExprError:
            return None

    def passed_before(self, key: tuple[object, ...] | None) -> bool:
        """A check with this key already passed without any diagnostic."""
        return key is not None and key in self.__dict__.get("_passed_checks", ())

    def record_pass(self, key: tuple[object, ...] | None, diags_before: int) -> None:
        """Remember a check that added no diagnostic since `diags_before`
        (the loops the key names by identity are held alive by the walk)."""
        if key is not None and len(self.diags) == diags_before:
            self.__dict__.setdefault("_passed_checks", set()).add(key)

    def relevant_loops(
        self, loops: tuple[LoopOp, ...], values: Sequence[SSAValue]
    ) -> tuple[LoopOp, ...]:
        """The enclosing loops whose iterations can change `values`: those
        whose variable they use (directly or through the bounds of another
        such loop), and every loop that may run zero times (whose body then
        never runs).  Enumerating only these visits every distinct value, so
        the cost does not grow with unrelated loops (a region over an inner
        index of a 2^63-iteration loop)."""
        if not loops:
            return loops
        try:
            need: set[BlockArgument] = set().union(*(self.ev.free_loop_args(v) for v in values))
        except ExprError:
            return loops
        keep = []
        for lp in reversed(loops):
            arg, may_skip, bound_args = self._loop_facts(lp)
            if arg in need or may_skip:
                keep.append(lp)
                if bound_args is None:
                    return loops
                need |= bound_args
        return tuple(reversed(keep))

    def _loop_facts(self, lp: LoopOp) -> LoopFacts:
        """A loop's variable, whether it may run zero times (bounds not
        constant, or lower > upper), and the loop variables its bounds use
        (None when they raise ExprError): asked for every op in its body."""
        facts = self._loop_facts_of
        hit = facts.get(id(lp))
        if hit is None:
            lower, upper = lp.lower, lp.upper
            lo, hi = self.ev.static(lower), self.ev.static(upper)
            try:
                bound_args = self.ev.free_loop_args(lower) | self.ev.free_loop_args(upper)
            except ExprError:
                bound_args = None
            hit = facts[id(lp)] = (
                lp.block.args[0],
                lo is None or hi is None or lo > hi,
                bound_args,
            )
        return hit


def operand_groups(op: Operation) -> tuple[tuple[SSAValue, ...], ...]:
    """The operands of an op with `operandSegmentSizes` (a region, a move, a
    compute task), one tuple per operand definition, in one call: the rules
    read several operands of each such op, and each named accessor decodes
    the segment array again."""
    sizes = cast("DenseArrayBase[IntegerType]", op.properties["operandSegmentSizes"]).data.data
    groups = _GROUPS.get(sizes)
    if groups is None:
        values = cast(
            "DenseArrayBase[IntegerType]", op.properties["operandSegmentSizes"]
        ).get_values()
        starts = [0]
        for n in values:
            starts.append(starts[-1] + n)
        bounds = [slice(a, b) for a, b in zip(starts, starts[1:])]
        groups = _GROUPS[sizes] = (
            itemgetter(*bounds)
            if len(bounds) > 1
            else lambda operands: tuple(operands[b] for b in bounds)
        )
    # the slices of a plain tuple, taken by one C call (SSAValues' own
    # slicing is Python code that wraps each slice)
    return groups(tuple(op.operands))


_GROUPS: BoundedCache[bytes, Callable[[tuple[SSAValue, ...]], tuple[tuple[SSAValue, ...], ...]]] = (
    BoundedCache(SEGMENT_CACHE_SIZE)
)
"""What takes each operand group's slice, by the bytes of the segment array."""


def iteration_text(loops: tuple[LoopOp, ...], env: Mapping[SSAValue, int]) -> str:
    if not loops:
        return ""
    parts = [
        f"{lp.iv_name.data}={env[lp.block.args[0]]}" for lp in loops if lp.block.args[0] in env
    ]
    return f" (at iteration {', '.join(parts)})"
