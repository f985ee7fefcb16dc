"""Every hostile input the fuzz harness (test/fuzz/harness.py) ever found,
kept as a regression test: each file of test/fuzz/corpus/<target>/ is run
through its target and must end in a located diagnostic or success -- no
internal error, no unlocated error, no wrong exit status, no hang (issue 11).

A fixed-seed smoke run of every target also runs here (a few inputs per
target; NEM_FUZZ=N runs N per target, NEM_FUZZ_SEED=S picks the seed).  The
long mode is `python test/fuzz/harness.py campaign --target T --seconds 1800`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ))

import harness  # noqa: E402
import outcomes  # noqa: E402

CASES = sorted(p for p in (FUZZ / "corpus").glob("*/*") if not p.name.endswith(".txt"))


def test_corpus_is_not_empty():
    assert CASES, "test/fuzz/corpus holds the reproducers of every fixed finding"
    assert {p.parent.name for p in CASES} <= set(harness.TARGETS)


@pytest.mark.parametrize("case", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
@pytest.mark.slow  # 4 s (122 cases)
def test_corpus_case(case: Path):
    target = harness.TARGETS[case.parent.name]
    res = harness.run_input(target, case.read_bytes(), timeout=60)
    assert res.outcome in harness.GOOD, f"{res.outcome} (exit {res.code})\n{res.err[-3000:]}"


SMOKE_COUNT = int(os.environ.get("NEM_FUZZ", "8"))
SMOKE_SEED = int(os.environ.get("NEM_FUZZ_SEED", "20261126"))


# the arrays target runs programs on random array files, NaNs included: numpy's
# "invalid value encountered in matmul" is expected there, not noise to show
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(harness.TARGETS))
def test_fuzz_smoke(name: str):
    stats = harness.smoke([name], SMOKE_COUNT, SMOKE_SEED, timeout=30)[name]
    assert set(stats) <= set(harness.GOOD), dict(stats)


@pytest.mark.parametrize(
    "code,err,outcome",
    [
        (0, "", "ok"),
        (1, "f.nem:3:4: error: bad [GRAM-03]\n", "diagnostic"),
        (1, "error: something\n", "unlocated"),
        (1, "error: --device nope: device 'nope' not found [DEV-20]\n", "diagnostic"),
        (2, "nem-run: error: --input: bad\n", "diagnostic"),
        (0, "f.nem:1:1: error: bad\n", "exit"),
        (2, "nem-opt: internal error: ValueError: x\nThis is a bug\n", "internal"),
        (1, "Traceback (most recent call last):\n", "internal"),
        (
            1,
            "x.mlir:5:41: error: cannot parse MLIR\n// not an internal error wh\n"
            "                                        ^\n",
            "diagnostic",
        ),
        (
            1,
            "x.nem:2:1: error: bad [GRAM-03]\nbuf\n^\nnem-run: internal error: KeyError\n",
            "internal",
        ),
        (0, "f.nem:6:3: remark: r [DEV-20]\n# CHECK: x.nem:1:1: error: quoted\n  ^\n", "ok"),
        (1, "/t/m.onnx: error: initializer 'w': raw_data has 10 bytes\n", "diagnostic"),
        (
            1,
            "m.onnx: node 3 'r' (Relu): error: bad\nm.onnx: error: 1 node cannot be imported\n",
            "diagnostic",
        ),
        (1, "m.onnx: node 2 'c' (Const\\x0cnt): error: bad\n", "diagnostic"),  # an escaped op type
        (0, "m.onnx: error: initializer 'w': raw_data has 10 bytes\n", "exit"),
        (1, "f.mlir:13:3: error: cannot parse\n  ^\n  ^\nfix: x\n", "diagnostic"),
    ],
)
def test_classification(code, err, outcome):
    assert outcomes.classify(code, err) == outcome


def test_classification_of_run_verdicts():
    assert outcomes.classify(1, "", "status: completed\nraces: 2\n") == "diagnostic"
    assert outcomes.classify(1, "", "status: completed\nraces: 0\n") == "exit"
