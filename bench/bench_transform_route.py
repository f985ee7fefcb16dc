"""The transform-dialect route against the affine route (docs/compile.md,
"The transform-dialect route"), per sample model:

  python bench/bench_transform_route.py [--device npm_pro_x1] [--models mlp,cnn] [--dtypes f32]

For each route (`--route affine`, `--route transform`): timed-mode cycles of
the default program (L1-derived tiles, pipelined, split over the device's
engines) and of `--no-pipeline --engines 1`, their ratio (issue 16 target:
at least 1.6x), the NEM tasks run, and the output's agreement with
onnxruntime (max error / D-COMPILE-TOL tolerance, functional mode).  The
transform route privatizes the reduction splits the affine route makes
(D-COMPILE-TRANSFORM-PARTIALS); the ratio of the two routes' default cycles
is printed last.
"""

from __future__ import annotations

import argparse

from bench_compile import run

from nem.compile import CompileError, compile_onnx
from nem.compile.check import max_violation, onnxruntime_run
from nem.compile.pipeline import ROUTES
from nem.frontends.onnx import samples


def bench_model(label: str, model, device: str) -> None:
    print(f"\n== {label} on {device}")
    inputs = samples.random_inputs(model, seed=0)
    want = onnxruntime_run(model, inputs)
    default = {}
    for route in ROUTES:
        cycles = {}
        try:
            for key, opts in (("default", {}), ("serial", {"pipeline": False, "engines": 1})):
                r = compile_onnx(model, device=device, route=route, **opts)
                res = run(r, inputs, device, mode="timed")[0]
                cycles[key] = res.cycle_count
                if key == "default":
                    tasks = res.tasks_run
                    outs = run(r, inputs, device)[2]
                    worst = max(max_violation(outs[k], v) for k, v in want.items())
        except CompileError as e:
            print(f"   {route}: blocked in stage '{e.stage}': {str(e).splitlines()[0][:160]}")
            continue
        default[route] = cycles["default"]
        print(
            f"   --route {route}: timed cycles default {cycles['default']}, "
            f"--no-pipeline --engines 1 {cycles['serial']} "
            f"({cycles['serial'] / cycles['default']:.2f}x); {tasks} tasks; "
            f"max error / tolerance {worst:.3f}"
        )
    if len(default) == 2:
        print(
            f"   transform / affine default cycles: {default['transform'] / default['affine']:.2f}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="npm_pro_x1")
    p.add_argument("--models", type=samples.model_names, default="mlp,cnn")
    p.add_argument("--dtypes", type=samples.dtype_names, default="f32,f16")
    args = p.parse_args()
    for name in args.models:
        for dtype in args.dtypes:
            bench_model(f"{name} {dtype}", samples.MODELS[name](dtype), args.device)


if __name__ == "__main__":
    main()
