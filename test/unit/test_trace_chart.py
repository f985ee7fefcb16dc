"""The Gantt chart of `nem-run --timeline` (issue 34): one colour per opcode
and rows engine by engine."""

from __future__ import annotations

from types import SimpleNamespace

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


def test_one_artist_per_opcode_and_row(tmp_path, monkeypatch):
    """Every bar is drawn, in one artist per opcode and row: an artist per
    task instance made `--timeline` 4x the run's own time (issue 34:
    SqueezeNet 10.6 s CPU against 2.7 s without the chart)."""
    import matplotlib.pyplot as plt

    from nem.runtime.trace import timeline_png

    charts = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (charts.append(fig), close(fig)))
    units = [(0, "CSTL", 0), (0, "DMA", 0), (1, "CSTL", 0)]
    trace = [
        (
            k,
            SimpleNamespace(opcode=("relu", "transfer")[k % 2]),
            0,
            units[k % 3],
            10 * k,
            10 * k + 5,
            0,
        )
        for k in range(600)
    ]
    timeline_png(trace, str(tmp_path / "t.png"))
    (fig,) = charts
    artists = fig.axes[0].collections
    assert len(artists) == 2 * 3
    assert sum(len(a.get_paths()) for a in artists) == 600
    assert (tmp_path / "t.png").stat().st_size > 0
