"""NEM operations.

A `.nem` program is one `nem.program` op whose single block holds the
statements in source order.  Integer expressions (consts, offsets, loop
bounds, shapes, integer compute attributes) are `index` SSA values built
from `arith` ops, so folding is a pass and the printer can reproduce the
expressions the user wrote.  Every user-visible name is a `name` property
(never only an SSA name hint, which xDSL renumbers).

Compute ops are generated from the opcode registry: one op class per
opcode (`nem.conv2d`, `nem.relu`, ...), each with a `sync` flag for the
`.sync` form (TASK-09), variadic `ins`/`outs`/`deps`, and `args` holding the
integer expressions referenced by `ArgRefAttr`s inside `attrs`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar

from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i32,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    VarOperand,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from nem.dialect.attributes import (
    BufferType,
    DecoratorAttr,
    MaxInFlightAttr,
    RegionType,
    TokenType,
)
from nem.dialect.diagnostics import RuleVerifyException
from nem.dialect.op_build import init_op
from nem.dialect.per_class import PerClass
from nem.dialect.registry import OpcodeSpec, opcodes
from nem.dialect.segment_accessors import cache_segment_accessors

INDEX = IndexType()
TOKEN = TokenType()
SYNC = UnitAttr()
_VALUE_TYPES = (OpResult, BlockArgument)
"""The concrete SSA value classes (an operand of another type is converted
by `SSAValue.get`: an operation stands for its single result)."""
"""The result types of integer-valued ops and of tasks, a task's `.sync`
flag: attributes are immutable values, made once rather than per op."""

_Item = TypeVar("_Item")
_Group: TypeAlias = "_Item | Sequence[_Item] | None"
"""One operand or result group of an op's keyword constructor."""


@lru_cache(maxsize=256)
def segment_sizes_attr(sizes: tuple[int, ...]) -> DenseArrayBase:
    """The `operandSegmentSizes` property for `sizes`: an immutable value,
    made once (few distinct ones exist; IRDL makes one per op)."""
    return DenseArrayBase.from_list(i32, sizes)


@lru_cache(maxsize=256)
def _deps_segment(cls: type[IRDLOperation]) -> int:
    """The position of the `deps` segment among a task class's operand
    definitions (one entry per op class)."""
    return [name for name, _ in cls.get_irdl_definition().operands].index("deps")


@lru_cache(maxsize=256)
def _index_attr(value: int) -> IntegerAttr:
    """`value : index` (an alignment): few distinct ones exist."""
    return IntegerAttr.from_index_int_value(value)


_SEGMENTED: PerClass[bool] = PerClass(
    lambda cls: (
        issubclass(cls, IRDLOperation)
        and any(isinstance(o, AttrSizedOperandSegments) for o in cls.get_irdl_definition().options)
    )
)
"""Whether an op class's operand groups are sized by `operandSegmentSizes`."""


def decorators_attr(
    decorators: list[DecoratorAttr] | tuple[DecoratorAttr, ...],
) -> ArrayAttr | None:
    """The `decorators` property for `decorators` (None: none), each
    distinct array made once."""
    return _deco_array(tuple(decorators)) if decorators else None


@lru_cache(maxsize=256)
def _deco_array(decorators: tuple[DecoratorAttr, ...]) -> ArrayAttr:
    """The `decorators` property holding `decorators`: an immutable value,
    made once per distinct list (a program repeats a few on many ops)."""
    return ArrayAttr(decorators)


class NemOp(IRDLOperation):
    """Common helpers: decorators and the optional user-visible name, and
    the construction every NEM op's `__init__` goes through.

    That construction takes IRDLOperation's keyword arguments (operand and
    result groups, properties with `None` for absent ones, regions) and
    builds the op as `Operation.create` does, with the object state
    `Operation.__init__` gives it (`op_build.init_op`, decision
    D-IR-BUILD): the variadic groups are
    flattened and `operandSegmentSizes` set here, without IRDL's generic
    per-argument checks, which cost three quarters of the time to build a
    large program.  What those checks would catch -- an operand of the
    wrong type, a missing property -- is an error of the code building the
    op, and xDSL's verifier (`op.verify()`) still finds it: every front end
    and pass test verifies the IR it builds."""

    def __init__(
        self,
        *,
        operands: Sequence[_Group[SSAValue | Operation]] = (),
        result_types: Sequence[_Group[Attribute]] = (),
        properties: Mapping[str, Attribute | None] | None = None,
        regions: Sequence[Region] = (),
    ):
        flat: list[SSAValue] = []
        sizes: list[int] = []
        # (typed Any once: `typing.cast` is a call, and this loop runs for
        # every operand group of every op a front end builds)
        groups: Sequence[Any] = operands
        for group in groups:
            kind = type(group)  # (not isinstance: on xDSL's ABCs it runs Python code)
            if kind in _VALUE_TYPES:
                flat.append(group)
                sizes.append(1)
            elif kind is list or kind is tuple:
                flat.extend(v if type(v) in _VALUE_TYPES else SSAValue.get(v) for v in group)
                sizes.append(len(group))
            elif group is None:
                sizes.append(0)
            elif isinstance(group, Sequence):
                flat.extend(SSAValue.get(v) for v in group)
                sizes.append(len(group))
            else:  # an operation stands for its single result
                flat.append(SSAValue.get(group))
                sizes.append(1)
        types: list[Attribute] = []
        type_groups: Sequence[Any] = result_types
        for t in type_groups:
            if type(t) is list or type(t) is tuple:
                types.extend(t)
            elif t is not None:
                types.append(t)
        props = {k: v for k, v in properties.items() if v is not None} if properties else {}
        if _SEGMENTED[type(self)]:
            props["operandSegmentSizes"] = segment_sizes_attr(tuple(sizes))
        init_op(self, flat, types, props, UNKNOWN_LOC, regions)

    def decorator_list(self) -> tuple[DecoratorAttr, ...]:
        decos = self.properties.get("decorators")
        return tuple(decos.data) if isinstance(decos, ArrayAttr) else ()


@irdl_op_definition
class ProgramOp(NemOp):
    """A NEM program (SPEC §12 `program`): header name, device directive,
    includes, and the statements of its body in source order."""

    name = "nem.program"

    sym_name = opt_prop_def(StringAttr)
    """The program's header name (`program NAME`), or None."""
    device_kind = opt_prop_def(StringAttr)  # "file" | "name" | "inline"
    """How the device directive names the target: `"file"` (`device "x.nem"`), `"name"`
    (`device NAME`) or `"inline"`; None without a directive."""
    device = opt_prop_def(StringAttr)  # path, device name, or inline config text
    """The directive's path, device name or inline config text (set with `device_kind`)."""
    includes = opt_prop_def(ArrayAttr[StringAttr])
    """The `include` paths, in order, or None."""
    body = region_def("single_block")
    """The statements (one block, no terminator); `block` is that block."""
    traits = traits_def(NoTerminator())

    def __init__(
        self,
        name: str | None,
        body: Block,
        device_kind: str | None = None,
        device: str | None = None,
        includes: tuple[str, ...] = (),
    ):
        super().__init__(
            regions=[Region(body)],
            properties={
                "sym_name": StringAttr(name) if name else None,
                "device_kind": StringAttr(device_kind) if device_kind else None,
                "device": StringAttr(device) if device else None,
                "includes": ArrayAttr(tuple(StringAttr(i) for i in includes)) if includes else None,
            },
        )

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        if (self.device_kind is None) != (self.device is None):
            raise VerifyException(
                "device_kind and device are set together: the device "
                "directive's form and its path, name or inline text"
            )


def programs(root: Operation) -> Iterator[ProgramOp]:
    """The `nem.program` ops in `root` (a module), in order, found without
    walking their bodies, which hold no program (a full walk visited every
    op of a large program to find the one it holds)."""
    if type(root) is ProgramOp:
        yield root
        return
    for region in root.regions:
        for block in region.blocks:
            for op in block.ops:
                yield from programs(op)


@irdl_op_definition
class ConstOp(NemOp):
    """`const NAME = expr`: a program-scoped integer constant (SPEC §11)."""

    name = "nem.const"

    const_name = prop_def(StringAttr, prop_name="name")
    """The constant's name (`NAME` of `const NAME = expr`; property `name`)."""
    value = operand_def(IndexType)
    """Its value: an index SSA value (an `arith` expression over constants and earlier names)."""
    result = result_def(IndexType)
    """The constant as an index value for later expressions."""

    def __init__(self, name: str, value: SSAValue):
        super().__init__(
            operands=[value], result_types=[INDEX], properties={"name": StringAttr(name)}
        )
        self.result.name_hint = ssa_name_hint(name)


@irdl_op_definition
class LetOp(NemOp):
    """`let NAME = value` for a non-region value.  An integer expression
    gives an `index` result usable in later expressions; a string or list
    is kept in `value` (with `ArgRefAttr`s pointing into `args`)."""

    name = "nem.let"

    let_name = prop_def(StringAttr, prop_name="name")
    """The name (`NAME` of `let NAME = value`; property `name`)."""
    value = prop_def(Attribute)
    """The value as an attribute (an integer expression's folded form, a string, or a list)."""
    args = var_operand_def(IndexType)
    """The index values the value's `ArgRefAttr`s point at."""
    result = opt_result_def(IndexType)
    """The index result of an integer `let`; None otherwise."""

    def __init__(self, name: str, value: Attribute, args: list[SSAValue], is_scalar_int: bool):
        super().__init__(
            operands=[args],
            result_types=[[INDEX] if is_scalar_int else []],
            properties={"name": StringAttr(name), "value": value},
        )
        if self.result is not None:
            self.result.name_hint = ssa_name_hint(name)


@irdl_op_definition
class BufferOp(NemOp):
    """`buffer NAME : LEVEL (size=expr, align=INT) decos` (SPEC §2 Buffers)."""

    name = "nem.buffer"

    buffer_name = prop_def(StringAttr, prop_name="name")
    """The buffer's name (property `name`)."""
    align = opt_prop_def(IntegerAttr)
    """The `align=INT` attribute, or None."""
    decorators = opt_prop_def(ArrayAttr)
    """The buffer's decorators (`DecoratorAttr`s), or None."""
    size = operand_def(IndexType)
    """The byte size: an index SSA value."""
    result = result_def(BufferType)
    """The buffer value; its type `BufferType` holds the memory level (`result.type.level`)."""

    def __init__(
        self,
        name: str,
        type: BufferType,
        size: SSAValue,
        align: int | None,
        decorators: list[DecoratorAttr],
    ):
        super().__init__(
            operands=[size],
            result_types=[type],
            properties={
                "name": StringAttr(name),
                "align": _index_attr(align) if align is not None else None,
                "decorators": decorators_attr(decorators),
            },
        )
        self.result.name_hint = ssa_name_hint(name)


REGION_BINDINGS = ("decl", "let", "inline")
BINDING_ATTRS = {b: StringAttr(b) for b in REGION_BINDINGS}
"""The `binding` property of each region binding, made once."""


@irdl_op_definition
class RegionOp(NemOp):
    """A region view `region(buf, offset, extent) type_attrs decos`.

    `binding` records how the user wrote it: `NAME = region(...)` (decl),
    `let NAME = region(...)` (let) or inline in an operand list (inline).
    """

    name = "nem.region"

    region_name = opt_prop_def(StringAttr, prop_name="name")
    """The region's name (property `name`); None for an inline region."""
    binding = prop_def(StringAttr)
    """How it was written: `"decl"` (`NAME = region(...)`), `"let"` or `"inline"`."""
    decorators = opt_prop_def(ArrayAttr)
    """The region's decorators (`@readonly`, ...), or None."""
    buffer = operand_def(BufferType)
    """The viewed buffer (a `nem.buffer` result; `buffer_decl` is that op)."""
    offset = operand_def(IndexType)
    """The byte offset into the buffer: an index SSA value."""
    extent = operand_def(IndexType)
    """The byte extent: an index SSA value."""
    shape = var_operand_def(IndexType)
    """One index value per dimension of a typed region (empty when untyped);
    `result.type.shape_values` holds their folded values."""
    strides = var_operand_def(IndexType)
    """The explicit strides, when the region has `strides=[...]` instead of a layout."""
    result = result_def(RegionType)
    """The region value; its type is a `RegionType` (level, elem, shape, layout, strides, quant)."""
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        type: RegionType,
        buffer: SSAValue,
        offset: SSAValue,
        extent: SSAValue,
        shape: list[SSAValue],
        strides: list[SSAValue],
        name: str | None,
        binding: str,
        decorators: list[DecoratorAttr],
    ):
        super().__init__(
            operands=[buffer, offset, extent, shape, strides],
            result_types=[type],
            properties={
                "name": StringAttr(name) if name else None,
                "binding": BINDING_ATTRS.get(binding) or StringAttr(binding),
                "decorators": decorators_attr(decorators),
            },
        )
        if name:
            self.result.name_hint = ssa_name_hint(name)

    @property
    def buffer_decl(self) -> BufferOp:
        """The `buffer` statement this region views (a region's buffer operand
        is a `nem.buffer` result: BufferType values have no other source)."""
        owner = self.buffer.owner
        assert isinstance(owner, BufferOp)
        return owner

    def verify_(self) -> None:
        if self.binding.data not in REGION_BINDINGS:
            raise VerifyException(f"binding must be one of {REGION_BINDINGS}")
        if (self.binding.data == "inline") != (self.region_name is None):
            raise VerifyException("inline regions are unnamed; declared regions are named")
        rtype = self.result.type
        assert isinstance(rtype, RegionType)
        btype = self.buffer.type
        assert isinstance(btype, BufferType)
        if rtype.level != btype.level:
            raise VerifyException(
                f"region level {rtype.level.data} differs from its buffer's {btype.level.data}"
            )
        shape = rtype.shape_values
        if len(self.shape) != (len(shape) if shape is not None else 0):
            raise VerifyException("shape operands do not match the region type's rank")
        strides = rtype.stride_values
        if len(self.strides) != (len(strides) if strides is not None else 0):
            raise VerifyException("stride operands do not match the region type's strides")


WINDOW_FIX = "use @max_in_flight(1) for sequential iterations"
"""The fix of a LOOP-03 error (`LoopOp.window_error`), which `LoopOp`'s
verifier and the static verifier report."""


@irdl_op_definition
class LoopOp(NemOp):
    """`loop IV in [lb .. ub] decos: ... endloop`, bounds inclusive (D-LOOP-1)."""

    name = "nem.loop"

    iv_name = prop_def(StringAttr)
    """The loop variable's name as written (`i`); `block.args[0]` is its value."""
    decorators = opt_prop_def(ArrayAttr)
    """The loop's decorators (`@max_in_flight(k)`, ...): `DecoratorAttr`s, or None."""
    lower = operand_def(IndexType)
    """The first value of the loop variable (an index SSA value: a constant or an expression)."""
    upper = operand_def(IndexType)
    """The last value of the loop variable, inclusive (D-LOOP-1)."""
    body = region_def("single_block")
    """The loop body (one block, no terminator); `block` is that block."""
    traits = traits_def(NoTerminator())

    def __init__(
        self,
        iv_name: str,
        lower: SSAValue,
        upper: SSAValue,
        body: Block,
        decorators: list[DecoratorAttr],
    ):
        super().__init__(
            operands=[lower, upper],
            regions=[Region(body)],
            properties={"iv_name": StringAttr(iv_name), "decorators": decorators_attr(decorators)},
        )
        body.args[0].name_hint = ssa_name_hint(iv_name)

    @property
    def block(self) -> Block:
        return self.body.block

    def max_in_flight(self) -> int:
        """N of the loop's `@max_in_flight(N)`; 1 without it (LOOP-02).  An N < 1
        is a LOOP-03 error (`window_error`, raised by this op's verifier and
        reported, located, by the static verifier); the execution model
        (`nem.dialect.semantics.streams`) never sees such a loop."""
        for d in self.decorator_list():
            if isinstance(d, MaxInFlightAttr):
                return d.n.data
        return 1

    def window_error(self) -> str | None:
        """The LOOP-03 message when the loop's `@max_in_flight(N)` has N < 1."""
        n = self.max_in_flight()
        return f"@max_in_flight({n}) must be at least 1" if n < 1 else None

    def verify_(self) -> None:
        if len(self.block.args) != 1 or not isinstance(self.block.args[0].type, IndexType):
            raise VerifyException("a loop body has exactly one index argument, the loop variable")
        # LOOP-03: the static verifier reports it again, located, for programs
        # that xDSL does not verify (the `.nem` and bytecode front ends)
        msg = self.window_error()
        if msg is not None:
            raise RuleVerifyException(msg, "LOOP-03", WINDOW_FIX)


class TaskOp(NemOp):
    """A task: produces one completion token (TASK-01), optionally named by
    `NAME =`, with token dependencies and a `.sync` flag."""

    if TYPE_CHECKING:
        # every concrete task op defines them (`var_operand_def(TokenType)`,
        # `result_def(TokenType)`); not declared here at run time, where IRDL
        # would take them for fields
        deps: VarOperand
        result: OpResult[TokenType]

    def token_name(self) -> str | None:
        t = self.properties.get("token")
        return t.data if isinstance(t, StringAttr) else None

    @property
    def is_sync(self) -> bool:
        return "sync" in self.properties

    def dep_values(self) -> tuple[SSAValue, ...]:
        return tuple(self.deps)

    def set_deps(self, deps: Sequence[SSAValue]) -> None:
        """Replace the dependency tokens (the `deps` operand segment)."""
        seg = _deps_segment(type(self))
        sizes = list(self.properties["operandSegmentSizes"].get_values())  # type: ignore[attr-defined]
        start = sum(sizes[:seg])
        operands = list(self.operands)
        operands[start : start + sizes[seg]] = deps
        sizes[seg] = len(deps)
        self.operands = operands
        # (the dependence passes set deps on every task, several times: the
        # attribute of each distinct sizes tuple is made once)
        self.properties["operandSegmentSizes"] = segment_sizes_attr(tuple(sizes))

    def operand_regions(self) -> tuple[tuple[SSAValue, str], ...]:
        """(region value, "read"|"write") for every region the task touches."""
        raise NotImplementedError

    def written_operands(self) -> tuple[tuple[SSAValue, str], ...]:
        """(region value, "read"|"write") in the order the operands are written
        (`dst, src` for transfers and stores, ins then outs for compute):
        the order of `operand_decos`."""
        raise NotImplementedError

    def operand_decos(self, index: int) -> tuple[DecoratorAttr, ...]:
        """Region decorators written after operand `index` (SPEC §12
        `operand ::= ID decos? | region_expr decos?`), in `written_operands` order."""
        decos = self.properties.get("operand_decorators")
        if not isinstance(decos, ArrayAttr):
            return ()
        return tuple(decos.data[index].data)

    def _verify_operand_decos(self) -> None:
        decos = self.properties.get("operand_decorators")
        if isinstance(decos, ArrayAttr) and len(decos.data) != len(self.written_operands()):
            raise VerifyException("operand_decorators needs one entry per operand")


def operand_decorators_attr(per_operand: list[list[DecoratorAttr]]) -> ArrayAttr | None:
    """The `operand_decorators` property: one array per written operand
    (None when no operand has a decorator)."""
    if not any(per_operand):
        return None
    return ArrayAttr(tuple(ArrayAttr(tuple(d)) for d in per_operand))


class MoveOp(TaskOp):
    """Shared shape of `transfer` and `store`: dst, src, deps."""

    token = opt_prop_def(StringAttr)
    """The task's token name (`NAME = transfer...`), or None; `token_name()` reads it."""
    sync = opt_prop_def(UnitAttr)
    """Present for `.sync` (`is_sync`), absent for `.async`."""
    decorators = opt_prop_def(ArrayAttr)
    """The task's decorators (`@seq_engine(k)`, ...), or None."""
    operand_decorators = opt_prop_def(ArrayAttr)
    """Per operand, in written order (`dst`, `src`), the decorators written after it."""
    dst = operand_def(RegionType)
    """The destination region."""
    src = operand_def(RegionType)
    """The source region."""
    deps = var_operand_def(TokenType)
    """The tokens this task waits for (`deps=[...]`); `set_deps` replaces them."""
    result = result_def(TokenType)
    """The task's completion token."""
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        dst: SSAValue,
        src: SSAValue,
        deps: list[SSAValue],
        sync: bool,
        token: str | None,
        decorators: list[DecoratorAttr],
        operand_decorators: list[list[DecoratorAttr]] | None = None,
    ):
        super().__init__(
            operands=[dst, src, deps],
            result_types=[TOKEN],
            properties={
                "token": StringAttr(token) if token else None,
                "sync": SYNC if sync else None,
                "decorators": decorators_attr(decorators),
                "operand_decorators": operand_decorators_attr(operand_decorators or []),
            },
        )
        if token:
            self.result.name_hint = ssa_name_hint(token)

    def operand_regions(self) -> tuple[tuple[SSAValue, str], ...]:
        return ((self.src, "read"), (self.dst, "write"))

    def written_operands(self) -> tuple[tuple[SSAValue, str], ...]:
        return ((self.dst, "write"), (self.src, "read"))

    def verify_(self) -> None:
        self._verify_operand_decos()


@irdl_op_definition
class TransferOp(MoveOp):
    """`transfer.async|sync(dst=..., src=..., deps=[...])` (SPEC §5)."""

    name = "nem.transfer"
    KEYWORD: ClassVar[str] = "transfer"


@irdl_op_definition
class StoreOp(MoveOp):
    """`store.async|sync(dst=..., src=..., deps=[...])` (SPEC §5)."""

    name = "nem.store"
    KEYWORD: ClassVar[str] = "store"


@irdl_op_definition
class WaitOp(NemOp):
    """`wait(t1, t2, ...)`: blocks until every token is satisfied; no token."""

    name = "nem.wait"

    decorators = opt_prop_def(ArrayAttr)
    """The decorators of the wait, or None."""
    tokens = var_operand_def(TokenType)
    """The tokens it waits for (at least one)."""

    def __init__(self, tokens: Sequence[SSAValue], decorators: list[DecoratorAttr]):
        super().__init__(operands=[tokens], properties={"decorators": decorators_attr(decorators)})

    def verify_(self) -> None:
        if not self.tokens:
            raise VerifyException("wait needs at least one token (GRAM-13)")


class ComputeOp(TaskOp):
    """Base of the generated compute ops; `SPEC` is the registry entry."""

    SPEC: ClassVar[OpcodeSpec]

    token = opt_prop_def(StringAttr)
    """The task's token name, or None; `token_name()` reads it."""
    sync = opt_prop_def(UnitAttr)
    """Present for `.sync` (`is_sync`), absent for `.async`."""
    decorators = opt_prop_def(ArrayAttr)
    """The task's decorators (`@seq_engine(k)`, ...), or None."""
    operand_decorators = opt_prop_def(ArrayAttr)
    """Per operand, in written order (ins, then outs), the decorators written after it."""
    attrs = prop_def(DictionaryAttr)
    """The opcode's attributes (`axis=1`, ...) by name."""
    ins = var_operand_def(RegionType)
    """The input regions."""
    outs = var_operand_def(RegionType)
    """The output regions."""
    deps = var_operand_def(TokenType)
    """The tokens this task waits for (`deps=[...]`); `set_deps` replaces them."""
    args = var_operand_def(IndexType)
    """Index operands of attributes written as expressions."""
    result = result_def(TokenType)
    """The task's completion token."""
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        ins: list[SSAValue],
        outs: list[SSAValue],
        deps: list[SSAValue],
        args: list[SSAValue],
        attrs: dict[str, Attribute],
        sync: bool,
        token: str | None,
        decorators: list[DecoratorAttr],
        operand_decorators: list[list[DecoratorAttr]],
    ):
        op_decos = operand_decorators_attr(operand_decorators)
        super().__init__(
            operands=[ins, outs, deps, args],
            result_types=[TOKEN],
            properties={
                "token": StringAttr(token) if token else None,
                "sync": SYNC if sync else None,
                "decorators": decorators_attr(decorators),
                "operand_decorators": op_decos,
                "attrs": DictionaryAttr(attrs) if attrs else NO_ATTRS,
            },
        )
        if token:
            self.result.name_hint = ssa_name_hint(token)

    @property
    def opcode(self) -> str:
        return self.SPEC.name

    def operand_regions(self) -> tuple[tuple[SSAValue, str], ...]:
        return tuple((v, "read") for v in self.ins) + tuple((v, "write") for v in self.outs)

    def written_operands(self) -> tuple[tuple[SSAValue, str], ...]:
        return self.operand_regions()

    def verify_(self) -> None:
        self._verify_operand_decos()


NO_ATTRS = DictionaryAttr({})
"""The empty `attrs` dictionary, shared."""
"""The `attrs` of a compute task written without attributes (an immutable value)."""


def _make_compute_op(spec: OpcodeSpec) -> type[ComputeOp]:
    cls_name = "".join(p.title() for p in spec.name.split("_")) + "Op"
    if cls_name == ComputeOp.__name__:  # the escape hatch must not shadow its base class
        cls_name = "GenericComputeOp"
    doc = (
        f"`{spec.name}.async|sync {spec.signature()}` ({spec.category}, "
        f"unit {spec.unit}, hardware {spec.hw_status})."
    )
    cls = type(
        cls_name,
        (ComputeOp,),
        {
            "name": f"nem.{spec.name}",
            "SPEC": spec,
            "__doc__": doc,
            "__module__": __name__,
            "__annotations__": {"SPEC": ClassVar[OpcodeSpec]},
        },
    )
    return irdl_op_definition(cls)


COMPUTE_OPS: dict[str, type[ComputeOp]] = {
    name: _make_compute_op(spec) for name, spec in opcodes().items()
}
"""One op class per registry opcode, keyed by opcode name."""


def ssa_name_hint(name: str) -> str | None:
    """An SSA name hint for `name`; xDSL renumbers hints ending in `_<digits>`,
    so those get a trailing `_` (the user-visible name is the property)."""
    if not name.isidentifier():
        return None
    tail = name.rsplit("_", 1)
    return name + "_" if len(tail) == 2 and tail[1].isdigit() else name


for _cls in (RegionOp, TransferOp, StoreOp):
    cache_segment_accessors(_cls)
for _compute_cls in COMPUTE_OPS.values():
    cache_segment_accessors(_compute_cls)

STATEMENT_OPS: list[type[IRDLOperation]] = [
    ProgramOp,
    ConstOp,
    LetOp,
    BufferOp,
    RegionOp,
    LoopOp,
    TransferOp,
    StoreOp,
    WaitOp,
]
