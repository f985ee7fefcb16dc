"""`run_isolated` (D-LOW-UPSTREAM): an upstream abort in the child is a
located diagnostic; results, diagnostics and our own bugs come back as they
would in-process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.frontends.upstream_dialects.isolation import run_isolated

WHERE = SourceLoc("in.mlir", 3, 5)
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _run(fn, *args):
    return run_isolated(fn, *args, where=WHERE, what="testing", fix="do not abort")


def _abort(message: str) -> str:
    os.write(2, message.encode() + b"\n")  # as upstream's C++ writes it, on fd 2
    os.abort()


def _diagnose(message: str) -> str:
    raise NemDiagnosticError([Diagnostic("error", message, WHERE)])


def _bug() -> str:
    return str(1 // 0)


def test_result_comes_back():
    assert _run(str.upper, "linalg") == "LINALG"


def test_abort_is_a_located_diagnostic_with_upstreams_message():
    with pytest.raises(NemDiagnosticError) as e:
        _run(_abort, "LLVM ERROR: x created with unregistered dialect")
    (d,) = e.value.diagnostics
    assert (d.loc.line, d.loc.col) == (3, 5)
    assert d.message.startswith(
        "not supported: upstream MLIR aborted (SIGABRT) while testing: "
        "LLVM ERROR: x created with unregistered dialect"
    )
    assert d.fix == "do not abort"


def test_diagnostics_pass_through():
    with pytest.raises(NemDiagnosticError) as e:
        _run(_diagnose, "invalid MLIR (upstream parser): expected ')'")
    assert [d.message for d in e.value.diagnostics] == [
        "invalid MLIR (upstream parser): expected ')'"
    ]


def test_a_bug_of_ours_stays_a_bug():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _run(_bug)


def test_an_inherited_faulthandler_stays_out_of_the_report():
    """Under `python -X faulthandler` (or pytest's) the child's expected abort
    dumps nothing: no Python frames on the terminal, none in place of
    upstream's last line."""
    code = (
        "import os\n"
        "from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc\n"
        "from nem.frontends.upstream_dialects.isolation import run_isolated\n"
        "def boom():\n"
        "    os.write(2, b'LLVM ERROR: boom\\n')\n"
        "    os.abort()\n"
        "try:\n"
        "    run_isolated(boom, where=SourceLoc('in.mlir', 1, 1), what='testing', fix='-')\n"
        "except NemDiagnosticError as e:\n"
        "    print(e.diagnostics[0].message)\n"
    )
    out = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip().endswith("while testing: LLVM ERROR: boom (D-LOW-UPSTREAM)"), (
        out.stdout
    )
    assert "Fatal Python error" not in out.stderr


def test_ctrl_c_during_the_fork_is_a_keyboard_interrupt():
    """An interrupt that arrives while the interpreter runs its at-fork
    callbacks (logging's lock release: CI's `nem-compile` interrupted at the
    fork of its parse check) is delivered after the fork as a
    KeyboardInterrupt out of `run_isolated`, not raised inside the callback,
    where Python prints "Exception ignored" with a traceback and drops it."""
    code = (
        "import os, signal\n"
        "from nem.cli.launch import guard_interrupts\n"
        "from nem.dialect.diagnostics import SourceLoc\n"
        "from nem.frontends.upstream_dialects.isolation import run_isolated\n"
        "guard_interrupts('nem-x')\n"
        "os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))\n"
        "try:\n"
        "    run_isolated(str, 1, where=SourceLoc('in.mlir', 1, 1), what='testing', fix='-')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (out.stdout, out.stderr) == ("interrupted\n", "")
