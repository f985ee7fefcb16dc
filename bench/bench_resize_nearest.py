"""How often Resize in mode nearest picks onnxruntime's source pixel
(D-COMPILE-RESIZE): the importer's float32 coordinates
(`resize.nearest_weights`) against onnx's reference evaluator's float64
ones (`resize.axis_weights`, the weights before session 55), on a grid of
one-axis cases: every coordinate transformation and nearest mode, axis
lengths 1 to 97, scales that are and are not exact in binary, and sizes.

  python bench/bench_resize_nearest.py [--lengths 1,2,3,7,13,14,31,64,97]

Prints, per weight rule, the cases whose output differs from
onnxruntime's, of the cases it takes (an axis whose output length is its
input's is left out: onnxruntime and the importer copy it whatever the
scale).
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from nem.frontends.onnx.resize import ROUNDINGS, TRANSFORMS, axis_weights, nearest_weights

TAKEN = [t.decode() for t in TRANSFORMS if t != b"tf_crop_and_resize"]
"""The importer's coordinate transformations but the one it refuses."""
GIVEN = [("scale", s) for s in (0.3, 0.6, 1.3, 1.7, 2.3, 0.5, 2.0, 3.0, 0.25, 1 / 3)] + [
    ("size", n) for n in (17, 9, 5, 1, 100)
]


def onnxruntime_pixels(transform: str, rounding: str, n: int, kind: str, v: float) -> np.ndarray:
    """The input index onnxruntime reads at each output position."""
    if kind == "scale":
        ins, given = ["x", "", "s"], np.array([1, 1, 1, v], np.float32)
    else:
        ins, given = ["x", "", "", "s"], np.array([1, 1, 1, v], np.int64)
    attrs = {"coordinate_transformation_mode": transform, "nearest_mode": rounding}
    node = helper.make_node("Resize", ins, ["y"], mode="nearest", **attrs)
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1, n])
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [node], "g", [x_info], [y_info], [numpy_helper.from_array(given, "s")]
    )
    opset = 13 if transform == "tf_half_pixel_for_nn" else 19
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    x = np.arange(n, dtype=np.float32).reshape(1, 1, 1, n)
    session = ort.InferenceSession(model.SerializeToString())
    return np.asarray(session.run(None, {"x": x})[0]).reshape(-1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="1,2,3,7,13,14,31,64,97")
    lengths = [int(n) for n in p.parse_args().lengths.split(",")]
    ort.set_default_logger_severity(3)  # (tf_half_pixel_for_nn's deprecation warning)
    rules = ("float32 (the importer)", "float64 (onnx's reference)")
    differ = dict.fromkeys(rules, 0)
    cases = dict.fromkeys(rules, 0)
    for transform in TAKEN:
        for rounding in (r.decode() for r in ROUNDINGS):
            for n in lengths:
                for kind, v in GIVEN:
                    out = int(np.floor(n * np.float32(v))) if kind == "scale" else int(v)
                    if out < 1 or out == n:
                        continue
                    scale = float(np.float32(v)) if kind == "scale" else None
                    want = onnxruntime_pixels(transform, rounding, n, kind, v)
                    ramp = np.arange(n, dtype=np.float64)
                    t, r = transform.encode(), rounding.encode()
                    ours = ramp @ nearest_weights(t, r, n, scale, out)
                    cases[rules[0]] += 1
                    differ[rules[0]] += not np.array_equal(ours, want)
                    if transform == "tf_half_pixel_for_nn":  # (not in onnx's opset-19 reference)
                        continue
                    node = SimpleNamespace(
                        attrs={
                            "mode": b"nearest",
                            "coordinate_transformation_mode": t,
                            "nearest_mode": r,
                        }
                    )
                    ref_scale = None if transform == "align_corners" else scale
                    theirs = ramp @ axis_weights(node, n, ref_scale, out, t)  # type: ignore[arg-type]
                    cases[rules[1]] += 1
                    differ[rules[1]] += not np.array_equal(theirs, want)
    for rule in rules:
        print(
            f"{rule:<28} differs from onnxruntime {ort.__version__} in {differ[rule]} "
            f"of {cases[rule]} cases"
        )
    print("(float64: tf_half_pixel_for_nn left out, which onnx's opset-19 reference lacks)")


if __name__ == "__main__":
    main()
