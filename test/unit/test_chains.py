"""Elementwise chains fused into one op (D-COMPILE-FUSE-CHAIN,
`nem.compile.chains`): an unfolded BatchNormalization (Mul, Add) and its
Relu before a convolution run as one op whose intermediates stay in L1.
Each minimized model is compiled with the chains fused and with
`fuse_chains=False`: the same bits under random schedules (race-free),
onnxruntime's values, fewer cycles and DMA bytes (the tests fail without
the fusion); a producer whose value has a second reader is not fused."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import dma_bytes, run_compiled, timed_cycles  # noqa: E402
from mlir import ir  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.chains import fuse_chains  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

OPTS = {"device": "npm_pro_x1"}
C, HW = 8, 12
N = C * HW * HW
"""Elements of the chain's tensors."""


def _model(second_reader: bool = False, dtype: type = np.float32):
    """x (1x8x12x12) -> Mul by a per-channel scale -> Add of a per-channel
    shift -> Relu -> 3x3 Conv (16 channels, padding 1, bias).  With
    `second_reader`, the Relu's result is added to the Mul's (a second
    reader of the Mul's value) before the Conv; `dtype`: every tensor's."""
    rng = np.random.default_rng(0)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def init(name, *shape):
        return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(dtype), name)

    inits = [init("s", C, 1, 1), init("t", C, 1, 1), init("w", 16, C, 3, 3), init("b", 16)]
    nodes = [
        helper.make_node("Mul", ["x", "s"], ["m"], name="mul"),
        helper.make_node("Add", ["m", "t"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
    ]
    last = "r"
    if second_reader:
        nodes.append(helper.make_node("Add", ["r", "m"], ["q"], name="residual"))
        last = "q"
    nodes.append(helper.make_node("Conv", [last, "w", "b"], ["y"], name="conv", pads=[1] * 4))
    return _graph(nodes, inits, elem)


def _graph(nodes, inits, elem):
    """The model of `nodes` from x (1 x C x HW x HW) to y, in element type `elem`."""
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", elem, [1, C, HW, HW])],
        [helper.make_tensor_value_info("y", elem, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _bodies(model) -> tuple[int, list[list[str]]]:
    """The bufferized program's elementwise generics after `fuse_chains`:
    (how many producers it fused, each generic's body ops)."""
    text = compile_onnx(model, **OPTS).stage("bufferize").text
    with ir.Context():
        module = ir.Module.parse(text)
        fn = module.body.operations[0].operation
        fused = fuse_chains(fn, epilogues=True)
        module.operation.verify()
        bodies = [
            [o.operation.name for o in op.regions[0].blocks[0].operations][:-1]
            for op in fn.regions[0].blocks[0].operations
            if op.operation.name == "linalg.generic"
        ]
    return fused, [b for b in bodies if b]  # (the bias broadcast yields its input only)


def _same_bits(model) -> tuple[int, int, int, int]:
    """Compile `model` with and without chain fusion: the same bits (fused:
    under random schedules), onnxruntime's values; returns the (fused,
    unfused) DMA bytes and timed cycles."""
    fused = compile_onnx(model, **OPTS)
    plain = compile_onnx(model, **OPTS, fuse_chains=False)
    got, _ = run_compiled(fused, model, "npm_pro_x1", 3)
    ref, _ = run_compiled(plain, model, "npm_pro_x1", 0)
    outs = fused.interface.outputs
    for (n, s, d), (m, t, e) in zip(outs, plain.interface.outputs):
        a, b = got.read_tensor(n, s, d), ref.read_tensor(m, t, e)
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))
    for name, s, d in outs:
        assert (
            max_violation(got.read_tensor(name, s, d), want[fused.interface.onnx_names[name]])
            <= 1.0
        )
    assert "mlir.kernel" not in fused.nem  # every fused op raised to NEM opcodes
    return (
        dma_bytes(fused.nem),
        dma_bytes(plain.nem),
        timed_cycles(fused.nem),
        timed_cycles(plain.nem),
    )


def test_bn_relu_chain_is_one_op():
    """Mul -> Add -> Relu: one generic whose body is the three ops."""
    fused, bodies = _bodies(_model())
    assert fused == 2
    assert bodies == [["arith.mulf", "arith.addf", "arith.maximumf"]], bodies


def test_bn_relu_chain_is_bit_identical_and_faster():
    """The two intermediates never go to DDR: each saves its write and its
    read-back (2 passes of the tensor each), and the run is shorter."""
    fused_bytes, plain_bytes, fused_cycles, plain_cycles = _same_bits(_model())
    assert plain_bytes - fused_bytes >= 4 * N * 4, (fused_bytes, plain_bytes)
    assert fused_cycles < plain_cycles, (fused_cycles, plain_cycles)


def test_an_f16_chain_is_one_op_as_an_f32_one():
    """An f16 Mul -> Add -> Relu is one op too (an outside review, session
    53: an f16 BatchNormalization and Relu stayed two passes over DDR where
    the f32 ones fused): the same ops in their own type, bit-identical to
    the unfused program, two bytes an element saved per pass."""
    model = _model(dtype=np.float16)
    fused, bodies = _bodies(model)
    assert fused == 2
    assert bodies == [["arith.mulf", "arith.addf", "arith.maximumf"]], bodies
    fused_bytes, plain_bytes, fused_cycles, plain_cycles = _same_bits(model)
    assert plain_bytes - fused_bytes >= 4 * N * 2, (fused_bytes, plain_bytes)
    assert fused_cycles < plain_cycles, (fused_cycles, plain_cycles)


def test_an_f16_batchnorm_computed_wide_chains_with_its_relu():
    """An f16 BatchNormalization is computed in f32 and rounded once
    (D-COMPILE-F16: `extf`, its f32 scale and shift, `truncf`); with the
    Relu after it, one op (DenseNet-121's f16 copy kept 62 of each as
    groups of their own, session 53), raised, bit-identical to the
    unfused program."""
    rng = np.random.default_rng(5)

    def init(name, *shape, lo=-1.0):
        return numpy_helper.from_array(rng.uniform(lo, 1, shape).astype(np.float16), name)

    inits = [init("g", C), init("b", C), init("m", C), init("v", C, lo=0.5)]
    inits += [init("w", 16, C, 3, 3), init("c", 16)]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["n"], name="bn"),
        helper.make_node("Relu", ["n"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w", "c"], ["y"], name="conv", pads=[1] * 4),
    ]
    model = _graph(nodes, inits, helper.np_dtype_to_tensor_dtype(np.dtype(np.float16)))
    fused, bodies = _bodies(model)
    assert fused == 1
    assert ["arith.extf", "arith.mulf", "arith.addf", "arith.truncf", "arith.maximumf"] in bodies
    fused_bytes, plain_bytes, *_ = _same_bits(model)
    assert plain_bytes - fused_bytes >= 2 * N * 2, (fused_bytes, plain_bytes)


def test_a_value_with_a_second_reader_ends_no_chain_through_it():
    """The Mul's value is read by the Add and by the residual Add: it is
    written whole, so the Mul stays an op of its own; Add -> Relu ->
    residual Add (which reads the Mul's value as an input) is one op."""
    fused, bodies = _bodies(_model(second_reader=True))
    assert fused == 2
    assert bodies == [["arith.mulf"], ["arith.addf", "arith.maximumf", "arith.addf"]], bodies
    fused_bytes, plain_bytes, *_ = _same_bits(_model(second_reader=True))
    assert plain_bytes - fused_bytes >= 4 * N * 4, (fused_bytes, plain_bytes)
