"""Constants kept exactly (an outside user's findings, session 65): a `-0.0`
operand is no splat (a `clamp` of min = max = -0.0 gives +0 where its
source is +0, and its text printed `0.0`: `1 / (x * -0.0)` came out +inf
where onnxruntime gives -inf, D-LOW-SPLAT); the simplifier removes `x + c`
and `x * c` only for c exactly 0 and 1 (onnxscript matches its patterns'
constants within 1e-8 absolute, 1e-5 relative: `Log(Relu(x) + 1e-9)` gave
-inf for x <= 0 where onnxruntime gives -20.7, D-COMPILE-SIMPLIFY); a
unary op of a constant is refused with a diagnostic (a 0-d one was an
internal error).  Each minimized from the user's models, compared with
onnxruntime bit for bit (the sign of zero and of infinity included)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import graph_model, run_compiled  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import CompileError, compile_onnx  # noqa: E402
from nem.compile.check import onnxruntime_run  # noqa: E402

X = np.array([0.5, -0.5, 0.0, -0.0, 3.0, -2.0, 1e-12, -1e-30], np.float32).reshape(1, 1, 2, 4)


def _scalar(name: str, value: float):
    return numpy_helper.from_array(np.array(value, np.float32), name)


def _same_as_onnxruntime(model, exact: bool = True, **options) -> np.ndarray:
    """The compiled program's output on X: onnxruntime's bits (`exact`), or
    within 1e-6 relative (a transcendental, D-NUM-FLOAT)."""
    result = compile_onnx(model, device="npm_pro_x1", **options)
    it, _ = run_compiled(result, model, inputs={"x": X})
    ((name, shape, dtype),) = result.interface.outputs
    got = it.read_tensor(name, shape, dtype)
    want = onnxruntime_run(model, {"x": X})["y"].astype(got.dtype)
    if exact:
        assert got.tobytes() == want.tobytes(), (got.ravel(), want.ravel())
    else:
        assert np.allclose(got, want, rtol=1e-6, atol=0), (got.ravel(), want.ravel())
    return got


def _node(op: str, *ins: str, out: str = "y"):
    return helper.make_node(op, list(ins), [out])


@pytest.mark.parametrize(
    "nodes",
    [
        [_node("Mul", "x", "nz")],  # -0.0 times x: -0 for x > 0
        [_node("Mul", "x", "nz", out="a"), _node("Div", "one", "a")],  # +-inf, signed
        [_node("Sub", "nz", "x")],  # -0 - 0 = -0
    ],
    ids=["mul", "reciprocal", "sub"],
)
def test_a_negative_zero_constant_keeps_its_sign(nodes):
    model = graph_model(nodes, X.shape, [_scalar("nz", -0.0), _scalar("one", 1.0)])
    _same_as_onnxruntime(model)
    _same_as_onnxruntime(model, fuse=False, fuse_chains=False)


@pytest.mark.parametrize(
    ("nodes", "c"),
    [
        ([_node("Relu", "x", out="r"), _node("Add", "r", "c", out="a"), _node("Log", "a")], 1e-9),
        ([_node("Add", "x", "c")], float(np.finfo(np.float32).tiny)),
        ([_node("Mul", "x", "c")], 1.000005),
    ],
    ids=["log-eps", "add-tiny", "mul-near-one"],
)
def test_the_simplifier_keeps_a_constant_near_zero_or_one(nodes, c):
    model = graph_model(nodes, X.shape, [_scalar("c", c)])
    got = _same_as_onnxruntime(model, exact=c != 1e-9)
    assert np.isfinite(got).all()  # (log(1e-9) at x <= 0, not -inf)


def test_a_unary_op_of_a_constant_is_refused_with_a_diagnostic():
    """`Abs` of a 0-d initializer, not simplified: a clear "not supported"
    naming the node and how to fold it (was: `internal: output 'ka' has
    shape [1] but ONNX infers []`)."""
    nodes = [
        _node("Abs", "k", out="ka"),
        _node("Add", "ka", "one", out="d"),
        _node("Div", "x", "d"),
    ]
    model = graph_model(nodes, X.shape, [_scalar("k", 3.0), _scalar("one", 1.0)])
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1", simplify=False)
    text = str(e.value)
    assert (
        "Abs" in text
        and "not supported: an elementwise op whose operands are all constants" in text
    )
    assert "internal" not in text
    _same_as_onnxruntime(model)  # (simplified: the constant folded)
