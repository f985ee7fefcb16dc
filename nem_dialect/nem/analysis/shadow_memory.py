"""Shadow memory of the hazard analysis: per buffer, who last wrote each byte
and who read it since (D-HAZ-SCALE).

Every access is compared only with the accesses it overlaps, never with all
earlier ones; `steady_state` rebuilds a `Shadow` shifted by a number of loop
periods.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.ir import SSAValue

if TYPE_CHECKING:
    from nem.analysis.happens_before import Instance

SegmentState = tuple["Access | None", list["Access"]] | None
"""None (untouched) or (last writer | None, readers since that write)."""


@dataclass(eq=False)
class Access:
    """Bytes [lo, hi) of a region operand of one task instance."""

    inst: Instance
    region: SSAValue
    lo: int
    hi: int
    write: bool


class Shadow:
    """Byte segments of one buffer: [starts[k], starts[k+1]) -> state[k]."""

    def __init__(self) -> None:
        self.starts: list[int] = [0]
        self.state: list[SegmentState] = [None]

    def _split(self, x: int) -> int:
        k = bisect.bisect_right(self.starts, x) - 1
        if self.starts[k] == x:
            return k
        st = self.state[k]
        self.starts.insert(k + 1, x)
        self.state.insert(k + 1, None if st is None else (st[0], list(st[1])))
        return k + 1

    def segments(self, lo: int, hi: int) -> tuple[int, int]:
        """Split at `lo` and `hi`; the indices of the segments [lo, hi) covers."""
        a = self._split(lo)
        b = self._split(hi)
        return a, b

    def write(self, acc: Access, lo: int, hi: int) -> None:
        a, b = self.segments(lo, hi)
        del self.starts[a + 1:b]
        del self.state[a + 1:b]
        self.state[a] = (acc, [])

    def spans(self) -> list[tuple[int, int, SegmentState]]:
        """(start, end, state) of every touched segment, in byte order."""
        out: list[tuple[int, int, SegmentState]] = []
        for k, st in enumerate(self.state):
            if st is not None and k + 1 < len(self.starts):
                out.append((self.starts[k], self.starts[k + 1], st))
        return out

    @classmethod
    def of_spans(cls, spans: list[tuple[int, int, SegmentState]]) -> Shadow:
        """A shadow holding `spans` (disjoint, in byte order, starts >= 0)."""
        sh = cls()
        for lo, hi, st in spans:
            if lo == sh.starts[-1]:
                sh.state[-1] = st
            else:
                sh.starts.append(lo)
                sh.state.append(st)
            sh.starts.append(hi)
            sh.state.append(None)
        return sh
