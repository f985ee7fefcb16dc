"""The kernel interpreter's implemented ops, asked through public API
(`mlir_kernel.IMPLEMENTED`, D-NO-PRIVATE-API), are exactly those its
interpreter's private implementation table holds (read here, in a test, to
check the probe; docs/upstream-reports.md 11 asks xDSL for the query)."""

from __future__ import annotations

from xdsl.dialects import affine, arith, builtin, func, scf, test
from xdsl.ir import Operation
from xdsl.universe import Universe

from nem.runtime.mlir_kernel import IMPLEMENTED, KernelInterpreter, _with_implementations


def _op_classes() -> list[type[Operation]]:
    for factory in Universe.get_multiverse().all_dialects.values():
        factory()
    seen: list[type[Operation]] = []
    stack = [Operation]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if getattr(sub, "name", "") and hasattr(sub, "traits"):
                seen.append(sub)
    return seen


def test_implemented_is_the_interpreters_table() -> None:
    interp = _with_implementations(KernelInterpreter(builtin.ModuleOp([])))
    table = interp._impls._impl_dict
    classes = _op_classes()
    assert len(classes) > 1000
    assert [c for c in classes if (c in IMPLEMENTED) != (c in table)] == []


def test_implemented_examples() -> None:
    for op in (arith.AddfOp, affine.ForOp, affine.YieldOp, scf.ParallelOp, func.ReturnOp):
        assert op in IMPLEMENTED, op
    for op in (test.TestOp, builtin.ModuleOp):
        assert op not in IMPLEMENTED, op
    assert "arith.addf" not in IMPLEMENTED  # only op classes
