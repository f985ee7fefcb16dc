"""`.nem -> .nemb -> .nem` over the repository's programs (docs/bytecode.md).

For every program that parses and verifies: the text printed from the
decoded bytecode is the canonical text of the source, the decoded IR is the
same IR (generic MLIR with locations), writing it again gives the same bytes
(determinism), and runs from `.nemb` and from `.nem` end with the same memory
(or fail with the same diagnostics).  Random programs of the `.nem`
round-trip generator (program_generator.py) go through the same checks.
"""

from __future__ import annotations

import numpy as np
import pytest
from bytecode_corpus import corpus, same_ir_text
from hypothesis import HealthCheck, given, settings
from program_generator import Generated, programs

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.verifier import verify_program
from nem.frontends.bytecode.loader import load_nemb
from nem.frontends.bytecode.writer import WriteOptions, write_nemb
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem
from nem.runtime.api import NemInterpreter

CORPUS = corpus()


def test_corpus_is_not_trivial():
    assert len(CORPUS) >= 40, [n for n, _ in CORPUS]


@pytest.mark.parametrize("name,text", CORPUS, ids=[n for n, _ in CORPUS])
def test_text_ir_and_bytes_roundtrip(name, text):
    module = parse_nem(text, name)
    data = write_nemb(module)
    loaded = load_nemb(data, name + "b")
    assert print_nem(loaded.module) == print_nem(module)
    assert same_ir_text(loaded.module) == same_ir_text(module)
    assert write_nemb(loaded.module) == data
    # an independently parsed copy of the same text gives the same bytes
    assert write_nemb(parse_nem(text, name)) == data


@pytest.mark.parametrize("name,text", CORPUS, ids=[n for n, _ in CORPUS])
def test_stripped_files_keep_the_program(name, text):
    module = parse_nem(text, name)
    data = write_nemb(module, WriteOptions(strip_names=True, strip_debug=True))
    assert len(data) < len(write_nemb(module))
    loaded = load_nemb(data, name + "b")
    # names are invented, so compare the program with names normalized
    again = parse_nem(print_nem(loaded.module), "again")
    assert not [d for d in verify_program(again.ops.first) if d.severity == "error"]
    assert _shape(print_nem(loaded.module)) == _shape(print_nem(module))


def _shape(text: str) -> list[str]:
    """The text with every identifier replaced and without the `program NAME:`
    header (a stripped file has no program name): what stripping must keep."""
    import re

    lines = [re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*\b", "N", line) for line in text.splitlines()]
    return [ln for ln in lines if ln and ln != "N N:"]


def _run(load) -> tuple[str, dict[str, bytes] | list[str]]:
    interp = NemInterpreter()
    try:
        prog = load(interp)
    except NemDiagnosticError as e:
        # the loader may reject earlier (Requirements), with the same rule
        return "rejected", sorted({d.rule for d in e.diagnostics if d.severity == "error"})
    interp.randomize_inputs(7)
    result = interp.run()
    memory = {name: interp.read_buffer(name).tobytes() for name in prog.memory.buffers}
    return result.status, memory


def _device_rules(src, text: str) -> set[str]:
    from nem.devices.program_device import program_device
    from nem.passes.device import device_diagnostics

    prog = parse_nem(text, str(src)).ops.first
    device = program_device(prog, str(src))
    return (
        {d.rule for d in device_diagnostics(prog, device) if d.severity == "error"}
        if device is not None
        else set()
    )


MAX_RUN_TASKS = 20_000
"""Programs that verify but would run longer than this (the hostile-input
tests' 10^14-iteration loops) are compared by their IR only: running them is
what nem-run's task budget refuses (D-LIMITS)."""


def _small(text: str) -> bool:
    from nem.runtime.budget import estimate_task_count

    return estimate_task_count(parse_nem(text, "prog.nem").ops.first) <= MAX_RUN_TASKS


RUNNABLE = [(n, t) for n, t in CORPUS if "bench_roundtrip" not in n and _small(t)]


@pytest.mark.parametrize("name,text", RUNNABLE, ids=[n for n, _ in RUNNABLE])
@pytest.mark.slow  # 34 s (128 cases)
def test_runs_the_same_from_nemb(name, text, tmp_path):
    src = tmp_path / "prog.nem"
    src.write_text(text)
    nemb = tmp_path / "prog.nemb"
    nemb.write_bytes(write_nemb(parse_nem(text, str(src))))
    from_text = _run(lambda i: i.load(src))
    from_bytes = _run(lambda i: i.load(nemb))
    if from_bytes[0] == "rejected" and from_text[0] != "rejected":
        # The bytecode loader also checks capacity and units at load (late
        # binding); `nem-run` on text finds those at run time or not at all.
        # It must then agree with the static device checks (nem-verify-device).
        assert set(from_bytes[1]) <= _device_rules(src, text), from_bytes
        return
    assert from_text[0] == from_bytes[0]
    if isinstance(from_text[1], dict):
        assert from_text[1].keys() == from_bytes[1].keys()
        for k in from_text[1]:
            assert np.array_equal(
                np.frombuffer(from_text[1][k], np.uint8), np.frombuffer(from_bytes[1][k], np.uint8)
            ), k
    else:
        assert from_text[1] == from_bytes[1]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
def test_random_programs_roundtrip_through_bytecode(g: Generated):
    module = parse_nem(g.text, "gen.nem")
    data = write_nemb(module)
    loaded = load_nemb(data, "gen.nemb", verify=False)
    assert print_nem(loaded.module) == print_nem(module)
    assert same_ir_text(loaded.module) == same_ir_text(module)
    assert write_nemb(loaded.module) == data
