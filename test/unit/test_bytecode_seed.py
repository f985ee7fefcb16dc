"""D-BC-SEED: the facts the bytecode reader hands the verifier
(`LoadedBytecode.facts`: each integer value's static value and structural
key, the deepest expression and loop nest) are exactly what the verifier
computes from scratch, and verifying with them gives the same diagnostics as
verifying without them.  Checked on every `.nem` program of the repository
(the lit inputs, most of them erroneous, and the examples), on the benchmark
program, and on fuzzed files that still decode."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from bytecode_corpus import lit_chunks, mutate, reseal
from xdsl.dialects.builtin import IndexType

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.expressions import Evaluator, expression_depth
from nem.dialect.limits import MAX_EXPR_DEPTH
from nem.dialect.ops import LoopOp, ProgramOp
from nem.dialect.verifier import ProgramVerifier, verify_program
from nem.frontends.bytecode.container import HEADER_SIZE, MAGIC, BytecodeError
from nem.frontends.bytecode.loader import load_nemb
from nem.frontends.bytecode.reader import LoadedBytecode, read_nemb
from nem.frontends.bytecode.writer import write_nemb
from nem.frontends.nem_text.parser import parse_nem

ROOT = Path(__file__).resolve().parents[2]
CHUNKS = lit_chunks()


def _diags(prog: ProgramOp, loaded: LoadedBytecode | None = None) -> list[tuple]:
    facts = loaded.facts if loaded is not None else None
    return [
        (d.severity, d.message, str(d.loc), d.rule, d.fix)
        for d in verify_program(prog, facts=facts)
    ]


def check_facts(loaded: LoadedBytecode) -> None:
    """The reader's facts against the verifier's own computation."""
    facts = loaded.facts
    assert facts is not None
    prog = loaded.program
    # every integer value (results of index type, loop variables), once
    ints = [v for op in prog.walk() for v in op.results if isinstance(v.type, IndexType)]
    ints += [op.body.block.args[0] for op in prog.walk() if isinstance(op, LoopOp)]
    assert sorted(map(id, ints)) == sorted(map(id, facts.values))
    ev = Evaluator()  # from scratch
    assert [ev.static(v) for v in facts.values] == facts.statics
    # the structural keys partition the values alike (key objects differ)
    seeded_to_scratch: dict[object, object] = {}
    scratch_to_seeded: dict[object, object] = {}
    for v, seeded in zip(facts.values, facts.keys):
        scratch = ev.key(v)
        assert seeded_to_scratch.setdefault(seeded, scratch) == scratch
        assert scratch_to_seeded.setdefault(scratch, seeded) == seeded
    # every operand defined before its use in its block or an enclosing one
    # (TASK-03/NAME-01, the check the seeded verifier skips)
    assert facts.operands_in_scope
    pv = ProgramVerifier(prog)
    for op in prog.walk():
        for v in op.operands:
            pv._check_defined(op, v, op.parent_block())
    assert pv.diags == []
    # the depth maxima of stage 0 (D-LIMITS)
    depths: dict = {}
    walk = ProgramVerifier(prog).walk()
    expr = max([d for op, _ in walk if (d := expression_depth(op, depths)) is not None], default=0)
    assert facts.max_expr_depth == expr
    assert facts.max_loop_depth == max(
        [len(loops) + isinstance(op, LoopOp) for op, loops in walk], default=0
    )


def _load_both(name: str, text: str) -> tuple[ProgramOp, LoadedBytecode] | None:
    try:
        module = parse_nem(text, name)
        data = write_nemb(module)
    except NemDiagnosticError:
        return None
    return module.ops.first, read_nemb(data, name)


def test_repository_programs():
    compared = errors = 0
    files = sorted(ROOT.glob("examples/*.nem"))
    programs = [*CHUNKS, *((str(f), f.read_text()) for f in files)]
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_roundtrip import generate

    programs.append(("bench.nem", generate(300)))
    for name, text in programs:
        both = _load_both(name, text)
        if both is None:
            continue
        parsed, loaded = both
        check_facts(loaded)
        seeded = _diags(loaded.program, loaded)
        assert seeded == _diags(loaded.program) == _diags(parsed), name
        compared += 1
        errors += any(d[0] == "error" for d in seeded)
    assert compared >= 150 and errors >= 50, (compared, errors)


def test_fuzzed_files_that_decode():
    rng = random.Random(20261127)
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_roundtrip import generate

    base = write_nemb(parse_nem(generate(40), "b.nem"))
    decoded = 0
    for _ in range(300):
        data = mutate(rng, base)
        if len(data) >= HEADER_SIZE and data[:4] == MAGIC:
            data = reseal(data)
        try:
            loaded = read_nemb(data, "fuzz.nemb")
        except BytecodeError:
            continue
        check_facts(loaded)
        assert _diags(loaded.program, loaded) == _diags(loaded.program)
        decoded += 1
    assert decoded >= 20, decoded


def test_deep_expression_still_reported():
    """A file whose expression exceeds the depth limit (another writer's; the
    text refuses it): the seeded verifier still runs stage 0 and reports it.
    RULE: D-LIMITS"""
    from nem.dialect.builder import ProgramBuilder

    b = ProgramBuilder("deep")
    e = b.const("c", 1)
    for _ in range(MAX_EXPR_DEPTH + 5):
        e = e + 1
    b.buffer("B", "L2", e)
    data = write_nemb(b.finish(verify=False))
    loaded = read_nemb(data, "deep.nemb")
    check_facts(loaded)
    assert loaded.facts is not None and loaded.facts.max_expr_depth > MAX_EXPR_DEPTH
    with pytest.raises(NemDiagnosticError, match="operations deep"):
        load_nemb(data, "deep.nemb")
