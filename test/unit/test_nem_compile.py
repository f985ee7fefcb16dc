"""`nem-compile` end to end (issue 16, "How it will be checked"):

    nem-compile model.onnx --device D -o m.nem       (writes m.weights.npz)
    nem-opt m.nem -p nem-verify                        (clean: no error, no warning)
    nem-run m.nem --input m.weights.npz --input x=x.npy --output y=y.bin --schedules 2
    compare y with onnxruntime on the same input       (D-COMPILE-TOL)

for the sample models and single ops, f32 and f16.  Where the lowering
stops the case is `xfail(strict=True)` with the construct named; the
graph constructs the lowering takes (issue 12) have their lit tests under
test/lit/lowering (reshape.mlir, graph_blockers.test).  Also the tiling model; the
CLI's options and diagnostics are test_nem_compile_cli.py."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from compile_runs import DEVICE, MLIR_MATMUL, run_api, tool  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402
from nem.runtime.api import NemInterpreter  # noqa: E402


def end_to_end(
    model, tmp_path: Path, device: str = DEVICE, schedules: int = 2, extra: tuple[str, ...] = ()
) -> str:
    """The CLI chain of the module docstring; returns the .nem text."""
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    inputs = samples.random_inputs(model, seed=1)
    tool("nem-compile", str(path), "--device", device, "-o", str(tmp_path / "m.nem"), *extra)
    nem = tmp_path / "m.nem"
    r = tool("nem-opt", str(nem), "-p", "nem-verify", "-o", "/dev/null")
    assert r.stderr == "", r.stderr  # no warning either
    args = [str(nem), "--schedules", str(schedules)]
    if (tmp_path / "m.weights.npz").exists():
        args += ["--input", str(tmp_path / "m.weights.npz")]
    taken: set[str] = set()
    from nem.frontends.onnx.graph import nem_name

    for name, arr in inputs.items():
        np.save(tmp_path / f"{name}.npy", arr)
        args += ["--input", f"{nem_name(name, taken)}={tmp_path / (name + '.npy')}"]
    outs = [o.name for o in model.graph.output]
    for name in outs:
        args += ["--output", f"{nem_name(name, taken)}={tmp_path / (name + '.bin')}"]
    r = tool("nem-run", *args)
    assert "races: 0 distinct" in r.stdout and "identical across all schedules" in r.stdout
    want = onnxruntime_run(model, inputs)
    for name in outs:
        ref = want[name]
        got = (
            np.frombuffer((tmp_path / f"{name}.bin").read_bytes(), np.uint8)[: ref.nbytes]
            .view(ref.dtype)
            .reshape(ref.shape)
        )
        assert max_violation(got, ref) <= 1.0, (
            f"{name}: max diff {np.abs(got.astype(np.float64) - ref).max():.3g}"
        )
    return nem.read_text()


MODELS = [
    pytest.param(name, dtype, id=f"{name}-{dtype}")
    for name in ("mlp", "cnn", "resblock", "transformer")
    for dtype in ("f32", "f16")
]


@pytest.mark.parametrize("name,dtype", MODELS)
@pytest.mark.slow  # 278 s (8 cases)
def test_model_end_to_end(tmp_path, name, dtype):
    end_to_end(samples.MODELS[name](dtype), tmp_path)


@pytest.mark.slow  # 73 s
def test_mlp_tiled_pipelined_on_every_device(tmp_path):
    """Forced small tiles (partial last tiles, double buffering) on a
    4-engine device, a 1-engine device and npm_pro_x1: still exact."""
    # RULE: HAZ-03
    model = samples.mlp("f16")
    for device in ("npm_pro_x1", "npm_lite"):
        nem = end_to_end(model, tmp_path, device=device, extra=("--tile-sizes", "1"))
        assert "@max_in_flight(2)" in nem
    nem = end_to_end(samples.mlp("f32"), tmp_path, extra=("--tile-sizes", "1,48"))
    assert "@max_in_flight(2)" in nem


R = np.random.default_rng(7)


def _w(*shape):
    return R.uniform(-0.5, 0.5, shape).astype(np.float32)


X4 = {"x": (1, 4, 9, 9)}
OPS = [
    # (escape-hatch conv nests run interpreted: small shapes keep CI short)
    ("Conv", {"x": (1, 3, 5, 5)}, {"w": _w(4, 3, 3, 3), "b": _w(4)}, {"pads": [1, 1, 1, 1]}, None),
    ("Conv", X4, {"w": _w(6, 4, 3, 3)}, {"strides": [2, 2], "dilations": [1, 2]}, None),
    (
        "BatchNormalization",
        X4,
        {"s": _w(4) + 1, "b": _w(4), "m": _w(4), "v": np.abs(_w(4)) + 0.5},
        {},
        None,
    ),
    ("MaxPool", X4, {}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, None),
    ("AveragePool", X4, {}, {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, None),
    ("GlobalAveragePool", X4, {}, {}, None),
    ("LeakyRelu", {"x": (3, 7)}, {}, {"alpha": 0.2}, None),
    (
        "Clip",
        {"x": (3, 7)},
        {"lo": np.array(-0.3, np.float32), "hi": np.array(0.4, np.float32)},
        {},
        None,
    ),
    ("Sigmoid", {"x": (3, 7)}, {}, {}, None),
    ("Gelu", {"x": (3, 7)}, {}, {}, None),
    ("Add", {"x": (2, 3, 4), "y": (3, 1)}, {}, {}, None),
    ("Div", {"x": (4,), "y": (2, 3, 1)}, {}, {}, None),
    ("MatMul", {"x": (2, 5, 6), "y": (2, 6, 3)}, {}, {}, None),
    (
        "Gemm",
        {"x": (6, 5)},
        {"w": _w(6, 7), "c": _w(5, 1)},
        {"transA": 1, "alpha": 0.5, "beta": 2.0},
        None,
    ),
    ("Transpose", {"x": (2, 3, 4)}, {}, {"perm": [2, 0, 1]}, None),
    ("Concat", {"x": (2, 3, 4), "y": (2, 5, 4)}, {}, {"axis": 1}, None),
    ("Softmax", {"x": (2, 3, 5)}, {}, {"axis": 1}, None),
    ("LayerNormalization", {"x": (2, 3, 5)}, {"g": _w(5) + 1, "b": _w(5)}, {}, None),
    ("ReduceMean", {"x": (2, 3, 5)}, {"a": np.array([-1], np.int64)}, {}, None),
    ("ReduceMax", X4, {"a": np.array([1, 3], np.int64)}, {"keepdims": 0}, None),
    ("Pow", {"x": (2, 3, 4)}, {"c": np.array(2.0, np.float32)}, {}, None),
    # reshape views (D-LOW-RESHAPE): expand_shape / collapse_shape
    ("Conv", X4, {"w": _w(8, 2, 3, 3)}, {"group": 2}, None),
    ("Flatten", {"x": (2, 3, 4, 5)}, {}, {"axis": 2}, None),
    ("Reshape", {"x": (2, 3, 4)}, {"s": np.array([4, 6], np.int64)}, {}, None),
    ("MatMul", {"x": (6,), "y": (2, 6, 3)}, {}, {}, None),
]


def _op_param(case):
    op, ins, consts, attrs, xfail = case
    ident = "-".join(
        [
            op,
            *("x".join(map(str, s)) for s in ins.values()),
            *(f"{k}={v}" for k, v in attrs.items()),
        ]
    )
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(op, ins, consts, attrs, id=ident, marks=marks)


@pytest.mark.parametrize("op,ins,consts,attrs", [_op_param(c) for c in OPS])
@pytest.mark.slow  # 39 s (25 cases)
def test_single_op_end_to_end(op, ins, consts, attrs):
    """The Python API's chain for one op (f32): compile (verified), run
    under 2 random schedules, compare with onnxruntime."""
    model = samples.single_op(op, ins, "f32", consts, **attrs)
    run_api(model)


@pytest.mark.parametrize("op", ["Softmax", "LayerNormalization", "Gelu"])
def test_f16_ops_end_to_end(op):
    consts = {"g": (_w(5) + 1).astype(np.float16)} if op == "LayerNormalization" else {}
    run_api(samples.single_op(op, {"x": (2, 3, 5)}, "f16", consts))


# --------------------------------------------------------------------------
# tile sizes from L1


def test_tile_sizes_fit_l1_with_double_buffering():
    """A 256x512x512 f32 matmul (3 MB of operands) on npm_lite (512 KB L1):
    the chosen tile's footprint plus its output scratch fits half of L1."""
    from mlir import ir
    from mlir.passmanager import PassManager

    from nem.compile import nest_ir, tiling
    from nem.devices.device_lookup import find_device

    text = (
        MLIR_MATMUL.replace("16x32", "256x512")
        .replace("32x8", "512x512")
        .replace("16x8", "256x512")
    )
    device = find_device("npm_lite")
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        PassManager.parse(
            "builtin.module(one-shot-bufferize{bufferize-function-boundaries},"
            "func.func(convert-linalg-to-affine-loops))"
        ).run(m.operation)
        fn = next(o.operation for o in m.body.operations)
        bands = [nest_ir.analyze_band(r) for r in nest_ir.top_level_nests(fn)]
        mm = bands[-1]
        assert mm.extents == [256, 512, 512]
        budget = tiling.l1_budget(device, pipeline=True)
        assert budget == device.topology.l1_size_bytes // 2
        sizes = tiling.choose_tile_sizes(mm, budget)
        total, out = tiling.footprint(mm, sizes)
        assert (
            total + out
            <= budget
            < sum(tiling.footprint(mm, [s * 2 if i == 1 else s for i, s in enumerate(sizes)]))
        )
        # whole rows of A and C per tile: only the outer dimensions are split
        assert sizes[2] == 512
        assert tiling.footprint(mm, [1, 1, 1]) == (12, 4)


def _affine_bands(text: str):
    """(module, bands of the top-level nests) of linalg-on-tensors `text`
    bufferized and converted to affine loops, as the `tile` stage sees them."""
    from mlir import ir
    from mlir.passmanager import PassManager

    from nem.compile import nest_ir
    from nem.compile.pipeline import BUFFERIZE

    m = ir.Module.parse(text)
    PassManager.parse(f"builtin.module({BUFFERIZE},func.func(convert-linalg-to-affine-loops))").run(
        m.operation
    )
    fn = next(o.operation for o in m.body.operations)
    return m, fn, [nest_ir.analyze_band(r) for r in nest_ir.top_level_nests(fn)]


MLIR_CONV = """
func.func @cv(%x: tensor<1x10x10x3xf32>, %w: tensor<3x3x3x8xf32>) -> tensor<1x8x8x8xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x8x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %c = linalg.conv_2d_nhwc_hwcf ins(%x, %w : tensor<1x10x10x3xf32>, tensor<3x3x3x8xf32>)
                                outs(%f : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  return %c : tensor<1x8x8x8xf32>
}
"""


def test_footprint_sees_through_affine_apply():
    """-convert-linalg-to-affine-loops indexes a convolution's input through
    `affine.apply (oh + kh)`: the input box of one output row is kh rows
    (3 x 10 x 3 elements), not one element."""
    from mlir import ir

    from nem.compile import tiling

    with ir.Context(), ir.Location.unknown():
        module, _, bands = _affine_bands(MLIR_CONV)
        conv = bands[-1]
        assert conv.extents == [1, 8, 8, 8, 3, 3, 3]
        total, out = tiling.footprint(conv, [1, 1, 8, 8, 3, 3, 3])
        assert out == 8 * 8 * 4
        assert total == (3 * 10 * 3 + 3 * 3 * 3 * 8 + 8 * 8) * 4


def test_engine_split_choice():
    """D-COMPILE-ENGINES: a convolution splits along output rows (disjoint
    output bytes, the halo read twice); a matmul whose weight dominates
    splits along its reduction loop, with partial sums; one engine, no split."""
    from mlir import ir

    from nem.compile import engines

    with ir.Context(), ir.Location.unknown():
        start = engines.Clock.start(4)
        module, fn, bands = _affine_bands(MLIR_CONV)
        conv = bands[-1]
        split, _ = engines.choose_split(conv, 4, engines.preloaded_memrefs(fn), start)
        assert (split.loop, split.parts, split.chunk, split.partials) == (1, 4, 2, None)
        assert engines.choose_split(conv, 1, set(), start)[0] is None
        text = MLIR_MATMUL.replace("16x32", "4x256").replace("32x8", "256x8").replace("16x8", "4x8")
        module, fn, bands = _affine_bands(text)
        mm = bands[-1]
        split, _ = engines.choose_split(mm, 4, engines.preloaded_memrefs(fn), start)
        assert (split.loop, split.parts, split.chunk) == (2, 4, 64)
        assert split.partials is not None
        nests = engines.split_nest(mm.root, mm, split)
        # 3 zero fills, 4 parts, the sum; every part but the first on its own partial
        assert [k for _, k in nests] == [1, 2, 3, 0, 1, 2, 3, 0]
        text = str(fn)
        assert text.count("memref.alloc() : memref<4x8xf32>") == 3
        assert re.search(r"affine.for %arg\d+ = 192 to 256", text)


@pytest.mark.slow  # 6 s
def test_nests_spread_over_engines_and_overlap(tmp_path):
    """The default program puts one matmul's parts on all four engines of
    npm_pro_x1 and takes fewer timed cycles than `--no-pipeline --engines 1`,
    whose tasks all run on engine 0 (the figures: bench/bench_compile.py)."""
    model = samples.mlp("f32")
    inputs = samples.random_inputs(model, seed=0)
    cycles = {}
    for key, opts in (("spread", {}), ("serial", {"pipeline": False, "engines": 1})):
        r = compile_onnx(model, device=DEVICE, **opts)
        it = NemInterpreter(device=DEVICE)
        it.load_string(r.nem, file="m.nem")
        it.set_mode("timed")
        for name, arr in r.interface.weights.items():
            it.write_tensor(name, arr)
        it.write_tensor("x", inputs["x"])
        cycles[key] = it.run().cycle_count
        matmul_l1 = {
            line.split(" out region(")[1].split(",")[0]
            for line in r.nem.splitlines()
            if ".async in" in line and "matmul" in line
        }
        engines_used = {
            b
            for line in r.nem.splitlines()
            if line.startswith("buffer ")
            for b in ("L1[0]", "L1[1]", "L1[2]", "L1[3]")
            if b in line and line.split()[1] in matmul_l1
        }
        assert engines_used == (
            {"L1[0]", "L1[1]", "L1[2]", "L1[3]"} if key == "spread" else {"L1[0]"}
        )
    assert cycles["spread"] < cycles["serial"]


# --------------------------------------------------------------------------
# the transform-dialect route


def compute_levels(nem: str) -> set[str]:
    """The levels of the buffers the compute tasks of `nem` read and write."""
    level = dict(re.findall(r"^buffer (\w+) : (\S+)", nem, re.M))
    return {
        level[b]
        for line in nem.splitlines()
        if ".async in" in line
        for b in re.findall(r"region\((\w+),", line)
    }


@pytest.mark.parametrize(
    "name,sizes,dtype",
    [
        ("mlp", "3,48", "f32"),
        ("cnn", "1,2", "f32"),
        ("mlp", None, "f16"),
        ("cnn", None, "f16"),
        ("transformer", None, "f32"),
    ],
)
@pytest.mark.slow  # 80 s (5 cases)
def test_transform_route_end_to_end(tmp_path, name, sizes, dtype):
    """`--route transform`: tile_using_for with the given tiles (or the
    L1-derived ones), the non-dividing ones peeled (4 = 3 + 1 rows, 128 =
    2*48 + 32; the CNN's 4- and 2-row engine parts in 2-row tiles: with 4,
    since session 28 its last Gemm splits along its columns, 3 each, and
    nothing is left tiled), every tile's operands
    staged in L1 by structured.promote (memref.view of an L1 allocation,
    linalg.copy in and out, D-LOW-VIEW), lowered, verified clean, run, and
    compared with onnxruntime; the tiles are scf.for loops and every compute
    task reads and writes L1 only, spread over the engines' L1s
    (D-COMPILE-TRANSFORM-ENGINES); the MLP's row tiles are double-buffered
    (D-LOW-PIPE-BODY)."""
    model = samples.MODELS[name](dtype)
    extra = ("--route", "transform", "--save-temps") + (("--tile-sizes", sizes) if sizes else ())
    nem = end_to_end(model, tmp_path, extra=extra)
    tiled = (tmp_path / "m.tile.mlir").read_text()
    assert "affine.dma_start" not in tiled and ("scf.for" in tiled or not sizes)
    assert "memref.view" in tiled and "linalg.copy" in tiled
    levels = compute_levels(nem)
    assert levels <= {"L1[0]", "L1[1]", "L1[2]", "L1[3]"} and len(levels) >= 2
    if sizes == "3,48":
        assert re.search(r"^loop \w+ in \[0\.\.\d+\] @max_in_flight\(2\):", nem, re.M)


@pytest.mark.slow  # 7 s
def test_transform_route_raises_broadcasting_bodies():
    """On the transform route the elementwise generics with a broadcast
    operand (bias adds, layer norm's and softmax's bodies reading row
    statistics) stay generics after tiling and the lowering raises them as
    the affine route's nests (D-LOW-BCAST-OPERAND): the transformer block's
    conv/matmul/pool/eltwise FLOPs are all raised (93.8% when only
    identity-map generics were)."""
    r = compile_onnx(samples.transformer("f32"), device=DEVICE, route="transform")
    assert r.flops is not None and r.flops.category_share() == 1.0, r.flops.remark()
    assert any("(broadcast operand)" in m for m in r.remarks), r.remarks
    assert all("convert_to_loops" not in st.text for st in r.stages)


def run_timed(result, inputs: dict[str, np.ndarray]) -> tuple[int, dict[str, np.ndarray]]:
    """Timed cycles of `result`'s program on DEVICE, and its outputs (by ONNX name)."""
    iface = result.interface
    it = NemInterpreter(device=DEVICE)
    it.load_string(result.nem, file="m.nem")
    it.set_mode("timed")
    for name, arr in iface.weights.items():
        it.write_tensor(name, arr)
    for name, _, _ in iface.inputs:
        it.write_tensor(name, inputs[iface.onnx_names[name]])
    cycles = it.run().cycle_count
    return cycles, {iface.onnx_names[n]: it.read_tensor(n, s, d) for n, s, d in iface.outputs}


@pytest.mark.parametrize("group", [2, 4])
@pytest.mark.slow  # 4 s (2 cases)
def test_transform_route_raises_grouped_convolutions(group):
    """Grouped and depthwise ONNX Convs (`linalg.conv_2d_nhwgc_gfhwc`) are
    generalized before transform tiling, as the lowering's parser does for
    `.mlir` input (D-LOW-UPSTREAM's GENERALIZED_KNOWN), and raised as one
    `conv2d groups=G` per tile (D-LOW-GROUPCONV); they were escape-hatch
    tasks on this route ("no NEM opcode for this linalg op")."""
    model = samples.single_op(
        "Conv",
        {"x": (1, 4, 9, 9)},
        "f32",
        {"w": _w(8, 4 // group, 3, 3), "b": _w(8)},
        group=group,
        pads=[1, 1, 1, 1],
    )
    result = run_api(model, route="transform")
    assert result.flops is not None and result.flops.category_share() == 1.0, result.flops.remark()
    # over several engines the split may cut the output channels at group
    # boundaries, each part an ungrouped conv2d (D-COMPILE-ENGINES, session 28)
    one = compile_onnx(model, device="npm_pro_x1", route="transform", engines=1)
    assert f"groups={group}" in one.nem


@pytest.mark.slow  # 13 s
def test_transform_route_engines_and_pipelining_save_cycles():
    """The transform route's tile loops double-buffered take fewer timed
    cycles than `--no-pipeline` (`--tile-sizes 3,48`, one engine; measured
    2692 < 3099), and its default program (L1-derived tiles, ops split over
    the engines) fewer than `--engines 1` (measured 723 < 1538).  (With
    `--tile-sizes 3,48` and four engines the split matmuls' small tiles cost
    more than the split saves, on both routes: D-COMPILE-TRANSFORM-PARTIALS.)"""
    model = samples.mlp("f32")
    x = samples.random_inputs(model, seed=0)
    cycles = []
    for opts in (
        {"pipeline": True, "tile_sizes": (3, 48)},
        {"pipeline": False, "tile_sizes": (3, 48)},
        {},
    ):
        r = compile_onnx(model, device=DEVICE, route="transform", engines=1, **opts)
        if "tile_sizes" in opts:
            assert ("@max_in_flight(2)" in r.nem) == opts["pipeline"]
        cycles.append(run_timed(r, x)[0])
    spread = run_timed(compile_onnx(model, device=DEVICE, route="transform"), x)[0]
    assert cycles[0] < cycles[1] and spread < cycles[2], (cycles, spread)


@pytest.mark.slow  # 42 s
def test_transform_route_privatizes_reduction_splits(tmp_path):
    """D-COMPILE-TRANSFORM-PARTIALS: the MLP's matmuls, which the cost model
    splits along their reduction loop (the weight dominates), are split so
    on the transform route too: 4 parts of each of the hidden layers'
    matmuls, part k on engine k (L1[k]), parts 1..3 accumulating into zeroed
    buffers of their own, one sum after them; verified with no warning,
    race-free under random schedules, within D-COMPILE-TOL of onnxruntime,
    bit-identical to the affine route (the same partial sums added in the
    same order), and as fast in timed cycles (measured 576 on both routes
    since session 29 let the weights of a nest wait only for the weights
    charged to its engine before, 597 since session 28 split the sum of the
    partials over the engines, 723 before, D-COMPILE-ENGINES, vs 1005 for `--no-pipeline --engines 1`, whose weight copies made once
    split over the engine's DMAs since session 22, D-NEM-SPLIT-TRANSFERS
    `min-single`: 1538 before; 1364 before the reduction split)."""
    model = samples.mlp("f32")
    nem = end_to_end(model, tmp_path, extra=("--route", "transform", "--save-temps"), schedules=3)
    tiled = (tmp_path / "m.tile.mlir").read_text()
    for rows in (128, 64):  # the hidden layers' outputs: 3 partials each, zeroed on L1[1..3]
        assert tiled.count(f"memref.alloc() : memref<4x{rows}xf32>") == 3
        fills = re.findall(
            rf"linalg.fill ins\(%\w+ : f32\) outs\(%\w+ : memref<4x{rows}xf32, (\d)>", tiled
        )
        assert sorted(fills) == ["3", "4", "5"]
    level = dict(re.findall(r"^buffer (\w+) : (\S+)", nem, re.M))
    parts = [
        level[re.search(r" out region\((\w+),", ln).group(1)]
        for ln in nem.splitlines()
        if "matmul.async" in ln and "shape=[16, 128]" in ln
    ]
    assert sorted(parts) == ["L1[0]", "L1[1]", "L1[2]", "L1[3]"]
    x = samples.random_inputs(model, seed=0)
    affine = run_timed(compile_onnx(model, device=DEVICE), x)
    transform = run_timed(compile_onnx(model, device=DEVICE, route="transform"), x)
    serial = run_timed(
        compile_onnx(model, device=DEVICE, route="transform", pipeline=False, engines=1), x
    )
    assert np.array_equal(transform[1]["y"], affine[1]["y"])
    assert transform[0] <= 1.05 * affine[0] and serial[0] >= 1.7 * transform[0], (
        transform[0],
        affine[0],
        serial[0],
    )


def test_transform_recipe_in_docs():
    """docs/compile.md shows the recipe the route builds for the MLP's first
    matmul under `--tile-sizes 3,48`."""
    from nem.compile.transform import Plan, script

    doc = (Path(__file__).resolve().parents[2] / "docs" / "compile.md").read_text()
    recipe = re.search(r"```mlir\n(module attributes \{transform.*?)```", doc, re.S)
    assert recipe is not None
    assert recipe.group(1).strip() == script(
        [(1, Plan([4, 128, 64], [3, 48, 64], [0]), False, (0, 1, 2))]
    )
    split = script(
        [(1, Plan([4, 128, 64], [3, 48, 64], [0, 1], split_dim=1, chunk=64), False, (0, 1, 2))]
    )
    assert "transform.structured.split %op1 after 64 {dimension = 1}" in split
    assert "memory_space = 3 : i64" in split
    from nem.compile.transform import split_script

    only = split_script(
        [(1, Plan([4, 128, 64], [3, 48, 64], [0, 1], split_dim=2, chunk=32, partials=True))]
    )
    assert "transform.structured.split %op1 after 32 {dimension = 2}" in only
    assert "tile_using_for" not in only and "promote" not in only


@pytest.mark.slow  # 44 s
def test_flop_share_counts_escaped_nests():
    """nem.compile.flops: the MLP is all raised (two matmuls' and the
    classifier's multiply-adds, bias adds, relus and the partial sums of the
    engine split); the CNN's convolutions are raised on both routes (affine:
    conv nests, D-LOW-WINDOW; transform: linalg.conv_2d_nhwc_hwcf), and on
    the affine route its average pooling too (D-LOW-SUMPOOL, D-LOW-SPLAT);
    the transformer's row sums are counted escaped, its erf GELU raised
    (`gelu approximate="none"`, D-LOW-GELU-ERF): eltwise all raised."""
    mlp = compile_onnx(samples.mlp("f32"), device=DEVICE)
    assert mlp.flops.escaped == 0 and mlp.flops.raised >= 2 * 4 * (64 * 128 + 128 * 64 + 64 * 10)
    assert "by FLOPs: 100.0%" in mlp.remarks[-1]
    cnn = compile_onnx(samples.cnn("f32"), device=DEVICE)
    conv = 2 * 16 * 16 * 8 * 3 * 3 * 3  # the first convolution's multiply-adds
    assert cnn.flops.escaped == 0 and cnn.flops.raised >= conv
    assert cnn.flops.by_category["pool"][1] == 0 and cnn.flops.by_category["pool"][0] > 0
    tr = compile_onnx(samples.transformer("f32"), device=DEVICE)
    assert tr.flops.escaped > 0 and tr.flops.by_category["reduction"][1] > 0
    assert tr.flops.by_category["eltwise"][1] == 0 and tr.flops.by_category["eltwise"][0] > 0
    cnn_t = compile_onnx(samples.cnn("f32"), device=DEVICE, route="transform")
    assert cnn_t.flops.share > 0.9 and cnn_t.flops.raised >= conv


@pytest.mark.slow  # 18 s
def test_matmul_of_a_transposed_view_reads_it_transposed(tmp_path):
    """A @ Transpose(B) (attention's Q.K^T) imports as one contraction that
    reads B [N, K] in place: the lowering raises it to NEM matmuls with
    trans_b = 1 and no transpose copy is made (issue 16: one transposing
    step less on the transformer's critical path); values match onnxruntime."""
    g = samples.GraphBuilder("f32", seed=7)
    kt = g.op("Transpose", ["k"], name="kt", perm=[0, 2, 1])
    y = g.op("MatMul", ["q", kt], name="s")
    model = g.model("qk", {"q": (1, 4, 6), "k": (1, 5, 6)}, {"y": y})
    nem = end_to_end(model, tmp_path, extra=("--route", "affine"))
    matmuls = [ln for ln in nem.splitlines() if "matmul.async" in ln]
    assert matmuls and all("trans_b=1" in ln for ln in matmuls)
    remarks = compile_onnx(model, device=DEVICE, route="affine").remarks
    lowered = next(r for r in remarks if "lowered @" in r)  # after the import's notes
    assert "matmul" in lowered and not any("transpose" in r for r in remarks)
    # the transform route stages B's [N, K] tiles as they are and raises the
    # contraction (as conv2d + add): no transposing nest either
    remarks = compile_onnx(model, device=DEVICE).remarks
    lowered = next(r for r in remarks if "lowered @" in r)  # after the import's notes
    assert (
        "conv2d + add (accumulation)" in lowered
        and "fell back to compute: none" in lowered
        and not any("transpose" in r for r in remarks)
    )


@pytest.mark.parametrize("scale", [0.25, -0.5])
@pytest.mark.slow  # 61 s (2 cases)
def test_softmax_of_a_scaled_input(tmp_path, scale):
    """Softmax(Mul(x, c)): a positive scalar c is applied in the
    exponential's body, exp(c (x - max x)), and the product's own nest is
    gone; a negative c (max(c x) is not c max(x)) keeps the product.  Both
    match onnxruntime."""
    g = samples.GraphBuilder("f32", seed=8)
    s = g.op("Mul", ["x", g.init("c", np.array(scale, np.float32))], name="scaled")
    y = g.op("Softmax", [s], name="attn", axis=-1)
    model = g.model("scaled_softmax", {"x": (1, 4, 8)}, {"y": y})
    end_to_end(model, tmp_path)
    remarks = compile_onnx(model, device=DEVICE).remarks
    # the product's own nest, raised as a splat of c and a mul (D-LOW-SPLAT)
    scalar_mul = any(re.search(r"-> clamp \+ mul[,;]", r) for r in remarks)
    assert scalar_mul == (scale < 0)
