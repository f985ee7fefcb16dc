"""An outside user's hand-written linalg on tensors (session 66), each
minimized, compiled by `nem-compile`'s API and run on the reference
runtime against numpy: a convolution without `strides`/`dilations` (an
internal KeyError), one value returned twice (upstream's
`buffer-results-to-out-params` crashed the process), a gather at
`linalg.index` (compiled, and its kernel could not run), bf16 ports (the
interface named them uint8)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mlir.ir")

from nem.compile import compile_mlir  # noqa: E402
from nem.runtime.api import NemInterpreter  # noqa: E402

DEVICE = "npm_pro_x1"
BIN = Path(sys.executable).parent


def _run(text: str, inputs: dict[str, np.ndarray], **options) -> list[np.ndarray]:
    """Compile `text`, run it race-free on `inputs`, the outputs in order."""
    result = compile_mlir(text, device=DEVICE, **options)
    it = NemInterpreter(device=DEVICE)
    it.load_string(result.nem, file="m.nem")
    for name, array in result.interface.weights.items():
        it.write_tensor(name, array)
    for name, _, _ in result.interface.inputs:
        it.write_tensor(name, inputs[name])
    run = it.run()
    assert run.status == "completed" and run.race_count == 0, run.error
    return [it.read_tensor(n, s, d) for n, s, d in result.interface.outputs]


CONV = """
func.func @main(%x: tensor<1x6x6x2xf32>, %w: tensor<3x3x2x4xf32>) -> tensor<1xOxOx4xf32> {
  %z = arith.constant 0.0 : f32
  PAD
  %e = tensor.empty() : tensor<1xOxOx4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1xOxOx4xf32>) -> tensor<1xOxOx4xf32>
  %r = linalg.conv_2d_nhwc_hwcf ins(%IN, %w : tensor<1xPxPx2xf32>, tensor<3x3x2x4xf32>)
      outs(%f : tensor<1xOxOx4xf32>) -> tensor<1xOxOx4xf32>
  return %r : tensor<1xOxOx4xf32>
}
"""
PAD = """%c = arith.constant 0.5 : f32
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %c : f32
  } : tensor<1x6x6x2xf32> to tensor<1x8x8x2xf32>"""


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("fuse", [True, False])
def test_a_convolution_without_strides_or_dilations_takes_their_defaults(padded, fuse):
    """`strides` and `dilations` default to 1 (upstream's accessors say so);
    left out, `fusion`'s and `pads`' reads of them were a KeyError."""
    p = 8 if padded else 6
    text = (
        CONV.replace("PAD", PAD if padded else "")
        .replace("%IN", "%p" if padded else "%x")
        .replace("xPx", f"x{p}x")
        .replace("Px2", f"{p}x2")
        .replace("xOx", f"x{p - 2}x")
        .replace("Ox4", f"{p - 2}x4")
    )
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 6, 6, 2)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 3, 2, 4)).astype(np.float32)
    (got,) = _run(text, {"x": x, "w": w}, fuse=fuse)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=0.5) if padded else x
    want = np.zeros((1, p - 2, p - 2, 4))
    for i in range(p - 2):
        for j in range(p - 2):
            want[0, i, j] = np.einsum("hwc,hwcf->f", xp[0, i : i + 3, j : j + 3], w)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)


def test_one_value_returned_twice():
    """`return %s, %s`: the later result is a copy (`bufferize.copy_repeated_results`)."""
    text = """
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %s = linalg.add ins(%x, %y : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %s, %x, %s : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
"""
    x, y = np.arange(4, dtype=np.float32), np.full(4, 0.5, np.float32)
    got = _run(text, {"x": x, "y": y})
    for g, want in zip(got, (x + y, x, x + y), strict=True):
        np.testing.assert_array_equal(g.reshape(4), want)


def test_a_gather_at_linalg_index_runs():
    """A body reading another tensor at an index computed from
    `linalg.index`: the escape-hatch kernel's interpreter now gives the body
    its point (`mlir_kernel_loops._run_index`)."""
    text = """
#m = affine_map<(i) -> (i)>
func.func @main(%x: tensor<5xf32>) -> tensor<5xf32> {
  %e = tensor.empty() : tensor<5xf32>
  %r = linalg.generic {indexing_maps = [#m], iterator_types = ["parallel"]}
      outs(%e : tensor<5xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %c4 = arith.constant 4 : index
    %j = arith.subi %c4, %i : index
    %a = tensor.extract %x[%j] : tensor<5xf32>
    linalg.yield %a : f32
  } -> tensor<5xf32>
  return %r : tensor<5xf32>
}
"""
    x = np.array([10, 20, 30, 40, 50], np.float32)
    (got,) = _run(text, {"x": x})
    np.testing.assert_array_equal(got.reshape(5), x[::-1])


def test_bf16_ports_are_named_bf16_and_the_run_line_runs(tmp_path):
    """The interface named a bf16 port `uint8[4]` and the run line's
    `--output 'result0:uint8[4]=...'` was refused by nem-run; bf16 has no
    .npy type, so the run line gives its bits with --input-raw and writes
    raw bytes."""
    import ml_dtypes

    src = tmp_path / "bf.mlir"
    src.write_text(
        """
func.func @main(%x: tensor<4xbf16>, %y: tensor<4xbf16>) -> tensor<4xbf16> {
  %e = tensor.empty() : tensor<4xbf16>
  %r = linalg.add ins(%x, %y : tensor<4xbf16>, tensor<4xbf16>) outs(%e : tensor<4xbf16>) -> tensor<4xbf16>
  return %r : tensor<4xbf16>
}
"""
    )
    r = subprocess.run(
        [str(BIN / "nem-compile"), str(src), "--device", DEVICE, "-o", "bf.nem", "-v"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "input: x bf16[4]" in r.stderr and "output: result0 bf16[4]" in r.stderr, r.stderr
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("run: "))
    x = np.array([1, 2, 3, -4.5], ml_dtypes.bfloat16)
    y = np.array([0.5, 0.25, -3, 1.5], ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x.view(np.uint16))
    np.save(tmp_path / "y.npy", y.view(np.uint16))
    words = line.removeprefix("run: ").split()
    run = subprocess.run(
        [str(BIN / words[0]), *words[1:]], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    got = np.fromfile(tmp_path / "result0.bin", ml_dtypes.bfloat16)
    np.testing.assert_array_equal(
        got, (x.astype(np.float32) + y.astype(np.float32)).astype(x.dtype)
    )


def test_a_parse_note_keeps_its_location():
    """Upstream's note `previously defined here` printed without its place;
    mlir-opt prints `FILE:2:3: note: ...`."""
    from nem.compile import CompileError

    text = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  return %a : tensor<4xf32>
}
"""
    with pytest.raises(CompileError) as e:
        compile_mlir(text, device=DEVICE)
    assert "<mlir>:3:3: error: redefinition of SSA value '%e'" in str(e.value)
    assert "<mlir>:2:3: note: previously defined here" in str(e.value)


def test_an_upstream_error_of_no_position_is_not_put_at_line_1():
    """`linalg.add` on ui8: upstream's verifier reports the `arith.addi` of
    the named op's body, which has no location; the error named 1:1 (the
    `func.func` line) and said "fix the MLIR at this position"."""
    from nem.compile import CompileError

    text = """func.func @main(%x: tensor<4xui8>, %y: tensor<4xui8>) -> tensor<4xui8> {
  %e = tensor.empty() : tensor<4xui8>
  %r = linalg.add ins(%x, %y : tensor<4xui8>, tensor<4xui8>) outs(%e : tensor<4xui8>) -> tensor<4xui8>
  return %r : tensor<4xui8>
}
"""
    with pytest.raises(CompileError) as e:
        compile_mlir(text, device=DEVICE)
    assert "<mlir>: error: 'arith.addi' op operand #0" in str(e.value), str(e.value)
    assert "<mlir>:1:1" not in str(e.value) and "no position" in str(e.value)
