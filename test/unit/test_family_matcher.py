"""The type-family matcher against the baseline catalog (SPEC Appendix,
"Variant Expansion Reference"): which variant a compute task's operand types
select, the nearest one reported when none matches, and the catalog a
device's mandatory and extended lists make effective."""

from __future__ import annotations

import pytest

from nem.devices.device_resolver import load_config_file, resolve_device, shipped_devices_dir
from nem.dialect.families import Catalog, OperandInfo

DEVICES = shipped_devices_dir()


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_config_file(DEVICES / "nem_baseline_1.0.nem").catalog


GEMM = ["gemm.float", "gemm.int8", "gemm.int4"]
CONV = ["conv2d.float", "conv2d.int8", "conv2d.int4"]


def op(name, elem, quant=False, is_input=True):
    return OperandInfo(elem, quant, is_input, lambda: name)


def gemm_bindings(a, b, y, c=None, quant=False):
    out = {
        "A": [op("A_l1", a, quant)],
        "B": [op("B_l1", b, quant)],
        "Y": [op("Y_l1", y, False, False)],
    }
    if c:
        out["C"] = [op("C_l2", c)]
    return out


def test_gemm_float_match(catalog):
    # RULE: FAM-06, FAM-09
    res = catalog.match(GEMM, gemm_bindings("f16", "f16", "f16"), "f32")
    assert [str(r) for r in res.matched] == ["gemm.float<f16>.no_bias"]
    res = catalog.match(GEMM, gemm_bindings("f16", "f16", "f16", c="f16"), "f32")
    assert [str(r) for r in res.matched] == ["gemm.float<f16>.with_bias"]


def test_gemm_bf16_with_bias_has_no_variant(catalog):
    # RULE: FAM-06, FAM-10
    res = catalog.match(GEMM, gemm_bindings("bf16", "bf16", "bf16", c="bf16"), "f32")
    assert not res.ok and str(res.nearest) == "gemm.float<bf16>.no_bias"
    assert res.differences == [
        "operand 'C' (C_l2) is given but gemm.float<bf16>.no_bias has no 'C'"
    ]


def test_gemm_mixed_elem_nearest(catalog):
    # RULE: FAM-02
    res = catalog.match(GEMM, gemm_bindings("f16", "i8", "f16"), "f32")
    assert str(res.nearest) == "gemm.float<f16>.no_bias"
    assert res.differences == ["operand 'B' (B_l1) has elem i8 but the variant needs f16"]


def test_accum_must_equal_family_accum(catalog):
    # RULE: FAM-12
    res = catalog.match(GEMM, gemm_bindings("f16", "f16", "f16"), "f16")
    assert res.differences == ["accum_type is f16 but the family needs f32"]


def test_int8_needs_quant_on_inputs_but_not_bias(catalog):
    # RULE: QUANT-07, FAM-07, FAM-11
    ok = catalog.match(GEMM, gemm_bindings("i8", "i8", "i16", c="i32", quant=True), "i32")
    assert [str(r) for r in ok.matched] == ["gemm.int8<i16>.with_bias"]
    res = catalog.match(GEMM, gemm_bindings("i8", "i8", "i8"), "i32")
    assert str(res.nearest) == "gemm.int8<i8>.no_bias"
    assert res.differences == [
        "operand 'A' (A_l1) must carry a quant descriptor",
        "operand 'B' (B_l1) must carry a quant descriptor",
    ]
    # FAM-07: i16 output without bias is not defined.
    res = catalog.match(GEMM, gemm_bindings("i8", "i8", "i16", quant=True), "i32")
    assert not res.ok


def test_int4(catalog):
    # RULE: QUANT-08, FAM-08
    res = catalog.match(GEMM, gemm_bindings("i8", "i4", "i8", quant=True), "i32")
    assert [str(r) for r in res.matched] == ["gemm.int4.no_bias"]


def test_float_family_rejects_quant(catalog):
    # RULE: QUANT-09
    b = gemm_bindings("f16", "f16", "f16")
    b["A"] = [op("A_l1", "f16", True)]
    res = catalog.match(GEMM, b, "f32")
    assert res.differences == [
        "operand 'A' (A_l1) carries a quant descriptor but gemm.float requires quant = absent"
    ]


def test_conv_match_and_missing_bias(catalog):
    # RULE: FAM-03, FAM-04, FAM-10
    b = {
        "X": [op("X", "bf16")],
        "W": [op("W", "bf16")],
        "B": [op("B", "bf16")],
        "Y": [op("Y", "bf16", False, False)],
    }
    assert [str(r) for r in catalog.match(CONV, b, "f32").matched] == [
        "conv2d.float<bf16>.with_bias"
    ]
    b = {
        "X": [op("X", "i8", True)],
        "W": [op("W", "i8", True)],
        "Y": [op("Y", "i16", False, False)],
    }
    res = catalog.match(CONV, b, "i32")
    # Tie between <i8>.no_bias (Y differs) and <i16>.with_bias (B missing):
    # the one keeping the operands' element types wins (closest types, before MUST).
    assert str(res.nearest) == "conv2d.int8<i16>.with_bias"
    assert res.differences == ["operand 'B' is missing but conv2d.int8<i16>.with_bias needs it"]
    b["B"] = [op("B", "i16")]
    res = catalog.match(CONV, b, "i32")
    assert str(res.nearest) == "conv2d.int8<i16>.with_bias"
    assert res.differences == ["operand 'B' (B) has elem i16 but the variant needs i32"]
    del b["B"]
    b["Y"] = [op("Y", "i8", False, False)]
    b["B"] = []
    assert [str(r) for r in catalog.match(CONV, b, "i32").matched] == ["conv2d.int8<i8>.no_bias"]


def test_eltwise_binary_and_effective_set(catalog):
    # RULE: FAM-13, FAM-14, DEV-13, DEV-14, DEV-15
    lite = resolve_device(load_config_file(DEVICES / "npm_lite.nem"), "npm_lite")
    allowed = lite.effective_for_family("eltwise")
    same = {"input": [op("x", "f32"), op("y", "f32")], "output": [op("z", "f32", False, False)]}
    assert catalog.match(["eltwise"], same, None).ok
    res = catalog.match(["eltwise"], same, None, allowed)
    assert not res.ok and [str(r) for r in res.unavailable] == ["eltwise<f32>.default"]
    # the closest available types: a 16-bit float, not i8
    assert str(res.nearest) in {"eltwise<f16>.default", "eltwise<bf16>.default"}
    mixed = {"input": [op("x", "f16"), op("y", "i8")], "output": [op("z", "f16", False, False)]}
    res = catalog.match(["eltwise"], mixed, None)
    assert str(res.nearest) == "eltwise<f16>.default"
    assert res.differences == ["operand 'input' (y) has elem i8 but the variant needs f16"]


def test_only_unavailable_match_is_reported(catalog):
    # RULE: DEV-15
    b = gemm_bindings("f32", "f32", "f32")
    res = catalog.match(GEMM, b, "f32", frozenset())
    # the device offers nothing: no nearest *available* variant, the matching
    # variant it lacks is in `unavailable` (it was given as the nearest)
    assert res.nearest is None and [str(r) for r in res.unavailable] == ["gemm.float<f32>.no_bias"]
    assert (
        "gemm.float<f32>.no_bias is not in the target device's effective set" in res.differences[0]
    )


def test_quantize_and_dequantize(catalog):
    # RULE: QUANT-10, FAM-21, FAM-22
    q = {"src": [op("s", "f16")], "dst": [op("d", "i8", True, False)]}
    assert [str(r) for r in catalog.match(["quantize"], q, None).matched] == [
        "quantize<f16, i8>.default"
    ]
    q["dst"] = [op("d", "i8", False, False)]
    res = catalog.match(["quantize"], q, None)
    assert res.differences == ["operand 'dst' (d) must carry a quant descriptor"]
    dq = {"src": [op("s", "i8", True)], "dst": [op("d", "f32", False, False)]}
    assert [str(r) for r in catalog.match(["dequantize"], dq, None).matched] == [
        "dequantize<i8, f32>.default"
    ]


def test_cast_any_supported(catalog):
    # RULE: FAM-20
    c = {"src": [op("s", "u16")], "dst": [op("d", "bf16", False, False)]}
    assert [str(r) for r in catalog.match(["cast"], c, None).matched] == ["cast.default"]
    assert not catalog.match(["cast"], {"src": [op("s", "f16")]}, None).ok


def test_extra_operand_and_unknown_family(catalog):
    # RULE: FAM-02
    b = {
        "input": [op("x", "f16")],
        "output": [op("y", "f16", False, False)],
        "scale": [op("s", "f16")],
    }
    res = catalog.match(["softmax"], b, None)
    assert res.differences == ["operand 'scale' (s) is not allowed by softmax<f16>.default"]
    assert catalog.match(["nothing"], b, None).nearest is None


def test_match_is_memoised(catalog):
    b = gemm_bindings("f16", "f16", "f16")
    first = catalog.match(GEMM, b, "f32")
    assert catalog.match(GEMM, b, "f32").matched == first.matched
    assert len(catalog._memo) >= 1
