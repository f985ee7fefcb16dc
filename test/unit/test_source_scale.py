"""Work that grows with the source, not with its square (issue 33): the
lexer sees each character of a `.nem` input a bounded number of times, for
one big program and for `--split-input-file` with many chunks (a chunk is
parsed where it is, never padded to its place, D-OPT-SPLIT); so do the MLIR
pre-scan and parser for an MLIR input's chunks.  Counted in
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
        ("a\n", 0, 0),
        ("\nb\n# ---\nc  ", 1, 7),
        ("\nd", 4, 10),
    ]
    assert [str(d.loc) for d in near] == ["x.nem:4:6"]  # as mlir-opt: after the matched part


def mlir_chunks(n: int) -> str:
    return "\n// -----\n".join(f"func.func @f{i}() {{\n  return\n}}" for i in range(n))


@pytest.mark.parametrize("n", [1, 10])
def test_mlir_chunks_are_read_once(tmp_path, monkeypatch, capsys, n):
    from nem.frontends import upstream_dialects
    from nem.frontends.upstream_dialects import mlir_input

    seen = {"scanned": 0, "parsed": 0}
    scan = mlir_input.check_mlir_text

    def counting_scan(text, *args, **kwargs):
        seen["scanned"] += len(text)
        return scan(text, *args, **kwargs)

    class CountingParser(upstream_dialects.LocatingParser):
        def __init__(self, ctx, text, *args, **kwargs):
            seen["parsed"] += len(text)
            super().__init__(ctx, text, *args, **kwargs)

    monkeypatch.setattr(mlir_input, "check_mlir_text", counting_scan)
    monkeypatch.setattr(upstream_dialects, "LocatingParser", CountingParser)
    src = tmp_path / "many.mlir"
    src.write_text(mlir_chunks(30 * n))
    assert _nem_opt(src, "--split-input-file") == 0
    # padded chunks made each ~15 * n times the file
    size = len(src.read_text())
    assert seen["scanned"] <= size and seen["parsed"] <= size, (seen, size)
    assert capsys.readouterr().out.count("// -----") == 30 * n - 1


MLIR_ERRORS = """func.func @a() {
  return
}
  // -----  func.func @b() { return }
func.func @b() {
  return
}
// -----  "x
// -----
func.func @m() {
  %a = arith.constant 1 : i32
  %b = arith.constant 2 : i64
  %c = arith.addi %a, %b : i32
  return
} // ----- func.func @h() { %0 = arith.addi }
// -----
  "foo.bar"() : () -> ()
// -----
func.func @c(%x: memref<4xf32>, %y: memref<4xf32>) {
  linalg.map { math.absf } ins(%x : memref<4xf32>) outs(%y : memref<4xf64>)
  return
}
// -----
func.func @g(%x: memref<4xf32>, %y: memref<4xf32>) {
  linalg.map { math.absf } ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  return
}
"""


def test_mlir_diagnostics_and_locations_of_a_chunk_are_the_files(tmp_path, capsys):
    """Each reader of an MLIR chunk places what it reports in the file: the
    pre-scan, xDSL's parser, the op locations (the verifier's redefined
    symbol), upstream's parser and the generalized ops' locations."""
    src = tmp_path / "c.mlir"
    src.write_text(MLIR_ERRORS)
    assert _nem_opt(src, "--split-input-file", "--print-debuginfo") == 1
    out, err = capsys.readouterr()
    errors = [line.split(": error: ")[0] for line in err.splitlines() if ": error: " in line]
    assert errors == [f"{src}:{at}" for at in ("5:1", "8:11", "13:23", "15:45", "17:4", "20:57")], (
        err
    )
    assert "Redefinition of symbol" in err and "unterminated string" in err
    # the generalized linalg.map of the last chunk, at its line in the file
    assert f'loc("{src}":25:3)' in out and f'loc("{src}":24:1)' in out, out


def test_mlir_error_of_an_unlocated_op_is_in_its_chunk(tmp_path, capsys):
    """An op whose own location is not a file position (`loc("x")`) and
    holds no located op fails verification in the second chunk, which
    starts mid-line (after `} // -----` on line 3, column 11): the
    diagnostic falls back to the start of that chunk, not the file's 1:1."""
    src = tmp_path / "c.mlir"
    src.write_text(
        "func.func @f() {\n  return\n} // ----- func.func @g(%a: i32) -> i64 {\n"
        '  %b = "arith.addi"(%a, %a) : (i32, i32) -> i64 loc("x")\n'
        "  return %b : i64\n}\n"
    )
    assert _nem_opt(src, "--split-input-file") == 1
    err = capsys.readouterr().err
    errors = [line.split(": error: ")[0] for line in err.splitlines() if ": error: " in line]
    assert errors == [f"{src}:3:11"], err
    assert "'arith.addi'" in err
