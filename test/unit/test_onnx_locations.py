"""Every op the importer builds names its ONNX node (D-COMPILE-LOC), and the
names survive bufferization and tiling on both routes: the later stages'
errors can say which node of the user's model they are about."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from nem.compile.lower import lower_and_verify  # noqa: E402
from nem.compile.pipeline import CompileOptions, Driver  # noqa: E402
from nem.frontends.onnx import import_onnx, samples  # noqa: E402
from nem.frontends.onnx.locations import describe, node_of, without_induction_locs  # noqa: E402


def _model():
    """Conv (a BatchNormalization folded in by the importer), Relu, a
    MaxPool, Flatten and Gemm: node 2 is the BN, which leaves no op."""
    g = samples.GraphBuilder("f32", seed=4)
    y = g.op("Conv", ["x", g.rand("w", (4, 3, 3, 3))], name="conv", pads=[1, 1, 1, 1])
    y = g.op("BatchNormalization", [y, g.rand("s", (4,)), g.rand("b", (4,)),
                                    g.rand("m", (4,)), g.init("v", np.ones(4))], name="bn")
    y = g.op("Relu", [y], name="relu")
    y = g.op("MaxPool", [y], name="pool", kernel_shape=[2, 2], strides=[2, 2])
    y = g.op("Flatten", [y], name="flat")
    y = g.op("Gemm", [y, g.rand("fw", (16, 5))], name="fc")
    return g.model("locs", {"x": (1, 3, 4, 4)}, {"out": y})


def _ops(op) -> Iterator:
    for region in op.regions:
        for block in region.blocks:
            for o in block.operations:
                yield o.operation
                yield from _ops(o.operation)


NODES = {"conv": (0, "Conv"), "relu": (2, "Relu"), "pool": (3, "MaxPool"),
         "flat": (4, "Flatten"), "fc": (5, "Gemm")}


def test_imported_ops_carry_their_node():
    im = import_onnx(_model(), file="m.onnx")
    with im.context:
        text = im.module.operation.get_asm(enable_debug_info=True, use_local_scope=True)
    body = [line for line in text.splitlines() if " = " in line or "linalg." in line]
    assert body and all(node_of(line) is not None for line in body if "loc(" in line
                        and "func.func" not in line)
    found = {node_of(line)[1] for line in body if node_of(line)}
    assert found == {(i, n, t) for n, (i, t) in NODES.items()}
    assert describe(next(line for line in body if '"pool"' in line)) == \
        "m.onnx: node 3 'pool' (MaxPool)"


@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.slow  # 5 s (2 cases)
def test_locations_survive_bufferize_and_tile(route):
    """After the tile stage every loop, load, store, DMA and allocation is
    located at its node (only canonicalize's hoisted constants and the
    transform route's generic yields are not); printed with debug info,
    the text is what the lowering parses (xDSL keeps the locations)."""
    im = import_onnx(_model(), file="m.onnx")
    with im.context:
        driver = Driver(CompileOptions(route=route))
        driver.upstream(im.module, im.func_name)
        text = im.module.operation.get_asm(enable_debug_info=True, use_local_scope=True)
        ops = [(o.name, node_of(str(o.location))) for o in _ops(im.module.operation)
               if o.name != "func.func"]
    unlocated = Counter(name for name, node in ops if node is None)
    assert set(unlocated) <= {"arith.constant", "linalg.yield", "func.return"}, unlocated
    per_node = Counter(node[1][1] for _, node in ops if node is not None)
    assert set(per_node) == set(NODES)
    conv_ops = {name for name, node in ops if node is not None and node[1] == (0, "conv", "Conv")}
    assert {"affine.for", "affine.load", "affine.store"} <= conv_ops or \
        {"linalg.conv_2d_nhwc_hwcf", "linalg.copy", "memref.view"} <= conv_ops, conv_ops
    assert re.search(r'loc\("conv"\("Conv"\("m.onnx":1:1\)\)\)', text)
    lower_and_verify(without_induction_locs(text), im.func_name, im.arg_names, "npm_pro_x1",
                     driver.memory_spaces(), "m.tile.mlir", driver.options)
