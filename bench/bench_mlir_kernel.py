"""Escape-hatch kernel benchmark (issue 12 "Numbers"; D-RT-MLIR-JIT):

  python bench/bench_mlir_kernel.py [--interpreted]

The 256x512x128 f32 matmul affine nest (i, j, k; C[i, j] += A[i, k] * B[k, j])
as one `compute op="mlir.kernel"` task, run natively (compiled once with
upstream MLIR's ExecutionEngine) versus numpy's `A @ B` on the same arrays,
measured in the same run.  Target: within 3x of numpy.  The first run's
compile time is reported apart; the task time is the best of several runs
of the whole task (the engine binding regions, the kernel, the write-back),
through `NemInterpreter`.  The native result is checked bit for bit against
the sequential f32 sum (the interpreter's semantics).

--interpreted also times xDSL's interpreter on a 16x16x16 matmul nest and
prints its cost per scalar operation (the figure `nem.runtime.escape_hatch.SECONDS_PER_OP`
uses for its estimates).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nem.runtime import NemInterpreter
from nem.runtime.escape_hatch import EscapeHatch
from nem.runtime.kernels import Tensor
from nem.runtime.mlir_kernel import CompiledKernel


def matmul_kernel(m: int, n: int, k: int) -> str:
    return f"""func.func @kernel(%A: memref<{m}x{k}xf32>, %B: memref<{k}x{n}xf32>, %C: memref<{m}x{n}xf32>) {{
  affine.for %i = 0 to {m} {{
    affine.for %j = 0 to {n} {{
      affine.for %k = 0 to {k} {{
        %a = affine.load %A[%i, %k] : memref<{m}x{k}xf32>
        %b = affine.load %B[%k, %j] : memref<{k}x{n}xf32>
        %c = affine.load %C[%i, %j] : memref<{m}x{n}xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<{m}x{n}xf32>
      }}
    }}
  }}
  func.return
}}"""


def program(m: int, n: int, k: int) -> str:
    text = " ".join(matmul_kernel(m, n, k).split()).replace('"', '\\"')
    return f"""program escape_matmul:
buffer A : DDR (size={m * k * 4}, align=64)
buffer B : DDR (size={k * n * 4}, align=64)
buffer C : DDR (size={m * n * 4}, align=64)
c = compute.async in region(A, 0, {m * k * 4}) elem=f32, shape=[{m}, {k}], layout=MK, region(B, 0, {k * n * 4}) elem=f32, shape=[{k}, {n}], layout=KN out region(C, 0, {m * n * 4}) elem=f32, shape=[{m}, {n}], layout=MN op="mlir.kernel" kernel="{text}"
wait(c)
"""


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def native(m: int = 256, n: int = 512, k: int = 128, repeat: int = 20) -> float:
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    it = NemInterpreter()
    it.escape_hatch.set_backend("native")
    it.load_string(program(m, n, k))
    it.write_tensor("A", a)
    it.write_tensor("B", b)

    def task():
        it.write_tensor("C", np.zeros((m, n), np.float32))
        res = it.run()
        assert res.status == "completed", res.error

    t0 = time.perf_counter()
    task()
    first = time.perf_counter() - t0
    got = it.read_tensor("C", (m, n), np.float32)
    want = np.zeros((m, n), np.float32)
    for kk in range(k):
        want = want + a[:, kk : kk + 1] * b[kk : kk + 1, :]  # sequential f32, rounded per op
    assert np.array_equal(got, want), "native result differs from the sequential f32 sum"
    t_task = best(task, repeat)
    ins, outs = [Tensor(a, "f32"), Tensor(b, "f32")], [Tensor(np.zeros((m, n), np.float32), "f32")]
    attrs = {"op": "mlir.kernel", "kernel": " ".join(matmul_kernel(m, n, k).split())}
    t_kernel = best(lambda: it.escape_hatch.run_task(ins, outs, attrs), repeat)
    for _ in range(3):
        a @ b
    t_np = best(lambda: a @ b, max(repeat, 50))
    print(f"matmul {m}x{n}x{k} f32 as an mlir.kernel task (native):")
    print(
        f"  first run (compile + run): {first * 1e3:8.1f} ms  "
        f"(compile ~{(first - t_task) * 1e3:.0f} ms)"
    )
    print(f"  task (NemInterpreter.run):  {t_task * 1e3:8.2f} ms")
    print(
        f"  kernel call alone:          {t_kernel * 1e3:8.2f} ms  (EscapeHatch.run_task, "
        "output copied for read-modify-write)"
    )
    print(f"  numpy A @ B:                {t_np * 1e3:8.2f} ms")
    ratio = t_task / t_np
    print(
        f"  ratio task / numpy: {ratio:.2f}x (target <= 3x)  kernel / numpy: {t_kernel / t_np:.2f}x"
    )
    return ratio


def interpreted(m: int = 16, n: int = 16, k: int = 16) -> None:
    hatch = EscapeHatch("interpreter")
    a = np.ones((m, k), np.float32)
    b = np.ones((k, n), np.float32)
    text = " ".join(matmul_kernel(m, n, k).split())
    ck = CompiledKernel(text)
    t = best(
        lambda: hatch.run_task(
            [Tensor(a, "f32"), Tensor(b, "f32")],
            [Tensor(np.zeros((m, n), np.float32), "f32")],
            {"op": "mlir.kernel", "kernel": text},
        ),
        2,
    )
    print(
        f"matmul {m}x{n}x{k} interpreted: {t:.2f} s for ~{ck.estimate:,} scalar ops: "
        f"{t / ck.estimate * 1e6:.1f} us per op"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--interpreted", action="store_true", help="also time the interpreter on a 16x16x16 nest"
    )
    args = p.parse_args()
    native()
    if args.interpreted:
        interpreted()


if __name__ == "__main__":
    main()
