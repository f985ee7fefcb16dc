"""Running upstream MLIR where its aborts cannot take the tool down.

Upstream MLIR answers some invalid input not with a diagnostic but by
aborting the process: an `LLVM ERROR` for an op of an unregistered dialect
in a `linalg.map` body, an assertion on a 2^63 dilation (the fuzz campaign
of 2026-11-26).  Python cannot catch either, so the call runs in a forked
child process and a child that dies is a located diagnostic carrying
upstream's last message (D-LOW-UPSTREAM).  A fork costs a few milliseconds
and needs no re-import: the child inherits the loaded bindings.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
import tempfile
from collections.abc import Callable

from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, fail


def _fork() -> int:
    """`os.fork()` with SIGINT held back until it returns.  The interpreter
    runs its at-fork callbacks (logging's lock release) around the fork; an
    interrupt handled inside one is raised there, printed as "Exception
    ignored" with a traceback and dropped, so the tool would go on.  Held
    back, it arrives just after, as a KeyboardInterrupt here (the tools
    report it as `TOOL: interrupted`, `nem.cli.launch`)."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return os.fork()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def run_isolated(
    fn: Callable[..., str], *args: object, where: SourceLoc, what: str, fix: str
) -> str:
    """`fn(*args)` in a forked child, so that an upstream abort ends the
    child, not the tool.  The child's result or NemDiagnosticError comes
    back pickled; its stderr (upstream's own message) is captured and, if
    the child dies, becomes `not supported: upstream MLIR aborted (SIGNAL)
    while WHAT: <its last line>` at `where`, with `fix`.  Without `os.fork`
    (not POSIX) `fn` runs in this process."""
    if not hasattr(os, "fork"):
        return fn(*args)
    with tempfile.TemporaryFile() as err:
        read_end, write_end = os.pipe()
        pid = _fork()
        if pid == 0:  # the child: never returns
            status = 0
            try:
                # an abort here is the expected outcome the parent reports: a
                # faulthandler inherited from the parent (pytest's, or
                # PYTHONFAULTHANDLER's) would dump Python frames onto the
                # terminal or over upstream's last message on stderr
                faulthandler.disable()
                os.close(read_end)
                os.dup2(err.fileno(), 2)
                try:
                    result: tuple[str, object] = ("ok", fn(*args))
                except NemDiagnosticError as e:
                    result = ("diagnostics", e.diagnostics)
                except Exception as e:  # a bug of ours: the parent raises it as one
                    result = ("bug", f"{type(e).__name__}: {e}")
                with os.fdopen(write_end, "wb") as pipe:
                    pickle.dump(result, pipe)
            except BaseException:
                status = 3
            os._exit(status)
        os.close(write_end)
        try:
            with os.fdopen(read_end, "rb") as pipe:
                data = pipe.read()
        except BaseException:  # Ctrl-C while the child works: it goes too
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0 and data:
            kind, value = pickle.loads(data)
            if kind == "diagnostics":
                raise NemDiagnosticError(value)
            if kind == "bug":
                raise RuntimeError(f"in the upstream MLIR child process: {value}")
            return str(value)
        err.seek(0)
        lines = [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    code = os.waitstatus_to_exitcode(status)
    how = (
        f"aborted ({signal.Signals(-code).name})"
        if code < 0 and -code in signal.valid_signals()
        else f"failed (exit status {code})"
    )
    said = f": {lines[-1][:300]}" if lines else ""
    raise fail(
        f"not supported: upstream MLIR {how} while {what}{said} (D-LOW-UPSTREAM)", where, None, fix
    )


__all__ = ["run_isolated"]
