"""Per-task costs of a scheduled run that must not change what it computes or
reports (issue 30): strided tile moves copied as contiguous runs
(`task_effects._wide_views`) and the race detector's shadow memory kept to what a
live stream can still race with (`race_horizon.live_vcs`)."""

from __future__ import annotations

import numpy as np
import pytest

from nem.runtime import NemInterpreter, task_effects
from nem.runtime import checks as checks_mod

# a weight tile [3, 3, C, 4] out of [3, 3, C, 16] (each run of 4 f32 is 16
# bytes), as the lowering's conv tiles move them, into a dense L1 slot
TILE = """\
program tile:
buffer W : L2 (size=3 * 3 * 8 * 16 * 4, align=64)
buffer S : L1 (size=2 * 3 * 3 * 8 * 4 * 4, align=64)
buffer O : L2 (size=4 * 3 * 3 * 8 * 4 * 4, align=64)
loop j in [0..3] @max_in_flight(2):
  let w = region(W, j * 16, 3 * 3 * 8 * 16 * 4 - 48) elem=f32, shape=[3, 3, 8, 4], strides=[384, 128, 16, 1]
  let s = region(S, (j mod 2) * 1152, 1152) elem=f32, shape=[3, 3, 8, 4], layout=NHWC
  let o = region(O, j * 1152, 1152) elem=f32, shape=[3, 3, 8, 4], layout=NHWC
  tW = transfer.async(dst=s, src=w)
  tO = transfer.async(dst=o, src=s, deps=[tW])
  wait(tO)
endloop
"""


def _tile_bits() -> np.ndarray:
    bits = np.random.default_rng(3).integers(0, 2**32, 3 * 3 * 8 * 16, dtype=np.uint32)
    bits[:8] = [
        0x7FC00001,
        0xFFC12345,
        0x7F800001,
        0x80000000,
        0x00000001,
        0x7F800000,
        0xFF800000,
        0x80000001,
    ]  # NaN payloads, sNaN, -0, subnormals, inf
    return bits


@pytest.mark.parametrize("wide_min", [task_effects.WIDE_MIN, 10**9])
def test_strided_tile_move_copies_every_bit(monkeypatch, wide_min):
    """The same bytes land in the same places whether the runs are copied as
    opaque elements or element by element (10**9: the fast path is off)."""
    monkeypatch.setattr(task_effects, "WIDE_MIN", wide_min)
    used = []
    wide = task_effects._wide_views
    monkeypatch.setattr(task_effects, "_wide_views", lambda *a: used.append(wide(*a)) or used[-1])
    bits = _tile_bits()
    it = NemInterpreter()
    it.load_string(TILE, "tile.nem")
    it.write_tensor("W", bits.view(np.float32), raw=True)
    assert it.run().status == "completed"
    got = np.frombuffer(it.read_tensor("O").tobytes(), np.uint32).reshape(4, 3, 3, 8, 4)
    want = bits.reshape(3, 3, 8, 16)
    for j in range(4):
        np.testing.assert_array_equal(got[j], want[..., 4 * j : 4 * j + 4])
    assert any(u is not None for u in used) == (wide_min < 10**9)


# an outer loop of one iteration in flight around a long inner loop whose
# reads of X are never covered by a later access (no subsumption): only the
# race detector's collection drops them
NESTED = """\
program nested:
buffer X : L2 (size=4096, align=64)
buffer Y : L2 (size=4 * 64 * 64, align=64)
buffer S : L1 (size=2 * 256, align=64)
loop i in [0..3]:
  loop k in [0..63] @max_in_flight(2):
    tX = transfer.async(dst=region(S, (k mod 2) * 256, 256), src=region(X, k * 32, 256))
    tY = transfer.async(dst=region(Y, (i * 64 + k) * 64, 64), src=region(S, (k mod 2) * 256, 64), deps=[tX])
    wait(tY)
  endloop
endloop
"""


def _max_records(monkeypatch, text: str) -> tuple[int, object]:
    peak = [0]
    access = checks_mod.RaceDetector.access

    def counting(self, task, accesses, ref_of):
        access(self, task, accesses, ref_of)
        peak[0] = max(peak[0], self._n_records)

    monkeypatch.setattr(checks_mod.RaceDetector, "access", counting)
    it = NemInterpreter()
    it.load_string(text, "n.nem")
    res = it.run()
    return peak[0], res


def test_inner_loop_records_are_collected_before_the_outer_iteration_ends(monkeypatch):
    """The stream blocked at the outer loop will know an inner iteration once
    the next one opens (window 2: two back): its records go at the next
    collection, not when the outer iteration completes (before: 196 records
    kept of 64 iterations' reads)."""
    peak, res = _max_records(monkeypatch, NESTED)
    assert res.status == "completed" and res.race_count == 0
    assert peak <= 40, peak


def test_collection_keeps_what_a_live_iteration_can_still_race_with(monkeypatch):
    """Window 3 on the inner loop: iteration k + 1 and k + 2 overlap k, so a
    write of k's slot by k + 2 (slot k mod 2) races and must still be found."""
    racy = NESTED.replace("@max_in_flight(2)", "@max_in_flight(3)")
    _, res = _max_records(monkeypatch, racy)
    it = NemInterpreter()
    it.load_string(racy, "n.nem")
    s = it.start()
    s.sched.race._gc_at = 10**9  # never collect: the reference verdict
    ref = s.run_to_end()
    assert res.race_count == ref.race_count > 0
    assert [str(r) for r in res.races] == [str(r) for r in ref.races]


def test_nem_run_gives_blas_one_thread_unless_told(monkeypatch):
    """D-RT-BLAS-THREADS: set before the tool's modules (and numpy) load; a
    user's own setting wins."""
    from nem.cli import launch

    monkeypatch.setattr(launch, "_launch", lambda prog, module: None)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    launch.nem_run()
    assert launch.os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    launch.nem_run()
    assert launch.os.environ["OPENBLAS_NUM_THREADS"] == "4"
