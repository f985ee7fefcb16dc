"""Fusion in L1 (D-COMPILE-FUSE-L1, `nem.compile.fusion`): a convolution's
bias and its elementwise epilogues (Relu, Clip, residual Add) run on the
tile in L1.  Each minimized model is compiled fused and with `fuse=False`:
the outputs are the same bits under random schedules (race-free), match
onnxruntime, and the fused program moves fewer DMA bytes (the test fails
without the fusion); where the fusion is unsound (a split reduction) or an
intermediate has another reader, the program is still exact."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import (  # noqa: E402
    l1_needs,
    outputs_of,
    same_bits,
    timed_cycles,
    timed_tasks,
)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402

OPTS = {"device": "npm_pro_x1"}


def _model(
    tail: str,
    outputs: tuple[str, ...] = ("y",),
    c: int = 8,
    f: int = 16,
    hw: int = 12,
    group: int = 1,
    dtype: type = np.float32,
    bias: bool = True,
):
    """x (1 x c x hw x hw; 1x8x12x12) -> 3x3 Conv with bias (f = 16
    channels, padding 1) -> `tail`:
    "relu", "clip", "add_relu" (plus a 1x1 Conv of x with bias, added, then
    Relu: a residual block's end), "bn_relu" (Mul by a per-channel scale, Add
    of a per-channel shift, Relu: one elementwise op, D-COMPILE-FUSE-CHAIN,
    whose scale and shift are broadcast), "bn_clip" (a BatchNormalization,
    folded into the Conv by the importer, then Clip(0, 6): ReLU6), "grouped"
    (a 1x1 Conv with bias in 4 groups, reading the Conv's output through
    the view that splits its channels) or "none";
    `group` > 1: a grouped Conv (depthwise with `group` = c = f); `dtype`:
    every tensor's (float32 or float16); `bias`: False, the Convs have none."""
    rng = np.random.default_rng(0)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def init(name, *shape):
        return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(dtype), name)

    inits = [init("w", f, c // group, 3, 3), init("b", f)][: 2 if bias else 1]
    xwb = ["x", "w", "b"][: 3 if bias else 2]
    nodes = [helper.make_node("Conv", xwb, ["c"], name="conv", pads=[1] * 4, group=group)]
    if tail == "bn_clip":  # conv -> c0, BatchNormalization -> c, then the Clip
        inits += [init(n, f) for n in ("g", "beta", "mean")]
        inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, f).astype(dtype), "var"))
        nodes[0].output[0], tail = "c0", "clip"
        nodes.append(
            helper.make_node(
                "BatchNormalization", ["c0", "g", "beta", "mean", "var"], ["c"], name="bn"
            )
        )
    if tail == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
    elif tail == "clip":
        inits += [numpy_helper.from_array(np.array(v, dtype), n) for n, v in (("lo", 0), ("hi", 6))]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="clip"))
    elif tail == "add_relu":
        inits += [init("w2", f, c, 1, 1), init("b2", f)][: 2 if bias else 1]
        nodes += [
            helper.make_node("Conv", ["x", "w2", "b2"][: 3 if bias else 2], ["d"], name="down"),
            helper.make_node("Add", ["c", "d"], ["s"], name="add"),
            helper.make_node("Relu", ["s"], ["y"], name="relu"),
        ]
    elif tail == "grouped":  # a grouped 1x1 Conv with bias (4 groups) reads c
        inits += [init("w2", f, f // 4, 1, 1), init("b2", f)]
        nodes.append(helper.make_node("Conv", ["c", "w2", "b2"], ["y"], name="g4", group=4))
    elif tail == "bn_relu":  # an unfolded BatchNormalization: per-channel operands
        inits += [init("s", f, 1, 1), init("t", f, 1, 1)]
        nodes += [
            helper.make_node("Mul", ["c", "s"], ["m"], name="scale"),
            helper.make_node("Add", ["m", "t"], ["a"], name="shift"),
            helper.make_node("Relu", ["a"], ["y"], name="relu"),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["c"], ["y"], name="id"))
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", elem, [1, c, hw, hw])],
        [helper.make_tensor_value_info(o, elem, None) for o in outputs],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


N = 16 * 12 * 12
"""Elements of the convolution's output."""


@pytest.mark.parametrize(
    "tail, passes",
    # the output passes through DDR that fusing saves: the bias broadcast's
    # write and the read-back (each Conv); with a Relu or Clip the Conv's
    # write and the epilogue's read; with Add+Relu also the 1x1 Conv's (the
    # Add's write and the Relu's read are saved unfused too: there the Add
    # and the Relu are one op, D-COMPILE-FUSE-CHAIN); with a BatchNormalization
    # (one op with its Relu) as with a Relu
    [("relu", 4), ("clip", 4), ("add_relu", 2 + 4), ("bn_relu", 4), ("none", 2)],
)
def test_fused_conv_is_bit_identical_and_moves_less(tail, passes):
    """Bias prologue and the epilogues in L1: the output tile is never read
    back from DDR, an intermediate nothing else reads never written."""
    fused, plain = same_bits(_model(tail))
    assert plain - fused >= passes * N * 4, (fused, plain)


@pytest.mark.parametrize(
    "tail, passes, group",
    [("relu", 4, 1), ("add_relu", 2 + 4, 1), ("bn_relu", 4, 1), ("bn_clip", 4, 16)],
)
def test_an_f16_convolution_is_fused_as_an_f32_one(tail, passes, group):
    """A float16 group (one element type through the bias, the
    convolution and its epilogues) is fused as a float32 one: bit-identical
    to the unfused program under random schedules, its output passing
    through DDR as many times less, two bytes an element (an outside
    review, session 53: only float32 groups were fused, and every Relu of
    an f16 SqueezeNet ran as a pass of its own over DDR)."""
    c = 16 if group > 1 else 8
    model = _model(tail, c=c, group=group, dtype=np.float16)
    fused, plain = same_bits(model)
    assert plain - fused >= passes * N * 2, (fused, plain)


@pytest.mark.parametrize(
    "tail, group, dtype",
    [
        ("relu", 1, np.float32),
        ("add_relu", 1, np.float32),
        ("bn_relu", 1, np.float16),
        ("relu", 16, np.float32),
    ],
)
def test_a_conv_without_bias_is_fused_from_its_fill(tail, group, dtype):
    """A Conv without a bias starts from the fill of its output with zero
    as one with a bias starts from the bias broadcast: the fill runs on the
    tile in L1 and the epilogues after it (session 54, an outside review of
    session 53: a Conv without a bias fused nothing, each epilogue a pass
    of its own over DDR).  Bit-identical to the unfused program under
    random schedules (the same zero, then the same products in the same
    order); the output passes through DDR twice less (the convolution's
    write, the epilogue's read: unfused, the zero fill is forwarded into the
    convolution already, D-LOW-FILL-FORWARD)."""
    c = 16 if group > 1 else 8
    model = _model(tail, c=c, group=group, dtype=dtype, bias=False)
    assert all(len(n.input) == 2 for n in model.graph.node if n.op_type == "Conv")
    fused, plain = same_bits(model)
    assert plain - fused >= 2 * N * np.dtype(dtype).itemsize, (fused, plain)


def _after_convs(text: str) -> list[list[str]]:
    """The compute tasks (not `concat`, `transfer`) of a NEM program before
    its first `conv2d` and after each."""
    lines = text.splitlines()
    tasks = [line.split(" = ")[1].split(".")[0] for line in lines if ".async" in line]
    steps = " ".join(t for t in tasks if t not in ("concat", "transfer")).split("conv2d")
    return [s.split() for s in steps]


def test_conv_bn_relu_is_one_op_on_the_tile():
    """Conv -> BatchNormalization (a per-channel Mul and Add) -> Relu: the
    chain (one op, D-COMPILE-FUSE-CHAIN) is the convolution's epilogue, its
    scale and shift broadcast on the tile: each tile's convolution is
    followed by the mul, add and relu tasks on its L1 output, and the
    program takes fewer cycles than with the Conv apart (`fuse=False`)."""
    model = _model("bn_relu")
    fused = compile_onnx(model, **OPTS)
    plain = compile_onnx(model, **OPTS, fuse=False)
    steps = _after_convs(fused.nem)
    # (the bias's add into the convolution's accumulator, then the tree)
    assert len(steps) > 1 and all(s == ["add", "mul", "add", "relu"] for s in steps[1:])
    assert timed_cycles(fused.nem) < timed_cycles(plain.nem)


@pytest.mark.parametrize("tail", ["clip", "bn_relu"])
def test_a_fused_tiles_l1_need_is_what_the_lowering_declares(tail, monkeypatch):
    """A convolution whose output (64 channels, 56x56: 784 KiB) is tiled to
    fit L1, with an epilogue whose tree needs scratch (Clip: the max's result
    and the splat 6; BatchNormalization + Relu: the mul's and add's results
    and the broadcast scale and shift): the L1 need measured for the fused
    tile (D-COMPILE-L1) is the lowered program's L1 high-water mark, or one
    scratch tile more (the 0 of the Relu's `max(x, 0)` counts as a splat,
    `l1_scratch._tree`), so the program is not tiled again for exceeding L1.
    Read on the tight packing: a spread one (D-LOW-SHARE) spends the room L1
    has left."""
    from nem.analysis.capacity import memory_maps
    from nem.frontends.nem_text.parser import parse_nem
    from nem.passes.share_buffers import packed_footprints

    needs = l1_needs(monkeypatch)
    result = compile_onnx(_model(tail, c=32, f=64, hw=56), **OPTS)
    assert not [r for r in result.remarks if "exceeded L1" in r], result.remarks
    program = parse_nem(result.nem).ops.first
    l1 = {k: p for k, p in memory_maps(program).items() if "L1" in k}
    # every buffer packed, as where L1 would not fit unpacked: since the
    # border's fill tiles share a buffer (D-COMPILE-FILL-TILES), this one
    # fits unpacked, and nem-share-buffers leaves it so (over-capacity-only)
    packed = packed_footprints(program, None, "L1", over_capacity_only=False)
    lowered = max(n for k, n in packed.items() if "L1" in k)
    tile = max(p.end - p.offset for p in l1["L1[0]"])  # (a scratch tile, all its slots)
    capacity = 1 << 20  # npm_pro_x1's l1_size_bytes
    need = max(n for n in needs if n <= capacity)
    assert lowered <= need <= lowered + tile, (lowered, needs, tile)


def _loop_bodies(text: str) -> list[list[str]]:
    """The task names (`concat`, `conv2d`, ..) of each loop body of a NEM
    program, its nested loops' apart (by indentation)."""
    bodies: list[list[str]] = []
    open_: list[tuple[int, list[str]]] = []  # (indent of the body, its tasks)
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        while open_ and indent < open_[-1][0]:
            bodies.append(open_.pop()[1])
        if line.lstrip().startswith("loop "):
            open_.append((indent + 2, []))
        elif open_ and indent == open_[-1][0] and ".async" in line:
            open_[-1][1].append(line.split(" = ")[1].split(".")[0])
    return bodies + [tasks for _, tasks in open_]


def test_per_channel_inputs_are_broadcast_once_per_channel_tile():
    """Conv -> BatchNormalization -> Relu with 64 output channels at 56x56,
    tiled in rows: the scale and shift, which depend on the output channel
    only, are broadcast into their L1 tiles before the loop over the
    spatial tiles, not in each tile (D-COMPILE-FUSE-L1): each loop body
    holds the bias's two concats per convolution and no others (six before:
    two more per per-channel input).  Bit-identical to the unfused program
    under random schedules, fewer tasks run than with the broadcasts in
    each tile (`hoist=False`, which leaves them there), and the program
    fits L1 as measured (no re-tiling).  Each tile's convolution whole
    (`split_nmus=False`): split over the NMUs it is two `conv2d` tasks, one
    per band of rows, with the tile's concats (D-COMPILE-NMU-SPLIT)."""
    model = _model("bn_relu", c=32, f=64, hw=56)
    fused = compile_onnx(model, **OPTS, split_nmus=False)
    assert not [r for r in fused.remarks if "exceeded L1" in r], fused.remarks
    bodies = [b for b in _loop_bodies(fused.nem) if "conv2d" in b]
    assert bodies, fused.nem
    for tasks in bodies:
        assert tasks.count("concat") == 2 * tasks.count("conv2d"), tasks
    per_tile = compile_onnx(model, **OPTS, hoist=False, split_nmus=False)
    assert any(b.count("concat") == 6 * b.count("conv2d") > 0 for b in _loop_bodies(per_tile.nem))
    plain = compile_onnx(model, **OPTS, fuse=False)
    for a, b in zip(outputs_of(fused, model, 3), outputs_of(plain, model, 0)):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert timed_tasks(fused.nem) < timed_tasks(per_tile.nem)


def test_an_intermediate_with_another_reader_is_still_written():
    """The Conv's output is a graph output too: the Relu runs on the tile,
    and the tile is copied out as well."""
    model = _model("relu", outputs=("y", "c"))
    fused, plain = same_bits(model)
    assert 3 * N * 4 <= plain - fused < 4 * N * 4, (fused, plain)  # (the Conv's write stays)


def test_a_split_reduction_is_not_fused():
    """Tile sizes (`--tile-sizes`) that split the kernel rows: each output
    tile is summed over several iterations, so the bias cannot start it in
    L1: nothing is fused, and the program is the unfused one."""
    model = _model("relu")
    sizes = (1, 4, 12, 16, 1)
    fused = compile_onnx(model, **OPTS, tile_sizes=sizes)
    plain = compile_onnx(model, **OPTS, tile_sizes=sizes, fuse=False)
    assert fused.nem == plain.nem


GROUP = """
#b = affine_map<(d0, d1, d2, d3) -> (d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @f(%x: memref<1x16x16xCxf32>, %w: memref<1x1xCxFxf32>, %b: memref<Fxf32>,
             %y: memref<1x16x16xFxf32>) {
  %z = arith.constant 0.0 : f32
  %o = memref.alloc() : memref<1x16x16xFxf32>
  linalg.generic {indexing_maps = [#b, #id], iterator_types = ["parallel", "parallel",
      "parallel", "parallel"]} ins(%b : memref<Fxf32>) outs(%o : memref<1x16x16xFxf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : memref<1x16x16xCxf32>, memref<1x1xCxFxf32>) outs(%o : memref<1x16x16xFxf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel",
      "parallel", "parallel"]} ins(%o : memref<1x16x16xFxf32>) outs(%y : memref<1x16x16xFxf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %z : f32
    linalg.yield %r : f32
  }
  return
}
"""


@pytest.mark.parametrize("c, fused", [(16, 1), (128, 0)])
def test_epilogues_that_would_shrink_a_large_weight_tile_are_not_fused(c, fused):
    """A 1x1 convolution (16x16 pixels, f = 512) whose tile with the Relu's
    is over the budget: the Relu is fused while the weight tile is under
    half the budget (16 channels in: 32 KiB), not when it is half (128
    channels: 256 KiB of 512 KiB), where the L1 fit would split the output
    channels; the bias is fused either way (D-COMPILE-FUSE-L1)."""
    from mlir import ir

    from nem.compile import fusion

    with ir.Context():
        m = ir.Module.parse(GROUP.replace("C", str(c)).replace("F", "512"))
        fn = next(o.operation for o in m.body.operations)
        (g,) = fusion.find_groups(fn)
        assert len(g.epilogues) == 1 and g.keep() == [False, True]
        budget = 512 * 1024
        sizes = [1, 16, 16, 512, 1, 1, c]
        assert fusion._tile_bytes(g, sizes, 3, 1) > budget
        got = fusion._fitting(g, sizes, budget)
        assert got is not None and len(got.epilogues) == fused


@pytest.mark.parametrize("where, bias", [("conv", False), ("return", True)])
def test_a_bias_written_between_its_broadcast_and_the_convolution_is_not_fused(where, bias):
    """The fused tiles read the bias where the convolution stands: a bias
    argument another op writes between the broadcast and the convolution
    (a fill) leaves the two apart; one written after the convolution is
    fused (`Writers`, the one analysis of "may an op between write it")."""
    from mlir import ir

    from nem.compile import fusion

    fill = "  linalg.fill ins(%z : f32) outs(%b : memref<512xf32>)\n"
    text = GROUP.replace("C", "16").replace("F", "512")
    at = text.index("  linalg.conv_2d" if where == "conv" else "  return")
    with ir.Context():
        m = ir.Module.parse(text[:at] + fill + text[at:])
        fn = next(o.operation for o in m.body.operations)
        groups = fusion.find_groups(fn)
        assert [g.bias.name for g in groups] == (["linalg.generic"] if bias else [])


@pytest.mark.parametrize("elem, width", [("f16", 2), ("f32", 4), ("f64", 8)])
def test_a_broadcast_tile_holds_the_bytes_of_its_element_type(elem, width):
    """An epilogue input's L1 tile (`fusion_tiles.broadcast_tile`) is as many bytes
    as the output tile it is shaped like holds, at that tile's element width
    (fused epilogues are f32-only today: f16 and f64 tiles are built here
    directly), and the broadcast into it is valid IR."""
    from mlir import ir

    from nem.compile import fusion_tiles

    text = f"""func.func @f(%b: memref<8x{elem}>, %o: memref<1x2x3x8x{elem}, 1>) {{
  return
}}"""
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        fn = next(o.operation for o in m.body.operations)
        block = fn.regions[0].blocks[0]
        b, o = block.arguments
        ret = next(iter(block.operations))
        bmap = "affine_map<(d0, d1, d2, d3) -> (d3)>"
        tile = fusion_tiles.broadcast_tile(b, bmap, o, ir.InsertionPoint(ret))
        assert tile is not None
        assert ir.MemRefType(tile.alloc.results[0].type).shape == [2 * 3 * 8 * width]
        assert m.operation.verify()


def test_a_fused_clip_is_one_clamp_on_the_tile():
    """Conv -> Clip(0, 6) (ReLU6): on each tile the convolution is followed
    by the bias's add and one `clamp min=0.0 max=6.0` (D-LOW-CLAMP), not a
    relu, a splat of 6 and a min; bit-identical to the unfused program
    under random schedules and onnxruntime's values."""
    model = _model("clip")
    fused = compile_onnx(model, **OPTS)
    steps = _after_convs(fused.nem)
    assert len(steps) > 1 and all(s == ["add", "clamp"] for s in steps[1:]), steps
    lines = fused.nem.splitlines()
    clamps = [line for line in lines if "= clamp.async" in line and "elem=f32" in line]
    assert clamps and all("min=0.0 max=6.0" in line for line in clamps)  # (i8: zero fills)
    same_bits(model)


@pytest.mark.parametrize("group, c", [(4, 8), (16, 16)])
def test_grouped_conv_bn_relu6_is_fused(group, c):
    """A grouped (group 4) and a depthwise (16 groups of one channel) Conv
    with a BatchNormalization (folded into its weights and bias) and Clip(0, 6):
    the ReLU6 runs in the convolution's tile loop, one `clamp` after each
    tile's convolution (and the add of its accumulator) (D-COMPILE-FUSE-L1, D-LOW-CLAMP), bit-identical to the
    unfused program under random schedules, and the output passes through
    DDR four times less (the bias's write and read-back, the Conv's write and
    the Clip's read)."""
    model = _model("bn_clip", c=c, group=group)
    steps = _after_convs(compile_onnx(model, **OPTS).nem)
    assert len(steps) > 1 and all(s in (["clamp"], ["add", "clamp"]) for s in steps[1:]), steps
    fused, plain = same_bits(model)
    assert plain - fused >= 4 * N * 4, (fused, plain)


def test_a_depthwise_conv_read_by_a_grouped_one_is_fused():
    """ShuffleNet's depthwise 3x3 then grouped 1x1 (session 29): the
    grouped Conv reads the depthwise one's output through a view splitting
    its channels in 4 groups, which the fusion took for a writer, so the
    depthwise bias was broadcast through DDR and each output tile read back.
    Both biases now start the tiles in L1: the output passes through DDR four
    times less than unfused (each Conv's bias write and read-back), the bits
    the unfused program's, the values onnxruntime's."""
    fused, plain = same_bits(_model("grouped", c=16, group=16))
    assert plain - fused >= 4 * N * 4, (fused, plain)


def test_an_f16_groups_tile_is_measured_in_two_byte_elements():
    """Whether an epilogue fits beside a convolution's tile was measured at
    four bytes an element whatever the type: an f16 3x3 convolution of 128
    channels at 28x28, whose tiles the f16 plan makes larger, left its Relu
    unfused where the f32 one fused it (ResNet-50's f16 copy: 24 Relus and
    10 Sums a group of their own, session 53)."""
    from roofline_models import timed_session

    for dtype in (np.float32, np.float16):
        model = _model("relu", c=128, f=128, hw=28, dtype=dtype)
        session, _ = timed_session(model, "wide")
        groups = {r.name: r.fused for r in session.roofline().groups}
        assert groups["node 'conv' (Conv)"] == ["node 'relu' (Relu)"], (dtype, groups)


def _residual_block(c: int = 16, hw: int = 12):
    """x -> Conv+bias -> Relu (r0) -> Conv+bias -> Relu -> Conv+bias (c2) ->
    Add(c2, r0) -> Relu: a residual block whose skip r0 is also the next
    Conv's input, copied into its padded buffer (3x3 convolutions, padding 1)."""
    rng = np.random.default_rng(3)

    def init(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.3, 0.3, shape).astype(np.float32), name)

    inits, nodes = [], []
    for k, (src, dst) in enumerate((("x", "c0"), ("r0", "c1"), ("r1", "c2"))):
        inits += [init(f"w{k}", c, c, 3, 3), init(f"b{k}", c)]
        conv = helper.make_node("Conv", [src, f"w{k}", f"b{k}"], [dst], f"conv{k}", pads=[1] * 4)
        nodes.append(conv)
        if k < 2:
            nodes.append(helper.make_node("Relu", [dst], [f"r{k}"], name=f"relu{k}"))
    nodes += [
        helper.make_node("Add", ["c2", "r0"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["y"], name="relu2"),
    ]
    g = helper.make_graph(
        nodes,
        "res",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_a_residual_add_whose_skip_is_copied_into_the_next_conv_is_fused():
    """The skip r0 is read by the Add and copied (`memref.copy`) into the
    next Conv's padded input: the fusion took that copy for a use that
    might write it, so no residual Add and its Relu fused, and with fusion
    on the chain rule (D-COMPILE-FUSE-CHAIN) did not take them either: the
    default program was slower than `--no-fuse`'s (an outside review,
    session 53).  A copy that only reads the skip leaves it as it is: the
    Add and the Relu run on the last Conv's tiles, bit-identical to the
    unfused program, the Add's output never written."""
    from roofline_models import timed_session

    model = _residual_block()
    session, _ = timed_session(model, "res")
    groups = {r.name: r.fused for r in session.roofline().groups}
    assert groups["node 'conv2' (Conv)"] == ["node 'add' (Add)", "node 'relu2' (Relu)"]
    same_bits(model)
    fused = compile_onnx(model, **OPTS).nem
    assert timed_cycles(fused) < timed_cycles(compile_onnx(model, **OPTS, fuse=False).nem)


def _shuffle_unit(c: int = 24, hw: int = 14):
    """x -> 1x1 Conv+bias -> Relu (r0) -> 1x1 Conv+bias in 3 groups -> Relu
    -> 3x3 Conv+bias (c2) -> Add(c2, r0) -> Relu: a ShuffleNet unit after
    the layer before it, whose skip r0 its first grouped Conv reads through
    the view that splits its channels."""
    rng = np.random.default_rng(4)

    def init(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.3, 0.3, shape).astype(np.float32), name)

    inits = [init("w", c, c, 1, 1), init("b", c), init("w0", c, c // 3, 1, 1), init("b0", c)]
    inits += [init("w1", c, c, 3, 3), init("b1", c)]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c0"], name="conv0"),
        helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
        helper.make_node("Conv", ["r0", "w0", "b0"], ["g"], name="gconv", group=3),
        helper.make_node("Relu", ["g"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w1", "b1"], ["c2"], name="conv", pads=[1] * 4),
        helper.make_node("Add", ["c2", "r0"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["y"], name="relu2"),
    ]
    g = helper.make_graph(
        nodes,
        "unit",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_a_residual_add_whose_skip_a_grouped_conv_reads_through_a_view_is_fused():
    """The skip r0 is read by the Add and, through a `memref.expand_shape`
    splitting its channels, by the unit's first grouped Conv: the fusion
    took that view for a use that might write it, so ShuffleNet's Sum and
    the Relu after it ran as ops of their own, the tensor through DDR twice
    per unit (session 60: the model 297,743 -> 257,462 cycles fused).  A
    view whose users only read it leaves the skip as it is: the Add and the
    Relu run on the last Conv's tiles, bit-identical to the unfused program
    under random schedules, within onnxruntime's tolerance, fewer cycles."""
    from roofline_models import timed_session

    model = _shuffle_unit()
    session, _ = timed_session(model, "unit")
    groups = {r.name: r.fused for r in session.roofline().groups}
    assert groups["node 'conv' (Conv)"] == ["node 'add' (Add)", "node 'relu2' (Relu)"]
    same_bits(model)
    fused = compile_onnx(model, **OPTS).nem
    assert timed_cycles(fused) < timed_cycles(compile_onnx(model, **OPTS, fuse=False).nem)


def test_a_fused_convolutions_per_tile_steps_are_its_bias_and_epilogue_ops():
    """`fusion_groups.tile_steps`, which `tile_cost.channel_cut` prices per
    tile (D-COMPILE-TILE-TIME, session 46): the group's convolution (the
    second linalg op, after its bias broadcast) runs the bias and the
    Relu's one op on each tile; no entry for an op that heads no group."""
    from mlir import ir

    from nem.compile import fusion_groups, transform

    with ir.Context():
        m = ir.Module.parse(GROUP.replace("C", "16").replace("F", "64"))
        fn = next(o.operation for o in m.body.operations)
        ops = transform.linalg_ops(fn)
        assert [op.name for op in ops][1].startswith("linalg.conv")
        assert fusion_groups.tile_steps(fn, ops) == {1: 2}


def _padded_read_twice(producer: str):
    """`producer` (a padded 3x3 Conv with bias, or a 3x1 AveragePool) of x
    (1x4x6x6), a Relu (the Conv's) or the pooling's scale writing the
    interior of a padded MaxPool's input, and a per-channel Mul reading it
    too (the group's next epilogue): two outputs, the MaxPool's and the Mul's."""
    rng = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)

    if producer == "conv":
        nodes = [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
            helper.make_node("Relu", ["c"], ["r"]),
        ]
        inits, f = [init("w", 8, 4, 3, 3), init("b", 8)], 8
    else:
        nodes = [helper.make_node("AveragePool", ["x"], ["r"], kernel_shape=[3, 1])]
        inits, f = [], 4
    nodes += [
        helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[1, 4], pads=[0, 2, 0, 0]),
        helper.make_node("Mul", ["r", "s"], ["y"]),
    ]
    f32 = TensorProto.FLOAT
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", f32, [1, 4, 6, 6])],
        [helper.make_tensor_value_info(o, f32, None) for o in ("m", "y")],
        [*inits, init("s", 1, f, 1, 1)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("producer", ["conv", "pool"])
def test_an_epilogue_writing_a_padded_interior_read_by_the_next_is_copied_out(producer):
    """A silent wrong result found by the graph fuzzer (session 63, seed
    6303: an AveragePool, a padded MaxPool of it, a BatchNormalization of
    it), on main's convolutions too: the Relu (or the pooling's scale)
    writes the interior of the MaxPool's padded input in place
    (D-COMPILE-PAD-IN-PLACE), as an epilogue whose output the next epilogue
    (the Mul) reads.  The interior's view had only the group's users (the
    MaxPool reads the padded buffer), so its copy-out was dropped and the
    MaxPool read a buffer nothing wrote (8.78 off onnxruntime).  A view is
    always copied out (`Group.keep`)."""
    same_bits(_padded_read_twice(producer))
