"""`nem-run` alone on the nine light CNNs (issue 30, run time):

  python bench/bench_run_cnn.py --prepare DIR [--models ...] [--device npm_pro_x1]
  python bench/bench_run_cnn.py DIR [--models ...] [--mode functional|timed] [--timeout 600]

`--prepare` compiles each model once (as `bench/bench_cnn.py` does) and keeps,
in DIR, `NAME.nem`, its weights `NAME.weights.npz`, onnx's inputs under the
program's buffer names `NAME.inputs.npz` and `NAME.json` (the output buffer,
its shape and dtype).  Without it, each kept program runs through the
`nem-run` command as a user would run it (`--input NAME.weights.npz --input
NAME.inputs.npz --output Y=out.npy`), in a process of its own, and the bench
prints its CPU seconds (user + system of the child) and, in functional mode,
the result's largest error relative to onnx's tolerance (<= 1 passes).
Compiling apart lets the run be measured again and again while the runtime
changes, without paying for the compile each time.

Figures (npm_pro_x1, CPU s, shared 2-core machine at load average 15, after
D-RT-RACE-GC / D-RT-MOVE-RUNS / D-RT-BLAS-THREADS; before/after pairs run at
the same moment): vgg19 133.0 -> 97.9 (timed mode 101.0), resnet50 33.6 ->
23.7, squeezenet 5.9 -> 5.5; after only: bvlc_alexnet 7.4, zfnet512 12.5,
shufflenet 5.2, inception_v1 10.4, inception_v2 17.7, densenet121 23.8; all
error/tol 0.000.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from nem.frontends.onnx import light_cnns


def prepare(name: str, device: str, out: Path) -> str:
    import numpy as np
    import onnx

    from nem.compile import compile_onnx

    path = light_cnns.path(name)
    inputs = light_cnns.feeds(onnx.load(str(path)))
    result = compile_onnx(str(path), device=device)
    (out / f"{name}.nem").write_text(result.nem)
    np.savez(out / f"{name}.weights.npz", **result.interface.weights)
    np.savez(
        out / f"{name}.inputs.npz",
        **{b: inputs[result.interface.onnx_names.get(b, b)] for b, _, _ in result.interface.inputs},
    )
    ((oname, shape, dtype),) = result.interface.outputs
    (out / f"{name}.json").write_text(
        json.dumps(
            {"output": oname, "shape": list(shape), "dtype": np.dtype(dtype).name, "device": device}
        )
    )
    return f"{name}: compiled, {len(result.nem.splitlines())} lines"


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(name: str, d: Path, mode: str, timeout: float) -> dict:
    import numpy as np

    meta = json.loads((d / f"{name}.json").read_text())
    nem_run = shutil.which("nem-run") or "nem-run"
    row: dict = {"model": name, "mode": mode}
    with tempfile.TemporaryDirectory() as tmp:
        got_path = Path(tmp) / "y.npy"
        cmd = [
            nem_run,
            str(d / f"{name}.nem"),
            "--device",
            meta["device"],
            "--mode",
            mode,
            "--no-progress",
        ]
        if mode == "functional":
            cmd += [
                "--input",
                str(d / f"{name}.weights.npz"),
                "--input",
                str(d / f"{name}.inputs.npz"),
                "--output",
                f"{meta['output']}={got_path}",
            ]
        t0, w0 = children_cpu(), time.perf_counter()
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            row["status"] = f"timeout ({timeout:.0f} s)"
            return row
        row.update(cpu_s=children_cpu() - t0, wall_s=time.perf_counter() - w0)
        if out.returncode:
            row["status"] = (
                f"exit {out.returncode}: " + (out.stderr.strip().splitlines() or ["?"])[-1][:140]
            )
            return row
        row["status"] = "ok"
        if mode == "functional":
            got = np.load(got_path)
            row["error"] = light_cnns.error(name, got)
            if row["error"] > 1:
                row["status"] = "WRONG"
        else:
            row["summary"] = " ".join(ln for ln in out.stdout.splitlines() if "cycle" in ln)[:100]
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path, help="directory of the compiled programs")
    p.add_argument("--prepare", action="store_true", help="compile the models into DIR")
    p.add_argument("--models", type=light_cnns.names, default=",".join(light_cnns.NAMES))
    p.add_argument("--device", default="npm_pro_x1")
    p.add_argument("--mode", choices=("functional", "timed"), default="functional")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per model")
    args = p.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        if args.prepare:
            print(prepare(name, args.device, args.dir), flush=True)
            continue
        row = run(name, args.dir, args.mode, args.timeout)
        err = f" error/tol {row['error']:.3f}" if "error" in row else ""
        print(
            f"{name:<14} {row['status']:<8} cpu {row.get('cpu_s', float('nan')):7.1f} s "
            f"wall {row.get('wall_s', float('nan')):7.1f} s{err} {row.get('summary', '')}",
            flush=True,
        )


if __name__ == "__main__":
    main()
