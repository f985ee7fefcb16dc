"""Running what nem-compile makes of an ONNX model (shared by
test_nem_compile.py, test_nem_compile_cli.py and others): compile (verified),
run under random schedules, compare with onnxruntime; the installed tools;
a small matmul in linalg on tensors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from nem.compile import compile_onnx
from nem.compile.check import max_violation, onnxruntime_run
from nem.frontends.onnx import samples
from nem.runtime.api import NemInterpreter

BIN = Path(sys.executable).parent
"""Where the installed tools are (`nem-compile`, `nem-opt`, `nem-run`)."""
DEVICE = "npm_pro_x1"  # f32 and f16 eltwise/gemm/conv variants (npm_pro lacks f32 eltwise)


def run_compiled(result, model, device: str = DEVICE, schedules: int = 2, inputs=None):
    """Run a compile's program on `inputs` (by ONNX name; default the model's
    seeded random inputs): completed, race-free, the same final memory
    under `schedules` random schedules.  Returns (interpreter after the
    run, inputs)."""
    if inputs is None:
        inputs = samples.random_inputs(model, seed=2)
    iface = result.interface

    def start():
        it = NemInterpreter(device=device)
        it.load_string(result.nem, file="m.nem")
        for name, arr in iface.weights.items():
            it.write_tensor(name, arr)
        for name, _, _ in iface.inputs:
            it.write_tensor(name, inputs[iface.onnx_names[name]])
        return it

    it = start()
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    if schedules:
        _, diff = start().run_schedules(schedules, seed=3)
        assert diff is None
    return it, inputs


def run_api(model, device: str = DEVICE, reference=None, **options):
    """Compile `model`, run it, compare with onnxruntime's outputs (or with
    `reference(inputs)`'s, for a model onnxruntime refuses)."""
    result = compile_onnx(model, device=device, **options)
    iface = result.interface
    it, inputs = run_compiled(result, model, device)
    want = (reference or (lambda ins: onnxruntime_run(model, ins)))(inputs)
    for name, shape, dtype in iface.outputs:
        got = it.read_tensor(name, shape, dtype)
        ref = want[iface.onnx_names[name]]
        assert max_violation(got, ref) <= 1.0
    return result


def tool(name: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the installed tool `name`; with `ok`, assert it exits 0."""
    r = subprocess.run([str(BIN / name), *args], capture_output=True, text=True)
    if ok:
        assert r.returncode == 0, f"{name} {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r


MLIR_MATMUL = """
func.func @mm(%a: tensor<16x32xf32>, %b: tensor<32x8xf32>) -> tensor<16x8xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %m = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x8xf32>)
                     outs(%f : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %m : tensor<16x8xf32>
}
"""
"""A 16x32 by 32x8 matmul on tensors (MLIR input to nem-compile)."""


def conv3x3_model(hw: int, c: int, f: int):
    """A 3x3 convolution with bias, `c` to `f` channels over `hw` x `hw` pixels
    (padding 1), seeded random weights (test_dma_split, test_nmu_split, test_hoist)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (f, c, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.uniform(-1, 1, (f,)).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1] * 4)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, f, hw, hw])],
        [w, b],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def conv1x1_relu_model(hw: int, c: int, f: int, group: int = 1):
    """A 1x1 convolution with bias and a Relu, `c` to `f` channels over `hw` x
    `hw` pixels in `group` groups, seeded random weights (test_tile_time,
    test_share_buffers, test_nmu_split)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (f, c // group, 1, 1)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.uniform(-1, 1, (f,)).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", group=group),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, f, hw, hw])],
        [w, b],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def typed_model(nodes, inputs, outputs, inits=(), opset: int = 17):
    """A model of `nodes` whose graph inputs and outputs are (name, ONNX
    element type, shape) triples (an output's shape None: inferred)."""
    from onnx import helper

    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(inits),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def graph_model(nodes, x_shape, inits=(), opset: int = 13, elem: int | None = None):
    """A model of `nodes` reading one input `x` of `x_shape` and writing
    `y`, both of ONNX element type `elem` (f32 by default; test_pads)."""
    from onnx import TensorProto, helper

    elem = TensorProto.FLOAT if elem is None else elem
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", elem, list(x_shape))],
        [helper.make_tensor_value_info("y", elem, None)],
        list(inits),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def only_output(result, model, schedules: int):
    """The one output of a compile's program run as `run_compiled` runs it."""
    it, _ = run_compiled(result, model, DEVICE, schedules)
    ((name, shape, dtype),) = result.interface.outputs
    return it.read_tensor(name, shape, dtype)


def outputs_of(result, model, schedules: int, device: str = DEVICE) -> list[np.ndarray]:
    """The outputs of a compile's program run as `run_compiled` runs it."""
    it, _ = run_compiled(result, model, device, schedules)
    return [it.read_tensor(n, s, d) for n, s, d in result.interface.outputs]


def same_bits(model, device: str = DEVICE, **opts) -> tuple[int, int]:
    """Compile `model` fused (D-COMPILE-FUSE-L1) and with `fuse=False`: the
    same bits (fused: under random schedules), onnxruntime's values; returns
    (fused, unfused) DMA bytes."""

    fused = compile_onnx(model, device=device, **opts)
    plain = compile_onnx(model, device=device, fuse=False, **opts)
    got = outputs_of(fused, model, 3, device)
    for a, b in zip(got, outputs_of(plain, model, 0, device)):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))
    for (name, _, _), a in zip(fused.interface.outputs, got):
        assert max_violation(a, want[fused.interface.onnx_names[name]]) <= 1.0
    return dma_bytes(fused.nem, device), dma_bytes(plain.nem, device)


def l1_needs(monkeypatch) -> list[int]:
    """The L1 needs (the most bytes of any engine's L1) that the tile stage
    measures (`l1_plan.measure`) in a compile run after this call, in order,
    appended as they are measured; the lowering's buffers packed tightly
    (`SPREAD_TRIES` 0: a spread packing spends the room L1 has left), so
    that the lowered program's high-water mark compares with them."""
    import nem.analysis.buffer_lifetimes as bl
    from nem.compile import l1_plan

    needs: list[int] = []
    measure = l1_plan.measure

    def spy(*args, **kwargs):
        need = measure(*args, **kwargs)
        needs.append(max(need.by_space.values(), default=0))
        return need

    monkeypatch.setattr(l1_plan, "measure", spy)
    monkeypatch.setattr(bl, "SPREAD_TRIES", 0)
    return needs


def _timed_total(text: str, device: str):
    """The whole program's roofline group of a timed run (D-RT-ROOFLINE)."""
    it = NemInterpreter(device=device, trace=False)
    it.set_mode("timed")
    it.load_string(text, file="m.nem")
    s = it.start()
    s.run_to_end()
    return s.roofline().total


def timed_cycles(text: str, device: str = DEVICE) -> int:
    """The timed cycles of a program (D-RT-COST)."""
    return _timed_total(text, device).cycles


def timed_tasks(text: str, device: str = DEVICE) -> int:
    """The tasks a timed run of a program runs (every loop iteration's)."""
    return _timed_total(text, device).tasks


def nmu_macs(text: str, device: str = DEVICE) -> int:
    """The multiply-adds a program's NMUs run in a timed run."""
    return _timed_total(text, device).units["NMU"].amount


def ddr_to_ddr(nem: str) -> int:
    """Transfers of the program between two DDR buffers (a padded tensor's or
    a concatenation's copy: test_pads, test_concats)."""
    ddr = set(re.findall(r"^buffer (\w+) : DDR", nem, re.M))
    pairs = re.findall(r"transfer\.\w+\(dst=region\((\w+),.*?src=region\((\w+),", nem)
    return sum(1 for d, s in pairs if d in ddr and s in ddr)


def dma_bytes(text: str, device: str = DEVICE) -> int:
    """The bytes a program's DMAs move in a timed run."""
    return _timed_total(text, device).units["DMA"].amount


def loaded_elements(nem: str, buffer: str) -> int:
    """The f32 elements the program's transfers copy out of the buffers
    named by the regular expression `buffer` (a layer's weights), each
    transfer counted once per iteration of the loops around it (`loop v in
    [0..T-1]`, D-LOW-LOOP; a part cut along its output channels loads its
    weights in a tile loop, D-COMPILE-TILE-TIME)."""
    shape = re.compile(rf"src=region\({buffer}, [^)]*\) elem=f32, shape=\[([\d, ]+)\]")
    loops: list[tuple[int, int]] = []  # (indent, trips) of the loops around a line
    total = 0
    for line in nem.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        loops = [(i, t) for i, t in loops if i < indent]
        trips = int(np.prod([t for _, t in loops]))
        for dims in shape.findall(line):
            total += trips * int(np.prod([int(x) for x in dims.split(",")]))
        loop = re.match(r"\s*loop \w+ in \[0\.\.(\d+)\]", line)
        if loop:
            loops.append((indent, int(loop.group(1)) + 1))
    return total


def dense_layer_model(hw: int, c: int):
    """A DenseNet dense layer: Relu, 1x1 `c` -> 128, Relu, 3x3 128 -> 32
    (padding 1) over `hw` x `hw` pixels, seeded random weights `wone` and
    `wthree`."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)
        for name, shape in (("wone", (128, c, 1, 1)), ("wthree", (32, 128, 3, 3)))
    ]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu1"),
        helper.make_node("Conv", ["r", "wone"], ["h"], name="conv1"),
        helper.make_node("Relu", ["h"], ["hr"], name="relu2"),
        helper.make_node("Conv", ["hr", "wthree"], ["y"], name="conv3", pads=[1] * 4),
    ]
    x = ("x", TensorProto.FLOAT, [1, c, hw, hw])
    return typed_model(nodes, [x], [("y", TensorProto.FLOAT, [1, 32, hw, hw])], weights)
