"""The graph fuzzer's entries for comparisons, logical ops and Where
(docs/compile.md "Supported ONNX", D-COMPILE-BOOL): Equal, Less,
LessOrEqual, Greater, GreaterOrEqual, IsNaN, IsInf, Not, And, Or, Xor,
Where.

Each entry makes a bool condition and consumes it in the same step (a bool
is not one of the model's float values, `Builder.other`): Where chooses
between a value of the graph and another operand, or a Cast to the float
type is combined with a value.  A comparison is discontinuous, so what it
compares are graph inputs and constants, which both sides read bit for bit
(as `Sign`'s operand): a value one ulp apart upstream could flip it.
"""

from __future__ import annotations

from graph_gen import Builder, Val
from graph_operands import op, operand_like, partner_shape
from graph_ops_data import combine

COMPARISONS = ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")
LOGICAL = ("And", "Or", "Xor")


def _exact_partner(b: Builder, x: Val) -> Val:
    """What `x` is compared with: itself (Equal meets ties), another graph
    input, a constant tensor or a scalar."""
    r = b.rng.random()
    if r < 0.15:
        return x
    shape = partner_shape(b, x.shape)
    if r < 0.5:
        return b.pick_input(lambda: shape)
    if not shape or r < 0.65:
        return b.scalar(b.rng.choice((-1.0, -0.25, 0.0, 0.5, 1.0)))
    return b.weight(shape, as_node=r > 0.9)


def condition(b: Builder, kind: str | None = None) -> Val:
    """A bool made by op type `kind` (default: any) from graph inputs."""
    kind = kind or b.rng.choice((*COMPARISONS, *COMPARISONS, "IsNaN", "IsInf", "Not", *LOGICAL))
    if kind in LOGICAL:
        first, second = condition(b, b.rng.choice(COMPARISONS)), condition(b)
        return b.add(kind, [first.name, second.name])[0]
    if kind == "Not":
        return b.add("Not", [condition(b, b.rng.choice(COMPARISONS)).name])[0]
    x = b.pick_input(b.shape)
    if kind == "IsInf":
        attrs = b.rng.choice(({}, {"detect_negative": 0}, {"detect_positive": 0}))
        return b.add("IsInf", [x.name], **attrs)[0]
    if kind == "IsNaN":
        return b.add("IsNaN", [x.name])[0]
    y = _exact_partner(b, x)
    a, c = (x, y) if b.rng.random() < 0.7 else (y, x)
    return b.add(kind, [a.name, c.name])[0]


def consume(b: Builder, cond: Val, where: bool) -> None:
    """`cond` read by Where (between a value of the graph and another
    operand) or Cast to the float type and combined with a value."""
    if where:
        x = b.pick_or_new(lambda v: True, b.shape)
        y = operand_like(b, partner_shape(b, x.shape))
        ins = [x.name, y.name] if b.rng.random() < 0.6 else [y.name, x.name]
        b.add("Where", [cond.name, *ins])
    else:
        x = b.pick_or_new(lambda v: True, b.shape)
        (f,) = b.add("Cast", [cond.name], to=b.elem)
        combine(b, x, f)


def _entry(kind: str) -> None:
    @op(kind)
    def entry(b: Builder) -> None:
        consume(b, condition(b, kind), where=b.rng.random() < 0.6)


for _kind in (*COMPARISONS, *LOGICAL, "Not", "IsNaN", "IsInf"):
    _entry(_kind)


@op("Where")
def where(b: Builder) -> None:
    consume(b, condition(b), where=True)
