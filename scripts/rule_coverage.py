#!/usr/bin/env python3
"""Rule coverage of the test suite against the project's conformance table.

The rules are the rows of `docs/conformance.md` (ID | Spec | Rule | Class |
Enforced in | Decisions).  A test names the rules it enforces with a tag
comment, in lit files and in pytest files alike:

    # RULE: CONST-05
    # RULE: FAM-07, QUANT-07 FAM-11      (several ids: commas and/or spaces)

    python scripts/rule_coverage.py              covered/total overall and per
                                                 class, the static rules no test
                                                 names, tags naming no rule
    python scripts/rule_coverage.py --rule ID    one rule: its row and the tests
                                                 tagged with it
    python scripts/rule_coverage.py --check      the table against the code:
                                                 every rule says where it is
                                                 enforced, every module named
                                                 there exists and mentions the
                                                 rule id, every decision named
                                                 exists (exit 1 otherwise)

Tags are read when the script runs, so whatever is tagged is counted.  The
coverage report only reports: its exit status is 0 whatever the coverage.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RULES = REPO_ROOT / "docs" / "conformance.md"
DECISIONS = REPO_ROOT / "docs" / "spec-decisions.md"
# the roots holding the `nem` namespace package (import path = file path)
PACKAGE_ROOTS = ("nem_dialect", "frontends", "compile", "passes", "runtime", "devices", "cli")
KINDS = ("static", "device", "runtime", "warning")
RULE_ID = r"[A-Z]+-\d+"
_TAG_RE = re.compile(r"RULE:\s*(" + RULE_ID + r"(?:[\s,]+" + RULE_ID + r")*)")
_ROW_RE = re.compile(r"^\|\s*(" + RULE_ID + r")\s*\|")
_MODULE_RE = re.compile(r"^nem(\.\w+)+$")
TEST_SUFFIXES = {".nem", ".mlir", ".test", ".py"}


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str
    cells: tuple[str, ...]  # the row's cells, in table order

    @property
    def enforced(self) -> str:
        """The "Enforced in" cell (the one after the class)."""
        k = self.cells.index(self.kind)
        return self.cells[k + 1] if k + 1 < len(self.cells) else ""

    @property
    def decisions(self) -> list[str]:
        k = self.cells.index(self.kind)
        return re.findall(r"D-[A-Z0-9-]*[A-Z0-9]", " ".join(self.cells[k + 2 :]))


def _split_row(line: str) -> list[str]:
    """The cells of a markdown table row (a `|` inside backticks is text)."""
    cells, cur, code = [], [], False
    for ch in line.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    cells.append("".join(cur).strip())
    return cells


def read_table(path: Path) -> dict[str, Rule]:
    """Rule id -> Rule, from the markdown rule tables (rows `| ID | ... | class | ... |`)."""
    rules: dict[str, Rule] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not _ROW_RE.match(line):
            continue
        cells = _split_row(line)
        kind = next((c for c in cells[1:] if c in KINDS), None)
        if kind is not None:
            rules[cells[0]] = Rule(cells[0], kind, tuple(cells))
    return rules


def read_rules(path: Path) -> dict[str, str]:
    """Rule id -> class."""
    return {r.id: r.kind for r in read_table(path).values()}


def tags_in_text(text: str) -> set[str]:
    """Every rule id named by a `RULE:` tag in `text`."""
    ids: set[str] = set()
    for m in _TAG_RE.finditer(text):
        ids.update(re.findall(RULE_ID, m.group(1)))
    return ids


def _test_files(test_dir: Path):
    for path in sorted(test_dir.rglob("*")):
        if (
            path.is_file()
            and path.suffix in TEST_SUFFIXES
            and not {"Output", "__pycache__"} & set(path.parts)
        ):
            yield path


def collect_tags(test_dir: Path) -> set[str]:
    """Rule ids tagged anywhere under `test_dir` (lit and pytest files; Output/ skipped)."""
    ids: set[str] = set()
    for path in _test_files(test_dir):
        ids |= tags_in_text(path.read_text(encoding="utf-8", errors="replace"))
    return ids


def tests_of(rule_id: str, test_dir: Path) -> list[str]:
    """The test files (relative to the repository) that tag `rule_id`."""
    return [
        str(p.relative_to(REPO_ROOT) if p.is_relative_to(REPO_ROOT) else p)
        for p in _test_files(test_dir)
        if rule_id in tags_in_text(p.read_text(encoding="utf-8", errors="replace"))
    ]


def coverage(rules: dict[str, str], tagged: set[str]) -> dict[str, tuple[int, int]]:
    """(covered, total) overall (key "all") and per class."""
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


def module_file(name: str) -> Path | None:
    """The file of module `nem.x.y` (under one of the package roots), or None."""
    rel = Path(*name.split(".")).with_suffix(".py")
    for root in PACKAGE_ROOTS:
        path = REPO_ROOT / root / rel
        if path.is_file():
            return path
    return None


def check(rules: dict[str, Rule], decisions_md: Path = DECISIONS) -> list[str]:
    """Problems of the table: a rule that does not say where it is enforced,
    a module named in "Enforced in" that does not exist or does not mention
    the rule id, a decision that `spec-decisions.md` does not define."""
    defined = set(
        re.findall(r"^### (D-[A-Z0-9-]+)$", decisions_md.read_text(encoding="utf-8"), re.M)
    )
    problems = []
    for r in rules.values():
        if not r.enforced:
            problems.append(f"{r.id}: says nowhere where it is enforced (or why not)")
        for name in re.findall(r"`([^`]+)`", r.enforced):
            if not _MODULE_RE.match(name):
                continue
            path = module_file(name)
            if path is None:
                problems.append(f"{r.id}: module {name} does not exist")
            elif not re.search(r"\b" + re.escape(r.id) + r"\b", path.read_text(encoding="utf-8")):
                problems.append(f"{r.id}: {name} does not mention {r.id}")
        for d in r.decisions:
            if d not in defined:
                problems.append(f"{r.id}: decision {d} is not in {decisions_md.name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rules",
        type=Path,
        default=DEFAULT_RULES,
        help="the conformance table (default docs/conformance.md)",
    )
    ap.add_argument(
        "--tests", type=Path, default=REPO_ROOT / "test", help="folder scanned for RULE: tags"
    )
    ap.add_argument("--rule", metavar="ID", help="show one rule and the tests tagged with it")
    ap.add_argument(
        "--check", action="store_true", help="check the table against the code; exit 1 on a problem"
    )
    args = ap.parse_args(argv)
    if not args.rules.is_file():
        print(
            f"rule_coverage: no conformance table at {args.rules} (use --rules PATH)",
            file=sys.stderr,
        )
        return 2
    table = read_table(args.rules)
    if args.rule:
        r = table.get(args.rule)
        if r is None:
            print(f"rule_coverage: no rule {args.rule} in {args.rules}", file=sys.stderr)
            return 2
        print(" | ".join(r.cells))
        tests = tests_of(r.id, args.tests)
        print(f"tests ({len(tests)}): " + (", ".join(tests) or "none"))
        return 0
    if args.check:
        problems = check(table)
        for p in problems:
            print(p)
        print(f"conformance table: {len(table)} rules, {len(problems)} problems")
        return 1 if problems else 0
    print(report({r.id: r.kind for r in table.values()}, collect_tags(args.tests)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
