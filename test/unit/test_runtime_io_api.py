"""The runtime's Python API for I/O and inspection (issue 14; issue 10's
"tensor I/O written twice"): one tensor I/O implementation with the same
checks for the interpreter and a session (D-RT-TENSOR-IO), `Task`/`Token`
snapshots, and unknown names in breakpoints and `run_until` (D-RT-NAMES)."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_programs import ELTWISE

from nem.runtime.api import NemInterpreter
from nem.runtime.inspection import Task, Token

TYPED = """\
program typed:
buffer A : L2 (size=256, align=64)
buffer Q : L2 (size=8)
buffer R : L2 (size=64)
a = region(A, 0, 128) elem=f16, shape=[8, 8], layout=MN
s = region(A, 128, 128) elem=f32, shape=[2, 3], strides=[8, 1]
q = region(Q, 0, 8) elem=i4, shape=[16], layout=C
t = transfer.sync(dst=region(R, 0, 64), src=region(A, 0, 64))
"""


def _interp(text: str = TYPED) -> NemInterpreter:
    it = NemInterpreter()
    it.load_string(text, "typed.nem")
    return it


def test_regions_and_buffers_are_typed_targets():
    it = _interp()
    a = np.arange(64, dtype=np.float16).reshape(8, 8)
    it.write_tensor("a", a)
    got = it.read_tensor("a")
    assert got.dtype == np.float16 and got.shape == (8, 8) and np.array_equal(got, a)
    # the buffer's element type is its first typed region's; its shape all its elements
    assert it.read_tensor("A").dtype == np.float16 and it.read_tensor("A").shape == (128,)
    # a strided region is written and read element by element
    s = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    it.write_tensor("s", s)
    assert np.array_equal(it.read_tensor("s"), s)
    assert np.array_equal(it.read_tensor("A", (8,), np.float32, offset=128)[[0, 1, 2]], s[0])
    # i4: int8 values in [-8, 7], packed (D-RT-I4)
    q = np.array([-8, 7, 0, 1, -1, 2, 3, -3] * 2, np.int8)
    it.write_tensor("q", q)
    assert np.array_equal(it.read_tensor("q"), q)
    assert it.read_tensor("Q", dtype=np.uint8)[0] == 0x78  # element 0 low nibble, 1 high
    with pytest.raises(ValueError, match=r"int8 values outside \[-8, 7\] do not fit region q \(i4\[16\]\)"):
        it.write_tensor("q", np.full(16, 9, np.int8))
    # an untyped buffer takes and gives bytes
    assert it.read_tensor("R").dtype == np.uint8 and it.read_tensor("R").shape == (64,)


def test_type_mismatch_is_an_error_unless_raw():
    it = _interp()
    with pytest.raises(ValueError, match=r"a float32 array does not match region a "
                                         r"\(f16\[8, 8\]\).*raw=True, nem-run --input-raw"):
        it.write_tensor("a", np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match=r"shape \[64\] does not match region a"):
        it.write_tensor("a", np.zeros(64, np.float16))
    with pytest.raises(ValueError, match="does not match buffer A"):
        it.write_tensor("A", np.zeros(8, np.int32))
    it.write_tensor("A", np.arange(8, dtype=np.int32), raw=True)  # the bytes, as they are
    assert it.read_tensor("A", (8,), np.int32).tolist() == list(range(8))
    with pytest.raises(ValueError, match="no buffer or region named 'nope'"):
        it.write_tensor("nope", np.zeros(1, np.uint8))


@pytest.mark.parametrize("where", ["interpreter", "session"])
def test_bounds_are_checked_the_same_way_everywhere(where):
    """RULE: HAZ-04 -- NemInterpreter and Session share one implementation:
    negative offsets and overruns fail for reads and writes alike (issue 10)."""
    it = _interp()
    io = it if where == "interpreter" else it.start()
    with pytest.raises(ValueError, match=r"at offset -2 of buffer A .*out of bounds \[HAZ-04\]"):
        io.write_tensor("A", np.zeros(2, np.float16), offset=-2)
    with pytest.raises(ValueError, match=r"out of bounds \[HAZ-04\]"):
        io.write_tensor("A", np.zeros(129, np.float16))
    with pytest.raises(ValueError, match=r"reading 512 bytes at offset 0 of buffer A"):
        io.read_tensor("A", (128,), np.float32)
    with pytest.raises(ValueError, match=r"out of bounds \[HAZ-04\]"):
        io.read_tensor("A", (2,), np.float16, offset=-4)
    with pytest.raises(ValueError, match=r"region a \(128 bytes\): out of bounds"):
        io.write_tensor("a", np.zeros(65, np.float16), offset=2)


@pytest.mark.parametrize("text, want", [
    ("f16[64,32]", ("f16", (64, 32))), ("f32[]", ("f32", ())), ("f32[ ]", ("f32", ())),
    ("i8", ("i8", None))])
def test_output_spec(text, want):
    """D-RT-TENSOR-IO: `T[]` is a 0-d array, the shape `nem-compile -v`
    prints for a scalar output (its run line said `y:f32[]`, which this
    rejected: outside report, finding 2)."""
    from nem.runtime.tensor_io import parse_spec

    assert parse_spec(text) == want


@pytest.mark.parametrize("text", ["f16[0]", "f16[4,0]", "f16[,]", "f16[2,]"])
def test_output_spec_shape_must_be_positive(text):
    from nem.runtime.tensor_io import TensorIOError, parse_spec

    with pytest.raises(TensorIOError, match=r"the shape must be positive integers.*f16\[\]"):
        parse_spec(text)


def test_zero_d_read_is_the_first_element():
    it = _interp()
    it.write_tensor("s", np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    got = it.read_tensor("A", (), np.float32, offset=128)
    assert got.shape == () and got.dtype == np.float32 and float(got) == 1.0


def test_session_io_uses_the_session_memory():
    it = _interp()
    s = it.start()
    s.write_tensor("a", np.ones((8, 8), np.float16))
    s.run()
    assert np.array_equal(s.read_tensor("R", (32,), np.float16), np.ones(32, np.float16))


def test_task_and_token_objects():
    it = NemInterpreter()
    it.load_string(ELTWISE, "elt.nem")
    s = it.start()
    s.step(2)  # tX and tY of iteration 0
    ready = s.get_ready_tasks()
    assert all(isinstance(t, Task) for t in ready)
    first = ready[0]
    assert (first.name, first.kind, first.line, first.iteration, first.state) == \
        ("tA", "add.async", 17, {"i": 0}, "ready")
    assert first.deps == ("tX[i=0]", "tY[i=0]") and first.waiting_for == ()
    assert repr(first) == "<Task tA add.async line 17 [i=0] ready>"
    pending = s.get_pending_tasks()
    assert [t.name for t in pending][:1] == ["tR"]
    assert pending[0].waiting_for == ("tA[i=0]",)
    assert repr(pending[0]) == "<Task tR relu.async line 18 [i=0] pending on tA[i=0]>"
    toks = s.get_tokens()
    tx = toks["tX[i=0]"]
    assert isinstance(tx, Token) and tx.satisfied and tx.consumed
    assert tx.produced_by.state == "completed" and tx.produced_by.unit is not None
    assert repr(tx) == "<Token tX [i=0] satisfied (by transfer.async line 15)>"
    assert repr(toks["tA[i=0]"]) == "<Token tA [i=0] pending (by add.async line 17)>"


def test_unknown_names_in_breakpoints_and_run_until_are_errors():
    it = NemInterpreter()
    it.load_string(ELTWISE, "elt.nem")
    s = it.start()
    with pytest.raises(ValueError, match=r"no task named 'tAA' in the program; did you mean tA\?"):
        s.add_breakpoint(task="tAA")
    with pytest.raises(ValueError, match=r"no task statement at line 3 \(task lines: 15, 16, "):
        s.add_breakpoint(line=3)
    with pytest.raises(ValueError, match="no token named 'zzz' in the program; the program's "
                                         "tokens: tA, tR, tS, tX, tY"):
        s.run_until("zzz")
    with pytest.raises(ValueError, match="needs task=, line= or loop_iter="):
        s.add_breakpoint()
    assert s.sched.steps == 0  # nothing ran
    s.add_breakpoint(task="tR", loop_iter=2)
    assert s.run() == "breakpoint"


def test_progress_only_on_a_terminal(monkeypatch, capsys):
    """nem-run's progress bar never writes into a log or a pipe (issue 14)."""
    import sys

    from nem.cli.nem_run import Progress

    bar = Progress(100, enabled=True)
    bar.t0 -= 10  # as if the run had taken 10 s
    bar(50)
    bar.close()
    assert not bar.enabled and capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    bar = Progress(100, enabled=True)
    assert bar.enabled
    assert not Progress(100, enabled=False).enabled  # --no-progress
