"""`nem-forward-zero-fills` keeps a lowered program's results (D-LOW-FILL-FORWARD).

The sample models' tiled MLIR is lowered twice, with and without the pass
(`convert-affine-to-nem`, then `nem-synthesize-deps` as `lower-to-nem`
runs them), and both programs run on the same inputs and weights under
random schedules: the outputs are equal bit for bit and the forwarded
program loads fewer tiles (its zero accumulators are filled in place).
The models are compiled with their accumulators' fills tiled apart, as the
affine route and a tiled reduction leave them (the transform route fills
an untiled reduction's tiles in L1 itself, D-COMPILE-ZERO-INIT, and leaves
nothing to forward).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from nem.compile import compile_onnx, zero_init  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402
from nem.passes.driver import run_pipeline  # noqa: E402
from nem.runtime.api import NemInterpreter  # noqa: E402

DEVICE = "npm_pro_x1"


def _compile(model, monkeypatch):
    """`model` compiled with each zero fill tiled apart from the op that
    accumulates into it (no fill paired with its op, D-COMPILE-ZERO-INIT)."""
    with monkeypatch.context() as m:
        m.setattr(zero_init, "pairs", lambda block, ops: {})
        return compile_onnx(model, device=DEVICE)


def _lower(tiled: str, spaces: str, arg_names: list[str], forward: bool) -> str:
    """`lower-to-nem`'s conversion and deps synthesis, with or without the pass."""
    from xdsl.dialects.func import FuncOp

    from nem.compile.lower import xdsl_context
    from nem.frontends.nem_text.printer import print_nem
    from nem.frontends.upstream_dialects import parse_mlir

    ctx = xdsl_context()
    module = parse_mlir(ctx, tiled, "m.tile.mlir")
    fn = next(op for op in module.walk() if isinstance(op, FuncOp) and op.body.blocks)
    for arg, name in zip(fn.body.block.args, arg_names):
        arg.name_hint = name
    passes = [f"convert-affine-to-nem{{device={DEVICE} memory-spaces={spaces}}}"]
    if forward:
        passes.append("nem-forward-zero-fills")
    passes.append(f"nem-synthesize-deps{{device={DEVICE} narrow-windows=true}}")
    run_pipeline(module, ",".join(passes), file="m.tile.mlir", ctx=ctx)
    return print_nem(module)


@pytest.mark.parametrize("name,dtype", [("transformer", "f16"), ("resblock", "f32")])
@pytest.mark.slow  # 20 s (2 cases)
def test_forwarding_keeps_results_bit_for_bit(name, dtype, monkeypatch):
    model = getattr(samples, name)(dtype)
    result = _compile(model, monkeypatch)
    tiled = result.stage("tile").text
    iface = result.interface
    inputs = samples.random_inputs(model, seed=5)
    outs = {}
    for forward in (False, True):
        text = _lower(tiled, result.memory_spaces, iface.arg_names, forward)
        it = NemInterpreter(device=DEVICE)
        it.load_string(text, file="m.nem")
        for arg, _, _ in iface.inputs:
            it.write_tensor(arg, inputs[iface.onnx_names[arg]])
        for arg, arr in iface.weights.items():
            it.write_tensor(arg, arr)
        _, diff = it.run_schedules(2, seed=7)
        assert diff is None
        run = it.run()
        assert run.status == "completed" and run.race_count == 0, run.error
        outs[forward] = ([it.read_tensor(o, shape, dt) for o, shape, dt in iface.outputs], text)
    for a, b in zip(outs[False][0], outs[True][0]):
        np.testing.assert_array_equal(a, b)
    plain, forwarded = outs[False][1], outs[True][1]
    assert forwarded.count("transfer.async") < plain.count("transfer.async")
    assert "zero1 = clamp.async" in forwarded


def test_fresh_names_skip_every_declared_name(monkeypatch):
    """The fills' names skip every name the program declares, tokens of
    tasks included (a lowered program whose fills took zero1..zeroN: the
    next is zeroN+1), as a plain walk asking every op finds them."""
    from itertools import count

    from xdsl.dialects.builtin import StringAttr

    from nem.dialect.ops import TaskOp, programs
    from nem.frontends.nem_text.parser import parse_nem
    from nem.passes.forward_fills import _fresh_zero_names

    result = _compile(samples.resblock("f32"), monkeypatch)
    (program,) = programs(parse_nem(result.nem, "m.nem"))
    taken = set()
    for op in program.walk():
        if isinstance(op, TaskOp) and op.token_name() is not None:
            taken.add(op.token_name())
        for key in ("name", "iv_name"):
            if isinstance(attr := op.properties.get(key), StringAttr):
                taken.add(attr.data)
    assert "zero1" in taken
    names = _fresh_zero_names(program)
    want = (f"zero{k}" for k in count(1) if f"zero{k}" not in taken)
    assert [next(names) for _ in range(3)] == [next(want) for _ in range(3)]


def test_fresh_names_skip_each_kind_of_declaration():
    """Each kind of declaration takes a `zeroN` name from the fills: a
    buffer (an ONNX initializer `zero_1` is a buffer `zero1`), a const, a
    let, a loop variable and a task's token; the first fresh name is the
    one none of them holds (a compiled model's taken names of that form
    are all tokens, so the test above cannot tell the kinds apart)."""
    from nem.dialect.ops import programs
    from nem.frontends.nem_text.parser import parse_nem
    from nem.passes.forward_fills import _fresh_zero_names

    text = (
        'device "npm_pro.nem"\nprogram p:\n'
        "buffer zero1 : DDR (size=4096)\n"
        "const zero2 = 64\n"
        "loop zero3 in [0..1]:\n"
        "  let zero4 = zero3 * zero2\n"
        "  zero5 = transfer.async(dst=region(zero1, zero4, 64), src=region(zero1, 2048, 64))\n"
        "endloop\n"
    )
    (program,) = programs(parse_nem(text, "t.nem"))
    assert next(_fresh_zero_names(program)) == "zero6"
