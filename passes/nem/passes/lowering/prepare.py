"""The passes that prepare a function for `convert-affine-to-nem`, each a step
of `lower-to-nem` with its own MLIR output (issue 36, step 1 of the pattern
pipeline): `nem-raise-scf-for` (D-LOW-SCF), `nem-drop-dead-arith`
(D-LOW-DEAD-ARITH), `nem-check-input-ranges` (D-INT-RANGE), in that order,
then `nem-reroll-pipelines` (`reroll.py`, D-LOW-PIPE).  `convert-affine-to-nem`
run alone runs them first itself (D-LOW-SCF, `passes.preparation`), so its
input need not be prepared.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Region
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.input_limits import check_value_ranges
from nem.passes.lowering.scf_loops import ScfForToAffine, has_scf_for


@dataclass(frozen=True)
class RaiseScfForPass(ModulePass):
    """Rewrite constant-step `scf.for` loops over index into `affine.for` (D-LOW-SCF).

    Other `scf.for`s are left for the conversion to reject.  A module without
    an `scf.for` (what the affine route gives) is not given to the rewriter:
    its worklist costs more than the one walk that finds none (issue 30)."""

    name = "nem-raise-scf-for"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if has_scf_for(op):
            PatternRewriteWalker(ScfForToAffine(), apply_recursively=False).rewrite_module(op)


@dataclass(frozen=True)
class DropDeadArithPass(ModulePass):
    """Erase the entry function's unused `arith` ops and `affine.apply`s (D-LOW-DEAD-ARITH).

    Those that are trivially dead (xDSL's `is_trivially_dead`: no uses, no
    effects; a chain of them goes in one reverse walk): left in a point loop
    they hide a raisable nest, whose every point then becomes tasks of its
    own (a fuzzed tiled matmul: a million task instances).  Other unused ops
    (views) keep what they declare; unused allocations are dropped after the
    conversion (`drop_unused_allocations`, D-LOW-BUF).  Runs before the range
    check: a constant nothing uses is not the program's.

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-drop-dead-arith"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in reversed(list(entry_function(op, self.entry).walk())):
            if (
                (o.dialect_name() == "arith" or isinstance(o, affine.ApplyOp))
                and o.results
                and is_trivially_dead(o)
            ):
                o.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
                o.erase()


@dataclass(frozen=True)
class CheckInputRangesPass(ModulePass):
    """Check that the entry function's sizes and constants fit 64 bits (D-INT-RANGE).

    Memref sizes, loop bounds and steps, index constants and affine-map
    constants must fit NEM's signed 64-bit integers, so that no shape, stride
    or offset the conversion builds from them overflows; else a located
    error.  An analysis: the IR is not changed.

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-check-input-ranges"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_value_ranges(entry_function(op, self.entry))


def rewrite_once(
    region: Region, *patterns: RewritePattern, reverse: bool = False, inner_first: bool = False
) -> None:
    """Rewrite each op of `region` with the first of `patterns` that
    matches it, in one walk, in program order or `reverse`d (with
    `inner_first`, the ops in an op's regions before the op: backwards, every
    use of a value before its definition): what every
    preparation pass of the entry function runs.  Without xDSL's dead-code
    elimination (on by default in its applier): an op left unused is the
    conversion's to see, and some declare what they name (an unused
    allocation still takes its name, an unused `memref.get_global` declares
    its buffer first: lit/lowering/globals.mlir, D-LOW-MEMREF-HINTS)."""
    applier = GreedyRewritePatternApplier(list(patterns), dce_enabled=False)
    PatternRewriteWalker(
        applier, apply_recursively=False, walk_reverse=reverse, walk_regions_first=inner_first
    ).rewrite_region(region)


def entry_function(module: ModuleOp, entry: str | None) -> func.FuncOp:
    """The function the lowering converts: `@entry`, else the first public
    `func.func` of `module`; a located error when there is none, or when it
    is a declaration or has several blocks."""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if entry:
        cands = [f for f in funcs if f.sym_name.data == entry]
        if not cands:
            raise reject(funcs[0] if funcs else module, f"no func.func @{entry} (option entry)")
    else:
        cands = [f for f in funcs if f.sym_visibility is None or f.sym_visibility.data == "public"]
        if not cands:
            raise reject(
                funcs[0] if funcs else module,
                "no public func.func to lower",
                "name one with entry=NAME",
            )
    fn = cands[0]
    if not fn.body.blocks:
        raise reject(fn, "the entry function is only a declaration")
    if len(fn.body.blocks) > 1:
        raise reject(fn, "the entry function has several blocks (unstructured control flow)")
    return fn
