"""The runtime's Python API: loading, running, stepping, breakpoints, inspection,
traces, diagnostics.  RULE: TASK-05 TASK-06 TASK-08 TASK-09 TASK-10 HAZ-04 EXEC-03"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from runtime_programs import ELTWISE, PIPE, pingpong

from nem.dialect.diagnostics import NemDiagnosticError
from nem.runtime import NemInterpreter


def test_run_eltwise_program_end_to_end():
    it = NemInterpreter()
    prog = it.load_string(ELTWISE, "elt.nem")
    assert "eltwise" in repr(prog)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 16)).astype(np.float32)
    y = rng.standard_normal((64, 16)).astype(np.float32)
    it.write_tensor("X_L2", x)
    it.write_tensor("Y_L2", y)
    r = it.run()
    assert r.status == "completed" and r.race_count == 0 and not r.unconsumed
    assert r.counts == {"transfer": 8, "add": 4, "relu": 4, "store": 4}
    assert np.array_equal(it.read_tensor("Z_L2", (64, 16), np.float32), np.maximum(x + y, 0))
    assert r.max_active_iterations == {8: 2}


def test_session_step_breakpoints_and_inspection():
    it = NemInterpreter()
    it.load_string(ELTWISE, "elt.nem")
    it.write_tensor("X_L2", np.arange(1024, dtype=np.float32))
    with it.start() as s:
        first = s.step()
        assert first.task_id == "tX" and first.task_type == "transfer.async" and first.line == 15
        assert first.iteration == "i=0"
        s.add_breakpoint(task="tA", loop_iter=1)
        assert s.run() == "breakpoint"
        ready = s.get_ready_tasks()
        assert (ready[0].name, ready[0].iteration, ready[0].state) == ("tA", {"i": 1}, "ready")
        assert repr(ready[0]).startswith("<Task tA ") and "[i=1] ready" in repr(ready[0])
        x1 = s.read_region("x", i=1)
        assert x1.dtype == np.float32 and x1.shape == (16, 16)
        assert np.array_equal(x1.reshape(-1), np.arange(256, 512, dtype=np.float32))
        toks = s.get_tokens()
        assert toks["tX[i=1]"].satisfied is True
        assert toks["tX[i=1]"].produced_by.name == "tX"
        assert "[breakpoint]" in repr(s) and "tasks run" in repr(s)
        s.clear_breakpoints()
        s.add_breakpoint(line=19)
        assert s.continue_() == "breakpoint"
        assert s.sched.peek().tpl.label == "tS"
        s.clear_breakpoints()
        assert s.run_until(token="tR") == "paused"
        assert s.run() == "completed"
        table = s.dump_trace()
        assert "tS" in table and "store.sync" in table
        assert "X_L2" in s.dump_buffers() and "0x0" in s.dump_buffers()
        assert "Region: x" in s.dump_region("x", i=0)
        assert len(s.read_memory("L2", 0, 16)) == 16
        assert s.read_buffer("Z_L2").dtype == np.uint8


def test_step_n_and_step_iteration():
    it = NemInterpreter()
    it.load_string(pingpong(2), "pp.nem")
    s = it.start()
    res = s.step(3)
    assert [r.task_id for r in res] == ["tX", "tS", "tX"]
    assert s.step_iteration() == "paused"
    assert s.step(100)[-1].task_id == "tS"
    assert s.status == "completed"


def test_export_trace_json_and_csv(tmp_path):
    it = NemInterpreter()
    it.set_mode("timed")
    it.load_string(ELTWISE, "elt.nem")
    s = it.start()
    s.run()
    s.export_trace(str(tmp_path / "t.json"))
    s.export_trace(str(tmp_path / "t.csv"))
    doc = json.loads((tmp_path / "t.json").read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {"DMA[0]", "DMA[1]", "CSTL[0]"} <= names or {"DMA[0]", "CSTL[0]"} <= names
    procs = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert "engine 0" in procs
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    tasks = [e for e in xs if e["cat"] != "critical-path"]
    assert len(tasks) == 20 and all(e["dur"] > 0 for e in xs)
    # the critical path's track (D-RT-ROOFLINE, session 43): a slice per segment
    assert "critical path" in procs and len(xs) == 20 + len(s.critical_path())
    rows = list(csv.reader((tmp_path / "t.csv").open()))
    assert rows[0][:4] == ["step", "task", "op", "iteration"]
    assert len([r for r in rows[1:] if r[6] != "critical-path"]) == 20
    assert len(rows) == 21 + len(s.critical_path())


def test_parse_error_is_a_diagnostic_with_location():
    it = NemInterpreter()
    with pytest.raises(NemDiagnosticError) as e:
        it.load_string("program p:\nbuffer B : L2 (size=64\n", "bad.nem")
    assert "bad.nem:" in e.value.diagnostics[0].headline()


def test_runtime_out_of_bounds_names_line_and_iteration():
    src = """\
program oob:
buffer X_L2 : L2 (size=256, align=64)
buffer X_L1 : L1 (size=64, align=64)
loop i in [0..3]:
  t = transfer.sync(dst=region(X_L1, 0, 64), src=region(X_L2, i * 64 + 32, 64))
endloop
"""
    it = NemInterpreter()
    it.load_string(src, "oob.nem", check=False)  # the static REG-02 check would catch it
    r = it.run()
    assert r.status == "error"
    d = r.error
    assert d.rule == "HAZ-04" and d.loc.line == 5 and "i=3" in d.message
    assert "X_L2" in d.message


def test_sync_equals_async_plus_wait():
    a = pingpong(2).replace(
        "tS = store.async(dst=dst, src=slot, deps=[tX])\n  wait(tS)",
        "tS = store.sync(dst=dst, src=slot, deps=[tX])",
    )
    outs = []
    for src in (pingpong(2), a):
        it = NemInterpreter()
        it.load_string(src, "p.nem")
        it.write_tensor("X_L2", np.arange(1536, dtype=np.uint8) % 251)
        r = it.run()
        assert r.race_count == 0
        outs.append(it.read_buffer("Y_L2"))
    assert np.array_equal(outs[0], outs[1])
    assert np.array_equal(outs[0], np.arange(1536, dtype=np.uint8) % 251)


def test_unconsumed_token_is_reported():
    src = """\
program unconsumed:
buffer A : L2 (size=64, align=64)
buffer B : L2 (size=64, align=64)
t = transfer.async(dst=region(B, 0, 64), src=region(A, 0, 64))
"""
    it = NemInterpreter()
    it.load_string(src, "u.nem")
    r = it.run()
    assert r.status == "completed"
    assert len(r.unconsumed) == 1 and "token t is never consumed" in str(r.unconsumed[0])
    assert "u.nem:4" in str(r.unconsumed[0])


def test_repr_and_device_info():
    it = NemInterpreter(device="npm_pro")
    assert "npm_pro" in repr(it)
    info = it.get_device_info()
    assert info["num_engines"] == 4 and info["ddr_size"] is None  # D-SEM-DDR
    it.load_string(pingpong(2), "p.nem")
    s = it.start()
    s.step()
    r = s.region("slot", i=0)  # a loop-body region names its iteration
    assert "X_L1" in repr(r) and "L1[0]" in repr(r)
    assert (
        it.ddr_info()["size"] == 0
    )  # DDR holds exactly the program's DDR buffers (none), D-SEM-DDR


def _pipe() -> NemInterpreter:
    it = NemInterpreter()
    it.load_string(PIPE, "pipe.nem")
    return it


@pytest.mark.parametrize(
    "call, exc, message",
    [
        (
            lambda it: it.prepare("pipe.nem"),
            TypeError,
            r"program must be a Program \(what load\(\) returns\), not 'pipe\.nem' \(str\): load the "
            r"file first, e\.g\. it\.load\('pipe\.nem'\)",
        ),
        (lambda it: it.run("pipe.nem"), TypeError, r"program must be a Program .*not 'pipe\.nem'"),
        (lambda it: it.start(3), TypeError, r"program must be a Program .*not 3 \(int\)"),
        (lambda it: it.run_schedules(-1), ValueError, r"k must be >= 1, not -1"),
        (lambda it: it.run_schedules(0), ValueError, r"k must be >= 1, not 0"),
        (lambda it: it.run_schedules("2"), TypeError, r"k must be an int, not '2' \(str\)"),
        (
            lambda it: it.run_schedules(2, seed=-1),
            ValueError,
            r"seed must be >= 0, not -1 \(Python's random takes -S as S\)",
        ),
        (lambda it: it.explore(0), ValueError, r"max_schedules must be >= 1, not 0"),
        (
            lambda it: it.set_scheduling("random", "x"),
            TypeError,
            r"seed must be an int, not 'x' \(str\)",
        ),
        (lambda it: it.set_scheduling("random", 1.5), TypeError, r"seed must be an int, not 1\.5"),
        (lambda it: it.set_scheduling("random", -1), ValueError, r"seed must be >= 0, not -1"),
        (
            lambda it: it.load_string(PIPE, "f.nem", syntax="cobol"),
            ValueError,
            r"syntax must be 'nem' or 'mlir' \(or None: by the file's extension\), not 'cobol'",
        ),
    ],
    ids=[
        "prepare-str",
        "run-str",
        "start-int",
        "k-negative",
        "k-zero",
        "k-str",
        "seed-negative",
        "explore-zero",
        "seed-str",
        "seed-float",
        "scheduling-seed-negative",
        "syntax",
    ],
)
def test_bad_arguments_are_one_line_errors(call, exc, message):
    """outsider28_rt finding 10: `prepare("pipe.nem")` raised AttributeError
    from inside, `run_schedules(-1)` returned ([], None) (and `run_schedules(0)`
    left the memory of a schedule with seed -1), a str seed and an unknown
    syntax were accepted without a word."""
    it = _pipe()
    with pytest.raises(exc, match="^" + message):
        call(it)
    assert it.policy == "source" and it.seed == 0  # nothing changed


def test_good_arguments_still_work():
    it = _pipe()
    prog = it.program
    assert it.prepare(prog) and it.run(prog).ok
    it.set_scheduling("random", np.int64(3))
    assert it.seed == 3 and it.run().ok
    results, diff = it.run_schedules(2, seed=np.int64(0))
    assert len(results) == 2 and diff is None
    assert it.explore(1).schedules == 1
    again = NemInterpreter()
    again.load_string(PIPE, "pipe.txt", syntax="nem")
    assert again.run().ok
