"""`.nemb` bytes -> NEM IR (docs/bytecode.md), validating as it goes.

The reader decodes the varint streams in bulk (numpy), then builds the ops
with xDSL's generic constructor (`Op.create`), interning every attribute
once.  Every reference, count, kind and name is checked against the format's
rules while building, so a malformed file stops at the first bad byte with
a `BytecodeError` (its file offset and what is wrong).  The result is the
same IR the `.nem` parser builds for the same program; the static rules
(`verify_program`) are then checked by the caller, as after parsing text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar, cast

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import IRDLOperation

from nem.dialect.attributes import (
    DYNAMIC,
    ArgRefAttr,
    BufferType,
    DecoratorAttr,
    RegionType,
    TokenType,
)
from nem.dialect.bounded_cache import SEGMENT_CACHE_SIZE, BoundedCache
from nem.dialect.expressions import BINOPS, BuildFacts, ExprError, apply_binop
from nem.dialect.gc_pause import gc_paused
from nem.dialect.limits import MAX_NESTING_DEPTH, max_source_bytes
from nem.dialect.ops import (
    COMPUTE_OPS,
    REGION_BINDINGS,
    BufferOp,
    ConstOp,
    LetOp,
    LoopOp,
    ProgramOp,
    RegionOp,
    StoreOp,
    TransferOp,
    WaitOp,
    ssa_name_hint,
)
from nem.dialect.registry import opcode_by_code
from nem.frontends.bytecode import nem_bytecode_generated as fb
from nem.frontends.bytecode import sections as small_sections
from nem.frontends.bytecode.container import (
    HEADER_SIZE,
    SECTION_NAMES,
    BytecodeError,
    Header,
    RawSection,
    decode_varints,
    read_header,
    sections,
    unzigzag,
)
from nem.frontends.bytecode.debug_locations import read_locs
from nem.frontends.bytecode.op_construction import create_op, first_result
from nem.frontends.bytecode.requirements import Requirements, Slot
from nem.frontends.bytecode.tables import (
    ELEM_BY_CODE,
    RegionTypeBase,
    TableReader,
)

INST_BINOP = {
    fb.Inst.Add: "+",
    fb.Inst.Sub: "-",
    fb.Inst.Mul: "*",
    fb.Inst.Div: "/",
    fb.Inst.Mod: "mod",
}
IDX, BUF, REG, TOK = 0, 1, 2, 3  # value kinds
KIND_WORDS = {IDX: "an index value", BUF: "a buffer", REG: "a region", TOK: "a token"}
SEGMENTS: BoundedCache[tuple[int, ...], DenseArrayBase] = BoundedCache(SEGMENT_CACHE_SIZE)
MAX_LOOP_DEPTH = MAX_NESTING_DEPTH  # nested loops: the text's limit (D-LIMITS; docs/bytecode.md)
REQUIRED_KINDS = (fb.SectionBody.Strings, fb.SectionBody.ProgramInfo, fb.SectionBody.Code)


@dataclass
class LoadedBytecode:
    """A decoded file: the IR plus what the container holds beside it."""

    module: ModuleOp
    program: ProgramOp
    header: Header
    build: dict[str, str]
    requirements: Requirements | None
    slots: list[Slot] | None
    data: list[tuple[int, int, bytes]]  # (slot, offset, bytes)
    names_stripped: bool
    section_sizes: list[tuple[str, bool, int]]  # (name, required, bytes)
    unknown_sections: list[tuple[int, bool]] = field(default_factory=list)
    buffers: list[BufferOp] = field(default_factory=list)  # in body order (slot order)
    facts: BuildFacts | None = None  # for the verifier of this IR as read (D-BC-SEED)


def _segments(sizes: tuple[int, ...]) -> DenseArrayBase:
    seg = SEGMENTS.get(sizes)
    if seg is None:
        seg = SEGMENTS[sizes] = DenseArrayBase.from_list(i32, sizes)
    return seg


LET_VALUE_KINDS = (ArgRefAttr, ArrayAttr, StringAttr, FloatAttr)
TOKU = 4  # an unnamed token: it cannot be referenced (the text form names every referenced token)


class _BodyReader(TableReader):
    """The instruction stream (docs/bytecode.md section 5) and the debug
    locations, on top of the string and attribute tables."""

    def __init__(self, data: bytes, file: str):
        super().__init__(data, file)
        self.ints: dict[int, IntegerAttr] = {}  # literal -> its IntegerAttr
        self.deco_lists: dict[int, ArrayAttr] = {}  # entry -> checked decorator list
        self.region_bases: dict[int, RegionTypeBase] = {}  # stream value -> checked entry
        self.compute_attrs: dict[tuple[int, int], int] = {}  # (opcode, entry) -> its arg count
        self.handlers: dict[int, Callable[[int, int], Operation]] = {}

    # -- instructions ---------------------------------------------------------------
    def decode_body(self, code: fb.Code) -> None:
        """The body's varints, all at once."""
        stream = code.BodyAsNumpy() if code.BodyLength() else np.zeros(0, np.uint8)
        base = self._vec_pos(code, 12)
        self.body = decode_varints(stream, base)
        self.end = base + stream.size
        self.body_base = base

    def read_body(self, code: fb.Code) -> Block:
        self.v, self.o = self.body
        base = self.body_base
        self.i = 0
        self.op_count = code.OpCount()
        self.loc_base = 1  # debug entry 0 is the program
        self.handlers = {
            fb.Inst.Int: self._literal,
            fb.Inst.Const: self._const,
            fb.Inst.Let: self._let,
            fb.Inst.Buffer: self._buffer,
            fb.Inst.Region: self._region,
            fb.Inst.Loop: self._loop,
            fb.Inst.Transfer: self._transfer,
            fb.Inst.Store: self._store,
            fb.Inst.Wait: self._wait,
            fb.Inst.Compute: self._compute,
            **{code: self._binop for code in INST_BINOP},
        }
        block = Block()
        try:
            self.block_into(block)
        except IndexError:
            raise BytecodeError(
                self.end, f"the body stream ends inside instruction {self.n_ops}"
            ) from None
        if self.i != len(self.v):
            raise BytecodeError(self.o[self.i], "values after the program's last instruction")
        if self.n_ops != self.op_count:
            raise BytecodeError(
                base, f"Code says {self.op_count} instructions, the body has {self.n_ops}"
            )
        return block

    def ref(self, kind: int, at: int, what: str, name: str = "") -> int:
        """A value reference: 2*d = d places back, 2*a+1 = a-th from the bottom.
        (`what`, with `name` after its first word, says in an error what the
        reference is for: composed only then, never on the success path.)"""
        r = self.v[self.i]
        self.i += 1
        kinds = self.kinds
        n = len(kinds)
        k = r >> 1 if r & 1 else n - 1 - (r >> 1)
        if 0 <= k < n and kinds[k] == kind:
            return k
        what = _describe(what, name)
        if not 0 <= k < n:
            raise BytecodeError(
                at, f"{what}: value reference {r} is outside the {n} values in scope"
            )
        have = kinds[k]
        if have == TOKU and kind == TOK:
            raise BytecodeError(at, f"{what}: refers to an unnamed token")
        raise BytecodeError(
            at, f"{what}: expected {KIND_WORDS[kind]}, found {KIND_WORDS.get(have, 'a token')}"
        )

    def body_name(self, at: int, what: str) -> str:
        """A name in the body: 0, or 1 + zigzag(delta to the previous name's index)."""
        u = self.u()
        if u == 0:
            return self.name(0, at, what)
        self.last_name += unzigzag(u - 1)
        return self.name(self.last_name, at, what)

    def refs(self, kind: int, at: int, what: str, name: str = "") -> list[int]:
        n = self.u()
        return [self.ref(kind, at, what, name) for _ in range(min(n, len(self.v)))]

    def values(self, kind: int, at: int, what: str, name: str = "") -> list[SSAValue]:
        """`refs`, as the values they name."""
        st = self.stack
        return [st[k] for k in self.refs(kind, at, what, name)]

    def push(
        self,
        value: SSAValue,
        kind: int,
        static: int | None = None,
        depth: int = 0,
        key: object = None,
    ) -> None:
        """A value onto the stack; for an index value, its static value,
        expression depth and structural key (`Evaluator.key`: the static
        value itself when there is one)."""
        self.stack.append(value)
        self.kinds.append(kind)
        self.static.append(static)
        self.depth.append(depth)
        self.keys.append(static if static is not None else key)

    def pop_to(self, mark: int) -> None:
        """Drop the values above `mark` (a loop body's, at its end), keeping
        the index values and their static values for the verifier."""
        kinds, st, keys = self.kinds, self.static, self.keys
        for k in range(mark, len(kinds)):
            if kinds[k] == IDX:
                self.int_values.append(self.stack[k])
                self.int_statics.append(st[k])
                self.int_keys.append(keys[k])
        del self.stack[mark:], kinds[mark:], st[mark:], self.depth[mark:], keys[mark:]

    def facts(self) -> BuildFacts:
        """What the verifier may take instead of walking the expressions
        again (D-BC-SEED), once the whole body is read."""
        self.pop_to(0)
        return BuildFacts(
            self.int_values,
            self.int_statics,
            self.int_keys,
            self.key_table,
            self.max_expr_depth,
            self.max_loop_depth,
            operands_in_scope=True,
        )  # `ref` reaches only the scope's values

    def decos(self, at: int, what: str, name: str = "") -> ArrayAttr | None:
        u = self.v[self.i]
        known = self.deco_lists.get(u - 1) if u else None
        if known is not None:  # an entry already checked to be a list of decorators
            self.i += 1
            return known
        a = self.opt_aref(at, ArrayAttr, _describe(what, name))
        if a is None:
            return None
        if not a.data or not all(isinstance(d, DecoratorAttr) for d in a.data):
            raise BytecodeError(at, f"{_describe(what, name)}: not a list of decorators")
        self.deco_lists[u - 1] = a
        return a

    def block_into(self, block: Block) -> None:
        """A block's instructions, appended to `block` (`Block.add_op`: the
        bulk append xDSL lacks is docs/upstream-reports.md 9; the reader does
        not run in `nem-compile`)."""
        n = self.u()
        count = 0
        inst, add = self.inst, block.add_op
        for _ in range(min(n, len(self.v))):
            add(inst())
            count += 1
        if count != n:
            raise BytecodeError(self.end, f"a block says {n} instructions, the stream holds fewer")

    def inst(self) -> Operation:
        at = self.o[self.i]
        code = self.u()
        handler = self.handlers.get(code)
        if handler is None:
            raise BytecodeError(at, f"unknown instruction code {code}")
        locs = self.locs
        loc = locs[self.n_ops + self.loc_base] if locs is not None else None
        self.n_ops += 1
        op = handler(at, code)
        if loc is not None:
            op.location = loc
        return op

    def _literal(self, at: int, code: int) -> Operation:
        v = self.s()
        if v < 0:
            raise BytecodeError(
                at,
                f"integer literal {v} is negative (NEM has no negative "
                "literals: write 0 - x) [LEX-06]",
            )
        op = create_op(arith.ConstantOp, (), _INDEX_1, {"value": self._int(v)})
        self.push(first_result(op), IDX, v)
        return op

    def _binop(self, at: int, code: int) -> Operation:
        sym = INST_BINOP[code]
        a, b = self.ref(IDX, at, sym), self.ref(IDX, at, sym)
        st = self.static
        sa, sb = st[a], st[b]
        value = None
        if sa is not None and sb is not None:
            try:
                value = apply_binop(sym, sa, sb)
            except ExprError as e:
                raise BytecodeError(at, f"{e} in a constant expression [CONST-05]") from None
        op = create_op(
            cast(type[IRDLOperation], BINOPS[sym]), (self.stack[a], self.stack[b]), _INDEX_1, {}
        )
        dp = self.depth
        d = (dp[a] if dp[a] > dp[b] else dp[b]) + 1
        if d > self.max_expr_depth:
            self.max_expr_depth = d
        key = None if value is not None else self.key_table.binop(sym, self.keys[a], self.keys[b])
        self.push(first_result(op), IDX, value, d, key)
        return op

    def _const(self, at: int, code: int) -> Operation:
        name = self.body_name(at, "const")
        k = self.ref(IDX, at, "const", name)
        op = create_op(ConstOp, (self.stack[k],), _INDEX_1, {"name": _string_attr(name)})
        self._named(first_result(op), name, IDX, self.static[k], self.depth[k], self.keys[k])
        return op

    def _named(
        self,
        value: SSAValue,
        name: str,
        kind: int,
        static: int | None = None,
        depth: int = 0,
        key: object = None,
    ) -> None:
        """Push a named value, with the SSA name hint the parser gives it."""
        value.name_hint = ssa_name_hint(name)
        self.push(value, kind, static, depth, key)

    def _wait(self, at: int, code: int) -> Operation:
        decos = self.decos(at, "wait decorators")
        toks = self.values(TOK, at, "wait")
        if not toks:
            raise BytecodeError(at, "wait needs at least one token [GRAM-13]")
        return create_op(WaitOp, toks, (), {"decorators": decos} if decos else {})

    def _int(self, v: int) -> IntegerAttr:
        a = self.ints.get(v)
        if a is None:
            a = self.ints[v] = IntegerAttr(v, INDEX)
        return a

    def _arg_order(self, value: Attribute, nargs: int, at: int, what: str) -> None:
        """ArgRefs must name args 0..n-1 once each, in order (as the parser makes them)."""
        seen: list[int] = []

        def walk(a: Attribute) -> None:
            if isinstance(a, ArgRefAttr):
                seen.append(a.index.data)
            elif isinstance(a, ArrayAttr):
                for x in a.data:
                    walk(x)
            elif isinstance(a, DictionaryAttr):
                for x in a.data.values():
                    walk(x)

        walk(value)
        if seen != list(range(nargs)):
            raise BytecodeError(
                at,
                f"{what}: argument references {seen} do not name its "
                f"{nargs} integer arguments in order",
            )

    def _let(self, at: int, code: int) -> Operation:
        name = self.body_name(at, "let")
        value = self.aref(at, Attribute, f"let {name}")
        args = self.refs(IDX, at, "let", name)
        has_result = self.u()
        self._let_value(value, at, name)
        self._arg_order(value, len(args), at, f"let {name}")
        is_int = isinstance(value, ArgRefAttr)
        if has_result != int(is_int):
            raise BytecodeError(at, f"let {name}: an integer let has a result, any other none")
        op = create_op(
            LetOp,
            [self.stack[k] for k in args],
            _INDEX_1 if is_int else (),
            {"name": _string_attr(name), "value": value},
        )
        if is_int:
            k = args[0]
            self._named(first_result(op), name, IDX, self.static[k], self.depth[k], self.keys[k])
        return op

    def _let_value(self, a: Attribute, at: int, name: str) -> None:
        if isinstance(a, ArrayAttr):
            for x in a.data:
                self._let_value(x, at, name)
        elif not isinstance(a, LET_VALUE_KINDS) and a not in ELEM_BY_CODE.values():
            raise BytecodeError(at, f"let {name}: {type(a).__name__} is not a let value")

    def _buffer(self, at: int, code: int) -> Operation:
        name = self.body_name(at, "buffer")
        btype = self.aref(at, BufferType, f"buffer {name}")
        k = self.ref(IDX, at, "buffer size", name)
        align = self.u()
        decos = self.decos(at, "buffer decorators", name)
        props: dict[str, Attribute] = {"name": _string_attr(name)}
        if align:
            props["align"] = IntegerAttr(align - 1, INDEX)
        if decos:
            props["decorators"] = decos
        op = create_op(BufferOp, (self.stack[k],), (btype,), props)
        self._named(first_result(op), name, BUF)
        self.buffers.append(op)
        self.buffer_sizes.append(self.static[k])
        return op

    def _region(self, at: int, code: int) -> Operation:
        binding = self.u()
        if binding >= len(REGION_BINDINGS):
            raise BytecodeError(at, f"region binding {binding} is not one of 0..2")
        inline = binding == INLINE
        name = "" if inline else self.body_name(at, "region")
        words = REGION_WORDS[inline]
        base = self.region_bases.get(self.v[self.i])
        if base is None:  # the entry's kind is checked on its first use
            base = self.aref(at, RegionTypeBase, _describe(words[0], name))
            assert isinstance(base, RegionTypeBase)
            self.region_bases[self.v[self.i - 1]] = base
        else:
            self.i += 1
        ref = self.ref
        b = ref(BUF, at, words[1], name)
        off = ref(IDX, at, words[2], name)
        ext = ref(IDX, at, words[3], name)
        shape = [ref(IDX, at, words[4], name) for _ in range(base.rank)]
        strides = [ref(IDX, at, words[5], name) for _ in range(base.nstrides or 0)]
        decos = self.decos(at, words[6], name)
        if inline and decos:
            raise BytecodeError(at, "an inline region takes no decorators")
        st = self.stack
        buf = st[b]
        level = cast(BufferType, buf.type).level  # a value of the buffer kind
        if level is not base.level and level != base.level:
            raise BytecodeError(
                at,
                f"{_describe(words[0], name)} is at {base.level.data} but its "
                f"buffer at {level.data}",
            )
        rtype = self._region_type(base, shape, strides)
        props: dict[str, Attribute] = {"name": _string_attr(name)} if name else {}
        props["binding"] = BINDING_ATTRS[binding]
        if decos:
            props["decorators"] = decos
        props["operandSegmentSizes"] = _segments((1, 1, 1, len(shape), len(strides)))
        op = create_op(
            RegionOp,
            [buf, st[off], st[ext], *[st[k] for k in shape], *[st[k] for k in strides]],
            (rtype,),
            props,
        )
        if name:
            self._named(first_result(op), name, REG)
        else:
            self.push(first_result(op), REG)
        return op

    def _region_type(
        self, base: RegionTypeBase, shape: list[int], strides: list[int]
    ) -> RegionType:
        st = self.static
        sh = tuple(DYNAMIC if (x := st[k]) is None else x for k in shape)
        sd = tuple(DYNAMIC if (x := st[k]) is None else x for k in strides) if base.elem else None
        key = (base, sh, sd)
        t = self.region_types.get(key)
        if t is None:
            if base.elem is None:
                t = RegionType(base.level)
            else:
                t = RegionType(
                    base.level,
                    base.elem,
                    sh,
                    base.layout,
                    sd if base.layout is None else None,
                    base.quant,
                )
            self.region_types[key] = t
        return t

    def _loop(self, at: int, code: int) -> Operation:
        iv = self.body_name(at, "loop variable")
        lo, hi = self.ref(IDX, at, "loop lower bound"), self.ref(IDX, at, "loop upper bound")
        decos = self.decos(at, "loop decorators")
        body = Block(arg_types=[INDEX])
        mark = len(self.stack)
        self._named(body.args[0], iv, IDX, key=self.key_table.leaf())
        self.loop_depth += 1
        if self.loop_depth > MAX_LOOP_DEPTH:
            raise BytecodeError(at, f"loops nested deeper than {MAX_LOOP_DEPTH}")
        self.max_loop_depth = max(self.max_loop_depth, self.loop_depth)
        self.block_into(body)
        self.loop_depth -= 1
        self.pop_to(mark)
        props: dict[str, Attribute] = {"iv_name": _string_attr(iv)}
        if decos:
            props["decorators"] = decos
        op = create_op(LoopOp, (self.stack[lo], self.stack[hi]), (), props)
        op.add_region(Region(body))
        return op

    def _task_head(self, at: int, max_flag: int) -> tuple[int, str | None, ArrayAttr | None]:
        flags = self.u()
        if flags > max_flag:
            raise BytecodeError(at, f"task flags {flags:#x} set unknown bits")
        token = self.body_name(at, "token") if flags & 2 else None
        decos = self.decos(at, "task decorators")
        return flags, token, decos

    def _task_props(
        self, flags: int, token: str | None, decos: ArrayAttr | None
    ) -> dict[str, Attribute]:
        props: dict[str, Attribute] = {}
        if token:
            props["token"] = _string_attr(token)
        if flags & 1:
            props["sync"] = UNIT
        if decos:
            props["decorators"] = decos
        return props

    def _finish_task(self, op: Operation, token: str | None) -> Operation:
        if token:
            self._named(first_result(op), token, TOK)
        else:
            self.push(first_result(op), TOKU)
        return op

    def _transfer(self, at: int, code: int) -> Operation:
        return self._move(at, TransferOp)

    def _store(self, at: int, code: int) -> Operation:
        return self._move(at, StoreOp)

    def _move(self, at: int, cls: type[TransferOp] | type[StoreOp]) -> Operation:
        flags, token, decos = self._task_head(at, 7)
        dst, src = self.ref(REG, at, "dst"), self.ref(REG, at, "src")
        deps = self.values(TOK, at, "deps")
        props = self._task_props(flags, token, decos)
        if flags & 4:
            props["operand_decorators"] = self._operand_decos(at, 2, cls.name)
        props["operandSegmentSizes"] = _segments((1, 1, len(deps)))
        op = create_op(cls, [self.stack[dst], self.stack[src], *deps], _TOKEN_1, props)
        return self._finish_task(op, token)

    def _operand_decos(self, at: int, count: int, what: str) -> ArrayAttr:
        """Operand decorators: one list per region operand, at least one decorator."""
        od = self.aref(at, ArrayAttr, f"{what} operand decorators")
        assert isinstance(od, ArrayAttr)
        if (
            len(od.data) != count
            or not all(
                isinstance(x, ArrayAttr) and all(isinstance(d, DecoratorAttr) for d in x.data)
                for x in od.data
            )
            or not any(x.data for x in od.data)
        ):
            raise BytecodeError(
                at,
                f"{what}: operand decorators need one list per operand, and at least one decorator",
            )
        return od

    def _compute(self, at: int, code: int) -> Operation:
        number = self.u()
        spec = opcode_by_code().get(number)
        if spec is None:
            raise BytecodeError(
                at,
                f"unknown opcode number {number}: not in this reader's "
                "opcode registry (a newer producer?)",
            )
        flags, token, decos = self._task_head(at, 7)
        name = spec.name
        ins = self.values(REG, at, f"{name} inputs")
        outs = self.values(REG, at, f"{name} outputs")
        deps = self.values(TOK, at, f"{name} deps")
        args = self.values(IDX, at, f"{name} arguments")
        attrs = self.aref(at, DictionaryAttr, f"{name} attributes")
        assert isinstance(attrs, DictionaryAttr)
        if not ins or not outs:
            raise BytecodeError(at, f"{name}: a compute task has inputs and outputs [GRAM-14]")
        checked = self.compute_attrs.get((number, id(attrs)))
        if checked is None:  # an attribute entry is checked once per opcode
            keys = list(attrs.data)
            if keys != spec.canonical_attr_order(keys) or "deps" in attrs.data:
                raise BytecodeError(at, f"{name}: attributes {keys} are not in canonical order")
            self._arg_order(attrs, len(args), at, name)
            self.compute_attrs[(number, id(attrs))] = len(args)
        elif checked != len(args):
            self._arg_order(attrs, len(args), at, name)
        props = self._task_props(flags, token, decos)
        if flags & 4:
            props["operand_decorators"] = self._operand_decos(at, len(ins) + len(outs), name)
        props["attrs"] = attrs
        props["operandSegmentSizes"] = _segments((len(ins), len(outs), len(deps), len(args)))
        op = create_op(COMPUTE_OPS[name], [*ins, *outs, *deps, *args], _TOKEN_1, props)
        return self._finish_task(op, token)


def _describe(what: str, name: str) -> str:
    """`what` with `name` after its first word: ("region offset", "X") ->
    "region X offset" (error messages only)."""
    if not name:
        return what
    head, _, tail = what.partition(" ")
    return f"{head} {name} {tail}".rstrip()


INDEX = IndexType()
TOKEN = TokenType()
_INDEX_1 = (INDEX,)
_TOKEN_1 = (TOKEN,)
UNIT = UnitAttr()
INLINE = REGION_BINDINGS.index("inline")
BINDING_ATTRS = tuple(StringAttr(b) for b in REGION_BINDINGS)
REGION_WORDS = {
    inline: tuple(
        f"{w} {part}".strip()
        for part in ("", "buffer", "offset", "extent", "shape", "strides", "decorators")
    )
    for inline, w in ((False, "region"), (True, "inline region"))
}
"""What each reference of a Region instruction is, for its error messages
(`_describe` puts the region's name after the first word)."""


def _body(known: dict[int, RawSection], kind: int, cls: type[_T]) -> _T | None:
    """The decoded body of a section kind, None when absent."""
    s = known.get(kind)
    if s is None:
        return None
    assert isinstance(s.body, cls), "container.sections decodes each kind as its table"
    return s.body


_T = TypeVar("_T")


def _string_attr(text: str) -> StringAttr:
    """`StringAttr(text)` for a string the reader has checked (a name): xDSL's
    attribute verification only checks that `text` is a `str`."""
    a = _NEW_ATTR(StringAttr)
    _SET(a, "data", text)
    return a


_NEW_ATTR = StringAttr.__new__
_SET = object.__setattr__


def read_nemb(
    data: bytes, file: str = "<nemb>", timings: dict[str, float] | None = None
) -> LoadedBytecode:
    """Decode a `.nemb` file into NEM IR; `BytecodeError` on any malformed byte.
    The static rules are not applied here (see `loader.load_nemb`).  With
    `timings`, the seconds spent decoding (header, checksum, sections, varint
    streams, tables) and building IR are added to its "decode" / "build".

    The cyclic garbage collector is paused meanwhile, as in `parse_nem`: the
    reader allocates only long-lived IR."""
    with gc_paused():
        return _read(data, file, timings if timings is not None else {})


def _check_program_size(data: bytes, data_section: RawSection | None) -> None:
    """Everything but the Data section (the code, strings, debug
    information: what is decoded into IR) is at most `max_source_bytes()`,
    as a `.nem` text is; the Data section's initial contents are bounded as
    input files are, by `read_source_bytes` (D-LIMITS)."""
    initial = 0 if data_section is None else small_sections.section_size(data_section)
    limit = max_source_bytes()
    if len(data) - initial > limit:
        raise BytecodeError(
            HEADER_SIZE,
            f"the program (the file without its {initial} bytes of initial contents) has "
            f"{len(data) - initial} bytes, above the limit of {limit} (D-LIMITS)",
            "split the program, or raise the limit: --max-source-bytes N "
            "(nem.dialect.limits.source_limit from Python)",
        )


def _read(data: bytes, file: str, timings: dict[str, float]) -> LoadedBytecode:
    t0 = time.perf_counter()
    header = read_header(data)
    secs = sections(data)
    known = {s.kind: s for s in secs if s.body is not None}
    unknown = [(s.kind, s.required) for s in secs if s.body is None]
    for s in secs:
        if s.body is None and s.required:
            raise BytecodeError(
                s.pos,
                f"section kind {s.kind} is required but unknown to this "
                f"reader (file format {header.major}.{header.minor})",
                "the file was written by a newer toolchain: read it with that "
                "version, or write it again from its source with this one",
            )
    for kind in REQUIRED_KINDS:
        if kind not in known:
            raise BytecodeError(HEADER_SIZE, f"the {SECTION_NAMES[kind]} section is missing")
    _check_program_size(data, known.get(fb.SectionBody.Data))
    r = _BodyReader(data, file)
    strings = _body(known, fb.SectionBody.Strings, fb.Strings)
    code = _body(known, fb.SectionBody.Code, fb.Code)
    info = _body(known, fb.SectionBody.ProgramInfo, fb.ProgramInfo)
    assert strings is not None and code is not None and info is not None  # REQUIRED_KINDS
    r.read_strings(strings)
    r.read_attributes(code)
    r.decode_body(code)
    t1 = time.perf_counter()
    debug = _body(known, fb.SectionBody.Debug, fb.Debug)
    if debug is not None:
        r.locs = read_locs(r, debug, code.OpCount() + 1)
    block = r.read_body(code)
    prog = small_sections.program_op(info, block, r)
    facts = r.facts()
    t2 = time.perf_counter()
    module = ModuleOp.create(regions=[Region(Block())])
    module.body.block.add_op(prog)
    req_sec = _body(known, fb.SectionBody.Requirements, fb.Requirements)
    reqs = small_sections.requirements(req_sec) if req_sec is not None else None
    reloc_sec = _body(known, fb.SectionBody.Relocations, fb.Relocations)
    slots = small_sections.slots(reloc_sec, r) if reloc_sec is not None else None
    data_sec = _body(known, fb.SectionBody.Data, fb.Data)
    data_segs = small_sections.data(data_sec, r) if data_sec is not None else []
    build_sec = _body(known, fb.SectionBody.BuildInfo, fb.BuildInfo)
    build = small_sections.build_info(build_sec) if build_sec is not None else {}
    sizes = [
        (SECTION_NAMES.get(s.kind, f"kind {s.kind}"), s.required, small_sections.section_size(s))
        for s in secs
    ]
    t3 = time.perf_counter()
    timings["decode"] = timings.get("decode", 0.0) + (t1 - t0) + (t3 - t2)
    timings["build"] = timings.get("build", 0.0) + (t2 - t1)
    return LoadedBytecode(
        module,
        prog,
        header,
        build,
        reqs,
        slots,
        data_segs,
        r.stripped,
        sizes,
        unknown,
        r.buffers,
        facts,
    )
