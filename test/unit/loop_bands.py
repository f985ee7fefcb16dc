"""One linalg op of MLIR text as the loop band the tile stage sizes
(`nest_ir.analyze_band` on its `convert-linalg-to-affine-loops` nest): shared
by the tile-cost and tile-time tests."""

from __future__ import annotations

from mlir import ir
from mlir.passmanager import PassManager

from nem.compile import nest_ir


def band_of(text: str):
    """(module, band) of the first nest of the first function of `text`; the
    module must stay alive while the band is read."""
    m = ir.Module.parse(text)
    PassManager.parse("builtin.module(func.func(convert-linalg-to-affine-loops))").run(m.operation)
    fn = next(o.operation for o in m.body.operations)
    band = nest_ir.analyze_band(nest_ir.top_level_nests(fn)[0])
    assert band is not None
    return m, band
