"""scripts/rule_coverage.py: tag scanning, reading the conformance table
(docs/conformance.md, in the repository: no file outside it is needed), the
arithmetic, and the table's check against the code."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "rule_coverage.py"
RULES = REPO / "docs" / "conformance.md"


def _load():
    spec = importlib.util.spec_from_file_location("rule_coverage", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


rc = _load()
TAG = "RU" + "LE:"  # spelled apart so this file's synthetic tags are not counted by the scan

TINY_TABLE = """\
# Rules

| ID | Spec | Rule | Class | Enforced in | Decisions |
|----|------|------|-------|-------------|-----------|
| AA-01 | §1 | first | static | `nem.dialect.verifier` | |
| AA-02 | §1 | second, with a `a | b` cell | static | by construction | D-LEX-1 |
| BB-01 | §2 | a device one | device | `nem.passes.device` | |
| CC-01 | §3 | a runtime one | runtime | `nem.runtime.nowhere` | D-NOT-THERE |
| DD-01 | §4 | a warning | warning | | |
"""


def test_reads_rule_table(tmp_path):
    rules_md = tmp_path / "conformance.md"
    rules_md.write_text(TINY_TABLE)
    assert rc.read_rules(rules_md) == {
        "AA-01": "static",
        "AA-02": "static",
        "BB-01": "device",
        "CC-01": "runtime",
        "DD-01": "warning",
    }


def test_tags_several_ids_commas_and_spaces():
    text = f"# {TAG} AA-01, BB-01 CC-01\nx = 1  # {TAG} DD-01\n# not a tag: AA-02\n"
    assert rc.tags_in_text(text) == {"AA-01", "BB-01", "CC-01", "DD-01"}


def test_arithmetic_on_tiny_table(tmp_path):
    rules_md = tmp_path / "conformance.md"
    rules_md.write_text(TINY_TABLE)
    tests = tmp_path / "test"
    (tests / "lit").mkdir(parents=True)
    (tests / "unit").mkdir()
    (tests / "lit" / "a.nem").write_text(f"# {TAG} AA-01\n# -----\n# {TAG} AA-01, BB-01\n")
    (tests / "unit" / "test_x.py").write_text(f"def test_x():\n    # {TAG} DD-01 ZZ-09\n    pass\n")
    (tests / "lit" / "Output").mkdir()
    (tests / "lit" / "Output" / "a.nem").write_text(f"# {TAG} AA-02\n")  # lit scratch: ignored
    rules = rc.read_rules(rules_md)
    tagged = rc.collect_tags(tests)
    assert tagged == {"AA-01", "BB-01", "DD-01", "ZZ-09"}
    cov = rc.coverage(rules, tagged)
    assert cov == {
        "all": (3, 5),
        "static": (1, 2),
        "device": (1, 1),
        "runtime": (0, 1),
        "warning": (1, 1),
    }
    assert rc.uncovered(rules, tagged) == ["AA-02"]
    text = rc.report(rules, tagged)
    assert "rule coverage: 3/5 (60.0%)" in text
    assert "static   1/2 (50.0%)" in text
    assert "uncovered static rules (1): AA-02" in text
    assert "ZZ-09" in text  # a tag that names no rule is reported


def test_check_finds_stale_and_missing_entries(tmp_path):
    """--check: a rule without a location, a module that does not exist or
    does not mention the rule, a decision spec-decisions.md lacks."""
    rules_md = tmp_path / "conformance.md"
    rules_md.write_text(TINY_TABLE)
    problems = rc.check(rc.read_table(rules_md))
    assert problems == [
        "AA-01: nem.dialect.verifier does not mention AA-01",
        "BB-01: nem.passes.device does not mention BB-01",
        "CC-01: module nem.runtime.nowhere does not exist",
        "CC-01: decision D-NOT-THERE is not in spec-decisions.md",
        "DD-01: says nowhere where it is enforced (or why not)",
    ]


def test_script_on_repo():
    """The repository's own table: 185 rules, consistent with the code;
    coverage and one rule's tests are reported."""
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("rule coverage: ")
    for kind in rc.KINDS:
        assert f"  {kind} " in out.stdout
    assert "uncovered static rules" in out.stdout
    rules = rc.read_rules(RULES)
    assert len(rules) == 185 and sum(k == "static" for k in rules.values()) == 140
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0, out.stdout
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--rule", "HAZ-01"], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0 and "test/lit/hazards/ordering.nem" in out.stdout


def test_every_decision_the_gaps_name_exists():
    """The "Gaps" section points at decisions that spec-decisions.md defines."""
    text = RULES.read_text(encoding="utf-8")
    gaps = text[text.index("## Gaps") :]
    named = set(re.findall(r"D-[A-Z0-9-]*[A-Z0-9]", gaps))
    defined = set(
        re.findall(
            r"^### (D-[A-Z0-9-]+)$",
            (REPO / "docs" / "spec-decisions.md").read_text(encoding="utf-8"),
            re.M,
        )
    )
    assert named and named <= defined, sorted(named - defined)


def test_decision_log_has_an_index_of_every_decision():
    """docs/spec-decisions.md (issue 36): every decision has a section of its
    own (`### D-...`), named once, and the index links each one exactly once,
    in the same order, each by a one-line decision (at most 500 characters:
    the reasons, figures and sessions are the section's)."""
    text = (REPO / "docs" / "spec-decisions.md").read_text(encoding="utf-8")
    sections = re.findall(r"^### (D-[A-Z0-9-]+)$", text, re.M)
    linked = re.findall(r"^\| \[(D-[A-Z0-9-]+)\]\(#([a-z0-9-]+)\) \|", text, re.M)
    assert len(sections) > 200 and len(set(sections)) == len(sections)
    assert [i for i, _ in linked] == sections
    assert all(anchor == i.lower() for i, anchor in linked)
    rows = re.findall(r"^\| \[D-[A-Z0-9-]+\]\(#[a-z0-9-]+\) \|.*$", text, re.M)
    assert len(rows) == len(sections)
    assert [r[:60] for r in rows if len(r) > 500] == []
