"""Bounds on the work one input may cause: the one home of every limit
(decision D-LIMITS in docs/spec-decisions.md, listed in the README).

A reference toolchain is fed generated, truncated and adversarial text; each
limit turns what would be a hang, a memory blowup or a RecursionError into a
located diagnostic that names the limit.  The values are far above anything a
real program, device file or lowered MLIR module needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

MAX_SOURCE_BYTES = 8 * 2**20
"""Default largest program, config document, included file or MLIR input
read (bytes); `--max-source-bytes N` of the tools (`source_limit` from
Python) raises it for one command: an MLIR file with inline weights is
larger, and the other limits still bound the work it causes."""

_source_limit = [MAX_SOURCE_BYTES]


def max_source_bytes() -> int:
    """The largest source read now (MAX_SOURCE_BYTES unless `source_limit` raised it)."""
    return _source_limit[-1]


@contextmanager
def source_limit(limit: int) -> Iterator[None]:
    """Sources of up to `limit` bytes are read inside the `with` block."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"source_limit: limit must be a positive int, got {limit!r}")
    _source_limit.append(limit)
    try:
        yield
    finally:
        _source_limit.pop()


def own_source(text: str) -> AbstractContextManager[None]:
    """The source limit raised to fit `text` when the toolchain reads back a
    program it wrote itself (nem-compile's final check and .nemb writer):
    the limit bounds what a user gives a tool, and a compiled network's
    program may be larger (a 10,000-node chain: over 8 MiB)."""
    return source_limit(max(max_source_bytes(), len(text.encode()) + 1))


INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""Every integer a NEM expression denotes or evaluates to, intermediate results
included, is a signed 64-bit value (D-INT-RANGE): literals, shapes, strides,
offsets, loop bounds, device-config numbers."""

MAX_LITERAL_CHARS = 64
"""Integer literals longer than this are rejected before conversion (a literal
in range has at most 19 significant digits; leading zeros are allowed)."""

MAX_NESTING_DEPTH = 64
"""Deepest nesting of parentheses and lists in one expression, of loops in a
program, of blocks in a config document, and of brackets in MLIR text."""

MAX_EXPR_OPERATORS = 256
"""Most binary operators in one `.nem` expression (each becomes one IR op)."""

MAX_EXPR_DEPTH = 100
"""Deepest chain of operators an integer value depends on, counted through
const and let names (`const C2 = C1 + 1` is one deeper than C1)."""

DEFAULT_MAX_TASKS = 10_000_000
"""`nem-run` refuses a program whose estimated task count exceeds this unless
`--max-tasks N` raises it (about a minute of functional simulation per 10^6 tasks
on one core)."""

DEFAULT_MAX_KERNEL_OPS = 10_000_000_000
"""An escape-hatch task (`compute op="mlir.kernel"`) whose kernel does more
scalar operations than this (its static estimate) is refused when bound,
unless `nem-run --max-kernel-ops N` raises it: 10 to 30 s compiled natively,
about 55 hours in xDSL's interpreter (which warns with its own estimate)."""

MAX_DEVICE_COUNT = 4096
"""Most engines of a device, and most instances of one unit (per device or per
engine): the runtime and the timing model keep state per engine and per unit
instance, so a device file claiming 2^63 engines is rejected when it is
resolved rather than exhausting memory when a program runs on it."""

MAX_INPUT_FILE_BYTES = 2**30
"""Largest array or raw file read into a buffer (`nem-run --input`,
`--input-raw`, `nem-opt --embed`; the buffer it fills bounds it first): the
file's bytes and the buffer's are both in memory, so a 2 GiB input could not
be read under a 3 GiB address-space limit."""


MAX_MODEL_BYTES = 2**30
"""Largest ONNX model read by `nem-compile` (the file and its external data
together; `--max-model-bytes N` raises it): the weights are held several
times while a model compiles (the protobuf, numpy arrays, the sidecar), and
a 2 GiB model crashed protobuf under a 3 GiB address-space limit."""

MAX_TENSOR_BYTES = 2**40
"""Largest tensor of an ONNX model (an initializer, a declared or inferred
value: 1 TiB), checked before numpy or MLIR sees its shape: a shape whose
byte size overflows 64 bits aborted MLIR (D-COMPILE-VALIDATE)."""

DEFAULT_MAX_NODES = 4096
"""The compile budget: `nem-compile` refuses a model of more nodes than
this unless `--max-nodes N` raises it (densenet121, the largest model of
onnx's backend data, has 1746; each node costs the lowering tens of
milliseconds or more)."""

MAX_NODE_PORTS = 1024
"""Most inputs or outputs of one ONNX node, and of the graph (a Concat of
10,000 inputs)."""

MAX_RANK = 64
"""Most dimensions of an ONNX tensor or declared value: every lowered loop
nest has one loop per dimension, and a Relu of rank 2,000 compiled for 58 s
(rank 64: 9 s, as rank 2); real models stay below 8 (hostile10)."""


def int_out_of_range(value: int) -> bool:
    return value < INT_MIN or value > INT_MAX


__all__ = [
    "MAX_SOURCE_BYTES",
    "INT_MIN",
    "INT_MAX",
    "MAX_LITERAL_CHARS",
    "MAX_NESTING_DEPTH",
    "MAX_EXPR_OPERATORS",
    "MAX_EXPR_DEPTH",
    "DEFAULT_MAX_TASKS",
    "DEFAULT_MAX_KERNEL_OPS",
    "MAX_DEVICE_COUNT",
    "MAX_INPUT_FILE_BYTES",
    "MAX_MODEL_BYTES",
    "MAX_TENSOR_BYTES",
    "DEFAULT_MAX_NODES",
    "MAX_NODE_PORTS",
    "max_source_bytes",
    "own_source",
    "source_limit",
    "int_out_of_range",
]
