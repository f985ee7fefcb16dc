"""Differential test: the static checker (`nem-verify`) against the runtime
(the explorer, else random schedules) on generated programs (issue 10 item 3).

Required, with no exception: a program the checker accepts has no race and
no deadlock on any explored schedule (soundness), and a program on which the
runtime witnesses a race is rejected by the checker.  Static rejections that
no schedule witnesses are counted by class; each class is documented in
docs/design.md ("Execution model", static-only rejections).

The default run is short and fixed-seed (CI); `NEM_DIFF=N` runs N programs
(the long mode, e.g. `NEM_DIFF=3000 python -m pytest -q -s
test/unit/test_differential.py`), printing the figures.
RULE: HAZ-01 HAZ-03 LOOP-06"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from semantics_programs import dynamic_verdict, on_generated_programs, static_class, static_verdict

N = int(os.environ.get("NEM_DIFF", "60"))
FIGURES: Counter = Counter()
HAZARD_RULES = {"HAZ-01", "HAZ-03"}


def check_one(src: str) -> None:
    errors = static_verdict(src)
    other = [d for d in errors if d.rule not in HAZARD_RULES]
    assert not other, (
        f"generator produced a program with non-hazard errors: {[d.render() for d in other]}\n{src}"
    )
    dyn = dynamic_verdict(src)
    assert not dyn.errors, f"runtime error on a statically valid program: {dyn.errors}\n{src}"
    FIGURES["programs"] += 1
    if not errors:
        FIGURES["static accept"] += 1
        assert not dyn.races and not dyn.deadlocks, (
            "UNSOUND: nem-verify accepts a program the runtime shows racing or deadlocking:\n"
            + "\n".join(str(r) for r in dyn.races)
            + "\n"
            + src
        )
        return
    FIGURES["static reject"] += 1
    if dyn.races:
        FIGURES["witnessed"] += 1
        return
    FIGURES["static only: " + static_class(errors[0])] += 1


@on_generated_programs(20261126, N)
@pytest.mark.slow  # 9 s
def test_checker_agrees_with_the_runtime(src):
    check_one(src)


def test_zz_report_figures():
    """Print the figures of the run (pytest -s shows them)."""
    if FIGURES:
        print("\ndifferential figures:", dict(sorted(FIGURES.items())))
        assert FIGURES["programs"] > 0
