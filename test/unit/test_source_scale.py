"""Work that grows with the source, not with its square (issue 33): the
lexer sees each character of a `.nem` input a bounded number of times, for
one big program and for `--split-input-file` with many chunks (a chunk is
parsed where it is, never padded to its place, D-OPT-SPLIT).  Counted in
characters handed to the lexer, not timed; `bench/bench_source_scale.py`
gives the CPU seconds."""

from __future__ import annotations

import pytest

from nem.cli import opt_driver
from nem.cli.split_input import split_input
from nem.frontends.nem_text import lexer


@pytest.fixture
def lexed(monkeypatch):
    """The number of characters each lexer entry point is given."""
    seen = {"chars": 0}

    def counting(fn):
        def wrapper(text, *args, **kwargs):
            seen["chars"] += len(text)
            return fn(text, *args, **kwargs)
        return wrapper

    from nem.frontends.nem_text import config_parser, expression_parser

    monkeypatch.setattr(expression_parser, "tokenize", counting(lexer.tokenize))
    monkeypatch.setattr(config_parser, "tokenize", counting(lexer.tokenize))
    monkeypatch.setattr(lexer, "iter_tokens", counting(lexer.iter_tokens))
    return seen


def _nem_opt(path, *flags) -> int:
    with pytest.raises(SystemExit) as e:
        opt_driver.run([str(path), "-o", "-", *flags])
        raise SystemExit(0)
    return e.value.code or 0


def chunks(n: int) -> str:
    return "\n# -----\n".join(f"const C{i} = {i}\nbuffer B{i} : L2 (size=64)" for i in range(n))


@pytest.mark.parametrize("n", [1, 10])
def test_split_input_lexes_each_chunk_once(tmp_path, lexed, capsys, n):
    src = tmp_path / "many.nem"
    src.write_text(chunks(100 * n))
    assert _nem_opt(src, "--split-input-file") == 0
    # each chunk: once to tell a program from a config document (its head),
    # once to parse it; padded chunks made this ~150 * n times the file
    assert lexed["chars"] <= 3 * len(src.read_text()), lexed
    assert capsys.readouterr().out.count("# -----") == 100 * n - 1


def test_diagnostics_of_a_chunk_keep_the_file_lines(tmp_path, capsys):
    src = tmp_path / "c.nem"
    src.write_text(chunks(50) + "\n# -----\n\n  const X = )\n")
    assert _nem_opt(src, "--split-input-file") == 1
    err = capsys.readouterr().err
    line = src.read_text().splitlines().index("  const X = )") + 1
    assert f"{src}:{line}:13: error:" in err and "  const X = )" in err, err


def test_chunk_places_are_counted_once():
    text = "a\n# -----\nb\n# ---\nc  # -----\nd"
    found, near = split_input(text, "x.nem", "# -----")
    assert [(c.text, c.line, c.col) for c in found] == [
        ("a\n", 0, 0), ("\nb\n# ---\nc  ", 1, 7), ("\nd", 4, 10)]
    assert [str(d.loc) for d in near] == ["x.nem:4:6"]  # as mlir-opt: after the matched part
