"""Element-type casts in elementwise bodies (D-LOW-CAST, D-LOW-CAST-TREE).

An `arith` cast in a nest or `linalg.generic` body is a node of the
elementwise tree (`nest_analysis`) like any other op: one `cast in X out Y`
task, with the `saturate` that gives MLIR's result:

    arith.extf, arith.extsi       exact either way (the default)
    arith.truncf, arith.sitofp    saturate=0: a finite value beyond the target's
                                  range is +-inf, as IEEE rounding gives
    arith.trunci                  saturate=0: two's-complement wrap

A body that is one cast of a load (`y[i..] = truncf(x[i..])`, an importer's
precision change) is one task; a cast inside a larger tree
(`truncf(exp(extf(x) - m))`, what nem-compile's importer writes for f16
models, D-COMPILE-F16) gives each node a scratch region of its own element
type: the f16 leaves cast into f32 scratch, the f32 ops on f32 scratch,
one cast back (D-LOW-CAST-TREE, `compute._tree_steps`).

`arith.fptosi`/`fptoui` truncate toward zero where NEM's cast rounds half
to even, `uitofp`/`extui` read the source as unsigned where a NEM integer
region is signed (D-NUM-CAST), and a `truncf` with a rounding mode other
than to-nearest-even rounds otherwise: those stay escape-hatch tasks, with
that reason.  This module holds the tables only, so that the analysis can
use them without an import cycle.
"""

from __future__ import annotations

from xdsl.ir import Operation

from nem.frontends.upstream_dialects.arith_rounding import other_rounding

SATURATE = {
    "arith.extf": None,
    "arith.extsi": None,
    "arith.truncf": 0,
    "arith.sitofp": 0,
    "arith.trunci": 0,
}
"""The casts raised, and the `saturate` attribute each needs (None: default)."""

NOT_RAISED = {
    "arith.fptosi": "truncates toward zero, NEM's cast rounds half to even",
    "arith.fptoui": "truncates toward zero, NEM's cast rounds half to even",
    "arith.uitofp": "reads its source as unsigned, NEM integer regions are signed",
    "arith.extui": "reads its source as unsigned, NEM integer regions are signed",
}

CAST_OPS = (*SATURATE, *NOT_RAISED)
"""Every `arith` cast the analysis recognizes (raised or refused with a reason)."""


def cast_reason(op: Operation) -> str | None:
    """Why cast `op` is not raised (None: it is one `cast` task)."""
    if op.name in NOT_RAISED:
        return f"'{op.name}' {NOT_RAISED[op.name]} (D-LOW-CAST)"
    name = other_rounding(op)
    if name is not None:
        return f"'{op.name}' rounds {name}, NEM's cast rounds half to even (D-LOW-CAST)"
    return None


def cast_attrs(name: str) -> tuple[tuple[str, str | float], ...]:
    """The `cast` task's attributes for MLIR cast `name`."""
    sat = SATURATE[name]
    return () if sat is None else (("saturate", sat),)
