"""NEM IR -> `.nemb` bytes (docs/bytecode.md).

The writer walks the IR once, in block order, and emits the Code section's
two varint streams (attribute table, instructions), the string table, the
debug locations, and the derived sections (requirements, relocations).
Deterministic: tables are numbered in first-use order and nothing depends
on time, paths or hashing, so equal IR gives byte-identical files.

Everything the IR holds is written or refused with a "not supported"
error; nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata

import flatbuffers
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FileLineColLoc,
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from nem.dialect.attributes import (
    DYNAMIC,
    ArgRefAttr,
    BufferType,
    DebugAttr,
    DecoratorAttr,
    MaxInFlightAttr,
    MemLevelAttr,
    PerChannelQuantAttr,
    PerGroupQuantAttr,
    PerTensorQuantAttr,
    ProfileAttr,
    RegionType,
    ResourceAttr,
    SeqEngineAttr,
    elem_name,
)
from nem.dialect.diagnostics import split_origin
from nem.dialect.expressions import SYMBOL_OF, Evaluator, ExprError
from nem.dialect.ops import (
    REGION_BINDINGS,
    BufferOp,
    ComputeOp,
    ConstOp,
    LetOp,
    LoopOp,
    ProgramOp,
    RegionOp,
    StoreOp,
    TaskOp,
    TransferOp,
    WaitOp,
)
from nem.frontends.bytecode import nem_bytecode_generated as fb
from nem.frontends.bytecode.container import (
    FORMAT_MAJOR,
    VarintWriter,
    seal,
    zigzag,
)
from nem.frontends.bytecode.reader import MAX_LOOP_DEPTH
from nem.frontends.bytecode.requirements import (
    Requirements,
    Slot,
    requirements_of,
    slots_of,
)

BINOP_INST = {
    "+": fb.Inst.Add,
    "-": fb.Inst.Sub,
    "*": fb.Inst.Mul,
    "/": fb.Inst.Div,
    "mod": fb.Inst.Mod,
}
LEVEL_KIND = {"DDR": fb.LevelKind.DDR, "L2": fb.LevelKind.L2, "L1": fb.LevelKind.L1}
DEVICE_KIND = {
    None: fb.DeviceKind.None_,
    "file": fb.DeviceKind.File,
    "name": fb.DeviceKind.Name,
    "inline": fb.DeviceKind.Inline,
}
PRODUCER = "nem-toolchain"

# Properties each op kind may carry; anything else is refused (never dropped).
_PROPS = {
    ConstOp: {"name"},
    LetOp: {"name", "value"},
    BufferOp: {"name", "align", "decorators"},
    RegionOp: {"name", "binding", "decorators", "operandSegmentSizes"},
    LoopOp: {"iv_name", "decorators"},
    TransferOp: {"token", "sync", "decorators", "operand_decorators", "operandSegmentSizes"},
    StoreOp: {"token", "sync", "decorators", "operand_decorators", "operandSegmentSizes"},
    WaitOp: {"decorators"},
}
_COMPUTE_PROPS = {
    "token",
    "sync",
    "decorators",
    "operand_decorators",
    "attrs",
    "operandSegmentSizes",
}


class NotEncodable(ValueError):
    """The IR holds something the format cannot carry ("not supported: ...")."""


@dataclass
class Embedded:
    """Initial contents of one buffer: `data` written at byte `offset`."""

    buffer: str
    data: bytes
    offset: int = 0


@dataclass
class WriteOptions:
    strip_names: bool = False
    strip_debug: bool = False
    embed: list[Embedded] = field(default_factory=list)
    build: dict[str, str] = field(default_factory=dict)  # extra BuildInfo entries
    foreign: list[tuple[int, bool, bytes]] = field(default_factory=list)
    """Sections of kinds this writer does not know, (kind, required, bytes): what
    a newer producer would add; tests use them to check forward compatibility."""
    self_file: str | None = None
    """The file being written, when locations name it (`nem-compile -o
    FILE.nemb`, D-COMPILE-NEMB-LOC): they are written with the empty file
    name, which a reader takes for the file it reads, so the bytes do not
    depend on where they are written (docs/bytecode.md, 9. Debug)."""


def producer_version() -> str:
    try:
        return metadata.version("nem-toolchain")
    except metadata.PackageNotFoundError:
        return "unknown"


class _Writer:
    def __init__(self, options: WriteOptions):
        self.opt = options
        self.minor = 0  # the lowest minor version that holds what was encoded
        self.strings: dict[str, int] = {}
        self.attrs: dict[Attribute, int] = {}
        self.attr_out = VarintWriter()
        self.floats: list[float] = []
        self.body = VarintWriter()
        self.locs = VarintWriter()
        self.origins = VarintWriter()
        self.origin_ids: dict[Attribute, int] = {}
        """Each origin's string index: printing a location is slow (xDSL's
        printer, a character at a time), and a node's origin is shared by
        every instruction lowered from it (DenseNet-121: 4 s of 13)."""
        self.any_origin = False
        self.op_count = 0
        self.pos: dict[SSAValue, int] = {}
        self.stack: list[SSAValue] = []
        self.ev = Evaluator()
        self._line = 0
        self._file: int | None = None
        self.last_name = 0
        self.loop_depth = 0

    # -- tables ----------------------------------------------------------------
    def string(self, text: str) -> int:
        idx = self.strings.get(text)
        if idx is None:
            idx = self.strings[text] = len(self.strings) + 1
        return idx

    def name(self, text: str | None) -> int:
        """A user-visible name: 0 when stripped or absent."""
        return 0 if text is None or self.opt.strip_names else self.string(text)

    def attr(self, a: Attribute) -> int:
        idx = self.attrs.get(a)
        if idx is not None:
            return idx
        out = VarintWriter()
        self._encode_attr(a, out)  # children are interned (and numbered) first
        idx = self.attrs[a] = len(self.attrs)
        self.attr_out.out += out.out
        return idx

    def opt_attr(self, a: Attribute | None) -> int:
        return 0 if a is None else self.attr(a) + 1

    def _encode_attr(self, a: Attribute, out: VarintWriter) -> None:
        K = fb.AttrKind
        if isinstance(a, StringAttr):
            out.u(K.String)
            out.u(self.string(a.data))
        elif isinstance(a, IntegerAttr) and a.type == i64:
            out.u(K.Int)
            out.s(a.value.data)
        elif isinstance(a, FloatAttr) and a.type.bitwidth == 64:
            out.u(K.Float)
            out.u(len(self.floats))
            self.floats.append(float(a.value.data))
        elif isinstance(a, ArrayAttr):
            kids = [self.attr(x) for x in a.data]
            out.u(K.Array)
            out.u(len(kids))
            for k in kids:
                out.u(k)
        elif isinstance(a, DictionaryAttr):
            items = [(self.string(k), self.attr(v)) for k, v in a.data.items()]
            out.u(K.Dict)
            out.u(len(items))
            for k, v in items:
                out.u(k)
                out.u(v)
        elif isinstance(a, ArgRefAttr):
            out.u(K.ArgRef)
            out.u(a.index.data)
        elif isinstance(a, MemLevelAttr):
            if a.kind not in LEVEL_KIND:
                raise NotEncodable(f"not supported: memory level {a.data}")
            out.u(K.Level)
            out.u(LEVEL_KIND[a.kind])
            out.u(0 if a.engine is None else a.engine + 1)
        elif isinstance(a, DecoratorAttr):
            self._decorator(a, out)
        elif isinstance(a, PerTensorQuantAttr):
            s, z = self.attr(a.scale), self.attr(a.zero_point)
            out.u(K.PerTensor)
            out.u(s)
            out.u(z)
        elif isinstance(a, PerChannelQuantAttr):
            s, z = self.attr(a.scales), self.attr(a.zero_points)
            out.u(K.PerChannel)
            out.s(a.axis.data)
            out.u(s)
            out.u(z)
        elif isinstance(a, PerGroupQuantAttr):
            s, z = self.attr(a.scales), self.attr(a.zero_points)
            out.u(K.PerGroup)
            out.s(a.axis.data)
            out.s(a.group_size.data)
            out.u(s)
            out.u(z)
        elif isinstance(a, BufferType):
            lvl = self.attr(a.level)
            out.u(K.BufferType)
            out.u(lvl)
        elif isinstance(a, RegionType):
            self._region_type(a, out)
        elif (elem := elem_name(a)) is not None:
            out.u(K.Elem)
            out.u(getattr(fb.ElemType, elem))
        else:
            raise NotEncodable(f"not supported: attribute {a} in NEM bytecode")

    def _decorator(self, d: DecoratorAttr, out: VarintWriter) -> None:
        kind = getattr(fb.DecoKind, d.DECO_NAME, None)
        if kind is None:
            raise NotEncodable(f"not supported: decorator @{d.DECO_NAME}")
        out.u(fb.AttrKind.Decorator)
        out.u(kind)
        if isinstance(d, MaxInFlightAttr):
            out.s(d.n.data)
        elif isinstance(d, SeqEngineAttr):
            out.s(d.engine.data)
        elif isinstance(d, ResourceAttr):
            out.u(self.string(d.unit.data))
            out.s(d.index.data)
        elif isinstance(d, DebugAttr | ProfileAttr):
            out.u(self.string(d.tag.data))
            out.u(d.quoted.data)

    def _region_type(self, t: RegionType, out: VarintWriter) -> None:
        """Level, elem, rank, layout or stride count, quant: the shape and
        stride values are recomputed from the region's operands on load."""
        lvl = self.attr(t.level)
        if not t.typed:
            out.u(fb.AttrKind.RegionType)
            out.u(lvl)
            out.u(0)
            return
        name = elem_name(t.elem)
        shape, strides, layout = t.shape_values, t.stride_values, t.layout_name
        if name is None or shape is None or (layout is None) == (strides is None):
            raise NotEncodable(f"not supported: region type {t}")
        quant = self.opt_attr(t.quant_desc)
        out.u(fb.AttrKind.RegionType)
        out.u(lvl)
        out.u(getattr(fb.ElemType, name))
        out.u(len(shape))
        if layout is not None:
            out.u(self.string(layout))
        else:
            assert strides is not None  # exactly one of layout and strides (checked above)
            out.u(0)
            out.u(len(strides))
        out.u(quant)

    # -- values ------------------------------------------------------------------
    def define(self, v: SSAValue) -> None:
        self.pos[v] = len(self.stack)
        self.stack.append(v)

    def ref(self, v: SSAValue) -> int:
        """2*d for the value d places back on the stack of values in scope, or
        2*a+1 for the a-th from its bottom, whichever is smaller: recent
        values and the program's own (consts, buffers) both take one byte."""
        p = self.pos.get(v)
        if p is None:
            raise NotEncodable(
                "not supported: a value used outside the block that defines it, "
                "or before its definition"
            )
        d = len(self.stack) - 1 - p
        return 2 * d if d <= p else 2 * p + 1

    def put_name(self, text: str | None) -> None:
        """A name in the body: 0 = none, else 1 + zigzag(string index minus the
        previous name's): names are interned in first-use order, so a new
        name is usually the next string (one byte)."""
        idx = self.name(text)
        if idx == 0:
            self.body.u(0)
            return
        self.body.u(zigzag(idx - self.last_name) + 1)
        self.last_name = idx

    # -- instructions ------------------------------------------------------------
    def block(self, block: Block) -> None:
        ops = [op for op in block.ops]
        self.body.u(len(ops))
        for op in ops:
            self.op(op)

    def op(self, op: Operation) -> None:
        self.op_count += 1
        self.loc(op)
        b = self.body
        if op.attributes:
            raise NotEncodable(
                f"not supported: discardable attributes on {op.name}: {', '.join(op.attributes)}"
            )
        if isinstance(op, arith.ConstantOp):
            if not isinstance(op.value, IntegerAttr) or not isinstance(op.result.type, IndexType):
                raise NotEncodable(f"not supported: {op.name} of type {op.result.type}")
            b.u(fb.Inst.Int)
            b.s(op.value.value.data)
        elif isinstance(op, arith.SignlessIntegerBinaryOperation) and type(op) in SYMBOL_OF:
            if not isinstance(op.result.type, IndexType):
                raise NotEncodable(f"not supported: {op.name} on {op.result.type}")
            b.u(BINOP_INST[SYMBOL_OF[type(op)]])
            b.u(self.ref(op.lhs))
            b.u(self.ref(op.rhs))
        elif isinstance(op, ComputeOp):
            self._props(op, _COMPUTE_PROPS)
            self.compute(op)
        else:
            allowed = _PROPS.get(type(op))
            if allowed is None:
                raise NotEncodable(f"not supported: {op.name} cannot be written as NEM bytecode")
            self._props(op, allowed)
            self.statement(op)
        for r in op.results:
            self.define(r)

    @staticmethod
    def _props(op: Operation, allowed: set[str]) -> None:
        extra = set(op.properties) - allowed
        if extra:
            raise NotEncodable(f"not supported: properties {sorted(extra)} on {op.name}")

    def statement(self, op: Operation) -> None:
        b = self.body
        if isinstance(op, ConstOp):
            b.u(fb.Inst.Const)
            self.put_name(op.const_name.data)
            b.u(self.ref(op.value))
        elif isinstance(op, LetOp):
            b.u(fb.Inst.Let)
            self.put_name(op.let_name.data)
            b.u(self.attr(op.value))
            b.u(len(op.args))
            for a in op.args:
                b.u(self.ref(a))
            b.u(0 if op.result is None else 1)
        elif isinstance(op, BufferOp):
            align = op.align.value.data if op.align is not None else None
            if align is not None and align < 0:
                raise NotEncodable(f"not supported: negative align {align}")
            b.u(fb.Inst.Buffer)
            self.put_name(op.buffer_name.data)
            b.u(self.attr(op.result.type))
            b.u(self.ref(op.size))
            b.u(0 if align is None else align + 1)
            b.u(self.opt_attr(op.decorators))
        elif isinstance(op, RegionOp):
            self.region(op)
        elif isinstance(op, LoopOp):
            b.u(fb.Inst.Loop)
            self.put_name(op.iv_name.data)
            b.u(self.ref(op.lower))
            b.u(self.ref(op.upper))
            b.u(self.opt_attr(op.decorators))
            mark = len(self.stack)
            self.define(op.block.args[0])
            self.loop_depth += 1
            if self.loop_depth > MAX_LOOP_DEPTH:
                raise NotEncodable(f"not supported: loops nested deeper than {MAX_LOOP_DEPTH}")
            self.block(op.block)
            self.loop_depth -= 1
            for v in self.stack[mark:]:
                del self.pos[v]
            del self.stack[mark:]
        elif isinstance(op, TransferOp | StoreOp):
            b.u(fb.Inst.Transfer if isinstance(op, TransferOp) else fb.Inst.Store)
            self.task_head(op, 4 if op.operand_decorators is not None else 0)
            b.u(self.ref(op.dst))
            b.u(self.ref(op.src))
            self.refs(op.deps)
            if op.operand_decorators is not None:  # D-DECO-BIND: [dst decos, src decos]
                b.u(self.attr(op.operand_decorators))
                self.minor = max(self.minor, 1)  # format 1.1
        elif isinstance(op, WaitOp):
            b.u(fb.Inst.Wait)
            b.u(self.opt_attr(op.decorators))
            self.refs(op.tokens)

    def refs(self, values: Sequence[SSAValue]) -> None:
        self.body.u(len(values))
        for v in values:
            self.body.u(self.ref(v))

    def task_head(self, op: TaskOp, extra_flags: int = 0) -> None:
        token = op.token_name()
        flags = (1 if op.is_sync else 0) | (2 if token is not None else 0) | extra_flags
        self.body.u(flags)
        if token is not None:
            self.put_name(token)
        self.body.u(self.opt_attr(op.properties.get("decorators")))

    def region(self, op: RegionOp) -> None:
        b = self.body
        rtype = op.result.type
        assert isinstance(rtype, RegionType)
        self._check_region_type(op, rtype)
        binding = op.binding.data
        if binding not in REGION_BINDINGS:
            raise NotEncodable(f"not supported: region binding {binding!r}")
        b.u(fb.Inst.Region)
        b.u(REGION_BINDINGS.index(binding))
        if binding != "inline":
            self.put_name(op.region_name.data if op.region_name else None)
        b.u(self.attr(rtype))
        b.u(self.ref(op.buffer))
        b.u(self.ref(op.offset))
        b.u(self.ref(op.extent))
        for v in (*op.shape, *op.strides):
            b.u(self.ref(v))
        b.u(self.opt_attr(op.decorators))

    def _check_region_type(self, op: RegionOp, rtype: RegionType) -> None:
        """The loader recomputes shape and strides from the operands: refuse IR
        whose type says otherwise rather than change it on the way."""

        def folded(vals: Sequence[SSAValue]) -> tuple[int, ...]:
            out = []
            for v in vals:
                try:
                    s = self.ev.static(v)
                except ExprError:
                    s = None
                out.append(DYNAMIC if s is None else s)
            return tuple(out)

        if rtype.typed and (
            folded(op.shape) != rtype.shape_values
            or (rtype.stride_values is not None and folded(op.strides) != rtype.stride_values)
        ):
            raise NotEncodable(
                "not supported: a region type whose shape or strides differ from "
                "the folded values of the region's operands"
            )

    def compute(self, op: ComputeOp) -> None:
        b = self.body
        b.u(fb.Inst.Compute)
        b.u(op.SPEC.code)
        self.task_head(op, 4 if op.operand_decorators is not None else 0)
        self.refs(op.ins)
        self.refs(op.outs)
        self.refs(op.deps)
        self.refs(op.args)
        b.u(self.attr(op.attrs))
        if op.operand_decorators is not None:
            b.u(self.attr(op.operand_decorators))

    # -- debug locations ---------------------------------------------------------
    def loc(self, op: Operation) -> None:
        """Per instruction: zigzag(line delta) << 1 | file-changed, [file], col;
        and in the origins stream the string index of what the instruction
        was compiled from, 0 for nothing (D-BC-NODES): the second location
        of a `fused[FILE:LINE:COL, ORIGIN]` location, which `nem-compile -o
        FILE.nemb` gives each instruction lowered from an ONNX node."""
        if self.opt.strip_debug:
            return
        loc, node = split_origin(op.location)
        origin = 0
        if node is not None:
            origin = self.origin_ids.get(node, 0)
            if not origin:
                origin = self.origin_ids[node] = self.string(str(node))
            self.any_origin = True
            self.minor = max(self.minor, 2)  # format 1.2
        self.origins.u(origin)
        if isinstance(loc, FileLineColLoc):
            name = "" if loc.filename.data == self.opt.self_file else loc.filename.data
            f, line, col = self.string(name), loc.line.data, loc.column.data
        else:
            f, line, col = 0, self._line, 0
        changed = f != self._file
        self.locs.u(zigzag(line - self._line) << 1 | int(changed))
        if changed:
            self.locs.u(f)
            self._file = f
        self.locs.u(col)
        self._line = line


def _vector(builder: flatbuffers.Builder, data: bytes | bytearray) -> int:
    return _aligned_bytes(builder, bytes(data), 4)


def _aligned_bytes(builder: flatbuffers.Builder, data: bytes, alignment: int) -> int:
    builder.StartVector(1, len(data), alignment)
    builder.head = builder.head - len(data)
    builder.Bytes[builder.head : builder.head + len(data)] = data
    offset: int = builder.EndVector()
    return offset


def encode_program(prog: ProgramOp, options: WriteOptions | None = None) -> bytes:
    """The `.nemb` bytes of one program."""
    opt = options or WriteOptions()
    w = _Writer(opt)
    prog_name = w.name(prog.sym_name.data if prog.sym_name else None)
    w.loc(prog)  # debug entry 0: the program's own location
    w.block(prog.block)
    reqs = requirements_of(prog)
    slots = slots_of(prog)
    for s in slots:
        w.name(s.name)
    segments = _segments(opt.embed, slots)
    build = {"format": f"{FORMAT_MAJOR}.{w.minor}", **opt.build}
    return seal(_flatbuffer(w, prog, prog_name, reqs, slots, segments, build), minor=w.minor)


def _segments(embed: list[Embedded], slots: list[Slot]) -> list[tuple[int, int, bytes]]:
    by_name = {s.name: (i, s) for i, s in enumerate(slots)}
    out = []
    for e in embed:
        hit = by_name.get(e.buffer)
        if hit is None:
            raise NotEncodable(
                f"--embed {e.buffer}: no buffer of that name "
                f"(buffers: {', '.join(by_name) or 'none'})"
            )
        i, s = hit
        if s.copies != 1 or s.in_loop:
            raise NotEncodable(
                f"--embed {e.buffer}: the buffer is declared inside a loop; "
                "only buffers declared outside loops take initial contents"
            )
        if e.offset < 0 or e.offset + len(e.data) > s.size:
            raise NotEncodable(
                f"--embed {e.buffer}: {len(e.data)} bytes at offset {e.offset} do "
                f"not fit the buffer ({s.size} bytes) [HAZ-04]"
            )
        out.append((i, e.offset, e.data))
    return sorted(out, key=lambda t: (t[0], t[1]))


def _flatbuffer(
    w: _Writer,
    prog: ProgramOp,
    prog_name: int,
    reqs: Requirements,
    slots: list[Slot],
    segments: list[tuple[int, int, bytes]],
    build: dict[str, str],
) -> bytes:
    import numpy as np

    bld = flatbuffers.Builder(1024 + len(w.body.out) + len(w.attr_out.out))
    sections: list[tuple[int, int, bool]] = []

    def strs(items: list[str]) -> int:
        offs = [bld.CreateString(s) for s in items]
        bld.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            bld.PrependUOffsetTRelative(o)
        vector: int = bld.EndVector()
        return vector

    def tables(offs: list[int]) -> int:
        bld.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            bld.PrependUOffsetTRelative(o)
        vector: int = bld.EndVector()
        return vector

    # BuildInfo (optional)
    kv = []
    for k in sorted(build):
        ko, vo = bld.CreateString(k), bld.CreateString(build[k])
        fb.KeyValueStart(bld), fb.KeyValueAddKey(bld, ko), fb.KeyValueAddValue(bld, vo)
        kv.append(fb.KeyValueEnd(bld))
    producer, version, entries = (
        bld.CreateString(PRODUCER),
        bld.CreateString(producer_version()),
        tables(kv),
    )
    fb.BuildInfoStart(bld)
    fb.BuildInfoAddProducer(bld, producer)
    fb.BuildInfoAddProducerVersion(bld, version)
    fb.BuildInfoAddEntries(bld, entries)
    sections.append((fb.SectionBody.BuildInfo, fb.BuildInfoEnd(bld), False))

    # Strings (required)
    lengths = VarintWriter()
    blob = bytearray()
    for s in w.strings:
        raw = s.encode("utf-8")
        lengths.u(len(raw))
        blob += raw
    lo, bo = _vector(bld, lengths.out), _vector(bld, blob)
    fb.StringsStart(bld)
    fb.StringsAddCount(bld, len(w.strings))
    fb.StringsAddLengths(bld, lo)
    fb.StringsAddBlob(bld, bo)
    fb.StringsAddNamesStripped(bld, w.opt.strip_names)
    sections.append((fb.SectionBody.Strings, fb.StringsEnd(bld), True))

    # ProgramInfo (required)
    kind = prog.device_kind.data if prog.device_kind is not None else None
    if kind not in DEVICE_KIND:
        raise NotEncodable(f"not supported: device kind {kind!r}")
    dev = bld.CreateString(prog.device.data) if prog.device is not None else None
    incs = strs([i.data for i in prog.includes.data] if prog.includes else [])
    fb.ProgramInfoStart(bld)
    fb.ProgramInfoAddName(bld, prog_name)
    fb.ProgramInfoAddDeviceKind(bld, DEVICE_KIND[kind])
    if dev is not None:
        fb.ProgramInfoAddDevice(bld, dev)
    fb.ProgramInfoAddIncludes(bld, incs)
    sections.append((fb.SectionBody.ProgramInfo, fb.ProgramInfoEnd(bld), True))

    # Code (required)
    ao, fo, body = (
        _vector(bld, w.attr_out.out),
        bld.CreateNumpyVector(np.array(w.floats, dtype="<f8")),
        _vector(bld, w.body.out),
    )
    fb.CodeStart(bld)
    fb.CodeAddAttributeCount(bld, len(w.attrs))
    fb.CodeAddAttributes(bld, ao)
    fb.CodeAddFloats(bld, fo)
    fb.CodeAddOpCount(bld, w.op_count)
    fb.CodeAddBody(bld, body)
    sections.append((fb.SectionBody.Code, fb.CodeEnd(bld), True))

    # Requirements and Relocations (optional: derived from Code)
    sections.append((fb.SectionBody.Requirements, _requirements(bld, reqs, strs, tables), False))
    slot_offs = []
    for i, reloc in enumerate(slots):
        lvl = bld.CreateString(reloc.level)
        fb.RelocSlotStart(bld)
        fb.RelocSlotAddValue(bld, i)
        fb.RelocSlotAddName(bld, w.name(reloc.name))
        fb.RelocSlotAddLevel(bld, lvl)
        fb.RelocSlotAddSize(bld, reloc.size)
        fb.RelocSlotAddAlign(bld, reloc.align)
        fb.RelocSlotAddCopies(bld, reloc.copies)
        fb.RelocSlotAddAccess(bld, reloc.access)
        slot_offs.append(fb.RelocSlotEnd(bld))
    so = tables(slot_offs)
    fb.RelocationsStart(bld)
    fb.RelocationsAddSlots(bld, so)
    sections.append((fb.SectionBody.Relocations, fb.RelocationsEnd(bld), False))

    # Data (required when present)
    if segments:
        segs = []
        for slot, offset, data in segments:
            vo = _aligned_bytes(bld, data, 64)
            fb.DataSegmentStart(bld)
            fb.DataSegmentAddSlot(bld, slot)
            fb.DataSegmentAddOffset(bld, offset)
            fb.DataSegmentAddBytes(bld, vo)
            segs.append(fb.DataSegmentEnd(bld))
        go = tables(segs)
        fb.DataStart(bld)
        fb.DataAddSegments(bld, go)
        sections.append((fb.SectionBody.Data, fb.DataEnd(bld), True))

    # Debug (optional)
    if not w.opt.strip_debug:
        lo = _vector(bld, w.locs.out)
        oo = _vector(bld, w.origins.out) if w.any_origin else None
        fb.DebugStart(bld)
        fb.DebugAddLocs(bld, lo)
        if oo is not None:
            fb.DebugAddNodes(bld, oo)
        sections.append((fb.SectionBody.Debug, fb.DebugEnd(bld), False))

    for kind_, required, raw in w.opt.foreign:
        vo = _aligned_bytes(bld, raw, 4)
        bld.StartObject(1)
        bld.PrependUOffsetTRelativeSlot(0, vo, 0)
        sections.append((kind_, bld.EndObject(), required))

    sec_offs = []
    for kind_, off, required in sections:
        fb.SectionStart(bld)
        fb.SectionAddBodyType(bld, kind_)
        fb.SectionAddBody(bld, off)
        fb.SectionAddRequired(bld, required)
        sec_offs.append(fb.SectionEnd(bld))
    vec = tables(sec_offs)
    fb.ModuleStart(bld)
    fb.ModuleAddSections(bld, vec)
    bld.Finish(fb.ModuleEnd(bld), file_identifier=b"NEMB")
    return bytes(bld.Output())


def _requirements(
    bld: flatbuffers.Builder,
    reqs: Requirements,
    strs: Callable[[list[str]], int],
    tables: Callable[[list[int]], int],
) -> int:
    vr = []
    for opcode, any_of in reqs.variants:
        oo, ao = bld.CreateString(opcode), strs(list(any_of))
        fb.VariantRequirementStart(bld)
        fb.VariantRequirementAddOpcode(bld, oo)
        fb.VariantRequirementAddAnyOf(bld, ao)
        vr.append(fb.VariantRequirementEnd(bld))
    lu = []
    for level, nbytes in reqs.memory:
        lo = bld.CreateString(level)
        fb.LevelUseStart(bld)
        fb.LevelUseAddLevel(bld, lo)
        fb.LevelUseAddBytes(bld, nbytes)
        lu.append(fb.LevelUseEnd(bld))
    vo, uo, mo = tables(vr), strs(list(reqs.units)), tables(lu)
    bld.StartVector(2, len(reqs.opcodes), 2)
    for c in reversed(reqs.opcodes):
        bld.PrependUint16(c)
    co = bld.EndVector()
    fb.RequirementsStart(bld)
    fb.RequirementsAddVariants(bld, vo)
    fb.RequirementsAddUnits(bld, uo)
    fb.RequirementsAddMemory(bld, mo)
    fb.RequirementsAddEngines(bld, reqs.engines)
    fb.RequirementsAddOpcodes(bld, co)
    end: int = fb.RequirementsEnd(bld)
    return end


def write_nemb(module: ModuleOp | ProgramOp, options: WriteOptions | None = None) -> bytes:
    """`.nemb` bytes of the one program in `module`."""
    progs = (
        [module]
        if isinstance(module, ProgramOp)
        else [op for op in module.ops if isinstance(op, ProgramOp)]
    )
    if len(progs) != 1:
        raise NotEncodable(
            f"not supported: a .nemb file holds one program, this module has {len(progs)}"
        )
    return encode_program(progs[0], options)


__all__ = ["Embedded", "NotEncodable", "WriteOptions", "encode_program", "write_nemb"]
