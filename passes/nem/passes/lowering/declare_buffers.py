"""`nem-declare-buffers` (D-LOW-DECLARE): the program's buffers that exist
before any op runs, the entry function's memref arguments and the globals
it reads, named before the conversion, which reads the names instead of
inventing them (issue 36 item 1):

    func.func @main(%x: memref<2x3xf32>, ...) {
      %w = memref.get_global @w : memref<3x2xf32>
      ...
      %w2 = memref.get_global @w : memref<3x2xf32>
    -> func.func @main(%x: memref<2x3xf32> {nem_lowering.buffer = "x"}, ...)
           attributes {nem_lowering.default_names = 0 : i64} {
      %w = "nem_lowering.buffer"() <{buffer = "w", global = @w}> : () -> memref<3x2xf32>
      ...                                        (every get_global of @w now %w)

Names come from one generator, `context.Names`, which the conversion goes
on with for its loop variables, allocations and scratch buffers: the pass
names the arguments (in order, as the conversion did first), then each
global at its first `get_global` (pattern `GetGlobalToBuffer`, one walk in
program order), and leaves the generator's state in the IR, the names on
the roots and its count of `DEFAULT<n>` names on the function
(`nem_lowering.default_names`), from which the conversion resumes it
(`resumed_names`).  State between passes lives in the IR, never in a
module global or a shared Python object, so the pass's output is its own
lit test and `convert-affine-to-nem` runs on it alone.

A global's buffer op stands at the start of the function (after the ones
before it), not at its first use: the conversion declares it after the
arguments, before the allocations (D-LOW-DECLARE's decided change).  Only
the `get_global`s the conversion lowers one by one are rewritten (as
`nem-rewrite-views`: not those of a pure nest or an outlined kernel).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.traits import SymbolTable

from nem.dialect.buffer_op import BufferOp
from nem.frontends.upstream_dialects.memref_global import GlobalOp
from nem.passes.lowering.context import Names
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.prepare import entry_function, rewrite_once
from nem.passes.lowering.view_ops import LoweredOneByOne

BUFFER = "nem_lowering.buffer"
"""The argument attribute holding a memref argument's buffer name."""
DEFAULT_NAMES = "nem_lowering.default_names"
"""The function attribute holding the generator's `DEFAULT<n>` count; its
presence says the function was declared."""


@dataclass
class GetGlobalToBuffer(RewritePattern):
    """Every `memref.get_global` of one global -> one `nem_lowering.buffer`
    at the function's start, named at the first of them (D-LOW-DECLARE)."""

    fn: func.FuncOp
    names: Names
    lowered: LoweredOneByOne
    buffers: dict[str, BufferOp] = field(default_factory=dict[str, BufferOp])
    last: BufferOp | None = None
    """The newest buffer op (the next one goes after it)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.GetGlobalOp, rewriter: PatternRewriter) -> None:
        if not self.lowered(op):
            return
        sym = op.name_.root_reference.data
        buf = self.buffers.get(sym)
        if buf is None:
            if not isinstance(SymbolTable.lookup_symbol(op, op.name_), GlobalOp):
                raise reject(op, f"@{sym} is not a memref.global")
            buf = BufferOp(self.names.fresh(sym, "global"), op.name_, op.memref.type)
            buf.location = op.location
            buf.result.name_hint = op.memref.name_hint
            last = self.last
            at = InsertPoint.after(last) if last else InsertPoint.at_start(self.fn.body.block)
            rewriter.insert(buf, at)
            self.buffers[sym] = self.last = buf
        rewriter.replace_op(op, [], [buf.result])


def declare(fn: func.FuncOp) -> None:
    """Name `fn`'s memref arguments and the globals it reads (module
    docstring); a function declared already is left as it is."""
    if is_declared(fn):
        return
    names = name_arguments(fn)
    pattern = GetGlobalToBuffer(fn, names, LoweredOneByOne())
    rewrite_once(fn.body, pattern)  # in program order: the first get_global of a global names it
    keep(fn, names)


def name_arguments(fn: func.FuncOp) -> Names:
    """A new generator, having named `fn`'s memref arguments in order (each
    an argument attribute `nem_lowering.buffer`)."""
    names = Names()
    args = fn.body.block.args
    attrs: list[dict[str, Attribute]] = (
        [dict(d.data) for d in fn.arg_attrs.data] if fn.arg_attrs else [{} for _ in args]
    )
    for i, arg in enumerate(args):
        if not isinstance(arg.type, MemRefType):
            continue  # the conversion rejects it, in the arguments' order
        name = names.fresh(arg.name_hint, "arg")
        if not arg.name_hint:  # `arg<i>`, its position, when free
            names.used.discard(name)
            name = f"arg{i}" if f"arg{i}" not in names.used else name
            names.used.add(name)
        attrs[i][BUFFER] = StringAttr(name)
    if args:
        fn.arg_attrs = ArrayAttr([DictionaryAttr(d) for d in attrs])
    return names


def keep(fn: func.FuncOp, names: Names) -> None:
    """Leave what `resumed_names` needs beyond the names on the roots: the
    count of `DEFAULT<n>` names (it also marks `fn` declared)."""
    fn.attributes[DEFAULT_NAMES] = IntegerAttr(names.defaults, i64)


def is_declared(fn: func.FuncOp) -> bool:
    return DEFAULT_NAMES in fn.attributes


def argument_name(fn: func.FuncOp, i: int) -> str:
    """The buffer name `declare` gave memref argument `i`."""
    assert fn.arg_attrs is not None
    name = fn.arg_attrs.data[i].data[BUFFER]
    assert isinstance(name, StringAttr)
    return name.data


def declared_buffers(fn: func.FuncOp) -> Iterator[BufferOp]:
    """The globals' buffers `declare` put at the start of `fn`, in order
    (an allocation's buffer there is not one: it stays where it was)."""
    for op in fn.body.block.ops:
        if not isinstance(op, BufferOp) or op.is_allocation:
            return
        yield op


def resumed_names(fn: func.FuncOp) -> Names:
    """The generator where `declare` (and `nem-declare-allocations`, whose
    buffers are anywhere in `fn`: one walk) left it (`Names.resumed`)."""
    count = fn.attributes[DEFAULT_NAMES]
    assert isinstance(count, IntegerAttr)
    args = fn.arg_attrs.data if fn.arg_attrs else ()
    taken = [n.data for d in args if isinstance(n := d.data.get(BUFFER), StringAttr)]
    taken += [b.buffer.data for b in fn.walk() if isinstance(b, BufferOp) and b.buffer]
    return Names.resumed(taken, count.value.data)


@dataclass(frozen=True)
class DeclareBuffersPass(ModulePass):
    """Name the entry function's memref arguments and replace its
    `memref.get_global`s by `nem_lowering.buffer`s, named with the
    generator the conversion resumes (D-LOW-DECLARE).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-declare-buffers"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        declare(entry_function(op, self.entry))
