"""The parser's fast path for a tiled program's staging statements
(`upstream_dialects.fast_ops`, D-COMPILE-PARSE-FAST): the module it builds
is xDSL's own, op for op (generic form with locations, value names), and
whatever it does not read exactly is xDSL's, errors included."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from source_files import sources
from xdsl.printer import Printer

from nem.compile.lower import xdsl_context
from nem.frontends.upstream_dialects import LocatingParser

ROOT = Path(__file__).resolve().parents[2]

# every form, twice (the second time from the memos), with dynamic subview
# offsets, an alignment, a layout alias, a type spelled differently
# (`memref<1024xi8,2>`) and a trailing location (left to xDSL)
STAGED = """\
#map = affine_map<(d0) -> (d0 * 2)>
func.func @f(%arg0: memref<8x64xf32>, %arg1: memref<8x64xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %big = memref.alloc() {alignment = 64 : i64} : memref<8x64xf32>
  %big_1 = memref.alloc() {alignment = 64 : i64} : memref<8x64xf32>
  scf.for %arg2 = %c0 to %c8 step %c4 {
    %alloc = memref.alloc() : memref<1024xi8, 2>
    %alloc_2 = memref.alloc() : memref<1024xi8, 2>
    %view = memref.view %alloc[%c0][] : memref<1024xi8, 2> to memref<4x64xf32, 2>
    %view_3 = memref.view %alloc_2[%c0][] : memref<1024xi8, 2> to memref<4x64xf32, 2>
    %subview = memref.subview %arg0[%arg2, 0] [4, 64] [1, 1] : memref<8x64xf32> to memref<4x64xf32, strided<[64, 1], offset: ?>>
    %subview_4 = memref.subview %arg1[%arg2, 0] [4, 64] [1, 1] : memref<8x64xf32> to memref<4x64xf32, strided<[64, 1], offset: ?>>
    %subview_5 = memref.subview %arg1[4, 0] [4, 64] [1, 1] : memref<8x64xf32> to memref<4x64xf32, strided<[64, 1], offset: 256>>
    linalg.copy ins(%subview : memref<4x64xf32, strided<[64, 1], offset: ?>>) outs(%view : memref<4x64xf32, 2>)
    linalg.copy ins(%view : memref<4x64xf32, 2>) outs(%view_3 : memref<4x64xf32, 2>) loc("n"("Relu"("m.onnx":3:1)))
    linalg.copy ins(%view_3 : memref<4x64xf32, 2>) outs(%subview_4 : memref<4x64xf32, strided<[64, 1], offset: ?>>)
    memref.copy %subview_5, %subview_4 : memref<4x64xf32, strided<[64, 1], offset: 256>> to memref<4x64xf32, strided<[64, 1], offset: ?>>
    memref.dealloc %alloc : memref<1024xi8, 2>
    memref.dealloc %alloc_2 : memref<1024xi8,2>
  }
  memref.copy %big, %big_1 : memref<8x64xf32> to memref<8x64xf32>
  memref.dealloc %big : memref<8x64xf32>
  memref.dealloc %big_1 : memref<8x64xf32>
  %m = memref.alloc() : memref<16xf32, #map>
  memref.dealloc %m : memref<16xf32, #map>
  func.return
}
"""


def parsed(text: str, fast: bool, file: str = "t.mlir") -> tuple[str, list[str | None], int]:
    """(the module in generic form with every op's location, every value's
    name, how many statements the fast path read)."""
    ctx = xdsl_context()
    parser = LocatingParser(ctx, text, file, fast=fast)
    module = parser.parse_module()
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True, print_debuginfo=True).print_op(module)
    for op in module.walk():  # properties the printer leaves out (a default's) too
        out.write(f"{op.name} {sorted(op.properties.items())}\n")
    names = [v.name_hint for op in module.walk() for v in op.results] + [
        a.name_hint for op in module.walk() for r in op.regions for b in r.blocks for a in b.args
    ]
    return out.getvalue(), names, parser._fast.read if parser._fast is not None else 0


def assert_same_error(program: str, before: str, bad: str) -> None:
    """`program` with the statement `bad` inserted before the line `before`
    fails in the fast path as in xDSL's parse: the same exception type and
    message (the same place)."""
    at = program.index(before)
    text = program[:at] + bad + program[at:]
    errors = []
    for fast in (False, True):
        with pytest.raises(Exception) as e:
            parsed(text, fast)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]


def test_staging_statements_build_what_xdsl_builds():
    slow, names, _ = parsed(STAGED, fast=False)
    fast, fast_names, read = parsed(STAGED, fast=True)
    assert fast == slow and fast_names == names
    # 18 of the 20 staging statements: not the one with a location, nor the
    # first alloc with the dictionary not parsed before (xDSL's parse fills
    # the memo); a type not seen before is parsed in place by xDSL's parser
    assert read == 18


@pytest.mark.parametrize(
    "bad",
    [
        # type mismatch with the definition
        "    linalg.copy ins(%view : memref<4x64xf16, 2>) outs(%view_3 : memref<4x64xf32, 2>)\n",
        # a name defined twice
        "    %view = memref.view %alloc[%c0][] : memref<1024xi8, 2> to memref<4x64xf32, 2>\n",
        # a view of a non-i8 buffer (the op's constraint)
        "    %v = memref.view %view[%c0][] : memref<4x64xf32, 2> to memref<4x64xf32, 2>\n",
        # an undefined operand (a forward reference: xDSL reports it at the end)
        "    memref.dealloc %nope : memref<1024xi8, 2>\n",
        # an offset that is not an index
        "    %s = memref.subview %arg0[%view, 0] [4, 64] [1, 1] : memref<8x64xf32> to "
        "memref<4x64xf32, strided<[64, 1], offset: ?>>\n",
        # a broken type
        "    memref.dealloc %alloc : memref<1024xi8, 2, >\n",
        # a plain spelling of an i8 buffer in memory space 2 (not the one defined)
        "    memref.dealloc %alloc : memref<1024xi8, strided<[1], offset: 3>, 2>\n",
    ],
)
def test_errors_are_xdsls(bad):
    """A statement the fast path would misread is xDSL's: the same error at
    the same place."""
    assert_same_error(STAGED, "    memref.dealloc %alloc : memref<1024xi8, 2>", bad)


BODIES = """\
#id = affine_map<(d0) -> (d0)>
func.func @f(%m: memref<4xf32>, %n: memref<4xf32>, %h: memref<4xf16>, %x: f32) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%m : memref<4xf32>) outs(%n : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    %1 = arith.mulf %0, %in : f32
    %2 = arith.maximumf %1, %out : f32
    %3 = arith.subf %2, %x : f32
    %4 = arith.divf %3, %in : f32
    %5 = arith.minimumf %4, %in : f32
    %6 = arith.addf %5, %in fastmath<fast> : f32
    linalg.yield %6 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%h : memref<4xf16>) outs(%h : memref<4xf16>) {
  ^bb0(%in: f16, %out: f16):
    %0 = arith.addf %in, %out : f16
    linalg.yield %0 : f16
  }
  func.return
}
"""


def test_generic_bodies_build_what_xdsl_builds():
    slow, names, _ = parsed(BODIES, fast=False)
    fast, fast_names, read = parsed(BODIES, fast=True)
    assert fast == slow and fast_names == names
    # all but the one with fast-math flags and the first generic (its
    # dictionary not parsed before)
    assert read == 10


@pytest.mark.parametrize(
    "bad",
    [
        "    %9 = arith.addf %in, %h : f32\n",  # an operand of another type
        "    %9 = arith.addf %in, %nope : f32\n",  # not defined
        "    linalg.yield %h : f32\n",
    ],
)
def test_body_errors_are_xdsls(bad):
    assert_same_error(BODIES, "    linalg.yield %6 : f32", bad)


# generics (with and without `ins`, two inputs, a trailing location, result
# types after the body, an extra dictionary entry) and named ops (a
# convolution's dictionary in front, a fill of a scalar), each form twice:
# the second time from the memos
NAMED = """\
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @f(%i: memref<1x4x4x2xf32>, %w: memref<3x3x2x2xf32>, %o: memref<1x2x2x2xf32>, %c: f32) {
  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%i, %w : memref<1x4x4x2xf32>, memref<3x3x2x2xf32>) outs(%o : memref<1x2x2x2xf32>)
  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%i, %w : memref<1x4x4x2xf32>, memref<3x3x2x2xf32>) outs(%o : memref<1x2x2x2xf32>)
  linalg.fill ins(%c : f32) outs(%o : memref<1x2x2x2xf32>)
  linalg.fill ins(%c : f32) outs(%o : memref<1x2x2x2xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%o, %o : memref<1x2x2x2xf32>, memref<1x2x2x2xf32>) outs(%o : memref<1x2x2x2xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %0 = arith.addf %in, %in_0 : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%o, %o : memref<1x2x2x2xf32>, memref<1x2x2x2xf32>) outs(%o : memref<1x2x2x2xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %0 = arith.addf %in, %in_0 : f32
    linalg.yield %0 : f32
  } loc("g"("Add"("m.onnx":7:1)))
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%o : memref<1x2x2x2xf32>) {
  ^bb0(%out: f32):
    linalg.yield %c : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%o : memref<1x2x2x2xf32>) {
  ^bb0(%out: f32):
    linalg.yield %c : f32
  } -> memref<1x2x2x2xf32>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"], doc = "d"} outs(%o : memref<1x2x2x2xf32>) {
  ^bb0(%out: f32):
    linalg.yield %c : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"], doc = "d"} outs(%o : memref<1x2x2x2xf32>) {
  ^bb0(%out: f32):
    linalg.yield %c : f32
  }
  func.return
}
"""


def test_generics_and_named_ops_build_what_xdsl_builds():
    slow, names, _ = parsed(NAMED, fast=False)
    fast, fast_names, read = parsed(NAMED, fast=True)
    assert fast == slow and fast_names == names
    # the second convolution, both fills, the second (located) generic, and
    # the bodies' 2 addf and 7 yields: not the first of each dictionary, nor
    # one with a `doc` entry; the generic followed by result types is
    # xDSL's, its body read twice (the fast path's read, put back)
    assert read == 1 + 2 + 1 + 2 + 7


@pytest.mark.parametrize(
    "bad",
    [
        # an input of another type than its definition's
        "  linalg.fill ins(%c : f16) outs(%o : memref<1x2x2x2xf32>)\n",
        # a convolution's input not defined
        "  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : "
        "tensor<2xi64>} ins(%i, %nope : memref<1x4x4x2xf32>, memref<3x3x2x2xf32>) "
        "outs(%o : memref<1x2x2x2xf32>)\n",
        # an error in a generic's body, and a generic's output of another type
        '  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", '
        '"parallel", "parallel"]} outs(%o : memref<1x2x2x2xf32>) {\n  ^bb0(%out: f32):\n'
        "    linalg.yield %nope : f32\n  }\n",
        '  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", '
        '"parallel", "parallel"]} outs(%i : memref<1x2x2x2xf32>) {\n  ^bb0(%out: f32):\n'
        "    linalg.yield %c : f32\n  }\n",
    ],
)
def test_generic_and_named_errors_are_xdsls(bad):
    assert_same_error(NAMED, "  func.return", bad)


@pytest.mark.parametrize(
    "name,dtype", [("cnn", "f32"), ("resblock", "f32"), ("transformer", "f16"), ("mlp", "f32")]
)
@pytest.mark.slow  # 70 s (4 cases)
def test_tiled_models_parse_as_xdsl_parses_them(name, dtype):
    """The tiled text of the sample models (generics, convolutions, fills and
    the staging around them): the same module with the fast path."""
    pytest.importorskip("mlir.ir")
    from nem.compile import compile_onnx
    from nem.frontends.onnx import samples

    model = getattr(samples, name)(dtype)
    tiled = compile_onnx(model, device="npm_pro_x1").stage("tile").text
    slow = parsed(tiled, fast=False)
    fast = parsed(tiled, fast=True)
    assert fast[:2] == slow[:2]
    assert fast[2] > 0


@pytest.mark.parametrize(
    "spelling",
    [
        "memref<150528xi8, 2>",
        "memref<1x56x224x3xf32, strided<[150528, 672, 3, 1]>>",
        "memref<1x56x224x3xf32, strided<[150528, 672, 3, 1], offset: 37632>>",
        "memref<1x56x224x3xf16, strided<[150528, 672, 3, 1], offset: 0>, 3>",
        "memref<7x7x3x64xi32, 4>",
        "memref<4x64xf32, strided<[1]>>",  # xDSL does not check the layout's rank either
        "memref<0x4xf32>",
        "memref<4x64xf32, strided<[64, 1], offset: ?>>",  # the rest: xDSL's
        "memref<?x4xf32>",
        "memref<4xf64>",
        "memref<1024xi8,2>",
        "memref<1024xi8, #map>",
        'memref<4xf32, "L1">',
    ],
)
def test_memref_types_are_xdsls(spelling):
    """A memref type read without xDSL's lexer (`memref_type`) is the one
    xDSL's parser builds; a spelling it does not read is left to xDSL."""
    from xdsl.parser import Parser

    from nem.frontends.upstream_dialects.fast_ops import memref_type

    plain = "?" not in spelling and "#" not in spelling and "64>" not in spelling
    plain = plain and '"' not in spelling and ",2" not in spelling
    built = memref_type(spelling)
    if not plain:
        assert built is None
        return
    ctx = xdsl_context()
    ctx.allow_unregistered = True
    xdsls = Parser(ctx, spelling).parse_type()
    assert built is not None and built == xdsls and str(built) == str(xdsls)


def test_the_lowering_samples_parse_as_xdsl_parses_them():
    """Every MLIR sample of the lowering and compile lit tests (the staging
    of upstream's tiling and DMA routes): the same module with the fast path."""
    read = 0
    for path in sources("*.mlir", "test/lit"):
        if (
            path.parts[-3:-1] != ("lit", "lowering")
            and "lowering" not in path.parts
            and "compile" not in path.parts
        ):
            continue
        text = path.read_text()
        if "split-input-file" in text:
            continue
        try:
            slow = parsed(text, fast=False)
        except Exception:  # a sample of an error: xDSL's error, checked above
            continue
        fast = parsed(text, fast=True)
        assert fast[:2] == slow[:2], path
        read += fast[2]
    assert read > 100
