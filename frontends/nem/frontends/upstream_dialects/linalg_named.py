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

`use_upstream_linalg_named` patches xDSL's classes (rather than replacing
them with subclasses, so every table keyed by op class, the lowering's
handlers and xDSL's interpreter implementations, keeps finding them): with
equal element types and explicit attributes the ops are built as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


def use_upstream_linalg_named() -> None:
    """Patch CONTRACTIONS as the module doc says (idempotent)."""
    for op in CONTRACTIONS:
        if getattr(op.get_hidden_region, "_nem_casts", False):
            continue
        base: Callable[[Sequence[SSAValue], Sequence[SSAValue]], Region] = op.get_hidden_region

        def hidden_region(
            cls: type[abstract_ops.NamedOperation],
            inputs: Sequence[SSAValue],
            outputs: Sequence[SSAValue],
            base: Callable[[Sequence[SSAValue], Sequence[SSAValue]], Region] = base,
        ) -> Region:
            types = cls.body_arg_types((*inputs, *outputs))
            if all(t == types[-1] for t in types):
                return base(inputs, outputs)
            return _contraction_body(types)

        hidden_region._nem_casts = True  # type: ignore[attr-defined]
        op.get_hidden_region = classmethod(hidden_region)  # type: ignore[method-assign, assignment]
        if issubclass(op, abstract_ops.ConvOperation):
            op.build = classmethod(_with_unit_windows(op.build))  # type: ignore[method-assign, assignment]


def _with_unit_windows(build: Callable[..., Operation]) -> Callable[..., Operation]:
    """`build` of a 2-D convolution, with `strides` and `dilations` of 1
    where they are not given (upstream's defaults)."""

    def with_defaults(
        cls: type[Operation], *, properties: dict[str, Attribute] | None = None, **kw: object
    ) -> Operation:
        props = dict(properties or {})
        for key in ("strides", "dilations"):
            if key not in props:
                props[key] = DenseIntOrFPElementsAttr.from_list(TensorType(i64, [2]), [1, 1])
        return build(properties=props, **kw)

    return with_defaults
