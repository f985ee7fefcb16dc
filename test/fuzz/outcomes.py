"""Running one fuzz input in-process and naming its outcome (the harness's
`ok`/`diagnostic`/`internal`/`unlocated`/`exit`/`hang`/`crash`, harness.py's
docstring): a tool's `main` called with its output captured, under a limit
in CPU seconds, and its exit status, stderr and stdout classified.  Kept
apart from the targets and campaigns so that the test replaying the corpus
and the campaign workers share one definition of each outcome."""

from __future__ import annotations

import contextlib
import io
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass


class Timeout(BaseException):
    """Raised by the per-input alarm; a BaseException so that the tools'
    `except Exception` handlers cannot swallow it."""


@dataclass
class Result:
    code: int
    out: str
    err: str
    outcome: str = ""
    seconds: float = 0.0


# ---------------------------------------------------------------------------
# Running one command line in-process


def run_main(tool: str, argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    if tool == "nem-opt":
        from nem.cli.nem_opt import main
    elif tool == "nem-compile":
        from nem.cli.nem_compile import main
    else:
        from nem.cli.nem_run import main
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()


def run_with_timeout(fn: Callable[[], tuple[int, str, str]], seconds: float) -> Result:
    def alarm(signum, frame):
        raise Timeout()

    # CPU seconds (ITIMER_PROF): the limit means the same on a loaded machine
    previous = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    t0 = time.process_time()
    try:
        code, out, err = fn()
        res = Result(code, out, err)
    except Timeout:
        res = Result(-1, "", "", "hang")
    except MemoryError:
        res = Result(-1, "", "MemoryError", "crash")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
    res.seconds = time.process_time() - t0
    if not res.outcome:
        res.outcome = classify(res.code, res.err, res.out)
    return res


_CARET = re.compile(r"^ *\^$")
_LOCATED = re.compile(
    r"^\S.*:\d+:\d+: (error|warning|remark|note): "
    # an ONNX model's diagnostics name the node, or the
    # initializer or value in their message (D-COMPILE-DIAG)
    r"|^\S+\.onnx: (node \d* ?'.*' \([^)]+\): )?(error|warning|remark): "
)
# a tool's command-line error (`nem-run: error: ...`) or one naming its flag
_FLAGGED = re.compile(r"^[\w.-]+: error: |(^|: )error: (unexpected error: )?-{1,2}[\w-]+")


# a tool's internal-error report (`nem-opt: internal error: ...`) or an
# uncaught Python traceback
_INTERNAL = re.compile(r"^([\w.-]+: )?internal error|^Traceback \(most recent call last\)")
_RUN_VERDICT = re.compile(
    r"^(races: [1-9]|  seed \d+: |deadlocks: 1|final memory: differs|"
    r"status: (?!completed))",
    re.M,
)


def classify(code: int, err: str, out: str = "") -> str:
    """The outcome of one run from its exit status, stderr and stdout (a
    nem-run that reports a race or deadlock exits 1 with its verdict on
    stdout)."""
    lines = err.splitlines()
    # a located diagnostic's headline is followed by the quoted source line
    # and a caret: that text is the user's, whatever it says (a comment
    # reading "internal error" is not one)
    errors, i = [], 0
    while i < len(lines):
        ln = lines[i]
        if _INTERNAL.match(ln):
            return "internal"
        if re.search(r"(^|: )error: ", ln):
            errors.append(ln)
        if _LOCATED.match(ln) and i + 2 < len(lines) and _CARET.match(lines[i + 2]):
            i += 3
        else:
            i += 1
    for ln in errors:
        if not (_LOCATED.match(ln) or _FLAGGED.search(ln)):
            return "unlocated"
    if code == 0:
        return "exit" if errors else "ok"
    if code in (1, 2):
        verdict = code == 1 and _RUN_VERDICT.search(out)
        return "diagnostic" if errors or "usage:" in err or verdict else "exit"
    return "exit"
