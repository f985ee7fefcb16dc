"""Fast paths of the final checks of a compile (issue 30): each gives the
slow path's answer.

- `parse_config_document(lazy=True)` (`find_device` on a program file, which
  lexed all of a lowered CNN's text to learn it is not a config document):
  the same document, and an error exactly when the eager parse errs;
- `ir_walk.ops_of` (the device checks' walks): the isinstance filter of
  `op.walk()`;
- `TaskRules._elements_of` (the elements a region addresses, once per
  region type): `_elements` of each region value;
- `printer.printed_statements` (each op class's kind decided once): the
  kind asked of every op;
- `parse_nem_facts` (nem-opt's verification of the program the parser just
  built skips what the parser established, D-BC-SEED): the same diagnostics,
  and facts that are the verifier's own measures of the program;
- `capacity.memory_maps`' buffer walk (`type(op) is`, one loop nest's
  instance count per parent op): the recursive isinstance walk and the
  per-buffer `buffer_instances` of before;
- nem-verify's hazard stage takes the happens-before `Structure` its token
  stage built (`nem.passes.tokens.STRUCTURES`, only inside the pipeline):
  the diagnostics of one build per stage.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_files import sources

from nem.analysis import capacity
from nem.analysis.capacity import buffer_instances, level_key, memory_maps, size_and_align
from nem.analysis.ir_walk import ops_of
from nem.devices.device_lookup import find_device
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.expressions import Evaluator, expression_depth
from nem.dialect.ops import BufferOp, ComputeOp, LoopOp, ProgramOp, RegionOp, TaskOp
from nem.dialect.semantics.layout import layout
from nem.dialect.task_rules import _elements
from nem.dialect.verifier import ProgramVerifier, verify_program
from nem.frontends.nem_text.config_parser import parse_config_document
from nem.frontends.nem_text.parser import parse_nem, parse_nem_facts
from nem.frontends.nem_text.printer import _STATEMENT_KINDS, printed_statements

ROOT = Path(__file__).resolve().parents[2]
NEM_FILES = sources("*.nem", "examples", "devices", "test/lit", "test/fuzz/corpus")


def _outcome(text: str, file: str, lazy: bool) -> object:
    try:
        return parse_config_document(text, file, lazy=lazy)
    except NemDiagnosticError:
        return "error"


def test_lazy_config_parse_is_the_eager_one():
    """Every repository `.nem` file: the same document or, both, an error."""
    assert len(NEM_FILES) > 100
    docs = 0
    for path in NEM_FILES:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        eager = _outcome(text, str(path), lazy=False)
        assert _outcome(text, str(path), lazy=True) == eager, path
        docs += eager != "error"
    assert docs >= 5  # the shipped devices at least


@pytest.mark.parametrize(
    "tail",
    [
        "\n$\n",  # a bad character after the config part
        "\n99999999999999999999999\n",  # an integer out of range
        "\nbuffer b : L2 size=64\n",  # a program statement
    ],
)
def test_lazy_config_parse_errs_where_the_eager_one_errs(tail):
    head = (ROOT / "devices" / "nem" / "devices" / "npm_lite.nem").read_text()
    assert _outcome(head, "h.nem", lazy=True) == _outcome(head, "h.nem", lazy=False) != "error"
    assert _outcome(head + tail, "t.nem", lazy=False) == "error"
    assert _outcome(head + tail, "t.nem", lazy=True) == "error"


def test_find_device_in_the_input_file(tmp_path):
    """An input config document's own device is still found first
    (D-DEV-LOOKUP); an input program (not a config document, whatever it
    declares) falls through to the shipped device, as before."""
    own = tmp_path / "own.nem"
    lite = (ROOT / "devices" / "nem" / "devices" / "npm_lite.nem").read_text()
    own.write_text(
        lite.replace("device npm_lite", "device mine").replace(
            "l2_size_bytes = 1048576", "l2_size_bytes = 4096"
        )
    )
    assert find_device("mine", (), str(own)).topology.l2_size_bytes == 4096
    prog = tmp_path / "prog.nem"
    prog.write_text(own.read_text() + "device mine\nbuffer b : L2 size=64\n")
    with pytest.raises(NemDiagnosticError, match="device 'mine' not found"):
        find_device("mine", (), str(prog))
    assert find_device("npm_lite", (), str(prog)) == find_device("npm_lite", (), None)


def _slow_buffers(block) -> list[BufferOp]:
    out: list[BufferOp] = []
    for op in block.ops:
        if isinstance(op, BufferOp):
            out.append(op)
        elif isinstance(op, LoopOp):
            out += _slow_buffers(op.block)
    return out


def _slow_maps(prog: ProgramOp) -> dict[str, list[tuple[str, int, int, int, int, int]]]:
    """`memory_maps` as it was: every buffer's instances asked one by one."""
    ev = Evaluator()
    items: dict[str, list] = {}
    for op in _slow_buffers(prog.block):
        placed = size_and_align(op, ev)
        if placed is None:
            continue
        copies = buffer_instances(op, ev)
        for c in range(copies):
            items.setdefault(level_key(op.result.type.level), []).append(
                ((op.buffer_name.data, c, copies), *placed)
            )
    return {
        key: sorted(
            ((s.key[0], s.offset, s.size, s.align, s.key[1], s.key[2]) for s in layout(lst)),
            key=lambda t: t[1],
        )
        for key, lst in items.items()
    }


PIPELINED = """\
buffer top : L2 (size=256)
loop i in [0..3] @max_in_flight(2):
  buffer a : L1 (size=64)
  loop j in [0..1] @max_in_flight(2):
    buffer b : L1 (size=32)
    buffer c : L1 (size=16)
  endloop
  buffer d : L1 (size=8)
endloop
loop k in [0..1]:
  buffer e : L1 (size=128)
endloop
"""


def test_memory_maps_match_the_per_buffer_walk():
    progs = [parse_nem(PIPELINED, "p.nem").ops.first]
    for path in NEM_FILES:
        try:
            progs.append(parse_nem(path.read_text(), str(path)).ops.first)
        except (NemDiagnosticError, UnicodeDecodeError):
            continue
    assert len(progs) > 50
    for prog in progs:
        assert isinstance(prog, ProgramOp)
        assert list(capacity.all_buffers(prog.block)) == _slow_buffers(prog.block)
        fast = {
            key: [(p.name, p.offset, p.size, p.align, p.copy, p.copies) for p in placed]
            for key, placed in memory_maps(prog).items()
        }
        assert fast == _slow_maps(prog)
        slow = [
            op
            for op in prog.walk()
            if _STATEMENT_KINDS[type(op)] not in ("value", "unknown")
            and not isinstance(op, ProgramOp)
            and not (isinstance(op, RegionOp) and op.binding.data == "inline")
        ]
        assert list(printed_statements(prog)) == slow
        v = ProgramVerifier(prog)
        regions = [op.result for op in ops_of(prog, RegionOp)]
        for r in regions + regions[::-1]:  # asked again: from the memo
            assert v._elements_of(r) == _elements(r)
        for base in (TaskOp, ComputeOp, BufferOp, RegionOp, ProgramOp):
            assert ops_of(prog, base) == [op for op in prog.walk() if isinstance(op, base)]
    # the pipelined nest: instance counts differ by parent (2, 2*2, 2, 1)
    maps = memory_maps(progs[0])
    copies = {p.name: p.copies for p in maps["L1[0]"]}
    assert copies == {"a": 2, "b": 4, "c": 4, "d": 2, "e": 1}


def test_parser_facts_are_the_verifiers_measures():
    checked = 0
    for path in NEM_FILES:
        try:
            module, facts = parse_nem_facts(path.read_text(), str(path))
        except (NemDiagnosticError, UnicodeDecodeError):
            continue
        prog = module.ops.first
        assert isinstance(prog, ProgramOp)
        v = ProgramVerifier(prog)
        depths: dict = {}
        deepest = max(
            (d for op, _ in v.walk() if (d := expression_depth(op, depths)) is not None), default=0
        )
        assert facts.max_expr_depth == deepest, path
        nests = (len(lp) + (type(op) is LoopOp) for op, lp in v.walk())  # loops nested
        assert facts.max_loop_depth == max(nests, default=0), path
        assert facts.operands_in_scope
        render = [d.render() for d in verify_program(prog)]
        assert [d.render() for d in verify_program(prog, facts=facts)] == render, path
        checked += 1
    assert checked > 50


def test_built_facts_are_taken_once_by_the_static_pass():
    """`verify_nem`'s channel: the pass takes the facts of that very program,
    once (a later run verifies without them), with the same diagnostics."""
    from nem.compile.lower import xdsl_context
    from nem.passes.pass_context import BUILT_FACTS, pass_context, take_built_facts
    from nem.passes.verify import VerifyStaticPass

    path = next(p for p in NEM_FILES if p.name == "conv2d_relu.nem")
    module, facts = parse_nem_facts(path.read_text(), str(path))
    prog = module.ops.first
    ctx = pass_context(xdsl_context(), str(path))
    ctx.cache[BUILT_FACTS] = (object(), facts)
    assert take_built_facts(ctx, prog) is None  # another program's
    ctx.cache[BUILT_FACTS] = (prog, facts)
    VerifyStaticPass().apply(ctx, module)
    assert BUILT_FACTS not in ctx.cache
    assert take_built_facts(ctx, prog) is None


def _verify_all(monkeypatch, share: bool) -> tuple[list[str], int, int]:
    """nem-verify (npm_pro_x1) on every repository program that parses: the
    diagnostics, the Structures built, and the programs the hazard stage saw."""
    from nem.analysis import happens_before
    from nem.compile.lower import xdsl_context
    from nem.passes import PASSES, hazards
    from nem.passes.pass_context import pass_context
    from nem.passes.tokens import STRUCTURES

    built = [0]
    init = happens_before.Structure.__init__

    def counting(self, *args, **kwargs):
        built[0] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(happens_before.Structure, "__init__", counting)
    if not share:
        monkeypatch.setattr(hazards, "shared_structures", lambda ctx: None)
    seen = [0]
    find = hazards.find_hazards

    def counted(*args, **kwargs):
        seen[0] += 1
        return find(*args, **kwargs)

    monkeypatch.setattr(hazards, "find_hazards", counted)
    out = []
    for path in NEM_FILES:
        try:
            module = parse_nem(path.read_text(), str(path))
        except (NemDiagnosticError, UnicodeDecodeError):
            continue
        ctx = pass_context(xdsl_context(), str(path), (), "npm_pro_x1")
        try:
            PASSES["nem-verify"]().apply(ctx, module)
            diags = ctx.diagnostics
        except NemDiagnosticError as e:
            diags = e.diagnostics
        assert STRUCTURES not in ctx.cache, path  # only while the pipeline runs
        out += [f"{path}: {d.render()}" for d in diags]
    monkeypatch.undo()
    return out, built[0], seen[0]


def test_the_hazard_stage_takes_the_token_stages_structure(monkeypatch):
    """nem-verify builds the happens-before `Structure` of a program once for
    its token and hazard stages (the program is unchanged between them),
    with the diagnostics of one build per stage."""
    shared, built_shared, hazard_runs = _verify_all(monkeypatch, share=True)
    alone, built_alone, hazard_runs_alone = _verify_all(monkeypatch, share=False)
    assert shared == alone
    assert hazard_runs == hazard_runs_alone > 50
    assert built_alone - built_shared == hazard_runs  # one build saved per program


def test_separate_passes_build_their_own_structure():
    """Outside nem-verify (a `-p` list may change the program between the
    two), the token stage keeps nothing for the hazard stage."""
    from nem.compile.lower import xdsl_context
    from nem.passes.pass_context import pass_context
    from nem.passes.tokens import STRUCTURES, CheckTokensPass, shared_structures

    path = next(p for p in NEM_FILES if p.name == "conv2d_relu.nem")
    module = parse_nem(path.read_text(), str(path))
    ctx = pass_context(xdsl_context(), str(path))
    CheckTokensPass().apply(ctx, module)
    assert shared_structures(ctx) is None and STRUCTURES not in ctx.cache
