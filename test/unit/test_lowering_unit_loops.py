"""One-iteration loops inside a nest are folded (D-LOW-TILES): the raised
tasks compute what the nest computes (`test/lit/lowering/unit_loops.test`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nem.frontends.nem_text.printer import print_nem
from nem.frontends.upstream_dialects import lowering_context, parse_mlir
from nem.passes.driver import run_pipeline
from nem.runtime.api import NemInterpreter

SOURCE = Path(__file__).parents[1] / "lit" / "lowering" / "Inputs" / "raise" / "unit_loops.mlir"


def _lower(entry: str) -> str:
    ctx = lowering_context()
    module = parse_mlir(ctx, SOURCE.read_text(), str(SOURCE))
    run_pipeline(
        module,
        f"lower-to-nem{{device=npm_pro_x1 entry={entry} memory-spaces=0:DDR,1:L2,2:L1[0]}}",
        ctx=ctx,
    )
    return print_nem(module)


@pytest.mark.parametrize(
    "entry,shape,inputs,fn",
    [
        ("unit_loops", (4, 8), ("X", "Y"), lambda x, y: x + y),
        ("unit_copy", (4, 8), ("X",), lambda x: x),
        ("one_point", (1, 1), ("X",), lambda x: x * x),
    ],
)
def test_raised_nest_with_unit_loops_matches_numpy(entry, shape, inputs, fn):
    text = _lower(entry)
    assert 'op="mlir.kernel"' not in text
    rng = np.random.default_rng(3)
    arrays = [rng.normal(size=shape).astype(np.float32) for _ in inputs]
    it = NemInterpreter(device="npm_pro_x1")
    it.load_string(text, file=f"{entry}.nem")
    for name, a in zip(inputs, arrays):
        it.write_tensor(name, a)
    run = it.run()
    assert run.status == "completed" and run.race_count == 0, run.error
    out = "Y" if entry != "unit_loops" else "Z"
    np.testing.assert_array_equal(it.read_tensor(out, shape, np.float32), fn(*arrays))
