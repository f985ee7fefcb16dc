"""Tile sizes scored by bytes moved (D-COMPILE-TILE-COST, `nem.compile.tile_cost`):
a convolution keeps its weight tile for many output pixels, within the halving
rule's budget and without the loops that cost the compile (reduction cuts,
partial tiles to peel, more tiled loops)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")

from loop_bands import band_of  # noqa: E402
from mlir import ir  # noqa: E402

from nem.compile import tile_cost, tiling  # noqa: E402

CONV = """
func.func @cv(%x: memref<1x30x30x512xf32>, %w: memref<3x3x512x512xf32>,
              %y: memref<1x28x28x512xf32>) {
  linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<1x30x30x512xf32>, memref<3x3x512x512xf32>)
                           outs(%y : memref<1x28x28x512xf32>)
  return
}
"""
MATMUL = """
func.func @mm(%a: memref<256x512xf32>, %b: memref<512x512xf32>, %c: memref<256x512xf32>) {
  linalg.matmul ins(%a, %b : memref<256x512xf32>, memref<512x512xf32>)
                outs(%c : memref<256x512xf32>)
  return
}
"""
ELTWISE = """
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @relu(%x: memref<1x56x56x256xf32>, %y: memref<1x56x56x256xf32>) {
  linalg.generic {indexing_maps = [#id, #id],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<1x56x56x256xf32>) outs(%y : memref<1x56x56x256xf32>) {
  ^bb0(%a: f32, %b: f32):
    %z = arith.constant 0.0 : f32
    %m = arith.maximumf %a, %z : f32
    linalg.yield %m : f32
  }
  return
}
"""
BUDGET = 512 * 1024  # npm_pro_x1's L1 halved for double buffering


def _moved(band, sizes) -> int:
    """Bytes the tiles' copies move, counted on the footprint model itself."""
    total, out = tiling.footprint(band, sizes)
    tiles = int(np.prod([-(-e // s) for e, s in zip(band.extents, sizes)]))
    return tiles * (total + out)


def _peels(band, sizes) -> int:
    return sum(1 for e, s in zip(band.extents, sizes) if e % s)


def test_vgg_conv_keeps_its_weight_tile_for_many_pixels():
    """VGG-19's 3x3 conv on 512 channels (28x28): the halving rule copied a
    288 KiB weight tile per output pixel ([1, 1, 1, 16, 3, 3, 512]: 25,088
    tiles); the searched sizes fit the same budget, cut no reduction loop,
    peel nothing and tile no more loops, and move under a tenth of the bytes."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(CONV)
        assert band.extents == [1, 28, 28, 512, 3, 3, 512]
        halving = tiling.choose_tile_sizes(band, BUDGET)
        assert halving == [1, 1, 1, 16, 3, 3, 512]
        sizes = tile_cost.search(band, BUDGET, halving)
        total, out = tiling.footprint(band, sizes)
        assert total + out <= BUDGET
        assert sizes[4:] == [3, 3, 512]  # the reduction loops whole
        assert _peels(band, sizes) == 0
        assert sum(s < e for s, e in zip(sizes, band.extents)) <= 3
        assert sizes[1] * sizes[2] >= 49  # many pixels per weight tile
        assert _moved(band, sizes) * 10 < _moved(band, halving)
        # what band_sizes (both routes' entry) returns
        assert tiling.band_sizes(band, _Options(), BUDGET) == sizes


def test_engine_parts_get_sizes_dividing_them():
    """An engine split of the rows into parts of 4, 4, 4 and 2 (14 rows):
    no row tile size leaves a partial tile in any part."""
    text = CONV.replace("30x30", "16x16").replace("28x28", "14x14")
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(text)
        halving = tiling.choose_tile_sizes(band, BUDGET)
        sizes = tile_cost.search(band, BUDGET, halving, {1: [2, 4]})
        assert sizes != halving
        assert sizes[1] >= 4 or (4 % sizes[1] == 0 and 2 % sizes[1] == 0)


@pytest.mark.parametrize("budget", [256 * 1024, 4 * 1024])
def test_matmul_keeps_the_halving_reduction_tiles(budget):
    """A matmul keeps the halving rule's tiles of its reduction loop, whole
    (256 KiB) or cut (4 KiB: rows of 512 do not fit), so each output sums
    over the same tiles in the same order; it takes 32 rows of A per tile
    instead of one at 256 KiB (20x fewer bytes moved)."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(MATMUL)
        halving = tiling.choose_tile_sizes(band, budget)
        sizes = tile_cost.search(band, budget, halving)
        assert sizes[2] == halving[2]
        assert _moved(band, sizes) <= _moved(band, halving)
        total, out = tiling.footprint(band, sizes)
        assert total + out <= budget
        if budget == 256 * 1024:
            assert halving == [1, 64, 512] and sizes == [32, 64, 512]
        else:
            assert halving[2] < 512


def test_elementwise_keeps_the_halving_sizes():
    """No reuse to gain: an elementwise op moves the same bytes whatever its
    tiles, so the halving sizes stand (no change for a small gain)."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(ELTWISE)
        halving = tiling.choose_tile_sizes(band, BUDGET)
        assert tile_cost.search(band, BUDGET, halving) == halving


class _Options:
    tile_sizes = None
    route = "affine"  # the bytes rule alone (D-COMPILE-TILE-TIME: transform only)


FIRST = (
    CONV.replace("30x30x512", "226x226x64")
    .replace("28x28x512", "224x224x64")
    .replace("3x3x512x512", "3x3x64x64")
)


@pytest.mark.parametrize(
    "budget,parts",
    [(BUDGET, None), (BUDGET // 2, None), (BUDGET, {1: [56]}), (BUDGET // 2, {2: [56]})],
)
def test_no_more_loops_tiled_than_the_halving_sizes(budget, parts):
    """VGG-19's second conv (224x224, 64 channels): the halving sizes tile
    the rows (and the columns at half the budget); the searched ones tile
    no more loops, where tiling one more would move fewer bytes but add a
    loop level to every tile's statements."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(FIRST)
        halving = tiling.choose_tile_sizes(band, budget)
        sizes = tile_cost.search(band, budget, halving, parts)
        lengths = [max((parts or {}).get(i, [e])) for i, e in enumerate(band.extents)]
        assert sum(s < n for s, n in zip(sizes, lengths)) <= sum(
            s < n for s, n in zip(halving, lengths)
        )
        assert _moved(band, sizes) <= _moved(band, halving)


TRANSPOSED_SUM = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func @ts(%x: memref<64x64xf32>, %y: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#id, #tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %x : memref<64x64xf32>, memref<64x64xf32>) outs(%y : memref<64x64xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}
"""


@pytest.mark.parametrize("text", [CONV, MATMUL, TRANSPOSED_SUM])
def test_the_affine_model_is_the_footprint_of_d_compile_tiles(text):
    """The search's need (footprint + output) is `tiling.footprint`'s at any
    sizes, also where two accesses of one memref cover different boxes (x
    and its transpose: the box per dimension is the larger)."""
    rng = np.random.default_rng(7)
    with ir.Context(), ir.Location.unknown():
        module, band = band_of(text)
        model = tile_cost._Model(band)
        rows = [[int(rng.integers(1, e + 1)) for e in band.extents] for _ in range(40)]
        need, moved = model.score(
            np.array(rows, dtype=np.int64), np.array(band.extents, dtype=np.int64)
        )
        assert [int(n) for n in need] == [sum(tiling.footprint(band, r)) for r in rows]


def _conv(h: int, cin: int, cout: int, k: int) -> str:
    """A stride-1 convolution of a square `h` x `h` output, `k` x `k` kernel."""
    i = h + k - 1
    return f"""
func.func @cv(%x: memref<1x{i}x{i}x{cin}xf32>, %w: memref<{k}x{k}x{cin}x{cout}xf32>,
              %y: memref<1x{h}x{h}x{cout}xf32>) {{
  linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<1x{i}x{i}x{cin}xf32>, memref<{k}x{k}x{cin}x{cout}xf32>)
                           outs(%y : memref<1x{h}x{h}x{cout}xf32>)
  return
}}
"""


def test_a_one_tile_1x1_part_is_cut_along_its_output_channels():
    """Inception v1's 13x13 1x1 layers, rows split 4, 4, 4 and 1 over the
    engines, each part one tile: `channel_cut` cuts the output channels
    (528 -> 128: tiles of 64, two a part) and no other loop
    (D-COMPILE-TILE-TIME, session 45)."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(_conv(13, 528, 128, 1))
        one = [1, 4, 13, 128, 1, 1, 528]
        cut = tile_cost.channel_cut(band, one, {1: [4, 1]}, BUDGET, 4, 2)
        assert cut == [1, 4, 13, 64, 1, 1, 528]
        tiled = [1, 2, 13, 128, 1, 1, 528]  # a part tiled already: no cut
        assert tile_cost.channel_cut(band, tiled, {1: [4, 1]}, BUDGET, 4, 2) == tiled


@pytest.mark.parametrize(
    "h, cin, cout, k, parts, epilogue",
    [
        (55, 16, 64, 3, [13, 14], 2),  # a window, 37 KB of weights: SqueezeNet's 55x55 3x3
        (13, 24, 64, 5, [16], 2),  # Inception v1's 5x5 24 -> 64 at 13x13, 38 KB a part
        (55, 64, 16, 1, [13, 14], 2),  # SqueezeNet's 55x55 1x1: its input, hoisted
    ],
)
def test_small_windows_and_input_bound_parts_keep_their_one_tile(h, cin, cout, k, parts, epilogue):
    """A window (a 3x3 or 5x5 convolution) whose part reads under
    CUT_WEIGHTS bytes of weights keeps its one tile: they load beside the
    layer before, a tile loop's only once it is reached (Inception v1's 5x5
    branches cut ran faster each but longer on the critical path, the model
    +0.8%; D-COMPILE-TILE-TIME, session 59), and so does a part whose
    reads are mostly its input, which the cut loop does not index (over
    HOISTED_SHARE of its bytes: nothing for the cut to hide beside its
    tiles' convolutions, session 46).  The parts split the output channels
    (loop 3) where `parts` has one entry for a 5x5, else its rows."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(_conv(h, cin, cout, k))
        one = list(band.extents)
        loop = 3 if k == 5 else 1
        one[loop] = max(parts)
        assert tile_cost.channel_cut(band, one, {loop: parts}, BUDGET, 4, 2, epilogue) == one


def test_a_weight_heavy_window_part_is_cut_along_its_output_channels():
    """SqueezeNet's fire 3x3 expand (48 -> 192 at 13x13, a part of 48
    output channels per engine, 83 KB of weights) and DenseNet-121's 3x3
    128 -> 32 at 14x14 (rows 4, 4, 4 and 2, every part all 147 KB of the
    weights): each part's one tile loaded its weights before its
    convolution began; cut along the output channels, the next tile's
    weights load while a tile computes (its tiles priced over the engine's
    two NMUs, as `nmu_split` runs them since session 48).  Priced on one
    NMU (`split_tiles=False`: `--no-split-nmus`), the expand keeps its one
    tile (D-COMPILE-TILE-TIME, session 59)."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(_conv(13, 48, 192, 3))
        one = [1, 13, 13, 48, 3, 3, 48]
        cut = tile_cost.channel_cut(band, one, {3: [48]}, BUDGET, 4, 2, 1)
        assert cut[3] < 48 and 48 % cut[3] == 0 and cut[:3] + cut[4:] == one[:3] + one[4:]
        assert tile_cost.channel_cut(band, one, {3: [48]}, BUDGET, 4, 2, 1, False) == one
        _, band = band_of(_conv(14, 128, 32, 3))
        one = [1, 4, 14, 32, 3, 3, 128]
        assert tile_cost.channel_cut(band, one, {1: [4, 2]}, BUDGET, 4, 2, 2)[3] < 32


def test_the_per_tile_epilogue_decides_a_1x1_cut():
    """Inception v1's 13x13 1x1 480 -> 64 parts (rows 4, 4, 4 and 1) with
    a bias and a Relu a tile are cut (estimated 0.69 of the one tile).
    DenseNet-121's 28x28 160 -> 128 parts with each tile's convolution on
    one NMU (`split_tiles=False`, `--no-split-nmus`) are cut without their
    epilogue, and keep their one tile with their bias, Mul, Add and Relu
    run per tile one after another (cut, they ran 5,532 -> 6,646 busy
    cycles; D-COMPILE-TILE-TIME, session 46)."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(_conv(13, 480, 64, 1))
        one = [1, 4, 13, 64, 1, 1, 480]
        assert tile_cost.channel_cut(band, one, {1: [4, 1]}, BUDGET, 4, 2, 2)[3] < 64
        _, band = band_of(_conv(28, 160, 128, 1))
        one = [1, 7, 28, 128, 1, 1, 160]
        assert tile_cost.channel_cut(band, one, {1: [7]}, BUDGET, 4, 2, 0, False)[3] < 128
        assert tile_cost.channel_cut(band, one, {1: [7]}, BUDGET, 4, 2, 4, False) == one


@pytest.mark.parametrize(
    "h, cin, cout, rows, cut, retiled, wins",
    [
        # DenseNet-121's n157: 4 tiles of 7 columns, weights hoisted, against 4 of 32 channels
        (28, 224, 128, [7], [1, 7, 28, 32, 1, 1, 224], [1, 7, 7, 128, 1, 1, 224], True),
        # Inception v2's n81: estimated faster, but 14 tiles of 2 columns against 8
        (28, 256, 64, [7], [1, 7, 28, 8, 1, 1, 256], [1, 7, 2, 64, 1, 1, 256], False),
        # Inception v1's n53: tiles of one row reload the weights, estimated 2.8x the cut
        (13, 512, 160, [4, 1], [1, 4, 13, 80, 1, 1, 512], [1, 1, 13, 80, 1, 1, 512], False),
    ],
)
def test_the_retiling_of_a_cut_one_tile_wins_with_no_more_tiles_and_fewer_cycles(
    h, cin, cout, rows, cut, retiled, wins
):
    """Where L1 re-tiles the one tile `channel_cut` cut, its tiles run
    instead of the cut's only where they are no more a part and estimated
    faster (D-COMPILE-TILE-TIME, session 60; the timed figures in
    `tile_cost.retiled_wins`' docstring)."""
    with ir.Context(), ir.Location.unknown():
        _, band = band_of(_conv(h, cin, cout, 1))
        assert tile_cost.retiled_wins(band, cut, {1: rows}, 4, retiled) is wins


def test_a_cut_gives_way_to_a_one_tile_contraction_after_it():
    """`transform.plan_ops` takes the cut of a 1x1 part, but not where the
    next contraction is one tile a part: the cut's tile loop would hold that
    one's copies (its weights) back until the loop's last iteration is
    issued, where they load beside a part of one tile (DenseNet-121's 3x3
    layers at 14x14 after their 1x1, n307's weights 1,157 cycles later;
    D-COMPILE-TILE-TIME, session 45)."""
    from nem.compile import transform
    from nem.compile.options import CompileOptions
    from nem.devices.device_lookup import find_device

    one = """
  linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<1x13x13x528xf32>, memref<1x1x528x128xf32>)
                           outs(%y : memref<1x13x13x128xf32>)"""
    window = """
  linalg.conv_2d_nhwc_hwcf ins(%p, %v : memref<1x15x15x128xf32>, memref<3x3x128x32xf32>)
                           outs(%z : memref<1x13x13x32xf32>)"""
    args = (
        "%x: memref<1x13x13x528xf32>, %w: memref<1x1x528x128xf32>, %y: memref<1x13x13x128xf32>, "
        "%p: memref<1x15x15x128xf32>, %v: memref<3x3x128x32xf32>, %z: memref<1x13x13x32xf32>"
    )
    device = find_device("npm_pro_x1")
    sizes = []
    for body in (one, one + window):
        with ir.Context(), ir.Location.unknown():
            module = ir.Module.parse(f"func.func @f({args}) {{{body}\n  return\n}}")
            fn = next(o.operation for o in module.body.operations)
            plans = transform.plan_ops(fn, device, CompileOptions(), 4)
            sizes.append([p.sizes for p in plans if p])
    cut, kept = sizes
    assert cut == [[1, 4, 13, 64, 1, 1, 528]]
    assert kept[0] == [1, 4, 13, 128, 1, 1, 528]
    window = kept[1]  # one tile a part: 8 output channels on each engine
    assert window == [1, 13, 13, 8, 3, 3, 128]


def test_a_partial_sum_splits_parts_keep_their_one_tile(monkeypatch):
    """An outside user's model: two 3x3 convolutions 256 -> 126 and 256 ->
    130 at 7x7 side by side (1.2 MB of weights each), their concatenation,
    a Relu and a 1x1.  Each 3x3 is split by its input channels (partial
    sums, D-COMPILE-TRANSFORM-PARTIALS), each part pinned to its engine and
    planned whole; with windows cut (`CUT_WEIGHTS`) the parts were cut in
    tiles of 21 and 9 channels, loops of 6 and 14 trips that do not jam,
    and ran one after another: 10,076 -> 18,914 cycles (session 59).  A
    pinned window part is not cut: the program is the one without the
    window rule.  A pinned 1x1 part is cut as before (a 1x1 1024 -> 250 at
    7x7 with a Relu, split by its input channels: 6,814 cycles whole, 5,217
    cut; the same with a batch norm, an outside user's: 6,470 and 4,902)."""
    from compile_runs import conv1x1_relu_model, typed_model
    from onnx import TensorProto, helper, numpy_helper

    from nem.compile import compile_onnx

    rng = np.random.default_rng(0)

    def weights(name: str, shape: tuple[int, ...]):
        return numpy_helper.from_array(rng.uniform(-0.1, 0.1, shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1] * 4),
        helper.make_node("Conv", ["x", "w2", "b2"], ["b"], pads=[1] * 4),
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
        helper.make_node("Relu", ["c"], ["d"]),
        helper.make_node("Conv", ["d", "w3"], ["y"]),
    ]
    inits = [
        weights("w1", (126, 256, 3, 3)),
        weights("b1", (126,)),
        weights("w2", (130, 256, 3, 3)),
        weights("b2", (130,)),
        weights("w3", (64, 256, 1, 1)),
    ]
    model = typed_model(
        nodes,
        [("x", TensorProto.FLOAT, [1, 256, 7, 7])],
        [("y", TensorProto.FLOAT, [1, 64, 7, 7])],
        inits,
    )
    new = compile_onnx(model, device="npm_pro_x1")
    monkeypatch.setattr(tile_cost, "CUT_WEIGHTS", float("inf"))
    assert compile_onnx(model, device="npm_pro_x1").nem == new.nem
    one = compile_onnx(conv1x1_relu_model(7, 1024, 250), device="npm_pro_x1")
    assert "shape=[1, 4, 7, 256]" in one.nem  # a quarter of the input channels a part
    assert "loop " in one.nem  # the parts cut along their output channels
