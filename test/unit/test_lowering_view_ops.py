"""`nem-rewrite-views` (D-LOW-VIEW-OP): `memref.cast`, `memref.collapse_shape`,
`memref.expand_shape`, `memref.reinterpret_cast`, (session 27)
`memref.subview` and (session 29) `memref.view` leave the conversion's table for rewrite patterns
to one op, `nem_lowering.view`, which the conversion lowers by one handler
(issue 36 item 1).

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors with the pass as with the conversion's
old handlers (kept below) and no pass, on every lowering input that has one
of the ops (the lit inputs of the lowering), and
`nem-compile` of the ONNX samples gives the same `.nem`; every other input
is left unchanged by the pass, so its output cannot change.  The pass is
not vacuous (the inputs' ops become views), keeps the ops of pure nests,
and the two decided changes are shown: a non-contiguous collapse is named
by its type, and a reshape of a dynamic-size source is rejected at the op."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from lowering_diff import (
    INPUTS,
    LIT_MLIR,
    MLIR_INPUTS,
    Outcome,
    Steps,
    before,
    entries_in,
    lower,
    sample_before_and_after,
)
from xdsl.dialects import memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType
from xdsl.ir import Operation

from nem.compile.lower import xdsl_context
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.view_op import ViewOp
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memref_views import byte_view, const_sizes
from nem.passes.lowering.passes import PreparedConversionPass
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.reshape import collapsed, expanded
from nem.passes.lowering.state import BlockState, Handler, Lowering
from nem.passes.lowering.view_ops import RewriteViewsPass, reassociation
from nem.passes.lowering.views import View, last_offset, row_major

VIEW_OPS = (
    memref.CastOp,
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.ReinterpretCastOp,
    memref.SubviewOp,
    memref.ViewOp,
)


# the conversion's handlers before the pass (af4e02be: memory_ops.lower_cast,
# reshape.lower_collapse_shape / lower_expand_shape), on the conversion's views
def _old_cast(lw: Lowering, op: memref.CastOp, st: BlockState) -> None:
    lw.ctx.views[op.results[0]] = lw.ctx.view(op.source, op)


def _old_collapse(lw: Lowering, op: memref.CollapseShapeOp, st: BlockState) -> None:
    src = lw.ctx.view(op.src, op)
    shape, strides = collapsed(op, (src.shape, src.strides), reassociation(op), src.name)
    lw.ctx.views[op.result] = replace(src, shape=shape, strides=strides)


def _old_expand(lw: Lowering, op: memref.ExpandShapeOp, st: BlockState) -> None:
    rt = op.result.type
    assert isinstance(rt, MemRefType)
    if list(op.output_shape) or DYNAMIC_INDEX in rt.get_shape():
        raise reject(
            op,
            "memref.expand_shape with a dynamic output shape is not supported: "
            "NEM regions have static sizes",
            "tile with static sizes",
        )
    src = lw.ctx.view(op.src, op)
    shape, strides = expanded((src.shape, src.strides), reassociation(op), rt.get_shape())
    lw.ctx.views[op.result] = replace(src, shape=shape, strides=strides)


def _old_reinterpret(lw: Lowering, op: memref.ReinterpretCastOp, st: BlockState) -> None:
    # (b137d6cc: memref_views.lower_reinterpret_cast)
    src = lw.ctx.view(op.source, op)
    values = [
        op.static_offsets.get_values(),
        op.static_sizes.get_values(),
        op.static_strides.get_values(),
    ]
    if list(op.offsets) + list(op.sizes) + list(op.strides) or any(
        DYNAMIC_INDEX in v for v in values
    ):
        raise reject(op, "not supported: a memref.reinterpret_cast that is not static (D-LOW-VIEW)")
    (offset,), sizes, strides = ([int(x) for x in v] for v in values)
    whole = src.base.is_const() and src.base.const == 0 and src.strides == row_major(src.shape)
    if not whole:
        raise reject(op, "not supported: a memref.reinterpret_cast of a view (D-LOW-VIEW)")
    reach = offset + last_offset(sizes, strides) + 1
    if min(sizes, default=1) <= 0 or min(strides, default=1) < 0 or reach > src.span:
        raise reject(
            op,
            f"memref.reinterpret_cast reaches element {reach - 1} of a {src.span}-element memref",
        )
    lw.ctx.views[op.result] = View(
        src.buffer, src.level, src.elem, tuple(sizes), tuple(strides), Aff.c(offset), src.name
    )


def _old_subview(lw: Lowering, op: memref.SubviewOp, st: BlockState) -> None:
    # (e29eb370: memref_views.lower_subview and views.subview_view)
    ctx = lw.ctx
    src = ctx.view(op.source, op)
    dynamic = list(op.offsets)
    offsets = [
        ctx.index(dynamic.pop(0), op) if v == DYNAMIC_INDEX else Aff.c(v)
        for v in op.static_offsets.get_values()
    ]
    sizes = const_sizes(ctx, op, op.static_sizes.get_values(), op.sizes)
    strs = op.static_strides.get_values()
    if list(op.strides) or DYNAMIC_INDEX in strs:
        raise reject(op, "not supported: dynamic strides in memref.subview (D-LOW-VIEW)")
    base = src.base
    for o, s in zip(offsets, src.strides):
        base = base + o.scale(s)
    rt = op.result.type
    assert isinstance(rt, MemRefType)
    dyn = iter(sizes[k] for k, d in enumerate(op.static_sizes.get_values()) if d == DYNAMIC_INDEX)
    kept_shape = [next(dyn) if d == DYNAMIC_INDEX else d for d in rt.get_shape()]
    full = [(sz, src.strides[k] * strs[k]) for k, sz in enumerate(sizes)]
    if len(kept_shape) != len(full):
        kept, i = [], 0
        for sz, st_ in full:
            if i < len(kept_shape) and sz == kept_shape[i]:
                kept.append((sz, st_))
                i += 1
            elif sz != 1:
                raise reject(op, "unsupported rank-reducing subview")
        full = kept
    shape, strides = tuple(s for s, _ in full), tuple(st_ for _, st_ in full)
    ctx.views[op.result] = replace(src, shape=shape, strides=strides, base=base)


def _old_view(lw: Lowering, op: memref.ViewOp, st: BlockState) -> None:
    # (ea06b7df: memref_views.lower_view)
    ctx = lw.ctx
    rt = op.result.type
    assert isinstance(rt, MemRefType)
    shape = const_sizes(ctx, op, rt.get_shape(), op.sizes)
    ctx.views[op.result] = byte_view(
        op, ctx.view(op.source, op), ctx.index(op.byte_shift, op), rt.element_type, shape
    )


OLD: dict[type[Operation], Handler] = {
    **HANDLERS,
    memref.ViewOp: _old_view,
    memref.SubviewOp: _old_subview,
    memref.CastOp: _old_cast,
    memref.CollapseShapeOp: _old_collapse,
    memref.ExpandShapeOp: _old_expand,
    memref.ReinterpretCastOp: _old_reinterpret,
}
_before = before(RewriteViewsPass, OLD)


def test_the_driver_no_longer_handles_them() -> None:
    assert not set(VIEW_OPS) & set(HANDLERS) and ViewOp in HANDLERS


def _view_ops(text: str, entry: str) -> tuple[int, str, int, str]:
    """(view ops before the pass, module before, view ops after, module after;
    an error of the pass: -1 and "")."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    fn = entry_function(module, entry)
    count = sum(1 for op in fn.walk() if isinstance(op, VIEW_OPS))
    plain = str(module)
    try:
        RewriteViewsPass(entry).apply(ctx, module)
    except NemDiagnosticError:
        return count, plain, -1, ""
    left = sum(1 for op in fn.walk() if isinstance(op, VIEW_OPS))
    return count, plain, left, str(module)


OWN = "view_ops.mlir"
"""This pass's own lit test (its cases are below, by hand)."""
FILES = [p for p in MLIR_INPUTS + LIT_MLIR if p.name != OWN]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INPUTS.parents[1])))
def test_the_rewrite_changes_no_output(path: Path) -> None:
    """Every public function of every lowering input: left as it is without
    a cast or reshape (its output cannot change), else lowered to the same
    `.nem`, remarks and errors with the pass and with the old handlers."""
    text = path.read_text()
    for entry in entries_in(text):
        count, plain, _, after = _view_ops(text, entry)
        if not count:
            assert after == plain, entry
            continue
        if entry in REFUSED:
            continue  # (the decided changes: test_..._is_refused below)
        assert lower(text, entry) == _named_by_type(lower(text, entry, _before)), entry


REFUSED = {"with_an_offset", "of_a_dynamic_size_view"}
"""Entries of the lit inputs whose outcome changed by decision (D-LOW-VIEW,
D-LOW-VIEW-OP): a reinterpret cast with an offset, which the old handler
lowered, is refused (a view starts at its source's first element); so is a
subview of a `memref.view` whose size is known where it is lowered only
(a view's strides are static)."""


def test_a_reinterpret_cast_with_an_offset_is_refused() -> None:
    (path,) = [p for p in FILES if p.name == "transposed_view_errors.mlir"]
    text = path.read_text()
    nem, diags = lower(text, "with_an_offset")
    assert nem is None and any("reinterpret_cast with an offset" in d[1] for d in diags), diags
    assert lower(text, "with_an_offset", _before)[0] is not None  # the old handler lowered it


def test_a_subview_of_a_dynamic_size_view_is_refused() -> None:
    (path,) = [p for p in FILES if p.name == "subview_views_errors.mlir"]
    text = path.read_text().split("// -----")[0]
    nem, diags = lower(text, "of_a_dynamic_size_view")
    assert nem is None and any("with dynamic strides (memref<2x?xf32>)" in d[1] for d in diags)
    assert (
        lower(text, "of_a_dynamic_size_view", _before)[0] is not None
    )  # the old handler lowered it


NOT_CONTIGUOUS_BY_NAME = re.compile(r"(collapsing dimensions \[[0-9, ]*\] of )(\S+)( that are not)")


def _named_by_type(outcome: Outcome) -> Outcome:
    """The old handlers' outcome with the one decided change (D-LOW-VIEW-OP):
    a non-contiguous collapse names its source by type, not by buffer (the
    only such input, lit/lowering/graph_rejections.mlir, names `%s` of type
    `memref<4x4xf32, strided<[8, 1]>>`, a view of buffer `x`)."""
    nem, diags = outcome
    return nem, [
        (sev, NOT_CONTIGUOUS_BY_NAME.sub(r"\1memref<4x4xf32, strided<[8, 1]>>\3", msg), loc, fix)
        for sev, msg, loc, fix in diags
    ]


CHANGED = [
    "reshape.mlir",
    "flatten_collapse_shape.mlir",
    "grouped_conv_expand_shape.mlir",
    "transposed_view.mlir",
]


@pytest.mark.parametrize("name", CHANGED)
def test_the_inputs_views_are_rewritten(name: str) -> None:
    """The inputs above that lower their reshapes lose them to views (the
    comparison is not vacuous)."""
    (path,) = [p for p in FILES if p.name == name]
    text = path.read_text()
    (entry,) = entries_in(text)
    count, _, left, after = _view_ops(text, entry)
    assert count and not left and "nem_lowering.view" in after


@pytest.mark.parametrize("name", ["cnn", "resblock", "transformer"])
def test_the_samples_compile_to_the_same_program(name: str, monkeypatch, tmp_path: Path) -> None:
    """`nem-compile` of the ONNX samples that reshape (a Flatten, MatMuls on
    [1, S, D]): the same `.nem` with the pass as with the old handlers, and
    the pass made views."""
    after, old, made = sample_before_and_after(
        name, RewriteViewsPass, lambda o: isinstance(o, ViewOp), OLD, monkeypatch, tmp_path
    )
    assert made > 0 and old == after


IN_A_NEST = """
func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %c = "memref.cast"(%x) : (memref<4x8xf32>) -> memref<?x8xf32>
  affine.for %i = 0 to 4 {
    %v = memref.collapse_shape %y [[0, 1]] : memref<4x8xf32> into memref<32xf32>
    affine.for %j = 0 to 8 {
      %a = affine.load %c[%i, %j] : memref<?x8xf32>
      affine.store %a, %v[%i * 8 + %j] : memref<32xf32>
    }
  }
  return
}
"""
"""A cast the conversion lowers, and a reshape inside a pure nest (one task,
whose kernel would print it as written): only the first becomes a view."""


def test_a_view_in_a_pure_nest_stays() -> None:
    count, _, left, after = _view_ops(IN_A_NEST, "main")
    assert (count, left) == (2, 1) and "memref.collapse_shape" in after
    assert (
        '"nem_lowering.view"(%x) <{replaces = "memref.cast"}> : (memref<4x8xf32>) -> memref<?x8xf32>'
        in after
    )
    nem, diags = lower(IN_A_NEST, "main")
    assert (nem, diags) == lower(IN_A_NEST, "main", _before)


NOT_CONTIGUOUS = """
func.func @main(%x: memref<4x8xf32>, %y: memref<16xf32>) {
  %s = memref.subview %x[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  %c = memref.collapse_shape %s [[0, 1]] : memref<4x4xf32, strided<[8, 1]>> into memref<16xf32, strided<[1]>>
  memref.copy %c, %y : memref<16xf32, strided<[1]>> to memref<16xf32>
  return
}
"""


def test_a_non_contiguous_collapse_is_named_by_its_type() -> None:
    """The pass's check is the conversion's, at the same op; the source is
    named by its type (no buffer is named yet), where the conversion named
    its buffer (D-LOW-VIEW-OP)."""
    ((_, new, loc, fix),) = lower(NOT_CONTIGUOUS, "main")[1]
    ((_, old, old_loc, old_fix),) = lower(NOT_CONTIGUOUS, "main", _before)[1]
    assert (loc, fix) == (old_loc, old_fix)
    assert old.endswith("dimensions [0, 1] of x that are not contiguous (strides [8, 1])")
    assert new == old.replace(" of x ", " of memref<4x4xf32, strided<[8, 1]>> ")


PEELED = """
func.func @main(%b: memref<48x40xf32>, %o: memref<48x40xf32>) {
  affine.for %j = 0 to 40 step 32 {
    %0 = affine.min affine_map<(d0) -> (-d0 + 40, 32)>(%j)
    %s = memref.subview %b[0, %j] [48, %0] [1, 1] : memref<48x40xf32> to memref<48x?xf32, strided<[40, 1], offset: ?>>
    %d = memref.subview %o[0, %j] [48, %0] [1, 1] : memref<48x40xf32> to memref<48x?xf32, strided<[40, 1], offset: ?>>
    %c = "memref.cast"(%s) : (memref<48x?xf32, strided<[40, 1], offset: ?>>) -> memref<48x?xf32, strided<[?, 1], offset: ?>>
    %e = "memref.cast"(%d) : (memref<48x?xf32, strided<[40, 1], offset: ?>>) -> memref<48x?xf32, strided<[?, 1], offset: ?>>
    memref.copy %c, %e : memref<48x?xf32, strided<[?, 1], offset: ?>> to memref<48x?xf32, strided<[?, 1], offset: ?>>
  }
  return
}
"""
"""Casts of subviews sized per lowered copy (the full tiles, the peeled last one)."""


def test_a_cast_of_a_peeled_tile_is_its_source() -> None:
    """A cast's view is its source's whatever its sizes (no layout on the
    view); the subviews' sizes are operands, resolved per copy."""
    count, _, left, after = _view_ops(PEELED, "main")
    assert (count, left) == (4, 0) and after.count("shape =") == 2
    nem, diags = lower(PEELED, "main")
    assert nem is not None and "shape=[48, 8]" in nem, diags
    assert (nem, diags) == lower(PEELED, "main", _before)


DYNAMIC_RESHAPE = """
func.func @main(%b: memref<4x40x2xf32>, %o: memref<4x80xf32>) {
  affine.for %j = 0 to 40 step 32 {
    %0 = affine.min affine_map<(d0) -> (-d0 + 40, 32)>(%j)
    %s = memref.subview %b[0, %j, 0] [4, %0, 2] [1, 1, 1] : memref<4x40x2xf32> to memref<4x?x2xf32, strided<[80, 2, 1], offset: ?>>
    %c = memref.collapse_shape %s [[0], [1, 2]] : memref<4x?x2xf32, strided<[80, 2, 1], offset: ?>> into memref<4x?xf32, strided<[80, 1], offset: ?>>
    %1 = affine.min affine_map<(d0) -> (-d0 * 2 + 80, 64)>(%j)
    %2 = affine.apply affine_map<(d0) -> (d0 * 2)>(%j)
    %d = memref.subview %o[0, %2] [4, %1] [1, 1] : memref<4x80xf32> to memref<4x?xf32, strided<[80, 1], offset: ?>>
    memref.copy %c, %d : memref<4x?xf32, strided<[80, 1], offset: ?>> to memref<4x?xf32, strided<[80, 1], offset: ?>>
  }
  return
}
"""


def test_a_reshape_of_a_dynamic_size_source_is_rejected_at_it() -> None:
    """D-LOW-VIEW-OP: a reshape's layout is computed before the conversion,
    from its source's type: a dynamic size there is a located error."""
    nem, errors = lower(DYNAMIC_RESHAPE, "main")
    assert nem is None
    ((_, message, loc, fix),) = errors
    assert loc.split(":")[-2] == "6" and "collapse_shape of a memref with dynamic sizes" in message
    assert fix is not None and "subview" in fix
    old, diags = lower(DYNAMIC_RESHAPE, "main", _before)  # lowered per copy before
    assert old is not None and "shape=[4, 16]" in old, diags


CAST_THEN_SUBVIEW = """
func.func @main(%x: memref<4x8xf32>, %y: memref<2x8xf32>) {
  affine.for %i = 0 to 2 {
    %c = "memref.cast"(%x) : (memref<4x8xf32>) -> memref<?x?xf32, strided<[?, ?], offset: ?>>
    %r = affine.apply affine_map<(d0) -> (d0 * 2)>(%i)
    %s = memref.subview %c[%r, 0] [2, 8] [1, 1] : memref<?x?xf32, strided<[?, ?], offset: ?>> to memref<2x8xf32, strided<[?, ?], offset: ?>>
    memref.copy %s, %y : memref<2x8xf32, strided<[?, ?], offset: ?>> to memref<2x8xf32>
  }
  return
}
"""
"""A subview of a cast whose type hides the strides: the cast's source has them."""


def test_a_subview_of_a_cast_takes_the_strides_behind_it() -> None:
    count, _, left, after = _view_ops(CAST_THEN_SUBVIEW, "main")
    assert (count, left) == (2, 0) and "strides = array<i64: 8, 1>" in after
    assert "base = affine_map<(d0) -> ((d0 * 8))>" in after
    nem, diags = lower(CAST_THEN_SUBVIEW, "main")
    assert nem is not None and "region(x, i * 64, 64)" in nem, diags
    assert (nem, diags) == lower(CAST_THEN_SUBVIEW, "main", _before)


NOT_CONSTANT = """
func.func @main(%x: memref<8x8xf32>, %y: memref<8x8xf32>) {
  affine.for %i = 1 to 3 {
    %s = memref.subview %x[0, 0] [%i, 8] [1, 1] : memref<8x8xf32> to memref<?x8xf32, strided<[8, 1]>>
    %t = memref.subview %y[0, 0] [%i, 8] [1, 1] : memref<8x8xf32> to memref<?x8xf32, strided<[8, 1]>>
    memref.copy %s, %t : memref<?x8xf32, strided<[8, 1]>> to memref<?x8xf32, strided<[8, 1]>>
  }
  return
}
"""


def test_the_conversions_errors_name_the_subview() -> None:
    """An error the conversion finds at a view op names the op the user
    wrote (`written_name`), at its location, as the old handler did."""
    nem, errors = lower(NOT_CONSTANT, "main")
    assert nem is None and errors == lower(NOT_CONSTANT, "main", _before)[1]
    ((_, message, _, _),) = errors
    assert message.startswith("cannot lower 'memref.subview': not supported: a memref.subview size")


PROMOTED = """
func.func @main(%x: memref<32x48xf32>) {
  %a = memref.alloc() : memref<3072xi8, 2>
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c48 = arith.constant 48 : index
  affine.for %i = 0 to 32 step 16 {
    %s = memref.subview %x[%i, 0] [16, 48] [1, 1] : memref<32x48xf32> to memref<16x48xf32, strided<[48, 1], offset: ?>>
    %v = memref.view %a[%c0][%c16, %c48] : memref<3072xi8, 2> to memref<?x?xf32, 2>
    %t = memref.subview %v[0, 0] [%c16, %c48] [1, 1] : memref<?x?xf32, 2> to memref<?x?xf32, strided<[?, 1]>, 2>
    memref.copy %s, %t : memref<16x48xf32, strided<[48, 1], offset: ?>> to memref<?x?xf32, strided<[?, 1]>, 2>
  }
  return
}
"""
"""`transform.structured.promote`'s output before canonicalization: a
subview of a `memref.view` whose sizes are `arith.constant`s."""


def test_a_subview_of_a_promoted_view_is_row_major_on_its_constants() -> None:
    count, _, left, after = _view_ops(PROMOTED, "main")
    assert (count, left) == (3, 0) and "strides = array<i64: 48, 1>" in after
    nem, diags = lower(PROMOTED, "main")
    assert nem is not None, diags
    assert (nem, diags) == lower(PROMOTED, "main", _before)


def test_a_memref_view_becomes_a_byte_view() -> None:
    """`memref.view` (session 29): a byte view of its source at its byte
    shift, its sizes operands (no strides: row-major where lowered)."""
    _, _, _, after = _view_ops(PROMOTED, "main")
    (line,) = [x for x in after.splitlines() if x.strip().startswith("%v =")]
    assert line.strip() == (
        '%v = "nem_lowering.view"(%a, %c0, %c16, %c48) <{shape = array<i64: '
        f"{DYNAMIC_INDEX}, {DYNAMIC_INDEX}>, bytes, replaces = "
        '"memref.view", base = affine_map<(d0) -> (d0)>}> : (memref<3072xi8, 2 : i64>, index, '
        "index, index) -> memref<?x?xf32, 2 : i64>"
    )


SLOTS = """
func.func @main(%x: memref<4x6xf32>, %y: memref<4x6xf32>) {
  %c0 = arith.constant 0 : index
  affine.for %i = 0 to 4 {
    %a = memref.alloc() : memref<26xi8, 2>
    %v = memref.view %a[%c0][] : memref<26xi8, 2> to memref<1x6xf32, 2>
    %s = memref.subview %x[%i, 0] [1, 6] [1, 1] : memref<4x6xf32> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    %d = memref.subview %y[%i, 0] [1, 6] [1, 1] : memref<4x6xf32> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    memref.copy %s, %v : memref<1x6xf32, strided<[6, 1], offset: ?>> to memref<1x6xf32, 2>
    memref.copy %v, %d : memref<1x6xf32, 2> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    memref.dealloc %a : memref<26xi8, 2>
  }
  return
}
"""
"""A byte view at byte 0 of a tile loop's 26-byte allocation: aligned, but
with `pipeline-tiles` the allocation is two slots, the second at byte 26,
which only the conversion knows (the view's base is the slot's)."""


def _pipelined(steps: Steps) -> Steps:
    return tuple(
        replace(p, pipeline_tiles=True) if isinstance(p, PreparedConversionPass) else p
        for p in steps
    )


@pytest.mark.parametrize("pipelined", [False, True])
def test_a_byte_views_alignment_is_checked_where_it_is_lowered(pipelined: bool) -> None:
    """The pattern leaves the alignment check to the conversion, which reads
    the slot's base: the same outcome as the old handler's either way."""
    edit = _pipelined if pipelined else None
    nem, diags = lower(SLOTS, "main", edit)
    assert (nem, diags) == lower(SLOTS, "main", lambda s: _before(_pipelined(s) if edit else s))
    if not pipelined:
        assert nem is not None and "region(a, 0, 24" in nem, diags
    else:
        ((_, message, loc, _),) = diags
        assert nem is None and loc.endswith(":6:5"), loc
        assert message == (
            "cannot lower 'memref.view': not supported: memref.view at byte offset "
            "26*Mod(inner=1*i + 0, m=2) + 0 that is not a multiple of the element size "
            "(4 bytes) (D-LOW-VIEW)"
        )
