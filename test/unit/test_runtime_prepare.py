"""`NemInterpreter.prepare` (decision D-RT-PREPARE): the plan of a functional
run recorded without its data effects.  A prepared program must be
indistinguishable from an unprepared one: same memory, result, races, trace
and errors; and preparing must not read or write memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from runtime_programs import DIVS, ELTWISE, issued_tasks, pingpong, run_summary
from semantics_programs import on_generated_programs

from nem.runtime import NemInterpreter
from nem.runtime.memory import COMMIT_LIMIT, Memory

# a wait for a token whose task comes after it (MLIR input allows forward references)
DEADLOCK = (Path(__file__).parents[1] / "lit" / "run" / "Inputs" / "deadlock.mlir").read_text()

OUT_OF_BOUNDS = """\
program oob:
buffer A : L1 (size=256, align=64)
buffer B : L1 (size=256, align=64)
loop i in [0..3] @max_in_flight(1):
  t = transfer.sync(dst=region(B, i * 64, 64), src=region(A, i * 96, 64))
endloop
"""


def _image(it: NemInterpreter) -> list[bytes]:
    return [bytes(it.program.memory.instance_bytes(b)) for b in it.program.memory.all_buffers()]


def _both(src: str, inputs, file: str = "p.nem"):
    """(unprepared interpreter, its result, prepared interpreter, its result):
    the same inputs, written before `prepare`, which must leave them as they are."""
    plain = NemInterpreter()
    plain.load_string(src, file)
    inputs(plain)
    r_plain = plain.run()
    prepared = NemInterpreter()
    prepared.load_string(src, file)
    inputs(prepared)
    before = _image(prepared)
    prepared.prepare()
    assert _image(prepared) == before, "prepare wrote memory"
    return plain, r_plain, prepared, prepared.run()


def test_prepared_first_run_only_computes(monkeypatch):
    x = np.random.default_rng(0).uniform(-2, 2, 1024).astype(np.float32)
    y = np.random.default_rng(1).uniform(-2, 2, 1024).astype(np.float32)

    def inputs(it):
        it.write_tensor("X_L2", x)
        it.write_tensor("Y_L2", y)

    it = NemInterpreter()
    it.load_string(ELTWISE, "e.nem")
    issued = issued_tasks(monkeypatch)
    assert it.prepare() is True
    assert issued and it.program.compiled.replay is not None
    issued.clear()
    inputs(it)
    r = it.run()
    assert issued == []  # the plan was replayed: nothing scheduled
    assert r.status == "completed" and r.tasks_run == 20
    np.testing.assert_array_equal(
        it.read_tensor("Z_L2").reshape(-1), np.maximum(x + y, 0).astype(np.float32)
    )
    assert it.prepare() is True and issued == []  # planned already: no second walk


def test_prepared_run_reports_the_same_races_and_trace():
    plain, ra, prepared, rb = _both(pingpong(N=3), lambda it: None, "pp.nem")
    assert ra.race_count > 0
    assert run_summary(prepared, rb) == run_summary(plain, ra)


def test_data_dependent_error_in_a_prepared_run_is_reported_as_in_a_normal_run():
    y = np.ones(256, np.int32)
    y[200] = 0  # iteration 3 divides by zero

    def inputs(it):
        it.write_tensor("X", np.arange(256, dtype=np.int32))
        it.write_tensor("Y", y)

    plain, ra, prepared, rb = _both(DIVS, inputs, "d.nem")
    assert rb.status == "error" and "iteration i=3" in rb.error.message
    assert run_summary(prepared, rb) == run_summary(plain, ra)
    assert _image(prepared) == _image(plain)


# a `compute` of a name the registry does not have: found when the task is bound
UNKNOWN_OP = """\
program p:
buffer X : L2 (size=64)
buffer Y : L2 (size=64)
x = region(X, 0, 64) elem=f32, shape=[16], layout=N
y = region(Y, 0, 64) elem=f32, shape=[16], layout=N
t = compute.sync in x out y op="whatever"
"""


@pytest.mark.parametrize(
    "src,file,status",
    [
        (DEADLOCK, "s.mlir", "deadlock"),
        (OUT_OF_BOUNDS, "s.nem", "error"),
        (UNKNOWN_OP, "u.nem", "error"),
    ],
)
def test_a_walk_that_stops_plans_nothing_and_the_run_reports_it(src, file, status):
    """RULE: HAZ-04 - a deadlock or a run-time error does not depend on the
    data: `prepare` returns False and the run reports it as without it."""
    it = NemInterpreter()
    it.load_string(src, file, check=False)
    assert it.prepare() is False
    assert it.program.compiled.replay is None
    plain = NemInterpreter()
    plain.load_string(src, file, check=False)
    r, r_plain = it.run(), plain.run()
    assert r.status == status
    assert run_summary(it, r) == run_summary(plain, r_plain)


@pytest.mark.parametrize("setup", ["timed", "random", "trace"])
def test_runs_with_other_options_are_scheduled(monkeypatch, setup):
    """A plan is kept for the options it was made with: timed and random runs
    are never planned, and a plan made with other options is not replayed."""
    it = NemInterpreter()
    it.load_string(ELTWISE, "e.nem")
    if setup == "timed":
        it.set_mode("timed")
        assert it.prepare() is False
    elif setup == "random":
        it.set_scheduling("random", seed=1)
        assert it.prepare() is False
    else:
        assert it.prepare() is True
        it.tracing = not it.tracing
    issued = issued_tasks(monkeypatch)
    assert it.run().status == "completed"
    assert issued


def test_commit_keeps_every_byte_and_stops_at_its_limit():
    m = Memory(num_engines=1, l2_size=1 << 20, l1_size=1 << 16)
    for lv in m.by_id:
        lv.top = lv.size
    rng = np.random.default_rng(3)
    for lv in m.by_id:
        lv.data[::4093] = rng.integers(1, 255, lv.data[::4093].shape, dtype=np.uint8)
    before = [lv.data.copy() for lv in m.by_id]
    m.commit(limit=100_000)
    m.commit()
    assert all(np.array_equal(a, lv.data) for a, lv in zip(before, m.by_id))
    assert COMMIT_LIMIT >= 1 << 20


@on_generated_programs(20261127, 40)
@pytest.mark.slow  # 3 s
def test_prepared_runs_equal_unprepared_runs_on_generated_programs(src):
    """The differential programs (races, pipelined and nested loops, local
    buffers): a prepared run and an unprepared one agree on the result, the
    races and every byte of memory."""

    def inputs(it):
        it.randomize_inputs(5)

    plain, ra, prepared, rb = _both(src, inputs, "g.nem")
    assert run_summary(prepared, rb) == run_summary(plain, ra)
    assert _image(prepared) == _image(plain)
