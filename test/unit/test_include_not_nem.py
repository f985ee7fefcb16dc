"""Includes of files that are not NEM (issue 33, decision D-INC-VALID): an
included file must be a valid document (INC-05), so junk, a text file such
as /etc/passwd, a binary, a directory or a FIFO is an error located in the
included file (or at the include when the file cannot be read), with one
"included from" note per include level.  Corpus: test/fuzz/corpus/nem-opt/
include_*.nem."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nem.devices.device_resolver import load_config_file
from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.nem_text.config_parser import parse_config_document


def _diag(main: Path):
    with pytest.raises(NemDiagnosticError) as excinfo:
        load_config_file(main)
    (diag,) = excinfo.value.diagnostics
    return diag


def _including(tmp_path: Path, target: str, name: str = "main.nem") -> Path:
    main = tmp_path / name
    main.write_text(f'\ninclude "{target}"\n')
    return main


@pytest.mark.parametrize(
    "text,rule,line,col",
    [
        ("root:x:0:0:root:/root:/bin/bash\nbin:x:1:1::/:\n", "GRAM-03", 1, 1),
        ("@@@ )))\n", "GRAM-17", 1, 1),
        ("buffer X : L2 (size=128)\n)))\n", "GRAM-03", 2, 1),
        ("type_family t<T: {f16}> {\n}\nbuffer X : L2 (size=4)\n", None, None, None),
    ],
)
def test_a_text_that_is_no_document_is_refused_in_the_included_file(
    tmp_path, text, rule, line, col
):
    # RULE: INC-05
    (tmp_path / "inc.nem").write_text(text)
    with pytest.raises(NemDiagnosticError) as excinfo:
        load_config_file(_including(tmp_path, "inc.nem"))
    diag = excinfo.value.diagnostics[0]
    assert diag.loc.file.endswith("inc.nem"), diag.render()
    if rule is not None:
        assert (diag.rule, diag.loc.line, diag.loc.col) == (rule, line, col), diag.render()
    (note,) = diag.notes
    assert (note.loc.file, note.loc.line) == (str(tmp_path / "main.nem"), 2)
    assert "must be a valid NEM document (INC-05)" in note.message


def test_a_binary_file_is_refused_at_its_first_bad_byte(tmp_path):
    # RULE: INC-05
    (tmp_path / "bin.nem").write_bytes(b"const A = 1\n\x7fELF\xd0\x00")
    diag = _diag(_including(tmp_path, "bin.nem"))
    assert diag.rule == "INC-05" and "byte offset 16" in diag.message, diag.render()
    assert (diag.loc.line, diag.loc.col) == (2, 5)
    assert diag.notes[0].loc.file.endswith("main.nem")


def test_a_directory_or_fifo_is_refused_at_the_include_and_never_opened(tmp_path):
    # RULE: INC-02
    os.mkfifo(tmp_path / "fifo.nem")
    (tmp_path / "dir.nem").mkdir()
    for target, kind in (("fifo.nem", "a FIFO"), ("dir.nem", "a directory")):
        diag = _diag(_including(tmp_path, target))
        assert (diag.rule, diag.loc.line) == ("INC-02", 2), diag.render()
        assert f"it is {kind}" in diag.message and not diag.notes


def test_a_regular_file_later_on_the_search_path_wins_over_a_directory(tmp_path):
    # RULE: INC-02 (D-INC-SEARCH: the first *file*; a directory is no candidate)
    (tmp_path / "nem_baseline_1.0.nem").mkdir()
    main = _including(tmp_path, "nem_baseline_1.0.nem")
    assert "nem_baseline_1_0" in load_config_file(main).devices


def test_every_include_level_adds_a_note(tmp_path):
    (tmp_path / "bad.nem").write_text("@@@\n")
    (tmp_path / "mid.nem").write_text('include "bad.nem"\n')
    diag = _diag(_including(tmp_path, "mid.nem"))
    assert [n.loc.file.rsplit("/", 1)[-1] for n in diag.notes] == ["mid.nem", "main.nem"]


def test_an_included_program_is_still_imported_up_to_its_first_statement(tmp_path):
    # RULE: INC-05 (D-INC-PROGRAM: a valid program is parsed, then ignored)
    (tmp_path / "prog.nem").write_text(
        'include "nem_baseline_1.0.nem"\nbuffer X : L2 (size=128)\n'
        "x = region(X, 0, 128) elem=f16, shape=[64], layout=C\n"
    )
    assert "nem_baseline_1_0" in load_config_file(_including(tmp_path, "prog.nem")).devices
    doc = parse_config_document((tmp_path / "prog.nem").read_text(), "prog.nem", included=True)
    assert (doc.stopped_at.line, doc.stopped_at.col) == (2, 1)
