"""`nem-raise-memref-dmas` (D-LOW-DMA): `memref.dma_start`/`dma_wait` become
`affine.dma_start`/`dma_wait` with identity maps before the conversion, whose
table then has one handler for each (issue 36 item 1).

The differential test across that rewrite: a pipeline whose DMAs are written
`memref.dma_*` lowers to the same `.nem` and remarks (but their source positions) as the same pipeline
written `affine.dma_*` (the two spellings the conversion took apart before,
one index evaluated at a time or through the map), on the async corpus's
fixed programs and on random ones with memref DMAs (`async_sources`); and an
error at a memref DMA still names the op the user wrote, at its location."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest
from async_params import Params, normalize, random_params
from async_pipelines import build
from async_sources import FIXED
from lowering_diff import lower

from nem.compile.lower import xdsl_context
from nem.frontends.upstream_dialects import parse_mlir
from nem.frontends.upstream_dialects.dma import (
    AffineDmaStartOp,
    AffineDmaWaitOp,
    MemRefDmaStartOp,
    MemRefDmaWaitOp,
)
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memref_dmas import RaiseMemrefDmasPass


def _spelled(p: Params, kind: str) -> Params:
    """`p` with its memref DMAs written `kind` (`"dma"`: the affine ops)."""
    return replace(
        p,
        load=kind if p.load == "mdma" else p.load,
        store=kind if p.store == "mdma" else p.store,
    )


def _with_memref_dmas() -> list[tuple[str, Params]]:
    cases = [(name, p) for name, p in FIXED.items() if "mdma" in (p.load, p.store)]
    rng = random.Random(3601)
    while len(cases) < len(FIXED) // 2 + 12:
        p = normalize(random_params(rng))
        if "mdma" in (p.load, p.store):
            cases.append((f"random{len(cases)}", p))
    return cases


CASES = _with_memref_dmas()
ENTRY = "async_pipeline"


def test_the_driver_has_one_handler_per_dma_op() -> None:
    assert MemRefDmaStartOp not in HANDLERS and MemRefDmaWaitOp not in HANDLERS
    assert AffineDmaStartOp in HANDLERS and AffineDmaWaitOp in HANDLERS


@pytest.mark.parametrize(("name", "params"), CASES, ids=[c[0] for c in CASES])
def test_a_memref_dma_lowers_as_its_affine_spelling(name: str, params: Params) -> None:
    """The same `.nem` and remarks from both spellings; the program lowers."""
    memref_text = build(params).text
    affine_text = build(_spelled(params, "dma")).text
    assert "memref.dma_start" in memref_text and "memref.dma_start" not in affine_text
    nem, diags = lower(memref_text, ENTRY)
    assert nem is not None, diags
    affine_nem, affine_diags = lower(affine_text, ENTRY)
    assert nem == affine_nem, name
    assert _unlocated(diags) == _unlocated(affine_diags), name


def _unlocated(diags: list[tuple[str, str, str, str | None]]) -> list[tuple[str, str]]:
    """The remarks without source positions: the memref spelling's tag
    index and count are constants on lines of their own, which moves the
    ops after them."""
    return [(sev, re.sub(r"\d+:\d+", "L:C", msg)) for sev, msg, _, _ in diags]


def test_the_pass_leaves_no_memref_dma() -> None:
    """The test above is not vacuous: the pass rewrites every memref DMA."""
    text = build(CASES[0][1]).text
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    before = [o for o in module.walk() if isinstance(o, MemRefDmaStartOp | MemRefDmaWaitOp)]
    RaiseMemrefDmasPass(ENTRY).apply(ctx, module)
    after = [o for o in module.walk() if isinstance(o, AffineDmaStartOp | AffineDmaWaitOp)]
    assert before and len(after) >= len(before)
    assert not [o for o in module.walk() if isinstance(o, MemRefDmaStartOp | MemRefDmaWaitOp)]


NON_CONSTANT_COUNT = """
func.func @main(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %b = memref.alloc() : memref<64xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.for %n = 1 to 4 {
    memref.dma_start %x[%c0], %b[%c0], %n, %tag[%c0] : memref<64xf32>, memref<64xf32, 2>, memref<1xi32>
    memref.dma_wait %tag[%c0], %n : memref<1xi32>
  }
  return
}
"""


def test_an_error_names_the_memref_dma_the_user_wrote() -> None:
    nem, errors = lower(NON_CONSTANT_COUNT, "main")
    assert nem is None
    (_, message, where, _fix) = errors[0]
    assert "cannot lower 'memref.dma_start'" in message
    assert "element count of a DMA must be a constant" in message
    assert where.endswith(":7:5"), where
