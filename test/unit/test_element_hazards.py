"""Element-exact accesses of strided typed regions (D-HAZ-ELEMENTS): the
checker (`nem-verify`'s hazard analysis, its enumerating fallback and the
replay oracle) and the runtime's race detector (the explorer and random
schedules) compare the bytes of a region's elements, not its byte span.
RULE: HAZ-01 HAZ-03"""

from __future__ import annotations

import math

import islpy as isl
import numpy as np
import pytest
from hazard_replay import find_hazards as replay_hazards
from semantics_programs import HEADER, dynamic_verdict, static_verdict

from nem.analysis.element_access import ElementPattern, elements_fill
from nem.analysis.hazard_finder import find_hazards
from nem.dialect.elements import ELEM_TYPES
from nem.dialect.semantics.transfers import moved_bytes
from nem.frontends.nem_text.parser import parse_nem
from nem.runtime.checks import RaceDetector

HALF = "elem=f16, shape=[2, 8], strides=[16, 1]"
"""Half a 64-byte tile of 32 f16: at offset `o` its elements 0-7 and 16-23
(bytes [o, o + 16) and [o + 32, o + 48)); at `o + 16` the other half."""


def _tile(buf: str, off: str) -> str:
    return f"region({buf}, {off}, 64) elem=f16, shape=[32], layout=C"


def _half(buf: str, off: str) -> str:
    return f"region({buf}, {off}, 48) {HALF}"


def channel_tiles(shift: str) -> str:
    """Two-in-flight iterations each storing half a tile of A0 (the lowering's
    output-channel tiles of one spatial tile), iteration i's half at byte
    offset `shift`."""
    return HEADER + (
        "t0 = transfer.sync(dst=" + _tile("A0", "0") + ", src=" + _tile("D", "0") + ")\n"
        "loop i in [0..3] @max_in_flight(2):\n"
        f"  r = relu.async in {_half('A0', '128 + (i mod 2) * 64')} "
        f"out {_half('A0', shift)}\n"
        f"  s = store.async(dst={_half('D', '1024 + i * 64')}, src={_half('A0', shift)}, "
        "deps=[r])\n"
        "  wait(s)\n"
        "endloop\n"
    )


def _errors(src: str) -> list[str]:
    return [d.rule or "" for d in static_verdict(src)]


@pytest.mark.parametrize("shift", ["(i mod 2) * 16", "(i * i mod 2) * 16"])
def test_disjoint_elements_of_overlapping_spans_do_not_race(shift):
    """Iterations alternate halves (bytes 0 and 16: spans [0, 48) and [16, 64)
    overlap, elements do not): two in flight is race-free, for the checker
    (isl, and the enumeration of an offset that is not quasi-affine: `i * i`)
    and every schedule of the runtime."""
    src = channel_tiles(shift)
    assert _errors(src) == []
    dyn = dynamic_verdict(src)
    assert not dyn.races and not dyn.errors


def test_common_elements_still_race():
    """The same half every iteration: its elements meet, HAZ-03 and a race at
    run time, at a byte both touch."""
    src = channel_tiles("0")
    errors = static_verdict(src)
    assert [d.rule for d in errors] and {d.rule for d in errors} <= {"HAZ-03"}
    dyn = dynamic_verdict(src)
    assert dyn.races
    for race in dyn.races:
        assert race.buf_lo < 16 or 32 <= race.buf_lo < 48, race


PARTIAL_KILL = HEADER + (
    "t1 = transfer.async(dst=region(A0, 16, 32), src=region(D, 0, 32))\n"
    "t2 = transfer.async(dst=" + _half("A0", "0") + ", src=" + _half("D", "64") + ")\n"
    "t3 = store.async(dst=" + _tile("D", "1024") + ", src=" + _tile("A0", "0") + ", deps=[t2])\n"
    "wait(t1, t3)\n"
)
"""t3 reads the tile after t2 (a strided write whose span [0, 48) holds t1's
bytes [16, 48)) but unordered with t1: at bytes [16, 32), which t2's
elements miss, t1 is the last writer, so (t1, t3) is a read-after-write
race besides (t1, t2)."""


def test_a_strided_write_covers_nothing():
    """A strided write kills no earlier access (`live_pairs`' covers are
    dense writes only): span covers dropped the pair (t1, t3)."""
    module = parse_nem(PARTIAL_KILL, "gen.nem")
    diags = find_hazards(module.ops.first)  # type: ignore[arg-type]
    assert len(diags) == 2, [d.render() for d in diags]
    assert any("t3" in d.message for d in diags), [d.render() for d in diags]
    assert [d.render() for d in diags] == [
        d.render()
        for d in replay_hazards(parse_nem(PARTIAL_KILL, "gen.nem").ops.first)  # type: ignore[arg-type]
    ]
    assert dynamic_verdict(PARTIAL_KILL).races


SUBSUMED = HEADER + (
    "t1 = transfer.async(dst=region(A0, 16, 16), src=region(D, 0, 16))\n"
    "t2 = transfer.async(dst=" + _half("A0", "0") + ", src=" + _half("D", "64") + ", deps=[t1])\n"
    "t3 = transfer.async(dst=region(M, 0, 16), src=region(A0, 16, 16))\n"
    "wait(t2, t3)\n"
)
"""t2's span [0, 48) holds t1's bytes [16, 32) but its elements miss them:
t3's read of them races with t1 whatever t2 did."""


def test_runtime_keeps_a_record_a_strided_access_spans():
    """The race detector drops a record only for a later dense access
    covering it (subsumption): a strided one dropped t1's write, and every
    random schedule missed its race with t3."""
    assert {d.rule for d in static_verdict(SUBSUMED)} == {"HAZ-01"}
    from nem.runtime import NemInterpreter

    it = NemInterpreter()
    it.load_string(SUBSUMED, "gen.nem", check=False)
    it.randomize_inputs(1)
    results, _ = it.run_schedules(8, seed=0)
    assert all(r.races for r in results)


@pytest.mark.parametrize(
    ("elem", "shape", "strides", "extent", "runs"),
    [
        ("f16", (2, 8), (16, 1), 48, [(0, 16), (32, 48)]),
        ("i4", (3,), (1,), 2, [(0, 2)]),  # i4: the bytes holding the nibbles
        ("i4", (2, 2), (4, 1), 3, [(0, 1), (2, 3)]),
        ("f32", (2,), (3,), 10, [(0, 4)]),  # the extent cuts the second element
    ],
)
def test_pattern_runs_and_set_agree(elem, shape, strides, extent, runs):
    """The isl set (the checker's) and the runs (the enumeration's, from
    `moved_bytes`, the runtime's) hold the same bytes."""
    p = ElementPattern(elem, shape, strides)
    assert p.runs(extent) == runs
    rel = p.relative
    inside = [b for b in range(extent) if not rel.fix_val(isl.dim_type.set, 0, b).is_empty()]
    assert inside == [b for lo, hi in runs for b in range(lo, hi)]


SAME_SPAN = HEADER + (
    "x = transfer.async(dst=region(A0, 16, 16), src=region(D, 0, 16))\n"
    "y1 = store.async(dst=region(D, 1024, 32) elem=f16, shape=[16], layout=C, "
    "src=region(A0, 0, 48) elem=f16, shape=[2, 8], strides=[16, 1])\n"
    "y2 = store.async(dst=region(D, 2048, 32) elem=f16, shape=[16], layout=C, "
    "src=region(A0, 0, 48) elem=f16, shape=[2, 8], strides=[8, 1])\n"
    "wait(x, y1, y2)\n"
)
"""y1 and y2 read regions of equal offset and extent whose elements differ:
y1's miss x's bytes [16, 32), y2's hold them."""


def test_equal_spans_with_other_elements_are_other_shapes():
    """The pair memos' key holds the element pattern (D-HAZ-SYMBOLIC's
    shapes): without it (x, y2) took (x, y1)'s answer, no race."""
    diags = static_verdict(SAME_SPAN)
    assert len(diags) == 1 and "y2" in diags[0].message, [d.render() for d in diags]
    assert {(r.first.label, r.second.label) for r in dynamic_verdict(SAME_SPAN).races} == {
        ("x", "y2")
    }


@pytest.mark.parametrize(
    ("elem", "shape", "strides", "extent", "fills"),
    [
        ("f16", (32,), (1,), 64, True),
        ("f16", (2, 8), (16, 1), 48, False),  # strided: a gap
        ("f16", (2, 8), (8, 1), 48, False),  # dense, but short of the extent
        ("i4", (3,), (1,), 2, True),
        ("f32", (1, 4), (100, 1), 16, True),  # a stride of a dimension of size 1 is moot
        ("f32", (4, 2), (1, 4), 32, True),  # column-major: still every byte
    ],
)
def test_dense_accesses_have_no_pattern(elem, shape, strides, extent, fills):
    """An access whose elements fill its extent touches its span and keeps
    its covers (`_cover`); the others touch their elements only."""
    assert elements_fill(ELEM_TYPES[elem].bits, shape, strides, extent) is fills


class _Region:
    """What `RaceDetector.elements` reads of a region instance."""

    def __init__(self, elem, shape, strides, extent):
        self.elem, self.shape, self.strides, self.extent = elem, shape, strides, extent

    def elem_strides(self):
        return self.strides or tuple(math.prod(self.shape[d + 1 :]) for d in range(len(self.shape)))


@pytest.mark.parametrize(
    ("elem", "shape", "strides", "extent"),
    [
        ("f16", (2, 8), (16, 1), 48),
        ("f32", (2,), (3,), 10),  # the second element past the extent
        ("i4", (2, 2), (4, 1), 3),
        ("f32", (1, 3, 4, 5), (200, 20, 5, 1), 240),
        ("i8", (3, 3), (0, 1), 3),  # a zero stride
        ("f16", (2, 8), None, 40),  # row-major, short of the extent
        ("f16", (2, 8), None, 32),  # dense: no mask
    ],
)
def test_runtime_masks_are_the_moved_bytes(elem, shape, strides, extent):
    """The race detector's masks (a strided view for whole-byte elements)
    hold exactly the bytes `moved_bytes` names within the extent."""
    at = moved_bytes(elem, shape, strides, extent)
    want = np.zeros(extent, dtype=bool)
    want[at[at < extent]] = True
    got = RaceDetector(None).elements(_Region(elem, shape, strides, extent))  # type: ignore[arg-type]
    assert (got is None) if want.all() else (got is not None and (got == want).all())


STRIDED_NEST_COVER = HEADER + (
    "loop i in [0..0]:\n"
    "  d = transfer.sync(dst=region(A1, i * 64, 64) elem=f16, shape=[32], layout=C, "
    "src=" + _tile("D", "0") + ")\n"
    "endloop\n"
    "x = transfer.async(dst=" + _tile("A0", "0") + ", src=" + _tile("D", "0") + ")\n"
    "loop i in [0..0]:\n"
    "  w = transfer.async(dst=region(A0, i * 64, 64) " + HALF + ", "
    "src=" + _half("D", "64") + ")\n"
    "  wait(w)\n"
    "endloop\n"
    "y = store.async(dst=" + _tile("D", "1024") + ", src=" + _tile("A0", "0") + ")\n"
    "wait(x, y)\n"
)
"""`d` (a dense nest) and `w` (a strided one) have equal domains, offsets,
extents and bounds: `d` writes every byte of its bounds, `w` only its
elements, so `w` does not kill `x`, whose bytes [16, 32) `y` reads unordered."""


def test_a_strided_nest_covers_only_its_elements():
    """Whether a write covers its bounds is memoized by its form and its
    element pattern (`_cover`): by its form alone `w` took `d`'s answer,
    killed `x`, and (x, y) went unreported."""
    diags = find_hazards(parse_nem(STRIDED_NEST_COVER, "gen.nem").ops.first)  # type: ignore[arg-type]
    replay = replay_hazards(parse_nem(STRIDED_NEST_COVER, "gen.nem").ops.first)  # type: ignore[arg-type]
    assert [d.render() for d in diags] == [d.render() for d in replay]
    assert any("'y'" in d.message or " y " in d.message for d in diags), [d.render() for d in diags]


MEMO_KEYS = HEADER + (
    "a = transfer.sync(dst=region(A0, 0, 32) elem=f16, shape=[2, 8], strides=[8, 1], "
    "src=region(D, 0, 48) elem=f16, shape=[2, 8], strides=[8, 1])\n"
    "b = transfer.sync(dst=region(A0, 64, 32) elem=i16, shape=[2, 8], layout=HW, "
    "src=region(D, 64, 48) elem=f16, shape=[2, 8], strides=[16, 1])\n"
    "c = transfer.sync(dst=region(A0, 128, 32) elem=f16, shape=[2, 8], strides=[16, 1], "
    "src=region(D, 128, 32) elem=i4, shape=[2, 8], strides=[16, 1])\n"
    "loop i in [1..2]:\n"
    "  d = transfer.sync(dst=region(A0, 256, 32) elem=f16, shape=[2, 8], strides=[8 * i, 1], "
    "src=region(D, 256, 48) elem=f16, shape=[2, 8], strides=[16, 1])\n"
    "endloop\n"
)
"""Regions of one shape and strides with other extents (dense at 32 bytes,
a gap at 48), element types (f16, i16, i4), given or layout strides, and a
stride that depends on a loop variable."""


def test_the_pattern_memo_answers_as_a_fresh_call():
    """`element_pattern` keeps each answer by the constants it depends on
    (element type, shape, strides, extent): shared by all regions, in either
    order, it answers as a call with an empty memo (a key without the extent
    took the dense region's None for the gapped one)."""
    from nem.analysis.element_access import element_pattern
    from nem.dialect.bounded_cache import BoundedCache
    from nem.dialect.expressions import Evaluator
    from nem.dialect.ops import RegionOp

    regions = [op for op in parse_nem(MEMO_KEYS, "gen.nem").walk() if isinstance(op, RegionOp)]
    ev = Evaluator()
    fresh = [element_pattern(r, ev, BoundedCache(16)) for r in regions]
    assert sum(p is not None for p in fresh) == 5 and None in fresh
    for order in (regions, regions[::-1]):
        memo: BoundedCache = BoundedCache(16)
        got = {r: element_pattern(r, ev, memo) for r in order}
        assert [got[r] for r in regions] == fresh
