"""xDSL's named linalg contractions made to take what upstream writes
(D-LOW-LINALG-NAMED; xDSL 0.74 defects, docs/upstream-reports.md).

- Element types that differ.  Upstream's `linalg.matmul` and the
  convolutions convert each input to the output's element type before the
  multiply (`cast_signed`): an i8 x i8 matmul into i32 computes `extsi a *
  extsi b + acc` in i32, an f16 convolution into f32 `extf a * extf b +
  acc` in f32.  xDSL builds the matmul's body without the casts (it then
  fails to verify: `'arith.addi': operand 'rhs' ... does not verify`) and
  asserts that only integers mix in a convolution (an AssertionError on
  f16 into f32).
- Default attributes.  Upstream prints a convolution's `strides` and
  `dilations` only when they are not all 1; xDSL requires them
  (`property 'strides' expected`).

`UPSTREAM_CONTRACTIONS` are subclasses of xDSL's ops, of the same names,
that build their bodies and attributes as upstream does; the dialect
factories (`mlir_dialect_factories`) put them in place of xDSL's, so a
context NEM builds parses them, while xDSL's classes stay as they are for
every other user of the process (issue 36, `test_xdsl_unpatched.py`).  With
equal element types and explicit attributes they build what xDSL builds;
`isinstance` on xDSL's classes holds, and the tables keyed by op class (the
lowering's handlers, the kernel interpreter's implementations) take the
linalg ops from the same factory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, DenseIntOrFPElementsAttr, IntegerType, TensorType, i64
from xdsl.dialects.linalg import abstract_ops, ops
from xdsl.ir import Attribute, BlockArgument, Operation, Region, SSAValue


def convert(x: SSAValue, to: Attribute, unsigned: bool) -> SSAValue:
    """`x` as element type `to`, as linalg's `cast_signed` / `cast_unsigned`
    type functions convert (the op goes where the implicit builder is)."""
    t = x.type
    if t == to:
        return x
    op: Operation
    if isinstance(t, IntegerType) and isinstance(to, IntegerType):
        if t.width.data < to.width.data:
            op = arith.ExtUIOp(x, to) if unsigned else arith.ExtSIOp(x, to)
        else:
            op = arith.TruncIOp(x, to)
    elif isinstance(t, AnyFloat) and isinstance(to, AnyFloat):
        op = arith.ExtFOp(x, to) if t.bitwidth < to.bitwidth else arith.TruncFOp(x, to)
    elif isinstance(t, IntegerType) and isinstance(to, AnyFloat):
        op = arith.UIToFPOp(x, to) if unsigned else arith.SIToFPOp(x, to)
    elif isinstance(t, AnyFloat) and isinstance(to, IntegerType):
        op = arith.FPToUIOp(x, to) if unsigned else arith.FPToSIOp(x, to)
    else:
        raise ValueError(f"no linalg cast from {t} to {to}")
    return op.results[0]


def _contraction_body(arg_types: Sequence[Attribute], unsigned: bool = False) -> Region:
    """`acc + cast(a) * cast(b)` in the output's element type (upstream's
    body of the multiply-accumulate named ops)."""
    out = arg_types[-1]
    add, mul = (
        (arith.AddfOp, arith.MulfOp) if isinstance(out, AnyFloat) else (arith.AddiOp, arith.MuliOp)
    )

    @Builder.implicit_region(arg_types)
    def body(args: tuple[BlockArgument, ...]) -> None:
        a, b = (convert(x, out, unsigned) for x in args[:2])
        prod = mul(a, b)
        ops.YieldOp(add(args[2], prod))

    return body


CONTRACTIONS: tuple[type[abstract_ops.NamedOperation], ...] = (
    ops.MatmulOp,
    ops.Conv2DNchwFchwOp,
    ops.Conv2DNgchwFgchwOp,
    ops.Conv2DNgchwGfchwOp,
    ops.Conv2DNhwc_FhwcOp,
    ops.Conv2DNhwc_HwcfOp,
    ops.Conv2DNhwgcGfhwcOp,
)
"""The named multiply-accumulate ops xDSL 0.74 defines."""


def _upstream(base: type[abstract_ops.NamedOperation]) -> type[abstract_ops.NamedOperation]:
    """`base` with upstream's body (a conversion of each input to the
    output's element type) and, for a convolution, upstream's default
    `strides` and `dilations` of 1."""

    class Upstream(base):  # type: ignore[valid-type, misc]
        @classmethod
        def get_hidden_region(
            cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]
        ) -> Region:
            types = cls.body_arg_types((*inputs, *outputs))
            if all(t == types[-1] for t in types):
                region: Region = super().get_hidden_region(inputs, outputs)
                return region
            return _contraction_body(types)

        if issubclass(base, abstract_ops.ConvOperation):

            @classmethod
            def build(
                cls, *, properties: dict[str, Attribute] | None = None, **kw: Any
            ) -> Operation:
                props = dict(properties or {})
                for key in ("strides", "dilations"):
                    if key not in props:
                        props[key] = DenseIntOrFPElementsAttr.from_list(
                            TensorType(i64, [2]), [1, 1]
                        )
                op: Operation = super().build(properties=props, **kw)
                return op

    Upstream.__name__ = base.__name__
    Upstream.__qualname__ = f"upstream.{base.__qualname__}"
    Upstream.__doc__ = f"`{base.name}` as upstream MLIR builds it (D-LOW-LINALG-NAMED)."
    return Upstream


UPSTREAM_CONTRACTIONS: tuple[type[abstract_ops.NamedOperation], ...] = tuple(
    _upstream(op) for op in CONTRACTIONS
)
"""CONTRACTIONS as upstream builds them, in their order."""
