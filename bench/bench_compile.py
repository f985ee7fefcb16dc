"""nem-compile benchmarks (issue 16 "Numbers"), per sample model:

  python bench/bench_compile.py [--device npm_pro_x1] [--models mlp,cnn,...] [--dtypes f32,f16]

* compile time per stage (import, bufferize, tile, lower incl. nem-verify);
* NEM tasks run, and the share of compute raised to NEM opcodes: by FLOPs
  (`nem.compile.flops`, the `-v` remark: FLOPs in raised nests vs in
  escape-hatch `mlir.kernel` nests, overall, over conv/matmul/pool/eltwise
  (the issue's target) and per category, reductions apart) and by tasks run;
* `nem-run` (functional) wall time vs onnxruntime on the same input, and the
  output's agreement (D-COMPILE-TOL);
* timed-mode cycles of the default program (L1-derived tiles, pipelined,
  nests split over the device's engines, D-COMPILE-ENGINES), of the same
  pipelined on one engine (`--engines 1`), and of `--no-pipeline --engines 1`,
  with the ratios to the last (issue 16 target: at least 1.6x fewer cycles).

Models the lowering does not take yet (issue 12) print the stage and reason.

Measured (one run, npm_pro_x1, load average ~7 on 2 cores; docs/compile.md
has the table): conv/matmul/pool/eltwise FLOPs 100% raised on every model,
f32 and f16 (transformer f16 was 94.4%, eltwise 43.8%, before its f16
bodies' casts were raised, D-LOW-CAST-TREE); default vs serial cycles: mlp
723/1538 (2.13x) and 395/775 (1.96x), cnn 1467/3899 (2.66x) and 830/2077
(2.50x), resblock 1105/2161 (1.96x) and 653/1205 (1.85x), transformer
432/826 (1.91x) and 305/493 (1.62x; 356/553 = 1.55x before its softmax was
one NEM task per engine, D-COMPILE-SOFTMAX, and its accumulators were
filled in place, D-LOW-FILL-FORWARD: docs/compile.md), mlp f16 batch 32
10179/16568 (1.63x).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nem.compile import CompileError, compile_onnx
from nem.compile.check import max_violation, onnxruntime_run
from nem.frontends.onnx import samples
from nem.runtime.api import NemInterpreter

RAISED_SKIP = ("transfer", "store", "compute")


def run(result, inputs, device: str, mode: str = "functional"):
    iface = result.interface
    it = NemInterpreter(device=device)
    it.load_string(result.nem, file="bench.nem")
    it.set_mode(mode)
    for name, arr in iface.weights.items():
        it.write_tensor(name, arr)
    for name, _, _ in iface.inputs:
        it.write_tensor(name, inputs[iface.onnx_names[name]])
    t0 = time.perf_counter()
    res = it.run()
    wall = time.perf_counter() - t0
    outs = {iface.onnx_names[n]: it.read_tensor(n, s, d) for n, s, d in iface.outputs}
    return res, wall, outs


def bench_model(label: str, model, device: str) -> None:
    print(f"\n== {label} on {device}")
    try:
        result = compile_onnx(model, device=device)
    except CompileError as e:
        print(f"   blocked in stage '{e.stage}': {str(e).splitlines()[0][:160]}")
        return
    stages = ", ".join(f"{s.name} {s.seconds * 1000:.0f} ms" for s in result.stages)
    print(f"   compile: {stages} (total {sum(s.seconds for s in result.stages):.2f} s)")
    inputs = samples.random_inputs(model, seed=0)
    res, wall, outs = run(result, inputs, device)
    counts = res.counts
    raised = sum(v for k, v in counts.items() if k not in RAISED_SKIP)
    escaped = counts.get("compute", 0)
    share = raised / (raised + escaped) if raised + escaped else 0.0
    print(f"   tasks run: {res.tasks_run} ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    print(f"   {result.flops.remark()}")
    print(
        f"   compute tasks raised to NEM opcodes: {raised}/{raised + escaped} "
        f"({share * 100:.0f}%), escape-hatch kernels: {escaped}"
    )
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    sess.run(None, inputs)  # warm-up: session setup not timed
    t0 = time.perf_counter()
    sess.run(None, inputs)
    ort_wall = time.perf_counter() - t0
    want = onnxruntime_run(model, inputs)
    worst = max(max_violation(outs[k], v) for k, v in want.items())
    print(
        f"   nem-run functional: {wall:.3f} s; onnxruntime: {ort_wall * 1000:.2f} ms "
        f"(nem-run / onnxruntime {wall / ort_wall:.0f}x); max error / tolerance {worst:.3f}"
    )
    cycles = {}
    for key, opts in (
        ("default", {}),
        ("one engine", {"engines": 1}),
        ("serial", {"pipeline": False, "engines": 1}),
    ):
        r = compile_onnx(model, device=device, **opts)
        cycles[key] = run(r, inputs, device, mode="timed")[0].cycle_count
    print(
        f"   timed cycles: default {cycles['default']} "
        f"({cycles['serial'] / cycles['default']:.2f}x fewer than serial), pipelined on "
        f"--engines 1 {cycles['one engine']} "
        f"({cycles['serial'] / cycles['one engine']:.2f}x), "
        f"--no-pipeline --engines 1 {cycles['serial']}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="npm_pro_x1")
    p.add_argument("--models", type=samples.model_names, default="mlp,cnn,resblock,transformer")
    p.add_argument("--dtypes", type=samples.dtype_names, default="f32,f16")
    args = p.parse_args()
    np.random.seed(0)
    for name in args.models:
        for dtype in args.dtypes:
            bench_model(f"{name} {dtype}", samples.MODELS[name](dtype), args.device)
    bench_model(
        "mlp f16 batch 32, 256 wide",
        samples.mlp("f16", batch=32, sizes=(256, 512, 256, 10)),
        args.device,
    )


if __name__ == "__main__":
    main()
