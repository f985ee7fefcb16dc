"""Runs onnx backend test cases through a peer compiler, for
`bench_onnx_backend.py`; executed by the peers' Python (another venv with
IREE, TVM and onnxruntime), so it imports nothing of nem:

  PEER_PYTHON onnx_peer_runner.py {iree,tvm,onnxruntime} CASE_DIR... [--tmp DIR]

prints one JSON line per case: {"case", "status": pass|wrong|fail,
"detail", "compile_s", "run_s"} (CPU seconds, children included), judged as
onnx's runner judges (`Runner.assert_similar_outputs`, the loader's rtol and
atol: 1e-3 and 1e-7 for these folders).  Every peer gets the inputs of
`test_data_set_0` and, for a model of IR version 3 that lists its
initializers as graph inputs too, their values for those inputs; its outputs
are compared in the element types the model declares (IREE and TVM compute
f64 in f32 like nem does).

* iree: `iree-import-onnx --opset-version 17` (the upgrade IREE's importer
  offers), `iree-compile` for the host CPU (llvm-cpu), `iree.runtime`;
* tvm: `tvm.relax.frontend.onnx.from_onnx`, `DecomposeOpsForInference`,
  `LegalizeOps`, `tvm.compile(target="llvm")`, the Relax VM;
* onnxruntime: an `InferenceSession` on the CPU.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.runner import Runner


def cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def load(case_dir: str):
    """As `nem.cli.onnx_backend.load_case` (this runner imports nothing of nem)."""
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    data = os.path.join(case_dir, "test_data_set_0")

    def arrays(prefix: str) -> list[np.ndarray]:
        files = sorted(
            glob.glob(os.path.join(data, f"{prefix}_*.pb")),
            key=lambda f: int(f.rsplit("_", 1)[1].split(".")[0]),
        )
        return [numpy_helper.to_array(onnx.load_tensor(f)) for f in files]

    return model, arrays("input"), arrays("output")


def all_inputs(model: onnx.ModelProto, given: list[np.ndarray]) -> list[np.ndarray]:
    """The given inputs, then the values of the initializers the graph also
    lists as inputs (IR version 3)."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    rest = [inits[vi.name] for vi in model.graph.input[len(given) :] if vi.name in inits]
    return list(given) + rest


def declared(model: onnx.ModelProto, outs) -> list[np.ndarray]:
    res = []
    for vi, o in zip(model.graph.output, outs):
        elem = vi.type.tensor_type.elem_type
        arr = np.asarray(o)
        res.append(arr.astype(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else arr)
    return res


def run_iree(model, case_dir: str, inputs, tmp: str):
    import iree.runtime as rt

    bindir = os.path.dirname(sys.executable)
    mlir, vmfb = os.path.join(tmp, "m.mlir"), os.path.join(tmp, "m.vmfb")
    for cmd in (
        [
            os.path.join(bindir, "iree-import-onnx"),
            os.path.join(case_dir, "model.onnx"),
            "--opset-version",
            "17",
            "-o",
            mlir,
        ],
        [
            os.path.join(bindir, "iree-compile"),
            mlir,
            "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=host",
            "-o",
            vmfb,
        ],
    ):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode:
            msg = (
                [line for line in p.stderr.splitlines() if "error" in line]
                or p.stderr.splitlines()
                or ["exit %d" % p.returncode]
            )
            raise RuntimeError(f"{os.path.basename(cmd[0])}: {msg[0][:200]}")
    compiled = cpu()
    cfg = rt.Config("local-task")
    ctx = rt.SystemContext(config=cfg)
    with open(vmfb, "rb") as f:
        vm = rt.VmModule.copy_buffer(ctx.instance, f.read())
    ctx.add_vm_module(vm)
    name = next(n for n in vm.function_names if not n.endswith("$async") and n != "__init")
    fn = ctx.modules[vm.name][name]
    args = all_inputs(model, inputs)
    try:
        out = fn(*args)
    except ValueError as e:  # the initializers listed as inputs may have become constants
        m = re.search(r"expected (\d+) arguments", str(e))
        if m is None:
            raise
        out = fn(*args[: int(m.group(1))])
    outs = out if isinstance(out, (list, tuple)) else [out]
    return compiled, [np.asarray(o.to_host() if hasattr(o, "to_host") else o) for o in outs]


def run_tvm(model, case_dir: str, inputs, tmp: str):
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(model, keep_params_in_input=False)
    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod = relax.transform.LegalizeOps()(mod)
    ex = tvm.compile(mod, target="llvm")
    compiled = cpu()
    vm = relax.VirtualMachine(ex, tvm.cpu())
    nparams = len(mod["main"].params)
    args = all_inputs(model, inputs)[:nparams]
    out = vm["main"](*[tvm.runtime.tensor(a) for a in args])
    outs = [out] if hasattr(out, "numpy") else list(out)
    return compiled, [o.numpy() for o in outs]


def run_onnxruntime(model, case_dir: str, inputs, tmp: str):
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = cpu()
    names = [i.name for i in sess.get_inputs()]
    return compiled, sess.run(None, dict(zip(names, all_inputs(model, inputs))))


PEERS = {"iree": run_iree, "tvm": run_tvm, "onnxruntime": run_onnxruntime}


def one(peer: str, case_dir: str, tmp: str, rtol: float, atol: float) -> dict:
    row = {"case": os.path.basename(case_dir)}
    t0 = cpu()
    try:
        model, inputs, expected = load(case_dir)
        compiled, outs = PEERS[peer](model, case_dir, inputs, tmp)
    except Exception as e:  # the peer's own failure, whatever it raises
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        row.update(status="fail", detail=f"{type(e).__name__}: {first[:200]}", compile_s=cpu() - t0)
        return row
    row.update(compile_s=compiled - t0, run_s=cpu() - compiled)
    try:
        Runner.assert_similar_outputs(expected, declared(model, outs), rtol=rtol, atol=atol)
        row["status"] = "pass"
    except (AssertionError, ValueError, TypeError) as e:
        row.update(status="wrong", detail=(str(e).strip().splitlines() or [""])[0][:200])
    return row


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("peer", choices=sorted(PEERS))
    p.add_argument("cases", nargs="+")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-7)
    args = p.parse_args()
    for case in args.cases:
        tmp = tempfile.mkdtemp()
        try:
            print(json.dumps(one(args.peer, case, tmp, args.rtol, args.atol)), flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
