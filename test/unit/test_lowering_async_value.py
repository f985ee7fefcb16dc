"""`!async.value<T>` (D-LOW-ASYNC-VALUE): the async dialect's value type,
`async.execute` value operands/results and `async.await` of a value, and their
lowering to NEM: a memref payload is the view of the yielded memref (the await
result and the body argument alias it), an index payload its affine value,
and ordering goes through the producing execute's token.  Scalar payloads
that are used are rejected with a diagnostic at the producing execute.

The end-to-end test lowers `Inputs/async_value_pipeline.mlir` with the real
CLI, runs it in the reference runtime on random inputs and compares with numpy.
"""

from __future__ import annotations

import subprocess
from io import StringIO

import numpy as np
import pytest
from lowering_runs import INPUTS, check_add, f32, lower, run_ok, start, tool
from mlir_tools import find_mlir_opt
from xdsl.dialects.builtin import MemRefType
from xdsl.dialects.builtin import f32 as F32
from xdsl.printer import Printer

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.ops import TransferOp
from nem.frontends.nem_text.printer import print_nem
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects import lowering_context, parse_mlir
from nem.passes.lowering.passes import LowerToNemPass
from nem.passes.pass_context import pass_context

FIXTURE = INPUTS / "async_value_pipeline.mlir"


def lower_text(text: str, name: str = "v.mlir"):
    """The fixture lowered, one transfer per copy: these tests read how
    async values order and alias the copies, not how copies of 16 KiB and
    more made once are split over the DMAs (D-NEM-SPLIT-TRANSFERS)."""
    c = lowering_context()
    m = parse_mlir(c, text, name)
    LowerToNemPass(device="npm_pro_x1", split_transfers=False).apply(pass_context(c), m)
    return m


def printed(op) -> str:
    s = StringIO()
    Printer(stream=s).print_op(op)
    return s.getvalue()


# ---------------------------------------------------------------------------
# the dialect


def test_value_type_parses_and_prints_as_upstream():
    m = parse_mlir(lowering_context(), FIXTURE.read_text(), str(FIXTURE))
    execs = [op for op in m.walk() if isinstance(op, asy.ExecuteOp)]
    assert len(execs) == 3
    t = execs[0].body_results[0].type
    assert isinstance(t, asy.ValueType) and isinstance(t.value_type, MemRefType)
    assert str(asy.ValueType(F32)) == "!async.value<f32>"
    # body operands: one block argument per value operand, typed by the payload
    consumer = execs[2]
    assert [a.type for a in consumer.body_region.block.args] == [
        v.type.value_type for v in consumer.body_operands
    ]
    assert list(consumer.body_operands) == [execs[0].body_results[0], execs[1].body_results[0]]
    aw = next(op for op in m.walk() if isinstance(op, asy.AwaitOp))
    assert aw.result is not None and aw.result.type == consumer.body_results[0].type.value_type
    text = printed(m)
    assert (
        "%t2, %vs = async.execute (%va as %a2: !async.value<memref<64x64xf32, 2 : i64>>, "
        "%vb as %b2: !async.value<memref<64x64xf32, 2 : i64>>) -> " in text
    )
    # the custom form parses back to the same IR
    assert printed(parse_mlir(lowering_context(), text, "rt.mlir")) == text


def test_execute_always_prints_its_terminator():
    """Upstream prints `{ async.yield }` and rejects `async.execute { }`."""
    m = parse_mlir(
        lowering_context(),
        "func.func @f() {\n  %t = async.execute {\n  }\n"
        "  async.await %t : !async.token\n  return\n}\n",
        "e.mlir",
    )
    assert "async.execute {\n      async.yield\n    }" in printed(m)


def test_generic_form_with_values_parses():
    text = (
        '"func.func"() <{function_type = (f32) -> f32, sym_name = "g"}> ({\n'
        "^bb0(%x: f32):\n"
        '  %0:2 = "async.execute"() <{operandSegmentSizes = array<i32: 0, 0>}> ({\n'
        '    "async.yield"(%x) : (f32) -> ()\n'
        "  }) : () -> (!async.token, !async.value<f32>)\n"
        '  %1:2 = "async.execute"(%0#0, %0#1) <{operandSegmentSizes = array<i32: 1, 1>}> ({\n'
        "  ^bb0(%a: f32):\n"
        '    "async.yield"(%a) : (f32) -> ()\n'
        "  }) : (!async.token, !async.value<f32>) -> (!async.token, !async.value<f32>)\n"
        '  %2 = "async.await"(%1#1) : (!async.value<f32>) -> f32\n'
        '  "func.return"(%2) : (f32) -> ()\n'
        "}) : () -> ()\n"
    )
    m = parse_mlir(lowering_context(), text, "g.mlir")
    m.verify()
    ex = [op for op in m.walk() if isinstance(op, asy.ExecuteOp)]
    assert len(ex[1].dependencies) == 1 and len(ex[1].body_operands) == 1
    assert "async.execute [%0] (%1 as %a: !async.value<f32>) -> !async.value<f32> {" in printed(m)


def test_await_result_type_is_verified():
    text = (
        "func.func @f() {\n"
        "  %t, %v = async.execute -> !async.value<f32> {\n"
        "    %c = arith.constant 1.0 : f32\n"
        "    async.yield %c : f32\n"
        "  }\n"
        '  %w = "async.await"(%v) : (!async.value<f32>) -> f64\n'
        "  return\n}\n"
    )
    m = parse_mlir(lowering_context(), text, "a.mlir")
    with pytest.raises(Exception, match="one result of type f32"):
        m.verify()


@pytest.mark.skipif(find_mlir_opt() is None, reason="upstream mlir-opt not installed")
@pytest.mark.slow  # 6 s
def test_upstream_accepts_what_nem_opt_prints(tmp_path):
    mlir_opt = find_mlir_opt()
    for args in ([], ["--print-op-generic"]):
        r = subprocess.run(
            [tool("nem-opt"), str(INPUTS / "async_value_pipeline.mlir"), *args],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        if args:  # xDSL prints custom-form affine.load operands as symbols; not ours
            continue
        u = subprocess.run(
            [str(mlir_opt), "-o", "/dev/null"], input=r.stdout, capture_output=True, text=True
        )
        assert u.returncode == 0, u.stderr


# ---------------------------------------------------------------------------
# lowering


def test_memref_values_alias_the_yielded_view():
    m = lower_text(FIXTURE.read_text(), str(FIXTURE))
    out = print_nem(m)
    xfers = [op for op in m.walk() if isinstance(op, TransferOp)]
    assert len(xfers) == 3
    # the write-back reads the awaited subview: rows 64.. of `o`
    assert "src=region(o, 16384, 16384)" in out
    assert "out region(o, 16384, 16384)" in out
    assert not any(op.name.startswith("async.") for op in m.walk())


def test_value_operand_orders_after_its_producer():
    """A value operand without a dependency token still orders the consumer
    after the producer (upstream: the body runs when its operands are ready)."""
    text = FIXTURE.read_text()
    m = lower_text(text, str(FIXTURE))
    out = print_nem(m)
    add = next(line for line in out.splitlines() if line.startswith("add"))
    assert add.endswith("deps=[dma1, dma2]")


def test_index_value_payload():
    text = """func.func @index_value(%X: memref<256xf32>, %Z: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %tag = memref.alloc() : memref<2xi32>
  %buf = memref.alloc() : memref<64xf32, 2>
  %t, %off = async.execute -> !async.value<index> {
    %o = arith.addi %c64, %c64 : index
    async.yield %o : index
  }
  %t2 = async.execute (%off as %o: !async.value<index>) {
    memref.dma_start %X[%o], %buf[%c0], %c64, %tag[%c0] : memref<256xf32>, memref<64xf32, 2>, memref<2xi32>
    memref.dma_wait %tag[%c0], %c64 : memref<2xi32>
    async.yield
  }
  %o2 = async.await %off : !async.value<index>
  async.await %t2 : !async.token
  memref.dma_start %buf[%c0], %Z[%o2], %c64, %tag[%c1] : memref<64xf32, 2>, memref<256xf32>, memref<2xi32>
  memref.dma_wait %tag[%c1], %c64 : memref<2xi32>
  return
}
"""
    out = print_nem(lower_text(text))
    assert "src=region(X, 512, 256)" in out and "dst=region(Z, 512, 256)" in out


def test_value_in_a_group_and_in_a_loop():
    """add_to_group takes a value (its execute's token); an execute in a loop
    yields a subview that moves with the loop variable."""
    text = """func.func @grouped(%X: memref<256xf32>, %Z: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 64 : index
  %tag = memref.alloc() : memref<2xi32>
  %buf = memref.alloc() : memref<64xf32, 2>
  affine.for %i = 0 to 4 {
    %g = async.create_group %c1 : !async.group
    %t, %v = async.execute -> !async.value<memref<64xf32, strided<[1], offset: ?>>> {
      %off = affine.apply affine_map<(d0) -> (d0 * 64)>(%i)
      %s = memref.subview %X[%off] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
      memref.dma_start %s[%c0], %buf[%c0], %n, %tag[%c0] : memref<64xf32, strided<[1], offset: ?>>, memref<64xf32, 2>, memref<2xi32>
      memref.dma_wait %tag[%c0], %n : memref<2xi32>
      async.yield %s : memref<64xf32, strided<[1], offset: ?>>
    }
    %r = async.add_to_group %v, %g : !async.value<memref<64xf32, strided<[1], offset: ?>>>
    async.await_all %g
    %s2 = async.await %v : !async.value<memref<64xf32, strided<[1], offset: ?>>>
    %off2 = affine.apply affine_map<(d0) -> (d0 * 64)>(%i)
    %z = memref.subview %Z[%off2] [64] [1] : memref<256xf32> to memref<64xf32, strided<[1], offset: ?>>
    memref.copy %s2, %z : memref<64xf32, strided<[1], offset: ?>> to memref<64xf32, strided<[1], offset: ?>>
  }
  return
}
"""
    out = print_nem(lower_text(text))
    assert "loop i in [0..3]:" in out
    # the await result is the yielded subview X[64*i : 64*i + 64] of this iteration
    assert (
        "copy2 = transfer.sync(dst=region(Z, i * 256, 256) elem=f32, shape=[64], "
        "layout=C, src=region(X, i * 256, 256)" in out
    )
    # the awaits order nothing themselves: the copy reads X, which the DMA only
    # reads too, so the two stay concurrent (nem-synthesize-deps orders
    # conflicting accesses only) and the iteration ends waiting for the DMA
    body = out[out.index("loop i") :]
    assert (
        "src=region(X, i * 256, 256) elem=f32, shape=[64], layout=C)\n  wait(dma1)\nendloop" in body
    )


def test_scalar_value_is_rejected_with_its_location():
    text = """func.func @scalar(%X: memref<64xf32>) {
  %t, %v = async.execute -> !async.value<f32> {
    %c = arith.constant 2.0 : f32
    async.yield %c : f32
  }
  %s = async.await %v : !async.value<f32>
  return
}
"""
    with pytest.raises(NemDiagnosticError) as e:
        lower_text(text, "s.mlir")
    d = e.value.diagnostics[0]
    assert (
        "cannot lower 'async.execute': not supported: result #1 of type "
        "!async.value<f32> is used" in d.message
    )
    assert (d.loc.file, d.loc.line, d.loc.col) == ("s.mlir", 2, 3)


def test_unused_scalar_value_is_ignored():
    text = """func.func @unused(%X: memref<64xf32>) {
  %t, %v = async.execute -> !async.value<f32> {
    %c = arith.constant 2.0 : f32
    async.yield %c : f32
  }
  async.await %t : !async.token
  return
}
"""
    lower_text(text)


# ---------------------------------------------------------------------------
# end to end: CLI lowering, reference runtime, numpy


@pytest.mark.slow  # 3 s
def test_async_value_pipeline_e2e(tmp_path):
    nem = lower(FIXTURE, tmp_path / "out.nem")
    want = check_add(nem, (64, 64), seed=13)
    # the lower half of `o` (the yielded subview) holds the sum as well
    it = start(nem, seed=13)
    run_ok(it)
    np.testing.assert_array_equal(it.read_tensor("o", (128, 64), np.float32)[64:], want)


@pytest.mark.slow  # 3 s
def test_async_value_pipeline_e2e_random_inputs(tmp_path):
    nem = lower(FIXTURE, tmp_path / "out.nem")
    rng = np.random.default_rng(21)
    for _ in range(3):
        it = start(nem, seed=int(rng.integers(1 << 30)))
        x = rng.standard_normal((64, 64)).astype(np.float32)
        y = rng.standard_normal((64, 64)).astype(np.float32)
        it.write_tensor("X", x)
        it.write_tensor("Y", y)
        run_ok(it)
        np.testing.assert_array_equal(
            it.read_tensor("Z", (64, 64), np.float32), f32(x.astype(np.float64) + y)
        )
