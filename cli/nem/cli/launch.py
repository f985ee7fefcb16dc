"""Ctrl-C while a tool loads: `TOOL: interrupted`, exit 130, no traceback.

A tool spends its first few tenths of a second importing numpy, xDSL, the
dialect and the runtime, and imports more on first use.  A KeyboardInterrupt
raised inside an import unwinds through importlib's frames, and numpy turns
one inside its C extension into an ImportError it prints a traceback for, so
no `except` in the tool can report it cleanly.  `guard_interrupts` installs a
SIGINT handler that ends the process at once (`os._exit(130)`, after the
one-line message) when the interrupt arrives while a module is being
imported -- nothing has been written then but what a tool writes atomically
(`nem.cli.common.output_file`) -- and raises KeyboardInterrupt as usual
otherwise, which `nem.cli.entry.guarded_main` reports the same way after the
tool's own clean-up.

The console entry points of `nem-run` and `nem-compile` are here (`nem-opt`
guards itself in `nem.cli.nem_opt`); this module imports only what the
interpreter has already loaded.  An interrupt within the interpreter's own
start-up, before any of the toolchain's code runs, is Python's to report.
"""

from __future__ import annotations

import os
import signal
from importlib import import_module
from types import FrameType

_IMPORTLIB = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


def _importing(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename in _IMPORTLIB:
            return True
        frame = frame.f_back
    return False


class _Interrupts:
    """Whether the handler raised KeyboardInterrupt in this process."""

    raised = False


def interrupted() -> bool:
    """Whether `guard_interrupts`' handler raised KeyboardInterrupt: an
    exception that reaches the tool's guard afterwards is that interrupt,
    wrapped by native code it unwound through (MLIR's bindings report a
    KeyboardInterrupt raised in a Python callback of a walk as
    `RuntimeError: Exception raised in callback`, session 42's CI)."""
    return _Interrupts.raised


def guard_interrupts(prog: str) -> None:
    """Install the SIGINT handler of the module docstring for tool `prog`."""
    message = f"{prog}: interrupted\n".encode()

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        if _importing(frame):
            os.write(2, message)
            os._exit(130)
        _Interrupts.raised = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)


def _launch(prog: str, module: str) -> None:
    guard_interrupts(prog)
    import_module(module).main()


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")
"""What `nem-run` gives numpy's BLAS unless the environment says otherwise
(decision D-RT-BLAS-THREADS): one thread, set before numpy is imported."""


def nem_run() -> None:
    """`nem-run` (nem.cli.nem_run)."""
    os.environ.setdefault(*BLAS_THREADS)
    _launch("nem-run", "nem.cli.nem_run")


def nem_compile() -> None:
    """`nem-compile` (nem.cli.nem_compile)."""
    _launch("nem-compile", "nem.cli.nem_compile")
