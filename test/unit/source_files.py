"""Shared test helper: the project's own files of a kind, for tests that run
over all of them (every `.nem` program, every lit MLIR input).

lit writes each test's temporaries in an `Output` directory beside it
(`test/lit/**/Output`): generated files, absent from a clean clone until lit
runs, some written broken on purpose.  A corpus that globbed them grew by 120
tests after a lit run (the README's `run_all.sh` counted 3877 where a clean
clone's CI counted 3757) and could fail on a stale temporary, so no corpus
includes them: which tests run depends on the sources alone."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = frozenset({"Output", ".git", "__pycache__", ".pytest_cache", ".hypothesis"})
"""Directory names whose files are made by tools, never sources."""


def sources(pattern: str, *dirs: str) -> list[Path]:
    """The files matching `pattern` under each of `dirs` (relative to the
    checkout; "." for all of it), sorted, none under a generated directory
    or a virtual environment."""
    return sorted(
        {
            p
            for d in dirs
            for p in (ROOT / d).rglob(pattern)
            if not GENERATED.intersection(parts := p.relative_to(ROOT).parts)
            and not any("venv" in part for part in parts)
        }
    )
