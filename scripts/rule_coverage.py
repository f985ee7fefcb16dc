#!/usr/bin/env python3
"""Rule coverage of the test suite against the RULES.md conformance checklist.

A test names the rules it enforces with a tag comment, in lit files and in
pytest files alike:

    # RULE: CONST-05
    # RULE: FAM-07, QUANT-07 FAM-11      (several ids: commas and/or spaces)

This script collects every tag under `test/`, reads the rule table of
RULES.md (ID | Area | Rule | Kind | Spec section) and prints covered/total
overall and per kind (static/device/runtime/warning), then the static rules
no test names.  It only reports: the exit status is 0 whatever the coverage.

    python scripts/rule_coverage.py [--rules PATH] [--tests DIR]

By default RULES.md is `../shared/conformance/RULES.md` relative to the
repository root (the folder holding this script's `scripts/`).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RULES = REPO_ROOT.parent / "shared" / "conformance" / "RULES.md"
KINDS = ("static", "device", "runtime", "warning")
RULE_ID = r"[A-Z]+-\d+"
_TAG_RE = re.compile(r"RULE:\s*(" + RULE_ID + r"(?:[\s,]+" + RULE_ID + r")*)")
_ROW_RE = re.compile(r"^\|\s*(" + RULE_ID + r")\s*\|")
TEST_SUFFIXES = {".nem", ".mlir", ".test", ".py"}


def read_rules(path: Path) -> dict[str, str]:
    """Rule id -> kind, from the markdown rule table (rows `| ID | ... | kind | ... |`)."""
    rules: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not _ROW_RE.match(line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        kind = next((c for c in reversed(cells) if c in KINDS), None)
        if kind is not None:
            rules[cells[0]] = kind
    return rules


def tags_in_text(text: str) -> set[str]:
    """Every rule id named by a `RULE:` tag in `text`."""
    ids: set[str] = set()
    for m in _TAG_RE.finditer(text):
        ids.update(re.findall(RULE_ID, m.group(1)))
    return ids


def collect_tags(test_dir: Path) -> set[str]:
    """Rule ids tagged anywhere under `test_dir` (lit and pytest files; Output/ skipped)."""
    ids: set[str] = set()
    for path in sorted(test_dir.rglob("*")):
        if not path.is_file() or path.suffix not in TEST_SUFFIXES:
            continue
        if {"Output", "__pycache__"} & set(path.parts):
            continue
        ids |= tags_in_text(path.read_text(encoding="utf-8", errors="replace"))
    return ids


def coverage(rules: dict[str, str], tagged: set[str]) -> dict[str, tuple[int, int]]:
    """(covered, total) overall (key "all") and per kind."""
    result = {"all": (sum(1 for r in rules if r in tagged), len(rules))}
    for kind in KINDS:
        ids = [r for r, k in rules.items() if k == kind]
        result[kind] = (sum(1 for r in ids if r in tagged), len(ids))
    return result


def uncovered(rules: dict[str, str], tagged: set[str], kind: str = "static") -> list[str]:
    return [r for r, k in rules.items() if k == kind and r not in tagged]


def _pct(c: int, t: int) -> str:
    return f"{100.0 * c / t:.1f}%" if t else "n/a"


def report(rules: dict[str, str], tagged: set[str]) -> str:
    cov = coverage(rules, tagged)
    lines = [f"rule coverage: {cov['all'][0]}/{cov['all'][1]} ({_pct(*cov['all'])})"]
    for kind in KINDS:
        c, t = cov[kind]
        lines.append(f"  {kind:<8} {c}/{t} ({_pct(c, t)})")
    missing = uncovered(rules, tagged)
    lines.append(f"uncovered static rules ({len(missing)}): " + (", ".join(missing) or "none"))
    unknown = sorted(tagged - set(rules))
    if unknown:
        lines.append(f"tags naming no rule of the table ({len(unknown)}): " + ", ".join(unknown))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=Path, default=DEFAULT_RULES, help="path of RULES.md")
    ap.add_argument("--tests", type=Path, default=REPO_ROOT / "test",
                    help="folder scanned for RULE: tags")
    args = ap.parse_args(argv)
    if not args.rules.is_file():
        print(f"rule_coverage: RULES.md not found at {args.rules} (use --rules PATH)",
              file=sys.stderr)
        return 0
    print(report(read_rules(args.rules), collect_tags(args.tests)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
