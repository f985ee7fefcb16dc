"""The upstream MLIR `async` dialect (xDSL 0.74 has none), with upstream's
exact custom syntax and generic form:

    %t = async.execute [%d0, %d1] { ... async.yield }
    %t, %v = async.execute [%d] (%x as %ux: !async.value<f32>) -> !async.value<f32> {
      ...
      async.yield %r : f32
    }
    async.await %t : !async.token
    %r = async.await %v : !async.value<f32>
    %g = async.create_group %n : !async.group
    %i = async.add_to_group %t, %g : !async.token
    async.await_all %g

Only what the NEM lowering consumes is modelled; the ops verify the
structural rules upstream's verifiers check (token result first, body
arguments matching the `!async.value` operands, yield matching results).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from xdsl.dialects.builtin import IndexType
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_result_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import VerifyException


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """`!async.token`: completion of an `async.execute`."""

    name = "async.token"


@irdl_attr_definition
class GroupType(ParametrizedAttribute, TypeAttribute):
    """`!async.group`: a set of tokens awaited together."""

    name = "async.group"


@irdl_attr_definition
class ValueType(ParametrizedAttribute, TypeAttribute):
    """`!async.value<T>`: a future value of type T."""

    name = "async.value"
    value_type: Attribute

    def __init__(self, value_type: Attribute):
        super().__init__(value_type)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            return [parser.parse_type()]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.value_type)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`async.yield (%v : T)?` terminates an `async.execute` body."""

    name = "async.yield"
    operands_ = var_operand_def()
    traits = traits_def(IsTerminator())

    def __init__(self, operands: Sequence[SSAValue] = ()):
        super().__init__(operands=[operands])

    @classmethod
    def parse(cls, parser: Parser) -> YieldOp:
        unresolved = []
        if (first := parser.parse_optional_unresolved_operand()) is not None:
            unresolved.append(first)
            while parser.parse_optional_punctuation(",") is not None:
                unresolved.append(parser.parse_unresolved_operand())
        types: list[Attribute] = []
        if unresolved:
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        pos = parser.pos
        operands = parser.resolve_operands(unresolved, types, pos)
        attrs = parser.parse_optional_attr_dict()
        op = cls(operands)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        if self.operands_:
            printer.print_string(" ")
            printer.print_list(self.operands_, printer.print_ssa_value)
            printer.print_string(" : ")
            printer.print_list([o.type for o in self.operands_], printer.print_attribute)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class ExecuteOp(IRDLOperation):
    """`async.execute [deps] (operands as args: types) -> result types { body }`."""

    name = "async.execute"
    dependencies = var_operand_def(TokenType)
    body_operands = var_operand_def()
    token = result_def(TokenType)
    body_results = var_result_def()
    body_region = region_def("single_block")
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        dependencies: Sequence[SSAValue],
        body_operands: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body: Region,
    ):
        super().__init__(
            operands=[dependencies, body_operands],
            result_types=[TokenType(), list(result_types)],
            regions=[body],
        )

    @classmethod
    def parse(cls, parser: Parser) -> ExecuteOp:
        deps: list[SSAValue] = []
        if parser.parse_optional_punctuation("[") is not None:
            if parser.parse_optional_punctuation("]") is None:
                deps = parser.parse_comma_separated_list(
                    parser.Delimiter.NONE, lambda: parser.parse_operand(TokenType())
                )
                parser.parse_punctuation("]")
        operands: list[SSAValue] = []
        args: list[Parser.Argument] = []
        if parser.parse_optional_punctuation("(") is not None:

            def one() -> None:
                unresolved = parser.parse_unresolved_operand()
                parser.parse_keyword("as")
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation(":")
                pos = parser.pos
                vtype = parser.parse_type()
                operands.append(parser.resolve_operand(unresolved, vtype))
                if not isinstance(vtype, ValueType):
                    parser.raise_error("expected !async.value<T> operand type", pos)
                args.append(arg.resolve(vtype.value_type))

            parser.parse_comma_separated_list(parser.Delimiter.NONE, one)
            parser.parse_punctuation(")")
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            if parser.parse_optional_punctuation("(") is not None:
                result_types = parser.parse_comma_separated_list(
                    parser.Delimiter.NONE, parser.parse_type
                )
                parser.parse_punctuation(")")
            else:
                result_types = [parser.parse_type()]
        attrs = parser.parse_optional_attr_dict_with_keyword(["operandSegmentSizes"])
        region = parser.parse_region(args)
        if not region.blocks:
            region.add_block(Block())
        block = region.block
        if block.last_op is None or not isinstance(block.last_op, YieldOp):
            block.add_op(YieldOp())
        op = cls(deps, operands, result_types, region)
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op

    def print(self, printer: Printer) -> None:
        if self.dependencies:
            printer.print_string(" [")
            printer.print_list(self.dependencies, printer.print_ssa_value)
            printer.print_string("]")
        if self.body_operands:
            printer.print_string(" (")
            block = self.body_region.block
            for i, (v, a) in enumerate(zip(self.body_operands, block.args)):
                if i:
                    printer.print_string(", ")
                printer.print_ssa_value(v)
                printer.print_string(" as ")
                printer.print_ssa_value(a)
                printer.print_string(": ")
                printer.print_attribute(v.type)
            printer.print_string(")")
        if self.body_results:
            printer.print_string(" -> ")
            types = [r.type for r in self.body_results]
            if len(types) > 1:
                printer.print_string("(")
            printer.print_list(types, printer.print_attribute)
            if len(types) > 1:
                printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        # upstream prints the terminator too (`{ async.yield }`) and its parser
        # does not add one: `async.execute { }` fails upstream's verifier
        printer.print_region(
            self.body_region, print_entry_block_args=False, print_block_terminators=True
        )

    def verify_(self) -> None:
        block = self.body_region.block
        if len(block.args) != len(self.body_operands):
            raise VerifyException("async.execute: one body argument per !async.value operand")
        for v, a in zip(self.body_operands, block.args):
            if not isinstance(v.type, ValueType) or v.type.value_type != a.type:
                raise VerifyException("async.execute: operand/argument type mismatch")
        for r in self.body_results:
            if not isinstance(r.type, ValueType):
                raise VerifyException("async.execute: results after the token are !async.value<T>")
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("async.execute body must end with async.yield")
        if [o.type for o in last.operands] != [
            cast(ValueType, r.type).value_type for r in self.body_results
        ]:
            raise VerifyException(
                "async.yield operand types do not match the async.execute results"
            )


@irdl_op_definition
class AwaitOp(IRDLOperation):
    """`async.await %t : !async.token` / `%r = async.await %v : !async.value<T>`."""

    name = "async.await"
    operand = operand_def()
    result = opt_result_def()

    def __init__(self, operand: SSAValue):
        rt = [operand.type.value_type] if isinstance(operand.type, ValueType) else []
        super().__init__(operands=[operand], result_types=[rt])

    @classmethod
    def parse(cls, parser: Parser) -> AwaitOp:
        unresolved = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls(parser.resolve_operand(unresolved, t))
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        printer.print_string(" : ")
        printer.print_attribute(self.operand.type)
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        t = self.operand.type
        if not isinstance(t, TokenType | ValueType):
            raise VerifyException("async.await takes an !async.token or !async.value")
        want = [t.value_type] if isinstance(t, ValueType) else []
        if [r.type for r in self.results] != want:
            raise VerifyException(
                f"async.await of {t} must have "
                + (f"one result of type {want[0]}" if want else "no result")
            )


@irdl_op_definition
class CreateGroupOp(IRDLOperation):
    """`%g = async.create_group %size : !async.group`."""

    name = "async.create_group"
    size = operand_def(IndexType)
    result = result_def(GroupType)

    @classmethod
    def parse(cls, parser: Parser) -> CreateGroupOp:
        size = parser.parse_operand(IndexType())
        parser.parse_punctuation(":")
        parser.parse_type()
        op = cls.create(operands=[size], result_types=[GroupType()])
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.size)
        printer.print_string(" : !async.group")
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class AddToGroupOp(IRDLOperation):
    """`%i = async.add_to_group %token, %group : !async.token`."""

    name = "async.add_to_group"
    operand = operand_def()
    group = operand_def(GroupType)
    rank = result_def(IndexType)

    @classmethod
    def parse(cls, parser: Parser) -> AddToGroupOp:
        tok = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        group = parser.parse_operand(GroupType())
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls.create(
            operands=[parser.resolve_operand(tok, t), group], result_types=[IndexType()]
        )
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        printer.print_string(", ")
        printer.print_ssa_value(self.group)
        printer.print_string(" : ")
        printer.print_attribute(self.operand.type)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class AwaitAllOp(IRDLOperation):
    """`async.await_all %group`."""

    name = "async.await_all"
    operand = operand_def(GroupType)

    @classmethod
    def parse(cls, parser: Parser) -> AwaitAllOp:
        op = cls.create(operands=[parser.parse_operand(GroupType())])
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        printer.print_op_attributes(self.attributes)


Async = Dialect(
    "async",
    [ExecuteOp, YieldOp, AwaitOp, CreateGroupOp, AddToGroupOp, AwaitAllOp],
    [TokenType, GroupType, ValueType],
)
