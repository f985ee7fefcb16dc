"""What differential testing of `nem-compile` against onnxruntime found
(issue 31), each with its minimized model: compiled (verified), run under
random schedules, compared with onnxruntime (`compile_runs.run_api`).
Silent wrong results; models the affine route rejected while the transform
route compiled them; internal errors of the importer.

Every miscompile was race-free and verified clean, and wrong.  Their cause:
upstream's `affine-data-copy-generate` emits a contiguous DMA (or a stride
at the wrong level) for a region that is not contiguous when a unit
dimension of the memref lies between a partial dimension and a longer one
(D-COMPILE-DMA-STRIDES, `nem.compile.dma_strides`; docs/upstream-reports.md).

`NEM_FINDINGS=full` also runs each model on every shipped device, on both
routes, and ONNX's `test_MaxPool2d_stride_padding_dilation` (about 30 s).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from compile_runs import run_api  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx import helper as oh  # noqa: E402

from nem.compile import compile_mlir, dma_strides  # noqa: E402
from nem.compile.check import onnxruntime_run  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402
from nem.runtime.api import NemInterpreter  # noqa: E402


def transpose_slices_concat_mean() -> onnx.ModelProto:
    """The issue's model, written from its description: Transpose -> two
    Slices -> Concat -> ReduceMean, [1,4,10,12] -> [1,6,8] (f32).  Wrong by
    up to 1.5 on npm_pro_x1 (affine route, 4 engines): the engine split of
    the output-layout copy makes parts whose DMA stages [1,4,1,2] of
    [1,4,1,6] as 8 contiguous elements."""
    ints = TensorProto.INT64
    inits = [
        oh.make_tensor(n, ints, [len(v)], v)
        for n, v in [
            ("axes", [1, 3]),
            ("s1", [1, 4]),
            ("e1", [7, 8]),
            ("s2", [0, 3]),
            ("e2", [6, 7]),
            ("r", [3]),
        ]
    ]
    nodes = [
        oh.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
        oh.make_node("Slice", ["t", "s1", "e1", "axes"], ["p1"]),
        oh.make_node("Slice", ["t", "s2", "e2", "axes"], ["p2"]),
        oh.make_node("Concat", ["p1", "p2"], ["c"], axis=2),
        oh.make_node("ReduceMean", ["c", "r"], ["y"], keepdims=0),
    ]
    graph = oh.make_graph(
        nodes,
        "issue31",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10, 12])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8])],
        inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    return model


CASES = [
    # (model, device, what went wrong on main 28188ef)
    pytest.param(transpose_slices_concat_mean, "npm_pro_x1", id="transpose-slices-concat-mean"),
    # a 4-way split of a transposing copy: part k stages x[:, 0, 0, k] as 5
    # contiguous elements (stride 3 dropped): 12 of 15 wrong
    pytest.param(
        lambda: samples.single_op("Transpose", {"x": (5, 1, 1, 3)}, "f32", perm=[1, 3, 2, 0]),
        "npm_pro_x1",
        id="transpose-4d-split",
    ),
    # NHWC [3,1,12,12], each strided window's rows [3,1,11,12] staged as 396
    # contiguous elements: 120 of 180 wrong
    pytest.param(
        lambda: samples.single_op(
            "AveragePool", {"x": (3, 12, 1, 12)}, "f32", kernel_shape=[1, 3], strides=[2, 2]
        ),
        "npm_lite",
        id="averagepool-strided",
    ),
    pytest.param(
        lambda: samples.single_op(
            "MaxPool", {"x": (2, 12, 1, 12)}, "f32", kernel_shape=[1, 3], strides=[1, 2]
        ),
        "npm_lite",
        id="maxpool-strided",
    ),
    # [1,3,1,1] of [1,3,1,2] as 3 contiguous f16: both outputs wrong
    pytest.param(
        lambda: samples.single_op("AveragePool", {"x": (1, 2, 3, 1)}, "f16", kernel_shape=[3, 1]),
        "npm_pro_x1",
        id="averagepool-f16-column",
    ),
]


FULL = os.environ.get("NEM_FINDINGS") == "full"
DEVICES = ("npm_lite", "npm_mid", "npm_pro", "npm_pro_x1")


@pytest.mark.parametrize("make,device", CASES)
def test_affine_route_stages_strided_regions_exactly(make, device):
    run_api(make(), device=device, route="affine")


@pytest.mark.skipif(not FULL, reason="NEM_FINDINGS=full")
@pytest.mark.parametrize("make", [c.values[0] for c in CASES], ids=[c.id for c in CASES])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("route", ["affine", "transform"])
def test_every_device_and_route(make, device, route):
    run_api(make(), device=device, route=route)


# --------------------------------------------------------------------------
# what the affine route rejected and the transform route compiled


def transpose_mean() -> onnx.ModelProto:
    """Transpose -> ReduceMean, [1,4,10,12] -> [1,12,4]: 'this strided DMA
    of a partial tile cannot be narrowed' on npm_pro_x1 (the DMA stride
    upstream dropped made the rows run past a dimension's end)."""
    nodes = [
        oh.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
        oh.make_node("ReduceMean", ["t", "r"], ["y"], keepdims=0),
    ]
    graph = oh.make_graph(
        nodes,
        "transpose_mean",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10, 12])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12, 4])],
        [oh.make_tensor("r", TensorProto.INT64, [1], [3])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    return model


def dilated_maxpool() -> onnx.ModelProto:
    """A dilated, strided, padded MaxPool (ONNX's MaxPool2d_stride_padding_
    dilation, smaller): with kernel tiles of 3 rows the last one is partial,
    and its DMA's box (9 rows from row 4*oh + 12) runs past the padded
    input's end for the last output row only; the rows inside at every oh
    are all the partial tile reads (D-LOW-PEEL)."""
    return samples.single_op(
        "MaxPool",
        {"x": (1, 1, 40, 40)},
        "f32",
        kernel_shape=[5, 5],
        dilations=[4, 4],
        strides=[4, 4],
        pads=[2, 2, 2, 2],
    )


def test_transpose_mean_on_the_affine_route():
    run_api(transpose_mean(), route="affine")


def test_dilated_maxpool_partial_kernel_tile_on_the_affine_route():
    run_api(dilated_maxpool(), device="npm_lite", route="affine", tile_sizes=[1, 1, 1, 1, 3])


@pytest.mark.skipif(not FULL, reason="NEM_FINDINGS=full")
def test_onnx_backend_maxpool_stride_padding_dilation():
    data = Path(onnx.__file__).parent / "backend/test/data/pytorch-converted"
    model = onnx.load(str(data / "test_MaxPool2d_stride_padding_dilation/model.onnx"))
    for route in ("affine", "transform"):
        run_api(model, route=route)


# --------------------------------------------------------------------------
# the rule, and upstream's defect


def _box_offsets(shape, start, box) -> list[int]:
    """Row-major element offsets of `box` at `start` in a memref of `shape`."""
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    offs = [sum(s * st_ for s, st_ in zip(start, strides))]
    for d in range(len(shape)):
        offs = [o + i * strides[d] for o in offs for i in range(box[d])]
    return offs


def _dma_offsets(first: int, n: int, level: tuple[int, int] | None) -> list[int]:
    """The slow-side offsets `affine.dma_start` of `n` elements touches."""
    if level is None:
        return list(range(first, first + n))
    stride, per = level
    return [first + r * stride + c for r in range(n // per) for c in range(per)]


@st.composite
def _regions(draw):
    rank = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    box = [draw(st.integers(1, n)) for n in shape]
    start = [draw(st.integers(0, n - b)) for n, b in zip(shape, box)]
    return shape, start, box


@settings(deadline=None)  # a brute-force check: tens of ms per box, over 200 under load
@given(_regions())
def test_stride_levels_describe_the_box(region):
    """No level: the box is one contiguous run; one level: the strided DMA
    touches exactly the box; more: no single-level DMA does."""
    shape, start, box = region
    want = _box_offsets(shape, start, box)
    levels = dma_strides.stride_levels(shape, box)
    n = math.prod(box)
    if len(levels) <= 1:
        assert _dma_offsets(want[0], n, levels[0] if levels else None) == want
    else:
        assert all(
            _dma_offsets(want[0], n, (s, p)) != want
            for p in range(1, n + 1)
            if n % p == 0
            for s in range(p, math.prod(shape) + 1)
        )


UPSTREAM = """
func.func @f(%a: memref<3x1x12x12xf32>, %b: memref<3x1x11x12xf32>) {
  affine.for %i = 0 to 3 {
    affine.for %j = 0 to 11 {
      affine.for %k = 0 to 12 {
        %v = affine.load %a[%i, 0, %j, %k] : memref<3x1x12x12xf32>
        affine.store %v, %b[%i, 0, %j, %k] : memref<3x1x11x12xf32>
      }
    }
  }
  return
}
"""


def test_upstream_copy_generation_drops_the_stride_and_repair_adds_it():
    """The defect as docs/upstream-reports.md reports it: upstream stages
    [3,1,11,12] of memref<3x1x12x12> as 396 contiguous elements (when this
    fails, upstream is fixed and the repair may go); `repair` gives it
    rows of 132 every 144."""
    from mlir import ir
    from mlir.passmanager import PassManager

    from nem.compile.nest_ir import const_index

    with ir.Context():
        module = ir.Module.parse(UPSTREAM)
        PassManager.parse(
            "builtin.module(func.func(affine-data-copy-generate{generate-dma "
            "fast-mem-space=2 fast-mem-capacity=100}))"
        ).run(module.operation)
        fn = module.body.operations[0].operation
        arg = fn.regions[0].blocks[0].arguments[0]

        def read_counts() -> list[list[int | None]]:
            """Per DMA from %a: its element count, then its stride operands
            (after src, 4 indices, dst, 4 indices, tag, 1 index)."""
            found = []

            def visit(op):
                if op.name == "affine.dma_start" and op.operands[0] == arg:
                    found.append([const_index(v) for v in list(op.operands)[12:]])
                return ir.WalkResult.ADVANCE

            fn.walk(visit)
            return found

        assert read_counts() == [[396]]
        assert dma_strides.repair(fn) == 1
        assert read_counts() == [[396, 144, 132]]
        assert dma_strides.repair(fn) == 0  # exact now: nothing left to change


TWO_LEVELS = """
#in = affine_map<(i, j, k) -> (i, 0, j, k)>
#out = affine_map<(i, j, k) -> (i, j, k)>
func.func @main(%x: tensor<3x1x8x96xf32>) -> tensor<3x8x96xf32> {
  %e = tensor.empty() : tensor<3x8x96xf32>
  %r = linalg.generic {indexing_maps = [#in, #out],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<3x1x8x96xf32>) outs(%e : tensor<3x8x96xf32>) {
    ^bb0(%a: f32, %o: f32):
      %n = arith.negf %a : f32
      linalg.yield %n : f32
  } -> tensor<3x8x96xf32>
  return %r : tensor<3x8x96xf32>
}
"""


@pytest.mark.parametrize("pipeline", [True, False])
def test_region_needing_two_stride_levels_is_copied_whole(pipeline):
    """Tiles [3,2,48] stage [3,1,2,48] of memref<3x1x8x96>: two stride
    levels (96 and 768), one more than `affine.dma_start` has; upstream gave
    it rows of 48 every 96 (the wrong rows).  The copy nest that replaces it
    is one transfer of the whole box."""
    device = "npm_lite"
    result = compile_mlir(
        TWO_LEVELS, device=device, route="affine", tile_sizes=[3, 2, 48], pipeline=pipeline
    )
    assert "shape=[3, 1, 2, 48], strides=[768, 768, 96, 1]" in result.nem
    x = np.random.default_rng(0).uniform(-1, 1, (3, 1, 8, 96)).astype(np.float32)
    it = NemInterpreter(device=device)
    it.load_string(result.nem, file="m.nem")
    it.write_tensor(result.interface.inputs[0][0], x)
    run = it.run()
    assert run.status == "completed" and run.race_count == 0, run.error
    got = it.read_tensor(result.interface.outputs[0][0], (3, 8, 96), np.float32)
    np.testing.assert_array_equal(got, -x[:, 0])


# --------------------------------------------------------------------------
# internal errors of the importer


@pytest.mark.parametrize(
    "shape,axis,dtype",
    [
        ((3, 5), -1, "f32"),  # was: 'output has shape [15, 1] but ONNX infers [3, 5]'
        ((2, 1, 1, 1), -4, "f16"),  # was: [2, 1] where ONNX infers [1, 2]
        ((1, 1, 1, 2), 4, "f32"),  # axis = rank: 'reassociation indices must not be empty'
        ((2, 3, 4), 0, "f32"),
    ],
)
def test_flatten_axis_at_the_ends_of_its_range(shape, axis, dtype):
    """Flatten's axis lies in [-r, r] (not [-r, r) as other ops'): -1 is
    r - 1, and r flattens everything into rows of one."""
    run_api(samples.single_op("Flatten", {"x": shape}, dtype, axis=axis))


@pytest.mark.parametrize(
    "shape,axes,dtype",
    [
        ((), [0], "f16"),  # was: 'tensor.collapse_shape' ... reassociation must not be empty
        ((), [-1, 0], "f32"),
        ((1,), [0], "f32"),
    ],
)
@pytest.mark.parametrize("route", ["affine", "transform"])
def test_unsqueeze_of_a_scalar(shape, axes, dtype, route):
    """Unsqueeze of a 0-d value gives size-1 dimensions: an expand with no
    reassociation groups (the importer collapsed the scalar to 1-D with an
    empty group, an MLIRError traceback; graph fuzz campaign seed 3131)."""
    run_api(
        samples.single_op("Unsqueeze", {"x": shape}, dtype, {"axes": np.asarray(axes, np.int64)}),
        route=route,
    )


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_same_with_a_stride_over_the_kernel(auto_pad):
    """ConvTranspose(kernel [1,4], strides [3,3], auto_pad SAME) of [1,2,4,3]:
    on H, in * stride (12) is more than the convolution gives (10), and ONNX
    and onnxruntime take the negative padding as 0 (H = 10); the importer
    refused it ('output_shape ... is larger than the convolution gives';
    graph fuzz campaign seed 3232)."""
    w = np.random.default_rng(0).standard_normal((2, 3, 1, 4)).astype(np.float32)
    run_api(
        samples.single_op(
            "ConvTranspose",
            {"x": (1, 2, 4, 3)},
            "f32",
            {"w": w},
            kernel_shape=[1, 4],
            strides=[3, 3],
            auto_pad=auto_pad,
        )
    )


def _compiles_in_a_subprocess(model: onnx.ModelProto, tmp_path: Path) -> None:
    """`nem-compile` on `model` in a child process: an upstream assertion or
    a segfault fails the test, not the session."""
    import subprocess
    import sys

    onnx.save(model, tmp_path / "m.onnx")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nem.cli.nem_compile",
            str(tmp_path / "m.onnx"),
            "--device",
            "npm_lite",
            "-o",
            str(tmp_path / "m.nem"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr


def test_matmul_of_a_4d_activation_by_a_vector(tmp_path):
    """[1,1,2,3] @ [3]: the importer's reshape had an empty reassociation group
    (as Flatten axis = rank) and upstream aborted the process (SIGABRT,
    finding F9)."""
    model = samples.single_op(
        "MatMul", {"x": (1, 1, 2, 3)}, "f32", {"w": np.linspace(-1, 1, 3, dtype=np.float32)}
    )
    _compiles_in_a_subprocess(model, tmp_path)
    run_api(model, device="npm_lite")


@pytest.mark.parametrize(
    "op,shape,attrs,message",
    [
        (
            "MaxPool",
            (1, 1, 1, 6),
            {"kernel_shape": [1, 1], "strides": [1, 2], "ceil_mode": 1},
            r"with ceil_mode=1 ONNX's shape inference gives dimension 3 of '\w+' 4 outputs, where "
            r"the operator \(and onnxruntime\) gives 3: a window that starts past the input is "
            r"dropped \(D-COMPILE-POOL-EDGE\)",
        ),
        # was 'internal: output has shape [1, 1, 1] but ONNX infers [1, 1, 2]'
        (
            "AveragePool",
            (1, 1, 2),
            {"kernel_shape": [1], "strides": [2], "ceil_mode": 1, "auto_pad": "SAME_UPPER"},
            r"with ceil_mode=1 ONNX's shape inference gives dimension 2 of '\w+' 2 outputs, where "
            r"the operator \(and onnxruntime\) gives 1: under auto_pad SAME it gives "
            r"ceil\(in / stride\) \(D-COMPILE-POOL-EDGE\)",
        ),
        # onnxruntime: other windows (max of x0, x2 where the operator takes x1)
        (
            "MaxPool",
            (1, 1, 3),
            {
                "kernel_shape": [3],
                "strides": [3],
                "dilations": [2],
                "ceil_mode": 1,
                "auto_pad": "SAME_LOWER",
            },
            r"MaxPool dilations \[2\] under auto_pad=SAME_LOWER: onnxruntime pads by the "
            r"undilated kernel",
        ),
        # onnxruntime: -3.4e38 in f32, -inf in f16 (the importer: -inf)
        (
            "MaxPool",
            (2, 2, 1),
            {"kernel_shape": [2], "dilations": [2], "pads": [1, 1]},
            r"MaxPool window 0 on spatial axis 0 reads only padding \(positions \[-1, 1\] of 1\)",
        ),
    ],
)
def test_pooling_disagreements_are_located_rejections(op, shape, attrs, message):
    """Where ONNX's shape inference, the operator's definition and
    onnxruntime disagree on a pooling (D-COMPILE-POOL-EDGE): a ceil_mode
    window that starts past the input (ONNX counts it; finding F10), a
    ceil_mode pooling under auto_pad SAME (ONNX rounds up over a padding
    taken as 0, the definition gives ceil(in / stride)), a dilated MaxPool
    under SAME (onnxruntime pads by the undilated kernel), a MaxPool window
    that reads only padding (no value defined): not a program to compile,
    and not an internal error either."""
    from nem.compile import CompileError, compile_onnx

    model = samples.single_op(op, {"x": shape}, "f32", **attrs)
    with pytest.raises(CompileError, match=r"node 0 .*not supported: " + message):
        compile_onnx(model, device="npm_lite")


@pytest.mark.parametrize(
    "kind,size,kernel,stride,pad",
    [
        (
            "MaxPool",
            1,
            2,
            3,
            0,
        ),  # was: 'output has shape [1, 1, 0, 0] but ONNX infers [1, 1, 1, 1]'
        ("AveragePool", 1, 2, 3, 0),
        ("MaxPool", 2, 4, 3, 0),
        ("AveragePool", 1, 4, 3, 1),
    ],
)
def test_pooling_window_longer_than_the_padded_input(kind, size, kernel, stride, pad):
    """ONNX sizes a pooling output with C's division: a window longer than
    the padded input (a negative span) still gives one output, over what it
    covers (finding F6); the importer floored the span's quotient."""
    run_api(
        samples.single_op(
            kind,
            {"x": (1, 2, size, size)},
            "f32",
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad] * 4,
        ),
        device="npm_lite",
    )


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("size,kernel,stride", [(3, 1, 3), (4, 1, 4), (9, 2, 5), (13, 2, 7)])
def test_average_pool_same_with_a_negative_padding(auto_pad, size, kernel, stride):
    """A stride above the window under auto_pad SAME makes the total padding
    negative (-2, -3, -2, -4 here): the pooling's definition and onnxruntime
    crop the input, split with C's division (D-COMPILE-SAME-NEG); the
    importer took it as 0, every output read from the wrong place (graph
    fuzz campaign seed 6161, m57)."""
    run_api(
        samples.single_op(
            "AveragePool",
            {"x": (1, 2, 3, size)},
            "f32",
            kernel_shape=[1, kernel],
            strides=[1, stride],
            auto_pad=auto_pad,
        )
    )


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize(
    "size,stride,agrees", [(3, 3, True), (5, 3, True), (11, 4, True), (8, 4, False), (10, 5, False)]
)
def test_conv_same_with_a_negative_padding(auto_pad, size, stride, agrees):
    """Conv (kernel 1) under auto_pad SAME with a stride above the window: a total
    padding of -1 or -2 is no padding, as in onnxruntime; from -3 on onnxruntime
    shifts the windows (8 elements, stride 4: it reads x[1], x[5] under
    SAME_UPPER), which ONNX does not define: a located refusal, not a silent
    disagreement (D-COMPILE-SAME-NEG; reviewer of session 5)."""
    from nem.compile import CompileError

    w = np.ones((1, 1, 1, 1), np.float32)
    model = samples.single_op(
        "Conv",
        {"x": (1, 1, 1, size)},
        "f32",
        {"w": w},
        kernel_shape=[1, 1],
        strides=[1, stride],
        auto_pad=auto_pad,
    )
    if agrees:
        run_api(model, device="npm_lite")
    else:
        with pytest.raises(
            CompileError,
            match=r"node 0 .*not supported: auto_pad=SAME_\w+ "
            r"with a stride of \d+ over \d+ elements on spatial axis 1 gives "
            r"a total padding of -\d",
        ):
            run_api(model, device="npm_lite")


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_max_pool_same_with_a_negative_padding(auto_pad):
    """MaxPool shares AveragePool's padding formula (onnxruntime refuses a
    negative one): a one-element window picks the element AveragePool's
    averages over, onnxruntime's AveragePool of the same model."""
    attrs = {"kernel_shape": [1, 1], "strides": [1, 5], "auto_pad": auto_pad}  # total -3
    avg = samples.single_op("AveragePool", {"x": (1, 2, 3, 9)}, "f32", **attrs)
    run_api(
        samples.single_op("MaxPool", {"x": (1, 2, 3, 9)}, "f32", **attrs),
        reference=lambda ins: onnxruntime_run(avg, ins),
    )


def test_upstream_clip_merge_crosses_bounds():
    """onnxscript's optimizer turns Relu(Clip(x, max=-1)) into Clip(x, 0, -1),
    -1 everywhere where the chain gives 0 (docs/upstream-reports.md, 12: this
    assertion fails once upstream is fixed); the importer keeps the
    unsimplified graph (prepare.crossed_clips) and the program gives 0."""
    import onnx_ir as ir
    from onnxscript.optimizer import optimize

    from nem.frontends.onnx.prepare import crossed_clips

    model = samples.single_op("Relu", {"x": (2, 3)}, "f32")
    clip = oh.make_node("Clip", ["x", "", "a"], ["c"])
    model.graph.node[0].input[0] = "c"
    model.graph.node.insert(0, clip)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(-1.0, np.float32), "a"))
    merged = ir.serde.serialize_model(optimize(ir.serde.deserialize_model(model)))
    assert crossed_clips(merged) == 1 and crossed_clips(model) == 0
    run_api(model)


@pytest.mark.parametrize("route", ["affine", "transform"])
def test_arithmetic_on_scalars(route):
    """sqrt(max(x) - min(x)) over all axes: the reductions end in 0-d
    tensors, and the arithmetic on them has no loops: the affine route
    rejected its scalar loads, the transform route its loop-less ops (a
    campaign finding on both routes, D-LOW-SCALAR)."""
    axes = oh.make_tensor("axes", TensorProto.INT64, [2], [0, 1])
    nodes = [
        oh.make_node("ReduceMax", ["x", "axes"], ["a"], keepdims=0),
        oh.make_node("ReduceMin", ["x", "axes"], ["b"], keepdims=0),
        oh.make_node("Sub", ["a", "b"], ["d"]),
        oh.make_node("Sqrt", ["d"], ["y"]),
    ]
    graph = oh.make_graph(
        nodes,
        "scalars",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [oh.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in ("y", "d")],
        [axes],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    for device in ("npm_pro_x1", "npm_lite"):
        run_api(model, device=device, route=route)


def test_one_value_as_two_outputs(tmp_path):
    """`r = Relu(x)` is an output and so is `y = Identity(r)`: the function
    returned one tensor twice and upstream's bufferization crashed (SIGSEGV,
    finding F4); each output gets its own buffer now."""
    x = oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    outs = [oh.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("y", "r")]
    nodes = [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Identity", ["r"], ["y"])]
    model = oh.make_model(
        oh.make_graph(nodes, "twice", [x], outs), opset_imports=[oh.make_opsetid("", 18)]
    )
    _compiles_in_a_subprocess(model, tmp_path)
    for route in ("transform", "affine"):
        run_api(model, device="npm_lite", route=route)


# --------------------------------------------------------------------------
# programs the runtime refused


@pytest.mark.parametrize("backend", ["interpreter", "native"])
def test_scalar_input_read_by_an_escape_hatch_kernel(backend, monkeypatch):
    """A 0-d model input (`Div(x f32[2,3], s f32[])`) on npm_lite, where the
    division is an escape-hatch kernel: its `memref<f32>` argument is bound
    to the one-element region the lowering gives the 0-d buffer (was
    'argument 1 of @kernel is memref<f32> but the task's operand 1 is
    f32[1]', then a 0-d view made 1-d by the interpreter's copy)."""
    monkeypatch.setenv("NEM_MLIR_KERNEL", backend)  # read by each interpreter made
    run_api(samples.single_op("Div", {"x": (2, 3), "s": ()}, "f32"), device="npm_lite")


def test_upstream_flatten_twice_reads_an_undefined_shape():
    """Two Flattens of one value (graph fuzz campaign seed 12012, m102,
    minimized from 10 nodes: a Flatten that is not a no-op, of a 1-D value,
    twice): onnxscript's `Flatten2Reshape` names both
    shape initializers `x/shape` and the graph keeps one, so the second
    Reshape reads `x/shape_1`, which nothing defines (docs/upstream-reports.md,
    16: this assertion fails once upstream is fixed).  The importer reported
    "Reshape to a shape computed at run time"; it now keeps the unsimplified
    graph (prepare.undefined_reads) and compiles it."""
    from nem.frontends.onnx.prepare import prepare, simplify, undefined_reads

    nodes = [
        oh.make_node("Flatten", ["x"], ["a"], axis=-1),
        oh.make_node("Flatten", ["x"], ["b"], axis=-1),
        oh.make_node("Sub", ["a", "b"], ["y"]),
        oh.make_node("Relu", ["a"], ["z"]),
    ]
    graph = oh.make_graph(
        nodes,
        "flatten_twice",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [13])],
        [oh.make_tensor_value_info(n, TensorProto.FLOAT, [1, 13]) for n in ("y", "z")],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    assert undefined_reads(simplify(model)) == ["x/shape_1"] and not undefined_reads(model)
    assert any("reading 'x/shape_1'" in n for n in prepare(model).notes)
    run_api(model)


def test_an_input_that_is_also_an_output_keeps_the_simplified_graph():
    """`y = Reshape(x, Concat(Shape(x), [1]))` with `x` also a graph output
    (an outside user's report, session 22): onnxscript's optimizer renames
    the input and adds an Identity, the interface changed, the simplification
    was discarded and the static shape chain refused as "a shape computed at
    run time".  The rename is undone (prepare.passthrough_restored): the
    graph is simplified, compiles, and both outputs are onnxruntime's."""
    from nem.frontends.onnx.prepare import prepare

    nodes = [
        oh.make_node("Shape", ["x"], ["s"]),
        oh.make_node("Concat", ["s", "one"], ["shp"], axis=0),
        oh.make_node("Reshape", ["x", "shp"], ["y"]),
    ]
    graph = oh.make_graph(
        nodes,
        "passthrough",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [
            oh.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 1]),
            oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
        ],
        [onnx.numpy_helper.from_array(np.array([1], np.int64), "one")],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    prepared = prepare(model)
    assert [n.op_type for n in prepared.model.graph.node] == ["Reshape"], prepared.notes
    assert [i.name for i in prepared.model.graph.input] == ["x"]
    assert [o.name for o in prepared.model.graph.output] == ["y", "x"]
    run_api(model)


def test_an_import_error_says_why_the_graph_was_not_simplified():
    """Crossed Clips make the importer keep the user's graph (prepare.crossed_clips);
    a Shape -> Concat -> Reshape chain the simplifier would have folded is
    then refused, and the error now says why the graph was not simplified
    (it said nothing: an outside user's report, session 22)."""
    from nem.frontends.onnx import OnnxImportError, import_onnx

    nodes = [
        oh.make_node("Clip", ["x", "", "a"], ["c"]),
        oh.make_node("Relu", ["c"], ["r"]),
        oh.make_node("Shape", ["r"], ["s"]),
        oh.make_node("Concat", ["s", "one"], ["shp"], axis=0),
        oh.make_node("Reshape", ["r", "shp"], ["y"], name="reshape"),
    ]
    graph = oh.make_graph(
        nodes,
        "crossed",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 1])],
        [
            onnx.numpy_helper.from_array(np.array(-1.0, np.float32), "a"),
            onnx.numpy_helper.from_array(np.array([1], np.int64), "one"),
        ],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError) as e:
        import_onnx(model, file="m.onnx")
    text = e.value.render()
    assert "(Reshape): error: not supported: Reshape to a shape 'shp' computed at run time" in text
    assert "\nnote: graph not simplified: onnxscript's optimizer merged Clips" in text
