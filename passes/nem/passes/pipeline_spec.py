"""Pass pipeline specs as users write them, checked before xDSL builds the
passes, with every error located in the text the user typed.

    check_pipeline("builtin.module(nem-verify{device=npm_lite})", passes,
                   anchored=True)  ->  'nem-verify{device=npm_lite}'

* `-p 'p1,p2{opt=v}'` takes a bare list or mlir-opt's
  `builtin.module(p1,p2{opt=v})`; `--pass-pipeline` requires the anchor, as
  mlir-opt does (D-OPT-PIPELINE, D-OPT-PIPELINE-ANCHOR).  Nested anchors
  (`func.func(...)`) are not supported: NEM passes run on the module.
* `memory-spaces=0:DDR,1:L2` and `weights=w.npz` need no quotes: the values
  are quoted before xDSL's lexer sees them (D-LOW-OPT-SPACES).
* A syntax error, an unknown pass or option, or a value of the wrong type
  is a `PipelineError`: the message names the pass and the option as the
  user spelt them, says what is expected (the pass's options, `true` or
  `false`, ...) with a did-you-mean, and its column counts in the string
  the user typed (D-OPT-PIPELINE-ERRORS).  The tools print it with
  `PipelineError.render(flag)`, naming the option the user gave.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections.abc import Callable, Mapping
from types import NoneType, UnionType
from typing import Any

from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, PipelineLexer, SpecTokenKind, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.utils.hints import isa

from nem.dialect.diagnostics import NemDiagnosticError

PassFactory = Callable[[], type[ModulePass]]

ANCHOR_EXAMPLE = "builtin.module(pass1,pass2{option=value})"


class PipelineError(ValueError):
    """A pipeline spec that cannot be used: `message`, the 1-based column in
    `spec` it is about (None: the whole spec) and a `fix`."""

    def __init__(self, message: str, spec: str, col: int | None = None, fix: str | None = None):
        super().__init__(message)
        self.message, self.spec, self.col, self.fix = message, spec, col, fix

    def render(self, flag: str) -> str:
        """`nem-opt: error: FLAG: ...`, the spec with a caret under the
        column, and the fix."""
        where = f", column {self.col}" if self.col is not None else ""
        lines = [f"nem-opt: error: {flag}{where}: bad pass pipeline: {self.message}"]
        if self.col is not None and "\n" not in self.spec:
            lines += [self.spec, " " * (self.col - 1) + "^"]
        if self.fix:
            lines.append(f"fix: {self.fix}")
        return "\n".join(lines)


def check_pipeline(
    spec: str, available: Mapping[str, PassFactory], *, anchored: bool = False
) -> str:
    """The text xDSL's `PassPipeline.parse_spec` takes for `spec`: the
    `builtin.module(...)` anchor removed (required when `anchored`: mlir-opt's
    `--pass-pipeline`) and option values quoted, once every pass name,
    option and value is known to be good; else `PipelineError`."""
    if not anchored and not spec.strip():
        return ""  # no pass: nothing to check (and no pass module to import)
    inner, start = _unwrap_anchor(spec, anchored)
    _check_nesting(spec, inner, start)
    text, origin = _blanks_between_passes_dropped(*_quote(inner, start))

    def col(i: int) -> int:  # a position of `text` as a column of `spec`
        return (origin[i] if i < len(origin) else start + len(inner)) + 1

    _check_braces(spec, text, col)
    _check_empty_items(spec, text, col)
    try:
        specs = list(parse_pipeline(text))
    except ArgSpecParseError as e:
        at, message = _xdsl_syntax_error(str(e), text)
        raise PipelineError(message, spec, col(at)) from None
    names, keys = _positions(text)
    for i, s in enumerate(specs):
        factory = available.get(s.name)
        if factory is None:
            near = difflib.get_close_matches(s.name, list(available), n=1)
            raise PipelineError(
                f"unknown pass '{s.name}'" + (f"; did you mean '{near[0]}'?" if near else ""),
                spec,
                col(names[i]),
                "nem-opt --help lists the passes",
            )
        _check_options(s, factory(), spec, [(k, col(p)) for k, p in keys[i]])
    return text


def quote_option_values(spec: str) -> str:
    """`spec` with every `memory-spaces=VALUE` and `weights=FILE` inside a
    pass's `{...}` quoted, and every `memory-spaces` value checked with
    `parse_spaces` (D-LOW-OPT-SPACES).

    xDSL's pipeline lexer has no `:` (nor `[`, `.`, `/`), so MLIR's spelling
    `lower-to-nem{memory-spaces=0:DDR,1:L2,2:L1[0] weights=w.npz device=X}`
    would not parse; each such value (up to the next blank or `}`) becomes
    `"0:DDR,1:L2,2:L1[0]"`, `"w.npz"`, the quoted form xDSL already accepts.
    A bad `memory-spaces` value raises a `NemDiagnosticError` naming the
    pass, the option and the item, before any input is read."""
    return _quote(spec, 0)[0]


_PASS_OPTIONS = re.compile(r'(?P<name>[\w.-]*)\{(?P<opts>(?:"[^"]*"|[^}"])*)\}')
_QUOTED_OPTION = re.compile(
    r'(?<!\S)(?P<key>(?:memory[-_]spaces|weights)=)(?P<value>"[^"]*"|[^\s"]*)'
)
_ANCHOR = re.compile(r"\s*(?P<name>(?:builtin\.)?module)\s*\(")
_OTHER_ANCHOR = re.compile(r"\s*(?P<name>[\w.]+)\s*\(")
_STRINGS = re.compile(r'"[^"]*"')


def _quote(spec: str, start: int) -> tuple[str, list[int]]:
    """`quote_option_values(spec)` and, for each of its characters, its
    position in the user's text (`spec` starts at `start` there; an added
    quote has the position of the character it precedes)."""
    from nem.passes.lowering.context import parse_spaces

    out: list[str] = []
    origin: list[int] = []

    def copy(a: int, b: int) -> None:
        out.append(spec[a:b])
        origin.extend(range(start + a, start + b))

    pos = 0
    for m in _PASS_OPTIONS.finditer(spec):
        base = m.start("opts")
        for o in _QUOTED_OPTION.finditer(m["opts"]):
            value = o["value"].strip('"')
            if o["key"].startswith("memory"):
                try:
                    parse_spaces(value)
                except NemDiagnosticError as e:
                    for d in e.diagnostics:
                        d.message = f"{m['name'] or 'pass'}: {d.message}"
                    raise
            if o["value"].startswith('"'):
                continue
            a, b = base + o.start("value"), base + o.end("value")
            copy(pos, a)
            out.append(f'"{value}"')
            origin.extend([start + a, *range(start + a, start + b), start + b])
            pos = b
    copy(pos, len(spec))
    return "".join(out), origin


def _unwrap_anchor(spec: str, anchored: bool) -> tuple[str, int]:
    """The pipeline inside `builtin.module(...)` and where it starts in
    `spec` (D-OPT-PIPELINE-ANCHOR); blanks around it are dropped."""
    m = _ANCHOR.match(spec)
    other = _OTHER_ANCHOR.match(spec)
    if (
        m is None
        and other is not None
        and _matching_paren(spec, other.end()) == len(spec.rstrip()) - 1
    ):
        body = _without_nested(spec[other.end() : len(spec.rstrip()) - 1].strip())
        raise PipelineError(
            f"not supported: pipeline anchor '{other['name']}(...)': nem-opt runs its passes "
            "on the module, anchored on 'builtin.module(...)'",
            spec,
            other.start("name") + 1,
            f"--pass-pipeline='builtin.module({body})', or -p '{body}'",
        )
    if m is None:
        if anchored and spec.strip():
            bare = _without_nested(spec.strip())
            raise PipelineError(
                "expected pass pipeline to be wrapped with the anchor operation type, "
                "e.g. 'builtin.module(...)' (as mlir-opt)",
                spec,
                None,
                f"--pass-pipeline='builtin.module({bare})', or -p '{bare}' "
                "for a bare list of passes",
            )
        inner, start = spec, 0
    else:
        close = _matching_paren(spec, m.end())
        if close is None:
            end = len(spec.rstrip())
            raise PipelineError(
                f"missing ')' closing '{m['name']}(' (opened at column {m.end()})",
                spec,
                end + 1,
                f"end the pipeline with ')': '{spec.rstrip()})'",
            )
        rest = spec[close + 1 :]
        if rest.strip():
            at = close + 1 + len(rest) - len(rest.lstrip())
            what = "extra ')'" if rest.lstrip().startswith(")") else "unexpected text"
            raise PipelineError(
                f"{what} after the ')' that closes '{m['name']}(' (column {close + 1})",
                spec,
                at + 1,
                f"the pipeline is one '{ANCHOR_EXAMPLE}'",
            )
        inner, start = spec[m.end() : close], m.end()
    lead = len(inner) - len(inner.lstrip())
    return inner.strip(), start + lead


def _matching_paren(spec: str, pos: int) -> int | None:
    """The index of the `)` that closes the `(` before `pos` (parentheses
    in quoted option values do not count), None when there is none."""
    depth, quoted = 1, False
    for i in range(pos, len(spec)):
        c = spec[i]
        if c == '"':
            quoted = not quoted
        elif not quoted and c in "()":
            depth += 1 if c == "(" else -1
            if depth == 0:
                return i
    return None


_NESTED = re.compile(r"(?<![\w\"])([\w.]+)\s*\(")


def _check_nesting(spec: str, inner: str, start: int) -> None:
    """A nested pipeline `NAME(...)` is refused; the fix is the pipeline
    with every nested anchor dropped (its passes kept)."""
    nested = _NESTED.search(_STRINGS.sub(lambda m: '"' * len(m[0]), inner))
    if nested:
        flat = _without_nested(inner)
        wrapped = (
            spec[:start] + flat + spec[start + len(inner) :] if start else f"builtin.module({flat})"
        )
        raise PipelineError(
            f"not supported: nested pass pipeline '{nested.group(1)}(...)': NEM passes "
            "run on the whole module",
            spec,
            start + nested.start() + 1,
            f"list the passes without the nested anchor: '{wrapped.strip()}'",
        )


def _without_nested(inner: str) -> str:
    """`inner` with each `NAME(` and its `)` removed (outside quotes)."""
    while (m := _NESTED.search(_STRINGS.sub(lambda s: '"' * len(s[0]), inner))) is not None:
        close = _matching_paren(inner, m.end())
        close = len(inner) if close is None else close
        after = inner[close + 1 :]
        sep = "," if after[:1].isalnum() else ""  # `a(b)c` is `b,c`, not `bc`
        inner = inner[: m.start()] + inner[m.end() : close] + sep + after
    return inner


def _check_empty_items(spec: str, text: str, col: Callable[[int], int]) -> None:
    """An empty item of the pass list (`a,,b`, `,a`, `a,`) is an error at
    the place of the missing name (mlir-opt: "'' does not refer to a
    registered pass"); xDSL took a trailing comma."""
    if not text:
        return
    depth, quoted, item = 0, False, 0
    for i, c in enumerate(text + ","):
        if c == '"':
            quoted = not quoted
        elif not quoted and c in "{}":
            depth += 1 if c == "{" else -1
        elif not quoted and depth == 0 and c == ",":
            if i == item:
                raise PipelineError("expected pass name here", spec, col(i), "drop the extra ','")
            item = i + 1


def _check_braces(spec: str, text: str, col: Callable[[int], int]) -> None:
    """An option list `{...}` left open is reported at the end of the
    pipeline, naming the pass it belongs to."""
    opened: int | None = None
    for m in re.finditer(r'"[^"]*"|[{}]', text):
        if m[0] == "{":
            opened = m.start() if opened is None else opened
        elif m[0] == "}":
            opened = None
    if opened is not None:
        name = re.search(r"[\w.-]*$", text[:opened])
        raise PipelineError(
            f"missing '}}' closing the options of '{name[0] if name else ''}' "
            f"(opened at column {col(opened)})",
            spec,
            col(len(text)),
            "close the option list with '}'",
        )


def _blanks_between_passes_dropped(text: str, origin: list[int]) -> tuple[str, list[int]]:
    """`text` without the blanks outside `{...}` and quotes, with `origin`
    kept aligned: mlir-opt reads `builtin.module(p1, p2)`, xDSL's lexer
    takes a blank outside options for the end of the pipeline.  Blanks
    inside `{...}` separate options and stay."""
    keep_text, keep_origin = [], []
    depth, quoted = 0, False
    for ch, at in zip(text, origin):
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            depth += ch == "{"
            depth -= ch == "}"
            if depth == 0 and ch.isspace():
                continue
        keep_text.append(ch)
        keep_origin.append(at)
    return "".join(keep_text), keep_origin


def _xdsl_syntax_error(text: str, spec: str) -> tuple[int, str]:
    """(index in `spec`, message) of xDSL's `ArgSpecParseError` text
    (`pass-pipeline:LINE:COL`, the line, a caret, the message)."""
    m = re.search(r"pass-pipeline:(\d+):(\d+)", text)
    lines = [s.strip() for s in text.strip().splitlines() if s.strip()]
    message = lines[-1] if lines else text
    message = message[:1].lower() + message[1:]
    if m is None:
        return len(spec), message
    line, col = int(m[1]), int(m[2])
    starts = [0] + [i + 1 for i, c in enumerate(spec) if c == "\n"]
    return (starts[line - 1] if line <= len(starts) else 0) + col - 1, message


def _positions(text: str) -> tuple[list[int], list[list[tuple[str, int]]]]:
    """The index of each pass name of a pipeline that parses, and of each
    of its option keys (with the key as written)."""
    names: list[int] = []
    keys: list[list[tuple[str, int]]] = []
    lexer = PipelineLexer(text)
    depth, expect_key, prev = 0, False, SpecTokenKind.COMMA
    while (tok := lexer.lex()).kind is not SpecTokenKind.EOF:
        if tok.kind is SpecTokenKind.L_BRACE:
            depth, expect_key = 1, True
        elif tok.kind is SpecTokenKind.R_BRACE:
            depth = 0
        elif tok.kind is SpecTokenKind.SPACE:
            expect_key = depth == 1
        elif tok.kind is SpecTokenKind.IDENT and depth == 0 and prev is SpecTokenKind.COMMA:
            names.append(tok.span.start)
            keys.append([])
        elif tok.kind is SpecTokenKind.IDENT and expect_key:
            keys[-1].append((tok.span.text, tok.span.start))
            expect_key = False
        prev = tok.kind
    return names, keys


def _check_options(
    s: ArgSpec, cls: type[ModulePass], spec: str, keys: list[tuple[str, int]]
) -> None:
    """Every option of `s` is one of the pass's, with a value of its type."""
    fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
    known = [f.replace("_", "-") for f in fields]
    hints = typing.get_type_hints(cls) if fields else {}
    for key, col in keys:
        field = key.replace("-", "_")
        if field not in fields:
            near = difflib.get_close_matches(key.replace("_", "-"), known, n=1)
            raise PipelineError(
                f"pass '{s.name}' has no option '{key}'"
                + (f"; did you mean '{near[0]}'?" if near else ""),
                spec,
                col,
                f"its options: {', '.join(known)}"
                if known
                else f"'{s.name}' takes no options: write '{s.name}'",
            )
        value = s.parameters[key]
        if not _fits(value, hints[field]):
            what, example = _describe(hints[field])
            shown = ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in value)
            given = f"not '{shown}'" if value else "and has no value"
            raise PipelineError(
                f"option '{key}' of pass '{s.name}' expects {what}, {given}",
                spec,
                col,
                f"write {key}={example}",
            )
    missing = [
        f
        for f in fields
        if f not in s.normalize_parameter_names().parameters and f in cls.required_fields()
    ]
    if missing:
        raise PipelineError(
            f"pass '{s.name}' needs option '{missing[0].replace('_', '-')}'",
            spec,
            None,
            f"write {s.name}{{{missing[0].replace('_', '-')}=...}}",
        )


def _optional(t: Any) -> tuple[Any, bool]:
    """(the type without `None`, whether `None` was allowed)."""
    if typing.get_origin(t) in (typing.Union, UnionType) and NoneType in typing.get_args(t):
        rest = [a for a in typing.get_args(t) if a is not NoneType]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return t, False


def _fits(value: tuple[object, ...], t: Any) -> bool:
    """xDSL's conversion rule (`ArgSpecConvertible.from_spec`): no value for
    an optional option, one value of the type, or a tuple of the type."""
    base, optional = _optional(t)
    if not value:
        return optional
    return (len(value) == 1 and isa(value[0], base)) or isa(value, base)


_EXPECTED = {
    bool: ("true or false", "true|false"),
    int: ("an integer", "N"),
    float: ("a number", "X"),
    str: ("a name or a quoted string", '"text"'),
}


def _describe(t: Any) -> tuple[str, str]:
    base, _ = _optional(t)
    if base in _EXPECTED:
        return _EXPECTED[base]
    if typing.get_origin(base) is tuple:
        item = typing.get_args(base)[0]
        what = {int: "integers", str: "names or quoted strings"}.get(item, "values")
        return f"{what} separated by commas", f"{_EXPECTED.get(item, ('', 'v'))[1]},..."
    return f"a value of type {getattr(base, '__name__', base)}", "value"
