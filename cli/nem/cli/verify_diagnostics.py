"""Upstream-MLIR-compatible ``--verify-diagnostics`` checking.

This module only *compares*: it reads ``expected-*`` comments from an input
text and checks a list of `Diagnostic`s (however they were produced: parser,
verifier, pass, runtime) against them.

Expectation syntax (``MARK`` is the comment marker: ``//`` for .mlir, ``#``
for .nem)::

    MARK expected-error {{substring}}        diagnostic on this very line
    MARK expected-warning@+1 {{substring}}   ... N lines below (@+N)
    MARK expected-remark@-2 {{substring}}    ... N lines above (@-N)
    MARK expected-note@above {{substring}}   the closest line above that is
                                             not itself an expectation line
    MARK expected-error@below {{substring}}  the closest line below that is
                                             not itself an expectation line
    MARK expected-error@12 {{substring}}     line 12 of the input (of its chunk
                                             with --split-input-file; NEM extension)
    MARK expected-error@unknown {{substring}} a diagnostic without location

Semantics follow upstream MLIR (``SourceMgrDiagnosticVerifierHandler``):

* an expectation matches a diagnostic of the same severity, on the same line
  of the same file, whose text *contains* the ``{{...}}`` substring; the text
  is the diagnostic's message followed by `` [RULE-ID]`` when it has a rule
  (i.e. `Diagnostic.headline()` without its location prefix), so tests can
  match rule ids;
* ``expected-<severity>-re`` (``MARK expected-error-re@+1 {{{{.*}}BUF-{{[0-9]+}}}}``):
  the message is literal text with ``{{regex}}`` parts, searched for in the
  diagnostic's text, as upstream's ``ExpectedDiag::computeRegex`` builds it
  (POSIX classes such as ``[[:digit:]]`` are understood); a ``{{`` without
  its ``}}`` or a regex that does not compile is a malformed expectation;
* ``@above``/``@below`` skip over other expectation lines, so several
  expectations can be stacked above or below the line they refer to (for a
  lone expectation this is just the line directly above/below); a dangling
  ``@below`` refers to the last line of the text, as upstream;
* several identical diagnostics may be satisfied by a single expectation
  (upstream behaviour), but every expectation needs its own diagnostic;
* a diagnostic that matches an expectation's line and text but not its
  severity is reported as ``'warning' diagnostic emitted when expecting a
  'error'`` (upstream's "near miss");
* notes attached to a diagnostic (``Diagnostic.notes``, recursively) are
  matched against ``expected-note`` too.  A note without location takes the
  location of the diagnostic it is attached to.  NEM simplification: an
  unmatched *attached* note is only reported as unexpected when the file
  contains at least one ``expected-note`` (a test that does not care about
  notes need not spell them out); a free-standing note diagnostic is always
  checked;
* diagnostics located in another file than the one checked (an included
  device file, ...) are always reported as unexpected, with their full
  location;
* an ``expected-*`` comment that does not have the form above (e.g. missing
  ``{{``/``}}``, unknown ``@`` designator) is itself an error;
* an expectation that no diagnostic meets is reported, as upstream, at the
  ``expected-...`` text of its comment (``file:line:col``, the line, a
  caret), not at the line it designates (D-OPT-VERIFY-LOC).

Only the comment part of a line is looked at: an expectation is a comment
(text after ``MARK``) that starts with ``expected-<severity>``, or with any
``expected-<word>`` followed by ``{{`` (reported as an unknown kind).

With ``--split-input-file`` each chunk (`nem.cli.split_input`) is checked on
its own: `parse_expectations` takes where the chunk starts in the file.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Iterable

from nem.dialect.diagnostics import Diagnostic, SourceLoc

__all__ = [
    "Expectation",
    "parse_expectations",
    "check",
    "verify",
    "diagnostic_text",
]


@dataclass
class Expectation:
    """One ``expected-<severity>`` comment.

    `line` is the line the diagnostic is expected on (None for ``@unknown``:
    a diagnostic without location); `comment_line`/`col` locate the comment
    itself.  A malformed comment is kept as an Expectation whose `malformed`
    holds the reason; `check` reports it as an error and it matches nothing.
    """

    severity: str
    line: int | None
    substring: str
    file: str
    comment_line: int
    col: int
    malformed: str | None = None
    regex: re.Pattern[str] | None = None
    """``expected-*-re``: the substring's literal text and ``{{regex}}`` parts."""

    def matches(self, text: str) -> bool:
        """Whether a diagnostic's text meets this expectation."""
        if self.regex is not None:
            return self.regex.search(text) is not None
        return self.substring in text

    def where(self) -> str:
        return str(self.comment())

    def comment(self) -> SourceLoc:
        """Where the comment's ``expected-...`` text starts."""
        return SourceLoc(self.file, self.comment_line, self.col)

    def failure(self, message: str) -> str:
        """An error about this expectation, at its comment with the source
        line and a caret, as upstream reports one (D-OPT-VERIFY-LOC)."""
        return Diagnostic("error", message, self.comment()).render()


# Text after "expected-<severity>": optional designator, then {{message}}.
_SEVERITY_RE = re.compile(r"expected-(error|warning|remark|note)\b")
_BODY_RE = re.compile(r"(?P<re>-re)?[ \t]*(?:@(?P<at>[^ \t{]*))?[ \t]*\{\{(?P<msg>.*)\}\}[ \t]*$")
_DESIGNATOR_RE = re.compile(r"[+-][0-9]+|above|below|unknown|[0-9]+")


def _comment_expectation(line: str, marker: str) -> int | None:
    """Column index (0-based) of ``expected-`` when a comment of `line`
    starts with it, else None."""
    start = 0
    while True:
        pos = line.find(marker, start)
        if pos < 0:
            return None
        rest = pos + len(marker)
        stripped = line[rest:].lstrip(" \t")
        if stripped.startswith("expected-"):
            return len(line) - len(stripped)
        start = rest


def parse_expectations(
    text: str, file: str, comment_marker: str, line_offset: int = 0, col_offset: int = 0
) -> list[Expectation]:
    """All ``expected-*`` comments of `text`, with the lines they refer to.

    `line_offset` is added to every line number, `col_offset` to the
    columns of the first line (for a chunk of a larger file that is passed
    without padding: `nem.cli.split_input.Chunk`); `@N` names line N of
    `text`, the chunk, counted from its first whole line: a chunk that
    starts within a line (after a split marker) starts at the next
    (D-OPT-VERIFY-LOC).
    """
    lines = text.split("\n")
    last_line = len(lines) + line_offset
    result: list[Expectation] = []
    last_non_designator: int | None = None
    pending_below: list[Expectation] = []

    for index, raw in enumerate(lines):
        lineno = index + 1 + line_offset
        raw = raw.rstrip("\r")
        col0 = _comment_expectation(raw, comment_marker)
        if col0 is not None and not _SEVERITY_RE.match(raw[col0:]) and "{{" not in raw[col0:]:
            col0 = None  # prose such as "# expected-output: 3", not an attempt
        if col0 is None:
            for exp in pending_below:
                exp.line = lineno
            pending_below.clear()
            last_non_designator = lineno
            continue

        comment = raw[col0:]
        sev_match = _SEVERITY_RE.match(comment)
        col = col0 + 1 + (col_offset if index == 0 else 0)
        if sev_match is None:
            word = comment.split()[0] if comment.split() else comment
            result.append(
                Expectation(
                    "error",
                    lineno,
                    "",
                    file,
                    lineno,
                    col,
                    malformed=f"unknown expectation kind '{word}' "
                    f"(expected-error, expected-warning, "
                    f"expected-remark or expected-note)",
                )
            )
            continue
        severity = sev_match.group(1)
        body = comment[sev_match.end() :]
        body_match = _BODY_RE.match(body)
        exp = Expectation(severity, lineno, "", file, lineno, col)
        result.append(exp)
        if body_match is None:
            if "{{" not in body:
                exp.malformed = "expected '{{' to start the expected message"
            elif "}}" not in body[body.index("{{") + 2 :]:
                exp.malformed = "expected '}}' to end the expected message"
            else:
                exp.malformed = (
                    "malformed expectation: expected "
                    f"'expected-{severity}[@designator] {{{{message}}}}'"
                )
            continue
        exp.substring = body_match.group("msg")
        if body_match.group("re"):
            try:
                exp.regex = expected_regex(exp.substring)
            except ValueError as e:
                exp.malformed = str(e)
                continue
        at = body_match.group("at")
        if at is None:
            continue
        if not _DESIGNATOR_RE.fullmatch(at):
            exp.malformed = (
                f"unknown designator '@{at}' (use @+N, @-N, @N, @above, @below or @unknown)"
            )
            continue
        if at[0] in "+-":
            delta = int(at[1:])
            exp.line = lineno + delta if at[0] == "+" else lineno - delta
        elif at == "above":
            if last_non_designator is None:
                exp.malformed = "'@above' has no line above it to refer to"
                continue
            exp.line = last_non_designator
        elif at == "below":
            exp.line = last_line  # upstream: a dangling @below names the last line
            pending_below.append(exp)
        elif at == "unknown":
            exp.line = None
        else:
            # line N of the chunk (D-OPT-VERIFY-LOC)
            exp.line = int(at) + line_offset + (1 if col_offset else 0)
        if exp.line is not None and exp.line < 1:
            exp.malformed = (
                f"designator '@{at}' refers to line {exp.line}, before the start of the file"
            )
    return result


_POSIX_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": r"\s",
    "blank": r" \t",
    "xdigit": "0-9A-Fa-f",
    "punct": r"!-/:-@\[-`{-~",
    "word": r"\w",
}


def expected_regex(message: str) -> re.Pattern[str]:
    """The pattern of an ``expected-*-re`` message: its text outside
    ``{{...}}`` literally, each ``{{regex}}`` in its place, as upstream's
    ``ExpectedDiag::computeRegex``; ValueError with upstream's wording when
    a ``{{`` has no ``}}`` or a regex does not compile."""
    parts: list[str] = []
    rest = message
    while rest:
        start = rest.find("{{")
        if start < 0:
            parts.append(re.escape(rest))
            break
        parts.append(re.escape(rest[:start]))
        rest = rest[start + 2 :]
        end = rest.find("}}")
        if end < 0:
            raise ValueError("found start of regex with no end '}}'")
        unknown = [c for c in re.findall(r"\[:(\w+):\]", rest[:end]) if c not in _POSIX_CLASSES]
        if unknown:
            raise ValueError(
                f"invalid regex: unknown character class '[:{unknown[0]}:]' (known: "
                f"{', '.join(_POSIX_CLASSES)})"
            )
        regex = re.sub(r"\[:(\w+):\]", lambda m: _POSIX_CLASSES[m[1]], rest[:end])
        try:
            re.compile(regex)
        except re.error as e:
            raise ValueError(f"invalid regex: {e}") from None
        parts.append(f"(?:{regex})")  # not a group: the user's group numbers stay theirs
        rest = rest[end + 2 :]
    try:  # parts that compile alone may not together (flags, a group name twice)
        return re.compile("".join(parts))
    except re.error as e:
        raise ValueError(f"invalid regex: {e}") from None


def diagnostic_text(diag: Diagnostic) -> str:
    """What expectations are matched against: the message and ``[RULE-ID]``."""
    return f"{diag.message} [{diag.rule}]" if diag.rule else diag.message


def _same_file(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def _flatten(diagnostics: Iterable[Diagnostic]) -> list[tuple[Diagnostic, SourceLoc | None, bool]]:
    """(diagnostic, effective location, is_attached_note) in emission order."""
    out: list[tuple[Diagnostic, SourceLoc | None, bool]] = []

    def visit(diag: Diagnostic, parent_loc: SourceLoc | None, attached: bool) -> None:
        loc = diag.loc if diag.loc is not None else (parent_loc if attached else None)
        out.append((diag, loc, attached))
        for note in diag.notes:
            visit(note, loc, True)

    for diag in diagnostics:
        visit(diag, None, False)
    return out


def check(expectations: list[Expectation], diagnostics: list[Diagnostic], file: str) -> list[str]:
    """Failure messages (empty when the diagnostics are exactly the expected ones)."""
    failures: list[str] = []
    valid: list[Expectation] = []
    for exp in expectations:
        if exp.malformed:
            failures.append(exp.failure(exp.malformed))
        else:
            valid.append(exp)
    matched = [False] * len(valid)
    notes_checked = any(e.severity == "note" for e in valid)

    for diag, loc, attached in _flatten(diagnostics):
        text = diagnostic_text(diag)
        severity = diag.severity
        if loc is not None and not _same_file(loc.file, file):
            # Expectations can only name lines of the checked file.
            if attached and severity == "note" and not notes_checked:
                continue
            failures.append(f"{loc}: error: unexpected {severity}: {text}")
            continue
        line = loc.line if loc is not None else None
        candidates = [i for i, e in enumerate(valid) if e.line == line and e.matches(text)]
        same_kind = [i for i in candidates if valid[i].severity == severity]
        if same_kind:
            # Prefer an expectation not yet satisfied, so that N expectations
            # need N diagnostics; a repeated diagnostic may reuse one.
            unmatched = [i for i in same_kind if not matched[i]]
            matched[(unmatched or same_kind)[0]] = True
            continue
        if attached and severity == "note" and not notes_checked:
            continue
        where = str(loc) if loc is not None else file
        if candidates:
            near = valid[candidates[-1]]
            failures.append(
                f"{where}: error: '{severity}' diagnostic emitted when "
                f"expecting a '{near.severity}' (expectation at "
                f"{near.where()}): {text}"
            )
        else:
            failures.append(f"{where}: error: unexpected {severity}: {text}")

    for exp, ok in zip(valid, matched):
        if not ok:
            failures.append(
                exp.failure(f'expected {exp.severity} "{exp.substring}" was not produced')
            )
    return failures


def verify(text: str, file: str, comment_marker: str, diagnostics: list[Diagnostic]) -> int:
    """Check `diagnostics` against the expectations of `text`; print failures
    to stderr; 0 when all is as expected, 1 otherwise."""
    failures = check(parse_expectations(text, file, comment_marker), diagnostics, file)
    for message in failures:
        print(message, file=sys.stderr)
    return 1 if failures else 0
