"""Whatever nem-compile emits verifies (issue 30, item 4; D-COMPILE-L1).

Every shipped sample model, compiled for every shipped device with the
compile's own final check turned off, is checked by `nem-verify` on the
printed program: a program the compiler emits never fails the checker
(L1 capacity, placement, tokens, hazards).  A compile may refuse a model
(a clean `CompileError`), never emit an invalid program.

The default run takes the samples in f32 on every device; `NEM_VALID=full`
also takes them in f16 and the nine CNNs that ship with the `onnx` package
(`onnx/backend/test/data/light/`, as shipped) on every device (long: tens of
minutes on 2 cores).
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("mlir.ir")

from nem.compile import CompileError, compile_onnx  # noqa: E402
from nem.compile.lower import verify_nem  # noqa: E402
from nem.devices.device_resolver import shipped_device_names  # noqa: E402
from nem.frontends.onnx import light_cnns, samples  # noqa: E402

FULL = os.environ.get("NEM_VALID") == "full"
DEVICES = sorted(shipped_device_names())
SAMPLES = [
    (name, dtype)
    for name in sorted(samples.MODELS)
    for dtype in (("f32", "f16") if FULL else ("f32",))
]
LIGHT = light_cnns.NAMES


def compiles_valid(model, device: str, name: str) -> None:
    try:
        result = compile_onnx(model, device=device, verify=False)
    except CompileError as e:
        assert "not supported" in str(e), f"{name} on {device}: {e}"
        return
    verify_nem(result.nem, f"{name}.nem", device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,dtype", SAMPLES)
@pytest.mark.slow  # 53 s (16 cases)
def test_sample_compiles_valid(name, dtype, device):
    compiles_valid(samples.MODELS[name](dtype), device, f"{name}_{dtype}")


@pytest.mark.skipif(not FULL, reason="the nine light CNNs: NEM_VALID=full")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", LIGHT)
def test_light_cnn_compiles_valid(model, device):
    compiles_valid(str(light_cnns.path(model)), device, model)
