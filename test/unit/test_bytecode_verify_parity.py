"""The static rules give the same diagnostics on IR loaded from `.nemb` as on
the IR the `.nem` parser built (issue 13: the bytecode reader builds its own
IR, and the verifier's fast paths must not depend on how the IR was built).

The programs are the split inputs of the lit rule tests, most of them
erroneous (REG-*, BUF-*, TASK-*, FAM-*, DECO-*, LOOP-*, ...), plus the
benchmark generator's program: every diagnostic (severity, message,
file:line:col, rule, fix) must be identical."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bytecode_corpus import lit_chunks

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.verifier import verify_program
from nem.frontends.bytecode.reader import read_nemb
from nem.frontends.bytecode.writer import write_nemb
from nem.frontends.nem_text.parser import parse_nem

ROOT = Path(__file__).resolve().parents[2]


def _diags(prog) -> list[tuple]:
    return [
        (
            d.severity,
            d.message,
            str(d.loc),
            d.rule,
            d.fix,
            [(n.message, str(n.loc)) for n in d.notes],
        )
        for d in verify_program(prog)
    ]


def _parity(name: str, text: str) -> list[tuple] | None:
    """The diagnostics of both IRs (asserted equal); None when the text does
    not parse or the writer refuses it (nothing to compare)."""
    try:
        module = parse_nem(text, name)
        data = write_nemb(module)
    except NemDiagnosticError:
        return None
    parsed = _diags(module.ops.first)
    loaded = _diags(read_nemb(data, name).program)
    assert loaded == parsed
    return parsed


CHUNKS = lit_chunks()


def test_many_erroneous_programs_compared():
    errors = 0
    compared = 0
    for name, text in CHUNKS:
        diags = _parity(name, text)
        if diags is not None:
            compared += 1
            errors += any(d[0] == "error" for d in diags)
    # the comparison must cover real rule violations, not only clean programs
    assert compared >= 100 and errors >= 50, (compared, errors)


def test_benchmark_program():
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_roundtrip import generate

    assert _parity("bench.nem", generate(400)) == []


@pytest.mark.parametrize(
    "name,text",
    [
        (
            "overlap",
            "buffer B : L2 (size=64)\nloop i in [0..3]:\n"
            "  t = transfer.async(dst=region(B, i * 8, 16), src=region(B, 0, 16))\n  wait(t)\nendloop\n",
        ),
        (
            "out_of_bounds",
            "buffer B : L2 (size=64)\nloop i in [0..9]:\n  let R = region(B, i * 8, 16)\nendloop\n",
        ),
    ],
)
def test_loop_errors(name, text):
    diags = _parity(name, text)
    assert diags and diags[0][0] == "error", diags
