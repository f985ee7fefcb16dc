"""A tile's convolution split into bands of output rows, one per NMU of its
engine (D-COMPILE-NMU-SPLIT, `nem.compile.nmu_split`): the same sums per
output element, so bit-identical outputs, and the bands run at once."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("mlir.ir")

from compile_runs import (  # noqa: E402
    conv1x1_relu_model,
    conv3x3_model,
    only_output,
    timed_cycles,
)
from mlir import ir  # noqa: E402

from nem.compile import compile_onnx, nmu_split, tile_cost  # noqa: E402
from nem.compile.conv_forms import DENSE  # noqa: E402
from nem.compile.conv_forms import GROUPED as GROUPED_FORM  # noqa: E402

TILED = """
func.func @f(%x: memref<1x18x16x8xf32>, %w: memref<3x3x8x32xf32>, %y: memref<1x8x14x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    %a = memref.alloc() : memref<36864xi8, 2>
    %xv = memref.view %a[%c0][] : memref<36864xi8, 2> to memref<1x18x16x8xf32, 2>
    %b = memref.alloc() : memref<9216xi8, 2>
    %wv = memref.view %b[%c0][] : memref<9216xi8, 2> to memref<3x3x8x32xf32, 2>
    %c = memref.alloc() : memref<14336xi8, 2>
    %yv = memref.view %c[%c0][] : memref<14336xi8, 2> to memref<1x8x14x32xf32, 2>
    linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<[2, 1]> : tensor<2xi64>}
      ins(%xv, %wv : memref<1x18x16x8xf32, 2>, memref<3x3x8x32xf32, 2>)
      outs(%yv : memref<1x8x14x32xf32, 2>)
    ONCE
  }
  return
}
"""


def _split(
    nmus: int,
    min_macs: int = 1,
    body: str = "",
    text: str = TILED,
    looped: bool = True,
    native: frozenset[str] = frozenset({"f32"}),
) -> list[str]:
    """Each convolution after the split (of the loop's body, or of the
    function when it has no loop): its input and output types and part;
    `native`: the element types the target's `conv2d` takes."""
    old = nmu_split.MIN_MACS
    nmu_split.MIN_MACS = min_macs
    try:
        with ir.Context():
            m = ir.Module.parse(text.replace("ONCE", body))
            fn = next(o.operation for o in m.body.operations)
            nmu_split.split_convs(fn, nmus, native, looped)
            m.operation.verify()
            block = fn.regions[0].blocks[0]
            for o in block.operations:
                if o.operation.name == "scf.for":
                    block = o.operation.regions[0].blocks[0]
            return [
                f"{c.operands[0].type} -> {c.operands[2].type} "
                f"{c.attributes[nmu_split.PART] if nmu_split.PART in c.attributes else '-'}"
                + (f" {c.attributes[nmu_split.BAND]}" if nmu_split.BAND in c.attributes else "")
                for c in (o.operation for o in block.operations)
                if c.name in (DENSE.name, "linalg.generic")
            ]
    finally:
        nmu_split.MIN_MACS = old


def test_a_convolution_becomes_one_band_of_rows_per_nmu():
    """8 output rows at stride 2 over 2 NMUs: rows 0-3 read input rows 0-8,
    rows 4-7 input rows 8-16 (the window's 3 rows past the band's last
    stride), each band a part of its own."""
    assert _split(2) == [
        "memref<1x9x16x8xf32, strided<[2304, 128, 8, 1]>, 2> -> "
        "memref<1x4x14x32xf32, strided<[3584, 448, 32, 1]>, 2> 0 : i64 array<i64: 0, 8>",
        "memref<1x9x16x8xf32, strided<[2304, 128, 8, 1], offset: 1024>, 2> -> "
        "memref<1x4x14x32xf32, strided<[3584, 448, 32, 1], offset: 1792>, 2> 1 : i64 "
        "array<i64: 4, 8>",
    ]


def test_straight_line_convolutions_split_apart_from_looped_ones():
    """Outside tile loops (`looped=False`, always run by the tile stage) a
    convolution splits as in one; each split asks for its own kind only."""
    text = "\n".join(
        line
        for line in TILED.splitlines()
        if "scf.for" not in line and line.strip() != "}" or line == "}"
    ).replace("%c2 = arith.constant 2 : index", "")
    whole = ["memref<1x18x16x8xf32, 2> -> memref<1x8x14x32xf32, 2> -"]
    assert _split(2, text=text) == whole
    assert _split(2, text=text, looped=False) == [
        "memref<1x9x16x8xf32, strided<[2304, 128, 8, 1]>, 2> -> "
        "memref<1x4x14x32xf32, strided<[3584, 448, 32, 1]>, 2> 0 : i64 array<i64: 0, 8>",
        "memref<1x9x16x8xf32, strided<[2304, 128, 8, 1], offset: 1024>, 2> -> "
        "memref<1x4x14x32xf32, strided<[3584, 448, 32, 1], offset: 1792>, 2> 1 : i64 "
        "array<i64: 4, 8>",
    ]
    assert _split(2, looped=False) == ["memref<1x18x16x8xf32, 2> -> memref<1x8x14x32xf32, 2> -"]


GROUPED = """
#x = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1 * 2 + d5, d2 + d6, d3, d7)>
#w = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d3, d4, d5, d6, d7)>
#y = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @f(%x: memref<1x15x7x1x64xf32, 2>, %w: memref<1x64x3x1x64xf32, 2>,
             %y: memref<1x7x7x1x64xf32, 2>) {
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel",
      "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<1x15x7x1x64xf32, 2>, memref<1x64x3x1x64xf32, 2>)
      outs(%y : memref<1x7x7x1x64xf32, 2>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}
"""


def test_a_grouped_convolutions_part_splits_in_bands_of_rows():
    """A grouped convolution's engine part, generalized by the tile stage
    (one group, 3x1 window, stride 2 in rows): 7 output rows in bands of 4
    and 3, reading input rows 0-8 and 8-14, as the dense one would."""
    assert _split(2, text=GROUPED, looped=False) == [
        "memref<1x9x7x1x64xf32, strided<[6720, 448, 64, 64, 1]>, 2> -> "
        "memref<1x4x7x1x64xf32, strided<[3136, 448, 64, 64, 1]>, 2> 0 : i64 array<i64: 0, 7>",
        "memref<1x7x7x1x64xf32, strided<[6720, 448, 64, 64, 1], offset: 3584>, 2> -> "
        "memref<1x3x7x1x64xf32, strided<[3136, 448, 64, 64, 1], offset: 1792>, 2> 1 : i64 "
        "array<i64: 4, 7>",
    ]
    # any other map (here W's channels swapped) is not a convolution the split knows
    other = GROUPED.replace("(d3, d4, d5, d6, d7)", "(d3, d7, d5, d6, d4)")
    assert _split(2, text=other, looped=False) == [
        "memref<1x15x7x1x64xf32, 2> -> memref<1x7x7x1x64xf32, 2> -"
    ]


NAMED_GROUPED = """
func.func @f(%x: memref<1x40x40x4x4xf32>, %w: memref<4x4x3x2x4xf32>, %y: memref<1x7x9x4x4xf32>) {
  linalg.conv_2d_nhwgc_gfhwc {strides = dense<[2, 3]> : tensor<2xi64>, dilations = dense<[3, 2]> : tensor<2xi64>}
    ins(%x, %w : memref<1x40x40x4x4xf32>, memref<4x4x3x2x4xf32>) outs(%y : memref<1x7x9x4x4xf32>)
  return
}
"""


@pytest.mark.parametrize(
    ("old", "new", "window"),
    [
        ("", "", ([2, 3], [3, 2])),
        # a constant offset, a third loop in the row, a window loop on the wrong side
        ("d1 * 2 + d5 * 3", "d1 * 2 + d5 * 3 + 1", None),
        ("d1 * 2 + d5 * 3", "d1 * 2 + d5 * 3 + d7", None),
        ("d2 * 3 + d6 * 2", "d2 * 3 + d5 * 2", None),
        # W's or Y's channel loops swapped
        ("-> (d3, d4, d5, d6, d7)", "-> (d3, d7, d5, d6, d4)", None),
        ("-> (d0, d1, d2, d3, d4)>", "-> (d0, d1, d2, d4, d3)>", None),
        # the channel reduction made a parallel loop
        ('"reduction"]', '"parallel"]', None),
    ],
)
def test_the_grouped_form_reads_upstreams_generalized_convolution(old, new, window):
    """`conv_forms.GROUPED.window` (what `_rows` asks) reads the strides
    and dilations off the maps MLIR's own `linalg-generalize-named-ops`
    gives the grouped named op, by structure, and rejects any other map."""
    from mlir.passmanager import PassManager

    with ir.Context():
        m = ir.Module.parse(NAMED_GROUPED)
        PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(m.operation)
        text = str(m)
        assert old in text
        m = ir.Module.parse(text.replace(old, new))
        (op,) = (o for o in m.body.operations[0].regions[0].blocks[0] if o.name == "linalg.generic")
        assert GROUPED_FORM.window(op.operation) == window


def test_small_convolutions_and_one_nmu_stay_whole():
    whole = ["memref<1x18x16x8xf32, 2> -> memref<1x8x14x32xf32, 2> -"]
    assert _split(1) == whole
    assert _split(2, min_macs=1 << 30) == whole


def test_a_convolution_without_a_native_variant_stays_whole():
    """A convolution of an element type the target's `conv2d` does not take
    runs as an escape-hatch kernel (D-LOW-OUTLINE): bands would only make
    two kernels of one (an outside user's models on npm_pro's f32
    convolutions, session 48: 11.7-13.6% more timed cycles), so it stays
    whole, in a tile loop or not; the target's own types split."""
    whole = ["memref<1x18x16x8xf32, 2> -> memref<1x8x14x32xf32, 2> -"]
    assert _split(2, native=frozenset({"f16", "bf16", "i8"})) == whole
    assert len(_split(2, native=frozenset({"f16", "f32"}))) == 2


@pytest.mark.slow  # five compiles of a small conv, two timed runs
def test_the_split_follows_the_devices_conv_variants(monkeypatch):
    """Compiled for npm_pro (no f32 `conv2d`) the program is the one
    `split_nmus=False` gives; for npm_pro_x1 (which has it) it is not.  On
    npm_pro the bands, as they were cut before session 48 (the target
    taken to have the variant), made two escape-hatch kernels of each
    tile's one: 21,728 timed cycles against 20,432."""
    from nem.compile import transform

    model = conv3x3_model(16, 64, 64)
    opts = {"engines": 1, "tile_sizes": (1, 4, 8, 16)}
    pro = compile_onnx(model, device="npm_pro", **opts)
    assert pro.nem == compile_onnx(model, device="npm_pro", split_nmus=False, **opts).nem
    types = transform.variant_types
    monkeypatch.setattr(transform, "variant_types", lambda d, op: types(d, op) | {"f32"})
    cut = compile_onnx(model, device="npm_pro", **opts)
    monkeypatch.undo()
    assert cut.nem.count('op="mlir.kernel"') == 2 * pro.nem.count('op="mlir.kernel"') > 0
    assert timed_cycles(pro.nem) < timed_cycles(cut.nem)
    x1 = compile_onnx(model, device="npm_pro_x1", **opts)
    assert x1.nem != compile_onnx(model, device="npm_pro_x1", split_nmus=False, **opts).nem


@pytest.mark.slow  # two compiles and three runs of a small conv
def test_bands_are_bit_identical_and_run_at_once():
    """A 3x3 conv (16x16, 64 to 64 channels, one engine, tiles of 4x8 pixels
    and 16 output channels: bands of 2 rows of the same shape, each with a
    scratch of its own): the same bits as one convolution per tile,
    race-free, in fewer timed cycles (under 0.98x: 21,488 -> 20,944; 0.97x
    before session 32, when the tile copies of the program without bands,
    under 16 KiB in loops of few runs, stayed whole on one DMA: 24,048,
    D-NEM-SPLIT-TRANSFERS).  The split is the default since session 48;
    `split_nmus=False` keeps each tile's convolution whole."""
    model = conv3x3_model(16, 64, 64)
    opts = {"device": "npm_pro_x1", "engines": 1, "tile_sizes": (1, 4, 8, 16)}
    new = compile_onnx(model, **opts)
    old = compile_onnx(model, split_nmus=False, **opts)
    assert new.nem.count("conv2d.async") == 2 * old.nem.count("conv2d.async")
    # each band accumulates in its rows of one scratch (on bytes of their own:
    # else the second waits for the first's add, and the bands run in turn),
    # which one add per tile adds
    assert _apart(*_band_outputs(new.nem))
    assert _adds(new.nem) == _adds(old.nem)
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.98 * timed_cycles(old.nem)


def _band_outputs(nem: str) -> list[tuple[str, str, int]]:
    """(buffer, offset, bytes) of each `conv2d` task's output region."""
    found = re.findall(r"conv2d\.async .* out region\((\w+), ([^,]+), (\d+)\)", nem)
    return [(name, off, int(size)) for name, off, size in found]


def _apart(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    """Band outputs `a` then `b` in one buffer, `b` past `a`'s bytes."""
    if a[0] != b[0]:
        return False
    if a[1].isdigit():
        return int(a[1]) + a[2] <= int(b[1])
    return b[1] == f"{a[1]} + {a[2]}"


def _adds(nem: str) -> int:
    return len(re.findall(r"= add\.async", nem))


@pytest.mark.slow  # two compiles and three runs of a small conv, each
@pytest.mark.parametrize(
    "model, faster",
    [
        pytest.param(lambda: conv3x3_model(14, 128, 32), 0.9, id="dense-3x3"),
        pytest.param(lambda: conv1x1_relu_model(7, 544, 544, group=4), 0.95, id="grouped-1x1"),
    ],
)
def test_a_straight_line_convolution_runs_on_both_nmus(monkeypatch, model, faster):
    """One tile per engine part, no tile loop, so each part ran on one of its
    engine's two NMUs (issue 35): DenseNet-121's 3x3 128 -> 32 convolutions
    at 14x14, and ShuffleNet's grouped 1x1s at 7x7 (544 to 544 channels in 4
    groups, one group per engine; session 34, 3,438 -> 3,058 cycles).  Now
    in two bands, each in its rows of one scratch (disjoint bytes, so the
    bands run at once) and one add per part as before (one token, not two,
    held to the next loop): bit-identical to the one-NMU program (the split
    kept off by `MIN_MACS`), in fewer timed cycles.  The 3x3's parts kept
    one tile each: their 147 KB of weights would have them cut along their
    output channels into a tile loop (`tile_cost.CUT_WEIGHTS`, session 59)."""
    model = model()
    monkeypatch.setattr(tile_cost, "CUT_WEIGHTS", float("inf"))
    new = compile_onnx(model, device="npm_pro_x1")
    monkeypatch.setattr(nmu_split, "MIN_MACS", 1 << 62)
    old = compile_onnx(model, device="npm_pro_x1")
    assert "loop " not in new.nem
    assert new.nem.count("conv2d.async") == 2 * old.nem.count("conv2d.async") == 8
    assert _adds(new.nem) == _adds(old.nem) == 4
    bands = _band_outputs(new.nem)
    assert all(_apart(a, b) for a, b in zip(bands[::2], bands[1::2], strict=True))
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < faster * timed_cycles(old.nem)
