"""The importer's reference path (shared by test_onnx_import.py and
test_onnx_slice.py): import an ONNX model to linalg on tensors, lower it
with upstream MLIR to LLVM and run it (`nem.compile.reference`), compare
with onnxruntime on the same seeded inputs (D-COMPILE-TOL).  Nothing of
the NEM lowering or runtime is involved."""

from __future__ import annotations

import numpy as np

from nem.compile.check import max_violation, onnxruntime_run
from nem.compile.reference import execute
from nem.frontends.onnx import import_onnx, samples


def reference_outputs(model, inputs):
    im = import_onnx(model)
    # an f64 or int64 input is f32 or i32 in the program (D-COMPILE-F64, D-COMPILE-I64)
    args = [inputs[p.onnx_name].astype(p.dtype) for p in im.inputs] + list(im.weights.values())
    got = execute(str(im.module), im.func_name, args, [(p.shape, p.dtype) for p in im.outputs])
    return im, dict(zip([p.onnx_name for p in im.outputs], got))


def check_model(model, seed=0, inputs=None):
    inputs = inputs if inputs is not None else samples.random_inputs(model, seed)
    im, got = reference_outputs(model, inputs)
    want = onnxruntime_run(model, inputs)
    for name, ref in want.items():
        assert got[name].shape == ref.shape
        v = max_violation(got[name], ref)
        assert v <= 1.0, (
            f"{name}: {v:.2f}x the tolerance, max diff "
            f"{np.abs(got[name].astype(np.float64) - ref).max():.3g}"
        )
    return im


def case_id(case) -> str:
    """A readable pytest id of a one-op case (op, input shapes, attributes, constants)."""
    op, ins, consts, attrs = case
    shapes = "-".join("x".join(map(str, s)) for s in ins.values())
    return "-".join([op, shapes, *(f"{k}={v}" for k, v in attrs.items()), *consts])


def check_single_op(case, dtype: str):
    """`check_model` of the one-node model of `case` (op, graph input shapes,
    constants fed after them, attributes), its float constants in `dtype`."""
    op, ins, consts, attrs = case
    np_dtype = np.float16 if dtype == "f16" else np.float32
    consts = {
        k: (v.astype(np_dtype) if v is not None and v.dtype.kind == "f" else v)
        for k, v in consts.items()
    }
    return check_model(samples.single_op(op, ins, dtype, consts, **attrs))
