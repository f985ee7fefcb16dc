#!/usr/bin/env python3
"""Benchmark: how long `nem-compile` takes to report unsupported ONNX op
types (issue 34: at most 1 s CPU), side by side with the interpreter's and
`onnx`'s own start-up in the same run.

    python bench/bench_report.py             # best of 5 runs each
    python bench/bench_report.py --repeat 9

Models (written to a temporary directory):

  node0     Hardmax at node 0, then a Relu: found before the simplifier
            loads (D-COMPILE-EARLY-UNSUPPORTED)
  scatter   ScatterND reading the input, then Hardmax: a type onnxscript may
            rewrite, so the model is simplified first (the full import)

Each command runs `--repeat` times, interleaved; the best CPU time (user +
system, of the child) counts.  Exit status 1 is the expected one for the
reports.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper


def _model(nodes, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        list(inits),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


MODELS = {
    "node0": lambda: _model(
        [
            helper.make_node("Hardmax", ["x"], ["a"], name="hm"),
            helper.make_node("Relu", ["a"], ["y"], name="r"),
        ]
    ),
    "scatter": lambda: _model(
        [
            helper.make_node("ScatterND", ["x", "i", "u"], ["a"], name="sc"),
            helper.make_node("Hardmax", ["a"], ["y"], name="hm"),
        ],
        [
            helper.make_tensor("i", TensorProto.INT64, [1, 1], [0]),
            helper.make_tensor("u", TensorProto.FLOAT, [1, 3], np.ones(3)),
        ],
    ),
}


def child_cpu(cmd: list[str], ok: tuple[int, ...]) -> float:
    """CPU seconds (user + system) of one run of `cmd`, whose exit status must be in `ok`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cmds = {
            "python -c pass": ([sys.executable, "-c", "pass"], (0,)),
            "python -c 'import onnx'": ([sys.executable, "-c", "import onnx"], (0,)),
        }
        for name, make in MODELS.items():
            path = Path(tmp) / f"{name}.onnx"
            onnx.save(make(), path)
            cmds[f"nem-compile {name}.onnx"] = (
                ["nem-compile", str(path), "-o", str(Path(tmp) / f"{name}.nem")],
                (1,),
            )
        best = {k: float("inf") for k in cmds}
        for _ in range(args.repeat):  # interleaved: a slow spell of the machine hits all
            for k in cmds:
                best[k] = min(best[k], child_cpu(*cmds[k]))
    print(f"best of {args.repeat} runs, CPU seconds (user + system) of the process:")
    for k, v in best.items():
        mark = (
            ""
            if not k.startswith("nem-compile")
            else f"  ({'OK' if v <= 1.0 else 'ABOVE'} target <= 1 s)"
        )
        print(f"  {k:<28} {v:6.2f}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
