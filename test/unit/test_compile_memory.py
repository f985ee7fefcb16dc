"""The lower stage frees the lowered xDSL module before nem-verify parses
the printed text back (issue 30 item 3: a chain of 3,000 nodes peaked at
3.2 GB, the two modules and the garbage of every rewrite alive at once, the
stages running with the cyclic collector paused)."""

from __future__ import annotations

import weakref

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from nem.compile import compile_onnx  # noqa: E402


def _chain(tmp_path, n: int = 3) -> str:
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node(
            "Relu", ["x" if i == 0 else f"t{i - 1}"], ["y" if i == n - 1 else f"t{i}"], name=f"n{i}"
        )
        for i in range(n)
    ]
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
    )
    path = tmp_path / "chain.onnx"
    onnx.save(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path)
    )
    return str(path)


def test_lowered_module_freed_before_verify(tmp_path, monkeypatch):
    from nem.compile import lower
    from nem.frontends.nem_text import printer

    printed: list[weakref.ref] = []
    alive_at_verify: list[bool] = []
    print_nem, verify_nem = printer.print_nem, lower.verify_nem

    def recording_print(module, *args, **kwargs):
        printed.append(weakref.ref(module))
        return print_nem(module, *args, **kwargs)

    def checking_verify(*args, **kwargs):
        alive_at_verify.append(printed[-1]() is not None)
        return verify_nem(*args, **kwargs)

    monkeypatch.setattr(printer, "print_nem", recording_print)
    monkeypatch.setattr(lower, "verify_nem", checking_verify)
    result = compile_onnx(_chain(tmp_path), device="npm_pro_x1")
    assert "relu" in result.nem
    assert alive_at_verify == [False]
