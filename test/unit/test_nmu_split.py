"""A tile's convolution split into bands of output rows, one per NMU of its
engine (D-COMPILE-NMU-SPLIT, `nem.compile.nmu_split`): the same sums per
output element, so bit-identical outputs, and the bands run at once."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("mlir.ir")

from compile_runs import conv3x3_model, only_output, timed_cycles  # noqa: E402
from mlir import ir  # noqa: E402

from nem.compile import compile_onnx, nmu_split  # noqa: E402

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


def _split(nmus: int, min_macs: int = 1, body: str = "") -> list[str]:
    """Each convolution of the loop after the split: its input and output types and part."""
    old = nmu_split.MIN_MACS
    nmu_split.MIN_MACS = min_macs
    try:
        with ir.Context():
            m = ir.Module.parse(TILED.replace("ONCE", body))
            fn = next(o.operation for o in m.body.operations)
            nmu_split.split_convs(fn, nmus)
            m.operation.verify()
            loop = next(
                o.operation
                for o in fn.regions[0].blocks[0].operations
                if o.operation.name == "scf.for"
            )
            return [
                f"{c.operands[0].type} -> {c.operands[2].type} "
                f"{c.attributes[nmu_split.PART] if nmu_split.PART in c.attributes else '-'}"
                for c in (o.operation for o in loop.regions[0].blocks[0].operations)
                if c.name == nmu_split.CONV
            ]
    finally:
        nmu_split.MIN_MACS = old


def test_a_convolution_becomes_one_band_of_rows_per_nmu():
    """8 output rows at stride 2 over 2 NMUs: rows 0-3 read input rows 0-8,
    rows 4-7 input rows 8-16 (the window's 3 rows past the band's last
    stride), each band a part of its own."""
    assert _split(2) == [
        "memref<1x9x16x8xf32, strided<[2304, 128, 8, 1]>, 2> -> "
        "memref<1x4x14x32xf32, strided<[3584, 448, 32, 1]>, 2> 0 : i64",
        "memref<1x9x16x8xf32, strided<[2304, 128, 8, 1], offset: 1024>, 2> -> "
        "memref<1x4x14x32xf32, strided<[3584, 448, 32, 1], offset: 1792>, 2> 1 : i64",
    ]


def test_small_convolutions_and_one_nmu_stay_whole():
    whole = ["memref<1x18x16x8xf32, 2> -> memref<1x8x14x32xf32, 2> -"]
    assert _split(1) == whole
    assert _split(2, min_macs=1 << 30) == whole


@pytest.mark.slow  # two compiles and three runs of a small conv
def test_bands_are_bit_identical_and_run_at_once():
    """A 3x3 conv (16x16, 64 to 64 channels, one engine, tiles of 4x8 pixels
    and 16 output channels: bands of 2 rows of the same shape, each with a
    scratch of its own): the same bits as one convolution per tile,
    race-free, in fewer timed cycles."""
    model = conv3x3_model(16, 64, 64)
    opts = {"device": "npm_pro_x1", "engines": 1, "tile_sizes": (1, 4, 8, 16)}
    new = compile_onnx(model, split_units=True, **opts)
    old = compile_onnx(model, **opts)
    assert new.nem.count("conv2d.async") == 2 * old.nem.count("conv2d.async")
    # each band accumulates through a scratch of its own (else the second
    # waits for the first's add, and the bands run in turn)
    scratch = re.findall(r"conv2d\.async .* out region\((\w+),", new.nem)
    assert len(scratch) == 2 and len(set(scratch)) == 2
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.97 * timed_cycles(old.nem)
