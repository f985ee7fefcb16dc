"""Recursive-descent parser for `.nem` programs, building NEM IR directly.

Grammar: SPEC §12.  Where the grammar is unclear the parser accepts the
whitepaper's text as written and the choice is recorded in
docs/spec-decisions.md:

* D-GRAM-LETDECO: decorators may follow `let NAME = region(...)`.
* D-LEX-1: element-type names, `strides`, `layout` are contextual keywords,
  so `accum_type=i32` and `strides=[1,1]` are ordinary compute attributes.
* D-GRAM-1: a compute attribute list ends at the first token that is not
  `deps=[...]`/`ID = value`, where `ID = CALL` (a task such as
  `tR = relu.async`) and `ID = region(` start the next statement.
* D-DECO-BIND: decorators after an operand that apply only to tasks
  (`@resource`, `@seq_engine`, `@deterministic`) bind to the task.
* D-EXPR-PREC: `* / mod` bind tighter than `+ -`; all left-associative.

Name resolution happens here (the IR refers to values, not names); the
static rules themselves (NAME-02 duplicates, CONST-*, extents, ...) are
checked by `nem.dialect.verifier` so that IR built by lowerings is held to
the same rules.
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Attribute, Block, SSAValue

from nem.dialect.attributes import (
    ELEM_BY_NAME,
    ArgRefAttr,
    BufferType,
    DecoratorAttr,
)
from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, fail
from nem.dialect.expressions import BuildFacts
from nem.dialect.gc_pause import gc_paused
from nem.dialect.limits import MAX_NESTING_DEPTH
from nem.dialect.ops import (
    COMPUTE_OPS,
    BufferOp,
    ConstOp,
    LetOp,
    LoopOp,
    ProgramOp,
    StoreOp,
    TransferOp,
    WaitOp,
)
from nem.frontends.nem_text import config_parser
from nem.frontends.nem_text.cursor import describe
from nem.frontends.nem_text.expression_parser import (
    ParsedValue,
    Scope,
)
from nem.frontends.nem_text.lexer import CALL, ID, PUNCT, STRING, Token, unquote
from nem.frontends.nem_text.region_parser import RegionParser
from nem.frontends.nem_text.statement_ops import SharedAttrs, compute_op, move_op


class ProgramParser(RegionParser):
    """Statements and the document structure of a `.nem` program."""

    # Document structure (GRAM-01, GRAM-02)
    # ------------------------------------------------------------------
    def parse_program(self) -> ProgramOp:
        self._shared_attrs = SharedAttrs()
        includes = []
        while self.at("include"):
            path, _ = config_parser.parse_include(self)
            includes.append(path)
        device_kind = device = None
        start = self.tok
        if self.at("device"):
            device_kind, device = self._device_directive()
        name = None
        if self.at("program") and self.peek().kind == ID:
            self.advance()
            name = self.expect_id("GRAM-02", "a program name").text
            self.expect(":", "GRAM-02", "after the program name")
        while not self.at_eof():
            self._statement()
        prog = ProgramOp(name, self.block, device_kind, device, tuple(includes))
        # The program's location is its device directive (or its first token):
        # device diagnostics point there.
        prog.location = SourceLoc(self.file, start.line, start.col).to_attr()
        return prog

    def _device_directive(self) -> tuple[str, str]:
        nxt = self.peek()
        if nxt.kind == STRING:
            self.advance()
            path = unquote(self.advance().text)
            if not path:
                raise self.error(
                    "the device directive names an empty path",
                    "DEV-20",
                    'name a device file, e.g. device "npm_lite.nem"',
                    nxt,
                )
            return "file", path
        if nxt.kind == ID and self.peek(2).text not in ("{", "extends"):
            self.advance()
            return "name", self.advance().text
        decl = config_parser.parse_device_config(self)
        from nem.frontends.nem_text.config_printer import print_device_decl

        return "inline", print_device_decl(decl)

    # ------------------------------------------------------------------
    # Statements (GRAM-03)
    # ------------------------------------------------------------------
    def _statement(self) -> None:
        t = self.tok
        if t.kind == ID:
            word = t.text
            if word == "const":
                return self._const()
            if word == "let":
                return self._let()
            if word == "buffer":
                return self._buffer()
            if word == "loop":
                return self._loop()
            if word == "wait" and self.peek().text == "(":
                return self._task(None)
            if word in ("program", "device", "include", "type_family"):
                rule = "GRAM-01" if word in ("include", "type_family") else "GRAM-02"
                raise self.error(
                    f"'{word}' is not allowed here: a program file holds includes, "
                    "then at most one device directive, then at most one "
                    "`program NAME:` header, then statements",
                    rule,
                    "move it to the top of the file or into a separate config document",
                )
            if self.peek().text == "=" and self.peek().kind != STRING:
                nxt = self.peek(2)
                if nxt.text == "region" and self.peek(3).text == "(":
                    return self._region_decl()
                if nxt.kind == CALL or (nxt.text == "wait" and self.peek(3).text == "("):
                    return self._task(self._assign())
                self._reject_split_task_keyword(2)
            self._reject_split_task_keyword(0)
            if word == "endloop":
                raise self.error(
                    "'endloop' without a matching 'loop'",
                    "GRAM-11",
                    "remove it or open the loop with `loop i in [a..b]:`",
                )
        if t.kind == CALL:
            return self._task(None)
        if self.accept(";"):
            return None
        if t.kind == PUNCT and t.text == "@":
            raise self.error(
                "a decorator cannot start a statement",
                "GRAM-17",
                "put it right after the buffer, region, task or loop header it "
                "decorates (loop decorators go before the ':')",
                t,
            )
        raise self.error(
            f"expected a statement, found {describe(t)}",
            "GRAM-03",
            "a statement is a const/let/buffer/region declaration, a task, a loop or ';'",
        )

    def _reject_split_task_keyword(self, k: int) -> None:
        """LEX-04: `transfer . async` or `relu.asink` is not a task keyword.

        Without this check such text falls through to a vague "expected a
        statement" error on the token name, far from the actual mistake."""
        word, dot, suffix = self.peek(k), self.peek(k + 1), self.peek(k + 2)
        if word.kind == ID and dot.kind == PUNCT and dot.text == "." and suffix.kind == ID:
            raise self.error(
                f"'{word.text} . {suffix.text}' is not a task keyword: a task is "
                "written OPCODE.async / OPCODE.sync as one token",
                "LEX-04",
                f"write `{word.text}.async` or `{word.text}.sync` with no spaces",
                dot,
            )

    def _assign(self) -> Token:
        name = self.advance()
        self.expect("=", "GRAM-15")
        return name

    def _const(self) -> None:
        kw = self.advance()
        name = self.expect_id("GRAM-06", "a constant name after 'const'")
        self.expect("=", "GRAM-06", "after the constant name")
        value = self._expr(const_ctx=True)
        self._end_of_expression("a const expression")
        op = self._add(ConstOp(name.text, value), kw)
        self._forward(op.result, value)
        self._declare(name, "const", op.result)

    def _let(self) -> None:
        kw = self.advance()
        name = self.expect_id("GRAM-06", "a name after 'let'")
        self.expect("=", "GRAM-06", "after the let name")
        if self.at("region") and self.peek().text == "(":
            value = self._region_expr(name.text, "let", kw)
            self._declare(name, "region", value)
            return
        val = self._value()
        if val.kind == "int":
            value = cast(SSAValue, val.data)
            op = self._add(LetOp(name.text, ArgRefAttr(0), [value], True), kw)
            self._forward(op.results[0], value)
            self._declare(name, "let", op.result)
            self._no_decorators_on_let(name)
            return
        args: list[SSAValue] = []
        attr = self._value_attr(val, args)
        op = self._add(LetOp(name.text, attr, args, False), kw)
        self._declare(name, "value", None)
        self._no_decorators_on_let(name)

    def _no_decorators_on_let(self, name: Token) -> None:
        """GRAM-06: only a `let NAME = region(...)` takes decorators
        (D-GRAM-LETDECO); on any other let they would decorate nothing."""
        self._end_of_expression("a let binding")
        if self.at_punct("@") and not self.tok.nl_before:
            raise self.error(
                f"let '{name.text}' binds a value, which takes no decorators",
                "GRAM-06",
                "drop the decorator, or bind a region: "
                f"let {name.text} = region(...) @materialized",
                self.tok,
            )

    def _end_of_expression(self, what: str) -> None:
        """GRAM-16: an expression ends at the end of its line; a comparison
        or other operator left on the line is not part of the expression
        grammar (only + - * / mod and parentheses are)."""
        t = self.tok
        if t.kind == PUNCT and not t.nl_before and t.text in ("<", ">", "=", "(", "[", "."):
            raise self.error(
                f"'{t.text}' cannot continue {what}: expressions combine INT, "
                "ID and (expr) with + - * / mod only",
                "GRAM-16",
                "no comparisons, calls or unary operators",
                t,
            )

    def _buffer(self) -> None:
        kw = self.advance()
        name = self.expect_id("GRAM-04", "a buffer name after 'buffer'")
        self.expect(":", "GRAM-04", "after the buffer name")
        level = self._mem_level()
        self.expect("(", "GRAM-04", "to open the buffer properties")
        size = None
        align = None
        while True:
            prop = self.expect_id("GRAM-04", "'size' or 'align'")
            self.expect("=", "GRAM-04")
            if prop.text == "size":
                if size is not None:
                    raise self.error("'size' given twice", "BUF-06", "keep one size=...", prop)
                size = self._expr()
            elif prop.text == "align":
                if align is not None:
                    raise self.error("'align' given twice", "BUF-06", "keep one align=...", prop)
                align = self.expect_int(
                    "GRAM-04", "an integer literal for align", "align takes a literal such as 64"
                )
            else:
                raise self.error(
                    f"unknown buffer property '{prop.text}'",
                    "GRAM-04",
                    "buffer properties are size=expr and align=INT",
                    prop,
                )
            if not self.accept(","):
                break
        self.expect(")", "GRAM-04", "to close the buffer properties")
        if size is None:
            raise self.error(
                f"buffer '{name.text}' has no size",
                "BUF-06",
                "add size=<bytes> to the buffer properties",
                name,
            )
        decos = self._decorators()
        btype = self._buffer_types.get(level)
        if btype is None:
            btype = self._buffer_types[level] = BufferType(level)
        op = self._add(BufferOp(name.text, btype, size, align, decos), kw)
        self._declare(name, "buffer", op.result)

    def _loop(self) -> None:
        kw = self.advance()
        iv = self.expect_id("GRAM-11", "a loop variable")
        self.expect("in", "GRAM-11", "after the loop variable")
        self.expect("[", "GRAM-11", "to open the loop range")
        lower = self._expr()
        self.expect(
            "..",
            "GRAM-11",
            "between the loop bounds",
            "write the range as [first..last], bounds inclusive",
        )
        upper = self._expr()
        self.expect("]", "GRAM-11", "to close the loop range")
        decos = self._decorators()
        colon = self.expect(
            ":",
            "GRAM-11",
            "after the loop header",
            "loop decorators come before the colon: loop i in [0..N-1] @max_in_flight(2):",
        )
        if self.at_punct("@") and self.tok.line == colon.line:
            raise self.error(
                "loop decorators come before the colon",
                "GRAM-11",
                "write loop i in [a..b] @max_in_flight(N):",
                self.tok,
            )
        body = Block(arg_types=[IndexType()])
        self._loop_depth += 1
        self._max_loop_depth = max(self._max_loop_depth, self._loop_depth)
        if self._loop_depth > MAX_NESTING_DEPTH:
            raise self.error(
                f"loops nested more than {MAX_NESTING_DEPTH} deep (limit D-LIMITS)",
                None,
                "flatten the loop nest",
                kw,
            )
        outer_block, outer_scope = self.block, self.scope
        self.block, self.scope = body, Scope(outer_scope, in_loop=True)
        self._literals.append({})
        self._loop_variable(body.args[0])
        self._declare(iv, "loopvar", body.args[0])
        while not self.at("endloop"):
            if self.at_eof():
                raise self.error(
                    f"loop '{iv.text}' is not closed: expected 'endloop'",
                    "GRAM-11",
                    "add 'endloop' after the loop body",
                    kw,
                )
            self._statement()
        self.advance()
        self._loop_depth -= 1
        outer_scope.end_loop(self.scope, iv.text)
        self.block, self.scope = outer_block, outer_scope
        self._literals.pop()
        self._add(LoopOp(iv.text, lower, upper, body, decos), kw)

    def _region_decl(self) -> None:
        name = self.advance()
        self.advance()  # '='
        value = self._region_expr(name.text, "decl", name)
        self._declare(name, "region", value)

    # ------------------------------------------------------------------
    # Tasks (GRAM-12..15)
    # ------------------------------------------------------------------
    def _task(self, assign: Token | None) -> None:
        t = self.tok
        start = assign or t
        if t.text == "wait":
            if assign is not None:
                raise self.error(
                    "'wait' produces no token and cannot be assigned",
                    "TASK-04",
                    f"drop '{assign.text} ='",
                    assign,
                )
            self.advance()
            self.expect("(", "GRAM-13", "after 'wait'")
            toks = self._id_list("GRAM-13")
            self.expect(")", "GRAM-13")
            decos = self._decorators()
            self._add(WaitOp([self._token(x) for x in toks], decos), start)
            return
        call = self.advance()
        base, mode = call.text.rsplit(".", 1)
        sync = mode == "sync"
        token_name = assign.text if assign else None
        if base in ("transfer", "store"):
            self.expect("(", "GRAM-12", f"after '{call.text}'")
            self.expect("dst", "GRAM-12", "(arguments are dst=..., src=..., deps=[...])")
            self.expect("=", "GRAM-12")
            role_decos: list[list[DecoratorAttr]] = []
            task_decos: list[DecoratorAttr] = []
            dst = self._operand(role_decos, task_decos)
            self.expect(",", "GRAM-12")
            self.expect("src", "GRAM-12", "(arguments are dst=..., src=..., deps=[...])")
            self.expect("=", "GRAM-12")
            src = self._operand(role_decos, task_decos)
            deps: list[Token] = []
            if self.accept(","):
                self.expect("deps", "GRAM-12", "(only deps=[...] may follow src=...)")
                self.expect("=", "GRAM-12")
                self.expect("[", "GRAM-12")
                deps = self._id_list("GRAM-12")
                self.expect("]", "GRAM-12")
            self.expect(")", "GRAM-12", f"to close {call.text}(...)")
            decos = task_decos + self._decorators()
            cls = TransferOp if base == "transfer" else StoreOp
            op = move_op(
                cls,
                dst,
                src,
                [self._token(d) for d in deps],
                sync,
                token_name,
                decos,
                role_decos,
                self._loc(start),
            )
            self.block.add_op(op)
            if assign:
                self._declare(assign, "token", op.results[0])
            return
        self._compute(call, base, sync, assign, start)

    def _compute(
        self, call: Token, opcode: str, sync: bool, assign: Token | None, start: Token
    ) -> None:
        cls = COMPUTE_OPS.get(opcode)
        if cls is None:
            raise self.error(
                f"unknown opcode '{opcode}'",
                "TASK-11",
                "use an opcode of the registry (see docs/ops.md) or the escape hatch "
                '`compute.async in ... out ... op="name"`',
                call,
            )
        if self.at_punct("("):
            raise self.error(
                f"'{call.text}(' is not the compute form",
                "GRAM-14",
                f"write `{call.text} in <inputs> out <outputs> attr=value ...`"
                " (decision D-GRAM-COMPUTE)",
            )
        role_decos: list[list[DecoratorAttr]] = []
        task_decos: list[DecoratorAttr] = []
        self.expect("in", "GRAM-14", f"after '{call.text}'")
        ins = [self._operand(role_decos, task_decos)]
        while self.accept(","):
            ins.append(self._operand(role_decos, task_decos))
        self.expect("out", "GRAM-14", "after the input operands")
        outs = [self._operand(role_decos, task_decos)]
        while self.accept(","):
            outs.append(self._operand(role_decos, task_decos))
        deps: list[SSAValue] = []
        args: list[SSAValue] = []
        given: dict[str, ParsedValue] = {}
        spec = cls.SPEC
        while self.tok.kind == ID and self.peek().text == "=" and not self._starts_statement():
            key = self.advance()
            self.advance()
            if key.text == "deps":
                self.expect("[", "GRAM-14", "after deps=")
                deps.extend(self._token(x) for x in self._id_list("GRAM-14"))
                self.expect("]", "GRAM-14")
                continue
            if key.text in given:
                raise self.error(f"attribute '{key.text}' given twice", "TASK-13", "keep one", key)
            aspec = spec.attributes.get(key.text)
            if (
                aspec is not None
                and aspec.type == "elem"
                and self.tok.kind == ID
                and self.tok.text in ELEM_BY_NAME
            ):
                # An element-typed attribute names a type even where a
                # declared name has the same spelling (D-NAME-ELEM).
                type_tok = self.advance()
                given[key.text] = ParsedValue("id", type_tok.text, type_tok)
                continue
            given[key.text] = self._value()
        attrs: dict[str, Attribute] = {}
        for name in spec.canonical_attr_order(given):  # the IR keeps canonical order
            aspec = spec.attributes.get(name)
            attrs[name] = self._value_attr(given[name], args, aspec.type if aspec else None, name)
        decos = task_decos + self._decorators()
        op = compute_op(
            cls,
            ins,
            outs,
            deps,
            args,
            self._shared_attrs.get(attrs),
            sync,
            assign.text if assign else None,
            decos,
            role_decos,
            self._loc(start),
        )
        self.block.add_op(op)
        if assign:
            self._declare(assign, "token", op.results[0])

    def _starts_statement(self) -> bool:
        nxt = self.peek(2)
        return (
            nxt.kind == CALL
            or (nxt.text == "region" and self.peek(3).text == "(")
            or (nxt.text == "wait" and self.peek(3).text == "(")
        )

    def _value(self) -> ParsedValue:
        t = self.tok
        if t.kind == STRING:
            self.advance()
            return ParsedValue("string", unquote(t.text), t)
        if t.text == "[" and t.kind != STRING:
            self.advance()
            items = []
            if not self.at_punct("]"):
                with self._nested(t, "lists"):
                    items.append(self._value())
                    while self.accept(","):
                        items.append(self._value())
            self.expect("]", "GRAM-16", "to close the list")
            return ParsedValue("list", items, t)
        if t.text == "region" and self.peek().text == "(":
            return ParsedValue("region", self._region_expr(None, "inline", t), t)
        if (
            t.kind == ID
            and self.scope.lookup(t.text) is None
            and self.peek().text not in ("+", "-", "*", "/", "mod")
        ):
            self.advance()
            return ParsedValue("id", t.text, t)
        return self._numeric_value()


def parse_nem(
    text: str, file: str = "<stdin>", *, at: tuple[int, int] = (0, 0), chunk: bool = False
) -> ModuleOp:
    """Parse a `.nem` program into a module holding one `nem.program`.

    The cyclic garbage collector is paused meanwhile: the parser allocates
    only long-lived IR, and rescanning it costs about a third of the time.
    `text` is at most `max_source_bytes()` (D-LIMITS, as the tools).  `at`:
    the lines, and the characters on its first line, before `text` in
    `file`; `chunk`: `text` is a chunk of `--split-input-file` (D-OPT-SPLIT):
    locations are the file's, the work is the chunk's only, and an empty
    chunk is an empty program where an empty file is refused (D-DOC-EMPTY)."""
    return parse_nem_facts(text, file, at=at, chunk=chunk)[0]


def parse_nem_facts(
    text: str, file: str = "<stdin>", *, at: tuple[int, int] = (0, 0), chunk: bool = False
) -> tuple[ModuleOp, BuildFacts]:
    """`parse_nem`, and what the parser established of the program it
    built (`ProgramParser.facts`), for `verify_program(facts=...)` on that
    program as built (D-BC-SEED): each integer value's static value and
    structural key, the deepest expression and loop nest, and that every
    operand is in scope.  Every tool's `.nem` program passes here (nem-opt,
    nem-verify, nem-run, `NemInterpreter.load`), so an empty one is refused
    here, once."""
    from nem.dialect.arguments import check_text, check_type
    from nem.dialect.limits import max_source_bytes

    check_text("parse_nem", "text", text, max_source_bytes())
    check_type("parse_nem", "file", file, str, "a str (the name diagnostics give the text)")
    if not chunk and not text.strip():
        raise _empty_file(text, file)
    with gc_paused():
        parser = ProgramParser(text, file, at)
        module = ModuleOp([parser.parse_program()])
        return module, parser.facts()


def _empty_file(text: str, file: str) -> NemDiagnosticError:
    """An empty `.nem` file (no byte, or white space only) is refused,
    though the grammar's `program ::= ... { stmt }` takes it: such a file is
    a failed or interrupted write far more often than a program, and the
    tools ran it ("status: completed", exit 0), as they refuse an empty
    .onnx (an outside user, session 66; D-DOC-EMPTY).  A file of comments
    only is still an empty program: someone wrote it."""
    what = f"{len(text)} characters of white space" if text else "0 bytes"
    return fail(
        f"empty file: no program text ({what})",
        SourceLoc(file, 1, 1),
        None,
        "give the .nem file of the program (an empty one is most often an unfinished "
        "write: write it again)",
    )


__all__ = ["parse_nem", "parse_nem_facts", "ProgramParser", "NemDiagnosticError"]
