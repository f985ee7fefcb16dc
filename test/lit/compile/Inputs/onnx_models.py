"""Small ONNX models for the lit tests of nem-compile's ONNX front end
(the outside user's report of its edge cases; onnx.helper only).

    python onnx_models.py NAME OUT.onnx [--input DIR]

writes model NAME and, with --input, one seeded random `.npy` per model
input into DIR, named after the input's ONNX name.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


def _model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s)
                                       for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


MODELS = {
    # invalid ONNX: Add of f32 and f16 (finding 1)
    "mixed_dtype": lambda: _model([helper.make_node("Add", ["a", "b"], ["y"], name="add")],
                                  [("a", F32, [3]), ("b", F16, [3])], [("y", F32, [3])]),
    # a scalar output: ReduceSum over all axes, keepdims=0 (finding 2)
    "reduce_all": lambda: _model([helper.make_node("ReduceSum", ["x"], ["y"], name="sum",
                                                   keepdims=0)],
                                 [("x", F32, [3, 4])], [("y", F32, [])]),
    # ONNX names 'a.b' and 'a_b' are buffers a_b and a_bv2 (finding 3); Sub: order matters
    "name_collision": lambda: _model([helper.make_node("Sub", ["a.b", "a_b"], ["y.0"],
                                                       name="sub")],
                                     [("a.b", F32, [3]), ("a_b", F32, [3])],
                                     [("y.0", F32, [3])]),
    # Constant's scalar and list forms (finding 4)
    "constant_forms": lambda: _model([
        helper.make_node("Constant", [], ["k"], name="k", value_float=0.5),
        helper.make_node("Mul", ["x", "k"], ["t"], name="mul"),
        helper.make_node("Constant", [], ["d"], name="d", value_floats=[1.0, 2.0, 3.0, 4.0]),
        helper.make_node("Add", ["t", "d"], ["u"], name="add"),
        helper.make_node("Constant", [], ["s"], name="s", value_ints=[4, 2]),
        helper.make_node("Reshape", ["u", "s"], ["y"], name="reshape")],
        [("x", F32, [2, 4])], [("y", F32, [4, 2])]),
    "constant_string": lambda: _model([
        helper.make_node("Constant", [], ["c"], name="c", value_strings=["a", "b"]),
        helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [("x", F32, [3])], [("y", F32, [3])]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name", choices=sorted(MODELS))
    p.add_argument("out")
    p.add_argument("--input", metavar="DIR")
    args = p.parse_args()
    model = MODELS[args.name]()
    onnx.save(model, args.out)
    if args.input:
        rng = np.random.default_rng(0)
        for vi in model.graph.input:
            tt = vi.type.tensor_type
            dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
            shape = [d.dim_value for d in tt.shape.dim]
            np.save(os.path.join(args.input, vi.name + ".npy"),
                    rng.uniform(-1, 1, shape).astype(dtype))


if __name__ == "__main__":
    main()
