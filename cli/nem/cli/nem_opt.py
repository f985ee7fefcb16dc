"""`nem-opt`: the NEM modular optimizer driver (the driver itself is
`nem.cli.opt_driver`).

This module is the console entry point and imports nothing heavy: `nem-opt
--version` answers from the package metadata without loading xDSL, the
dialects and the passes (a third of a second of start-up), and Ctrl-C while
they load ends the tool quietly.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

VERSION_FLAGS = ("--version", "-version")
"""The spellings of --version (one dash or two, as every long option: D-OPT-FLAGS)."""


def asks_version(argv: Sequence[str]) -> bool:
    """Whether argparse would answer `argv` with the version: a version flag
    before any `--` (argparse acts on it where it meets it)."""
    for arg in argv:
        if arg == "--":
            return False
        if arg in VERSION_FLAGS:
            return True
    return False


def main(argv: Sequence[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if asks_version(args):
        from nem.cli.common import version_text
        from nem.cli.entry import tolerate_closed_pipes

        tolerate_closed_pipes()  # `nem-opt --version | head -1` (D-CLI-PIPE)
        print(version_text("nem-opt"))
        sys.exit(0)
    owns_process = argv is None  # run as a program, not called from Python
    if owns_process:  # Ctrl-C while the driver loads: one line, no traceback
        from nem.cli.launch import guard_interrupts

        guard_interrupts("nem-opt")
    from nem.cli.opt_driver import run

    try:
        run(argv, owns_process)
    finally:
        if owns_process:  # the process ends here
            from nem.cli.entry import keep_until_exit

            keep_until_exit()


if __name__ == "__main__":
    main()
