"""Real networks through nem-compile, beside IREE and onnxruntime (issue 30):

  python bench/bench_cnn.py [--models resnet50,vgg19] [--device npm_pro_x1]
                            [--iree DIR] [--timeout 600] [--no-timed]

The nine CNNs that ship with the `onnx` package
(`onnx/backend/test/data/light/`: AlexNet, DenseNet-121, Inception v1 and v2,
ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512), each as shipped, fed
as onnx's backend runner feeds them (`np.arange(n) / n` in float32 for every
graph input that is not an initializer) and compared with the expected
output stored beside the model at onnx's tolerances (rtol 1e-3, atol 1e-7;
DenseNet rtol 2e-3).  Per model, each in a process of its own (a crash or a
`--timeout` is a row, not the end of the run):

* nem: CPU seconds per stage of `nem-compile` (and the whole compile), NEM
  tasks run, share of FLOPs raised to NEM opcodes (`nem.compile.flops`),
  `nem-run` functional-mode CPU seconds (load + run), timed-mode cycles, the
  result's largest error relative to the tolerance (<= 1 passes);
* IREE (`iree-import-onnx --opset-version 17`, then `iree-compile` for the
  host CPU): compile CPU seconds of the same model in the same run, from
  `--iree DIR` (a directory holding both tools; default: found on PATH;
  `pip install 'iree-base-compiler[onnx]'` in another venv provides them);
* onnxruntime: session creation and one inference, CPU seconds.

It prints a table and, per model, nem's compile time over IREE's (the
issue's target: at most 3x; each model at most 60 s).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nem.cli.launch import BLAS_THREADS
from nem.frontends.onnx import light_cnns


def cpu() -> float:
    """CPU seconds of this process and its finished children."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def nem_one(name: str, device: str, timed: bool) -> dict:
    """Compile and run one model with nem (in this process)."""
    import onnx

    from nem.compile import CompileError, compile_onnx
    from nem.runtime.api import NemInterpreter

    path = light_cnns.path(name)
    model = onnx.load(str(path))
    inputs = light_cnns.feeds(model)
    row: dict = {"model": name}
    t0 = cpu()
    stages: dict[str, float] = {}
    last = [t0]

    def progress(stage, result):
        if result is not None:
            now = cpu()
            stages[stage] = stages.get(stage, 0.0) + now - last[0]
            last[0] = now
        else:
            last[0] = cpu()

    try:
        result = compile_onnx(str(path), device=device, progress=progress)
    except CompileError as e:
        row.update(
            status=f"compile failed in {e.stage}: {str(e).splitlines()[0][:140]}",
            compile_s=cpu() - t0,
            stages=stages,
        )
        return row
    row.update(compile_s=cpu() - t0, stages=stages)
    if result.flops is not None:
        row["raised"] = result.flops.share
    t1 = cpu()
    it = NemInterpreter(device=device)
    it.load_string(result.nem, file=f"{name}.nem")
    for wname, arr in result.interface.weights.items():
        it.write_tensor(wname, arr)
    for bname, _, _ in result.interface.inputs:
        it.write_tensor(bname, inputs[result.interface.onnx_names.get(bname, bname)])
    res = it.run()
    ((oname, shape, dtype),) = result.interface.outputs
    got = it.read_tensor(oname, shape, dtype)
    row["run_s"] = cpu() - t1
    row["tasks"] = res.tasks_run
    row["error"] = light_cnns.error(name, got)
    row["status"] = (
        ("ok" if row["error"] <= 1 else "WRONG")
        if res.ok
        else f"run: {res.status}, {res.race_count} races"
    )
    if timed:
        it = NemInterpreter(device=device)
        it.load_string(result.nem, file=f"{name}.nem")
        it.set_mode("timed")
        row["cycles"] = it.run().cycle_count
    return row


def iree_one(name: str, tools: Path | None, timeout: float) -> dict:
    """IREE's import and compile of one model, CPU seconds (children)."""
    imp = shutil.which("iree-import-onnx", path=str(tools) if tools else None)
    comp = shutil.which("iree-compile", path=str(tools) if tools else None)
    if not imp or not comp:
        return {"iree": "not found (--iree DIR)"}
    path = light_cnns.path(name)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = cpu()
        try:
            subprocess.run(
                [imp, str(path), "--opset-version", "17", "-o", f"{tmp}/m.mlir"],
                check=True,
                capture_output=True,
                timeout=timeout,
            )
            subprocess.run(
                [
                    comp,
                    f"{tmp}/m.mlir",
                    "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=host",
                    "-o",
                    f"{tmp}/m.vmfb",
                ],
                check=True,
                capture_output=True,
                timeout=timeout,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            return {"iree": f"failed: {type(e).__name__}"}
        return {"iree_s": cpu() - t0}


def ort_one(name: str) -> dict:
    import onnx
    import onnxruntime as ort

    path = light_cnns.path(name)
    inputs = light_cnns.feeds(onnx.load(str(path)))
    t0 = cpu()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    t1 = cpu()
    sess.run(None, inputs)
    return {"ort_session_s": t1 - t0, "ort_run_s": cpu() - t1}


def child(args: argparse.Namespace) -> None:
    row = nem_one(args.one, args.device, not args.no_timed)
    print(json.dumps(row))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=light_cnns.names, default=",".join(light_cnns.NAMES))
    p.add_argument("--device", default="npm_pro_x1")
    p.add_argument("--iree", type=Path, help="directory of iree-import-onnx and iree-compile")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per model and tool")
    p.add_argument("--no-timed", action="store_true", help="skip the timed-mode run")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        child(args)
        return
    rows = []
    for name in args.models:
        cmd = [sys.executable, __file__, "--one", name, "--device", args.device]
        if args.no_timed:
            cmd.append("--no-timed")
        t0 = time.perf_counter()
        try:
            # the run as nem-run makes it: one BLAS thread unless the caller says
            # otherwise (D-RT-BLAS-THREADS; the API leaves the process's setting alone)
            out = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=args.timeout,
                env={BLAS_THREADS[0]: BLAS_THREADS[1], **os.environ, "PYTHONUNBUFFERED": "1"},
            )
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            row = (
                json.loads(lines[-1])
                if lines
                else {
                    "model": name,
                    "status": "crash: " + (out.stderr.strip().splitlines() or ["?"])[-1][:140],
                }
            )
        except subprocess.TimeoutExpired:
            row = {"model": name, "status": f"timeout ({args.timeout:.0f} s)"}
        row["wall_s"] = time.perf_counter() - t0
        row.update(iree_one(name, args.iree, args.timeout))
        row.update(ort_one(name))
        rows.append(row)
        report(row)
    print("\nmodel            status   nem compile s  IREE s  ratio  run s  tasks  raised  cycles")
    for r in rows:
        iree = r.get("iree_s")
        comp = r.get("compile_s")
        ratio = f"{comp / iree:5.2f}" if comp and iree else "    -"
        print(
            f"{r['model']:<16} {str(r.get('status'))[:8]:<8} "
            f"{comp if comp is not None else float('nan'):13.1f} "
            f"{iree if iree is not None else float('nan'):7.1f} {ratio} "
            f"{r.get('run_s', float('nan')):6.1f} {r.get('tasks', 0):6d} "
            f"{r.get('raised', float('nan')):6.1%} {r.get('cycles', 0):7d}"
        )


def report(row: dict) -> None:
    stages = " ".join(f"{k} {v:.1f}" for k, v in row.get("stages", {}).items())
    print(
        f"{row['model']}: {row.get('status')}; nem compile {row.get('compile_s', 0):.1f} s CPU "
        f"({stages}); IREE {row.get('iree_s', row.get('iree'))}; onnxruntime session "
        f"{row.get('ort_session_s', 0):.2f} s, inference {row.get('ort_run_s', 0):.2f} s",
        flush=True,
    )


if __name__ == "__main__":
    main()
