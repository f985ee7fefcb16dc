"""Read-only tile copies leave the loops they do not depend on
(D-COMPILE-HOIST, `nem.compile.hoist`): a convolution's weight tile is copied
into L1 once per output-channel tile, not once per spatial tile, and the
outputs are bit-identical to the program that copies it per tile."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")

from compile_runs import conv3x3_model, dma_bytes, run_compiled  # noqa: E402
from mlir import ir  # noqa: E402

from nem.compile import compile_onnx, hoist  # noqa: E402

TILED = """
func.func @f(%x: memref<8x16xf32>, %w: memref<16x16xf32>, %y: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c2 {
    %xs = memref.subview %x[%i, 0] [2, 16] [1, 1]
        : memref<8x16xf32> to memref<2x16xf32, strided<[16, 1], offset: ?>>
    %ys = memref.subview %y[%i, 0] [2, 16] [1, 1]
        : memref<8x16xf32> to memref<2x16xf32, strided<[16, 1], offset: ?>>
    %ws = memref.subview %w[0, 0] [16, 16] [1, 1]
        : memref<16x16xf32> to memref<16x16xf32, strided<[16, 1]>>
    %a = memref.alloc() : memref<128xi8, 2>
    %xv = memref.view %a[%c0][] : memref<128xi8, 2> to memref<2x16xf32, 2>
    %b = memref.alloc() : memref<1024xi8, 2>
    %wv = memref.view %b[%c0][] : memref<1024xi8, 2> to memref<16x16xf32, 2>
    %c = memref.alloc() : memref<128xi8, 2>
    %yv = memref.view %c[%c0][] : memref<128xi8, 2> to memref<2x16xf32, 2>
    linalg.copy ins(%xs : memref<2x16xf32, strided<[16, 1], offset: ?>>)
                outs(%xv : memref<2x16xf32, 2>)
    linalg.copy ins(%ws : memref<16x16xf32, strided<[16, 1]>>) outs(%wv : memref<16x16xf32, 2>)
    linalg.copy ins(%ys : memref<2x16xf32, strided<[16, 1], offset: ?>>)
                outs(%yv : memref<2x16xf32, 2>)
    linalg.matmul ins(%xv, %wv : memref<2x16xf32, 2>, memref<16x16xf32, 2>)
                  outs(%yv : memref<2x16xf32, 2>)
    linalg.copy ins(%yv : memref<2x16xf32, 2>)
                outs(%ys : memref<2x16xf32, strided<[16, 1], offset: ?>>)
    WRITE
    memref.dealloc %a : memref<128xi8, 2>
    memref.dealloc %b : memref<1024xi8, 2>
    memref.dealloc %c : memref<128xi8, 2>
  }
  return
}
"""


def _hoisted(write: str = "") -> tuple[int, list[str], list[str]]:
    """(moves made, the function's top-level op names, the loop body's op names)."""
    with ir.Context():
        m = ir.Module.parse(TILED.replace("WRITE", write))
        fn = next(o.operation for o in m.body.operations)
        moved = hoist.hoist_copies(fn)
        m.operation.verify()
        top = [o.operation for o in fn.regions[0].blocks[0].operations]
        loop = next(o for o in top if o.name == "scf.for")
        body = [o.operation.name for o in loop.regions[0].blocks[0].operations]
        return moved, [o.name for o in top], body


def test_the_weight_copy_leaves_the_loop_with_its_buffer():
    """The copy of `%w` (its source and its box the same in every iteration)
    moves before the loop with its L1 buffer and view, its dealloc after it;
    the input and output tiles, whose boxes move with the loop, stay."""
    moved, top, body = _hoisted()
    assert moved == 1
    assert top == ["arith.constant"] * 3 + [
        "memref.subview",
        "memref.alloc",
        "memref.view",
        "linalg.copy",
        "scf.for",
        "memref.dealloc",
        "func.return",
    ]
    assert body.count("linalg.copy") == 3 and body.count("memref.alloc") == 2


def test_one_sweep_moves_a_copy_out_of_every_loop_it_does_not_depend_on():
    """In two nested loops (the inner one the tile loop above), the weight
    copy leaves the inner loop, then the outer one, in one call: the sweep
    visits inner loops before the loops around them."""
    nested = TILED.replace(
        "  scf.for %i = %c0 to %c8 step %c2 {",
        "  scf.for %j = %c0 to %c8 step %c2 {\n  scf.for %i = %c0 to %c8 step %c2 {",
    ).replace("  }\n  return", "  }\n  }\n  return")
    with ir.Context():
        m = ir.Module.parse(nested.replace("WRITE", ""))
        fn = next(o.operation for o in m.body.operations)
        assert hoist.hoist_copies(fn) == 2
        m.operation.verify()
        top = [o.operation.name for o in fn.regions[0].blocks[0].operations]
    assert top.index("linalg.copy") < top.index("scf.for")
    assert top[top.index("scf.for") + 1] == "memref.dealloc"


WRITES_W = """%w2 = memref.subview %w[0, 0] [2, 16] [1, 1]
        : memref<16x16xf32> to memref<2x16xf32, strided<[16, 1]>>
    linalg.copy ins(%yv : memref<2x16xf32, 2>) outs(%w2 : memref<2x16xf32, strided<[16, 1]>>)"""
WRITES_BUFFER = """%z = arith.constant 0.0 : f32
    linalg.fill ins(%z : f32) outs(%wv : memref<16x16xf32, 2>)"""


@pytest.mark.parametrize("write", [WRITES_W, WRITES_BUFFER], ids=["source", "buffer"])
def test_a_copy_whose_bytes_change_in_the_loop_stays(write):
    """A loop that writes the memref the copy reads (through a view of it), or
    writes the L1 buffer the copy fills: the copy must be made in every
    iteration, and nothing moves."""
    moved, _, body = _hoisted(write)
    assert moved == 0
    assert body.count("linalg.copy") >= 4


def _run(result, model, schedules: int) -> np.ndarray:
    it, _ = run_compiled(result, model, "npm_pro_x1", schedules)
    ((name, shape, dtype),) = result.interface.outputs
    return it.read_tensor(name, shape, dtype)


@pytest.mark.slow  # two compiles and three runs of a small conv
def test_hoisted_weights_are_bit_identical_and_copied_less():
    """A 3x3 conv (16x16, 32 to 64 channels) in 8 spatial tiles of 4x8
    pixels, every output channel in each: compiled with the weight copy
    hoisted and without (`hoist=False`, `--no-hoist`: each tile copies the 73 KiB
    weight again), the outputs are the same bits, race-free under random
    schedules, and the program moves under 0.8 of the bytes."""
    model = conv3x3_model(16, 32, 64)
    opts = {"device": "npm_pro_x1", "engines": 1, "tile_sizes": (1, 4, 8)}
    new = compile_onnx(model, **opts)
    old = compile_onnx(model, **opts, hoist=False)
    assert np.array_equal(_run(new, model, 2).view(np.uint32), _run(old, model, 0).view(np.uint32))

    assert dma_bytes(new.nem) < 0.8 * dma_bytes(old.nem)


PEELED = """
func.func @f(%x: memref<7x16xf32>, %w: memref<16x16xf32>, %y: memref<7x16xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %a = memref.alloc() : memref<1024xi8, 2>
  %wv = memref.view %a[%c0][] : memref<1024xi8, 2> to memref<16x16xf32, 2>
  linalg.copy ins(%w : memref<16x16xf32>) outs(%wv : memref<16x16xf32, 2>)
  scf.for %i = %c0 to %c6 step %c2 {
    %xs = memref.subview %x[%i, 0] [2, 16] [1, 1]
        : memref<7x16xf32> to memref<2x16xf32, strided<[16, 1], offset: ?>>
    %ys = memref.subview %y[%i, 0] [2, 16] [1, 1]
        : memref<7x16xf32> to memref<2x16xf32, strided<[16, 1], offset: ?>>
    linalg.matmul ins(%xs, %wv : memref<2x16xf32, strided<[16, 1], offset: ?>>, memref<16x16xf32, 2>)
                  outs(%ys : memref<2x16xf32, strided<[16, 1], offset: ?>>)
  }
  memref.dealloc %a : memref<1024xi8, 2>
  WRITE
  %b = memref.alloc() : memref<1024xi8, 2>
  %wu = memref.view %b[%c0][] : memref<1024xi8, 2> to memref<16x16xf32, 2>
  linalg.copy ins(%w : memref<16x16xf32>) outs(%wu : memref<16x16xf32, 2>)
  %xt = memref.subview %x[6, 0] [1, 16] [1, 1] : memref<7x16xf32> to memref<1x16xf32, strided<[16, 1], offset: 96>>
  %yt = memref.subview %y[6, 0] [1, 16] [1, 1] : memref<7x16xf32> to memref<1x16xf32, strided<[16, 1], offset: 96>>
  linalg.matmul ins(%xt, %wu : memref<1x16xf32, strided<[16, 1], offset: 96>>, memref<16x16xf32, 2>)
                outs(%yt : memref<1x16xf32, strided<[16, 1], offset: 96>>)
  memref.dealloc %b : memref<1024xi8, 2>
  return
}
"""


def _shared(write: str = "") -> tuple[int, list[str]]:
    """(copies removed, the function's top-level op names after)."""
    with ir.Context():
        m = ir.Module.parse(PEELED.replace("WRITE", write))
        fn = next(o.operation for o in m.body.operations)
        removed = hoist.share_copies(fn)
        m.operation.verify()
        return removed, [o.operation.name for o in fn.regions[0].blocks[0].operations]


def test_a_peeled_tile_reads_the_weights_its_loop_staged():
    """D-COMPILE-SHARE-STAGED: the peeled row's copy of `%w` into a buffer
    like the loop's goes, with its buffer; the loop's buffer is freed after
    the peeled row's matmul, which reads it."""
    removed, top = _shared()
    assert removed == 1
    assert top.count("linalg.copy") == 1 and top.count("memref.alloc") == 1
    assert top.index("memref.dealloc") > max(k for k, n in enumerate(top) if n == "linalg.matmul")


def test_a_source_written_between_the_copies_is_staged_again():
    """Were `%w` written between the two copies, the loop's buffer would hold
    the old bytes: the second copy stays."""
    write = """%w0 = memref.subview %w[0, 0] [1, 16] [1, 1]
      : memref<16x16xf32> to memref<1x16xf32, strided<[16, 1]>>
  %y0 = memref.subview %y[0, 0] [1, 16] [1, 1]
      : memref<7x16xf32> to memref<1x16xf32, strided<[16, 1]>>
  linalg.copy ins(%y0 : memref<1x16xf32, strided<[16, 1]>>) outs(%w0 : memref<1x16xf32, strided<[16, 1]>>)"""
    removed, top = _shared(write)
    assert removed == 0
    assert top.count("linalg.copy") == 3


@pytest.mark.slow  # two compiles and three runs of a small conv
def test_shared_weights_are_bit_identical_and_copied_less():
    """A 3x3 conv (28x28, 32 to 64 channels) in tiles of 2 rows over 4
    engines: 7 rows per engine, so each engine's loop is followed by a peeled
    row that staged the weights again.  With the copy shared and without
    (`share_staged=False`, `--no-share-staged`), the outputs are the same bits, race-free under
    random schedules, and the program moves under 0.9 of the bytes in fewer
    timed cycles."""
    from compile_runs import timed_cycles

    model = conv3x3_model(28, 32, 64)
    opts = {"device": "npm_pro_x1", "tile_sizes": (1, 2)}
    new = compile_onnx(model, **opts)
    old = compile_onnx(model, **opts, share_staged=False)
    assert np.array_equal(_run(new, model, 2).view(np.uint32), _run(old, model, 0).view(np.uint32))
    assert dma_bytes(new.nem) < 0.9 * dma_bytes(old.nem)
    assert timed_cycles(new.nem) < timed_cycles(old.nem)


def test_sharing_a_copy_keeps_the_positions_of_the_ops_it_rewires():
    """A LayerNormalization over axis 0 of f32[2,2,11,12], one engine, no
    pipelining (graph fuzz seed 7, minimized from 8 nodes): sharing a staged
    copy rewired the second buffer's readers, whose `ir.Operation` hash
    (by contents, operands included) then no longer found their position
    in `share_copies`' table: KeyError at the next pair of copies.  It
    compiles and matches onnxruntime."""
    from compile_runs import run_api
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    shape = [2, 2, 11, 12]
    weights = [
        numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), n)
        for n in ("w", "b")
    ]
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "w", "b"], ["y"], axis=0)],
        "ln_axis0",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    run_api(model, device="npm_pro_x1", engines=1, pipeline=False)
