"""Raised tiled CNN benchmark (issue 12 "Numbers"; D-LOW-WINDOW, D-LOW-BCAST):

  python bench/bench_cnn_raised.py [--device npm_pro_x1] [--hw 32] [--repeat 10] [--warmup 40]
                                   [--first-repeat 3]

A CNN of 11 conv/pool/gemm layers (6 conv-bn-relu, 3 max pools, 2 gemms;
NCHW ONNX, 1 x 8 x HW x HW input) is compiled with `nem-compile` (the
affine route: linalg -> affine nests, device-derived tiles, DMAs into L1,
pipelining) and run by `nem-run`'s engine in functional mode
(`NemInterpreter.run`), best CPU time of --repeat runs after --warmup runs (40 by default); each
timed run writes the input and the weights (held in memory, as the peer's
are) and runs the program.  The warm-up runs compile the escape-hatch
kernels (small ones are interpreted for their first COMPILE_AFTER scalar
ops, D-RT-MLIR-JIT) and record the run that later runs replay (D-RT-REPLAY:
only the tasks' data effects run again).  Also printed: the first run of
the program in a fresh interpreter (scheduled and race-checked; the kernels
are compiled by then; best of --first-repeat interpreters), and the first run in a new process, as `nem-run`
runs it (the escape hatch imported, its kernels checked; constant fills run
as numpy fills, D-RT-MLIR-FILL; since D-LOW-FILL the lowering raises the
fills to `clamp` tasks, so this CNN has none).  Each first run is also timed
after `NemInterpreter.prepare()` (D-RT-PREPARE: the run scheduled and
race-checked ahead, without its data effects, as TFLite's `allocate_tensors`
prepares before the first `invoke`), the preparation timed apart.  On a 2-core
machine at load average 1.4 (stop 28): 1.7 ms replayed (0.81x numpy's
2.0 ms), 25.5 ms first run (12.5x), 2.6 ms first run after a 23.9 ms
`prepare()` (1.28x); in a new process 33.7 ms first run (+ 0.54 s load),
3.8 ms after a 30 ms `prepare()` (1.88x).  The peer is the same math in
numpy in the same run (convolution as a sum over kernel offsets of
`tensordot`s, the batch norm folded as nem-compile folds it, max pooling
by reshape, gemm by `@`), best of --repeat.  Target: nem-run within 2x of
numpy.  Also printed: the tasks per kind and the raised versus escaped
share (tasks, and the lowering remark's loop nests).  The result is checked
against numpy (and onnxruntime when installed).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import timeit
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

from nem.frontends.onnx.samples import GraphBuilder
from nem.runtime import NemInterpreter


def model(hw: int) -> onnx.ModelProto:
    g = GraphBuilder("f32", seed=3)
    x = "x"
    chans = [(8, 16), (16, 16), "pool", (16, 32), (32, 32), "pool", (32, 32), (32, 32), "pool"]
    for i, c in enumerate(chans):
        if c == "pool":
            x = g.op("MaxPool", [x], name=f"pool{i}", kernel_shape=[2, 2], strides=[2, 2])
        else:
            x = g.conv_bn_relu(x, c[0], c[1], name=f"conv{i}")
    x = g.op("Flatten", [x], name="flatten", axis=1)
    x = g.linear(x, 32 * (hw // 8) ** 2, 64, relu=True, name="fc1")
    x = g.linear(x, 64, 10, name="fc2")
    return g.model("cnn11", {"x": (1, 8, hw, hw)}, {"logits": x})


FRESH_PROCESS = """
import sys, time
import numpy as np
from nem.runtime import NemInterpreter
nem, npz, device, hw = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
x = np.random.default_rng(0).uniform(-1, 1, (1, 8, hw, hw)).astype(np.float32)
prepare = sys.argv[5] == "prepare"
t = time.process_time()
it = NemInterpreter(device=device)
it.load_string(open(nem).read(), nem)
t_load = time.process_time() - t
t = time.process_time()
assert not prepare or it.prepare()
t_prep = time.process_time() - t
it.write_tensor("x", x)
with np.load(npz) as w:
    for k in w.files:
        it.write_tensor(k, w[k])
t = time.process_time()
assert it.run().ok
print(t_load, t_prep, time.process_time() - t)
"""
"""What `nem-run` does on the program in a new process: load it, prepare it
(`nem-run --repeat`) or not, write the inputs, run it once (CPU seconds of
the load, the preparation and the run)."""


def numpy_cnn(m: onnx.ModelProto, x: np.ndarray):
    """The model's math in numpy (float32, NCHW)."""
    from onnx import numpy_helper

    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    env = {"x": x}
    for node in m.graph.node:
        ins = [env.get(i, w.get(i)) for i in node.input]
        a = {at.name: onnx.helper.get_attribute_value(at) for at in node.attribute}
        if node.op_type == "Conv":
            xx, ww, bb = ins
            p = a["pads"][0]
            xp = np.pad(xx, ((0, 0), (0, 0), (p, p), (p, p)))
            k = ww.shape[2]
            h, wd = xx.shape[2], xx.shape[3]
            y = np.zeros((1, ww.shape[0], h, wd), np.float32)
            for i in range(k):
                for j in range(k):
                    y += np.tensordot(
                        ww[:, :, i, j], xp[:, :, i : i + h, j : j + wd], axes=([1], [1])
                    ).transpose(1, 0, 2, 3)
            out = y + bb[None, :, None, None]
        elif node.op_type == "BatchNormalization":
            xx, s, b, mean, var = ins
            sc = s / np.sqrt(var + a.get("epsilon", 1e-5))
            out = (xx - mean[None, :, None, None]) * sc[None, :, None, None] + b[
                None, :, None, None
            ]
        elif node.op_type == "Identity":
            out = ins[0]
        elif node.op_type == "Relu":
            out = np.maximum(ins[0], 0)
        elif node.op_type == "MaxPool":
            n, c, h, wd = ins[0].shape
            out = ins[0].reshape(n, c, h // 2, 2, wd // 2, 2).max(axis=(3, 5))
        elif node.op_type == "Flatten":
            out = ins[0].reshape(ins[0].shape[0], -1)
        elif node.op_type == "Gemm":
            out = ins[0] @ ins[1] + ins[2]
        else:
            raise SystemExit(f"numpy_cnn: {node.op_type}")
        env[node.output[0]] = out.astype(np.float32)
    return env[m.graph.output[0].name]


def best(fn, repeat: int) -> float:
    """Best CPU time of this process (all its threads) over `repeat` calls: on a
    shared machine wall time mostly measures the other jobs, for both sides."""
    return min(timeit.repeat(fn, number=1, repeat=repeat, timer=time.process_time))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="npm_pro_x1")
    p.add_argument("--hw", type=int, default=32)
    p.add_argument("--repeat", type=int, default=10)
    # 40: the smallest escape-hatch kernels (64-element fills) are interpreted until their
    # total work reaches escape_hatch.COMPILE_AFTER (EscapeHatch.compile_after) (2,000 scalar ops: 32 runs), then compiled
    p.add_argument("--warmup", type=int, default=40)
    p.add_argument(
        "--first-repeat",
        type=int,
        default=3,
        help="fresh interpreters whose first run is timed (best is printed)",
    )
    args = p.parse_args(argv)
    m = model(args.hw)
    x = np.random.default_rng(0).uniform(-1, 1, (1, 8, args.hw, args.hw)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path, nem_path = Path(tmp) / "cnn11.onnx", Path(tmp) / "cnn11.nem"
        onnx.save(m, onnx_path)
        t = time.perf_counter()
        r = subprocess.run(
            [
                str(Path(sys.executable).parent / "nem-compile"),
                str(onnx_path),
                "--device",
                args.device,
                "-o",
                str(nem_path),
                "-v",
                "--no-progress",
            ],
            capture_output=True,
            text=True,
        )
        t_compile = time.perf_counter() - t
        if r.returncode:
            raise SystemExit(r.stderr)
        text = nem_path.read_text()
        with np.load(Path(tmp) / "cnn11.weights.npz") as npz:
            weights = {k: npz[k] for k in npz.files}
        it = NemInterpreter(device=args.device)
        it.load_string(text, str(nem_path))

        def run(interp: NemInterpreter = it) -> None:
            interp.write_tensor("x", x)
            for k, v in weights.items():
                interp.write_tensor(k, v)
            res = interp.run()
            if not res.ok:
                raise SystemExit(f"nem-run failed: {res}")

        for _ in range(max(1, args.warmup)):
            run()
        t_nem = best(run, args.repeat)
        y = it.read_tensor("logits").reshape(1, 10)
        t_first = t_prep = t_first_prep = float("inf")
        for _ in range(max(1, args.first_repeat)):
            fresh = NemInterpreter(device=args.device)
            fresh.load_string(text, str(nem_path))
            t_first = min(t_first, best(lambda: run(fresh), 1))  # scheduled: nothing recorded
            if fresh.program.compiled.replay is None:
                raise SystemExit("the first run recorded no plan: later runs would not replay")
            prepared = NemInterpreter(device=args.device)
            prepared.load_string(text, str(nem_path))
            t = time.process_time()
            if not prepared.prepare():
                raise SystemExit("prepare() planned nothing")
            t_prep = min(t_prep, time.process_time() - t)
            t_first_prep = min(t_first_prep, best(lambda: run(prepared), 1))
        cold = {}
        for how in ("plain", "prepare"):
            r_cold = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    FRESH_PROCESS,
                    str(nem_path),
                    str(Path(tmp) / "cnn11.weights.npz"),
                    args.device,
                    str(args.hw),
                    how,
                ],
                capture_output=True,
                text=True,
            )
            if r_cold.returncode:
                raise SystemExit(r_cold.stderr)
            cold[how] = [float(v) for v in r_cold.stdout.split()]
    ref = numpy_cnn(m, x)
    t_np = best(lambda: numpy_cnn(m, x), args.repeat)
    err = float(np.abs(y - ref).max())
    if err > 1e-3 * max(1.0, float(np.abs(ref).max())):
        raise SystemExit(f"wrong result: max |nem - numpy| = {err}")
    kinds = Counter(re.findall(r"= ([a-z0-9_]+)\.(?:async|sync)", text))
    kernels = text.count('op="mlir.kernel"')
    tasks = sum(kinds.values())
    remark = next((ln for ln in r.stderr.splitlines() if "remark: lowered" in ln), "")
    nests_escaped = len(
        re.findall(r"loop nest at \d+:\d+", remark.split("fell back to compute:")[-1])
    )
    print(
        f"CNN 11 layers (6 conv, 3 maxpool, 2 gemm), 1x8x{args.hw}x{args.hw} f32 on "
        f"{args.device}; nem-compile {t_compile:.2f} s"
    )
    print("  tasks: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print(
        f"  raised: {tasks - kernels} of {tasks} tasks ({100 * (tasks - kernels) / tasks:.0f}%), "
        f"escaped: {kernels} mlir.kernel tasks ({nests_escaped} loop nests)"
    )
    print(f"  nem-run functional (NemInterpreter.run): {t_nem * 1e3:8.1f} ms (replayed)")
    print(
        f"  first run in a fresh interpreter:        {t_first * 1e3:8.1f} ms "
        "(scheduled, race-checked; kernels compiled)"
    )
    print(
        f"  the same after prepare():                {t_first_prep * 1e3:8.1f} ms "
        f"(replayed; prepare() took {t_prep * 1e3:.1f} ms: scheduled, race-checked, "
        "D-RT-PREPARE)"
    )
    (load_p, _, first_p), (load_q, prep_q, first_q) = cold["plain"], cold["prepare"]
    print(
        f"  first run in a fresh process (as nem-run):{first_p * 1e3:7.1f} ms "
        f"(+ load {load_p * 1e3:.0f} ms; imports the escape hatch, checks the kernels)"
    )
    print(
        f"  the same after prepare():                {first_q * 1e3:8.1f} ms "
        f"(+ load {load_q * 1e3:.0f} ms, prepare {prep_q * 1e3:.1f} ms)"
    )
    print(f"  numpy, same math:                        {t_np * 1e3:8.1f} ms")
    print(
        f"  ratio nem-run / numpy: {t_nem / t_np:.2f}x replayed (target <= 2x), "
        f"{t_first_prep / t_np:.2f}x first run after prepare(), {t_first / t_np:.1f}x first "
        f"run unprepared, {first_q / t_np:.2f}x / {first_p / t_np:.0f}x in a fresh process "
        f"(prepared / not); max |diff| {err:.2e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
