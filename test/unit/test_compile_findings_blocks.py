"""What outside users found on CNN blocks and transformer pieces written
from the README (session 62), each with its minimized model: a Clip of no
bounds after a Conv (an internal error of the tile stage), a Clip whose two
bounds are graph inputs (one named per compile), and a reduction over
whole axes warned with a window's reasons; and what an outside review
found (session 63): Mul(x, x) loading x twice; and an outside user's
(session 63): norms of other ranks sharing a scale, a model output named
`transfer`, a simplifier failure named by a repr.  Compiled, run and compared
with onnxruntime (`compile_runs.run_api`) where they compile."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from compile_runs import graph_model, run_api  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx import helper as oh  # noqa: E402

from nem.dialect.reserved_words import RESERVED  # noqa: E402


def _conv_then(op: str, bounds: list[float | None], dtype: int = TensorProto.FLOAT):
    """A 1x1 Conv of 4 channels over 5x5 pixels, then `op` of it with the
    constant extra inputs `bounds` ('' for None)."""
    np_dtype = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    w = np.random.default_rng(0).standard_normal((4, 4, 1, 1)).astype(np_dtype)
    inits = [onnx.numpy_helper.from_array(w, "w")]
    names = []
    for k, b in enumerate(bounds):
        names.append("" if b is None else f"b{k}")
        if b is not None:
            inits.append(onnx.numpy_helper.from_array(np.array(b, np_dtype), f"b{k}"))
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"]), oh.make_node(op, ["c", *names], ["y"])]
    return graph_model(nodes, [1, 4, 5, 5], inits, opset=17, elem=dtype)


@pytest.mark.parametrize(
    "op, bounds, dtype",
    [
        ("Clip", [], TensorProto.FLOAT),
        ("Clip", [-math.inf, math.inf], TensorProto.FLOAT),
        ("Clip", [], TensorProto.FLOAT16),
        ("Clip", [None, math.inf], TensorProto.FLOAT),
        ("Mean", [], TensorProto.FLOAT),
    ],
)
def test_an_identity_after_a_conv_compiles(op, bounds, dtype):
    """An outside user's models (session 62): a Clip of no bounds, or of
    -inf and +inf, after a Conv (MobileNet's ReLU6 written without bounds)
    was an internal error of the tile stage ('IndexError: list index out of
    range' in `l1_scratch._tree`): the importer made it a copy, fused into the
    conv as an epilogue of no scalar op.  The Clip is now the identity (as
    ONNX defines it); a Mean of one input, still such an epilogue, declares
    no scratch tile."""
    run_api(_conv_then(op, bounds, dtype))


def test_clip_bounds_computed_at_run_time_are_named_together():
    """Both bounds of a Clip given as graph inputs: the error named 'lo',
    and 'hi' only on the next compile (the same user)."""
    from nem.frontends.onnx import OnnxImportError, import_onnx

    graph = oh.make_graph(
        [oh.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        "clip",
        [
            oh.make_tensor_value_info(n, TensorProto.FLOAT, s)
            for n, s in (("x", [2, 3]), ("lo", []), ("hi", []))
        ],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError) as e:
        import_onnx(model, file="m.onnx")
    text = e.value.render()
    assert "error: not supported: Clip bounds 'lo' and 'hi' computed at run time" in text, text
    assert "--bind lo=VALUES" in text and "--bind hi=VALUES" in text, text


@pytest.mark.parametrize(
    "shape, axes", [([2, 3, 4, 5], [3]), ([2, 3, 4, 5], None), ([2, 3, 4, 5, 6], [4])]
)
def test_a_reduction_over_whole_axes_says_so(shape, axes):
    """A ReduceSum of a 4-D or 5-D tensor (an outside user, session 62)
    runs as an escape-hatch kernel, and the compile's warning gave the
    window matcher's first complaint ('more than two batch/channel
    dimensions around the window', 'a window of more than two spatial
    dimensions') for a sum that has no window; it gives D-LOW-SUMPOOL's."""
    from nem.compile import compile_onnx

    inits = [] if axes is None else [onnx.numpy_helper.from_array(np.array(axes, np.int64), "a")]
    node = oh.make_node("ReduceSum", ["x", *(["a"] if axes else [])], ["y"], keepdims=1)
    result = compile_onnx(graph_model([node], shape, inits, opset=18), device="npm_pro_x1")
    assert result.flops is not None and result.flops.reasons, result.flops
    why = result.flops.reasons[0][0]
    assert why.startswith("a sum over whole axes, not a sliding window"), why


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_an_input_read_twice_by_one_node_is_loaded_once(elem):
    """Mul(x, x) (an outside review, session 63: x's tiles were loaded
    twice, 2x its bytes in, 5,611 cycles for 1x64x56x56 where 3,639 load it
    once): the elementwise op has one operand for the two inputs; the right
    squares."""
    from compile_runs import dma_bytes

    model = graph_model([oh.make_node("Mul", ["x", "x"], ["y"])], [1, 8, 16, 16], elem=elem)
    result = run_api(model)
    width = 2 if elem == TensorProto.FLOAT16 else 4
    assert dma_bytes(result.nem) == 2 * 8 * 16 * 16 * width  # x in once, y out


@pytest.mark.parametrize("second", [[1, 3, 3, 5], [1, 3, 4, 5, 2]])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_scale_shared_by_norms_of_other_ranks_is_each_ones(second, reverse):
    """Two InstanceNormalizations sharing their scale and bias initializers,
    on inputs of ranks 3 and 4 or 5 (an outside user, session 63): the
    second read the first's scale reshaped to its rank, [C, 1], broadcast
    along H where H equals C, a wrong result (22.9 off), or an import error
    where it did not broadcast.  Each node gets the scale of its own rank."""
    rng = np.random.default_rng(0)
    inits = [
        onnx.numpy_helper.from_array(rng.uniform(0.5, 2, 3).astype(np.float32), "s"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, 3).astype(np.float32), "b"),
    ]
    nodes = [
        oh.make_node("InstanceNormalization", ["x", "s", "b"], ["y"]),
        oh.make_node("InstanceNormalization", ["z", "s", "b"], ["w"]),
    ]
    f32 = TensorProto.FLOAT
    graph = oh.make_graph(
        nodes[::-1] if reverse else nodes,
        "g",
        [
            oh.make_tensor_value_info("x", f32, [2, 3, 11]),
            oh.make_tensor_value_info("z", f32, second),
        ],
        [oh.make_tensor_value_info("y", f32, None), oh.make_tensor_value_info("w", f32, None)],
        inits,
    )
    run_api(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8))


@pytest.mark.parametrize("word", sorted(RESERVED))
def test_a_model_input_or_output_named_as_a_reserved_word_runs(word):
    """An output or input named `transfer` (an outside user, session 63):
    the front end suffixed only its own list of the `.nem` grammar's words,
    the lowering renamed the buffer `arg0`, and the interface (`-v`'s
    `run:` line, `nem-run --output transfer:...`) named one the program did
    not have.  One list now (`nem.dialect.reserved_words`): run by the
    interface's names, for every word."""
    f32 = TensorProto.FLOAT
    for x, y in ((word, "y"), ("x", word)):
        graph = oh.make_graph(
            [oh.make_node("Relu", [x], [y])],
            "g",
            [oh.make_tensor_value_info(x, f32, [2, 3])],
            [oh.make_tensor_value_info(y, f32, [2, 3])],
        )
        result = run_api(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
        for name, _, _ in (*result.interface.inputs, *result.interface.outputs):
            assert f"buffer {name} :" in result.nem


def test_a_simplifier_failure_names_its_cause(monkeypatch):
    """An outside user (session 63): onnxscript's optimizer failed on a
    model (a Dropout whose mask nobody reads, then a Split), the compile
    went on unsimplified, and the remark named the pass manager object's
    repr (`'<onnx_ir.passes.PassManager object at 0x7f...>' pass`) where
    the error it wraps says what failed.  The failure made here (the
    library's own may be fixed), as onnx_ir raises it: the remark gives the
    innermost error."""
    from nem.frontends.onnx import prepare

    def failing(model, arrays):
        try:
            raise ValueError("Initializer must have a name: Value('anonymous:1')")
        except ValueError as e:
            raise RuntimeError(
                "An error occurred when running the '<onnx_ir.passes.PassManager object "
                "at 0x7f00>' pass after the following passes: []"
            ) from e

    monkeypatch.setattr(prepare, "simplify", failing)
    result = run_api(graph_model([oh.make_node("Relu", ["x"], ["y"])], [2, 6]))
    (failed,) = [r for r in result.remarks if "optimizer failed" in r]
    assert "(ValueError: Initializer must have a name: Value('anonymous:1'))" in failed, failed
    assert "object at 0x" not in failed
