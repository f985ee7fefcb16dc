"""The `.nem` parser's fast paths against the slow paths they replace, on
every repository program (session 14, issue 34 item 6):

- `statement_ops`: a region, transfer/store and compute task built flat
  are the op their constructor builds (properties in the same order,
  operands, result types, result name, location);
- `ProgramParser.facts()`: every integer value's static value and key are
  what a fresh `Evaluator` computes (keys equal up to renaming of the
  interned objects), and the deepest expression and loop nest are the
  verifier's own measures.
"""

from __future__ import annotations

import gc
import re
import weakref
from pathlib import Path

from source_files import sources
from xdsl.ir import SSAValue

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import ComputeOp, MoveOp, ProgramOp, RegionOp
from nem.frontends.nem_text.parser import ProgramParser, parse_nem_facts

ROOT = Path(__file__).resolve().parents[2]
NEM_FILES = sources("*.nem", "examples", "test/lit", "test/fuzz/corpus")


def _programs():
    for path in NEM_FILES:
        try:
            module, facts = parse_nem_facts(path.read_text(), str(path))
        except (NemDiagnosticError, UnicodeDecodeError):
            continue
        prog = module.ops.first
        assert isinstance(prog, ProgramOp)
        yield path, prog, facts


def _rebuilt(op):
    """`op` built again by its class's constructor from its parts."""
    p = op.properties
    name = p.get("name") or p.get("token")
    decos = list(op.decorator_list())
    od = p.get("operand_decorators")
    role = [list(d.data) for d in od.data] if od is not None else None
    if type(op) is RegionOp:
        return RegionOp(
            op.result.type,
            op.buffer,
            op.offset,
            op.extent,
            list(op.shape),
            list(op.strides),
            name.data if name else None,
            op.binding.data,
            decos,
        )
    sync = "sync" in p
    if isinstance(op, MoveOp):
        return type(op)(op.dst, op.src, list(op.deps), sync, name and name.data, decos, role)
    assert isinstance(op, ComputeOp)
    n = len(op.ins) + len(op.outs)
    return type(op)(
        list(op.ins),
        list(op.outs),
        list(op.deps),
        list(op.args),
        dict(op.attrs.data),
        sync,
        name and name.data,
        decos,
        role or [[] for _ in range(n)],
    )


def test_flat_statement_ops_are_the_constructors():
    seen = {RegionOp: 0, MoveOp: 0, ComputeOp: 0}
    for path, prog, _ in _programs():
        for op in prog.walk():
            if not isinstance(op, (RegionOp, MoveOp, ComputeOp)):
                continue
            ref = _rebuilt(op)
            assert list(op.properties.items()) == list(ref.properties.items()), (path, op)
            assert tuple(op.operands) == tuple(ref.operands), path
            assert op.result_types == ref.result_types, path
            assert op.results[0].name_hint == ref.results[0].name_hint, path
            assert op.attributes == ref.attributes, path
            assert op.location.line.data > 0, path  # located where it was written
            seen[next(c for c in seen if isinstance(op, c))] += 1
            ref.drop_all_references()  # (its uses of the program's values)
    assert all(n > 50 for n in seen.values()), seen


def _same_keys(a: object, b: object, fwd: dict[int, object], back: dict[int, object]) -> bool:
    if type(a) is int or type(b) is int:
        return type(a) is type(b) and a == b
    return fwd.setdefault(id(a), b) is b and back.setdefault(id(b), a) is a


def test_parser_facts_are_the_evaluators():
    values = 0
    for path, _, facts in _programs():
        ev = Evaluator()
        fwd: dict[int, object] = {}
        back: dict[int, object] = {}
        for v, s, k in zip(facts.values, facts.statics, facts.keys, strict=True):
            assert isinstance(v, SSAValue)
            assert ev.static(v) == s, (path, v)
            assert _same_keys(k, ev.key(v), fwd, back), (path, v)
            values += 1
    assert values > 1000


def test_the_parser_reports_its_depths():
    """The public `facts()` (what `parse_nem_facts` returns) counts a loop
    nest and an expression chain as the verifier's stage 0 does."""
    text = "const a = 1\nconst b = (a + 1) * 2 - a\nloop i in [0..1]:\n  loop j in [0..1]:\n"
    text += "    let x = i + j\n  endloop\nendloop\n"
    parser = ProgramParser(text, "t.nem")
    parser.parse_program()
    facts = parser.facts()
    assert (facts.max_expr_depth, facts.max_loop_depth) == (3, 2)
    assert facts.operands_in_scope


def test_shared_attrs_share_equal_entries_without_floats():
    from xdsl.dialects.builtin import ArrayAttr, FloatAttr, StringAttr, f32

    from nem.frontends.nem_text.statement_ops import SharedAttrs

    shared = SharedAttrs()
    a = shared.get({"accum_type": f32, "mode": StringAttr("x")})
    assert shared.get({"accum_type": f32, "mode": StringAttr("x")}) is a
    assert shared.get({"mode": StringAttr("x"), "accum_type": f32}) is not a  # order kept
    assert shared.get({}) is shared.get({})
    # entries with a FLOAT are never shared (float equality is not printed identity)
    z = shared.get({"alpha": FloatAttr(0.0, 64)})
    assert shared.get({"alpha": FloatAttr(-0.0, 64)}) is not z
    n = shared.get({"v": ArrayAttr((FloatAttr(0.0, 64),))})
    assert shared.get({"v": ArrayAttr((FloatAttr(0.0, 64),))}) is not n


def test_the_parser_is_freed_without_a_cyclic_collection():
    """The parser is in no reference cycle: once parsed, dropping it frees
    it (and every token of the text) at once, though `parse_nem` pauses
    the cyclic collector and `nem-compile` keeps it paused.  Two nested
    functions calling each other in `_float_expr` were such a cycle, holding
    the parser: DenseNet-121's 1.6 M tokens stayed allocated until a
    collection after nem-verify, which cost 1.7 s (session 51).  Checked on
    every repository program, float attributes among them."""
    floats = 0
    gc.disable()
    try:
        for path in NEM_FILES:
            try:
                text = path.read_text()
                parser = ProgramParser(text, str(path))
                parser.parse_program()
            except (NemDiagnosticError, UnicodeDecodeError):
                continue  # the traceback holds the parser
            alive = weakref.ref(parser)
            del parser
            floats += bool(re.search(r"=\s*-?\d+\.\d", text))
            assert alive() is None, f"{path}: the parser outlived its last reference"
    finally:
        gc.enable()
    assert floats >= 5  # the programs with a float attribute (min=0.5, scale=...)
