"""The exit-status contract shared by the command-line tools."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from nem.cli.launch import interrupted


class _PipeTolerant:
    """A text stream whose reader may go away (`nem-run p.nem | head -1`,
    `nem-opt x.nem -p nem-verify 2>&1 | grep -q ...`): once a write or flush
    meets a closed pipe, the stream's file descriptor is pointed at
    /dev/null and the tool runs on, so that its exit status is still the
    status of its work (errors found: 1), never a success it did not earn
    (decision D-CLI-PIPE)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)
        try:
            self._stream.flush()  # what was buffered goes to /dev/null now
        except (BrokenPipeError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def tolerate_closed_pipes() -> None:
    """Wrap stdout and stderr in `_PipeTolerant` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _PipeTolerant):
            try:
                stream.fileno()
            except (AttributeError, OSError, ValueError):
                continue  # not a file (pytest's capture): nothing to protect
            setattr(sys, name, _PipeTolerant(stream))


def guarded_main(
    prog: str, run: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None
) -> None:
    """`sys.exit(run(argv))`, with usage errors 2, Ctrl-C 130, and an
    unexpected exception reported as a bug in one line (exit 2; the
    traceback with NEM_TRACEBACK=1), never a traceback by default.  A closed
    output pipe does not change the status (`tolerate_closed_pipes`); one met
    by a binary write (`-t nemb -o -`) is exit 1: the output is incomplete."""
    tolerate_closed_pipes()
    try:
        code = run(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    except BrokenPipeError:
        code = 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        code = 130
    except MemoryError:
        print(out_of_memory(prog), file=sys.stderr)
        code = 1
    except Exception as e:
        if interrupted():  # the interrupt, wrapped by native code (`launch.interrupted`)
            print(f"{prog}: interrupted", file=sys.stderr)
            code = 130
        else:  # a bug, never a user error: no traceback unless asked
            notes = "".join(f"note: {n}\n" for n in getattr(e, "__notes__", ()))
            print(
                f"{prog}: internal error: {type(e).__name__}: {e}\n{notes}"
                f"This is a bug in {prog}; rerun with NEM_TRACEBACK=1 for the traceback.",
                file=sys.stderr,
            )
            if os.environ.get("NEM_TRACEBACK"):
                raise
            code = 2
    if argv is None:  # the tool owns the process, which ends here
        keep_until_exit()
    sys.exit(code)


def out_of_memory(prog: str) -> str:
    """The error of a run that exhausted the memory the process may use: the
    limits (D-LIMITS) bound what an input may ask for before it is read;
    this is the last line of defence, one line, never a traceback."""
    return (
        f"{prog}: error: out of memory: the input needs more memory than this process "
        "may use (its address-space limit or the machine's)\nfix: give a smaller input, "
        "or run with more memory"
    )


def keep_until_exit() -> None:
    """Let the objects alive now live until the process ends, out of the
    cyclic garbage collector's sight (`gc.freeze`), as clang's -disable-free
    leaves its AST to the OS.  A large program's IR is a million objects in
    reference cycles: each collection that traverses it costs a tenth of a
    second or more, and the last one, at interpreter exit, freed it object by
    object only for the process to end (0.9 s of a 5 s `nem-opt` round trip
    of a 21,000-line program; the collections while it was checked and
    printed, another 0.4 s).  The tools call it once the program is loaded
    and before they exit, and only when they run as programs (`argv` None),
    never when called from Python.  The load runs with the collector paused
    (`gc_paused`) until this call: resumed first, the collector's next
    young-generation pass would traverse the whole just-loaded IR once (0.13 s
    of that round trip)."""
    gc.freeze()
