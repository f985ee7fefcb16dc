"""The conversion's walk, followed ahead of it (D-LOW-OUTLINE, D-LOW-TILES):
the scopes `convert-affine-to-nem` lowers op by op and the index values it
binds there, for the analyses that decide before the conversion what it
would decide as it lowers (`nem-outline-kernels`' `OutlinedNests`,
`nem-mark-tile-loops`' `TileLoops`).  One walk, so that both follow the
conversion the same way and leave to it the same scopes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import suppress
from functools import cached_property
from itertools import count
from typing import NoReturn

from xdsl.dialects import affine, arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects.affine_max import AffineMaxOp
from nem.passes.lowering.affine_algebra import INDEX_BINOPS, Aff, Var, eval_map
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.escape import LINALG_OPS
from nem.passes.lowering.index_ops import index_binop, minmax_value
from nem.passes.lowering.loops import MapEvaluator, full_tile_count, loop_bounds, partial_of
from nem.passes.lowering.memref_roots import MemrefRoots
from nem.passes.lowering.peeled_loops import PeeledLoops
from nem.passes.lowering.raise_decision import RaiseAnalysis
from nem.passes.lowering.reroll import is_rerolled, last_iteration
from nem.passes.lowering.structure import is_structural
from nem.passes.lowering.tile_loops import tile_loop


class NeedsView(Exception):
    """The decision asked for a view's box: the conversion decides the nest."""


class _Unknown(Exception):
    """An index value the walk does not evaluate: the conversion decides."""


def no_view(m: SSAValue, user: Operation) -> NoReturn:
    """The `view_of` of a decision ahead of the conversion, which has no views."""
    raise NeedsView


VAR = "\u2063v"
"""The prefix of the names of the walk's loop variables, which no text of
the conversion holds: a `why` that prints one would name the conversion's
NEM variable instead, so such a nest is left to it."""


def index_constants(ops: Sequence[Operation]) -> dict[SSAValue, Aff]:
    """The index constants among `ops`, as the conversion binds them
    (`index_ops.lower_constant`)."""
    env: dict[SSAValue, Aff] = {}
    for o in ops:
        if isinstance(o, arith.ConstantOp) and isinstance(o.result.type, IndexType):
            assert isinstance(o.value, IntegerAttr)
            env[o.result] = Aff.c(o.value.value.data)
    return env


class ConversionWalk:
    """The loops of function `fn` the conversion decides on known values,
    found in one walk that follows the conversion: the ops of the
    function's block, then the bodies of the loops it keeps as NEM loops
    (`is_structural`, `tile_loop`), each loop variable bound to
    `lb + v * step` as `loops.lower_loop` binds it (a `Var` over the loop's
    trip count), index constants and `affine.apply` as `index_ops` binds
    them.  `tile_loops` holds `tile_loop`'s answer for each loop it
    decided (None where it reached the loop and could not decide, or where
    the copies below disagree); `decide` is called on each loop nest (a
    loop it is not) and linalg op.  A loop whose body the conversion lowers
    other than once per iteration on those values is not entered: one that
    may be peeled (`PeeledLoops`), a re-rolled pipeline
    (`nem.max_in_flight`), one that carries values; nor is any other region
    (`scf`, `affine.if`, `async`).

    With `all_index_values` (`nem-mark-tile-loops`), the walk binds every
    index value the conversion binds in those scopes: `arith` index
    arithmetic (`index_ops.index_binop`), `affine.min`/`max`
    (`index_ops.minmax_value`), async `index` payloads (as
    `nem-inline-async-executes` forwards them, D-LOW-ASYNC-INLINE); and
    it follows the conversion into the scopes it lowers in place besides:
    `async.execute` bodies, the bodies of loops carrying only tokens
    (`nem-inline-async-executes` drops them); and it follows each copy the conversion
    lowers of a loop that may be peeled or is a re-rolled pipeline
    (`loops.partial_of`: the full tiles with the loop's variable over
    their count, then the peeled last one with its constant value, or a
    re-rolled loop's last iteration after it), deciding the loops inside
    once per copy: a loop is a tile loop (`True`) only when every copy
    decides it one.  A loop in a copy the walk does not follow (a loop it
    does not enter, or enters as a nest) is undecided (`None`), so one
    decided in another copy is left to the conversion.
    `nem-outline-kernels` walks without (its decisions as session 31 took
    them).

    A value the walk does not evaluate leaves the loops and nests that use
    it to the conversion, and so does a decision that reads a view's box."""

    def __init__(self, fn: func.FuncOp, all_index_values: bool = False) -> None:
        self.fn = fn
        self.all_index_values = all_index_values
        self.tile_loops: dict[affine.ForOp, bool | None] = {}
        self._order = count()
        self._block(fn.body.block.ops, {})

    @cached_property
    def roots(self) -> MemrefRoots:
        """The function's `MemrefRoots`, walked once the first nest or tile
        loop reaches a decision (none in a function whose loops all move
        data, as the compile routes give)."""
        return MemrefRoots(self.fn)

    @cached_property
    def peeled(self) -> PeeledLoops:
        return PeeledLoops(self.fn)

    def decide(self, top: Operation, env: dict[SSAValue, Aff]) -> None:
        """A loop nest or linalg op the conversion decides (`compute`), on
        `env`: nothing here."""

    def _block(self, ops: Iterable[Operation], env: dict[SSAValue, Aff]) -> None:
        for o in ops:
            if isinstance(o, arith.ConstantOp) and isinstance(o.result.type, IndexType):
                env.update(index_constants([o]))
            elif isinstance(o, affine.ApplyOp):
                with suppress(_Unknown, NemDiagnosticError):
                    env[o.result] = _evaluate(env)(o, o.map.data, tuple(o.mapOperands))[0]
            elif isinstance(o, affine.ForOp):
                self._loop(o, env)
            elif isinstance(o, LINALG_OPS):
                self.decide(o, env)
            elif self.all_index_values:
                self._index_value(o, env)

    def _index_value(self, o: Operation, env: dict[SSAValue, Aff]) -> None:
        """The index values `all_index_values` adds, as the conversion's
        handlers bind them (none where they reject)."""
        if isinstance(o, INDEX_BINOPS):
            if isinstance(o.results[0].type, IndexType) and all(v in env for v in o.operands):
                with suppress(NemDiagnosticError):
                    env[o.results[0]] = index_binop(o, *(env[v] for v in o.operands))
        elif isinstance(o, affine.MinOp | AffineMaxOp):
            with suppress(_Unknown, NemDiagnosticError):
                env[o.results[0]] = minmax_value(o, _evaluate(env))
        elif isinstance(o, asy.ExecuteOp):
            self._execute(o, env)
        elif isinstance(o, asy.AwaitOp) and o.result is not None:
            _payload(env, o.operand, o.result)

    def _loop(self, loop: affine.ForOp, env: dict[SSAValue, Aff]) -> None:
        """`loops.lower_for`'s choice: a NEM loop (entered), a nest (decided)."""
        if is_structural(loop):
            return self._enter(loop, env)
        if not all(v in env for v in _outside_indices(loop)):
            return self._undecided(loop, loop)
        try:
            kept = tile_loop(loop, env, RaiseAnalysis(env, no_view, self.roots).buffer_of)
        except (NeedsView, NemDiagnosticError):
            return self._undecided(loop, loop)
        known = self.tile_loops.setdefault(loop, kept)
        if known is not kept:
            self.tile_loops[loop] = None  # decided otherwise in another copy
        if kept:
            return self._enter(loop, env)
        self._undecided(loop)  # lowered as a nest: no loop inside is decided
        self.decide(loop, env)

    def _undecided(self, loop: affine.ForOp, *also: affine.ForOp) -> None:
        """The loops inside `loop` (and `also`) reached in a copy the walk
        does not follow: left to the conversion, whatever other copies say."""
        inside = (o for o in loop.body.walk() if isinstance(o, affine.ForOp))
        for o in (*also, *inside):
            self.tile_loops[o] = None

    def _execute(self, op: asy.ExecuteOp, env: dict[SSAValue, Aff]) -> None:
        """An execute's body in place (`nem-inline-async-executes`' scope),
        its arguments and results the `index` payloads they carry."""
        body = op.body_region.block
        for v, arg in zip(op.body_operands, body.args):
            _payload(env, v, arg)
        self._block(body.ops, env)
        yielded = body.last_op
        for r, v in zip(op.body_results, yielded.operands if yielded is not None else ()):
            _payload(env, v, r)

    def _carries_no_index_value(self, loop: affine.ForOp) -> bool:
        """Whether `loop` carries nothing, or (with `all_index_values`) only
        `!async.token`s, which stand for completed work and bind no index
        value (`nem-inline-async-executes` drops them; a loop carrying anything else is
        rejected or a nest)."""
        if self.all_index_values:
            return all(isinstance(r.type, asy.TokenType) for r in loop.results)
        return not loop.results

    def _enter(self, loop: affine.ForOp, env: dict[SSAValue, Aff]) -> None:
        """The body of a NEM loop, once per copy the conversion lowers
        (`loops.lower_loop`), the loop's variable bound as it binds it."""
        if not self._carries_no_index_value(loop):
            return self._undecided(loop)
        try:
            rerolled = is_rerolled(loop)
            copied = rerolled or self.peeled.may_peel(loop)
            if copied and not (
                self.all_index_values and all(v in env for v in _outside_indices(loop))
            ):
                return self._undecided(loop)
            lb, step, trip = loop_bounds(loop, _evaluate(env))
            tail = last_iteration(loop) if rerolled else None
            if trip == 0 and tail is None:
                return  # the conversion lowers no body
            # (a loop no copy of which is peeled has no partial last tile: `PeeledLoops`)
            partial = partial_of(loop, lb, step, trip, _evaluate(env), env) if copied else None
        except (_Unknown, NemDiagnosticError):
            return self._undecided(loop)
        iv = loop.body.block.args[0]
        if full := full_tile_count(trip, partial, tail):
            order = next(self._order)
            env[iv] = lb + Aff.atom(Var(iv, f"{VAR}{order}", full, order)).scale(step)
            self._block(loop.body.block.ops, env)
        if tail is not None:  # a re-rolled loop's last iteration, after it
            self._block(list(tail.region.block.ops)[:-1], env)
        elif partial is not None:  # the peeled last tile
            env[iv] = lb + Aff.c((trip - 1) * step)
            self._block(loop.body.block.ops, env)


def _payload(env: dict[SSAValue, Aff], v: SSAValue, to: SSAValue) -> None:
    """`to` carries `v`'s index value, as `nem-inline-async-executes` forwards a payload (an
    execute's result, body argument, an await's result; a memref's view is
    no index value)."""
    if v in env:
        env[to] = env[v]


def _evaluate(env: dict[SSAValue, Aff]) -> MapEvaluator:
    """`LoweringContext.affine` on the walk's index values (`_Unknown` for a
    value it has none of; the conversion's reject for a non-affine result)."""

    def evaluate(op: Operation, m: AffineMap, operands: tuple[SSAValue, ...]) -> list[Aff]:
        if not all(v in env for v in operands):
            raise _Unknown
        try:
            return eval_map(m, [env[v] for v in operands])
        except ValueError as e:
            raise reject(op, f"non-affine index: {e}") from None

    return evaluate


def _outside_indices(top: Operation) -> list[SSAValue]:
    """The index values the ops in `top` use from outside it."""
    inside = set(top.walk())
    return [
        v
        for o in inside
        for v in o.operands
        if isinstance(v.type, IndexType)
        and not (isinstance(v.owner, Operation) and v.owner in inside)
        and not (isinstance(v, BlockArgument) and v.block.parent_op() in inside)
    ]
