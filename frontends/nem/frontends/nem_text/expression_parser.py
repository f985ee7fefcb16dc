"""The lowest layer of the `.nem` program parser: names, integer
expressions, and building IR (SPEC §12).

`ExpressionParser` holds what every statement needs -- the scope of names,
the current block, literal and type caches, the D-LIMITS counters -- and
parses integer expressions (GRAM-16, D-EXPR-PREC), the piece statements are
made of.  The layers above it, each a subclass, as xDSL's `Parser` builds on
its `AttrParser`/`BaseParser`: `attribute_parser.AttributeParser` (attribute
values, D-LEX-1; decorators, GRAM-17, DECO-*), `quant_parser.QuantParser`
(GRAM-10), `region_parser.RegionParser` (memory levels, regions, operands)
and `parser.ProgramParser` (statements, the document).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple, TypeVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    FileLineColLoc,
    IntAttr,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from nem.dialect.attributes import (
    ELEM_BY_NAME,
    BufferType,
    MemLevelAttr,
    RegionType,
    region_type,
)
from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, register_source
from nem.dialect.expressions import (
    BINOPS,
    PRECEDENCE,
    BuildFacts,
    ExprError,
    ExprKeys,
    apply_binop,
)
from nem.dialect.limits import MAX_EXPR_DEPTH, MAX_EXPR_OPERATORS, MAX_NESTING_DEPTH
from nem.dialect.op_build import create_op, file_loc
from nem.dialect.ops import INDEX
from nem.frontends.nem_text.cursor import TokenCursor, describe
from nem.frontends.nem_text.lexer import FLOAT, ID, INT, PUNCT, STRING, Token, tokenize

_OpT = TypeVar("_OpT", bound=Operation)
_INDEX_RESULT = (INDEX,)
_first = itemgetter(0)  # an op's first result (tuple indexing, in C)


class Name(NamedTuple):
    """What a name in scope denotes (a tuple: one is made per declaration)."""

    kind: str  # const | let | buffer | region | token | loopvar | value
    value: SSAValue | None
    line: int  # where it is declared


_AFTER_OPERAND = frozenset((",", ")", "]"))
"""Punctuation that ends an expression that is a single operand."""


class Scope:
    """Names visible in a block; loop bodies open a nested scope."""

    def __init__(self, parent: Scope | None, in_loop: bool):
        self.names: dict[str, Name] = {}
        self.parent = parent
        self.in_loop = in_loop
        # names of the loop bodies that ended in this block: (loop variable,
        # declaration), so a use after `endloop` can say why it fails
        self.ended: dict[str, tuple[str, Name]] = {}

    def chain(self) -> Iterator[Scope]:
        """This scope, then the enclosing ones."""
        s: Scope | None = self
        while s is not None:
            yield s
            s = s.parent

    def lookup(self, name: str) -> Name | None:
        scope: Scope | None = self
        while scope is not None:
            found = scope.names.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def end_loop(self, body: Scope, iv: str) -> None:
        """Remember the names of `body`, a loop body of this block that ended."""
        self.ended.update(body.ended)
        self.ended.update((k, (iv, n)) for k, n in body.names.items() if n.kind != "loopvar")

    def ended_lookup(self, name: str) -> tuple[str, Name] | None:
        """Where `name` was declared if only in a loop body that has ended."""
        return next((s.ended[name] for s in self.chain() if name in s.ended), None)


@dataclass
class ParsedValue:
    """A parsed `value` before it is given its final form."""

    kind: str  # int | float | string | list | region | id
    data: object
    tok: Token


class ExpressionParser(TokenCursor):
    """Names, integer expressions and IR building of a `.nem` program."""

    def __init__(self, text: str, file: str, at: tuple[int, int] = (0, 0)):
        register_source(file, text, at)
        super().__init__(tokenize(text, file, at), file)
        self.block = Block()
        self.scope = Scope(None, in_loop=False)
        # Caches that keep parsing linear and cheap: one `arith.constant` per
        # literal value per block (visible in nested loop blocks), one
        # attribute per buffer type, memory level (region types: `region_type`).
        self._literals: list[dict[int, SSAValue]] = [{}]
        self._buffer_types: dict[MemLevelAttr, BufferType] = {}
        self._levels: dict[str, MemLevelAttr] = {}
        self._file_attr = StringAttr(file)
        self._ints: dict[int, IntAttr] = {}
        # bounded work (D-LIMITS): nesting of parentheses/lists, loop depth,
        # operators in the current top-level expression
        self._nesting = 0
        self._loop_depth = 0
        self._max_loop_depth = 0  # the deepest loop nest read (`facts`)
        self._max_expr_depth = 0  # the deepest expression read (`facts`)
        self._operators = 0
        # every integer value built (literals, operators, consts, integer
        # lets, loop variables), in order, with what the verifier's evaluator
        # computes of it (`facts`, D-BC-SEED): its static value (None when it
        # depends on a loop variable, `Evaluator.static`), its structural key
        # (`Evaluator.key`, interned in `_key_table`) and its expression depth
        # (`expression_depth`); by id: `_int_values` keeps the values alive
        self._int_values: list[SSAValue] = []
        self._int_facts: dict[int, tuple[int | None, object, int]] = {}
        self._key_table = ExprKeys()

    @contextmanager
    def _nested(self, tok: Token, what: str) -> Iterator[None]:
        """One more level of parentheses or lists, at most MAX_NESTING_DEPTH."""
        self._nesting += 1
        if self._nesting > MAX_NESTING_DEPTH:
            raise self.error(
                f"{what} nested more than {MAX_NESTING_DEPTH} deep (limit D-LIMITS)",
                None,
                "name the inner parts with const or let",
                tok,
            )
        try:
            yield
        finally:
            self._nesting -= 1

    def expect(
        self, text: str, rule: str, what: str | None = None, fix: str | None = None
    ) -> Token:
        t = self.tok
        if t.text == text:
            self.pos += 1
            self.tok = self.tokens[self.pos]
            return t
        return self._missing(lambda: super(ExpressionParser, self).expect(text, rule, what, fix))

    def expect_kind(self, kind: str, rule: str, what: str, fix: str | None = None) -> Token:
        t = self.tok
        if t.kind == kind:
            self.pos += 1
            self.tok = self.tokens[self.pos]
            return t
        return self._missing(
            lambda: super(ExpressionParser, self).expect_kind(kind, rule, what, fix)
        )

    def _missing(self, raise_error: Callable[[], Token]) -> Token:
        """Report a missing token where it is missing: when the token found
        instead starts a new line, the error goes just after the previous
        token, since the gap belongs to the statement on that line (`out`
        with no operand, a trailing `@`, ...), not to the next statement."""
        try:
            return raise_error()
        except NemDiagnosticError as e:
            if self.pos > 0 and self.tok.nl_before:
                prev = self.tokens[self.pos - 1]
                for d in e.diagnostics:
                    d.loc = SourceLoc(self.file, prev.line, prev.col + len(prev.text))
            raise

    # ------------------------------------------------------------------

    def _id_list(self, rule: str) -> list[Token]:
        toks = [self.expect_id(rule, "a token name")]
        while self.accept(","):
            toks.append(self.expect_id(rule, "a token name"))
        return toks

    def _token(self, tok: Token) -> SSAValue:
        n = self.scope.lookup(tok.text)
        if n is None:
            raise self.undeclared(
                tok,
                f"token '{tok.text}' is not produced by any earlier task",
                "TASK-03",
                f"put the task `{tok.text} = ...` before this statement: deps and wait "
                "see only the tokens of earlier statements",
            )
        if n.kind != "token":
            raise self.error(
                f"'{tok.text}' is a {n.kind}, not a token",
                "NAME-01",
                "deps and wait take task tokens",
                tok,
            )
        assert n.value is not None  # tokens are declared with their value
        return n.value

    # ------------------------------------------------------------------
    # Integer expressions (GRAM-16)
    # ------------------------------------------------------------------
    def _expr(self, const_ctx: bool = False, min_prec: int = 0) -> SSAValue:
        t = self.tok
        kind = t.kind
        if kind == INT or kind == ID:
            nxt = self.tokens[self.pos + 1]
            if nxt.text in _AFTER_OPERAND and nxt.kind == PUNCT:
                # a lone literal or name before `,` `)` `]`, the commonest
                # expressions: nothing else to check (LEX-02's malformed
                # numbers end in `.`/ID; a call has `(` after its name)
                self.pos += 1
                self.tok = nxt
                if kind == INT:
                    return self._literal(int(t.text), t)
                return self._name_value(t, const_ctx)
        if min_prec == 0 and self._nesting == 0:
            self._operators = 0  # a new top-level expression
        lhs = self._primary(const_ctx)
        while True:
            t = self.tok
            prec = PRECEDENCE.get(t.text)  # (a STRING's text has its quotes)
            if prec is None or prec <= min_prec:
                return lhs
            self._operators += 1
            if self._operators > MAX_EXPR_OPERATORS:
                raise self.error(
                    f"expression has more than {MAX_EXPR_OPERATORS} operators (limit D-LIMITS)",
                    None,
                    "split it with const or let names",
                    t,
                )
            self.advance()
            rhs = self._expr(const_ctx, prec)
            facts = self._int_facts
            a, ka, da = facts[id(lhs)]
            b, kb, db = facts[id(rhs)]
            value: int | None = None
            key: object = None
            if a is not None and b is not None:
                try:
                    value = key = apply_binop(t.text, a, b)
                except ExprError as e:
                    raise self.error(
                        f"{e} in a constant expression",
                        e.rule,
                        "change the divisor"
                        if e.rule
                        else "keep every value within the signed 64-bit range",
                        t,
                    )
            # built as the other ops (`create_op`, D-IR-BUILD): index operands, an index
            # result, its location given (not a default one replaced)
            node = create_op(BINOPS[t.text], (lhs, rhs), _INDEX_RESULT, {}, self._loc(t))
            self.block.add_op(node)
            depth = (da if da > db else db) + 1  # (`expression_depth`: an operator counts 1)
            if depth > self._max_expr_depth:
                self._max_expr_depth = depth
            if depth > MAX_EXPR_DEPTH:
                raise self.error(
                    f"integer expression more than {MAX_EXPR_DEPTH} operations "
                    "deep, counting through const and let names (limit D-LIMITS)",
                    None,
                    "compute the value in fewer steps",
                    t,
                )
            lhs = _first(node.results)
            if value is None:
                key = self._key_table.binop(t.text, ka, kb)
            facts[id(lhs)] = (value, key, depth)
            self._int_values.append(lhs)

    def _static_expr(self) -> int | None:
        """Parse an expression whose value is needed now (L1 index, decorator
        arguments) without adding it to the IR: the expression is built in a
        scratch block, evaluated, and dropped.  None if it is not constant."""
        t = self.tok
        if t.kind == INT:
            nxt = self.tokens[self.pos + 1]
            if nxt.text in _AFTER_OPERAND and nxt.kind == PUNCT:  # a lone literal: its value
                self.pos += 1
                self.tok = nxt
                return int(t.text)
        block, literals = self.block, self._literals
        self.block, self._literals = Block(), [{}]
        try:
            return self._static(self._expr())
        finally:
            self.block, self._literals = block, literals

    def _primary(self, const_ctx: bool) -> SSAValue:
        t = self.tok
        if t.kind == ID:  # a name, the commonest primary (no malformed number starts with one)
            nxt = self.tokens[self.pos + 1]
            if nxt.text == "(" and nxt.kind == PUNCT:
                raise self.error(
                    f"'{t.text}(' is a call, and expressions have no calls",
                    "GRAM-16",
                    "expressions combine INT, ID and (expr) with + - * / mod only",
                    t,
                )
            self.pos += 1
            self.tok = nxt
            return self._name_value(t, const_ctx)
        self._reject_malformed_number()
        if t.kind == PUNCT and t.text == "-":
            raise self.error(
                "negative numbers cannot be written: NEM has no unary minus and "
                "INT literals are unsigned",
                "LEX-06",
                "write 0 - x",
                t,
            )
        if t.kind == INT:
            self.advance()
            return self._literal(int(t.text), t)
        if t.kind == FLOAT:
            where = "a const declaration" if const_ctx else "this position"
            raise self.error(
                f"FLOAT literal {t.text} is not allowed in {where}",
                "LEX-03",
                "FLOATs are only allowed as compute attribute values; use an integer",
                t,
            )
        if t.text == "(" and t.kind != STRING:
            self.advance()
            with self._nested(t, "parentheses"):
                v = self._expr(const_ctx)
            self.expect(")", "GRAM-16", "to close the parenthesis")
            return v
        raise self.error(
            f"expected an expression, found {describe(t)}",
            "GRAM-16",
            "an expression is INT, ID or ( expr ) combined with + - * / mod"
            " (no unary minus: write 0 - x)",
        )

    def _name_value(self, t: Token, const_ctx: bool) -> SSAValue:
        """The value of name `t` in an expression (a const, let or loop variable)."""
        n = self.scope.lookup(t.text)
        if n is None:
            rule = "CONST-04" if const_ctx else "NAME-01"
            fix = (
                "declare the const on an earlier line"
                if const_ctx
                else "declare it first (const, let or loop variable)"
            )
            raise self.undeclared(t, f"'{t.text}' is not declared", rule, fix)
        if const_ctx and n.kind != "const":
            raise self.error(
                f"a const expression may use only earlier consts, but '{t.text}' is a {n.kind}",
                "CONST-03",
                "use literals and const names only",
                t,
            )
        if n.kind not in ("const", "let", "loopvar"):
            raise self.error(
                f"'{t.text}' is a {n.kind}, not an integer value",
                "NAME-01",
                "expressions use integer literals, consts, lets and loop variables",
                t,
            )
        assert n.value is not None  # consts, lets and loop variables have one
        return n.value

    def _reject_malformed_number(self) -> None:
        """LEX-02: `1.`, `.5` and `1e5` are not FLOAT literals.

        The lexer splits them into INT/`.`/ID pieces; catching the adjacent
        pieces here names the real problem instead of a later syntax error."""
        t, nxt = self.tok, self.peek()
        adjacent = nxt.line == t.line and nxt.col == t.col + len(t.text)
        bad = None
        if t.kind == PUNCT and t.text == "." and nxt.kind == INT and adjacent:
            bad = f".{nxt.text}"
        elif t.kind == INT and adjacent and nxt.kind == PUNCT and nxt.text == ".":
            bad = f"{t.text}."
        elif (
            t.kind == INT
            and adjacent
            and nxt.kind == ID
            and nxt.text[0] in "eE"
            and nxt.text[1:].isdigit()
        ):
            bad = t.text + nxt.text
        if bad is not None:
            raise self.error(
                f"'{bad}' is not a number: a FLOAT is digits '.' digits with an "
                "optional exponent (e.g. 1.0, 0.5, 1.0e5)",
                "LEX-02",
                "write digits on both sides of the '.'",
                t,
            )

    # ------------------------------------------------------------------
    # Building
    # ------------------------------------------------------------------
    def _add(self, op: _OpT, tok: Token) -> _OpT:
        op.location = self._loc(tok)
        self.block.add_op(op)
        return op

    def _loc(self, tok: Token) -> FileLineColLoc:
        """The location of an op written at `tok`."""
        ints = self._ints
        line = ints.get(tok.line) or ints.setdefault(tok.line, IntAttr(tok.line))
        col = ints.get(tok.col) or ints.setdefault(tok.col, IntAttr(tok.col))
        return file_loc(self._file_attr, line, col)

    def _literal(self, value: int, tok: Token) -> SSAValue:
        hit = self._literals[-1].get(value)  # (the current block's first: most hits)
        if hit is not None:
            return hit
        for cache in reversed(self._literals):
            hit = cache.get(value)
            if hit is not None:
                return hit
        const = create_op(
            arith.ConstantOp,
            (),
            _INDEX_RESULT,
            {"value": IntegerAttr(value, INDEX)},
            self._loc(tok),
        )
        self.block.add_op(const)
        result: SSAValue = _first(const.results)
        self._literals[-1][value] = result
        self._int_facts[id(result)] = (value, value, 0)
        self._int_values.append(result)
        return result

    # ------------------------------------------------------------------
    # What the parser knows of the integer values it built (D-BC-SEED)
    # ------------------------------------------------------------------
    def _static(self, value: SSAValue) -> int | None:
        """The static value of an integer value this parser built (None
        when it depends on a loop variable): `Evaluator.static`'s."""
        return self._int_facts[id(value)][0]

    def _forward(self, value: SSAValue, operand: SSAValue) -> None:
        """`value` names `operand` (a const or an integer let): the same
        static value, key and depth (`Evaluator`, `expression_depth`)."""
        self._int_facts[id(value)] = self._int_facts[id(operand)]
        self._int_values.append(value)

    def _loop_variable(self, value: SSAValue) -> None:
        """`value` is a loop variable: not static, a key of its own, depth 0."""
        self._int_facts[id(value)] = (None, self._key_table.leaf(), 0)
        self._int_values.append(value)

    def facts(self) -> BuildFacts:
        """What this parser established of the program it built, for
        `verify_program(facts=...)` on that program as built (D-BC-SEED):
        every integer value's static value and structural key, which the
        parser computes as `Evaluator.static` and `Evaluator.key` do (the
        operators of constants folded, each checked as it is read); the
        deepest expression as `expression_depth` counts it, the deepest
        loop nest (both bounded here, as the verifier's stage 0 bounds
        them); every name resolved in scope, so each operand is defined
        before its use in its block or an enclosing one.  Expressions parsed
        only for their value (an L1 index, a decorator argument) count too:
        they are bounded by the same limits."""
        values, facts = self._int_values, self._int_facts
        known = [facts[id(v)] for v in values]
        return BuildFacts(
            values,
            [f[0] for f in known],
            [f[1] for f in known],
            self._key_table,
            self._max_expr_depth,
            self._max_loop_depth,
            operands_in_scope=True,
        )

    @staticmethod
    def _untyped_region_type(level: MemLevelAttr) -> RegionType:
        return region_type(level)

    @staticmethod
    def _region_type(
        level: MemLevelAttr,
        elem: str,
        shape: list[int],
        layout: str | None,
        strides: list[int] | None,
        quant: Attribute | None,
    ) -> RegionType:
        return region_type(
            level,
            ELEM_BY_NAME[elem],
            tuple(shape),
            layout,
            tuple(strides) if strides is not None else None,
            quant,
        )

    def undeclared(self, tok: Token, message: str, rule: str, fix: str) -> NemDiagnosticError:
        """The error for a name not in scope: `message`, unless the name was
        declared in a loop body that has ended, which is then what it says
        (D-NAME-SCOPE), with how to use the name where it is visible."""
        ended = self.scope.ended_lookup(tok.text)
        if ended is None:
            return self.error(message, rule, fix, tok)
        iv, decl = ended
        fix = (
            f"wait({tok.text}) inside loop {iv}, before endloop (each iteration waits for its "
            "own task; endloop is not a barrier), or move the task out of the loop"
            if decl.kind == "token"
            else f"use it inside loop {iv}, or declare it before the loop"
        )
        return self.error(
            f"{decl.kind} '{tok.text}' is out of scope: it is declared in loop "
            f"{iv}'s body (line {decl.line}) and not visible after endloop "
            "(D-NAME-SCOPE)",
            rule,
            fix,
            tok,
        )

    def _declare(self, tok: Token, kind: str, value: SSAValue | None) -> None:
        # Duplicates are reported by the verifier (NAME-02); the newest wins here.
        self.scope.names[tok.text] = Name(kind, value, tok.line)
