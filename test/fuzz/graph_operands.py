"""What the graph fuzzer's op entries share: the registry (`OPS`, `@op`)
and the helpers that choose operands and attributes (new NCHW activations,
broadcasting partners, second operands, axes, windows, factorizations).

The entries live in `graph_ops` (compute) and `graph_ops_data` (shapes,
indices, casts and sequences); `graph_ops.OPS` is the whole table.
"""

from __future__ import annotations

from collections.abc import Callable

from graph_gen import Builder, Skip, Val

OPS: dict[str, Callable[[Builder], None]] = {}
"""Op type -> its entry (`@op`)."""
RARE = 0.04
"""Probability of a legal form the importer is known not to take."""


def op(name: str) -> Callable[[Callable[[Builder], None]], Callable[[Builder], None]]:
    def register(fn: Callable[[Builder], None]) -> Callable[[Builder], None]:
        OPS[name] = fn
        return fn

    return register


# ---------------------------------------------------------------------------
# helpers


def nchw(b: Builder) -> tuple[int, ...]:
    """A new NCHW activation shape: small channels, odd spatial sizes."""
    return (b.rng.choice((1, 2, 3)), b.size(1, 8), b.size(1, 13), b.size(1, 13))


def partner_shape(b: Builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape` (ONNX multidirectional rules)."""
    r = b.rng.random()
    if r < 0.3 or not shape:
        return shape
    if r < 0.45:
        return ()
    if r < 0.65:  # drop leading dimensions
        return shape[b.rng.randint(1, len(shape)) :]
    dims = list(shape)
    for k in range(len(dims)):  # some dimensions 1
        if b.rng.random() < 0.5:
            dims[k] = 1
    if r > 0.9:  # the other way: a 1 grows
        dims = [b.size(2, 5) if s == 1 and b.rng.random() < 0.5 else d for s, d in zip(shape, dims)]
    return tuple(dims)


def broadcasts(a: tuple[int, ...], c: tuple[int, ...]) -> bool:
    for x, y in zip(reversed(a), reversed(c)):
        if x != y and 1 not in (x, y):
            return False
    return True


def operand_like(b: Builder, shape: tuple[int, ...], pos: bool = False) -> Val:
    """A second operand of `shape`: an existing value, a new input, an
    initializer or a Constant node."""
    r = b.rng.random()
    if r < 0.4:
        try:
            return b.pick(lambda v: v.shape == shape and (v.pos or not pos))
        except Skip:
            pass
    if r < 0.55:
        return b.new_input(shape, pos)
    if not shape and r < 0.75:
        return b.scalar(b.rng.uniform(0.5, 2.0) if pos else b.rng.choice((-1.5, 0.25, 3.0)))
    return b.weight(shape, pos=pos, as_node=r > 0.9)


def axis(b: Builder, rank: int, inclusive: bool = False) -> int:
    """An axis in [-rank, rank) (or [-rank, rank] with `inclusive`), spelled
    negative half of the time."""
    a = b.rng.randrange(rank + (1 if inclusive else 0))
    return a - rank if b.rng.random() < 0.4 and a < rank else a


def window(b: Builder, size: int, kmax: int) -> tuple[int, int, int, int]:
    """(kernel, stride, dilation, pad_begin, ...) for one spatial axis: a
    kernel that fits the padded input."""
    k = b.rng.randint(1, max(1, min(kmax, size + 2)))
    return k, b.rng.choice((1, 1, 2, 3)), b.rng.choice((1, 1, 1, 2)), b.rng.randint(0, k - 1)


def factorize(b: Builder, n: int, parts: int) -> list[int]:
    """`n` as a product of `parts` factors in random order."""
    dims = [1] * parts
    m = n
    p = 2
    while m > 1:
        while m % p:
            p += 1
        dims[b.rng.randrange(parts)] *= p
        m //= p
    return dims
