"""`nem-forward-zero-fills`: a load of bytes known to be zero is a zero fill
of its destination (D-LOW-FILL-FORWARD).

A reduction's accumulator is zero-filled before the reduction reads it
(`linalg.fill` + a reduction `linalg.generic`, what graph importers emit for
a row sum).  Tiled, the fill is `clamp in T out T min=0 max=0` on an L1 tile
(D-LOW-FILL step 1) stored to DDR, and the reduction's tile loads it back:
two dependent transfers between the fill and the first use of the
accumulator, on the critical path of every layer norm.  This pass walks the
program's top-level statements in order, tracks the DDR/L2/L1 byte ranges
that hold zeros (written by such a clamp, or copied from zeros), and
replaces a transfer into a dense L1 region whose source bytes are all zero
by the same zero clamp on the destination, which depends on nothing.

The result is the same bytes in program order, so it runs before
`nem-synthesize-deps` (D-LOW-DEPS), which orders the new task against the
other accesses of its destination.  Only tasks without deps are replaced
(what `convert-affine-to-nem` emits).  A loop statement forgets everything
known; every other write forgets the bytes it may write (its region's byte
span, D-HAZ-ACCESS).  The replacement is the clamp variant the program
already uses (`clamp` on `i8`), so it is legal wherever the fill was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.passes import ModulePass

from nem.analysis.happens_before import region_parts, task_operands
from nem.analysis.ir_walk import walk_ops
from nem.dialect.attributes import ArgRefAttr, RegionType
from nem.dialect.builder import NemBuilder
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import (
    ComputeOp,
    LoopOp,
    ProgramOp,
    RegionOp,
    TaskOp,
    TransferOp,
    programs,
)
from nem.dialect.per_class import PerClass
from nem.dialect.semantics.transfers import fills_range

Span = tuple[int, int]


class ZeroBytes:
    """Byte ranges known to hold zeros, per buffer (sorted, disjoint)."""

    def __init__(self) -> None:
        self.spans: dict[SSAValue, list[Span]] = {}

    def forget(self, buf: SSAValue, lo: int, hi: int) -> None:
        kept: list[Span] = []
        for a, b in self.spans.get(buf, []):
            if b <= lo or a >= hi:
                kept.append((a, b))
                continue
            if a < lo:
                kept.append((a, lo))
            if b > hi:
                kept.append((hi, b))
        self.spans[buf] = kept

    def add(self, buf: SSAValue, lo: int, hi: int) -> None:
        self.forget(buf, lo, hi)
        spans = sorted([*self.spans[buf], (lo, hi)])
        merged: list[Span] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
            else:
                merged.append((a, b))
        self.spans[buf] = merged

    def covers(self, buf: SSAValue, lo: int, hi: int) -> bool:
        return any(a <= lo and hi <= b for a, b in self.spans.get(buf, []))


@dataclass(frozen=True)
class Place:
    """A region's buffer and static byte span, and whether its elements
    fill that span exactly (dense)."""

    buffer: SSAValue
    lo: int
    hi: int
    dense: bool


def place_of(ev: Evaluator, region: SSAValue) -> Place | None:
    rop = region.owner
    if not isinstance(rop, RegionOp):
        return None
    buf, off, ext = region_parts(rop)
    lo, n = ev.static(off), ev.static(ext)
    if lo is None or n is None:
        return None
    t = region.type
    dense = (
        isinstance(t, RegionType)
        and t.shape_values is not None
        and t.elem_name is not None
        and fills_range(t.elem_name, t.shape_values, t.stride_values, n)
    )
    return Place(buf, lo, lo + n, dense)


def i8_clamp(op: Operation) -> tuple[SSAValue, SSAValue, SSAValue] | None:
    """A `clamp` on `i8` with one input and one output, without deps: its
    output region and its min and max arguments (an integer attribute
    refers to an index argument); else None."""
    if not isinstance(op, ComputeOp) or op.opcode != "clamp" or op.deps:
        return None
    if len(op.ins) != 1 or len(op.outs) != 1:
        return None
    t = op.outs[0].type
    if not isinstance(t, RegionType) or t.elem_name != "i8":
        return None
    lo, hi = op.attrs.data.get("min"), op.attrs.data.get("max")
    if not isinstance(lo, ArgRefAttr) or not isinstance(hi, ArgRefAttr):
        return None
    return op.outs[0], op.args[lo.index.data], op.args[hi.index.data]


def _zero_clamp(op: Operation, ev: Evaluator) -> SSAValue | None:
    """The region a `clamp in R out R min=0 max=0` on `i8` zeroes, else None
    (its input may be another region op over the same bytes)."""
    found = i8_clamp(op)
    if found is None or ev.static(found[1]) != 0 or ev.static(found[2]) != 0:
        return None
    return found[0]


def forward_zero_fills(program: ProgramOp) -> int:
    """Rewrite `program` in place (module docstring); returns how many
    transfers became fills."""
    ev = Evaluator()
    zeros = ZeroBytes()
    names = _fresh_zero_names(program)
    replaced = 0
    # (listed from an iterator: `list(block.ops)` would count the ops by a
    # walk of its own first, for its length hint)
    for op in list(iter(program.block.ops)):
        if isinstance(op, LoopOp):
            zeros = ZeroBytes()
            continue
        if not isinstance(op, TaskOp):
            continue
        zeroed = _zero_clamp(op, ev)
        if zeroed is not None and isinstance(op, ComputeOp):
            p = place_of(ev, zeroed)
            if p is not None and p.dense and place_of(ev, op.ins[0]) == p:
                zeros.add(p.buffer, p.lo, p.hi)
                continue
        copied: Place | None = None  # a dense destination the transfer fills with zeros
        if isinstance(op, TransferOp):
            src, dst = place_of(ev, op.src), place_of(ev, op.dst)
            if (
                src is not None
                and dst is not None
                and dst.dense
                and zeros.covers(src.buffer, src.lo, src.hi)
            ):
                copied = dst
                level = op.dst.type.level.data if isinstance(op.dst.type, RegionType) else ""
                if not op.deps and not op.is_sync and level.startswith("L1"):
                    _replace(op, dst, names)
                    zeros.add(dst.buffer, dst.lo, dst.hi)
                    replaced += 1
                    continue
        _, writes, _ = task_operands(op)
        for w in writes:
            p = place_of(ev, w)
            if p is None:
                owner = w.owner
                if isinstance(owner, RegionOp):
                    zeros.spans.pop(region_parts(owner)[0], None)
                continue
            zeros.forget(p.buffer, p.lo, p.hi)
        if copied is not None:
            zeros.add(copied.buffer, copied.lo, copied.hi)
    return replaced


_NAMES = ("name", "iv_name")
"""The properties that declare a name: `name` (buffers, lets, consts, regions:
their IRDL fields are `prop_name="name"`) and `iv_name` (loop variables)."""
_TASK_NAMES = ("token", *_NAMES)
"""A task's, its token's name too (`TaskOp.token_name`)."""


def _declared_names(cls: type) -> tuple[str, ...]:
    """Which of the name-declaring properties ops of class `cls` can hold:
    those its IRDL definition declares (an op holds no other property: xDSL's
    verifier rejects it), all of them for a class without one.  Most ops of a
    lowered program (expression arithmetic) hold none, and are not asked."""
    keys = _TASK_NAMES if issubclass(cls, TaskOp) else _NAMES
    if not issubclass(cls, IRDLOperation):
        return keys
    declared = cls.get_irdl_definition().properties
    return tuple(key for key in keys if key in declared)


_NAME_KEYS = PerClass(_declared_names)


def names_of(op: Operation) -> Iterator[str]:
    """The names `op` itself declares (a buffer, let, const or region's, a
    loop's variable, a task's token)."""
    props = op.properties
    for key in _NAME_KEYS[type(op)]:
        attr = props.get(key)
        if isinstance(attr, StringAttr):
            yield attr.data


def declared_names(program: ProgramOp) -> set[str]:
    """Every name a statement of `program` declares (buffers, lets, consts,
    regions, loop variables, tokens): what a fresh name must not be (NAME-02)."""
    taken: set[str] = set()
    for op in walk_ops(program):
        taken.update(names_of(op))
    return taken


def _fresh_zero_names(program: ProgramOp) -> Iterator[str]:
    """`zero1`, `zero2`, ... skipping every name the program declares (an
    ONNX initializer `zero_1` is a buffer `zero1`, and a second declaration
    is NAME-02).  A generator: the program is walked for its names when the
    first fill is made, not at all in a program without one."""
    taken = declared_names(program)
    yield from (name for k in count(1) if (name := f"zero{k}") not in taken)


def _replace(op: TransferOp, dst: Place, names: Iterator[str]) -> None:
    name = next(names)  # first: the first one walks the program as it was
    b = NemBuilder.before(op, op.location)
    r = b.region(
        None, dst.buffer, dst.lo, dst.hi - dst.lo, elem="i8", shape=[dst.hi - dst.lo], layout="C"
    )
    tok = b.compute("clamp", [r], [r], name=name, min=0, max=0)
    op.result.replace_all_uses_with(tok)
    op.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
    op.erase()


@dataclass(frozen=True)
class ForwardZeroFillsPass(ModulePass):
    """Turn loads into L1 of bytes known to be zero into zero fills (D-LOW-FILL-FORWARD).

    Runs before `nem-synthesize-deps` (the program's tasks have no deps yet)."""

    name = "nem-forward-zero-fills"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for prog in list(programs(op)):
            forward_zero_fills(prog)
