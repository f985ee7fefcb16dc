"""Runtime benchmarks (issue 4 "Numbers"), all in one run:

  python bench/bench_runtime.py            (about a minute)

(a) scheduling overhead: 100k small transfers in functional mode (race
    detection on, as in nem-run), microseconds per task and tasks/s;
    target <= 20 us/task.
(b) compute: tiled f32 and f16 GEMM and a tiled conv2d program versus the same
    arithmetic done directly in numpy on the whole tensors; target <= 1.5x.
(c) memory: tracemalloc peak of a 100k-iteration @max_in_flight(2) loop versus
    the same loop with 100 iterations; target within 10%.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from nem.runtime import NemInterpreter
from nem.runtime.numerics import to_float_out


def transfers_program(n: int, mif: int = 4, tile: int = 64) -> str:
    return f"""
program transfers:
const T = {n}
const tile = {tile}
buffer X_DDR : DDR (size=T * tile, align=64)
buffer X_L1 : L1 (size={mif} * tile, align=64)
loop i in [0..T-1] @max_in_flight({mif}):
  tX = transfer.async(dst=region(X_L1, (i mod {mif}) * tile, tile), src=region(X_DDR, i * tile, tile))
endloop
"""


def gemm_program(elem: str, M: int, K: int, N: int, tm: int) -> str:
    eb = {"f32": 4, "f16": 2}[elem]
    T = M // tm
    return f"""
device "npm_pro.nem"
program tiled_gemm:
const TM = {tm}
const K = {K}
const N = {N}
const T = {T}
const a_bytes = TM * K * {eb}
const b_bytes = K * N * {eb}
const y_bytes = TM * N * {eb}
buffer A_DDR : DDR (size=T * a_bytes, align=64)
buffer B_DDR : DDR (size=b_bytes, align=64)
buffer Y_DDR : DDR (size=T * y_bytes, align=64)
buffer A_L2 : L2 (size=2 * a_bytes, align=64)
buffer B_L2 : L2 (size=b_bytes, align=64)
buffer Y_L2 : L2 (size=2 * y_bytes, align=64)
B_l2 = region(B_L2, 0, b_bytes) elem={elem}, shape=[K, N], layout=KN
tB = transfer.sync(dst=B_l2, src=region(B_DDR, 0, b_bytes) elem={elem}, shape=[K, N], layout=KN)
loop i in [0..T-1] @max_in_flight(2):
  let A_i = region(A_L2, (i mod 2) * a_bytes, a_bytes) elem={elem}, shape=[TM, K], layout=MK
  let Y_i = region(Y_L2, (i mod 2) * y_bytes, y_bytes) elem={elem}, shape=[TM, N], layout=MN
  tA = transfer.async(dst=A_i, src=region(A_DDR, i * a_bytes, a_bytes) elem={elem}, shape=[TM, K], layout=MK)
  tG = gemm.async in A_i, B_l2 out Y_i deps=[tA] accum_type=f32
  tS = store.async(dst=region(Y_DDR, i * y_bytes, y_bytes) elem={elem}, shape=[TM, N], layout=MN, src=Y_i, deps=[tG])
  wait(tS)
endloop
"""


def conv_program(H: int, W: int, C: int, CO: int, th: int) -> str:
    T = H // th
    ih = th + 2
    return f"""
device "npm_pro.nem"
program tiled_conv:
const T = {T}
const x_bytes = {ih} * {W + 2} * {C} * 2
const xrow = {W + 2} * {C} * 2
const w_bytes = 3 * 3 * {C} * {CO} * 2
const y_bytes = {th} * {W} * {CO} * 2
buffer X_DDR : DDR (size={H + 2} * xrow, align=64)
buffer W_DDR : DDR (size=w_bytes, align=64)
buffer Y_DDR : DDR (size=T * y_bytes, align=64)
buffer X_L2 : L2 (size=2 * x_bytes, align=64)
buffer W_L2 : L2 (size=w_bytes, align=64)
buffer Y_L2 : L2 (size=2 * y_bytes, align=64)
W_l2 = region(W_L2, 0, w_bytes) elem=bf16, shape=[3, 3, {C}, {CO}], layout=HWIO
tW = transfer.sync(dst=W_l2, src=region(W_DDR, 0, w_bytes) elem=bf16, shape=[3, 3, {C}, {CO}], layout=HWIO)
loop i in [0..T-1] @max_in_flight(2):
  let X_i = region(X_L2, (i mod 2) * x_bytes, x_bytes) elem=bf16, shape=[1, {ih}, {W + 2}, {C}], layout=NHWC
  let Y_i = region(Y_L2, (i mod 2) * y_bytes, y_bytes) elem=bf16, shape=[1, {th}, {W}, {CO}], layout=NHWC
  tX = transfer.async(dst=X_i, src=region(X_DDR, i * {th} * xrow, x_bytes) elem=bf16, shape=[1, {ih}, {W + 2}, {C}], layout=NHWC)
  tC = conv2d.async in X_i, W_l2 out Y_i deps=[tX] accum_type=f32
  tS = store.async(dst=region(Y_DDR, i * y_bytes, y_bytes) elem=bf16, shape=[1, {th}, {W}, {CO}], layout=NHWC, src=Y_i, deps=[tC])
  wait(tS)
endloop
"""


def bench_transfers(n: int) -> dict:
    it = NemInterpreter(trace=False)
    it.load_string(transfers_program(n), "transfers.nem")
    t0, c0 = time.perf_counter(), time.process_time()
    r = it.run()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert r.status == "completed" and r.tasks_run == n and r.race_count == 0, r
    return {
        "tasks": n,
        "seconds": dt,
        "us_per_task": cpu / n * 1e6,
        "tasks_per_s": n / cpu,
        "wall_us_per_task": dt / n * 1e6,
    }


def _best(fn, reps: int = 3, setup=None) -> float:
    best = float("inf")
    for _ in range(reps):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_gemm(elem: str, M=2048, K=1024, N=512, tm=512) -> dict:
    dt = {"f32": np.float32, "f16": np.float16}[elem]
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype(dt)
    b = rng.uniform(-1, 1, (K, N)).astype(dt)
    it = NemInterpreter(trace=False)
    src = gemm_program(elem, M, K, N, tm)

    def setup():  # loading (parse, verify, allocate) is not part of the run
        it.load_string(src, "gemm.nem")
        it.write_tensor("A_DDR", a)
        it.write_tensor("B_DDR", b)

    def runtime():
        r = it.run()
        assert r.status == "completed" and r.race_count == 0, r

    def direct():  # the same arithmetic as the gemm kernel: f64 products/sums, one rounding
        return to_float_out(np.matmul(a.astype(np.float64), b.astype(np.float64)), elem)

    t_rt = _best(runtime, setup=setup)
    y = it.read_tensor("Y_DDR", (M, N), dt)
    ref = direct()
    assert np.array_equal(y, ref)
    t_np = _best(direct)

    def tiled():  # the same tiles through numpy alone: the runtime's own overhead
        for i in range(M // tm):
            to_float_out(
                np.matmul(a[i * tm : (i + 1) * tm].astype(np.float64), b.astype(np.float64)), elem
            )

    t_tiles = _best(tiled)
    return {
        "what": f"{elem} gemm {M}x{K}x{N} ({M // tm} tiles)",
        "runtime_s": t_rt,
        "numpy_s": t_np,
        "ratio": t_rt / t_np,
        "tiled_ratio": t_rt / t_tiles,
    }


def bench_conv(H=64, W=64, C=64, CO=64, th=16) -> dict:
    import ml_dtypes

    from nem.runtime.kernels import KERNELS, Tensor

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, H + 2, W + 2, C)).astype(ml_dtypes.bfloat16)
    w = rng.uniform(-1, 1, (3, 3, C, CO)).astype(ml_dtypes.bfloat16)
    it = NemInterpreter(trace=False)
    src = conv_program(H, W, C, CO, th)

    def setup():
        it.load_string(src, "conv.nem")
        it.write_tensor("X_DDR", x)
        it.write_tensor("W_DDR", w)

    def runtime():
        r = it.run()
        assert r.status == "completed" and r.race_count == 0, r

    y_out = np.zeros((1, H, W, CO), ml_dtypes.bfloat16)

    def direct():  # the whole tensor through the same kernel arithmetic, no tiling
        return KERNELS["conv2d"](
            [Tensor(x, "bf16"), Tensor(w, "bf16")],
            [Tensor(y_out, "bf16")],
            {
                "pads": [0, 0, 0, 0],
                "strides": [1, 1],
                "dilations": [1, 1],
                "groups": 1,
                "accum_type": "f32",
            },
        )[0]

    t_rt = _best(runtime, setup=setup)
    y = it.read_tensor("Y_DDR", (H // th, th, W, CO), ml_dtypes.bfloat16).reshape(1, H, W, CO)
    assert np.array_equal(y.view(np.uint16), direct().view(np.uint16))
    t_np = _best(direct)
    return {
        "what": f"bf16 conv2d 3x3 {H}x{W}x{C}->{CO} ({H // th} tiles)",
        "runtime_s": t_rt,
        "numpy_s": t_np,
        "ratio": t_rt / t_np,
    }


def peak_memory(n: int) -> int:
    it = NemInterpreter(trace=False)
    it.load_string(transfers_program(n, mif=2), "loop.nem")
    import gc

    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    r = it.run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert r.status == "completed" and r.tasks_run == n
    return peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfers", type=int, default=100_000)
    args = ap.parse_args()
    import os

    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    a = bench_transfers(args.transfers)
    print(
        f"(a) {a['tasks']} small transfers, functional mode, race detection on: "
        f"{a['us_per_task']:.1f} us/task CPU ({a['wall_us_per_task']:.1f} wall), "
        f"{a['tasks_per_s']:.0f} tasks/s "
        f"(target <= 20 us/task: {'OK' if a['us_per_task'] <= 20 else 'MISSED'})"
    )
    for res in (bench_gemm("f32"), bench_gemm("f16"), bench_conv()):
        print(
            f"(b) {res['what']}: runtime {res['runtime_s'] * 1e3:.1f} ms, numpy whole-tensor "
            f"{res['numpy_s'] * 1e3:.1f} ms, ratio {res['ratio']:.2f}x "
            f"(target <= 1.5x: {'OK' if res['ratio'] <= 1.5 else 'MISSED'})"
            + (
                f"; vs the same tiles in numpy {res['tiled_ratio']:.2f}x"
                if "tiled_ratio" in res
                else ""
            )
        )
    small, big = peak_memory(100), peak_memory(100_000)
    print(
        f"(c) peak memory @max_in_flight(2): 100 iterations {small / 1024:.1f} KiB, "
        f"100k iterations {big / 1024:.1f} KiB, ratio {big / small:.3f} "
        f"(target within 10%: {'OK' if big <= 1.1 * small else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
