"""Large L1 staging copies split over an engine's DMAs (D-COMPILE-DMA-SPLIT,
`nem.compile.dma_split`): each slice along the box's outermost dimension
larger than 1, the slices disjoint and together the box, so the outputs are
bit-identical and the program takes fewer timed cycles."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")

from compile_runs import conv3x3_model, only_output, timed_cycles  # noqa: E402
from mlir import ir  # noqa: E402

from nem.compile import compile_onnx, dma_split  # noqa: E402

COPIES = """
func.func @f(%w: memref<3x8x512xf32>, %x: memref<1x1x64x128xf32>, %s: memref<4x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    %a = memref.alloc() : memref<49152xi8, 2>
    %wv = memref.view %a[%c0][] : memref<49152xi8, 2> to memref<3x8x512xf32, 2>
    %b = memref.alloc() : memref<32768xi8, 2>
    %xv = memref.view %b[%c0][] : memref<32768xi8, 2> to memref<1x1x64x128xf32, 2>
    %c = memref.alloc() : memref<1024xi8, 2>
    %sv = memref.view %c[%c0][] : memref<1024xi8, 2> to memref<4x64xf32, 2>
    %d = memref.alloc() : memref<49152xi8, 2>
    %dv = memref.view %d[%c0][] : memref<49152xi8, 2> to memref<3x8x512xf32, 2>
    linalg.copy ins(%w : memref<3x8x512xf32>) outs(%wv : memref<3x8x512xf32, 2>)
    linalg.copy ins(%xv : memref<1x1x64x128xf32, 2>) outs(%x : memref<1x1x64x128xf32>)
    linalg.copy ins(%s : memref<4x64xf32>) outs(%sv : memref<4x64xf32, 2>)
    linalg.copy ins(%wv : memref<3x8x512xf32, 2>) outs(%dv : memref<3x8x512xf32, 2>)
  }
  ONCE
  return
}
"""


ONCE = """%e = memref.alloc() : memref<49152xi8, 2>
  %ev = memref.view %e[%c0][] : memref<49152xi8, 2> to memref<3x8x512xf32, 2>
  linalg.copy ins(%w : memref<3x8x512xf32>) outs(%ev : memref<3x8x512xf32, 2>)"""


def _split(dmas: int, once: str = "") -> tuple[int, list[tuple[str, str]]]:
    """(copies split, each copy's (source type, destination type) after)."""
    with ir.Context():
        m = ir.Module.parse(COPIES.replace("ONCE", once))
        fn = next(o.operation for o in m.body.operations)
        n = dma_split.split_copies(fn, dmas)
        m.operation.verify()
        top = [o.operation for o in fn.regions[0].blocks[0].operations]
        loop = next(o for o in top if o.name == "scf.for")
        copies = [
            o.operation
            for o in loop.regions[0].blocks[0].operations
            if o.operation.name == "linalg.copy"
        ]
        copies += [o for o in top if o.name == "linalg.copy"]
        return n, [(str(c.operands[0].type), str(c.operands[1].type)) for c in copies]


def test_a_large_copy_becomes_one_slice_per_dma():
    """The 48 KiB weight box (3 x 8 x 512) into L1 becomes 3 copies of one
    row each (its outermost dimension has 3); the 32 KiB store from L1
    (1 x 1 x 64 x 128) 4 copies of 16 rows along its first dimension larger
    than 1; the 1 KiB copy and the L1-to-L1 copy stay whole."""
    n, copies = _split(4)
    assert n == 2
    assert len(copies) == 3 + 4 + 1 + 1
    assert copies[0] == ("memref<1x8x512xf32>", "memref<1x8x512xf32, 2>")
    assert copies[1] == (
        "memref<1x8x512xf32, strided<[4096, 512, 1], offset: 4096>>",
        "memref<1x8x512xf32, strided<[4096, 512, 1], offset: 4096>, 2>",
    )
    assert copies[2] == (
        "memref<1x8x512xf32, strided<[4096, 512, 1], offset: 8192>>",
        "memref<1x8x512xf32, strided<[4096, 512, 1], offset: 8192>, 2>",
    )
    assert copies[6] == (
        "memref<1x1x16x128xf32, strided<[8192, 8192, 128, 1], offset: 6144>, 2>",
        "memref<1x1x16x128xf32, strided<[8192, 8192, 128, 1], offset: 6144>>",
    )
    assert copies[7:] == [
        ("memref<4x64xf32>", "memref<4x64xf32, 2>"),
        ("memref<3x8x512xf32, 2>", "memref<3x8x512xf32, 2>"),
    ]


def test_one_dma_splits_nothing():
    n, copies = _split(1)
    assert n == 0 and len(copies) == 4


def test_a_copy_made_once_stays_whole():
    """The same 48 KiB copy outside any loop: made once, it stays one task
    (each slice would be a task more for the lowering to order)."""
    n, copies = _split(4, ONCE)
    assert n == 2 and len(copies) == 3 + 4 + 1 + 1 + 1
    assert copies[-1] == ("memref<3x8x512xf32>", "memref<3x8x512xf32, 2>")


@pytest.mark.slow  # two compiles and three runs of a small conv
def test_split_copies_are_bit_identical_and_faster():
    """A 3x3 conv (16x16, 64 to 64 channels, one engine, tiles of 4x8 pixels
    and 16 output channels: a 36 KiB weight slice per tile): compiled with
    its large copies split over the 4 DMAs and without, the outputs are the
    same bits, race-free under random schedules, in fewer timed cycles."""
    model = conv3x3_model(16, 64, 64)
    # the tile stage's split against none (D-NEM-SPLIT-TRANSFERS off in both)
    opts = {"device": "npm_pro_x1", "engines": 1, "tile_sizes": (1, 4, 8, 16)}
    opts["split_transfers"] = False
    new = compile_onnx(model, split_units=True, **opts)
    old = compile_onnx(model, **opts)
    assert new.nem.count("transfer.async") > old.nem.count("transfer.async")
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.9 * timed_cycles(old.nem)


def test_the_splits_are_opt_in(tmp_path, monkeypatch):
    """`nem-compile` splits at the tile stage only with `--split-units`
    (D-COMPILE-SPLIT-OPT): the option reaches `CompileOptions.split_units`,
    off by default; the NMU split of tile loops' convolutions is on unless
    `--no-split-nmus` (`split_nmus`, session 48); the NEM-level split of transfers is on unless
    `--no-split-transfers` (`split_transfers`, D-NEM-SPLIT-TRANSFERS), the
    jam of engine parts unless `--no-jam` (`jam`, D-NEM-JAM-ENGINES), and the
    fusion of elementwise chains unless `--no-fuse-chains` (`fuse_chains`,
    D-COMPILE-FUSE-CHAIN), the hoisted weight tiles unless `--no-hoist`
    (`hoist`, D-COMPILE-HOIST) and their reuse by a peeled tile unless
    `--no-share-staged` (`share_staged`, D-COMPILE-SHARE-STAGED)."""
    import onnx

    import nem.compile
    from nem.cli import nem_compile

    class Stop(Exception):
        pass

    seen = []

    def compile_onnx(src, options, **kw):
        seen.append(
            (
                options.split_units,
                options.split_nmus,
                options.split_transfers,
                options.jam,
                options.fuse_chains,
                options.hoist,
                options.share_staged,
            )
        )
        raise Stop

    monkeypatch.setattr(nem.compile, "compile_onnx", compile_onnx)
    path = tmp_path / "m.onnx"
    onnx.save(conv3x3_model(4, 2, 2), str(path))
    for flags in (
        [],
        ["--split-units"],
        ["--no-split-nmus"],
        ["--no-split-transfers"],
        ["--no-jam"],
        ["--no-fuse-chains"],
        ["--no-hoist"],
        ["--no-share-staged"],
    ):
        with pytest.raises(Stop):
            nem_compile.run([str(path), *flags, "-o", str(tmp_path / "m.nem")])
    assert seen == [
        (False, True, True, True, True, True, True),
        (True, True, True, True, True, True, True),
        (False, False, True, True, True, True, True),
        (False, True, False, True, True, True, True),
        (False, True, True, False, True, True, True),
        (False, True, True, True, False, True, True),
        (False, True, True, True, True, False, True),
        (False, True, True, True, True, True, False),
    ]
