"""What a transfer moves (D-SEM-TRANSFER), differentially: the checker, the
runtime and the rule (`nem.dialect.semantics.transfers.moved_bytes`) on random
transfers between typed (dense, strided, with extent to spare; i4 to f32)
and untyped regions.

For each transfer: the checker accepts it exactly when the runtime runs it;
when it runs, the destination bytes that change are the rule's, they hold
the source bytes the rule names in the same order, nothing else changes,
and every byte the runtime reads or writes lies in the checker's access
range of its region (`[offset, offset + extent)` from `region_parts`, what
the hazard analysis and the runtime's race detector use, D-HAZ-ACCESS).
More examples: `HYPOTHESIS_PROFILE=long`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nem.analysis.happens_before import region_parts
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.elements import ELEM_TYPES
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import RegionOp, TransferOp
from nem.dialect.semantics.transfers import fills_range, moved_bytes
from nem.runtime.api import NemInterpreter

SIZE = 2048
ELEMS = ("i4", "i8", "f16", "f32")


def _text(r: dict) -> str:
    """A region expression for `r` (buffer, offset, extent, and elem/shape/strides when typed)."""
    head = f"region({r['buffer']}, {r['offset']}, {r['extent']})"
    if r["elem"] is None:
        return head
    dims = ", ".join(map(str, r["shape"]))
    if r["strides"] is None:
        layout = "C" if len(r["shape"]) == 1 else "HW" if len(r["shape"]) == 2 else "CHW"
        return f"{head} elem={r['elem']}, shape=[{dims}], layout={layout}"
    return f"{head} elem={r['elem']}, shape=[{dims}], strides=[{', '.join(map(str, r['strides']))}]"


@st.composite
def _region(draw, buffer: str, elem: str | None, count: int | None = None):
    """A region of `buffer`: untyped (elem None) or typed with `count`
    elements (any when None), dense or strided, extent exact or to spare."""
    offset = draw(st.integers(0, 8))
    if elem is None:
        return {
            "buffer": buffer,
            "offset": offset,
            "extent": draw(st.integers(1, 24)),
            "elem": None,
            "shape": None,
            "strides": None,
        }
    if count is None:
        shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    else:  # a shape of `count` elements: its factors in some order
        shape = (
            [count]
            if draw(st.booleans()) or count == 1
            else [d for d in (2, count // 2)]
            if count % 2 == 0
            else [count]
        )
    strides = None
    if draw(st.booleans()):
        strides, step = [], 1
        for d in reversed(shape):
            strides.append(step)
            step = step * d + draw(st.sampled_from([0, 0, 1, 3]))  # padded rows
        strides.reverse()
    span = (sum((d - 1) * s for d, s in zip(shape, strides)) + 1) if strides else math.prod(shape)
    extent = -(-span * ELEM_TYPES[elem].bits // 8) + draw(st.sampled_from([0, 0, 0, 1, 4]))
    return {
        "buffer": buffer,
        "offset": offset,
        "extent": extent,
        "elem": elem,
        "shape": shape,
        "strides": strides,
    }


@st.composite
def transfers(draw):
    src_typed, dst_typed = draw(st.booleans()), draw(st.booleans())
    elem = draw(st.sampled_from(ELEMS))
    src = draw(_region("S", elem if src_typed else None))
    count = math.prod(src["shape"]) if src_typed and dst_typed else None
    dst_elem = elem if draw(st.integers(0, 9)) else draw(st.sampled_from(ELEMS))
    dst = draw(_region("D", dst_elem if dst_typed else None, count))
    return src, dst


def _checker_accepts(text: str) -> tuple[bool, dict[str, tuple[int, int]]]:
    """Whether the static rules accept the program, and the access range
    the hazard analysis gives each region of its transfer."""
    it = NemInterpreter()
    try:
        program = it.load_string(text, "t.nem")
    except NemDiagnosticError as e:
        assert all(
            d.rule in ("TASK-07", "TYPE-03") for d in e.diagnostics if d.severity == "error"
        ), e
        return False, {}
    ev = Evaluator()
    ranges = {}
    for op in program.module.walk():
        if isinstance(op, TransferOp):
            for key, value in (("dst", op.dst), ("src", op.src)):
                rop = value.owner
                assert isinstance(rop, RegionOp)
                _, off, ext = region_parts(rop)
                lo = ev.static(off)
                ranges[key] = (lo, lo + ev.static(ext))
    return True, ranges


def _runtime(text: str, fill: np.ndarray) -> np.ndarray | None:
    """D's bytes after the transfer (D zero, S = `fill`), None when the
    runtime refuses it."""
    it = NemInterpreter()
    it.load_string(text, "t.nem", check=False)
    it.write_bytes("S", fill)
    res = it.run()
    if res.status != "completed":
        assert res.error is not None and res.error.rule == "TASK-07", res.error
        return None
    return it.read_buffer("D")


@settings(max_examples=150, deadline=None)
@given(transfers(), st.randoms(use_true_random=False))
@pytest.mark.slow  # 4 s
def test_checker_runtime_and_rule_agree(xfer, rnd):
    src, dst = xfer
    text = (
        f"buffer S : L2 (size = {SIZE})\nbuffer D : L2 (size = {SIZE})\n"
        f"t = transfer.async(dst={_text(dst)}, src={_text(src)})\nwait(t)\n"
    )
    accepted, ranges = _checker_accepts(text)
    # bytes whose two nibbles are non-zero: every moved byte (or nibble) changes D
    rng = np.random.default_rng(rnd.getrandbits(32))
    fill = (rng.integers(1, 16, SIZE) * 16 + rng.integers(1, 16, SIZE)).astype(np.uint8)
    after = _runtime(text, fill)
    assert accepted == (after is not None), text
    if after is None:
        return
    d_moved = dst["offset"] + moved_bytes(dst["elem"], dst["shape"], dst["strides"], dst["extent"])
    s_moved = src["offset"] + moved_bytes(src["elem"], src["shape"], src["strides"], src["extent"])
    if dst["elem"] is None or src["elem"] is None:  # byte ranges: the source's length
        d_moved = d_moved[: len(s_moved)]
    changed = np.flatnonzero(after)
    assert set(changed) == set(d_moved.tolist()), text
    if "i4" not in (src["elem"], dst["elem"]) or (src["elem"] is None or dst["elem"] is None):
        np.testing.assert_array_equal(after[d_moved], fill[s_moved])
    # the checker's access ranges hold what the runtime touched
    for key, moved in (("dst", d_moved), ("src", s_moved)):
        lo, hi = ranges[key]
        assert lo <= moved.min() and moved.max() < hi, (key, text)


@pytest.mark.parametrize(
    "src,dst,moved",
    [
        # the example: typed strided -> typed dense moves 8 of the 12 bytes
        (
            "region(S, 0, 12) elem=i8, shape=[2, 4], strides=[8, 1]",
            "region(D, 0, 8) elem=i8, shape=[8], layout=C",
            [0, 1, 2, 3, 8, 9, 10, 11],
        ),
        # untyped -> untyped moves the whole range
        ("region(S, 0, 12)", "region(D, 0, 12)", list(range(12))),
        # a typed dense region with extent to spare moves its elements only
        (
            "region(S, 0, 16) elem=f32, shape=[2], layout=C",
            "region(D, 0, 8) elem=f32, shape=[2], layout=C",
            list(range(8)),
        ),
    ],
)
def test_typed_and_untyped_forms(src, dst, moved):
    text = (
        f"buffer S : L2 (size = 64)\nbuffer D : L2 (size = 64)\n"
        f"t = transfer.async(dst={dst}, src={src})\nwait(t)\n"
    )
    fill = np.arange(1, 65, dtype=np.uint8)
    assert _checker_accepts(text)[0]
    after = _runtime(text, fill)
    assert after is not None
    np.testing.assert_array_equal(after[: len(moved)], fill[moved])
    assert not after[len(moved) :].any()


def test_typed_strided_facing_untyped_is_an_error():
    """Which bytes would move is ambiguous: the checker says so (TASK-07,
    with the fix), and so does the runtime when run unchecked."""
    text = (
        "buffer S : L2 (size = 64)\nbuffer D : L2 (size = 64)\n"
        "t = transfer.async(dst=region(D, 0, 12), "
        "src=region(S, 0, 12) elem=i8, shape=[2, 4], strides=[8, 1])\nwait(t)\n"
    )
    with pytest.raises(NemDiagnosticError, match=r"not dense.*\[TASK-07\]"):
        NemInterpreter().load_string(text, "t.nem")
    assert _runtime(text, np.ones(64, np.uint8)) is None


def test_fills_range():
    assert fills_range("f32", [2, 3], None, 24)
    assert fills_range("f32", [2, 3], [3, 1], 24)
    assert fills_range("f32", [1, 3], [99, 1], 12)  # a unit dimension steps nothing
    assert not fills_range("f32", [2, 3], [4, 1], 28)
    assert not fills_range("f32", [2, 3], None, 28)  # extent to spare
    assert fills_range("i4", [4], None, 2) and not fills_range("i4", [3], None, 2)
