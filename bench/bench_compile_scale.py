"""Compile time against graph size (issue 30, item 3):

  python bench/bench_compile_scale.py [--chains 100,1000,10000] [--convs 10,50]
                                      [--device npm_pro_x1] [--route transform]

Two families of generated ONNX models, each compiled by `nem-compile`'s
Python API in a fresh process (CPU seconds per stage, the whole compile
included):

* a chain of N elementwise nodes (Relu, Add of a constant, Mul, Sigmoid in
  turn) on a [4, 4] tensor;
* a stack of N 3x3 convolutions (8 channels, 16 x 16, each with a bias and
  a Relu).

It prints, per model, the CPU seconds per stage and per node, the peak
resident memory of the compile's process, and between consecutive sizes of
a family the ratio of the times to the ratio of the sizes: compile time
grows linearly when 10x the nodes cost at most 12x the time (the issue's
bound).  A compile that fails says why: its last line of stderr, or, for a
process ended by a signal (the kernel's OOM killer sends SIGKILL), the
signal.  Run it under a memory limit on a shared machine (`prlimit --as=`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile

import numpy as np


def chain(n: int):
    from onnx import TensorProto, helper, numpy_helper

    ops = ["Relu", "Add", "Mul", "Sigmoid"]
    nodes, inits = [], []
    prev = "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        op = ops[i % len(ops)]
        if op in ("Add", "Mul"):
            c = f"c{i}"
            inits.append(numpy_helper.from_array(np.full([4, 4], 0.5, np.float32), c))
            nodes.append(helper.make_node(op, [prev, c], [out], name=f"n{i}"))
        else:
            nodes.append(helper.make_node(op, [prev], [out], name=f"n{i}"))
        prev = out
    g = helper.make_graph(
        nodes,
        f"chain{n}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def convs(n: int):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    prev = "x"
    for i in range(n):
        w, b = f"w{i}", f"b{i}"
        inits.append(
            numpy_helper.from_array(rng.uniform(-0.2, 0.2, (8, 8, 3, 3)).astype(np.float32), w)
        )
        inits.append(numpy_helper.from_array(rng.uniform(-0.1, 0.1, 8).astype(np.float32), b))
        nodes.append(
            helper.make_node("Conv", [prev, w, b], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1])
        )
        out = "y" if i == n - 1 else f"r{i}"
        nodes.append(helper.make_node("Relu", [f"c{i}"], [out], name=f"relu{i}"))
        prev = out
    shape = [1, 8, 16, 16]
    g = helper.make_graph(
        nodes,
        f"convs{n}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(path: str, device: str, route: str) -> None:
    from nem.compile import compile_onnx

    stages: dict[str, float] = {}
    last = [cpu()]

    def progress(stage, result):
        now = cpu()
        if result is not None:
            stages[stage] = stages.get(stage, 0.0) + now - last[0]
        last[0] = now

    t0 = cpu()
    # a chain of 10,000 nodes is over the default compile budget
    # (D-COMPILE-VALIDATE: --max-nodes 4096), which a user raises the same way
    compile_onnx(path, device=device, route=route, progress=progress, max_nodes=1_000_000)
    print(
        json.dumps(
            {
                "total": cpu() - t0,
                "stages": stages,
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def failure(out: subprocess.CompletedProcess) -> str:
    """Why a child compile printed no result: its last line of stderr, or
    the signal that ended it (a SIGKILL: most likely the out-of-memory
    killer, which leaves no stderr), or its exit status."""
    why = out.stderr.strip().splitlines()[-1:]
    if out.returncode < 0:
        try:
            name = signal.Signals(-out.returncode).name
        except ValueError:
            name = f"signal {-out.returncode}"
        killed = f"killed by {name}"
        if -out.returncode == signal.SIGKILL:
            killed += " (out of memory?)"
        return killed + (f"; last stderr line: {why[0]}" if why else "")
    if why:
        return why[0]
    return f"exit status {out.returncode}, no stderr"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chains", default="100,1000,10000")
    p.add_argument("--convs", default="10,50")
    p.add_argument("--device", default="npm_pro_x1")
    p.add_argument("--route", default="transform")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*args.child)
        return
    import onnx

    families = [("chain", chain, args.chains), ("convs", convs, args.convs)]
    with tempfile.TemporaryDirectory() as tmp:
        for family, make, sizes in families:
            prev = None
            for n in [int(x) for x in sizes.split(",") if x]:
                path = os.path.join(tmp, f"{family}{n}.onnx")
                onnx.save(make(n), path)
                out = subprocess.run(
                    [sys.executable, __file__, "--child", path, args.device, args.route],
                    capture_output=True,
                    text=True,
                )
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if not lines:
                    print(f"{family} {n}: failed: {failure(out)}", flush=True)
                    continue
                row = json.loads(lines[-1])
                stages = ", ".join(f"{k} {v:.1f}" for k, v in row["stages"].items())
                line = (
                    f"{family} {n:>6} nodes: {row['total']:8.1f} s CPU "
                    f"({1000 * row['total'] / n:6.1f} ms/node; {stages}), "
                    f"peak RSS {row['maxrss_mb']:.0f} MB"
                )
                if prev is not None:
                    pn, pt = prev
                    line += f"; {n / pn:.0f}x the nodes, {row['total'] / pt:.1f}x the time"
                print(line, flush=True)
                prev = (n, row["total"])


if __name__ == "__main__":
    main()
