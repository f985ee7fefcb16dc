"""Issue order as isl sets: the instances of a task whose issue key
(`happens_before.issue_key`: loop ordinals and positions, compared
lexicographically) lies after or before a given key, for the hazard
analysis's search of interveners between two conflicting accesses."""

from __future__ import annotations

import islpy as isl

from nem.analysis.happens_before import StaticTask, Structure
from nem.analysis.presburger import InstanceSpace


def key_compare(
    s: Structure, t: StaticTask, rank: int, sp: InstanceSpace, key: tuple[int, ...], sign: int
) -> isl.Set:
    """The instances (group 0 of `sp`) of task `t` whose issue key, with the
    access's `rank`, is after (`sign` 1) or before (-1) the constant `key`:
    `issue_key` compared lexicographically, a loop ordinal at a time."""
    mine: list[int | None] = []
    for lp in t.loops:
        mine += (s.index[lp], None)
    mine += (t.index, rank)
    out, cur = sp.empty, sp.universe
    for p, c in enumerate(mine):
        if p == len(key):
            return out | cur if sign > 0 else out  # key is a prefix of ours: ours is after
        if c is None:
            m = p // 2
            out = out | (
                cur.lower_bound_val(isl.dim_type.set, m, key[p] + 1)
                if sign > 0
                else cur.upper_bound_val(isl.dim_type.set, m, key[p] - 1)
            )
            cur = cur.fix_val(isl.dim_type.set, m, key[p])
        elif c != key[p]:
            return out | cur if (c > key[p]) == (sign > 0) else out
    return out if len(key) == len(mine) else (out if sign > 0 else out | cur)
