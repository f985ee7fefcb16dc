"""Unit tests for nem.cli.verify_diagnostics (upstream-style --verify-diagnostics)."""

from __future__ import annotations

import textwrap

import pytest

from nem.cli.split_input import Chunk, split_input
from nem.cli.verify_diagnostics import (
    check,
    diagnostic_text,
    expected_regex,
    parse_expectations,
    verify,
)
from nem.dialect.diagnostics import Diagnostic, SourceLoc

F = "vd_unit.nem"  # registered by no other test: failures quote no source line


def diag(
    severity: str,
    line: int | None,
    message: str,
    *,
    col: int = 1,
    file: str = F,
    rule: str | None = None,
    notes: list[Diagnostic] | None = None,
) -> Diagnostic:
    loc = SourceLoc(file, line, col) if line is not None else None
    return Diagnostic(severity, message, loc, rule, None, notes or [])


def lines_of(text: str, marker: str = "#") -> list[tuple[str, int | None, str]]:
    return [(e.severity, e.line, e.substring) for e in parse_expectations(text, F, marker)]


def run(text: str, diagnostics: list[Diagnostic], marker: str = "#") -> list[str]:
    return check(parse_expectations(text, F, marker), diagnostics, F)


# ---------------------------------------------------------------- parsing


def test_same_line_each_severity():
    text = textwrap.dedent("""\
        a  # expected-error {{bad a}}
        b  # expected-warning {{warn b}}
        c  # expected-remark {{rem c}}
        d  # expected-note {{note d}}
        """)
    assert lines_of(text) == [
        ("error", 1, "bad a"),
        ("warning", 2, "warn b"),
        ("remark", 3, "rem c"),
        ("note", 4, "note d"),
    ]


def test_relative_offsets():
    text = textwrap.dedent("""\
        # expected-error@+2 {{two below}}
        x
        y
        # expected-error@-3 {{three above}}
        # expected-error @+1 {{space before at}}
        z
        """)
    assert lines_of(text) == [
        ("error", 3, "two below"),
        ("error", 1, "three above"),
        ("error", 6, "space before at"),
    ]


def test_above_below_skip_designator_lines():
    text = textwrap.dedent("""\
        op1
        # expected-error@above {{on op1}}
        # expected-note@above {{also op1}}
        # expected-error@below {{on op2}}
        # expected-warning@below {{also op2}}
        op2
        """)
    assert lines_of(text) == [
        ("error", 1, "on op1"),
        ("note", 1, "also op1"),
        ("error", 6, "on op2"),
        ("warning", 6, "also op2"),
    ]


def test_above_below_directly_adjacent():
    text = "x\n# expected-error@above {{up}}\n# ok\n# expected-error@below {{down}}\ny\n"
    assert lines_of(text) == [("error", 1, "up"), ("error", 5, "down")]


def test_dangling_below_refers_to_last_line():
    text = "x\n# expected-error@below {{dangling}}"
    assert lines_of(text) == [("error", 2, "dangling")]


def test_absolute_line_and_unknown():
    text = "# expected-error@3 {{abs}}\n# expected-error@unknown {{nowhere}}\nx\n"
    assert lines_of(text) == [("error", 3, "abs"), ("error", None, "nowhere")]


def test_mlir_marker_and_message_with_braces():
    text = 'func.func @f() // expected-error {{custom op {{x}} "f" unknown}}\n'
    assert lines_of(text, "//") == [("error", 1, 'custom op {{x}} "f" unknown')]
    # In a .mlir file '#' is not a comment marker.
    assert lines_of("#map = x # expected-error {{no}}\n", "//") == []


def test_only_comments_starting_with_expected_count():
    text = textwrap.dedent("""\
        # RUN: nem-opt %s --verify-diagnostics
        # this mentions expected-error {{but is prose}}
        s = "expected-error {{in a string}}"
        # expected-output: 3
        """)
    assert lines_of(text) == []
    # Such prose is an ordinary line for @above/@below.
    assert lines_of("x\n# expected-output: 3\n# expected-error@above {{up}}\n") == [
        ("error", 2, "up")
    ]


@pytest.mark.parametrize(
    "comment, reason",
    [
        ("# expected-error bad message", "'{{'"),
        ("# expected-error {{unterminated", "'}}'"),
        ("# expected-error@sideways {{x}}", "unknown designator '@sideways'"),
        ("# expected-eror {{x}}", "unknown expectation kind 'expected-eror'"),
        ("# expected-error-re {{a{{b}}", "found start of regex with no end '}}'"),
        ("# expected-error-re {{a{{(b}}}}", "invalid regex: missing ), unterminated subpattern"),
        ("# expected-error@-5 {{x}}", "before the start of the file"),
        ("# expected-error@above {{x}}", "no line above"),
    ],
)
def test_malformed_comment_is_an_error(comment, reason):
    exps = parse_expectations(comment + "\n", F, "#")
    assert len(exps) == 1 and exps[0].malformed and reason in exps[0].malformed
    failures = check(exps, [], F)
    assert len(failures) == 1
    assert failures[0].startswith(f"{F}:1:3: error: ") and reason in failures[0]


def test_malformed_expectation_fails_even_if_diagnostic_matches():
    text = "x # expected-error bad\n"
    assert run(text, [diag("error", 1, "bad", col=3)]) == [
        f"{F}:1:5: error: expected '{{{{' to start the expected message",
        f"{F}:1:3: error: unexpected error: bad",
    ]


# ---------------------------------------------------------------- matching


def test_all_forms_match():
    text = textwrap.dedent("""\
        # expected-error@+1 {{plus}}
        l2  # expected-warning {{same}}
        l3
        # expected-remark@-1 {{minus}}
        # expected-note@above {{above}}
        # expected-error@below {{below}}
        l7
        # expected-error@7 {{absolute}}
        """)
    diags = [
        diag("error", 2, "plus one"),
        diag("warning", 2, "the same line"),
        diag("remark", 3, "minus"),
        diag("note", 3, "above"),
        diag("error", 7, "below"),
        diag("error", 7, "absolute line"),
    ]
    assert run(text, diags) == []
    assert verify(text, F, "#", diags) == 0


def test_substring_and_rule_id_match():
    d = diag("error", 1, "unknown device 'npx'", rule="NEM-DEV-001", col=7)
    assert diagnostic_text(d) == "unknown device 'npx' [NEM-DEV-001]"
    assert run("x # expected-error {{device 'npx'}}\n", [d]) == []
    assert run("x # expected-error {{[NEM-DEV-001]}}\n", [d]) == []
    assert run("x # expected-error {{npx' [NEM-DEV-001]}}\n", [d]) == []
    assert run("x # expected-error {{NEM-DEV-002}}\n", [d]) == [
        f"{F}:1:7: error: unexpected error: unknown device 'npx' [NEM-DEV-001]",
        f'{F}:1:5: error: expected error "NEM-DEV-002" was not produced',
    ]


def test_regex_expectations():
    """`expected-*-re`: literal text with `{{regex}}` parts (upstream's
    ExpectedDiag::computeRegex), searched for in the diagnostic's text."""
    d = diag("error", 1, "need ceil(8 * 16 / 8) = 16 bytes", rule="BUF-02", col=7)
    for message in (
        "{{.*}}BUF-{{[0-9]+}}{{.*}}",
        "ceil(8 * 16 / 8) = {{1[[:digit:]]}} bytes [BUF-02]",
        "{{[a-z]+}} ceil",
        "= {{16|32}}",
    ):
        assert run(f"x # expected-error-re {{{{{message}}}}}\n", [d]) == [], message
    # the literal parts are not regex: `.` and `*` match only themselves
    assert run("x # expected-error-re {{ceil(8 . 16{{.*}}}}\n", [d]) == [
        f"{F}:1:7: error: unexpected error: need ceil(8 * 16 / 8) = 16 bytes [BUF-02]",
        f'{F}:1:5: error: expected error "ceil(8 . 16{{{{.*}}}}" was not produced',
    ]
    # every severity, every designator
    assert run("# expected-warning-re@+1 {{w{{[0-9]}}}}\nx\n", [diag("warning", 2, "w7")]) == []
    # a user's own group keeps its number: \1 refers to it, not to a wrapper
    assert run("x # expected-error-re {{= {{(1)6}} bytes}}\n", [d]) == []
    assert expected_regex("{{(a)\\1}}").fullmatch("aa")


@pytest.mark.parametrize(
    "message, why",
    [
        ("{{a}}{{(?i)b}}", "global flags"),  # each part compiles alone
        ("{{(?P<x>a)}}{{(?P<x>a)}}", "redefinition of group name"),
        ("{{(a)\\1}}{{(b}}", "missing )"),
        ("{{[[:bogus:]]}}", "unknown character class '[:bogus:]'"),
    ],
)
def test_regex_expectations_that_do_not_compile_are_malformed(message, why):
    """Parts that compile alone but not together, and unknown POSIX classes,
    are malformed expectations reported at their comment, not an internal error."""
    with pytest.raises(ValueError, match="invalid regex") as e:
        expected_regex(message)
    assert why in str(e.value)


def test_unexpected_diagnostic():
    assert run("x\ny\n", [diag("error", 2, "boom", col=4)]) == [
        f"{F}:2:4: error: unexpected error: boom"
    ]


def test_missing_expectation_is_reported_at_its_comment():
    # D-OPT-VERIFY-LOC: the comment's line and the column of `expected-`,
    # not the line the expectation designates
    text = "x\n# expected-warning@-1 {{careful}}\n"
    failures = run(text, [])
    assert failures == [f'{F}:2:3: error: expected warning "careful" was not produced']
    assert verify(text, F, "#", []) == 1


def test_wrong_line_is_both_unexpected_and_missing():
    failures = run("x # expected-error {{e}}\ny\n", [diag("error", 2, "e")])
    assert failures == [
        f"{F}:2:1: error: unexpected error: e",
        f'{F}:1:5: error: expected error "e" was not produced',
    ]


def test_wrong_severity_is_a_near_miss():
    failures = run("x # expected-error {{e}}\n", [diag("warning", 1, "e")])
    assert len(failures) == 2
    assert failures[0].startswith(
        f"{F}:1:1: error: 'warning' diagnostic emitted when expecting a 'error'"
    )
    assert failures[1] == f'{F}:1:5: error: expected error "e" was not produced'


def test_each_expectation_needs_its_own_diagnostic():
    text = "x # expected-error {{dup}}\n# expected-error@-1 {{dup}}\n"
    assert run(text, [diag("error", 1, "dup"), diag("error", 1, "dup")]) == []
    assert run(text, [diag("error", 1, "dup")]) == [
        f'{F}:2:3: error: expected error "dup" was not produced'
    ]
    # Like upstream, a repeated diagnostic may reuse a satisfied expectation.
    assert run("x # expected-error {{dup}}\n", [diag("error", 1, "dup")] * 2) == []


def test_diagnostic_from_other_file_is_unexpected():
    other = diag("error", 4, "bad device field", file="devices/npm.nem", col=9)
    text = "x\n# expected-error@4 {{bad device field}}\ny\nz\n"
    assert run(text, [other]) == [
        "devices/npm.nem:4:9: error: unexpected error: bad device field",
        f'{F}:2:3: error: expected error "bad device field" was not produced',
    ]


def test_same_file_through_different_spelling(tmp_path):
    path = tmp_path / "a.nem"
    text = "x # expected-error {{e}}\n"
    exps = parse_expectations(text, str(path), "#")
    d = Diagnostic("error", "e", SourceLoc(str(tmp_path / "." / "a.nem"), 1, 1))
    assert check(exps, [d], str(path)) == []


def test_unknown_location():
    assert run("# expected-error@unknown {{lost}}\n", [diag("error", None, "lost")]) == []
    assert run("x\n", [diag("error", None, "lost")]) == [f"{F}: error: unexpected error: lost"]
    assert run("# expected-error@unknown {{lost}}\n", []) == [
        f'{F}:1:3: error: expected error "lost" was not produced'
    ]


# ---------------------------------------------------------------- notes


def test_notes_ignored_when_no_expected_note():
    d = diag("error", 1, "e", notes=[diag("note", 3, "declared here")])
    assert run("x # expected-error {{e}}\n", [d]) == []


def test_notes_matched_when_expected():
    d = diag("error", 1, "e", notes=[diag("note", 3, "declared here")])
    text = "x # expected-error {{e}}\ny\nz # expected-note {{declared}}\n"
    assert run(text, [d]) == []


def test_note_without_location_takes_parent_location():
    d = diag("error", 1, "e", notes=[Diagnostic("note", "see this")])
    assert run("x # expected-error {{e}}\n# expected-note@-1 {{see this}}\n", [d]) == []


def test_unexpected_note_when_notes_are_checked():
    d = diag("error", 1, "e", notes=[diag("note", 2, "declared here"), diag("note", 3, "other")])
    text = "x # expected-error {{e}}\ny # expected-note {{declared}}\nz\n"
    assert run(text, [d]) == [f"{F}:3:1: error: unexpected note: other"]


def test_missing_expected_note():
    d = diag("error", 1, "e")
    text = "x # expected-error {{e}}\n# expected-note@-1 {{why}}\n"
    assert run(text, [d]) == [f'{F}:2:3: error: expected note "why" was not produced']


def test_nested_notes_and_top_level_notes():
    inner = diag("note", 2, "inner")
    d = diag("error", 1, "e", notes=[diag("note", 1, "outer", notes=[inner])])
    text = "x # expected-error {{e}}\ny # expected-note {{inner}}\n# expected-note@1 {{outer}}\n"
    assert run(text, [d]) == []
    # A free-standing note is always checked.
    assert run("x\n", [diag("note", 1, "stray")]) == [f"{F}:1:1: error: unexpected note: stray"]


# ---------------------------------------------------------------- chunks


SPLIT = textwrap.dedent("""\
    a
    # expected-error@+1 {{first}}
    b
    # -----
    c  # expected-error {{second}}
    # -----

    # expected-warning@below {{third}}
    d
    """)


def chunks_of(text: str, marker: str = "# -----") -> list[Chunk]:
    chunks, near = split_input(text, F, marker)
    assert near == []
    return chunks


def test_split_input_places():
    """A chunk starts right after the marker (mlir-opt's rule), and keeps
    its line and column in the file."""
    chunks = chunks_of(SPLIT)
    assert [(c.line, c.col) for c in chunks] == [(0, 0), (3, 7), (5, 7)]
    assert chunks[0].text == "a\n# expected-error@+1 {{first}}\nb\n"
    assert chunks[1].text == "\nc  # expected-error {{second}}\n"
    assert chunks[2].text.endswith("d\n")
    for c in chunks:
        assert SPLIT.split("\n")[c.line][c.col :] == c.text.split("\n")[0]


@pytest.mark.parametrize(
    "text, chunks",
    [
        # anywhere on a line: indented, after code, before text (which starts the next chunk)
        ("x\n  // -----\ny\n", ["x\n  ", "\ny\n"]),
        ("x // -----\ny", ["x ", "\ny"]),
        ("x\n// ----- y\n", ["x\n", " y\n"]),
        ("x\n// ------\n", ["x\n", "-\n"]),
        # the other syntax's marker is text; a marker at the end: an empty chunk
        ("x\n# -----\n", ["x\n# -----\n"]),
        ("x\n// -----\n// -----\n", ["x\n", "\n", "\n"]),
        # an empty input has no chunk (mlir-opt prints nothing); a leading marker
        # starts an empty first chunk
        ("", []),
        ("// -----\nx", ["", "\nx"]),
    ],
)
def test_split_input_where_mlir_opt_splits(text, chunks):
    assert [c.text for c in chunks_of(text, "// -----")] == chunks


def test_near_misses_are_warnings_at_the_piece():
    chunks, near = split_input("a\n// ----\nb // -----0\nc\n// -----", F, "// -----")
    assert [c.text for c in chunks] == ["a\n// ----\nb // -----0\nc\n// -----"]
    assert [(d.severity, d.loc.line, d.loc.col) for d in near] == [
        ("warning", 2, 7),
        ("warning", 3, 9),
        ("warning", 5, 7),
    ]
    assert near[0].message == "near miss with file split marker '// -----'"
    assert near[0].fix is not None and "'// ---'" in near[0].fix


def test_custom_and_empty_marker():
    assert [c.text for c in chunks_of("a\nXYZ\nb", "XYZ")] == ["a\n", "\nb"]
    assert [c.text for c in chunks_of("a\n// -----\nb", "")] == ["a\n// -----\nb"]


def at_its_place(c: Chunk) -> str:
    """The chunk at its place in the file (preceded by as many newlines and
    blanks): what the tools parsed before chunks were parsed where they are."""
    return "\n" * c.line + " " * c.col + c.text


def test_chunks_keep_original_line_numbers():
    expected = {
        0: [("error", 3, "first")],
        1: [("error", 5, "second")],
        2: [("warning", 9, "third")],
    }
    for n, c in enumerate(chunks_of(SPLIT)):
        padded = [
            (e.severity, e.line, e.substring) for e in parse_expectations(at_its_place(c), F, "#")
        ]
        unpadded = [
            (e.severity, e.line, e.substring)
            for e in parse_expectations(c.text, F, "#", c.line, c.col)
        ]
        assert padded == unpadded == expected[n]
    # Verify each chunk against diagnostics carrying original line numbers.
    c0, c1, c2 = chunks_of(SPLIT)
    assert verify(at_its_place(c0), F, "#", [diag("error", 3, "first!")]) == 0
    assert verify(at_its_place(c1), F, "#", [diag("error", 5, "second")]) == 0
    assert verify(at_its_place(c2), F, "#", [diag("warning", 9, "third")]) == 0
    assert verify(at_its_place(c2), F, "#", [diag("warning", 8, "third")]) == 1
    # the comment's column counts in the file, on a chunk's first line too
    _, c = chunks_of("a # -----  # expected-error {{e}}\n")
    assert [e.col for e in parse_expectations(c.text, F, "#", c.line, c.col)] == [14]


def test_verify_prints_to_stderr(capsys):
    assert verify("x # expected-error {{e}}\n", F, "#", [diag("error", 1, "e")]) == 0
    assert capsys.readouterr().err == ""
    assert verify("x\n", F, "#", [diag("remark", 1, "r")]) == 1
    assert capsys.readouterr().err == f"{F}:1:1: error: unexpected remark: r\n"


def test_missing_expectation_quotes_the_comment(tmp_path):
    """As mlir-opt: the source line of the comment and a caret under
    `expected-` (the text is the registered or on-disk source)."""
    path = tmp_path / "m.nem"
    text = "x\n  # expected-error@-1 {{never}}\n"
    path.write_text(text)
    failures = check(parse_expectations(text, str(path), "#"), [], str(path))
    assert failures == [
        f'{path}:2:5: error: expected error "never" was not produced\n'
        "  # expected-error@-1 {{never}}\n"
        "    ^"
    ]


def test_absolute_line_counts_in_its_chunk():
    """D-OPT-VERIFY-LOC: with --split-input-file, `@N` is line N of the
    chunk (each chunk is a separate input), counted from the line after
    the marker."""
    text = "a\n# -----\nb\nc\n# expected-error@2 {{in c}}\n"
    _, second = chunks_of(text)
    exps = parse_expectations(second.text, F, "#", second.line, second.col)
    assert [(e.line, e.comment_line) for e in exps] == [(4, 5)]
    assert check(exps, [diag("error", 4, "in c")], F) == []
    assert check(exps, [], F) == [f'{F}:5:3: error: expected error "in c" was not produced']
