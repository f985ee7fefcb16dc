"""Graph inputs read as compile-time operands, bound at compile time
(D-COMPILE-BIND): a reduction's axes, a Slice's starts, a Clip's bounds
given as graph inputs.  Unbound, each is a located `not supported` whose
fix names `--bind`; bound (`compile_onnx(bind=...)`, `nem-compile --bind`,
or the onnx backend at `run`), the program computes what onnxruntime
computes with those values."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from compile_runs import run_compiled, tool, typed_model
from onnx import TensorProto, helper

from nem.cli.onnx_backend import NemBackend
from nem.compile import CompileError, compile_onnx
from nem.compile.check import onnxruntime_run
from nem.frontends.onnx.bind import compile_time_inputs

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _index_inputs_model() -> onnx.ModelProto:
    """ReduceSum over axes, Slice by starts/ends, Clip by min/max: every
    index operand and bound a graph input (as onnx's node tests give them)."""
    nodes = [
        helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
        helper.make_node("Slice", ["x", "starts", "ends", "sl_axes"], ["sl"]),
        helper.make_node("Clip", ["x", "lo", "hi"], ["y"]),
    ]
    inputs = [
        ("x", F, [3, 4, 5]),
        ("axes", I64, [1]),
        ("starts", I64, [2]),
        ("ends", I64, [2]),
        ("sl_axes", I64, [2]),
        ("lo", F, []),
        ("hi", F, []),
    ]
    return typed_model(nodes, inputs, [("s", F, None), ("sl", F, None), ("y", F, None)], opset=18)


BOUND = {
    "axes": np.array([1], np.int64),
    "starts": np.array([0, 1], np.int64),
    "ends": np.array([2, 4], np.int64),
    "sl_axes": np.array([0, 2], np.int64),
    "lo": np.array(-0.25, np.float32),
    "hi": np.array(0.5, np.float32),
}


def test_the_index_inputs_are_found():
    assert compile_time_inputs(_index_inputs_model()) == [
        "axes",
        "starts",
        "ends",
        "sl_axes",
        "lo",
        "hi",
    ]


def test_unbound_index_inputs_are_located_errors_naming_bind():
    with pytest.raises(CompileError) as e:
        compile_onnx(_index_inputs_model())
    text = str(e.value)
    assert "ReduceSum axes 'axes' computed at run time" in text
    assert "Slice starts 'starts' computed at run time" in text
    assert "Clip bounds 'lo' and 'hi' computed at run time" in text  # both at once (session 62)
    assert "nem-compile --bind axes=VALUES" in text
    assert "of integer data" not in text  # an index operand is not data


def _check_bound(model: onnx.ModelProto, result, bound: dict[str, np.ndarray]) -> None:
    """`result` (compiled with `bound`) computes what onnxruntime computes
    on the model with those inputs."""
    x = np.random.default_rng(5).standard_normal((3, 4, 5)).astype(np.float32)
    it, _ = run_compiled(result, model, inputs={"x": x})
    want = onnxruntime_run(model, {"x": x, **bound})
    for name, shape, dtype in result.interface.outputs:
        got = it.read_tensor(name, shape, dtype)
        np.testing.assert_allclose(got, want[result.interface.onnx_names[name]], rtol=1e-6)


def test_bound_inputs_compute_what_onnxruntime_computes():
    model = _index_inputs_model()
    result = compile_onnx(model, bind=BOUND)
    assert [i[0] for i in result.interface.inputs] == ["x"]
    _check_bound(model, result, BOUND)


def test_the_backend_compiles_per_value_of_the_index_inputs():
    """onnx's runner gives the axes with the data: the backend compiles at
    `run`, once per distinct value, and each run is right."""
    model = _index_inputs_model()
    rep = NemBackend.prepare(model)
    x = np.random.default_rng(6).standard_normal((3, 4, 5)).astype(np.float32)
    other = {**BOUND, "axes": np.array([-1], np.int64), "hi": np.array(2.0, np.float32)}
    for bound in (BOUND, other, BOUND):
        feeds = {"x": x, **bound}
        want = onnxruntime_run(model, feeds)
        got = rep.run(feeds)
        for g, name in zip(got, ("s", "sl", "y")):
            np.testing.assert_allclose(g, want[name], rtol=1e-6)
    assert len(rep.compiled) == 2


@pytest.mark.parametrize(
    ("bind", "message"),
    [
        ({"nope": np.array([1])}, "cannot bind 'nope': it is not a graph input"),
        ({**BOUND, "axes": np.array([1, 2])}, "2 value(s) given, the input is declared 1"),
        ({**BOUND, "axes": np.array([0.5])}, "a value given is not an integer"),
        ({**BOUND, "lo": np.array(["a"])}, "its value has element type <U1"),
    ],
)
def test_bad_bindings_are_diagnostics(bind, message):
    with pytest.raises(CompileError) as e:
        compile_onnx(_index_inputs_model(), bind=bind)
    assert message in str(e.value) and "D-COMPILE-BIND" in str(e.value)


def test_the_model_given_is_not_modified():
    model = _index_inputs_model()
    before = model.SerializeToString()
    compile_onnx(model, bind=BOUND)
    assert model.SerializeToString() == before


def test_nem_compile_binds_from_the_command_line(tmp_path):
    model = _index_inputs_model()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    np.save(tmp_path / "ends.npy", BOUND["ends"])
    out = tmp_path / "m.nemb"
    args = [str(src), "-o", str(out), "--bind", "axes=1", "--bind", "starts=0,1"]
    args += ["--bind", f"ends={tmp_path / 'ends.npy'}", "--bind", "sl_axes=0,2"]
    tool("nem-compile", *args, "--bind", "lo=-0.25", "--bind", "hi=0.5")
    assert out.stat().st_size > 0
    bad = tool("nem-compile", str(src), "-o", str(out), "--bind", "axes", ok=False)
    assert bad.returncode == 2 and "--bind: expected NAME=VALUES" in bad.stderr
    unbound = tool("nem-compile", str(src), "-o", str(out), "--bind", "axes=1", ok=False)
    assert unbound.returncode == 1 and "--bind starts=VALUES" in unbound.stderr


def test_bisect_runs_onnxruntime_on_the_bound_model():
    from nem.compile.bisect import bisect
    from nem.compile.options import CompileOptions

    b = bisect(_index_inputs_model(), CompileOptions(bind=tuple(BOUND.items())))
    assert b.compile_error is None and b.culprit is None
    assert [s.status for s in b.steps if s.status][:3] == ["ok"] * 3  # import, bufferize, tile
    bad = bisect(_index_inputs_model(), CompileOptions(bind=(("nope", 1),)))
    assert "cannot bind 'nope'" in (bad.compile_error or "")
