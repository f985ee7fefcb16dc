"""A `.mlir` input's errors in later stages (the lowering, the final
nem-verify) point at the user's file, line and column (D-COMPILE-MLIR-LOC),
not only at the tiled program, which only --save-temps writes."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("mlir.ir")

# Relu -> broadcast [3,1] -> [2,3,2] -> Relu: the broadcast is at 14:10
SOURCE = """\
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d1, 0)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module {
  func.func @main(%x: tensor<3x1xf32>) -> tensor<2x3x2xf32> {
    %0 = tensor.empty() : tensor<3x1xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<3x1xf32>) outs(%0 : tensor<3x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %cst = arith.constant 0.000000e+00 : f32
      %6 = arith.maximumf %in, %cst : f32
      linalg.yield %6 : f32
    } -> tensor<3x1xf32>
    %2 = tensor.empty() : tensor<2x3x2xf32>
    %3 = linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%1 : tensor<3x1xf32>) outs(%2 : tensor<2x3x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<2x3x2xf32>
    %4 = tensor.empty() : tensor<2x3x2xf32>
    %5 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%3 : tensor<2x3x2xf32>) outs(%4 : tensor<2x3x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      %cst = arith.constant 0.000000e+00 : f32
      %6 = arith.maximumf %in, %cst : f32
      linalg.yield %6 : f32
    } -> tensor<2x3x2xf32>
    return %5 : tensor<2x3x2xf32>
  }
}
"""


@pytest.mark.parametrize("final_check", ["lowering", "nem-verify"])
def test_later_stage_errors_point_into_the_users_mlir(monkeypatch, tmp_path, final_check):
    """The in-place broadcast D-LOW-BCAST avoids, put back: caught by the
    compile's final nem-verify, or (that verification off) by the
    lowering's own check (D-COMPILE-ONE-FINAL-CHECK); either way the
    headline is the broadcast's line and column in the user's file, quoted,
    and the tiled program is a note."""
    from nem.compile import CompileError, compile_mlir
    from nem.passes.lowering import broadcasts

    monkeypatch.setattr(broadcasts, "_overlapping", lambda *a: [])
    # doublings, not the concats that replace them (D-LOW-BCAST-CONCAT)
    monkeypatch.setattr(broadcasts, "_concat_broadcast", lambda *a, **k: None)
    src = tmp_path / "bc.mlir"
    src.write_text(SOURCE)
    with pytest.raises(CompileError) as e:
        compile_mlir(src, engines=1, verify=final_check == "nem-verify")
    lines = str(e.value).splitlines()
    what = "its checks" if final_check == "lowering" else "nem-verify"
    assert lines[0].startswith(
        f"{src}:14:10: error: lowered NEM program fails {what}: "
        "transfer source and destination overlap"
    )
    assert lines[1].strip().startswith("%3 = linalg.generic")
    assert lines[2] == " " * 9 + "^"
    assert re.fullmatch(
        re.escape(str(tmp_path / "bc.tile.mlir")) + r":\d+:\d+: note: in the "
        r"tiled program \(nem-compile --save-temps writes it\)",
        lines[3],
    )


def test_text_input_is_quoted_too(monkeypatch):
    """`compile_mlir` of text (no file): the position names `<mlir>` and
    quotes the text given."""
    from nem.compile import CompileError, compile_mlir
    from nem.passes.lowering import broadcasts

    monkeypatch.setattr(broadcasts, "_overlapping", lambda *a: [])
    # doublings, not the concats that replace them (D-LOW-BCAST-CONCAT)
    monkeypatch.setattr(broadcasts, "_concat_broadcast", lambda *a, **k: None)
    with pytest.raises(CompileError) as e:
        compile_mlir(SOURCE, engines=1)
    lines = str(e.value).splitlines()
    assert lines[0].startswith("<mlir>:14:10: error: lowered NEM program fails nem-verify")
    assert lines[1].strip().startswith("%3 = linalg.generic")


def test_repeated_locations_are_parsed_once_and_each_op_keeps_its_own():
    """The parser reuses a location it parsed before (a tiled program repeats
    each ONNX node's `loc(...)` on every op of the node); parentheses and
    escaped quotes inside its strings do not end it early, and a different
    location right after is parsed on its own."""
    from xdsl.dialects.builtin import NameLoc

    from nem.compile.lower import xdsl_context
    from nem.frontends.upstream_dialects import parse_mlir

    odd = 'loc("n(0)"("Conv \\")("("m.onnx":1:1)))'
    text = (
        "func.func @f() {\n"
        f"  %a = arith.constant 1 : index {odd}\n"
        f"  %b = arith.constant 2 : index {odd}\n"
        '  %c = arith.constant 3 : index loc("n(0)"("Conv"("m.onnx":2:1)))\n'
        "  func.return\n}\n"
    )
    ops = list(parse_mlir(xdsl_context(), text, "t.mlir").walk())[2:5]
    a, b, c = (op.location for op in ops)
    assert a is b and isinstance(a, NameLoc) and a.desc.data == "n(0)"
    assert a.location.desc.data == 'Conv ")('
    assert isinstance(c, NameLoc) and c.location.desc.data == "Conv"
    assert c.location.location.line.data == 2


def test_repeated_attribute_dictionaries_are_parsed_once_and_copied():
    """An attribute dictionary whose text was parsed before is reused (a
    tiled CNN repeats each convolution's `{dilations = ..., strides = ...}`):
    the attributes are shared, each op gets its own dictionary, and a brace
    inside a string does not end it early."""
    from nem.compile.lower import xdsl_context
    from nem.frontends.upstream_dialects import parse_mlir

    attrs = '{a = dense<1> : vector<2xi64>, s = "x}{"}'
    text = (
        "func.func @f() {\n"
        f'  "test.op"() {attrs} : () -> ()\n'
        f'  "test.op"() {attrs} : () -> ()\n'
        '  "test.op"() {a = dense<2> : vector<2xi64>, s = "x}{"} : () -> ()\n'
        "  func.return\n}\n"
    )
    ctx = xdsl_context()
    ctx.allow_unregistered = True
    a, b, c = list(parse_mlir(ctx, text, "t.mlir").walk())[2:5]
    assert a.attributes is not b.attributes and a.attributes["a"] is b.attributes["a"]
    assert a.attributes["s"].data == "x}{" and b.attributes == a.attributes
    assert c.attributes["a"] != a.attributes["a"] and c.attributes["s"] == a.attributes["s"]


def test_loops_in_the_source_are_located_on_the_transform_route(tmp_path):
    """hostile8 (cli fuzz target, `nem-compile eltwise_tiled.mlir`): a
    function that already has loops was refused by the transform route's
    nest count, unlocated, in stage 'tile'; it is refused at the first loop
    of the user's file, and the affine route still compiles it."""
    from compile_runs import DEVICE

    from nem.compile import CompileError, CompileOptions, compile_mlir

    path = tmp_path / "loops.mlir"
    path.write_text(
        "func.func @f(%a: memref<8xf32>, %b: memref<8xf32>) {\n"
        "  affine.for %i = 0 to 8 {\n"
        "    %v = affine.load %a[%i] : memref<8xf32>\n"
        "    affine.store %v, %b[%i] : memref<8xf32>\n"
        "  }\n  return\n}\n"
    )
    with pytest.raises(CompileError) as e:
        compile_mlir(path, CompileOptions(device=DEVICE))
    assert e.value.stage == "import"
    assert str(e.value).startswith(
        f"{path}:2:3: error: not supported: @f already has loops (affine.for)"
    ), str(e.value)
    assert "\nfix: give linalg on tensors" in str(e.value)
    assert compile_mlir(path, CompileOptions(device=DEVICE, route="affine")).nem
