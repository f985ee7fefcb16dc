"""Softmax through nem-compile (D-COMPILE-SOFTMAX, D-LOW-SOFTMAX, D-LOW-MAXNUM).

On npm_pro_x1 an f16 softmax is NEM `softmax` tasks (one per engine's row
chunk), an f32 one upstream's decomposition; both match numpy, NaN rows
included (upstream's decomposition takes its row max with `maxnumf` from a
NaN start, which NEM `max` would have turned into NaN everywhere).  The
ONNX importer emits `linalg.softmax` only for element types the target
runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from compile_runs import run_api  # noqa: E402

from nem.compile import compile_mlir  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402
from nem.runtime.api import NemInterpreter  # noqa: E402

SOURCE = Path(__file__).parents[1] / "lit" / "compile" / "Inputs" / "softmax.mlir"


def _softmax(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_staged_and_decomposed_softmax_match_numpy(seed):
    result = compile_mlir(SOURCE, device="npm_pro_x1")
    assert result.nem.count("softmax.async") == 4
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, (8, 8)).astype(np.float16)
    z = rng.normal(0, 3, (4, 6)).astype(np.float32)
    z[2, 3] = np.nan  # a NaN row stays NaN, the others are exact
    it = NemInterpreter(device="npm_pro_x1")
    it.load_string(result.nem, file="softmax.nem")
    it.write_tensor("x", x)
    it.write_tensor("z", z)
    res = it.run_schedules(3, seed=seed)
    assert res[1] is None
    run = it.run()
    assert run.status == "completed" and run.race_count == 0, run.error
    y = it.read_tensor("result0", (8, 8), np.float16)
    y2 = it.read_tensor("result1", (4, 6), np.float32)
    # NEM softmax: the exact value rounded once to f16 (D-NUM-SOFTMAX)
    np.testing.assert_array_equal(y, _softmax(x).astype(np.float16))
    want = _softmax(z)
    assert np.isnan(y2[2]).all()
    np.testing.assert_allclose(np.delete(y2, 2, 0), np.delete(want, 2, 0), rtol=1e-6, atol=1e-7)


def test_importer_emits_softmax_only_for_types_the_target_runs():
    from nem.frontends.onnx import import_onnx

    model = samples.transformer("f16")
    assert "linalg.softmax" in str(import_onnx(model, softmax_types=frozenset({"f16"})).module)
    assert "linalg.softmax" not in str(import_onnx(model).module)
    assert "linalg.softmax" not in str(
        import_onnx(samples.transformer("f32"), softmax_types=frozenset({"f16"})).module
    )


@pytest.mark.slow  # 6 s
def test_transformer_f16_softmax_tasks_match_onnxruntime():
    result = run_api(samples.transformer("f16"), device="npm_pro_x1")
    assert result.nem.count("softmax.async") == 4
    assert " exp.async" not in result.nem  # the decomposition's exp is gone


def test_a_linalg_op_upstream_cannot_generalize_is_located():
    """A linalg op xDSL lacks and upstream cannot generalize (here
    linalg.softmax, for a context without nem's definition) is a located
    `not supported` (D-LOW-UPSTREAM), not an internal error."""
    from xdsl.context import Context
    from xdsl.dialects import builtin, func, linalg

    from nem.dialect.diagnostics import NemDiagnosticError
    from nem.frontends.upstream_dialects.upstream_ops import generalize_upstream_ops

    ctx = Context()
    for d in (builtin.Builtin, func.Func, linalg.Linalg):
        ctx.load_dialect(d)
    text = (
        "func.func @f(%x: memref<2x4xf32>, %y: memref<2x4xf32>) {\n"
        "  linalg.softmax dimension(1) ins(%x : memref<2x4xf32>) outs(%y : memref<2x4xf32>)\n"
        "  return\n}\n"
    )
    with pytest.raises(NemDiagnosticError) as e:
        generalize_upstream_ops(ctx, text, "s.mlir")
    d = e.value.diagnostics[0]
    assert (d.loc.file, d.loc.line, d.loc.col) == ("s.mlir", 2, 3)
    assert "not supported: linalg.softmax: upstream cannot rewrite it" in d.message
