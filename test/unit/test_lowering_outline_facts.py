"""What `nem-outline-kernels` needs to know before the conversion
(D-LOW-OUTLINE), computed without it: whether a task has a variant on the
target, asked on its operands' element types without building it
(`legality.TaskLegality`), and which scalar loads the kernels perform
themselves (`escape.loaded_by_kernels`, a fact of the MLIR, not a record
the conversion keeps)."""

from __future__ import annotations

import pytest
from xdsl.dialects import affine, func
from xdsl.dialects.builtin import ModuleOp, f16, f32, i8, i32
from xdsl.ir import Attribute, Block

from nem.devices.device_lookup import find_device
from nem.dialect.builder import NemBuilder
from nem.dialect.operand_binding import match_families
from nem.dialect.ops import ComputeOp
from nem.dialect.verifier import baseline_catalog
from nem.frontends.nem_text import print_nem
from nem.frontends.upstream_dialects import lowering_context, parse_mlir
from nem.passes.lowering.context import Options
from nem.passes.lowering.driver import Lowerer
from nem.passes.lowering.escape import loaded_by_kernels
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.legality import TaskLegality
from nem.passes.lowering.passes import parse_spaces

ELEMS: list[Attribute] = [f32, f16, i8, i32]
TASKS = [
    ("matmul", 3),
    ("matmul", 2),
    ("conv2d", 3),
    ("conv2d", 2),
    ("add", 2),
    ("max", 2),
    ("mul", 2),
    ("maxpool", 1),
    ("exp", 1),
]
"""Opcodes the lowering builds, with their input counts (the accumulating
forms take the output as an input too, D-LOW-ACCUM)."""

ATTRS: dict[str, dict[str, object]] = {
    "conv2d": {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]},
    "maxpool": {"kernel_shape": [2, 2], "strides": [1, 1], "pads": [0, 0, 0, 0]},
}


@pytest.mark.parametrize("device", [None, "npm_mid", "npm_pro_x1", "npm_lite"])
def test_legality_on_element_types_is_the_built_task_check(device) -> None:
    """For every opcode the lowering builds and every input/output element
    type, the answer on element types alone is the family check of the
    built task (`match_families`, what nem-verify and DEV-13 run), on the
    baseline and on each device; both answers occur."""
    dev = find_device(device) if device else None
    catalog = dev.catalog if dev is not None else baseline_catalog()
    legality = TaskLegality(catalog, dev, device)
    b = NemBuilder.at_end(Block())
    buf = b.buffer("B", "DDR", 4096, align=64)
    seen = set()
    for opcode, n_in in TASKS:
        for e_in in ELEMS:
            for e_out in ELEMS:
                ins = [
                    b.region(None, buf, 0, 64, elem=e_in, shape=[4, 4], layout="MN")
                    for _ in range(n_in)
                ]
                out = b.region(None, buf, 0, 64, elem=e_out, shape=[4, 4], layout="MN")
                task = b.compute(opcode, ins, [out], attrs=ATTRS.get(opcode, {})).owner
                assert isinstance(task, ComputeOp)
                allowed = dev.effective_for_family(task.SPEC.families) if dev else None
                built = match_families(task, catalog, allowed).ok
                why = legality.why_not(opcode, [e_in] * n_in, [e_out])
                assert (why is None) == built, (opcode, n_in, e_in, e_out)
                seen.add(built)
    assert seen == {True, False}


def test_why_not_is_the_remark_text() -> None:
    mid = find_device("npm_mid")
    on_mid = TaskLegality(mid.catalog, mid, "npm_mid")
    assert on_mid.why_not("conv2d", [f32] * 3, [f32]) == (
        "no conv2d variant for f32 on device npm_mid"
    )
    baseline = TaskLegality(baseline_catalog(), None, None)
    assert (
        baseline.why_not("add", [i8, i8], [f32]) == "no add variant for f32/i8 on the NEM baseline"
    )
    assert baseline.why_not("add", [f16, f16], [f16]) is None


SCALARS = """
func.func @scale(%S: memref<1xf32>, %A: memref<8xf32>, %C: memref<8xf32>, %D: memref<1xf32>) {
  %s = affine.load %S[0] : memref<1xf32>
  affine.for %i = 0 to 8 {
    %a = affine.load %A[7 - %i] : memref<8xf32>
    %p = arith.mulf %a, %s : f32
    affine.store %p, %C[%i] : memref<8xf32>
  }
  %t = affine.load %S[0] : memref<1xf32>
  affine.store %t, %D[0] : memref<1xf32>
  func.return
}
"""


def test_the_scalar_loads_kernels_perform_are_read_from_the_mlir() -> None:
    """A scalar load whose value only loop nests use has no task: each
    kernel loads it (D-LOW-ESCAPE; the nest escapes: it reads %A reversed); one a store copies is a one-element
    copy; a load inside a nest is the nest's.  The conversion's kernel
    runs the load it is told of."""
    module = parse_mlir(lowering_context(), SCALARS)
    assert isinstance(module, ModuleOp)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    scale, nest, copied, _, _ = fn.body.block.ops
    assert isinstance(nest, affine.ForOp)
    inner = next(iter(nest.body.block.ops))
    assert loaded_by_kernels(scale)
    assert not loaded_by_kernels(copied)
    assert not loaded_by_kernels(inner)
    Lowerer(Options(parse_spaces("0:DDR")), HANDLERS).run(module)
    text = print_nem(module)
    (kernel,) = [line for line in text.splitlines() if 'op="mlir.kernel"' in line]
    assert kernel.count("affine.load") == 2  # %S[0] sunk into the kernel, and %A[7 - %i]
