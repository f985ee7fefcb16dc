"""Printer from NEM IR to canonical `.nem` text.

Guarantees (tested in test/unit/test_roundtrip.py): `print(parse(x))` is a
fixpoint after one round, parsing the printed text gives the same IR, and
every user-visible name, decorator and quant descriptor survives.  Comments
and spacing are not kept (the IR has none); expressions keep their
structure, with parentheses only where precedence needs them or where the
user mixed operators (`(i mod 2) * tile`).
"""

from __future__ import annotations

from collections.abc import Iterable
from io import StringIO
from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, BlockArgument, Operation, OpResult, SSAValue

from nem.analysis.ir_walk import walk_ops
from nem.dialect.attributes import (
    ArgRefAttr,
    DecoratorAttr,
    RegionType,
    elem_name,
    fmt_num,
)
from nem.dialect.diagnostics import fail
from nem.dialect.expressions import PRECEDENCE, SYMBOL_OF
from nem.dialect.ops import (
    BufferOp,
    ComputeOp,
    ConstOp,
    LetOp,
    LoopOp,
    MoveOp,
    NemOp,
    ProgramOp,
    RegionOp,
    StoreOp,
    TransferOp,
    WaitOp,
)
from nem.dialect.per_class import PerClass
from nem.dialect.point_checks import operand_groups
from nem.frontends.nem_text.lexer import quote

INDENT = "  "


def _decos(decos: tuple[DecoratorAttr, ...] | list[DecoratorAttr]) -> str:
    return "".join(" " + d.render() for d in decos)


class NemPrinter:
    """One program's text.  Ops are told apart by their exact class (a table
    filled per class), not by `isinstance`, which on xDSL's ABC op classes
    runs Python code for every statement and every expression leaf; a
    leaf's text (literal, const, let, loop variable) is made once per SSA
    value."""

    def __init__(self) -> None:
        self.out = StringIO()
        # by the value's id (a value's __hash__ is Python code): the printed
        # IR keeps every value alive meanwhile, so no id is reused
        self._leaves: dict[int, str] = {}
        # what a region's text takes of its type, by the type's identity (the
        # entry keeps the type alive, so its id stays its own): few distinct
        # types exist, and each region printed reads four of their properties
        self._type_parts: dict[int, tuple[bool, str | None, str | None, str, Attribute]] = {}
        # by the identity of a `decorators` array / `attrs` entry (kept alive by
        # the entry): tasks share them, and each costs a render / a sort
        self._deco_texts: dict[int, tuple[str, Attribute]] = {}
        self._attr_orders: dict[tuple[type, int], tuple[list[str], Attribute]] = {}

    # -- expressions -------------------------------------------------------
    def expr(self, value: SSAValue) -> str:
        return self._expr(value, 0, False)

    def _leaf(self, value: SSAValue) -> str | None:
        """The text of a value that is not an operator (None for one that is)."""
        text = self._leaves.get(id(value))
        if text is not None:
            return text
        if type(value) is BlockArgument:
            owner = value.block.parent_op()
            assert isinstance(owner, LoopOp)
            text = owner.iv_name.data
        else:
            op = cast(OpResult, value).op
            t = type(op)
            if t is arith.ConstantOp:
                attr = cast(arith.ConstantOp, op).value
                assert isinstance(attr, IntegerAttr)
                text = fmt_num(attr.value.data)
            elif t is ConstOp:
                text = cast(ConstOp, op).const_name.data
            elif t is LetOp:
                text = cast(LetOp, op).let_name.data
            elif t in SYMBOL_OF:
                return None
            else:
                raise fail(
                    f"not supported: {op.name} in a NEM expression",
                    op,
                    None,
                    "lower the input first (-p lower-to-nem) or print MLIR (-t mlir)",
                )
        self._leaves[id(value)] = text
        return text

    def _expr(self, value: SSAValue, parent_prec: int, needs_parens_if_binop: bool) -> str:
        leaf = self._leaf(value)
        if leaf is not None:
            return leaf
        op = cast(OpResult, value).op
        sym = SYMBOL_OF[type(op)]
        prec = PRECEDENCE[sym]
        lhs_value, rhs_value = op.operands
        lhs_sym = SYMBOL_OF.get(type(lhs_value.owner)) if type(lhs_value) is OpResult else None
        # Left operand: parenthesize a lower-precedence binop, and a different
        # operator of equal precedence, which keeps `(i mod 2) * t` as written.
        lhs = self._expr(lhs_value, prec, lhs_sym is not None and lhs_sym != sym)
        # Right operand: parenthesize a binop of equal or lower precedence
        # (`a - (b - c)`), never a tighter one (`a - 10 / 3`).
        rhs = self._expr(rhs_value, prec, True)
        text = f"{lhs} {sym} {rhs}"
        if prec < parent_prec or (needs_parens_if_binop and prec <= parent_prec):
            return f"({text})"
        return text

    # -- values --------------------------------------------------------------
    def value(self, attr: Attribute, args: tuple[SSAValue, ...]) -> str:
        if type(attr) is ArgRefAttr or isinstance(attr, ArgRefAttr):  # (ABCs: exact type first)
            return self.expr(args[attr.index.data])
        if isinstance(attr, ArrayAttr):
            return "[" + ", ".join(self.value(a, args) for a in attr.data) + "]"
        if isinstance(attr, StringAttr):
            return quote(attr.data)
        if isinstance(attr, FloatAttr):
            return fmt_num(float(attr.value.data))
        name = elem_name(attr)
        if name is not None:
            return name
        raise ValueError(f"not supported: attribute value {attr} in .nem text")

    def region_text(self, op: RegionOp) -> str:
        # (all operand groups in one call: each named accessor decodes the
        # segment sizes again, and every region and task is printed this way)
        (buf,), (offset,), (extent,), shape, strides = operand_groups(op)
        text = f"region({_buffer_name(buf)}, {self.expr(offset)}, {self.expr(extent)})"
        rtype = op.result.type
        parts = self._type_parts.get(id(rtype))
        if parts is None:
            parts = self._type_parts[id(rtype)] = _type_parts(rtype)
        typed, elem, layout, quant = parts[0], parts[1], parts[2], parts[3]
        if typed:
            text += f" elem={elem}, shape=[{', '.join(map(self.expr, shape))}]"
            if layout is not None:
                text += f", layout={layout}"
            else:
                text += f", strides=[{', '.join(map(self.expr, strides))}]"
            text += quant
        return text

    def operand(self, value: SSAValue, decos: tuple[DecoratorAttr, ...] = ()) -> str:
        op = value.owner
        assert type(op) is RegionOp
        # (RegionOp.verify_: a region is inline exactly when it is unnamed)
        name = op.region_name
        text = self.region_text(op) if name is None or op.binding.data == "inline" else name.data
        return text + _decos(decos) if decos else text

    # -- statements ----------------------------------------------------------
    def line(self, depth: int, text: str) -> None:
        self.out.write(INDENT * depth + text + "\n")

    def program(self, prog: ProgramOp) -> str:
        for inc in prog.includes.data if prog.includes else ():
            self.line(0, f'include "{inc.data}"')
        if prog.device_kind is not None:
            assert prog.device is not None  # ProgramOp.verify_: set with device_kind
            kind, dev = prog.device_kind.data, prog.device.data
            if kind == "file":
                self.line(0, f'device "{dev}"')
            elif kind == "name":
                self.line(0, f"device {dev}")
            else:
                self.out.write(dev.rstrip("\n") + "\n")
        if prog.includes or prog.device_kind is not None:
            self.out.write("\n")
        if prog.sym_name is not None:
            self.line(0, f"program {prog.sym_name.data}:")
            self.out.write("\n")
        self.block(prog.block.ops, 0)
        return self.out.getvalue()

    def block(self, ops: Iterable[Operation], depth: int) -> None:
        kinds = _STATEMENT_KINDS
        for op in ops:
            kind = kinds[type(op)]
            if kind != "value":  # arith ops and inline regions print where they are used
                self.statement(op, depth, kind)

    def statement(self, op: Operation, depth: int, kind: str | None = None) -> None:
        kind = kind or _STATEMENT_KINDS[type(op)]
        if kind == "const":
            op = cast(ConstOp, op)
            self.line(depth, f"const {op.const_name.data} = {self.expr(op.value)}")
        elif kind == "let":
            op = cast(LetOp, op)
            self.line(depth, f"let {op.let_name.data} = {self.value(op.value, tuple(op.args))}")
        elif kind == "buffer":
            op = cast(BufferOp, op)
            props = f"size={self.expr(op.size)}"
            if op.align is not None:
                props += f", align={op.align.value.data}"
            level = op.result.type.level.data
            self.line(
                depth,
                f"buffer {op.buffer_name.data} : {level} ({props})" + _decos(op.decorator_list()),
            )
        elif kind == "region":
            op = cast(RegionOp, op)
            b = op.binding.data
            if b == "inline":
                return
            prefix = "let " if b == "let" else ""
            assert op.region_name is not None  # RegionOp.verify_: declared regions are named
            self.line(
                depth,
                f"{prefix}{op.region_name.data} = {self.region_text(op)}" + self.decos(op),
            )
        elif kind == "loop":
            op = cast(LoopOp, op)
            self.out.write("\n")
            self.line(
                depth,
                f"loop {op.iv_name.data} in [{self.expr(op.lower)}.."
                f"{self.expr(op.upper)}]{_decos(op.decorator_list())}:",
            )
            self.block(op.block.ops, depth + 1)
            self.line(depth, "endloop")
            self.out.write("\n")
        elif kind == "move":
            self.line(depth, self.move(cast(MoveOp, op)))
        elif kind == "wait":
            op = cast(WaitOp, op)
            names = ", ".join(_token_name(t) for t in op.tokens)
            self.line(depth, f"wait({names}){_decos(op.decorator_list())}")
        elif kind == "compute":
            self.line(depth, self.compute(cast(ComputeOp, op)))
        elif kind != "value":
            raise fail(
                f"not supported: cannot print {op.name} as .nem",
                op,
                None,
                "lower the input first (-p lower-to-nem) or print MLIR (-t mlir)",
            )

    def move(self, op: MoveOp) -> str:
        t = type(op)  # (exact types first: isinstance on xDSL's ABC op classes is Python code)
        kw = (
            "store"
            if t is StoreOp
            else "transfer"
            if t is TransferOp or isinstance(op, TransferOp)
            else "store"
        )
        mode = "sync" if op.is_sync else "async"
        (dst,), (src,), deps = operand_groups(op)
        text = (
            f"{kw}.{mode}(dst={self.operand(dst, op.operand_decos(0))}, "
            f"src={self.operand(src, op.operand_decos(1))}"
        )
        if deps:
            text += f", deps=[{', '.join(_token_name(t) for t in deps)}]"
        text += ")" + self.decos(op)
        return _assign(op) + text

    def compute(self, op: ComputeOp) -> str:
        mode = "sync" if op.is_sync else "async"
        in_values, out_values, deps, args = operand_groups(op)
        n_in = len(in_values)
        ins = ", ".join(self.operand(v, op.operand_decos(i)) for i, v in enumerate(in_values))
        outs = ", ".join(
            self.operand(v, op.operand_decos(n_in + i)) for i, v in enumerate(out_values)
        )
        text = f"{op.opcode}.{mode} in {ins} out {outs}"
        if deps:
            text += f" deps=[{', '.join(_token_name(t) for t in deps)}]"
        entry = op.attrs
        given = entry.data
        if given:
            order = self._attr_orders.get((type(op), id(entry)))
            if order is None:
                order = self._attr_orders[(type(op), id(entry))] = (
                    op.SPEC.canonical_attr_order(given),
                    entry,
                )
            for key in order[0]:
                text += f" {key}={self.value(given[key], args)}"
        return _assign(op) + text + self.decos(op)

    def decos(self, op: Operation) -> str:
        """The text of `op`'s decorators (`NemOp.decorator_list`), rendered
        once per decorator array."""
        array = op.properties.get("decorators")
        if array is None:
            return ""
        hit = self._deco_texts.get(id(array))
        if hit is None:
            hit = self._deco_texts[id(array)] = (_decos(cast(NemOp, op).decorator_list()), array)
        return hit[0]


def _type_parts(rtype: Attribute) -> tuple[bool, str | None, str | None, str, Attribute]:
    """(whether typed; element type name; layout name, None with strides;
    the `, quant=...` suffix or ""; the type itself) of a region's type."""
    assert isinstance(rtype, RegionType)
    if not rtype.typed:
        return False, None, None, "", rtype
    q = rtype.quant_desc
    return (
        True,
        rtype.elem_name,
        rtype.layout_name,
        f", quant={q.render()}" if q is not None else "",
        rtype,
    )


def _token_name(value: SSAValue) -> str:
    # (`type(...) is` first: isinstance on xDSL's ABC classes runs Python code)
    name = (
        value.op.properties.get("token")
        if type(value) is OpResult or isinstance(value, OpResult)
        else None
    )
    if type(name) is not StringAttr and not isinstance(name, StringAttr):
        raise ValueError("not supported: an unnamed token cannot be referenced in .nem text")
    return name.data


def _assign(op: Operation) -> str:
    name = op.properties.get("token")
    return f"{name.data} = " if type(name) is StringAttr or isinstance(name, StringAttr) else ""


def _buffer_name(buf: SSAValue) -> str:
    """The name of the buffer a region views (a region's buffer operand is a
    `nem.buffer` result: BufferType values have no other source)."""
    return cast(BufferOp, buf.owner).buffer_name.data


_STATEMENTS = (
    (ConstOp, "const"),
    (LetOp, "let"),
    (BufferOp, "buffer"),
    (RegionOp, "region"),
    (LoopOp, "loop"),
    (MoveOp, "move"),
    (WaitOp, "wait"),
    (ComputeOp, "compute"),
    (arith.ConstantOp, "value"),
)


def _statement_kind(cls: type) -> str:
    """How ops of class `cls` print: a statement kind, "value" (an expression
    op, printed where it is used), or "unknown" (not printable as .nem)."""
    if cls in SYMBOL_OF:
        return "value"
    return next((kind for base, kind in _STATEMENTS if issubclass(cls, base)), "unknown")


_STATEMENT_KINDS = PerClass(_statement_kind)
"""`_statement_kind` by op class."""


def print_nem(module: ModuleOp | ProgramOp) -> str:
    """Canonical `.nem` text of the program(s) in `module`."""
    from nem.dialect.arguments import check_type

    check_type(
        "print_nem", "module", module, (ModuleOp, ProgramOp), "a ModuleOp or a nem ProgramOp"
    )
    progs = (
        [module]
        if isinstance(module, ProgramOp)
        else [op for op in module.ops if isinstance(op, ProgramOp)]
    )
    return "".join(NemPrinter().program(p) for p in progs)


def printed_statements(module: ModuleOp | ProgramOp) -> Iterable[Operation]:
    """The ops `print_nem` prints as a statement line of their own, in the
    order it prints them (parsing the text back gives the same sequence):
    a `.nem` line read back is matched to the op it was printed from
    (nem-compile's final nem-verify, D-COMPILE-VERIFY-LOC).  Each op class's
    kind is decided once (as `block` does), not asked of each of a lowered
    CNN's hundreds of thousands of ops (DenseNet-121's printed program: 0.23
    -> 0.10 s, issue 30)."""
    kinds = _STATEMENT_KINDS
    for op in walk_ops(module):
        kind = kinds[type(op)]
        if kind in ("value", "unknown") or type(op) is ProgramOp:
            continue
        if kind == "region" and cast(RegionOp, op).binding.data == "inline":
            continue
        yield op
