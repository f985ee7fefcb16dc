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

import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TypeVar

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FileLineColLoc,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i32,
)
from xdsl.ir import Attribute, Block, OpResult, Region, SSAValue, SSAValues, Use
from xdsl.irdl import IRDLOperation, OptionalDef

from nem.dialect.attributes import (
    DYNAMIC,
    ArgRefAttr,
    BufferType,
    DecoratorAttr,
    RegionType,
    TokenType,
)
from nem.dialect.limits import MAX_NESTING_DEPTH
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
    _hint,
)
from nem.dialect.registry import opcode_by_code
from nem.dialect.semantics import BINOPS, ExprError, apply_binop
from nem.frontends.bytecode import nem_bytecode_generated as fb
from nem.frontends.bytecode import sections as small_sections
from nem.frontends.bytecode.container import (
    HEADER_SIZE,
    SECTION_NAMES,
    BytecodeError,
    Header,
    decode_varints,
    read_header,
    sections,
    unzigzag,
)
from nem.frontends.bytecode.requirements import Requirements, Slot
from nem.frontends.bytecode.tables import (
    ELEM_BY_CODE,
    RegionTypeBase,
    TableReader,
)

INST_BINOP = {fb.Inst.Add: "+", fb.Inst.Sub: "-", fb.Inst.Mul: "*", fb.Inst.Div: "/",
              fb.Inst.Mod: "mod"}
IDX, BUF, REG, TOK = 0, 1, 2, 3  # value kinds
KIND_WORDS = {IDX: "an index value", BUF: "a buffer", REG: "a region", TOK: "a token"}
SEGMENTS: dict[tuple[int, ...], DenseArrayBase] = {}
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
    data: list[tuple[int, int, bytes]]           # (slot, offset, bytes)
    names_stripped: bool
    section_sizes: list[tuple[str, bool, int]]    # (name, required, bytes)
    unknown_sections: list[tuple[int, bool]] = field(default_factory=list)
    buffers: list[BufferOp] = field(default_factory=list)  # in body order (slot order)


def _segments(sizes: tuple[int, ...]) -> DenseArrayBase:
    seg = SEGMENTS.get(sizes)
    if seg is None:
        seg = SEGMENTS[sizes] = DenseArrayBase.from_list(i32, sizes)
    return seg


def _file_line_col(file: StringAttr, line: IntAttr, col: IntAttr) -> FileLineColLoc:
    """`FileLineColLoc(file, line, col)` without xDSL's parameter verification,
    which only checks the parameter types given here by construction (a
    StringAttr and two IntAttrs), and which cost most of the time spent on
    debug locations (one per op)."""
    loc = _NEW_LOC(FileLineColLoc)
    _SET(loc, "filename", file)
    _SET(loc, "line", line)
    _SET(loc, "column", col)
    return loc


_NEW_LOC = FileLineColLoc.__new__
_SET = object.__setattr__  # the frozen dataclass's fields, as ParametrizedAttribute.new sets them
assert [f for f, _ in FileLineColLoc.get_irdl_definition().parameters] == \
    ["filename", "line", "column"], "xDSL changed FileLineColLoc's parameters"


def _create(cls: type[_Op], operands: Sequence[SSAValue] = (), result_types: Sequence[Attribute] = (),
            properties: dict[str, Attribute] | None = None, regions: Sequence[Region] = ()) -> _Op:
    """`cls.create(...)` for the reader's ops, which have no attributes or
    successors and take ownership of `properties`: the same object state as
    xDSL's `Operation.__init__` (operand uses, results, the IRDL definition's
    default properties and attributes) without its generic wrappers, which
    cost most of the IR construction time."""
    op = _NEW_OP(cls)
    uses = tuple(Use(op, i) for i in range(len(operands)))
    for value, use in zip(operands, uses):
        value.add_use(use)
    op._operands = SSAValues(operands)  # noqa: SLF001 - Operation.__init__'s fields
    op._operand_uses = uses  # noqa: SLF001
    op.results = SSAValues(OpResult(t, op, i) for i, t in enumerate(result_types))
    props = {} if properties is None else properties
    op.properties = props
    op.attributes = {}
    op.location = UNKNOWN_LOC
    op._successors = ()  # noqa: SLF001
    op._successor_uses = ()  # noqa: SLF001
    op.regions = ()
    for region in regions:
        op.add_region(region)
    prop_defaults, attr_defaults = _defaults(cls)
    for name, default in prop_defaults:
        if name not in props:
            props[name] = default
    for name, default in attr_defaults:
        op.attributes[name] = default
    return op


@cache
def _defaults(cls: type[IRDLOperation]) -> tuple[tuple[tuple[str, Attribute], ...], ...]:
    """The default properties and attributes IRDLOperation.__post_init__ fills in."""
    d = cls.get_irdl_definition()
    return tuple(tuple((name, a.default_value) for name, a in defs.items()
                       if not isinstance(a, OptionalDef) and a.default_value is not None)
                 for defs in (d.properties, d.attributes))


_NEW_OP = object.__new__
_Op = TypeVar("_Op", bound=IRDLOperation)


LET_VALUE_KINDS = (ArgRefAttr, ArrayAttr, StringAttr, FloatAttr)
TOKU = 4  # an unnamed token: it cannot be referenced (the text form names every referenced token)


class _BodyReader(TableReader):
    # -- debug locations ----------------------------------------------------------
    def read_locs(self, debug, count: int) -> None:
        stream = debug.LocsAsNumpy() if debug.LocsLength() else np.zeros(0, np.uint8)
        base = self._vec_pos(debug, 4)
        vals, offs = decode_varints(stream, base)
        locs: list[FileLineColLoc | None] = []
        ints: dict[int, IntAttr] = {}
        files: dict[int, StringAttr] = {}
        i, line, f = 0, 0, 0
        try:
            while len(locs) < count:
                h = vals[i]
                i += 1
                line += unzigzag(h >> 1)
                if h & 1:
                    f = vals[i]
                    i += 1
                    if f and f not in files:
                        files[f] = StringAttr(self.string(f, offs[i - 1], "source file"))
                col = vals[i]
                i += 1
                if f == 0:
                    locs.append(None)
                    continue
                if line < 1 or col < 1:
                    raise BytecodeError(offs[i - 1], f"source location line {line} column {col}")
                li = ints.get(line) or ints.setdefault(line, IntAttr(line))
                ci = ints.get(col) or ints.setdefault(col, IntAttr(col))
                locs.append(_file_line_col(files[f], li, ci))
        except IndexError:
            raise BytecodeError(base + stream.size, f"debug section has {len(locs)} locations, "
                                f"the code {count}") from None
        if i != len(vals):
            raise BytecodeError(offs[i], "debug section has more locations than instructions")
        self.locs = locs

    # -- instructions ---------------------------------------------------------------
    def decode_body(self, code) -> None:
        """The body's varints, all at once."""
        stream = code.BodyAsNumpy() if code.BodyLength() else np.zeros(0, np.uint8)
        base = self._vec_pos(code, 12)
        self.body = decode_varints(stream, base)
        self.end = base + stream.size
        self.body_base = base

    def read_body(self, code) -> Block:
        self.v, self.o = self.body
        base = self.body_base
        self.i = 0
        self.op_count = code.OpCount()
        self.loc_base = 1  # debug entry 0 is the program
        block = Block()
        try:
            self.block_into(block)
        except IndexError:
            raise BytecodeError(self.end, f"the body stream ends inside instruction "
                                f"{self.n_ops}") from None
        if self.i != len(self.v):
            raise BytecodeError(self.o[self.i], "values after the program's last instruction")
        if self.n_ops != self.op_count:
            raise BytecodeError(base, f"Code says {self.op_count} instructions, the body has "
                                f"{self.n_ops}")
        return block

    def ref(self, kind: int, at: int, what: str) -> int:
        """A value reference: 2*d = d places back, 2*a+1 = a-th from the bottom."""
        r = self.v[self.i]
        self.i += 1
        n = len(self.stack)
        k = r >> 1 if r & 1 else n - 1 - (r >> 1)
        if not 0 <= k < n:
            raise BytecodeError(at, f"{what}: value reference {r} is outside the {n} values "
                                "in scope")
        have = self.kinds[k]
        if have != kind:
            if have == TOKU and kind == TOK:
                raise BytecodeError(at, f"{what}: refers to an unnamed token")
            raise BytecodeError(at, f"{what}: expected {KIND_WORDS[kind]}, found "
                                f"{KIND_WORDS.get(have, 'a token')}")
        return k

    def body_name(self, at: int, what: str) -> str:
        """A name in the body: 0, or 1 + zigzag(delta to the previous name's index)."""
        u = self.u()
        if u == 0:
            return self.name(0, at, what)
        self.last_name += unzigzag(u - 1)
        return self.name(self.last_name, at, what)

    def refs(self, kind: int, at: int, what: str) -> list[int]:
        n = self.u()
        return [self.ref(kind, at, what) for _ in range(min(n, len(self.v)))]

    def push(self, value, kind: int, static: int | None = None) -> None:
        self.stack.append(value)
        self.kinds.append(kind)
        self.static.append(static)

    def decos(self, at: int, what: str) -> ArrayAttr | None:
        a = self.opt_aref(at, ArrayAttr, what)
        if a is not None and (not a.data or not all(isinstance(d, DecoratorAttr) for d in a.data)):
            raise BytecodeError(at, f"{what}: not a list of decorators")
        return a

    def block_into(self, block: Block) -> None:
        n = self.u()
        ops = []
        for _ in range(min(n, len(self.v))):
            ops.append(self.inst())
        if len(ops) != n:
            raise BytecodeError(self.end, f"a block says {n} instructions, the stream holds fewer")
        block.add_ops(ops)

    def inst(self):
        at = self.o[self.i]
        code = self.u()
        loc = self.locs[self.n_ops + self.loc_base] if self.locs is not None else None
        self.n_ops += 1
        if code == fb.Inst.Int:
            v = self.s()
            if v < 0:
                raise BytecodeError(at, f"integer literal {v} is negative (NEM has no negative "
                                    "literals: write 0 - x) [LEX-06]")
            op = _create(arith.ConstantOp, properties={"value": self._int(v)},
                                         result_types=[INDEX])
            self.push(op.results[0], IDX, v)
        elif code in INST_BINOP:
            sym = INST_BINOP[code]
            a, b = self.ref(IDX, at, sym), self.ref(IDX, at, sym)
            sa, sb = self.static[a], self.static[b]
            value = None
            if sa is not None and sb is not None:
                try:
                    value = apply_binop(sym, sa, sb)
                except ExprError as e:
                    raise BytecodeError(at, f"{e} in a constant expression [CONST-05]") from None
            op = _create(BINOPS[sym], operands=[self.stack[a], self.stack[b]], result_types=[INDEX])
            self.push(op.results[0], IDX, value)
        elif code == fb.Inst.Const:
            name = self.body_name(at, "const")
            k = self.ref(IDX, at, f"const {name}")
            op = _create(ConstOp, operands=[self.stack[k]], result_types=[INDEX],
                                properties={"name": StringAttr(name)})
            op.results[0].name_hint = _hint(name)
            self.push(op.results[0], IDX, self.static[k])
        elif code == fb.Inst.Let:
            op = self._let(at)
        elif code == fb.Inst.Buffer:
            op = self._buffer(at)
        elif code == fb.Inst.Region:
            op = self._region(at)
        elif code == fb.Inst.Loop:
            op = self._loop(at, loc)
        elif code in (fb.Inst.Transfer, fb.Inst.Store):
            op = self._move(at, TransferOp if code == fb.Inst.Transfer else StoreOp)
        elif code == fb.Inst.Wait:
            decos = self.decos(at, "wait decorators")
            toks = self.refs(TOK, at, "wait")
            if not toks:
                raise BytecodeError(at, "wait needs at least one token [GRAM-13]")
            op = _create(WaitOp, operands=[self.stack[k] for k in toks],
                               properties={"decorators": decos} if decos else {})
        elif code == fb.Inst.Compute:
            op = self._compute(at)
        else:
            raise BytecodeError(at, f"unknown instruction code {code}")
        if loc is not None:
            op.location = loc
        return op

    def _int(self, v: int) -> IntegerAttr:
        cache = self.__dict__.setdefault("_ints", {})
        a = cache.get(v)
        if a is None:
            a = cache[v] = IntegerAttr(v, INDEX)
        return a

    def _arg_order(self, value: Attribute, nargs: int, at: int, what: str) -> None:
        """ArgRefs must name args 0..n-1 once each, in order (as the parser makes them)."""
        seen: list[int] = []

        def walk(a) -> None:
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
            raise BytecodeError(at, f"{what}: argument references {seen} do not name its "
                                f"{nargs} integer arguments in order")

    def _let(self, at: int) -> LetOp:
        name = self.body_name(at, "let")
        value = self.aref(at, None, f"let {name}")
        args = self.refs(IDX, at, f"let {name}")
        has_result = self.u()
        self._let_value(value, at, name)
        self._arg_order(value, len(args), at, f"let {name}")
        is_int = isinstance(value, ArgRefAttr)
        if has_result != int(is_int):
            raise BytecodeError(at, f"let {name}: an integer let has a result, any other none")
        op = _create(LetOp, operands=[self.stack[k] for k in args],
                          result_types=[INDEX] if is_int else [],
                          properties={"name": StringAttr(name), "value": value})
        if is_int:
            op.results[0].name_hint = _hint(name)
            self.push(op.results[0], IDX, self.static[args[0]])
        return op

    def _let_value(self, a: Attribute, at: int, name: str) -> None:
        if isinstance(a, ArrayAttr):
            for x in a.data:
                self._let_value(x, at, name)
        elif not isinstance(a, LET_VALUE_KINDS) and a not in ELEM_BY_CODE.values():
            raise BytecodeError(at, f"let {name}: {type(a).__name__} is not a let value")

    def _buffer(self, at: int) -> BufferOp:
        name = self.body_name(at, "buffer")
        btype = self.aref(at, BufferType, f"buffer {name}")
        k = self.ref(IDX, at, f"buffer {name} size")
        align = self.u()
        decos = self.decos(at, f"buffer {name} decorators")
        props = {"name": StringAttr(name)}
        if align:
            props["align"] = IntegerAttr(align - 1, INDEX)
        if decos:
            props["decorators"] = decos
        op = _create(BufferOp, operands=[self.stack[k]], result_types=[btype], properties=props)
        op.results[0].name_hint = _hint(name)
        self.push(op.results[0], BUF)
        self.buffers.append(op)
        self.buffer_sizes.append(self.static[k])
        return op

    def _region(self, at: int) -> RegionOp:
        binding = self.u()
        if binding >= len(REGION_BINDINGS):
            raise BytecodeError(at, f"region binding {binding} is not one of 0..2")
        bname = REGION_BINDINGS[binding]
        name = None if bname == "inline" else self.body_name(at, "region")
        what = f"region {name}" if name else "inline region"
        base = self.aref(at, RegionTypeBase, what)
        b = self.ref(BUF, at, f"{what} buffer")
        off, ext = self.ref(IDX, at, f"{what} offset"), self.ref(IDX, at, f"{what} extent")
        shape = [self.ref(IDX, at, f"{what} shape") for _ in range(base.rank)]
        strides = [self.ref(IDX, at, f"{what} strides") for _ in range(base.nstrides or 0)]
        decos = self.decos(at, f"{what} decorators")
        if bname == "inline" and decos:
            raise BytecodeError(at, "an inline region takes no decorators")
        buf = self.stack[b]
        if buf.type.level != base.level:
            raise BytecodeError(at, f"{what} is at {base.level.data} but its buffer at "
                                f"{buf.type.level.data}")
        rtype = self._region_type(base, shape, strides)
        props = {"name": StringAttr(name)} if name else {}
        props["binding"] = StringAttr(bname)
        if decos:
            props["decorators"] = decos
        props["operandSegmentSizes"] = _segments((1, 1, 1, len(shape), len(strides)))
        op = _create(RegionOp, operands=[buf, self.stack[off], self.stack[ext],
                                       *(self.stack[k] for k in shape),
                                       *(self.stack[k] for k in strides)],
                             result_types=[rtype], properties=props)
        if name:
            op.results[0].name_hint = _hint(name)
        self.push(op.results[0], REG)
        return op

    def _region_type(self, base: RegionTypeBase, shape: list[int], strides: list[int]
                     ) -> RegionType:
        st = self.static
        sh = tuple(DYNAMIC if st[k] is None else st[k] for k in shape)
        sd = tuple(DYNAMIC if st[k] is None else st[k] for k in strides) if base.elem else None
        key = (base, sh, sd)
        t = self.region_types.get(key)
        if t is None:
            if base.elem is None:
                t = RegionType(base.level)
            else:
                t = RegionType(base.level, base.elem, sh, base.layout,
                               sd if base.layout is None else None, base.quant)
            self.region_types[key] = t
        return t

    def _loop(self, at: int, loc) -> LoopOp:
        iv = self.body_name(at, "loop variable")
        lo, hi = self.ref(IDX, at, "loop lower bound"), self.ref(IDX, at, "loop upper bound")
        decos = self.decos(at, "loop decorators")
        body = Block(arg_types=[INDEX])
        mark = len(self.stack)
        self.push(body.args[0], IDX)
        self.loop_depth += 1
        if self.loop_depth > MAX_LOOP_DEPTH:
            raise BytecodeError(at, f"loops nested deeper than {MAX_LOOP_DEPTH}")
        self.block_into(body)
        self.loop_depth -= 1
        del self.stack[mark:], self.kinds[mark:], self.static[mark:]
        props = {"iv_name": StringAttr(iv)}
        if decos:
            props["decorators"] = decos
        op = _create(LoopOp, operands=[self.stack[lo], self.stack[hi]], regions=[Region(body)],
                           properties=props)
        body.args[0].name_hint = _hint(iv)
        return op

    def _task_head(self, at: int, max_flag: int) -> tuple[int, str | None, ArrayAttr | None]:
        flags = self.u()
        if flags > max_flag:
            raise BytecodeError(at, f"task flags {flags:#x} set unknown bits")
        token = self.body_name(at, "token") if flags & 2 else None
        decos = self.decos(at, "task decorators")
        return flags, token, decos

    def _task_props(self, flags: int, token: str | None, decos) -> dict[str, Attribute]:
        props: dict[str, Attribute] = {}
        if token:
            props["token"] = StringAttr(token)
        if flags & 1:
            props["sync"] = UnitAttr()
        if decos:
            props["decorators"] = decos
        return props

    def _finish_task(self, op, token: str | None):
        if token:
            op.results[0].name_hint = _hint(token)
        self.push(op.results[0], TOK if token else TOKU)
        return op

    def _move(self, at: int, cls):
        flags, token, decos = self._task_head(at, 7)
        dst, src = self.ref(REG, at, "dst"), self.ref(REG, at, "src")
        deps = self.refs(TOK, at, "deps")
        props = self._task_props(flags, token, decos)
        if flags & 4:
            props["operand_decorators"] = self._operand_decos(at, 2, cls.name)
        props["operandSegmentSizes"] = _segments((1, 1, len(deps)))
        op = _create(cls, operands=[self.stack[dst], self.stack[src], *(self.stack[k] for k in deps)],
                        result_types=[TOKEN], properties=props)
        return self._finish_task(op, token)

    def _operand_decos(self, at: int, count: int, what: str) -> ArrayAttr:
        """Operand decorators: one list per region operand, at least one decorator."""
        od = self.aref(at, ArrayAttr, f"{what} operand decorators")
        if len(od.data) != count or not all(
                isinstance(x, ArrayAttr) and all(isinstance(d, DecoratorAttr) for d in x.data)
                for x in od.data) or not any(x.data for x in od.data):
            raise BytecodeError(at, f"{what}: operand decorators need one list per "
                                "operand, and at least one decorator")
        return od

    def _compute(self, at: int):
        number = self.u()
        spec = opcode_by_code().get(number)
        if spec is None:
            raise BytecodeError(at, f"unknown opcode number {number}: not in this reader's "
                                "opcode registry (a newer producer?)")
        flags, token, decos = self._task_head(at, 7)
        ins = self.refs(REG, at, f"{spec.name} inputs")
        outs = self.refs(REG, at, f"{spec.name} outputs")
        deps = self.refs(TOK, at, f"{spec.name} deps")
        args = self.refs(IDX, at, f"{spec.name} arguments")
        attrs = self.aref(at, DictionaryAttr, f"{spec.name} attributes")
        if not ins or not outs:
            raise BytecodeError(at, f"{spec.name}: a compute task has inputs and outputs [GRAM-14]")
        keys = list(attrs.data)
        if keys != spec.canonical_attr_order(keys) or "deps" in attrs.data:
            raise BytecodeError(at, f"{spec.name}: attributes {keys} are not in canonical order")
        self._arg_order(attrs, len(args), at, spec.name)
        props = self._task_props(flags, token, decos)
        if flags & 4:
            props["operand_decorators"] = self._operand_decos(at, len(ins) + len(outs), spec.name)
        props["attrs"] = attrs
        props["operandSegmentSizes"] = _segments((len(ins), len(outs), len(deps), len(args)))
        st = self.stack
        op = _create(
            COMPUTE_OPS[spec.name],
            operands=[*(st[k] for k in ins), *(st[k] for k in outs), *(st[k] for k in deps),
                      *(st[k] for k in args)], result_types=[TOKEN], properties=props)
        return self._finish_task(op, token)


INDEX = IndexType()
TOKEN = TokenType()


def read_nemb(data: bytes, file: str = "<nemb>", timings: dict[str, float] | None = None
              ) -> LoadedBytecode:
    """Decode a `.nemb` file into NEM IR; `BytecodeError` on any malformed byte.
    The static rules are not applied here (see `loader.load_nemb`).  With
    `timings`, the seconds spent decoding (header, checksum, sections, varint
    streams, tables) and building IR are added to its "decode" / "build".

    The cyclic garbage collector is paused meanwhile, as in `parse_nem`: the
    reader allocates only long-lived IR."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _read(data, file, timings if timings is not None else {})
    finally:
        if enabled:
            gc.enable()


def _read(data: bytes, file: str, timings: dict[str, float]) -> LoadedBytecode:
    t0 = time.perf_counter()
    header = read_header(data)
    secs = sections(data)
    known = {s.kind: s for s in secs if s.body is not None}
    unknown = [(s.kind, s.required) for s in secs if s.body is None]
    for s in secs:
        if s.body is None and s.required:
            raise BytecodeError(s.pos, f"section kind {s.kind} is required but unknown to this "
                                f"reader (file format {header.major}.{header.minor})")
    for kind in REQUIRED_KINDS:
        if kind not in known:
            raise BytecodeError(HEADER_SIZE, f"the {SECTION_NAMES[kind]} section is missing")
    r = _BodyReader(data, file)
    r.read_strings(known[fb.SectionBody.Strings].body)
    code = known[fb.SectionBody.Code].body
    r.read_attributes(code)
    r.decode_body(code)
    t1 = time.perf_counter()
    if fb.SectionBody.Debug in known:
        r.read_locs(known[fb.SectionBody.Debug].body, code.OpCount() + 1)
    block = r.read_body(code)
    prog = small_sections.program_op(known[fb.SectionBody.ProgramInfo].body, block, r)
    t2 = time.perf_counter()
    module = ModuleOp.create(regions=[Region(Block())])
    module.body.block.add_op(prog)
    reqs = small_sections.requirements(known[fb.SectionBody.Requirements].body) \
        if fb.SectionBody.Requirements in known else None
    slots = small_sections.slots(known[fb.SectionBody.Relocations].body, r) \
        if fb.SectionBody.Relocations in known else None
    data_segs = small_sections.data(known[fb.SectionBody.Data].body, r) if fb.SectionBody.Data in known else []
    build = small_sections.build_info(known[fb.SectionBody.BuildInfo].body) \
        if fb.SectionBody.BuildInfo in known else {}
    sizes = [(SECTION_NAMES.get(s.kind, f"kind {s.kind}"), s.required, small_sections.section_size(s))
             for s in secs]
    t3 = time.perf_counter()
    timings["decode"] = timings.get("decode", 0.0) + (t1 - t0) + (t3 - t2)
    timings["build"] = timings.get("build", 0.0) + (t2 - t1)
    return LoadedBytecode(module, prog, header, build, reqs, slots, data_segs, r.stripped,
                          sizes, unknown, r.buffers)


