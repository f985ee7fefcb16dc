"""At most `--error-limit` errors printed per run, then one note
(D-CLI-ERROR-LIMIT, issue 33): nem-opt (passes and `-p nem-verify`
included), nem-run, nem-compile; the exit code and `--verify-diagnostics`
unchanged."""

from __future__ import annotations

import pytest

from nem.cli import nem_compile, nem_run, opt_driver
from nem.cli.error_limit import DEFAULT_ERROR_LIMIT
from nem.dialect.diagnostics import Diagnostic, SourceLoc


def duplicates(n: int) -> str:
    """A program with n - 1 CONST-01 errors."""
    return "".join(f"const C = {i}\n" for i in range(n))


def _nem_opt(*argv: str) -> int:
    with pytest.raises(SystemExit) as e:
        opt_driver.run([*argv])
        raise SystemExit(0)
    return e.value.code or 0


def errors_and_note(err: str) -> tuple[int, list[str]]:
    return err.count(": error: "), [line for line in err.splitlines() if "too many errors" in line]


def test_nem_opt_stops_after_the_default_limit(tmp_path, capsys):
    src = tmp_path / "dup.nem"
    src.write_text(duplicates(100))
    assert _nem_opt(str(src), "-o", "-") == 1
    shown, note = errors_and_note(capsys.readouterr().err)
    assert shown == DEFAULT_ERROR_LIMIT == 20
    assert note == [
        "nem-opt: note: too many errors; stopping after 20 (99 in all; raise the "
        "limit with --error-limit N, 0 for no limit)"
    ]


@pytest.mark.parametrize(
    "flags, shown",
    [
        (["--error-limit", "0"], 99),
        (["--error-limit=5"], 5),
        (["--error-limit", "99"], 99),
        (["-p", "nem-verify", "--error-limit", "3"], 3),
    ],
)
def test_nem_opt_limit_option(tmp_path, capsys, flags, shown):
    src = tmp_path / "dup.nem"
    src.write_text(duplicates(100))
    assert _nem_opt(str(src), "-o", "-", *flags) == 1
    got, note = errors_and_note(capsys.readouterr().err)
    assert got == shown
    assert len(note) == (shown < 99)


def test_a_negative_limit_is_a_usage_error(tmp_path, capsys):
    src = tmp_path / "ok.nem"
    src.write_text("const C = 1\n")
    assert _nem_opt(str(src), "--error-limit", "-1") == 2
    assert "--error-limit: needs N >= 0" in capsys.readouterr().err


def test_one_limit_over_every_chunk_and_verify_diagnostics_sees_all(tmp_path, capsys):
    src = tmp_path / "chunks.nem"
    chunk = "const C = 1\nconst C = 2  # expected-error {{already declared}}\n"
    src.write_text("# -----\n".join([chunk] * 30))
    assert _nem_opt(str(src), "--split-input-file", "--error-limit", "4", "-o", "-") == 1
    got, note = errors_and_note(capsys.readouterr().err)
    assert got == 4 and "stopping after 4 (30 in all" in note[0]
    # every expectation is met: the limit is about printing only
    assert (
        _nem_opt(
            str(src),
            "--split-input-file",
            "--verify-diagnostics",
            "--error-limit",
            "4",
            "-o",
            "/dev/null",
        )
        == 0
    )
    assert "too many errors" not in capsys.readouterr().err


def test_warnings_do_not_count(tmp_path, capsys):
    from nem.cli.error_limit import error_limit, print_diagnostics

    warnings = [Diagnostic("warning", f"w{i}", SourceLoc("f", i + 1, 1)) for i in range(30)]
    with error_limit("nem-opt", 2):
        print_diagnostics("nem-opt", warnings)
    err = capsys.readouterr().err
    assert err.count("warning: w") == 30 and "too many" not in err


def test_nem_run(tmp_path, capsys):
    src = tmp_path / "dup.nem"
    src.write_text(duplicates(50))
    assert nem_run.run([str(src), "--error-limit", "2"]) == 1
    got, note = errors_and_note(capsys.readouterr().err)
    assert got == 2 and note[0].startswith(
        "nem-run: note: too many errors; stopping after 2 (49 in all"
    )


def test_nem_compile(tmp_path, capsys, monkeypatch):
    """A stage's list of diagnostics (a lowered program failing nem-verify,
    the MLIR parser's) is printed up to the limit, then the stage."""
    import nem.compile as compile_api

    diags = [Diagnostic("error", f"e{i}", SourceLoc("m.mlir", i + 1, 1)) for i in range(25)]

    def failing(*args, **kwargs):
        raise compile_api.CompileError.of("lower", diags)

    monkeypatch.setattr(compile_api, "compile_mlir", failing)
    src = tmp_path / "m.mlir"
    src.write_text("func.func @f() {\n  return\n}\n")
    assert nem_compile.run([str(src), "-o", str(tmp_path / "out.nem"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    got, note = errors_and_note(err)
    assert got == 20 and note[0].startswith(
        "nem-compile: note: too many errors; stopping after 20 (25 in all"
    )
    assert err.index(note[0]) < err.index("nem-compile: failed in stage 'lower'")
    assert (
        nem_compile.run(
            [str(src), "-o", str(tmp_path / "out.nem"), "--no-progress", "--error-limit", "0"]
        )
        == 1
    )
    assert errors_and_note(capsys.readouterr().err) == (25, [])
