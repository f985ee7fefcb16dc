"""Which bytes an access touches (D-HAZ-ELEMENTS, amending D-HAZ-ACCESS):
a typed region whose shape and strides are constants touches the bytes of
its elements (`semantics.transfers.moved_bytes`) within its extent, not its
whole byte span.  Consecutive output-channel tiles of one spatial tile are
strided boxes whose spans overlap but whose elements do not; comparing
spans made the lowering's two-in-flight tile loops one-in-flight (issue 35).

An access's *pattern* (`ElementPattern`: element bits, shape, strides, all
constants) is what the hazard analysis adds to its span; an access with no
pattern (untyped, no shape, a shape or stride that depends on a loop
variable, or elements that fill the extent: dense) touches its span.  The
runtime's race detector applies the same rule (`nem.runtime.checks`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import islpy as isl
import numpy as np

from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.elements import ELEM_TYPES
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import RegionOp
from nem.dialect.semantics.transfers import moved_bytes


@dataclass(frozen=True)
class ElementPattern:
    """The elements of a typed region relative to its offset: element `k`
    (a multi-index below `shape`) is at element index `sum(strides * k)`,
    its bytes those holding bits `[index * bits, (index + 1) * bits)` of
    its element type `elem`."""

    elem: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def bits(self) -> int:
        return ELEM_TYPES[self.elem].bits

    @cached_property
    def relative(self) -> isl.Set:
        """The bytes it touches, as offsets from the region's offset (a 1-d
        set; built once per pattern object: each static access has its own)."""
        ks = [f"k{d}" for d in range(len(self.shape))]
        index = " + ".join(f"{s} * {k}" for s, k in zip(self.strides, ks)) or "0"
        box = " and ".join(f"0 <= {k} < {n}" for k, n in zip(ks, self.shape)) or "1 = 1"
        if self.bits >= 8:
            size = self.bits // 8
            where = f"0 <= r - {size} * ({index}) < {size}"
        else:  # the byte holding the element's bits (i4: two elements a byte)
            where = f"0 <= {self.bits} * ({index}) - 8 * r < 8"
        exists = ", ".join(ks) or "unused"
        return isl.Set(f"{{ [r] : exists ({exists} : {box} and {where}) }}").coalesce()

    def runs(self, extent: int) -> list[tuple[int, int]]:
        """The bytes it touches within `extent`, as ascending maximal runs
        `[lo, hi)` of offsets (what the enumeration replays)."""
        at = np.unique(moved_bytes(self.elem, self.shape, self.strides, extent))
        at = at[(at >= 0) & (at < extent)]
        if not len(at):
            return []
        cut = np.flatnonzero(np.diff(at) != 1) + 1
        starts = np.concatenate(([at[0]], at[cut]))
        ends = np.concatenate((at[cut - 1], [at[-1]])) + 1
        return [(int(a), int(b)) for a, b in zip(starts, ends)]


_UNSEEN = object()
"""`element_pattern`'s memo has no answer yet (None is one)."""


def element_pattern(
    rop: RegionOp, ev: Evaluator, interned: BoundedCache[tuple[object, ...], ElementPattern | None]
) -> ElementPattern | None:
    """The pattern of region `rop`'s accesses; None when they touch its byte
    span.  Equal patterns are one object (`interned`, the analyses' shape
    memos), whose isl set is built once; `interned` also holds the answer
    for each (element type, shape, strides, extent) met, the constants it
    is a function of, so lowered CNNs' repeated tiles skip the checks."""
    elem = rop.result.type.elem_name  # None when untyped
    if elem is None:
        return None
    shape = rop.shape
    if not shape:
        return None
    static = ev.static
    dims = tuple(static(v) for v in shape)
    given = tuple(static(v) for v in rop.strides)
    if None in dims or None in given:
        return None
    key = (elem, dims, given, static(rop.extent))
    hit = interned.get(key, _UNSEEN)
    if hit is _UNSEEN:
        hit = interned[key] = _pattern(elem, dims, given, key[3], interned)  # type: ignore[arg-type]
    return hit  # type: ignore[return-value]


def _pattern(
    elem: str,
    dims: tuple[int, ...],
    given: tuple[int, ...],
    extent: int | None,
    interned: BoundedCache[tuple[object, ...], ElementPattern | None],
) -> ElementPattern | None:
    """`element_pattern` of these constants (`given`: the explicit strides,
    empty for row-major)."""
    dims, given = tuple(map(int, dims)), tuple(map(int, given))
    strides = given or tuple(math.prod(dims[d + 1 :]) for d in range(len(dims)))
    if extent is not None and elements_fill(ELEM_TYPES[elem].bits, dims, strides, extent):
        return None
    p = ElementPattern(elem, dims, strides)
    key = ("pattern", p)
    hit = interned.get(key)
    if hit is None:
        hit = interned[key] = p
    return hit


def elements_fill(bits: int, shape: tuple[int, ...], strides: tuple[int, ...], extent: int) -> bool:
    """Whether the elements touch every byte of `[0, extent)`: their indices
    are 0..n-1 (strides nested: each the product of the sizes below it, over
    the dimensions of size > 1) and their bytes reach the extent."""
    n = math.prod(shape)
    if n == 0:
        return extent <= 0
    step = 1
    for stride, size in sorted((s, z) for z, s in zip(shape, strides) if z > 1):
        if stride != step:
            return False
        step *= size
    reach = ((n - 1) * bits) // 8 + 1 if bits < 8 else n * bits // 8
    return reach >= extent


def touching(pattern: ElementPattern, byte: isl.PwAff, offset: isl.PwAff) -> isl.Set:
    """Where `byte - offset` is one of the pattern's offsets (a set of the
    space of `byte` and `offset`)."""
    rel = isl.PwMultiAff.from_pw_aff(byte - offset)
    return pattern.relative.preimage_pw_multi_aff(rel)


def box_bytes(
    pattern: ElementPattern | None, extent: int, c: int, terms: tuple[tuple[int, int, int], ...]
) -> isl.Set:
    """The bytes an access touches over a box of its loops' variables: its
    offset `c + sum(a * x)`, each `(a, lo, hi)` of `terms` a coefficient
    and its variable's inclusive bounds, and from each offset the bytes of
    `[offset, offset + extent)` its elements touch (`pattern`, as `touching`
    says for the hazard analysis; None: all of them).  A 1-d set, the
    variables projected out (`nem-jam-engine-loops` compares two)."""
    xs = [f"x{i}" for i in range(len(terms))]
    dims = ", ".join(["r", *xs])
    at = " + ".join([str(c), *(f"{a} * {x}" for x, (a, _, _) in zip(xs, terms))])
    box = " and ".join([f"{lo} <= {x} <= {hi}" for x, (_, lo, hi) in zip(xs, terms)] or ["1 = 1"])
    hit = isl.Set(f"{{ [{dims}] : {box} and 0 <= r - ({at}) < {extent} }}")
    if pattern is not None:
        offset = isl.PwAff(f"{{ [{dims}] -> [({at})] }}")
        byte = isl.PwAff(f"{{ [{dims}] -> [(r)] }}")
        hit = hit & touching(pattern, byte, offset)
    return hit.project_out(isl.dim_type.set, 1, len(xs))
