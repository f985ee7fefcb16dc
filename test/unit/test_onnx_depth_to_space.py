"""ONNX DepthToSpace (DCR and CRD) and SpaceToDepth (D-COMPILE-SHAPES):
converted as ONNX defines them, a reshape to six dimensions, one
transposing copy and a reshape back; compiled, run race-free under random
schedules and compared with onnxruntime, on a graph input and after a Conv
(whose output is NHWC in the program); the shapes ONNX does not define are
refused at the node."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import graph_model, run_api
from onnx import helper, numpy_helper

from nem.compile import CompileError, compile_onnx


def _conv_then(op: str, c: int = 8, **attrs):
    w = numpy_helper.from_array(
        (np.random.default_rng(3).standard_normal((c, 4, 3, 3)) * 0.2).astype(np.float32), "w"
    )
    return graph_model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node(op, ["c"], ["y"], name="shuffle", **attrs),
        ],
        (1, 4, 6, 6),
        [w],
    )


CASES = {
    "d2s DCR on the input": lambda: graph_model(
        [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)], (1, 8, 3, 5)
    ),
    "d2s CRD on the input": lambda: graph_model(
        [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")], (2, 8, 3, 5)
    ),
    "d2s DCR after a conv": lambda: _conv_then("DepthToSpace", blocksize=2),
    "d2s CRD after a conv, block 3": lambda: _conv_then(
        "DepthToSpace", c=18, blocksize=3, mode="CRD"
    ),
    "s2d on the input": lambda: graph_model(
        [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)], (1, 3, 4, 6)
    ),
    "s2d after a conv, block 3": lambda: _conv_then("SpaceToDepth", blocksize=3),
    "s2d then d2s DCR": lambda: graph_model(
        [
            helper.make_node("SpaceToDepth", ["x"], ["s"], blocksize=2),
            helper.make_node("Relu", ["s"], ["r"]),
            helper.make_node("DepthToSpace", ["r"], ["y"], blocksize=2),
        ],
        (1, 2, 4, 4),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_block_shuffles_match_onnxruntime(case):
    run_api(CASES[case]())


@pytest.mark.parametrize("mode", ["CRD", "DCR"])
def test_space_to_depth_modes_match_onnx_reference(mode):
    """SpaceToDepth's `mode` (opset 26): CRD puts the block after the
    channels. It was read as DCR (a silent miscompile onnx's node case
    test_spacetodepth_crd_mode_example found, session 28); onnx's reference
    evaluator is the oracle of the newest opset."""
    from onnx.defs import get_schema
    from onnx.reference import ReferenceEvaluator

    opset = get_schema("SpaceToDepth").since_version
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode=mode)
    model = graph_model([node], (1, 3, 4, 6), opset=opset)
    run_api(model, reference=lambda ins: dict(zip(["y"], ReferenceEvaluator(model).run(None, ins))))


@pytest.mark.parametrize(
    ("op", "shape", "attrs", "why"),
    [
        ("DepthToSpace", (1, 6, 2, 2), {"blocksize": 2}, "not a multiple of blocksize² = 4"),
        ("SpaceToDepth", (1, 2, 5, 4), {"blocksize": 2}, "5x4: not a multiple of blocksize 2"),
    ],
)
def test_shapes_onnx_does_not_define_are_refused_at_the_node(op, shape, attrs, why):
    model = graph_model([helper.make_node(op, ["x"], ["y"], name="bad", **attrs)], shape)
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1")
    text = str(e.value)
    assert f"node 0 'bad' ({op})" in text and why in text, text
