"""The graph fuzzer's second opinion on a disagreement: the model evaluated
in float64, each op's result rounded once to its ONNX type, and how far
rounding errors of one unit in the last place at each op can move that
(docs/testing.md, "When onnxruntime is the inexact one").

onnxruntime is the reference of every case, but it is not exact: for f16 it
computes Tanh and Erf in f32 without rounding between them (its CPU kernels
are f32: it casts around them and removes the casts between two), and an
ill-conditioned graph (a LayerNormalization over nearly equal values)
amplifies that past D-COMPILE-TOL (finding m46: onnxruntime 0.0197 off the
exact result, nem-compile 0.001).  When the two disagree,

* `exact` is what an exact implementation of every op, storing each result
  in the model's element type, gives: the model with its f16/f32 tensors
  widened to f64, each float node output rounded to its type (round to
  nearest even) by the op `nem.fuzz.Round`, run by onnx's reference
  evaluator (`onnx.reference.ReferenceEvaluator`, numpy in f64);
* `spread` is, per element, the largest distance from `exact` over
  `RUNS` evaluations in which `Round` also moves each result of an op that
  rounds (not those of `EXACT_OPS`) by a random fraction of one unit in
  the last place of its type (seeded): how much
  the model's outputs depend on rounding errors of one ulp at each op,
  which any implementation makes (an f32 intermediate, a kernel one ulp
  off, another summation order).

`graph_case.compare` then counts the case REFERENCE-INEXACT when
nem-compile's output is within D-COMPILE-TOL of `exact` and onnxruntime's
within D-COMPILE-TOL plus `SPREAD_FACTOR` times `spread` of it, else
MISCOMPILE (also when the evaluator cannot run the model).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference.op_run import OpRun

FLOATS = (TensorProto.FLOAT16, TensorProto.FLOAT)
DOMAIN = "nem.fuzz"
RUNS = 8
"""Evaluations with random one-ulp errors behind `spread`."""
SPREAD_FACTOR = 2.0
"""The maximum over `RUNS` random draws underestimates the worst case of
the errors' combination; twice it is the allowance (m46: onnxruntime 1.76
tolerances off `exact`, 0.46 of tolerance plus allowance; 32 hand-made
LayerNormalization chains up to 15 tolerances off, at most 0.54)."""


def allowance_violation(got: np.ndarray, exact: np.ndarray, spread: np.ndarray) -> float:
    """max |got - exact| / (D-COMPILE-TOL + SPREAD_FACTOR spread): at most 1
    is a difference that one-ulp rounding errors at each op explain."""
    from nem.compile.check import TOLERANCES

    atol, rtol = TOLERANCES[np.dtype(exact.dtype)]
    g, w = got.astype(np.float64).reshape(exact.shape), exact.astype(np.float64)
    if not np.all(np.isfinite(g) == np.isfinite(w)):
        return float("inf")
    fin = np.isfinite(w)
    bound = atol + rtol * np.abs(w) + SPREAD_FACTOR * spread
    return float(np.max(np.abs(g - w)[fin] / bound[fin], initial=0.0))


EXACT_OPS = frozenset(
    {
        "Abs",
        "Cast",
        "Ceil",
        "Clip",
        "Concat",
        "ConcatFromSequence",
        "Constant",
        "ConstantOfShape",
        "DepthToSpace",
        "Expand",
        "Flatten",
        "Floor",
        "Gather",
        "GlobalMaxPool",
        "Identity",
        "Max",
        "MaxPool",
        "Min",
        "Neg",
        "Pad",
        "ReduceMax",
        "ReduceMin",
        "Relu",
        "Reshape",
        "Round",
        "SequenceAt",
        "Shape",
        "Sign",
        "Size",
        "Slice",
        "SpaceToDepth",
        "Split",
        "SplitToSequence",
        "Squeeze",
        "Tile",
        "Transpose",
        "Unsqueeze",
        "Where",
    }
)
"""Ops whose every result is one of their operands' values (or a constant,
or a cast every implementation rounds the same way): no rounding error, no
random ulp in `spread`."""


class Round(OpRun):
    """`x` rounded to the element type `to` (and back to f64); with
    `Round.noise` set (a numpy Generator) and `exact` 0, then moved by a
    uniform random fraction of one ulp of that type."""

    op_domain = DOMAIN
    noise: np.random.Generator | None = None

    def _run(self, x, to=None, exact=0):  # noqa: ANN001 - onnx's OpRun signature
        t = helper.tensor_dtype_to_np_dtype(to)
        r = np.asarray(x).astype(t)
        y = r.astype(np.float64)
        if Round.noise is not None and not exact:
            y = y + Round.noise.uniform(-1.0, 1.0, y.shape) * np.spacing(np.abs(r)).astype(
                np.float64
            )
        return (y,)


def _widen_tensor(t: onnx.TensorProto) -> onnx.TensorProto:
    if t.data_type not in FLOATS:
        return t
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name)


def _widen_type(tp: onnx.TypeProto) -> None:
    """f16/f32 element types to f64, inside sequences too."""
    while tp.HasField("sequence_type"):
        tp = tp.sequence_type.elem_type
    if tp.HasField("tensor_type") and tp.tensor_type.elem_type in FLOATS:
        tp.tensor_type.elem_type = TensorProto.DOUBLE


def _widen_attributes(node: onnx.NodeProto) -> None:
    """Cast/SequenceEmpty targets and tensor attributes of a float type to
    f64; a Constant's value_float(s) to an f64 `value`."""
    for a in node.attribute:
        if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i in FLOATS:
            a.i = TensorProto.DOUBLE
        elif a.type == onnx.AttributeProto.TENSOR:
            a.t.CopyFrom(_widen_tensor(a.t))
    if node.op_type == "Constant" and node.attribute[0].name in ("value_float", "value_floats"):
        a = node.attribute[0]
        v = np.array(a.f if a.name == "value_float" else list(a.floats), np.float64)
        node.ClearField("attribute")
        node.attribute.append(helper.make_attribute("value", numpy_helper.from_array(v)))


def widened(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` computed in f64, each float tensor a node makes rounded to
    its ONNX type: the node's output V renamed `V__exact`, and
    `nem.fuzz.Round(to=type)` of it gives V."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    g = inferred.graph
    types = {
        v.name: v.type.tensor_type.elem_type
        for v in [*g.input, *g.value_info, *g.output]
        if v.type.HasField("tensor_type")
    }
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    graph = out.graph
    for v in [*graph.input, *graph.output]:
        _widen_type(v.type)
    del graph.value_info[:]
    for i, t in enumerate(graph.initializer):
        graph.initializer[i].CopyFrom(_widen_tensor(t))
    nodes = []
    for node in graph.node:
        _widen_attributes(node)
        nodes.append(node)
        for k, name in enumerate(node.output):
            if name and types.get(name) in FLOATS:
                node.output[k] = f"{name}__exact"
                nodes.append(
                    helper.make_node(
                        "Round",
                        [node.output[k]],
                        [name],
                        domain=DOMAIN,
                        to=types[name],
                        exact=int(node.op_type in EXACT_OPS),
                    )
                )
    del graph.node[:]
    graph.node.extend(nodes)
    return out


def exact_reference(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray], runs: int = RUNS
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(exact, spread) by output name (module docstring): `exact` in the
    outputs' ONNX element types, `spread` in f64."""
    from onnx.reference import ReferenceEvaluator

    sess = ReferenceEvaluator(widened(model), new_ops=[Round])
    feeds = {k: np.asarray(v, np.float64) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    names = [o.name for o in model.graph.output]
    dtypes = {
        o.name: helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)
        for o in model.graph.output
    }

    def run() -> dict[str, np.ndarray]:
        return {n: np.asarray(v) for n, v in zip(names, sess.run(names, feeds))}

    try:
        Round.noise = None
        exact = {n: v.astype(dtypes[n]) for n, v in run().items()}
        spread = {n: np.zeros(v.shape) for n, v in exact.items()}
        Round.noise = np.random.default_rng(0)
        for _ in range(runs):
            for n, v in run().items():
                moved = np.abs(v.astype(dtypes[n]).astype(np.float64) - exact[n])
                spread[n] = np.maximum(spread[n], np.nan_to_num(moved))
    finally:
        Round.noise = None
    return exact, spread
