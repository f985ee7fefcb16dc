"""The Gantt chart of `nem-run --timeline` (issue 34): one colour per opcode
and rows engine by engine."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from nem.runtime.trace import lane_key, lane_label, opcode_colors  # noqa: E402


@pytest.mark.parametrize("n", [3, 12, 20, 31])
def test_every_opcode_has_its_own_colour(n):
    opcodes = [f"op{k:02d}" for k in range(n)]
    colors = opcode_colors(opcodes)
    assert len(set(colors.values())) == n


def test_rows_go_engine_by_engine():
    units = [
        (1, "CSTL", 0),
        (0, "DMA", 0),
        (-1, "sDMA", 0),
        (0, "CSTL", 1),
        (0, "CSTL", 0),
        (1, "DMA", 0),
        (10, "CSTL", 0),
        (2, "CSTL", 0),
    ]
    rows = [lane_label(u) for u in sorted(units, key=lane_key)]
    assert rows == [
        "E0.CSTL[0]",
        "E0.CSTL[1]",
        "E0.DMA[0]",
        "E1.CSTL[0]",
        "E1.DMA[0]",
        "E2.CSTL[0]",
        "E10.CSTL[0]",
        "dev.sDMA[0]",
    ]
