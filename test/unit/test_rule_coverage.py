"""scripts/rule_coverage.py: tag scanning, rule-table reading and the arithmetic."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "rule_coverage.py"
RULES = REPO.parent / "shared" / "conformance" / "RULES.md"


def _load():
    spec = importlib.util.spec_from_file_location("rule_coverage", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rc = _load()
TAG = "RU" + "LE:"  # spelled apart so this file's synthetic tags are not counted by the scan

TINY_TABLE = """\
# Rules

| ID | Area | Rule | Kind | Spec section |
|----|------|------|------|--------------|
| AA-01 | A | first | static | §1 |
| AA-02 | A | second, with a `|`-free cell | static | §1 |
| BB-01 | B | a device one | device | §2 |
| CC-01 | C | a runtime one | runtime | §3 |
| DD-01 | D | a warning | warning | §4 |

Total: 5 rules.
"""


def test_reads_rule_table(tmp_path):
    rules_md = tmp_path / "RULES.md"
    rules_md.write_text(TINY_TABLE)
    assert rc.read_rules(rules_md) == {"AA-01": "static", "AA-02": "static",
                                       "BB-01": "device", "CC-01": "runtime",
                                       "DD-01": "warning"}


def test_tags_several_ids_commas_and_spaces():
    text = f"# {TAG} AA-01, BB-01 CC-01\nx = 1  # {TAG} DD-01\n# not a tag: AA-02\n"
    assert rc.tags_in_text(text) == {"AA-01", "BB-01", "CC-01", "DD-01"}


def test_arithmetic_on_tiny_table(tmp_path):
    rules_md = tmp_path / "RULES.md"
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
    assert cov == {"all": (3, 5), "static": (1, 2), "device": (1, 1),
                   "runtime": (0, 1), "warning": (1, 1)}
    assert rc.uncovered(rules, tagged) == ["AA-02"]
    text = rc.report(rules, tagged)
    assert "rule coverage: 3/5 (60.0%)" in text
    assert "static   1/2 (50.0%)" in text
    assert "uncovered static rules (1): AA-02" in text
    assert "ZZ-09" in text  # a tag that names no rule is reported


def test_script_on_repo():
    if not RULES.is_file():
        pytest.skip(f"RULES.md not found at {RULES}")
    out = subprocess.run([sys.executable, str(SCRIPT), "--rules", str(RULES)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("rule coverage: ")
    for kind in rc.KINDS:
        assert f"  {kind} " in out.stdout
    assert "uncovered static rules" in out.stdout
    rules = rc.read_rules(RULES)
    assert len(rules) == 185 and sum(k == "static" for k in rules.values()) == 140
