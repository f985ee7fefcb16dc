"""What the lowering declares in a compiled model's memory (D-LOW-BUF)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import DEVICE  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

X4 = {"x": (1, 4, 9, 9)}


def test_no_buffer_nothing_uses():
    """A max pooling's window operand (`tensor<3x3xf32>`, of which the
    compute reads nothing) declares no buffer: an unused buffer has no
    lifetime, so nem-share-buffers could not share its bytes and it held L1
    for the whole program (D-LOW-BUF; Inception v2 exceeded L1 by sixteen of
    them and was tiled twice)."""
    model = samples.single_op(
        "MaxPool", X4, "f32", {}, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    )
    nem = compile_onnx(model, device=DEVICE).nem
    names = re.findall(r"^buffer (\w+) :", nem, re.M)
    assert names
    unused = [n for n in names if len(re.findall(rf"\b{n}\b", nem)) == 1]
    assert not unused
