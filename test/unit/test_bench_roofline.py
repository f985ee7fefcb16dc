"""bench/bench_roofline.py --per-node reports the issue's per-layer goal
(issue 35: every convolution within 2x of its own bound) from the groups of
the `.nemb` nem-compile writes, one per ONNX node (D-BC-NODES)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_roofline.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_roofline", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_per_node_rows_count_the_conv_layers():
    pytest.importorskip("onnx")
    pytest.importorskip("mlir.ir")
    from nem.frontends.onnx import samples

    bench = _bench()
    row = bench.measure("cnn f32", samples.cnn("f32"), "npm_pro_x1", 2, per_node=True)
    plain = bench.measure("cnn f32", samples.cnn("f32"), "npm_pro_x1", 2)
    assert row["cycles"] == plain["cycles"]  # the same program, with its nodes
    layers = row["layers"]
    assert layers["convs"] == 2  # conv1, conv2 (samples.cnn)
    assert 0 <= layers["within_2x"] <= 2
    assert layers["farthest"]["group"] in ("node 'conv1' (Conv)", "node 'conv2' (Conv)")
    assert layers["median_ratio"] <= layers["farthest"]["ratio"]
    assert "layers" not in plain
    # the convolutions over 2x hold a part of the critical path (D-RT-ROOFLINE, session 42)
    assert 0 <= layers["over_2x_critical"] <= row["cycles"]
    over = layers["convs"] - layers["within_2x"]
    assert 0 <= layers["over_2x_shared_within"] <= over  # session 56: `shared_bound`
    idle = layers["over_2x_idle"]
    assert len(idle) == over - layers["over_2x_shared_within"]
    assert all(g["ratio"] > 2 and g["shared_ratio"] > 2 for g in idle)
    assert all(0 <= g["critical"] <= g["cycles"] for g in row["farthest"])


def test_an_unknown_light_model_is_a_usage_error_naming_the_set(monkeypatch, capsys):
    """`--cnns alexnet` (the file is light_bvlc_alexnet.onnx) stopped with
    "cannot read model" after the samples' rows; now argparse refuses it
    before any work, listing the names onnx ships (session 41)."""
    pytest.importorskip("onnx")
    bench = _bench()
    monkeypatch.setattr("sys.argv", ["bench_roofline.py", "--models", "", "--cnns", "alexnet"])
    with pytest.raises(SystemExit) as e:
        bench.main()
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--cnns: not a light model: alexnet (onnx ships bvlc_alexnet," in err
    from nem.frontends.onnx import light_cnns

    assert light_cnns.names("squeezenet,,resnet50") == ["squeezenet", "resnet50"]


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--models", "cnn_f32", "--models: not a sample model: cnn_f32 (the samples are mlp, cnn,"),
        ("--dtypes", "f64", "--dtypes: not a sample dtype: f64 (the samples come in f32, f16)"),
        (
            "--cnn-dtypes",
            "i8",
            "--cnn-dtypes: not a light-model dtype: i8 (the light models come in f32, f16)",
        ),
    ],
)
def test_an_unknown_sample_is_a_usage_error_naming_the_set(
    flag, value, message, monkeypatch, capsys
):
    """`--models cnn_f32` stopped with a KeyError traceback (session 42):
    argparse refuses it with the names the samples have."""
    pytest.importorskip("onnx")
    bench = _bench()
    monkeypatch.setattr("sys.argv", ["bench_roofline.py", flag, value])
    with pytest.raises(SystemExit) as e:
        bench.main()
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_f16_copy_of_a_light_model_is_the_same_network_in_float16():
    """The f16 figures of issue 35 ran copies made by a script outside the
    repository (session 53); `light_cnns.f16_copy` makes them: a valid model
    whose every float tensor is float16, the same nodes as the f32 model
    upgraded to the importer's opset, and close to it where f16 does not
    overflow (onnxruntime, SqueezeNet's first Conv and Relu)."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import numpy as np
    from onnx import TensorProto, helper, shape_inference, version_converter

    from nem.frontends.onnx import light_cnns
    from nem.frontends.onnx.prepare import TARGET_OPSET

    m = light_cnns.f16_copy("squeezenet")
    onnx.checker.check_model(m, full_check=True)
    f32 = version_converter.convert_version(
        onnx.load(str(light_cnns.path("squeezenet"))), TARGET_OPSET
    )
    assert [n.op_type for n in m.graph.node] == [n.op_type for n in f32.graph.node]
    floats = {TensorProto.FLOAT, TensorProto.FLOAT16}
    assert {t.data_type for t in m.graph.initializer} & floats == {TensorProto.FLOAT16}
    inferred = shape_inference.infer_shapes(m).graph
    types = [v.type.tensor_type.elem_type for v in (*inferred.input, *inferred.value_info)]
    assert TensorProto.FLOAT not in types and TensorProto.FLOAT16 in types

    def first_relu(model):
        """The model cut after its first Relu (conv1 -> relu1)."""
        g = model.graph
        relu = next(n for n in g.node if n.op_type == "Relu")
        cut = helper.make_model(
            helper.make_graph(
                g.node[: list(g.node).index(relu) + 1],
                "cut",
                list(g.input),
                [
                    helper.make_tensor_value_info(
                        relu.output[0], g.input[0].type.tensor_type.elem_type, None
                    )
                ],
                list(g.initializer),
            ),
            opset_imports=model.opset_import,
        )
        s = ort.InferenceSession(cut.SerializeToString(), providers=["CPUExecutionProvider"])
        x = light_cnns.feeds(model)
        return s.run(
            None, {k: v.astype(np.float16 if model is m else np.float32) for k, v in x.items()}
        )[0]

    got, want = first_relu(m), first_relu(f32)
    assert got.dtype == np.float16 and np.isfinite(got).all()
    assert np.allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-2)
