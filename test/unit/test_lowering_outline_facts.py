"""What `nem-outline-kernels` needs to know before the conversion
(D-LOW-OUTLINE), computed without it: whether a task has a variant on the
target, asked on its operands' element types without building it
(`legality.TaskLegality`), which scalar loads the kernels perform
themselves (`escape.loaded_by_kernels`, a fact of the MLIR, not a record
the conversion keeps), and that the scratch buffers of a plan that falls
back leave no trace in the names of those kept (`Names.release_scratch`)."""

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
from nem.passes.lowering.context import Names, Options
from nem.passes.lowering.driver import Lowerer
from nem.passes.lowering.escape import loaded_by_kernels
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.legality import TaskLegality
from nem.passes.lowering.passes import parse_spaces
from nem.passes.lowering.scalar_copies import RaiseScalarCopiesPass

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
    copy (`nem-raise-scalar-copies` raises it); a load inside a nest is the nest's.  The conversion's kernel
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
    RaiseScalarCopiesPass().apply(lowering_context(), module)  # the copy (D-LOW-SCALAR-COPY)
    Lowerer(Options(parse_spaces("0:DDR")), HANDLERS).run(module)
    text = print_nem(module)
    (kernel,) = [line for line in text.splitlines() if 'op="mlir.kernel"' in line]
    assert kernel.count("affine.load") == 2  # %S[0] sunk into the kernel, and %A[7 - %i]


def _eltwise_nest(elem: str, a: str, b: str, out: str) -> str:
    """A nest whose tree needs two scratch temporaries (`a*b + (a*a)*(b*b)`:
    `a*b` computes in the output, `(a*a)*(b*b)` over `a*a`'s scratch, and
    `b*b` takes another: D-LOW-TREE-INPLACE)."""
    t = f"memref<64x{elem}, 2>"
    return f"""
  affine.for %i = 0 to 64 {{
    %a = affine.load %{a}[%i] : {t}
    %b = affine.load %{b}[%i] : {t}
    %p = arith.mulf %a, %b : {elem}
    %aa = arith.mulf %a, %a : {elem}
    %bb = arith.mulf %b, %b : {elem}
    %q = arith.mulf %aa, %bb : {elem}
    %r = arith.addf %p, %q : {elem}
    affine.store %r, %{out}[%i] : {t}
  }}"""


def _scratch_on_npm_mid(nests: list[tuple[str, str, str, str]]) -> list[str]:
    """The scratch buffers `convert-affine-to-nem` declares for `nests` on npm_mid."""
    args = ", ".join(f"%{m}: memref<64x{elem}, 2>" for elem, *names in nests for m in names)
    body = "".join(_eltwise_nest(*nest) for nest in nests)
    module = parse_mlir(lowering_context(), f"func.func @f({args}) {{{body}\n  func.return\n}}")
    Lowerer(Options(parse_spaces("0:DDR,1:L2,2:L1"), device="npm_mid"), HANDLERS).run(module)
    return [
        line.split()[1]
        for line in print_nem(module).splitlines()
        if line.startswith("buffer L1_tmp") or line.startswith("buffer L1_acc")
    ]


def test_a_plan_that_falls_back_leaves_no_scratch_name_behind() -> None:
    """On npm_mid the f32 tree has no variant: the conversion makes its two
    temporaries, finds out and escapes.  The f16 tree after it is named as
    if the f32 one had never been tried, as a pass deciding ahead (which
    never makes the escaping plan's scratch) would name it (D-LOW-OUTLINE)."""
    f16_alone = _scratch_on_npm_mid([("f16", "X", "Y", "Z")])
    assert f16_alone == ["L1_tmp0", "L1_tmp1"]
    assert _scratch_on_npm_mid([("f32", "A", "B", "C"), ("f16", "X", "Y", "Z")]) == f16_alone


def test_only_the_newest_scratch_names_are_given_back() -> None:
    """Given back newest first, as if never made; a name made before one
    still kept stays taken, and names of other kinds keep their numbers."""
    names = Names()
    assert [names.scratch("L1_tmp"), names.scratch("L1_acc")] == ["L1_tmp0", "L1_acc1"]
    assert names.fresh(None, "L1_buf") == "L1_buf0"
    names.release_scratch({"L1_acc1"})
    assert names.scratch("L1_tmp") == "L1_tmp1"
    names.release_scratch({"L1_tmp0"})  # L1_tmp1, kept, was made after it
    assert names.scratch("L1_tmp") == "L1_tmp2"
    names.used.add("L1_tmp3")  # a hint took the next number: skipped, and skipped again
    assert names.scratch("L1_tmp") == "L1_tmp4"
    names.release_scratch({"L1_tmp4", "L1_tmp2"})
    assert names.scratch("L1_tmp") == "L1_tmp2"
    assert names.fresh(None, "L1_buf") == "L1_buf1"
