"""A scheduled run shares what iterations have in common: a statement's region
instances by geometry (`engine.SEEN_REGIONS`) and its bound data effects by
region instances and attributes (`scheduler.EFFECTS`).  Sharing must not
change anything a run reports or writes: each test runs a program with the
sharing and without it (both limits 0: every iteration instantiates and binds
afresh, as before) and compares result, races, trace and every byte."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_programs import run_summary
from semantics_programs import on_generated_programs

from nem.runtime import NemInterpreter
from nem.runtime import engine as engine_mod
from nem.runtime import scheduler as sched_mod

# ping-pong slots (i mod 2) met again every other iteration, a tile whose
# shape (not its extent) depends on i, a convolution and an add over the
# same L1 slots as the transfers that fill them, and a subtraction whose
# inputs change slots while its output stays
PINGPONG = """\
program reuse:
buffer X : DDR (size=8 * 256, align=64)
buffer W : DDR (size=576, align=64)
buffer Y : DDR (size=8 * 64, align=64)
buffer Y2 : DDR (size=4 * 64, align=64)
buffer L : L1 (size=4096, align=64)
tw = transfer.sync(dst=region(L, 2048, 576) elem=f32, shape=[3, 3, 4, 4], layout=HWIO, src=region(W, 0, 576) elem=f32, shape=[3, 3, 4, 4], layout=HWIO)
loop i in [0..7] @max_in_flight(2):
  tx = transfer.async(dst=region(L, (i mod 2) * 256, 256) elem=f32, shape=[1, 4, 4, 4], layout=NHWC, src=region(X, i * 256, 256) elem=f32, shape=[1, 4, 4, 4], layout=NHWC)
  c = conv2d.async in region(L, (i mod 2) * 256, 256) elem=f32, shape=[1, 4, 4, 4], layout=NHWC, region(L, 2048, 576) elem=f32, shape=[3, 3, 4, 4], layout=HWIO out region(L, (i mod 2) * 64 + 1024, 64) elem=f32, shape=[1, 2, 2, 4], layout=NHWC deps=[tx] pads=[0, 0, 0, 0] strides=[1, 1] dilations=[1, 1]
  a = add.async in region(L, (i mod 2) * 64 + 1024, 64) elem=f32, shape=[1, 2, 2, 4], layout=NHWC, region(L, (i mod 2) * 64 + 1024, 64) elem=f32, shape=[1, 2, 2, 4], layout=NHWC out region(L, (i mod 2) * 64 + 1536, 64) elem=f32, shape=[1, 2, 2, 4], layout=NHWC deps=[c]
  h = transfer.async(dst=region(L, (i mod 2) * 64 + 1792, 12) elem=f32, shape=[i mod 3 + 1], layout=C, src=region(L, (i mod 2) * 64 + 1536, 12) elem=f32, shape=[i mod 3 + 1], layout=C, deps=[a])
  ty = transfer.async(dst=region(Y, i * 64, 64) elem=f32, shape=[1, 2, 2, 4], layout=NHWC, src=region(L, (i mod 2) * 64 + 1536, 64) elem=f32, shape=[1, 2, 2, 4], layout=NHWC, deps=[h])
  wait(ty)
endloop
loop j in [0..3]:
  d = sub.sync in region(L, (j mod 2) * 64 + 1536, 64) elem=f32, shape=[16], layout=C, region(L, ((j + 1) mod 2) * 64 + 1536, 64) elem=f32, shape=[16], layout=C out region(L, 3072, 64) elem=f32, shape=[16], layout=C
  td = transfer.sync(dst=region(Y2, j * 64, 64), src=region(L, 3072, 64))
endloop
"""


def _run(src: str, share: bool, monkeypatch, inputs) -> tuple:
    with monkeypatch.context() as m:
        if not share:
            m.setattr(engine_mod, "SEEN_REGIONS", 0)
            m.setattr(sched_mod, "EFFECTS", 0)
        it = NemInterpreter()
        it.load_string(src, "r.nem")
        inputs(it)
        s = it.start()
        r = s.run_to_end()
        mem = it.program.memory
        image = [bytes(mem.instance_bytes(b)) for b in mem.all_buffers()]
        trace = [(row[0], row[1].label, row[2], row[3]) for row in s.trace]
        return run_summary(it, r), image, trace


def test_shared_effects_compute_what_fresh_ones_do(monkeypatch):
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, 8 * 4 * 4 * 4).astype(np.float32)
    w = rng.uniform(-1, 1, 3 * 3 * 4 * 4).astype(np.float32)
    x[5], x[17], w[3] = np.nan, -0.0, np.float32(1e-40)  # NaN, -0, a subnormal

    def inputs(it):
        it.write_tensor("X", x)
        it.write_tensor("W", w)

    shared = _run(PINGPONG, True, monkeypatch, inputs)
    fresh = _run(PINGPONG, False, monkeypatch, inputs)
    assert shared == fresh
    assert shared[0][0] == "completed" and shared[0][1] == 1 + 8 * 5 + 4 * 2


@on_generated_programs(20261128, 30)
@pytest.mark.slow  # 3 s
def test_shared_runs_equal_fresh_runs_on_generated_programs(src):
    """The differential programs (races, pipelined and nested loops, loop-body
    buffers): result, races, trace and memory are those of fresh binding."""
    mp = pytest.MonkeyPatch()
    try:

        def inputs(it):
            it.randomize_inputs(3)

        assert _run(src, True, mp, inputs) == _run(src, False, mp, inputs)
    finally:
        mp.undo()
