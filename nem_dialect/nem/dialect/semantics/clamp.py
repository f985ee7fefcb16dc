"""When NEM's `clamp min=lo max=hi` computes what the IR's
`minimumf(maximumf(x, lo), hi)` does, bit for bit (D-LOW-CLAMP).

On a tie of x with a bound NEM's clamp gives the bound (the runtime's
`np.maximum` then `np.minimum`, the lower bound first); MLIR's `maximumf`
gives the larger of two zeros and `minimumf` the smaller.  They differ only
on signed zeros: a -0 lower bound makes `clamp` give -0 where `maximumf`
gives +0 for x = +0, a +0 upper bound +0 where `minimumf` gives -0 for
x = -0.  A NaN is NaN in both.  The lowering raises the pair to one clamp
task (`nest_analysis.clamp_of`) and the compiler's L1 plan counts no splat
tiles for its bounds (`l1_plan`) exactly when this says so: one home for
the rule both must agree on.
"""

from __future__ import annotations

import math


def clamp_matches_min_max(lo: float, hi: float) -> bool:
    """Whether `clamp min=lo max=hi` equals `minimumf(maximumf(x, lo), hi)`
    for every x (module docstring): unless lo is -0 or hi is +0."""
    lo_negative_zero = lo == 0 and math.copysign(1.0, lo) < 0
    hi_positive_zero = hi == 0 and math.copysign(1.0, hi) > 0
    return not (lo_negative_zero or hi_positive_zero)
