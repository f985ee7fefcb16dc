"""Small ONNX models for the lit tests of nem-compile's ONNX front end
(the outside user's report of its edge cases, and the op coverage of issue
32 in test/lit/onnx; onnx.helper only).

    python onnx_models.py NAME OUT.onnx [--input DIR]

writes model NAME and, with --input, one seeded random `.npy` per model
input into DIR, named after the input's ONNX name (an int64 input in the
program's i32, D-COMPILE-I64).
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64
R = np.random.default_rng(32)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(inits),
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _w(name, *shape):
    return numpy_helper.from_array(R.uniform(-0.5, 0.5, shape).astype(np.float32), name)


def _i64(name, *values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _unary(op, shape=(1, 4, 5, 6), **attrs):
    return lambda: _model(
        [helper.make_node(op, ["x"], ["y"], name=op.lower(), **attrs)],
        [("x", F32, list(shape))],
        [("y", F32, list(shape))],
    )


MODELS = {
    # invalid ONNX: Add of f32 and f16 (finding 1)
    "mixed_dtype": lambda: _model(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add")],
        [("a", F32, [3]), ("b", F16, [3])],
        [("y", F32, [3])],
    ),
    # a scalar output: ReduceSum over all axes, keepdims=0 (finding 2)
    "reduce_all": lambda: _model(
        [helper.make_node("ReduceSum", ["x"], ["y"], name="sum", keepdims=0)],
        [("x", F32, [3, 4])],
        [("y", F32, [])],
    ),
    # ONNX names 'a.b' and 'a_b' are buffers a_b and a_bv2 (finding 3); Sub: order matters
    "name_collision": lambda: _model(
        [helper.make_node("Sub", ["a.b", "a_b"], ["y.0"], name="sub")],
        [("a.b", F32, [3]), ("a_b", F32, [3])],
        [("y.0", F32, [3])],
    ),
    # Constant's scalar and list forms (finding 4)
    "constant_forms": lambda: _model(
        [
            helper.make_node("Constant", [], ["k"], name="k", value_float=0.5),
            helper.make_node("Mul", ["x", "k"], ["t"], name="mul"),
            helper.make_node("Constant", [], ["d"], name="d", value_floats=[1.0, 2.0, 3.0, 4.0]),
            helper.make_node("Add", ["t", "d"], ["u"], name="add"),
            helper.make_node("Constant", [], ["s"], name="s", value_ints=[4, 2]),
            helper.make_node("Reshape", ["u", "s"], ["y"], name="reshape"),
        ],
        [("x", F32, [2, 4])],
        [("y", F32, [4, 2])],
    ),
    "constant_string": lambda: _model(
        [
            helper.make_node("Constant", [], ["c"], name="c", value_strings=["a", "b"]),
            helper.make_node("Relu", ["x"], ["y"], name="relu"),
        ],
        [("x", F32, [3])],
        [("y", F32, [3])],
    ),
    # op coverage of issue 32 (test/lit/onnx)
    # activations: raised bodies (max/min with 0, exp, log, abs) or select (escape hatch)
    "prelu": lambda: _model(
        [helper.make_node("PRelu", ["x", "s"], ["y"], name="prelu")],
        [("x", F32, [1, 4, 5, 6])],
        [("y", F32, [1, 4, 5, 6])],
        [_w("s", 4, 1, 1)],
    ),
    "elu": _unary("Elu", alpha=0.5),
    "selu": _unary("Selu"),
    "softplus": _unary("Softplus"),
    "hardswish": _unary("HardSwish"),
    "sign": _unary("Sign"),
    "shrink": _unary("Shrink", lambd=0.25),
    "logsoftmax": _unary("LogSoftmax", shape=(3, 10)),
    "lrn": _unary("LRN", size=3),
    "sum3": lambda: _model(
        [helper.make_node("Sum", ["a", "b", "c"], ["y"], name="sum")],
        [("a", F32, [2, 3]), ("b", F32, [3]), ("c", F32, [2, 1])],
        [("y", F32, [2, 3])],
    ),
    # Pad before a Conv: zeros fold into its pads, another value does not
    "pad_conv": lambda: _model(
        [
            helper.make_node("Pad", ["x", "p"], ["t"], name="pad"),
            helper.make_node("Conv", ["t", "w"], ["y"], name="conv"),
        ],
        [("x", F32, [1, 3, 6, 6])],
        [("y", F32, [1, 4, 6, 7])],
        [_i64("p", 0, 0, 1, 1, 0, 0, 1, 2), _w("w", 4, 3, 3, 3)],
    ),
    "pad_one_conv": lambda: _model(
        [
            helper.make_node("Pad", ["x", "p", "v"], ["t"], name="pad"),
            helper.make_node("Conv", ["t", "w"], ["y"], name="conv"),
        ],
        [("x", F32, [1, 3, 6, 6])],
        [("y", F32, [1, 4, 6, 7])],
        [
            _i64("p", 0, 0, 1, 1, 0, 0, 1, 2),
            numpy_helper.from_array(np.float32(1.0), "v"),
            _w("w", 4, 3, 3, 3),
        ],
    ),
    "pad_reflect": lambda: _model(
        [helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode="reflect")],
        [("x", F32, [1, 2, 4, 5])],
        [("y", F32, [1, 2, 5, 8])],
        [_i64("p", 0, 0, 1, 2, 0, 0, 0, 1)],
    ),
    # convolutions in 1-D and 3-D, transposed
    "conv1d": lambda: _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1], strides=[2])],
        [("x", F32, [2, 3, 9])],
        [("y", F32, [2, 4, 5])],
        [_w("w", 4, 3, 3), _w("b", 4)],
    ),
    "conv3d": lambda: _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[2, 1, 1])],
        [("x", F32, [1, 2, 5, 4, 4])],
        [("y", F32, [1, 3, 2, 3, 3])],
        [_w("w", 3, 2, 2, 2, 2)],
    ),
    "conv4d": lambda: _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
        [("x", F32, [1, 2, 3, 3, 3, 3])],
        [("y", F32, [1, 1, 2, 2, 2, 2])],
        [_w("w", 1, 2, 2, 2, 2, 2)],
    ),
    "convtranspose": lambda: _model(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="deconv", strides=[2, 2])],
        [("x", F32, [1, 3, 4, 4])],
        [("y", F32, [1, 2, 9, 9])],
        [_w("w", 3, 2, 3, 3)],
    ),
    "maxpool3d": lambda: _model(
        [
            helper.make_node(
                "MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2, 2], strides=[2, 2, 2]
            )
        ],
        [("x", F32, [1, 2, 4, 4, 4])],
        [("y", F32, [1, 2, 2, 2, 2])],
    ),
    # an embedding: int64 ids (i32 in the program), a run-time Gather
    "embedding": lambda: _model(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="embed")],
        [("ids", I64, [2, 3])],
        [("y", F32, [2, 3, 4])],
        [_w("table", 10, 4)],
    ),
    # the nine light CNNs' weights: ConstantOfShape of a shape initializer
    "constant_of_shape": lambda: _model(
        [
            helper.make_node(
                "ConstantOfShape",
                ["shape"],
                ["w"],
                name="weights",
                value=numpy_helper.from_array(np.array([0.02], np.float32)),
            ),
            helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
        ],
        [("x", F32, [1, 3, 5, 5])],
        [("y", F32, [1, 2, 3, 3])],
        [_i64("shape", 2, 3, 3, 3)],
        opset=9,
    ),
    # three unsupported nodes in one chain (every one is listed)
    "three_unsupported": lambda: _model(
        [
            helper.make_node("Hardmax", ["x"], ["a"], name="hm"),
            helper.make_node("Relu", ["a"], ["b"], name="relu"),
            helper.make_node("Trilu", ["b"], ["c"], name="tril", upper=0),
            helper.make_node("LpNormalization", ["c"], ["y"], name="lpn"),
        ],
        [("x", F32, [2, 6])],
        [("y", F32, [2, 6])],
    ),
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
            shape = [d.dim_value for d in tt.shape.dim]
            if tt.elem_type == I64:  # ids, in the program's i32 (D-COMPILE-I64)
                arr = rng.integers(-3, 10, shape, dtype=np.int32)
            else:
                arr = rng.uniform(-1, 1, shape).astype(
                    helper.tensor_dtype_to_np_dtype(tt.elem_type)
                )
            np.save(os.path.join(args.input, vi.name + ".npy"), arr)


if __name__ == "__main__":
    main()
