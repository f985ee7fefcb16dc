"""A transposed NCHW graph input is read through a strided view
(D-COMPILE-LAYOUT, session 26; `nem.compile.transposed_reads`): the
convolution's staging copies transpose it on the way from DDR to L1, and
no DDR buffer holds the NHWC copy that, before, the transpose's tiles wrote
and the convolution's tiles read back (MobileNetV2's first block: 4 passes
over the input, 1 now)."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import dma_bytes, graph_model, only_output, timed_cycles  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

OPTS = {"device": "npm_pro_x1"}
C, HW = 16, 28
X_BYTES = C * HW * HW * 4


def _residual():
    """x (1x16x28x28) -> 1x1 Conv 16->16 (bias) -> Relu -> + x: the input is
    read by the convolution (transposed to NHWC) and by the Add."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (C, C, 1, 1)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.uniform(-1, 1, C).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["y"], name="add"),
    ]
    return graph_model(nodes, [1, C, HW, HW], inits)


def _ddr_writes(nem: str) -> dict[str, int]:
    """The bytes the program's transfers write into each DDR buffer."""
    ddr = set(re.findall(r"^buffer (\w+) : DDR", nem, re.M))
    out: dict[str, int] = {}
    for dst, shape in re.findall(
        r"transfer\.\w+\(dst=region\((\w+),[^)]*\) elem=f32, shape=\[([\d, ]+)\]", nem
    ):
        if dst in ddr:
            out[dst] = out.get(dst, 0) + 4 * int(np.prod([int(n) for n in shape.split(",")]))
    return out


def _reads_of_x(nem: str) -> list[list[int]]:
    """The source strides of each transfer reading the input `x`."""
    found = re.findall(
        r"src=region\(x, [^)]*\) elem=f32, shape=\[[\d, ]+\], strides=\[([\d, ]+)\]", nem
    )
    return [[int(n) for n in s.split(",")] for s in found]


def test_the_transposed_input_does_not_go_through_ddr():
    model = _residual()
    new = compile_onnx(model, **OPTS)
    # the convolution's staging copies read x's channels HW x HW elements apart
    assert any(strides[-1] == HW * HW for strides in _reads_of_x(new.nem))
    assert "reinterpret_cast" in new.stage("bufferize").text
    # (without the view, the transpose's tiles read x so too since session 60,
    # `transform.UNSTAGED`, and write the NHWC copy of x to DDR)
    old = compile_onnx(model, **OPTS, transposed_reads=False)
    # the NHWC copy of x in DDR is gone, and nothing else changed buffers
    writes, before = _ddr_writes(new.nem), _ddr_writes(old.nem)
    assert len(writes) == len(before) - 1
    assert sum(writes.values()) == sum(before.values()) - X_BYTES
    # DDR -> L1 (transposed on the way since session 60), back to DDR and
    # read again: one pass left; the Add, which read the rows the transpose
    # staged, stages its own
    assert dma_bytes(new.nem) == dma_bytes(old.nem) - 2 * X_BYTES
    assert timed_cycles(new.nem) < timed_cycles(old.nem)
    a = only_output(new, model, 3)
    assert np.array_equal(a.view(np.uint32), only_output(old, model, 0).view(np.uint32))
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))
    ((name, _, _),) = new.interface.outputs
    assert max_violation(a, want[new.interface.onnx_names[name]]) <= 1.0


def test_a_transpose_into_a_padded_buffer_is_left_alone():
    """A stem's input is transposed into the padded buffer's interior
    (D-COMPILE-PAD-IN-PLACE), which the border fills share: not a buffer of
    its own, so it stays a transpose."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (8, 3, 3, 3)).astype(np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1] * 4)
    text = compile_onnx(graph_model([conv], [1, 3, 16, 16], [w]), **OPTS).stage("bufferize").text
    assert "linalg.transpose ins(%arg0" in text and "reinterpret_cast" not in text


def test_an_f16_input_keeps_its_nhwc_copy():
    """Only f32 inputs are read through the view: an f16 1x1 conv over 2,048
    channels read so was cut along its channels, its partial sums rounded to
    f16 between the cuts, 1.24 tolerances from onnxruntime (test_bisect's
    f16 reduction; D-COMPILE-LAYOUT, on merging, session 26)."""
    from onnx import TensorProto

    w = numpy_helper.from_array(np.ones((8, 64, 1, 1), np.float16), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
        "c",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 64, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 8, 4, 4])],
        [w],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    text = compile_onnx(model, **OPTS).stage("bufferize").text
    assert "linalg.transpose ins(%arg0" in text and "reinterpret_cast" not in text
