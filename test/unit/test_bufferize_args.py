"""The bufferize stage gives upstream `one-shot-bufferize` the function
arguments that linalg ops only read as memrefs, each use through its own
`bufferization.to_tensor ... restrict` (D-COMPILE-BUFFERIZE-ARGS): the pass
looks at every use of an operand's value for each operand, quadratic in a
weight read by a chain of thousands of nodes (issue 30).  Checked: the same
bufferized text as the plain passes, and no value read by more than one
op when the passes start (counted, not timed)."""

from __future__ import annotations

import pytest

ir = pytest.importorskip("mlir.ir")
from mlir.passmanager import PassManager  # noqa: E402

from nem.compile import bufferize  # noqa: E402
from nem.compile.pipeline import BUFFERIZE  # noqa: E402

_MAP = "#map = affine_map<(d0, d1) -> (d0, d1)>"


def _generic(out: str, ins: list[str], dest: str) -> str:
    maps = ", ".join(["#map"] * (len(ins) + 1))
    args = ", ".join(f"%a{k}: f32" for k in range(len(ins)))
    types = ", ".join(["tensor<4x4xf32>"] * len(ins))
    return (
        f"    {out} = linalg.generic {{indexing_maps = [{maps}], iterator_types = "
        f'["parallel", "parallel"]}} ins({", ".join(ins)} : {types}) '
        f"outs({dest} : tensor<4x4xf32>) {{\n    ^bb0({args}, %o: f32):\n"
        f"      %r = arith.addf %a0, %a{len(ins) - 1} : f32\n      linalg.yield %r : f32\n"
        "    } -> tensor<4x4xf32>"
    )


def _chain(n: int) -> str:
    """`n` adds of `%w` (read by all of them) along a chain from `%x`."""
    lines = [
        _MAP,
        "module {",
        "  func.func @main(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, "
        "%once: tensor<4x4xf32>) -> tensor<4x4xf32> {",
    ]
    prev = "%x"
    for i in range(n):
        lines.append(f"    %e{i} = tensor.empty() : tensor<4x4xf32>")
        lines.append(_generic(f"%v{i}", [prev, "%w"], f"%e{i}"))
        prev = f"%v{i}"
    lines.append("    %e = tensor.empty() : tensor<4x4xf32>")
    lines.append(_generic("%last", [prev, "%once"], "%e"))
    lines += ["    return %last : tensor<4x4xf32>", "  }", "}"]
    return "\n".join(lines)


def _written() -> str:
    """`%w` read twice and also the destination of a linalg op: left alone."""
    return "\n".join(
        [
            _MAP,
            "module {",
            "  func.func @main(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> "
            "(tensor<4x4xf32>, tensor<4x4xf32>) {",
            "    %e = tensor.empty() : tensor<4x4xf32>",
            _generic("%a", ["%x", "%w"], "%e"),
            _generic("%b", ["%a", "%w"], "%w"),
            "    return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>",
            "  }",
            "}",
        ]
    )


def _plain(text: str) -> str:
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        PassManager.parse(f"builtin.module({BUFFERIZE},canonicalize,cse)").run(m.operation)
        return str(m)


def _ours(text: str) -> tuple[str, int, int]:
    """The bufferized text, the arguments changed and the most uses of a
    tensor value when the passes start."""
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        changed = bufferize.read_only_args_as_buffers(m)
        fn = m.body.operations[0].operation
        block = fn.regions[0].blocks[0]
        values = [*block.arguments, *(r for op in block.operations for r in op.results)]
        most = max(len(list(v.uses)) for v in values if isinstance(v.type, ir.RankedTensorType))
        PassManager.parse(f"builtin.module({BUFFERIZE},canonicalize,cse)").run(m.operation)
        return str(m), changed, most


def test_shared_weight_same_output_one_use_each():
    text = _chain(50)
    out, changed, most = _ours(text)
    assert changed == 1  # %w; %x and %once have one use each
    assert most == 1  # upstream's cost per operand: the uses of its value
    assert out == _plain(text)


def test_argument_also_written_is_left_alone():
    text = _written()
    out, changed, _ = _ours(text)
    assert changed == 0
    assert out == _plain(text)


def test_stage_runs_it():
    """`bufferize.run` is the stage's bufferization (pipeline.Driver.upstream),
    which runs it with no location set."""
    with ir.Context():
        m = ir.Module.parse(_chain(3))
        bufferize.run(m)
        out = str(m)
    assert out == _plain(_chain(3))
    assert "tensor<" not in out
