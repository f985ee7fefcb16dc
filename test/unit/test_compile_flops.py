"""nem.compile.flops: FLOPs raised vs escaped, by category (issue 16 items 3, 4).

The escaped nests come from the lowering's `EscapeRemark`s by type and
location, not from the remark's wording; the categories (conv/matmul, pool,
eltwise, reduction) from the shape of each nest's stores.
"""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.flops import flop_share  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

DEVICE = "npm_pro_x1"

NESTS = """\
func.func @f(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>,
             %x: memref<9x9xf32>, %p: memref<4x4xf32>, %r: memref<4xf32>, %e: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      affine.for %k = 0 to 8 {
        %0 = affine.load %a[%i, %k] : memref<4x8xf32>
        %1 = affine.load %b[%k, %j] : memref<8x4xf32>
        %2 = affine.load %c[%i, %j] : memref<4x4xf32>
        %3 = arith.mulf %0, %1 : f32
        %4 = arith.addf %2, %3 : f32
        affine.store %4, %c[%i, %j] : memref<4x4xf32>
      }
    }
  }
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      affine.for %k = 0 to 3 {
        %0 = affine.load %x[%i * 2 + %k, %j * 2] : memref<9x9xf32>
        %1 = affine.load %p[%i, %j] : memref<4x4xf32>
        %2 = arith.maximumf %1, %0 : f32
        affine.store %2, %p[%i, %j] : memref<4x4xf32>
      }
    }
  }
  affine.for %i = 0 to 4 {
    affine.for %k = 0 to 8 {
      %0 = affine.load %e[%i, %k] : memref<4x8xf32>
      %1 = affine.load %r[%i] : memref<4xf32>
      %2 = arith.addf %1, %0 : f32
      affine.store %2, %r[%i] : memref<4xf32>
    }
  }
  affine.for %i = 0 to 4 {
    affine.for %k = 0 to 8 {
      %0 = affine.load %e[%i, %k] : memref<4x8xf32>
      %1 = math.exp %0 : f32
      affine.store %1, %e[%i, %k] : memref<4x8xf32>
    }
  }
  return
}
"""


def _line_of(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    lines = [i + 1 for i, ln in enumerate(text.splitlines()) if ln.startswith(needle)]
    return lines[nth], len(needle) - len(needle.lstrip()) + 1


def test_categories_and_escaped_locations():
    """A matmul, a strided max pool, a row sum and an exp: each FLOP lands
    in its nest's category, raised or escaped as the given locations say."""
    reduction = _line_of(NESTS, "  affine.for %i = 0 to 4 {", 2)
    share = flop_share(NESTS, {reduction: "no reduce variant"})
    assert share.by_category == {
        "conv/matmul": (4 * 4 * 8 * 2, 0),
        "pool": (4 * 4 * 3, 0),
        "reduction": (0, 4 * 8),
        "eltwise": (4 * 8, 0),
    }
    assert share.escaped == 32 and share.category_share() == 1.0
    assert "reduction 0.0% of 32" in share.remark()
    assert share.reasons == (("no reduce variant", 32),) and share.warning() is None
    assert flop_share(NESTS, {}).escaped == 0


def test_a_low_share_warns_with_the_first_reasons():
    """Less than half of the FLOPs raised: one line with the share and the
    reasons that cost the most FLOPs first (D-COMPILE-LOW-SHARE)."""
    matmul = _line_of(NESTS, "  affine.for %i = 0 to 4 {", 0)
    pool = _line_of(NESTS, "  affine.for %i = 0 to 4 {", 1)
    reduction = _line_of(NESTS, "  affine.for %i = 0 to 4 {", 2)
    share = flop_share(
        NESTS,
        {
            matmul: "no matmul variant for f32",
            pool: "a pool reason",
            reduction: "no reduce variant",
        },
    )
    assert share.share < 0.5
    assert share.reasons[0] == ("no matmul variant for f32", 256)
    warning = share.warning()
    assert warning is not None and "\n" not in warning
    assert warning.startswith(
        f"only {share.share * 100:.1f}% of the model's FLOPs run as NEM "
        f"opcodes ({share.escaped} of {share.escaped + share.raised} in"
    )
    assert "no matmul variant for f32; a pool reason; 1 more reason(s)" in warning


@pytest.mark.slow  # 9 s
def test_escaped_nests_do_not_depend_on_remark_wording(monkeypatch):
    """Rewording every lowering remark leaves the transformer's counts
    unchanged (its erf GELU and layer norms' variances escape): the count
    reads the EscapeRemarks' type and location (issue 16 item 4)."""
    from nem.passes.lowering import driver

    model = samples.transformer("f32")
    before = compile_onnx(model, device=DEVICE).flops
    assert before.escaped > 0
    orig = driver.summary_remarks

    def reworded(ctx, fn):
        out = orig(ctx, fn)
        for d in out:
            d.message = "reworded"
        return out

    monkeypatch.setattr(driver, "summary_remarks", reworded)
    after = compile_onnx(model, device=DEVICE)
    assert after.flops is not None  # the counts; the quoted reasons are the remarks' own words
    assert (after.flops.raised, after.flops.escaped, after.flops.by_category) == (
        before.raised,
        before.escaped,
        before.by_category,
    )
    assert not any("not raised" in r for r in after.remarks)


@pytest.mark.slow  # 8 s
def test_transformer_matmuls_raised():
    """Every conv/matmul FLOP of the transformer block is raised, attention's
    Q.K^T and P.V included (a MatMul with a batch of one imports as a 2-D
    linalg.matmul); the softmax/layernorm reductions are reported apart."""
    flops = compile_onnx(samples.transformer("f16"), device=DEVICE).flops
    raised, escaped = flops.by_category["conv/matmul"]
    assert escaped == 0 and raised == 2 * 8 * 16 * (16 * 4 + 32 * 2 + 8 + 8)
    assert "reduction" in flops.by_category


@pytest.mark.slow  # 8 s
def test_routes_agree_on_categories():
    """The CNN's FLOPs fall in the same categories with the same totals on
    both routes (affine nests by their stores, linalg ops by name, iterators,
    body and maps): conv/matmul, pool (its max and average pooling windows),
    eltwise."""
    model = samples.cnn("f32")
    affine = compile_onnx(model, device=DEVICE).flops.by_category
    transform = compile_onnx(model, device=DEVICE, route="transform").flops.by_category
    assert set(affine) == set(transform) == {"conv/matmul", "pool", "eltwise"}
    for name in ("conv/matmul", "pool"):
        assert sum(affine[name]) == sum(transform[name]) > 0


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_domains_from_indexing_maps_agree_with_the_loops(name):
    """A linalg op's iterations are read from its indexing maps and operand
    shapes (no pass per op: DenseNet-121's FLOP count ran a pass manager for
    each of its thousands of copies); on every op of a tiled sample that has
    maps they equal the trip counts of its loops once converted."""
    from mlir import ir

    from nem.compile import flops

    model = getattr(samples, name)("f32")
    text = compile_onnx(model, device=DEVICE).stage("tile").text
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(text)
        ops: list = []

        def collect(op):
            if op.name.startswith("linalg.") and "indexing_maps" in op.attributes:
                ops.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(collect)
        checked = [op for op in ops if flops._map_ranges(op) is not None]
        assert len(checked) >= 3
        for op in checked:
            assert flops.domain(op) == flops._converted_domain(op), op.name


@pytest.mark.parametrize("name", ["cnn", "resblock"])
def test_every_linalg_domain_equals_its_converted_loops(name):
    """The domain the FLOP count takes for each linalg op of a tiled sample
    (from `indexing_maps`, from the maps MLIR memoized on a named
    convolution, or converted once per shape: `_Domains`,
    D-COMPILE-FLOPS-SHAPES) is the trip count of its loops once converted."""
    from mlir import ir

    from nem.compile import flops

    text = compile_onnx(getattr(samples, name)("f32"), device=DEVICE).stage("tile").text
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(text)
        ops: list = []

        def collect(op):
            if op.name.startswith("linalg.") and op.name != "linalg.yield":
                ops.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(collect)
        assert any(flops.MEMOIZED_MAPS in op.attributes for op in ops)
        domains = flops._Domains()
        for op in ops:
            assert domains[op] == flops._converted_domain(op), op.name
        # without the memoized maps: the convolutions converted once per shape
        for op in ops:
            if flops.MEMOIZED_MAPS in op.attributes:
                del op.attributes[flops.MEMOIZED_MAPS]
        by_shape = flops._Domains()
        for op in ops:
            assert by_shape[op] == domains[op], op.name
        assert by_shape.by_shape
        key = next(iter(by_shape.by_shape))
        by_shape.by_shape[key] = -1  # a memo hit is read from it
        by_shape.clear()
        assert -1 in [by_shape[op] for op in ops]


@pytest.mark.parametrize(
    ("name", "route"), [("cnn", "transform"), ("cnn", "affine"), ("transformer", "transform")]
)
def test_count_on_the_module_equals_the_count_on_its_text(name, route):
    """The driver counts the tile stage's module as it is, each op's (line,
    col) read from the text printed from it, not parsed again
    (D-COMPILE-FLOPS-TEXT): same counts, categories and reasons as counting
    the parsed text, with every third op's position escaped (named linalg
    ops' bodies and loops' terminators are not printed); a text that does
    not line up with the module is parsed."""
    from mlir import ir

    from nem.compile import flops

    text = (
        compile_onnx(getattr(samples, name)("f32"), device=DEVICE, route=route).stage("tile").text
    )
    _, at = flops._positions(text)
    escaped = {pos: f"reason {i % 4}" for i, pos in enumerate(at) if i % 3 == 1}
    parsed = flop_share(text, escaped)
    assert parsed.escaped and parsed.raised
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(text)
        assert str(module) == text
        counted = flops._Count(escaped, text).run(module.operation)
        assert counted == parsed
        assert flop_share(text, escaped, module) == parsed
        other = ir.Module.parse(NESTS)
        assert flops._Count(escaped, text).run(other.operation) is None
        assert flop_share(text, escaped, other) == parsed
