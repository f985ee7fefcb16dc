"""`nem-mark-tile-loops` (D-LOW-TILES, D-LOW-AFFINE): which loops the
conversion keeps around raised tiles is decided before it, on the loops'
bodies as written, and marked; `nem-fold-index-arith` then folds the index
arithmetic of those loops too, and the conversion reads the mark instead of
deciding on the folded body (issue 36 item 1).

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the pipeline before it (no marks:
the conversion decides every tile loop, the fold leaves their bodies) on
every lowering input and the ones below; so does `nem-compile` of the ONNX
samples.  The walk follows each copy the conversion lowers of a loop that
may be peeled or is a re-rolled pipeline, and marks a loop only when every
copy decides it a tile loop (session 33).  The conversion's table lacks
`arith.addi` and `arith.subi` (session 34): nothing the lowering accepts
reaches them (D-LOW-AFFINE); the pipelines without the marks or the fold
convert with them (`lowering_diff.WITH_ADD_SUB`)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from lowering_diff import (
    INPUTS,
    LIT_MLIR,
    MLIR_INPUTS,
    WITH_ADD_SUB,
    Steps,
    assert_unchanged,
    before,
    lower,
    sample_before_and_after,
)
from xdsl.context import Context
from xdsl.dialects import affine, arith, func, scf
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.passes import ModulePass
from xdsl.printer import Printer

from nem.compile.lower import xdsl_context
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering.conversion_walk import ConversionWalk
from nem.passes.lowering.fold_index_arith import FoldIndexArithPass
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.mark_tile_loops import MarkTileLoopsPass
from nem.passes.lowering.passes import preparation
from nem.passes.lowering.reroll import LAST_ITERATION
from nem.passes.lowering.structure import TILE_LOOP
from nem.passes.lowering.tile_loops import tile_loop

_before = before(MarkTileLoopsPass, WITH_ADD_SUB)
"""`lower-to-nem`'s steps before the pass: without it, the conversion with
`arith.addi`/`subi` (which the fold leaves in the loops it does not mark)."""

TILE_LOOP_TEXT = """
func.func @main(%A: memref<32xf32>, %B: memref<32xf32>) {
  affine.for %t = 0 to 32 step 8 {
    %o = arith.addi %t, %t : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[%i * -1 + 31] : memref<32xf32>
      affine.store %a, %B[%o + %i + %t * -1] : memref<32xf32>
    }
  }
  return
}
"""
"""A tile loop (`%t`, a step of 8) whose body computes an offset by `arith.addi`."""

NESTED = """
func.func @main(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %t = 0 to 32 step 16 {
    %o = arith.addi %t, %t : index
    affine.for %u = 0 to 16 step 8 {
      %p = arith.subi %u, %o : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[%i + %t + %u] : memref<64xf32>
        affine.store %a, %B[%i + %p + %o + %t] : memref<64xf32>
      }
    }
  }
  return
}
"""
"""A tile loop in a tile loop, its bounds' offsets `arith` of the outer body."""

RAISABLE_ONCE_FOLDED = """
func.func @main(%A: memref<4x8xf32>, %B: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  affine.for %t = 0 to 4 {
    %o = arith.addi %t, %c0 : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[%t, %i] : memref<4x8xf32>
      affine.store %a, %B[%o, %i] : memref<4x8xf32>
    }
  }
  return
}
"""
"""A unit-step loop that is a tile loop only because `match_nest` does not
evaluate `arith.addi` (its offset): folded, the nest is one raisable copy."""

MIN_OUTSIDE = """
func.func @main(%A: memref<32xf32>, %B: memref<32xf32>) {
  %m = affine.min affine_map<() -> (8, 16)>()
  affine.for %t = 0 to 32 step 8 {
    %o = arith.addi %t, %m : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[31 - %i] : memref<32xf32>
      affine.store %a, %B[%o + %i - %t - 8] : memref<32xf32>
    }
  }
  return
}
"""
"""A tile loop whose offset uses an `affine.min` from outside, which the
walk evaluates as the conversion does (`index_ops.minmax_value`)."""

IN_EXECUTE = """
func.func @main(%A: memref<32xf32>, %B: memref<32xf32>) {
  %tok = async.execute {
    affine.for %t = 0 to 32 step 8 {
      %o = arith.addi %t, %t : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[31 - %i] : memref<32xf32>
        affine.store %a, %B[%o + %i - %t] : memref<32xf32>
      }
    }
    async.yield
  }
  async.await %tok : !async.token
  return
}
"""
"""A tile loop in an `async.execute` body, which the conversion lowers in place."""

PAYLOAD_OUTSIDE = """
func.func @main(%A: memref<64xf32>, %B: memref<64xf32>) {
  %c8 = arith.constant 8 : index
  %tok, %v = async.execute -> !async.value<index> {
    async.yield %c8 : index
  }
  %w = async.await %v : !async.value<index>
  affine.for %t = 0 to 32 step 8 {
    %o = arith.subi %t, %w : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[31 - %i] : memref<64xf32>
      affine.store %a, %B[%o + %i - %t + 16] : memref<64xf32>
    }
  }
  return
}
"""
"""A tile loop whose offset uses an async payload awaited outside it."""

IN_TOKEN_LOOP = """
func.func @main(%A: memref<32xf32>, %B: memref<32xf32>) {
  %t0 = async.execute { async.yield }
  %r = affine.for %T = 0 to 2 iter_args(%tk = %t0) -> (!async.token) {
    affine.for %t = 0 to 32 step 8 {
      %o = arith.addi %t, %t : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[31 - %i] : memref<32xf32>
        affine.store %a, %B[%o + %i - %t] : memref<32xf32>
      }
    }
    %t1 = async.execute [%tk] { async.yield }
    affine.yield %t1 : !async.token
  }
  async.await %r : !async.token
  return
}
"""
"""A tile loop in a loop carrying a token (a NEM loop, `loops.carried_tokens`)."""

ASYNC_PAYLOAD = """
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c4 = arith.constant 4 : index
  %tok, %v = async.execute -> !async.value<index> {
    async.yield %c4 : index
  }
  %w = async.await %v : !async.value<index>
  %p = arith.addi %w, %c4 : index
  %s = memref.subview %x[%p] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>
  %t = memref.subview %y[%w] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>
  memref.copy %s, %t : memref<4xf32, strided<[1], offset: ?>> to memref<4xf32, strided<[1], offset: ?>>
  %tok2 = async.execute [%tok] (%v as %b: !async.value<index>) {
    %q = arith.subi %b, %c4 : index
    %u = memref.subview %x[%q] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>
    memref.copy %u, %t : memref<4xf32, strided<[1], offset: ?>> to memref<4xf32, strided<[1], offset: ?>>
    async.yield
  }
  async.await %tok2 : !async.token
  return
}
"""
"""Index arithmetic on async payloads: an awaited `!async.value<index>` and
an execute's body argument, which the conversion evaluates."""

PEELED = """
func.func @main(%A: memref<48xf32>, %B: memref<48xf32>) {
  affine.for %T = 0 to 40 step 16 {
    affine.for %t = 0 to min affine_map<(d0) -> (16, -d0 + 40)>(%T) step 8 {
      %o = arith.addi %t, %T : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[47 - %i - %T - %t] : memref<48xf32>
        affine.store %a, %B[%o + %i] : memref<48xf32>
      }
    }
  }
  return
}
"""
"""A tile loop (`%t`) in a loop the conversion peels (its last tile is
partial): its body is lowered once per copy (`%T` a loop variable, then 32),
and each copy decides `%t` a tile loop."""

REROLLED = """
func.func @main(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %T = 0 to 64 step 32 {
    affine.for %t = 0 to 32 step 8 {
      %o = arith.addi %t, %T : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[%i + %T + %t] : memref<64xf32>
        affine.store %a, %B[%o + %i] : memref<64xf32>
      }
    }
  } {nem.max_in_flight = 2 : i64}
  return
}
"""
"""A tile loop in a re-rolled pipeline (`nem.max_in_flight`)."""

DISAGREEING = """
func.func @main(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %T = 0 to 40 step 16 {
    %m = affine.min affine_map<(d0) -> (16, -d0 + 40)>(%T)
    %p = arith.muli %T, %T : index
    affine.for %t = 0 to 16 step 8 {
      affine.for %i = 0 to 8 {
        %a = affine.load %A[%i + %t] : memref<64xf32>
        affine.store %a, %B[%p + %i + %t - 1024] : memref<64xf32>
      }
    }
  }
  return
}
"""
"""A tile loop in a peeled loop whose copies do not all decide it: in the
full tiles' copy `%p` is a product of two loop variables (the walk has no
value for it: the conversion rejects it), in the last one it is 1024."""

CASES = {
    "tile_loop": TILE_LOOP_TEXT,
    "nested": NESTED,
    "raisable": RAISABLE_ONCE_FOLDED,
    "min_outside": MIN_OUTSIDE,
    "in_execute": IN_EXECUTE,
    "payload_outside": PAYLOAD_OUTSIDE,
    "in_token_loop": IN_TOKEN_LOOP,
    "peeled": PEELED,
    "rerolled": REROLLED,
}
LOOPS = {
    "tile_loop": "loop t in [0..3]:",
    "nested": "loop u in [0..1]:",
    "raisable": "loop t in [0..3]:",
    "min_outside": "loop t in [0..3]:",
    "in_execute": "loop t in [0..3]:",
    "payload_outside": "loop t in [0..3]:",
    "in_token_loop": "loop t in [0..3]:",
    "peeled": "loop t in [0..1]:",
    "rerolled": "loop t in [0..3]:",
}
"""The NEM loop each case's innermost tile loop becomes."""
NESTED_MARKS = {"nested": 2, "peeled": 2, "rerolled": 2}
"""The cases with a tile loop around the tile loop (both marked)."""


def _prepared(text: str) -> str:
    """`main` of `text` after the preparation (the marks, then the fold)."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    for p in preparation("main"):
        p.apply(ctx, module)
    return str(module)


@pytest.mark.parametrize("case", CASES)
def test_a_tile_loops_index_arithmetic_is_folded(case: str) -> None:
    """The tile loops are marked and their `arith.addi`/`subi` become
    applies: the conversion, whose table lacks them, lowers them, and the
    output is the one before the pass."""
    text = CASES[case]
    prepared = _prepared(text)
    assert prepared.count(TILE_LOOP) == NESTED_MARKS.get(case, 1)
    assert not re.search(r"arith\.(addi|subi) %\S+, %\S+ : index", prepared)
    new = lower(text, "main")
    assert new[0] is not None and LOOPS[case] in new[0]
    assert new == lower(text, "main", _before)


@dataclass(frozen=True)
class _DropMarks(ModulePass):
    """The marks erased after the fold: the conversion decides each loop on
    its folded body."""

    name = "drop-marks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in op.walk():
            o.attributes.pop(TILE_LOOP, None)


def _marks_dropped(steps: Steps) -> Steps:
    out: list[ModulePass] = []
    for p in steps:
        out.append(p)
        if isinstance(p, FoldIndexArithPass):
            out.append(_DropMarks())
    return tuple(out)


def test_the_conversion_reads_the_decision_taken_before_the_fold() -> None:
    """Decided on its folded body, the loop would be one raisable nest (one
    copy of the whole array); the mark keeps the decision taken on the body
    as written (one copy per row), which is the output before the pass."""
    new, old = lower(RAISABLE_ONCE_FOLDED, "main"), lower(RAISABLE_ONCE_FOLDED, "main", _before)
    redecided = lower(RAISABLE_ONCE_FOLDED, "main", _marks_dropped)
    assert new == old
    assert new[0] is not None and "loop t in [0..3]:" in new[0]
    assert redecided[0] is not None and "shape=[4, 8]" in redecided[0]
    assert redecided != new


_no_fold = before(FoldIndexArithPass, WITH_ADD_SUB)
"""`lower-to-nem`'s steps without the fold (the conversion's handler evaluates all)."""


def test_an_async_payloads_arithmetic_is_folded() -> None:
    """Arithmetic on an async payload (an await's result, an execute's body
    argument) becomes applies: the conversion binds the payload before any
    user (or rejects at the await or execute), so it is a leaf like a loop
    variable; the output is the one without the fold (whose conversion
    takes `arith.addi`/`subi`)."""
    prepared = _prepared(ASYNC_PAYLOAD)
    assert not re.search(r"arith\.(addi|subi)", prepared)
    # the body argument %b is the payload %v, the producing scope's result
    # once `nem-inline-async-executes` ran (D-LOW-ASYNC-INLINE)
    assert "affine.apply affine_map<(d0) -> ((d0 + -4))> (%v)" in prepared
    new = lower(ASYNC_PAYLOAD, "main")
    assert new[0] is not None and "src=region(x, 32, 16)" in new[0]
    assert "src=region(x, 0, 16)" in new[0]
    assert new == lower(ASYNC_PAYLOAD, "main", _no_fold)


def _generic(text: str) -> str:
    """`text` with its re-rolled loop's last iteration (the
    `scf.execute_region` after it) marked `nem.last_iteration`, as
    `nem-reroll-pipelines` leaves it, in the generic form (the custom
    parser drops the attribute: upstream-reports 17)."""
    module = parse_mlir(xdsl_context(), text)
    for o in module.walk():
        if isinstance(o, scf.ExecuteRegionOp):
            o.attributes[LAST_ITERATION] = UnitAttr()
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue()


REROLLED_TAIL = _generic("""
func.func @main(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %T = 0 to 32 step 32 {
    affine.for %t = 0 to 32 step 8 {
      %o = arith.addi %t, %T : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[%i + %T + %t] : memref<64xf32>
        affine.store %a, %B[%o + %i] : memref<64xf32>
      }
    }
  } {nem.max_in_flight = 2 : i64}
  scf.execute_region {
    %last = affine.apply affine_map<() -> (32)>()
    affine.for %t = 0 to 32 step 8 {
      %o = arith.subi %t, %last : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[%i + %last + %t - 32] : memref<64xf32>
        affine.store %a, %B[%o + %i + 64] : memref<64xf32>
      }
    }
    scf.yield
  }
  return
}
""")
"""A re-rolled pipeline whose last iteration is lowered after it, as the
loop's peeled copy: a tile loop in each."""


def test_a_re_rolled_loops_last_iteration_is_walked() -> None:
    """The walk follows the last iteration after a re-rolled loop, as the
    conversion lowers it: its tile loop is marked and folded."""
    prepared = _prepared(REROLLED_TAIL)
    assert prepared.count(TILE_LOOP) == 3
    assert not re.search(r"arith\.(addi|subi)", prepared)
    new = lower(REROLLED_TAIL, "main")
    assert new[0] is not None and "loop T in [0..0] @max_in_flight(2):" in new[0]
    assert new == lower(REROLLED_TAIL, "main", _before)


def test_a_loop_the_copies_do_not_all_decide_is_left_unmarked() -> None:
    """Decided in one copy of a peeled loop and not in the other, `%t` is
    undecided (None), not marked: the conversion decides each copy."""
    module = parse_mlir(xdsl_context(), DISAGREEING)
    fn = next(o for o in module.ops if isinstance(o, func.FuncOp))
    outer = next(o for o in fn.body.block.ops if isinstance(o, affine.ForOp))
    inner = next(o for o in outer.body.block.ops if isinstance(o, affine.ForOp))
    decided = ConversionWalk(fn, all_index_values=True).tile_loops
    assert inner in decided and decided[inner] is None
    assert _prepared(DISAGREEING).count(TILE_LOOP) == 1  # `%T`, decided once
    assert lower(DISAGREEING, "main") == lower(DISAGREEING, "main", _before)


BOUNDS_A_PARTIAL_TILE = """
func.func @main(%A: memref<64xf32>, %B: memref<64xf32>) {
  %c4 = arith.constant 4 : index
  affine.for %T = 0 to 48 step 16 {
    %o = arith.addi %T, %c4 : index
    %m = affine.min affine_map<(d0) -> (16, -d0 + 44)>(%o)
    %s = memref.subview %A[%T] [%m] [1] : memref<64xf32> to memref<?xf32, strided<[1], offset: ?>>
    %d = memref.subview %B[%T] [%m] [1] : memref<64xf32> to memref<?xf32, strided<[1], offset: ?>>
    memref.copy %s, %d : memref<?xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
  }
  return
}
"""
"""An `arith.addi` that is an operand of an `affine.min` whose last tile is
partial (8 of 16): session 33's fold left it as written, for the conversion's
handler."""


class _NoIndexValue(dict):
    """An index environment that fails the test when a value is asked of it."""

    def __contains__(self, v: object) -> bool:
        raise AssertionError("the decision read an index value")

    def __getitem__(self, v: object) -> None:
        raise AssertionError("the decision read an index value")


def test_addi_and_subi_are_out_of_the_table() -> None:
    """Nothing the lowering accepts reaches `arith.addi`/`subi` (D-LOW-AFFINE,
    session 34), so the table lacks them (51 entries; nor has it the memref
    DMAs, D-LOW-DMA session 36, nor `async.execute` and `async.await`, one
    `nem_lowering.scope` entry in their place, D-LOW-ASYNC-INLINE, nor the
    control flow, D-LOW-TASK-CF, nor terminators, D-LOW-WALK).  The two constructs that reached them in
    session 33: (1) an operand of a min/max is folded
    (the peeling decision reads `arith` as applies) and peels as without
    the fold; (2) a loop the copies of a peeled loop decide differently
    holds no `arith` in the bodies the conversion lowers one by one: a loop
    whose body does is decided without any index value (the same in every
    copy), so only a unit-step point nest, whose bodies but the innermost
    hold only applies and constants, can be decided differently."""
    assert len(HANDLERS) == 51 and not {arith.AddiOp, arith.SubiOp} & set(HANDLERS)
    assert "arith.addi" not in _prepared(BOUNDS_A_PARTIAL_TILE)
    new = lower(BOUNDS_A_PARTIAL_TILE, "main")
    assert new[0] is not None and "loop T in [0..1]:" in new[0]
    assert "shape=[8]" in new[0] and "partial last tile peeled" in new[1][0][1]
    assert new == lower(BOUNDS_A_PARTIAL_TILE, "main", _before)
    assert new == lower(BOUNDS_A_PARTIAL_TILE, "main", _no_fold)
    module = parse_mlir(xdsl_context(), RAISABLE_ONCE_FOLDED)
    loop = next(o for o in module.walk() if isinstance(o, affine.ForOp))
    assert any(isinstance(o, arith.AddiOp) for o in loop.body.block.ops)
    assert tile_loop(loop, _NoIndexValue(), lambda v, o: pytest.fail("a buffer asked"))
    assert lower(DISAGREEING, "main") == lower(DISAGREEING, "main", _before)


@pytest.mark.parametrize(
    "path", MLIR_INPUTS + LIT_MLIR, ids=lambda p: str(p.relative_to(INPUTS.parents[1]))
)
def test_the_marks_change_no_output(path: Path) -> None:
    """Every public function of every lowering input lowers to the same
    `.nem`, remarks and errors with the marks (and the fold of the marked
    loops) and as before them."""
    assert_unchanged(path, _before)


@pytest.mark.parametrize("name", ["mlp", "cnn", "resblock", "transformer"])
def test_the_samples_compile_to_the_same_program(name: str, monkeypatch, tmp_path: Path) -> None:
    """`nem-compile` of the ONNX samples: the same `.nem` with the pass as
    without it."""
    after, old, _ = sample_before_and_after(
        name,
        MarkTileLoopsPass,
        lambda o: TILE_LOOP in o.attributes,
        HANDLERS,
        monkeypatch,
        tmp_path,
    )
    assert old == after
