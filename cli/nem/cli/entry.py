"""The exit-status contract shared by the command-line tools."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence


def guarded_main(prog: str, run: Callable[[Sequence[str] | None], int],
                 argv: Sequence[str] | None = None) -> None:
    """`sys.exit(run(argv))`, with usage errors 2, a closed pipe 0, Ctrl-C
    130, and an unexpected exception reported as a bug in one line (exit 2;
    the traceback with NEM_TRACEBACK=1), never a traceback by default."""
    try:
        code = run(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    except BrokenPipeError:
        code = 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        code = 130
    except Exception as e:  # a bug, never a user error: no traceback unless asked
        print(f"{prog}: internal error: {type(e).__name__}: {e}\n"
              f"This is a bug in {prog}; rerun with NEM_TRACEBACK=1 for the traceback.",
              file=sys.stderr)
        if os.environ.get("NEM_TRACEBACK"):
            raise
        code = 2
    sys.exit(code)
