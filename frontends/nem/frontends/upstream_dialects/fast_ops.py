"""The statements a tiled program is mostly made of, read without xDSL's
lexer (D-COMPILE-PARSE-FAST).

Upstream prints the transform route's staging in a handful of one-line forms:

    %alloc_4 = memref.alloc() : memref<150528xi8, 2>
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x224x224x3xf32>
    %view = memref.view %alloc_4[%c0][] : memref<150528xi8, 2> to memref<1x3x56x224xf32, 2>
    %subview = memref.subview %arg0[0, %arg5, 0, 0] [1, 3, 56, 224] [1, 1, 1, 1] : memref<...> to memref<...>
    linalg.copy ins(%subview : memref<...>) outs(%view : memref<...>)
    memref.copy %alloc, %subview_44 : memref<...> to memref<...>
    memref.dealloc %alloc_4 : memref<150528xi8, 2>

42k of DenseNet-121's 55k tiled ops, each taking xDSL's lexer a few dozen
tokens.  `fast_operation` matches such a statement's line whole, takes
its types from the parser's memref-type memo and its attribute dictionary
from the parser's dictionary memo, resolves its operands in the parser's
own SSA name table, and builds the op as xDSL's parse of the same text
does (same class, constructor, operands, properties and attributes).  It
returns None, leaving the statement to xDSL, for anything else: another
form, a name or integer outside the plain spellings, a type or dictionary
not parsed before (xDSL's parse of that statement fills the memo), an
operand not defined yet or of another type, a result name taken, a
trailing location or comment.  Every error is thus xDSL's, at xDSL's
position.

Named linalg ops (`linalg.conv_2d_nhwc_hwcf {ATTRS} ins(..) outs(..)`,
`linalg.fill ins(%c : f32) outs(..)`) are read the same way, and so is the
header line of a `linalg.generic {ATTRS} ins(..) outs(..) {`: its body is
then parsed by the parser itself, where xDSL's `GenericOp.parse` parses it
(`_generic`), so the statements inside take the fast path or xDSL's as
anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    StringAttr,
    f16,
    f32,
    i8,
    i32,
    i64,
)
from xdsl.dialects.utils.dynamic_index_list import DYNAMIC_INDEX
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import AttrSizedOperandSegments, IRDLOperation, ParsePropInAttrDict
from xdsl.utils.lexer import Span

if TYPE_CHECKING:
    from xdsl.dialects.linalg.ops import GenericOp

    from nem.frontends.upstream_dialects import LocatingParser

_N = r"%([A-Za-z_0-9]+)"  # a plain SSA name (its text without `%`)
_MEMREF_TEXT = r"memref<(?:[^<>\n]|<[^<>\n]*>)*>"  # a memref type, one level of `<>` inside
_T = rf"({_MEMREF_TEXT})"
_NAMES = r"(%[A-Za-z_0-9]+(?:, %[A-Za-z_0-9]+)*)"
_TYPES = rf"({_MEMREF_TEXT}(?:, {_MEMREF_TEXT})*)"
_HEAD = re.compile(r"(?:%[A-Za-z_0-9]+ = )?([a-z]+\.[a-z_0-9]+)", re.ASCII)
_FORMS = {
    "memref.alloc": re.compile(
        rf"{_N} = memref\.alloc\(\)(?: (\{{[^{{}}\n]*\}}))? : {_T}", re.ASCII
    ),
    "memref.view": re.compile(rf"{_N} = memref\.view {_N}\[{_N}\]\[\] : {_T} to {_T}", re.ASCII),
    "memref.subview": re.compile(
        rf"{_N} = memref\.subview {_N}(\[[^\]\n]*\]) (\[[^\]\n]*\]) "
        rf"(\[[^\]\n]*\]) : {_T} to {_T}",
        re.ASCII,
    ),
    "memref.dealloc": re.compile(rf"memref\.dealloc {_N} : {_T}", re.ASCII),
    "memref.copy": re.compile(rf"memref\.copy {_N}, {_N} : {_T} to {_T}", re.ASCII),
    "linalg.copy": re.compile(rf"linalg\.copy ins\({_N} : {_T}\) outs\({_N} : {_T}\)", re.ASCII),
    "linalg.yield": re.compile(rf"linalg\.yield {_N} : (f32|f16|i8|i32)", re.ASCII),
    # the header of a generic on memrefs; its body is read by the parser
    "linalg.generic": re.compile(
        rf"linalg\.generic (\{{[^{{}}\n]*\}})(?: ins\({_NAMES} : {_TYPES}\))?"
        rf" outs\({_NAMES} : {_TYPES}\) \{{",
        re.ASCII,
    ),
}
_OPERAND_TEXT = rf"(?:{_MEMREF_TEXT}|f32|f16|i8|i32)"
_OPERAND_TYPES = re.compile(_OPERAND_TEXT, re.ASCII)
_NAMED = re.compile(
    rf"linalg\.[a-z_0-9]+(?: (\{{[^{{}}\n]*\}}))?"
    rf" ins\({_NAMES} : ({_OPERAND_TEXT}(?:, {_OPERAND_TEXT})*)\) outs\({_NAMES} : {_TYPES}\)",
    re.ASCII,
)
"""A named linalg op on memrefs (`linalg.conv_2d_nhwc_hwcf {ATTRS} ins(..)
outs(..)`, `linalg.fill ins(%c : f32) outs(..)`), read when its class
parses with `NamedOperation.parse` (`_named`)."""
_Traits = tuple["ArrayAttr[AffineMapAttr]", ArrayAttr]
"""A generic's indexing maps and iterator types."""
_FLOAT_BINARY = {
    "arith.addf": "AddfOp",
    "arith.subf": "SubfOp",
    "arith.mulf": "MulfOp",
    "arith.divf": "DivfOp",
    "arith.maximumf": "MaximumfOp",
    "arith.minimumf": "MinimumfOp",
}
"""The float binary ops of a generic's body, read in their one form
`%r = arith.OP %a, %b : f32` (no fast-math flags), and their xDSL classes."""
_FORMS.update(
    (name, re.compile(rf"{_N} = {re.escape(name)} {_N}, {_N} : (f32|f16)", re.ASCII))
    for name in _FLOAT_BINARY
)
_INDEX = re.compile(r"[0-9]{1,18}|%[A-Za-z_0-9]+", re.ASCII)
_LIST_CACHE_LIMIT = 1 << 16


_MEMREF = re.compile(
    r"memref<((?:[0-9]{1,18}x)+)(f32|f16|i8|i32)"
    r"(?:, strided<\[([0-9]{1,18}(?:, [0-9]{1,18})*)\](?:, offset: ([0-9]{1,18}))?>)?"
    r"(?:, ([0-9]{1,18}))?>",
    re.ASCII,
)
_ELEMENTS = {"f32": f32, "f16": f16, "i8": i8, "i32": i32}


def memref_type(text: str) -> MemRefType | None:
    """The type `text` spells when it is a plain ranked memref (static
    sizes, an element type of `_ELEMENTS`, optionally a static `strided`
    layout and an integer memory space), built as xDSL 0.74's
    `_parse_memref_attrs` builds it (layout and memory space `NoneAttr` when
    absent, an absent offset 0, the space an `i64` integer); else None, or
    when that build fails (xDSL's parse then gives the error).  A tiled
    program spells a few thousand distinct memref types (DenseNet-121:
    2,522), each taking xDSL's lexer and attribute parser 0.25 ms."""
    m = _MEMREF.fullmatch(text)
    if m is None:
        return None
    sizes, elem, strides, offset, space = m.groups()
    try:
        layout: StridedLayoutAttr | NoneAttr = NoneAttr()
        if strides is not None:
            layout = StridedLayoutAttr([int(s) for s in strides.split(", ")], int(offset or 0))
        return MemRefType(
            _ELEMENTS[elem],
            [int(d) for d in sizes[:-1].split("x")],
            layout,
            NoneAttr() if space is None else IntegerAttr(int(space), i64),
        )
    except Exception:  # whatever xDSL's own parse would make of it: its error, its place
        return None


class FastOps:
    """The fast path of one `LocatingParser` (its memos and name table)."""

    def __init__(self, parser: LocatingParser):
        self.parser = parser
        self.index = IndexType()
        self.lists: dict[str, tuple[DenseArrayBase, list[str]] | None] = {}
        """An index list's text (`[0, %arg5, 0]`) -> its static values as
        `custom<DynamicIndexList>` makes them and its SSA names; None: not a
        plain list (left to xDSL)."""
        self.classes: dict[str, type[Operation] | None] = {}
        self.segment_sizes: dict[tuple[int, ...], DenseArrayBase] = {}
        self.scalar_types: dict[tuple[Attribute, Attribute], bool] = {}
        """`linalg.copy`'s element types -> whether both are scalars (its body's)."""
        self.generic_traits: dict[str, _Traits | None] = {}
        """A generic's dictionary text -> its indexing maps and iterator types
        (`_generic_traits`)."""
        self.read = 0
        """How many statements the fast path read."""
        self.builders: dict[str, Callable[[re.Match[str]], Operation | None]] = {
            "memref.alloc": self._alloc,
            "memref.view": self._view,
            "memref.subview": self._subview,
            "memref.dealloc": self._dealloc,
            "memref.copy": self._memref_copy,
            "linalg.copy": self._linalg_copy,
            "linalg.yield": self._linalg_yield,
            **{name: partial(self._float_binary, name) for name in _FLOAT_BINARY},
        }

    def operation(self, start: int) -> Operation | None:
        """The op of the statement at `start` (its first token) when it is
        one of the forms above, its result registered and the parser past
        it; else None, the parser untouched."""
        p = self.parser
        text = p.lexer.input.content
        head = _HEAD.match(text, start)
        if head is None:
            return None
        name = head.group(1)
        form = _FORMS.get(name)
        if form is None and name.startswith("linalg."):
            form = _NAMED
        if form is None:
            return None
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        m = form.fullmatch(text, start, end)
        if m is None:
            return None
        if name == "linalg.generic":
            return self._generic(m, start)
        result = m.group(1) if text[start] == "%" else None
        if result is not None and result in p.ssa_values:
            return None
        try:
            op = self.builders.get(name, self._named)(m)
        except Exception:  # whatever xDSL's own parse would make of it: its error, its place
            op = None
        if op is None:
            return None
        if result is not None:
            p.define_results(result, op, Span(start, start + 1 + len(result), p.lexer.input))
        p.resume_at(end)
        self.read += 1
        return op

    # -- pieces ---------------------------------------------------------
    def _class(
        self, name: str, expected: Callable[[], type[Operation]], segments: bool
    ) -> type[Operation] | None:
        """The context's class of op `name` when it is `expected()` (the
        class whose parse the builder mirrors) with the operand segments
        `segments` says (`AttrSizedOperandSegments(as_property=True)`, as
        xDSL 0.74 defines it), else None."""
        if name not in self.classes:
            cls = self.parser.ctx.get_optional_op(name)
            ok = (
                cls is expected()
                and issubclass(cls, IRDLOperation)
                and [
                    (type(o), getattr(o, "as_property", None))
                    for o in cls.get_irdl_definition().options
                    if not isinstance(o, ParsePropInAttrDict)
                ]
                == ([(AttrSizedOperandSegments, True)] if segments else [])
            )
            self.classes[name] = cls if ok else None
        return self.classes[name]

    def _type(self, m: re.Match[str], group: int) -> Any:
        """The memref type of `m.group(group)` (`_type_at`)."""
        return self._type_at(m.string, m.start(group), m.end(group))

    def _type_at(self, source: str, start: int, end: int) -> Any:
        """The memref type of `source[start:end]` (the parser's input): from
        the parser's memo, else parsed where it stands
        (`LocatingParser.type_between`, which memoizes it); None when that
        parse fails, does not end where the type's text does, or is not a
        memref type."""
        cached = self.parser.memref_types.get(source[start:end])
        if cached is not None:
            return cached
        parsed = self.parser.type_between(start, end)
        return parsed if isinstance(parsed, MemRefType) else None

    def _value(self, name: str, type: Attribute) -> SSAValue | None:
        """SSA value `%name` as `resolve_operand` gives it, None when it is
        not defined yet or has another type."""
        values = self.parser.ssa_values.get(name)
        if not values:
            return None
        v = values[0]
        return v if v.type is type or v.type == type else None

    def _segments(self, *sizes: int) -> DenseArrayBase:
        """`operandSegmentSizes` as xDSL's op builder makes it."""
        seg = self.segment_sizes.get(sizes)
        if seg is None:
            seg = self.segment_sizes[sizes] = DenseArrayBase.from_list(i32, sizes)
        return seg

    def _list(self, text: str) -> tuple[DenseArrayBase, list[str]] | None:
        if text in self.lists:
            return self.lists[text]
        static: list[int] = []
        names: list[str] = []
        entry: tuple[DenseArrayBase, list[str]] | None = None
        items = text[1:-1].split(", ")
        if all(_INDEX.fullmatch(i) for i in items):
            for i in items:
                if i[0] == "%":
                    static.append(DYNAMIC_INDEX)
                    names.append(i[1:])
                else:
                    static.append(int(i))
            entry = (DenseArrayBase.from_list(i64, static), names)
        if len(self.lists) >= _LIST_CACHE_LIMIT:
            self.lists.clear()
        self.lists[text] = entry
        return entry

    def _indices(self, names: list[str]) -> list[SSAValue] | None:
        out = []
        for n in names:
            v = self._value(n, self.index)
            if v is None:
                return None
            out.append(v)
        return out

    # -- the forms: each builds what xDSL 0.74's parse of it builds, with
    # `create` and the operands flattened as xDSL's op builder passes them
    # (`irdl_op_init`: properties given, then `operandSegmentSizes`)
    def _alloc(self, m: re.Match[str]) -> Operation | None:
        from xdsl.dialects import memref

        cls = self._class("memref.alloc", lambda: memref.AllocOp, True)
        res = self._type(m, 3)
        attrs: dict[str, Attribute] = {}
        if m.group(2) is not None:
            cached = self.parser.attr_dicts.get(m.group(2))
            if cached is None:
                return None
            attrs = dict(cached)
        if cls is None or res is None:
            return None
        alignment = attrs.pop("alignment", None)  # AllocOp.parse: a property
        props = {} if alignment is None else {"alignment": alignment}
        props["operandSegmentSizes"] = self._segments(0, 0)
        return cls.create(result_types=(res,), properties=props, attributes=attrs)

    def _view(self, m: re.Match[str]) -> Operation | None:
        from xdsl.dialects import memref

        cls = self._class("memref.view", lambda: memref.ViewOp, False)
        src_t, res_t = self._type(m, 4), self._type(m, 5)
        # the format's constraint on the source: MemRefType[i8]
        if (
            cls is None
            or src_t is None
            or res_t is None
            or not isinstance(src_t, MemRefType)
            or src_t.element_type != i8
        ):
            return None
        src, shift = self._value(m.group(2), src_t), self._value(m.group(3), self.index)
        if src is None or shift is None:
            return None
        return cls.create(operands=(src, shift), result_types=(res_t,))

    def _subview(self, m: re.Match[str]) -> Operation | None:
        from xdsl.dialects import memref

        cls = self._class("memref.subview", lambda: memref.SubviewOp, True)
        src_t, res_t = self._type(m, 6), self._type(m, 7)
        lists = [self._list(m.group(k)) for k in (3, 4, 5)]
        if cls is None or src_t is None or res_t is None:
            return None
        src = self._value(m.group(2), src_t)
        statics, dyn = [], []
        for entry in lists:
            values = self._indices(entry[1]) if entry is not None else None
            if values is None:
                return None
            statics.append(entry[0])  # type: ignore[index]
            dyn.append(values)
        if src is None:
            return None
        return cls.create(
            operands=(src, *dyn[0], *dyn[1], *dyn[2]),
            result_types=(res_t,),
            properties={
                "static_offsets": statics[0],
                "static_sizes": statics[1],
                "static_strides": statics[2],
                "operandSegmentSizes": self._segments(1, *map(len, dyn)),
            },
        )

    def _dealloc(self, m: re.Match[str]) -> Operation | None:
        from xdsl.dialects import memref

        cls = self._class("memref.dealloc", lambda: memref.DeallocOp, False)
        t = self._type(m, 2)
        v = self._value(m.group(1), t) if t is not None else None
        if cls is None or v is None:
            return None
        return cls.create(operands=(v,))

    def _memref_copy(self, m: re.Match[str]) -> Operation | None:
        from nem.frontends.upstream_dialects.memref_copy import MemRefCopyOp

        cls = self._class("memref.copy", lambda: MemRefCopyOp, False)
        src_t, dst_t = self._type(m, 3), self._type(m, 4)
        if cls is None or src_t is None or dst_t is None:
            return None
        src, dst = self._value(m.group(1), src_t), self._value(m.group(2), dst_t)
        if src is None or dst is None:
            return None
        return cls.create(operands=(src, dst))

    def _linalg_yield(self, m: re.Match[str]) -> Operation | None:
        from xdsl.dialects.linalg.ops import YieldOp

        cls = self._class("linalg.yield", lambda: YieldOp, False)
        v = self._value(m.group(1), _ELEMENTS[m.group(2)])
        if cls is None or v is None:
            return None
        return cls.create(operands=(v,))

    def _float_binary(self, name: str, m: re.Match[str]) -> Operation | None:
        """`%r = arith.OP %a, %b : T`: both operands of the result's type
        (the format's `type($result)`); `create` sets the default fast-math
        flags, as xDSL's parse of the text without flags does."""
        from xdsl.dialects import arith

        cls = self._class(name, lambda: getattr(arith, _FLOAT_BINARY[name]), False)
        t = _ELEMENTS[m.group(4)]
        a, b = self._value(m.group(2), t), self._value(m.group(3), t)
        if cls is None or a is None or b is None:
            return None
        return cls.create(operands=(a, b), result_types=(t,))

    def _linalg_copy(self, m: re.Match[str]) -> Operation | None:
        from xdsl.dialects.builtin import AnyFloat, IntegerType
        from xdsl.dialects.linalg.ops import CopyOp, YieldOp
        from xdsl.utils.hints import isa

        cls = self._class("linalg.copy", lambda: CopyOp, True)
        src_t, dst_t = self._type(m, 2), self._type(m, 4)
        if cls is None or src_t is None or dst_t is None:
            return None
        src, dst = self._value(m.group(1), src_t), self._value(m.group(3), dst_t)
        if src is None or dst is None:
            return None
        # NamedOperation.parse: no result on memrefs; CopyOp.get_hidden_region:
        # a block of the element types yielding its first argument (built here
        # without the implicit builder, a fifth of the parse)
        types = (src_t.element_type, dst_t.element_type)
        scalar = self.scalar_types.get(types)
        if scalar is None:  # xDSL's `isa` of a union: a tenth of this path, asked once
            scalar = self.scalar_types[types] = all(isa(t, AnyFloat | IntegerType) for t in types)
        if not scalar:
            return None
        block = Block(arg_types=types)
        block.add_op(YieldOp.create(operands=(block.args[0],)))
        return cls.create(
            operands=(src, dst),
            properties={"operandSegmentSizes": self._segments(1, 1)},
            regions=(Region(block),),
        )

    # -- linalg.generic: the header read here, the body by the parser
    def _generic(self, m: re.Match[str], start: int) -> Operation | None:
        """`linalg.generic {ATTRS} [ins(..)] outs(..) {` and its body, the op
        xDSL's `GenericOp.parse` builds (its public constructor, as that parse
        calls it); None, the parser untouched, when the header is not one
        `_generic_header` reads or the body is followed by result types
        (`-> T`: xDSL's parse, from the statement's start).  The body is
        parsed by the parser where xDSL's parse would parse it, with the op's
        start and dialect on the parser's stacks as xDSL's `parse_operation`
        has them: its errors are xDSL's."""
        try:
            header = self._generic_header(m)
        except Exception:  # whatever xDSL's own parse would make of it: its error, its place
            header = None
        if header is None:
            return None
        cls, ins, outs, maps, iterators = header
        p = self.parser
        body = p.region_at(m.end() - 1, start, "linalg")  # the body's `{`
        if body is None:
            return None
        op = cls(ins, outs, body, maps, iterators)
        location = p.parse_optional_location()
        if location is not None:
            op.location = location
        self.read += 1
        return op

    def _generic_header(
        self, m: re.Match[str]
    ) -> (
        tuple[type[GenericOp], list[SSAValue], list[SSAValue], ArrayAttr[AffineMapAttr], ArrayAttr]
        | None
    ):
        from xdsl.dialects.linalg.ops import GenericOp

        cls = cast("type[GenericOp] | None", self._class("linalg.generic", lambda: GenericOp, True))
        traits = self._generic_traits(m.group(1))
        ins = self._operands(m, 2) if m.group(2) is not None else []
        outs = self._operands(m, 4)
        if cls is None or traits is None or ins is None or outs is None:
            return None
        return cls, ins, outs, *traits

    def _operands(self, m: re.Match[str], group: int) -> list[SSAValue] | None:
        """The values `%a, %b` of `m.group(group)` of the types listed in
        `m.group(group + 1)` (`resolve_operands`), None when one is not."""
        names = m.group(group).split(", ")
        spans = [t.span() for t in _OPERAND_TYPES.finditer(m.string, *m.span(group + 1))]
        if len(spans) != len(names):
            return None
        values = []
        for name, (a, b) in zip(names, spans):
            t = _ELEMENTS.get(m.string[a:b]) or self._type_at(m.string, a, b)
            v = self._value(name[1:], t) if t is not None else None
            if v is None:
                return None
            values.append(v)
        return values

    def _generic_traits(self, text: str) -> _Traits | None:
        """The indexing maps and iterator types of a generic's dictionary
        `text` as `GenericOp.parse` makes them (a string's `IteratorTypeAttr`),
        from the parser's dictionary memo; None when it holds other entries
        (which that parse drops), lacks one, or is not in the memo yet."""
        if text in self.generic_traits:
            return self.generic_traits[text]
        attrs = self.parser.attr_dicts.get(text)
        if attrs is None:
            return None
        from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr

        maps, iterators = attrs.get("indexing_maps"), attrs.get("iterator_types")
        traits = None
        if (
            attrs.keys() == {"indexing_maps", "iterator_types"}
            and isinstance(maps, ArrayAttr)
            and all(isinstance(a, AffineMapAttr) for a in maps)
            and isinstance(iterators, ArrayAttr)
            and all(isinstance(a, StringAttr | IteratorTypeAttr) for a in iterators)
        ):
            traits = (
                cast("ArrayAttr[AffineMapAttr]", maps),
                ArrayAttr(
                    [
                        IteratorTypeAttr(IteratorType(a.data)) if isinstance(a, StringAttr) else a
                        for a in iterators
                    ]
                ),
            )
        self.generic_traits[text] = traits
        return traits

    def _named(self, m: re.Match[str]) -> Operation | None:
        """A named op (`_NAMED`) built as xDSL's `NamedOperation.parse` builds
        it: its dictionary's properties and attributes (in front only where
        the class prints them there), `build` with the class's hidden
        region; None for a class with a parse of its own."""
        from xdsl.dialects.linalg.abstract_ops import NamedOperation

        name = m.group(0)[: m.group(0).index(" ")]
        if name not in self.classes:
            cls = self.parser.ctx.get_optional_op(name)
            ok = (
                isinstance(cls, type)
                and issubclass(cls, NamedOperation)
                and getattr(cls.parse, "__func__", None)
                is getattr(NamedOperation.parse, "__func__", 0)
            )
            self.classes[name] = cls if ok else None
        cls = self.classes[name]
        if cls is None or not issubclass(cls, NamedOperation):
            return None
        attrs: dict[str, Attribute] = {}
        if m.group(1) is not None:
            cached = self.parser.attr_dicts.get(m.group(1))
            if cached is None or not cls.PRINT_ATTRS_IN_FRONT:
                return None
            attrs = dict(cached)
        ins, outs = self._operands(m, 2), self._operands(m, 4)
        if ins is None or outs is None:
            return None
        prop_names = cls.get_irdl_definition().properties
        properties = {k: v for k, v in attrs.items() if k in prop_names}
        for k in properties:
            del attrs[k]
        return cls.build(
            operands=(ins, outs),
            result_types=((),),
            properties=properties,
            attributes=attrs,
            regions=(cls.get_hidden_region(ins, outs),),
        )
