"""The onnx package's backend test data through nem-compile and the
reference runtime (issue 32), as onnx's own runner runs them: its loader
(`onnx.backend.test.loader`: the cases of `pytorch-converted`,
`pytorch-operator` and `simple`, with their rtol and atol: 1e-3 and 1e-7),
the inputs and expected outputs of `test_data_set_0`, and its comparison
(`Runner.assert_similar_outputs`: shapes, element types, `assert_allclose`),
on the backend `nem.cli.onnx_backend.NemBackend` (device npm_pro_x1, the
default route).

Every one of the 140 cases has an expected outcome below, so that a
regression fails and a fix is noticed:

* PASS (the default): compiles, verifies, runs and matches;
* LOWERING: a known failure after the importer (the lowering or upstream's
  tiling), a strict expected failure naming the cause;
* UNSUPPORTED: a clean diagnostic (a `CompileError` of the import stage or
  the backend's refusal of an input), checked for its reason.

By default a fixed representative subset runs (SHORT: every op family the
importer converts, about 20 s on 2 cores); `NEM_ONNX_BACKEND=full` runs all
140 (about 2 minutes).
"""

from __future__ import annotations

import os

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from onnx.backend.test.loader import load_model_tests  # noqa: E402
from onnx.backend.test.runner import Runner  # noqa: E402

from nem.cli.onnx_backend import InputRangeError, NemBackend, load_case  # noqa: E402
from nem.compile import CompileError  # noqa: E402

KINDS = ("pytorch-converted", "pytorch-operator", "simple")
CASES = {c.name: c for kind in KINDS for c in load_model_tests(kind=kind)}

LOWERING: dict[str, str] = {}
"""Known failures after the importer (strict expected failures)."""

_F64 = "values beyond float32's range"
UNSUPPORTED = {
    "test_gradient_of_add": "operator domain 'ai.onnx.preview.training'",
    "test_gradient_of_add_and_mul": "operator domain 'ai.onnx.preview.training'",
    "test_sequence_model8": "input 'X' has a dynamic dimension 'n'",
    # f64 inputs such as 2.4e198, beyond f32's range (D-COMPILE-F64)
    "test_operator_add_broadcast": _F64,
    "test_operator_add_size1_right_broadcast": _F64,
    "test_operator_add_size1_singleton_broadcast": _F64,
    "test_operator_addconstant": _F64,
    **{name: "has element type STRING" for name in CASES if name.startswith("test_strnorm")},
}
"""Cases that get a clean diagnostic: the expected reason."""

SHORT = {
    "test_AvgPool1d",
    "test_AvgPool3d_stride",
    "test_BatchNorm2d_eval",
    "test_Conv1d_pad1",
    "test_Conv2d_depthwise_strided",
    "test_Conv3d_stride",
    "test_ConvTranspose2d",
    "test_ELU",
    "test_Embedding",
    "test_GLU",
    "test_Linear",
    "test_LogSoftmax",
    "test_MaxPool1d_stride",
    "test_MaxPool3d",
    "test_PReLU_2d_multiparam",
    "test_PixelShuffle",
    "test_operator_maxpool",
    "test_ReflectionPad2d",
    "test_ReplicationPad2d",
    "test_SELU",
    "test_Softplus",
    "test_ZeroPad2d",
    "test_operator_add_size1_broadcast",
    "test_operator_index",
    "test_operator_non_float_params",
    "test_operator_repeat_dim_overflow",
    "test_operator_symbolic_override",
    "test_operator_symbolic_override_nested",
    "test_expand_shape_model3",
    "test_expand_shape_model4",
    "test_sequence_model1",
    "test_sequence_model5",
    "test_sequence_model6",
    "test_shrink",
    "test_sign_model",
    "test_single_relu_model",
    "test_gradient_of_add",
    "test_strnorm_model_monday_empty_output",
    "test_operator_add_broadcast",
}
"""The CI subset: each op family once, the three outcomes."""

FULL = os.environ.get("NEM_ONNX_BACKEND") == "full"


def _param(name: str):
    marks = []
    if name in LOWERING:
        marks.append(pytest.mark.xfail(strict=True, reason=LOWERING[name]))
    if not FULL and name not in SHORT:
        marks.append(pytest.mark.skip(reason="not in the short set (NEM_ONNX_BACKEND=full)"))
    return pytest.param(name, marks=marks, id=name)


def test_every_case_has_an_expected_outcome():
    """The lists name existing cases only, the short set covers each outcome."""
    assert len(CASES) == 140
    assert set(LOWERING) | set(UNSUPPORTED) | SHORT <= set(CASES)
    assert not set(LOWERING) & set(UNSUPPORTED)
    assert SHORT & set(UNSUPPORTED) and SHORT - set(UNSUPPORTED) - set(LOWERING)


@pytest.mark.parametrize("name", [_param(n) for n in sorted(set(CASES) - set(UNSUPPORTED))])
@pytest.mark.slow  # 72 s (127 cases)
def test_case_matches(name):
    case = CASES[name]
    model, inputs, expected = load_case(case.model_dir)
    outputs = NemBackend.prepare(model).run(inputs)
    Runner.assert_similar_outputs(
        expected, list(outputs), rtol=case.rtol, atol=case.atol, model_dir=case.model_dir
    )


@pytest.mark.parametrize("name", [_param(n) for n in sorted(UNSUPPORTED)])
def test_case_is_refused_with_a_reason(name):
    """A clean diagnostic: the importer's `CompileError` (stage import) or
    the backend's refusal of an input it cannot represent; never a
    traceback or a wrong number."""
    model, inputs, _ = load_case(CASES[name].model_dir)
    with pytest.raises((CompileError, InputRangeError)) as e:
        NemBackend.prepare(model).run(inputs)
    if isinstance(e.value, CompileError):
        assert e.value.stage == "import"
    assert UNSUPPORTED[name] in str(e.value)
