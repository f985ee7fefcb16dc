"""The scheduled (first) run's shortcuts must not change what it checks or
decides: race shadow memory bucketed per buffer instance (D-RT-RACE-SHADOW),
placement memoized per static key (`Scheduler.placements`), frame
environments keyed by slot numbers."""

from __future__ import annotations

import pytest

from nem.runtime import NemInterpreter

# A and B are adjacent in L1: a bucket per level would see both, a bucket per
# region start would separate the two overlapping writes into A.
OVERLAP = """\
program overlap:
buffer S : L2 (size=512, align=64)
buffer A : L1 (size=256, align=64)
buffer B : L1 (size=64, align=64)
t1 = transfer.async(dst=region(A, 0, 128), src=region(S, 0, 128))
t2 = transfer.async(dst=region(A, 64, 128), src=region(S, 128, 128))
t3 = transfer.async(dst=region(B, 0, 64), src=region(S, 256, 64))
t4 = transfer.async(dst=region(S, 448, 64), src=region(A, 192, 64), deps=[t2])
wait(t1, t3, t4)
"""


def test_overlapping_regions_with_different_starts_race():
    """RULE: HAZ-01 - t1 and t2 write A's bytes [64, 128) unordered: one race,
    found although the regions start at different offsets (the shadow bucket
    is the buffer instance, not the region); t3 writes the adjacent buffer B
    and t4 reads A after t2 (ordered) and beside t1: neither races."""
    it = NemInterpreter()
    it.load_string(OVERLAP, "o.nem")
    r = it.run()
    assert r.race_count == 1, [str(x) for x in r.races]
    msg = str(r.races[0])
    assert "t1" in msg and "t2" in msg and "A bytes [64, 128)" in msg


def test_a_race_through_a_shadow_record_kept_across_buckets():
    """RULE: HAZ-01 - a read of B between the two writes of A does not hide
    the race on A (records of other buckets are neither scanned nor dropped)."""
    prog = OVERLAP.replace(
        "t3 = transfer.async(dst=region(B, 0, 64), src=region(S, 256, 64))",
        "t3 = transfer.async(dst=region(S, 320, 64), src=region(B, 0, 64), deps=[t1])",
    )
    it = NemInterpreter()
    it.load_string(prog, "o.nem")
    assert it.run().race_count == 1


PLACES = """\
program places:
buffer D : DDR (size=256, align=64)
buffer M : L2 (size=256, align=64)
buffer L : L1[1] (size=256, align=64)
a = transfer.sync(dst=region(M, 0, 64), src=region(D, 0, 64))
b = transfer.sync(dst=region(L, 0, 64), src=region(M, 0, 64))
c = transfer.sync(dst=region(M, 64, 64), src=region(D, 64, 64))
d = transfer.sync(dst=region(L, 64, 64) elem=f32, shape=[16], layout=C, src=region(L, 0, 64) elem=f32, shape=[16], layout=C)
e = compute.sync in region(L, 64, 64) elem=f32, shape=[16], layout=C out region(L, 128, 64) elem=f32, shape=[16], layout=C op="relu" @resource(VPU[0])
f = compute.sync in region(L, 64, 64) elem=f32, shape=[16], layout=C out region(L, 192, 64) elem=f32, shape=[16], layout=C op="relu"
g = transfer.sync(dst=region(M, 128, 64), src=region(D, 128, 64)) @resource(DMA[0])
"""


class _NoMemo(dict):
    """`placements` that remember nothing: every task binds its unit afresh
    (`offered` counts what the scheduler tried to remember)."""

    offered = 0

    def __setitem__(self, key, value) -> None:
        self.offered += 1


@pytest.mark.parametrize("device", ["npm_pro", "npm_mid"])
def test_memoized_placement_is_the_unmemoized_one(device):
    """RULE: RES-07 - DDR->L2 transfers run on sDMA, L2->L1 and L1->L1 ones on
    DMA (engine 1: L1[1]), relu on its unit or the one @resource names: the
    memo key holds every fact `bind_unit` reads, so a memo filled by other
    tasks gives each task its own unit (g is a's transfer but for its
    @resource: a key without it gives g a's sDMA)."""

    def units(memo: bool) -> list:
        it = NemInterpreter(device=device)
        it.load_string(PLACES, "p.nem")
        s = it.start()
        if not memo:
            s.sched.placements = _NoMemo()
        s.run_to_end()
        # the memo is the one the scheduler uses (else both runs are one run)
        if memo:
            assert len(s.sched.placements) > 0
        else:
            assert s.sched.placements.offered >= len(s.trace) > 0
        return [(row[1].label, row[3]) for row in s.trace]

    memo = units(True)
    assert memo == units(False)
    by = dict(memo)
    assert by["a"][1] == "sDMA" and by["c"][1] == "sDMA"
    assert by["b"][:2] == (1, "DMA") and by["d"][:2] == (1, "DMA")
    assert by["e"] == (1, "VPU", 0)  # @resource(VPU[0]) on engine 1 (L1[1])
    assert by["f"][:2] == (1, "VPU")
    assert by["g"] == (0, "DMA", 0)  # @resource(DMA[0]) on a DDR->L2 transfer
