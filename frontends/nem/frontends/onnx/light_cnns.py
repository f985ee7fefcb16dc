"""The nine real CNNs that ship with `onnx` (issue 30's yardstick).

`onnx/backend/test/data/light/` holds AlexNet, DenseNet-121, Inception v1
and v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19 and ZFNet-512, each with
one expected output.  The benches (`bench/bench_cnn.py`, `bench_run_cnn.py`,
`bench_roofline.py`) and the tests that compile or import them take the
names, the files, onnx's inputs and onnx's tolerances from here, so that a
model added to or dropped from the set changes in one place.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from nem.frontends.onnx import samples
from nem.frontends.onnx.prepare import TARGET_OPSET

NAMES = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)
"""The models' names: `light_<name>.onnx` in `directory()`."""

RTOL = {"densenet121": 2e-3}
"""onnx's own relative tolerances (onnx/backend/test/case/model/__init__.py); 1e-3 otherwise."""
ATOL = 1e-7


def directory() -> Path:
    """Where the installed `onnx` keeps the light models."""
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


names = samples.listed(NAMES, "a light model", "onnx ships")
"""`--cnns`/`--models` of the benches that run the light CNNs (`samples.listed`)."""


dtypes = samples.listed(("f32", "f16"), "a light-model dtype", "the light models come in")
"""`--cnn-dtypes` of `bench_roofline.py`: as shipped, or their `f16_copy`."""


def path(name: str) -> Path:
    """The model file of one of `NAMES`."""
    return directory() / f"light_{name}.onnx"


def f16_copy(name: str) -> onnx.ModelProto:
    """The model in float16: upgraded to `TARGET_OPSET` (onnx's version
    converter, as the importer upgrades it; the light models' opsets 3-9
    take no float16 in some of their ops), then every float32 initializer,
    Constant/attribute tensor, graph input and output cast to float16, the
    intermediate types left to shape inference.  What the f16 figures of
    issue 35 ran (`bench_roofline.py --cnn-dtypes f16`): the same network
    computed in f16 on the device's f16 units.  Its constant weights
    overflow float16 in places (SqueezeNet's conv10 gives inf here and in
    onnxruntime alike), so its outputs are for comparing programs, not
    onnx's expected output."""
    from onnx import numpy_helper, version_converter

    m = version_converter.convert_version(onnx.load(str(path(name))), TARGET_OPSET)
    g = m.graph
    f32, f16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16

    def cast(t: onnx.TensorProto) -> None:
        if t.data_type == f32:
            a = numpy_helper.to_array(t).astype(np.float16)
            t.CopyFrom(numpy_helper.from_array(a, t.name))

    for t in g.initializer:
        cast(t)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                cast(a.t)
    for v in (*g.input, *g.output):
        if v.type.tensor_type.elem_type == f32:
            v.type.tensor_type.elem_type = f16
    del g.value_info[:]  # float32 there: inferred again
    return m


def rtol(name: str) -> float:
    return RTOL.get(name, 1e-3)


def feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """onnx's backend runner's inputs for a light model: `arange(n) / n` as
    float32 for each graph input that is not an initializer."""
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim
        )
        n = int(np.prod(shape))
        out[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return out


def expected(name: str) -> np.ndarray:
    """The expected output onnx ships beside the model."""
    from onnx import numpy_helper

    return numpy_helper.to_array(onnx.load_tensor(str(directory() / f"light_{name}_output_0.pb")))


def error(name: str, got: np.ndarray) -> float:
    """The largest error relative to onnx's tolerance: <= 1 passes onnx's
    `assert_allclose(got, expected, rtol, atol)`."""
    want = expected(name).reshape(got.shape)
    return float(np.max(np.abs(got - want) / (ATOL + rtol(name) * np.abs(want))))
