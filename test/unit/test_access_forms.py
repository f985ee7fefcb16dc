"""The hazard analysis's cheap views of a static access, each checked
against the isl objects it stands for, on every static access of every
repository program and of generated programs whose loop bounds and offsets
are random expressions (products of loop variables, divisions by them, by
zero, ...):

- `presburger.check_quasi_affine` (whether isl can take an access, asked
  without building isl objects, D-HAZ-QA-CHECK) raises exactly what
  building the task's `Nest` and its `expr` of the offset and extent
  raises (`HazardFinder._quasi_affine` reads only which exception);
- `access_forms.shape_key` (D-HAZ-FORM-SHAPE): accesses of equal keys have
  equal printed isl forms (domain, offset, extent), what `_form` memoizes
  by the key."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st
from source_files import sources

from nem.analysis.access_forms import shape_key
from nem.analysis.hazard_finder import HazardFinder
from nem.analysis.presburger import Nest, NotQuasiAffine, check_quasi_affine, instance_space
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.expressions import ExprError, NotAnExpression
from nem.dialect.ops import ProgramOp
from nem.frontends.nem_text.parser import parse_nem

ROOT = Path(__file__).resolve().parents[2]
NEM_FILES = sources("*.nem", "examples", "test/lit", "test/fuzz/corpus")


def _raised(f) -> type | None:
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)
    return None


def _accesses(program: ProgramOp):
    """(analysis, access, its loops, its task's `Nest` or what building it
    raised), each task's `Nest` built once, none of the analysis's memos."""
    finder = HazardFinder(program)
    nests: dict = {}
    for accs in finder._collect().values():  # noqa: SLF001
        for acc in accs:
            loops = finder.s.tasks[acc.op].loops
            if acc.op not in nests:
                try:
                    nests[acc.op] = Nest(
                        finder.ev, finder.boxes, loops, instance_space((len(loops),)), 0
                    )
                except Exception as e:  # noqa: BLE001 - compared by class
                    nests[acc.op] = e
            yield finder, acc, loops, nests[acc.op]


def _agree(program: ProgramOp) -> int:
    """Compare both on each access of `program`; the number compared."""
    n = 0
    for finder, acc, loops, nest in _accesses(program):
        values = (acc.offset, acc.extent)
        if isinstance(nest, Exception):
            old = type(nest)
        else:
            old = _raised(lambda: [nest.expr(v) for v in values])  # noqa: B023
        new = _raised(lambda: check_quasi_affine(finder.ev, loops, values))  # noqa: B023
        assert new == old, (acc.op, new, old)
        n += 1
    return n


def _printed_by_key(program: ProgramOp, seen: dict[tuple, set]) -> None:
    """Add each access's printed form (on its task's own `Nest`) to the set
    of its shape key."""
    for finder, acc, loops, nest in _accesses(program):
        if isinstance(nest, Exception):
            continue
        try:
            key = shape_key(finder.ev, loops, (acc.offset, acc.extent))
            printed = (str(nest.domain), str(nest.expr(acc.offset)), str(nest.expr(acc.extent)))
        except (NotQuasiAffine, NotAnExpression, ExprError):
            continue
        if key is not None:  # None: built without the memo
            seen[key].add(printed)


def _one_form_per_key(seen: dict[tuple, set]) -> int:
    """Assert it; the number of keys."""
    assert all(len(forms) == 1 for forms in seen.values()), [
        (k, f) for k, f in seen.items() if len(f) > 1
    ][:3]
    return len(seen)


def _program(path: Path) -> ProgramOp | None:
    try:
        m = parse_nem(path.read_text(encoding="utf-8"), str(path))
    except (NemDiagnosticError, UnicodeDecodeError):
        return None
    op = m.ops.first
    return op if isinstance(op, ProgramOp) else None


def test_repository_programs():
    compared = 0
    seen: dict[tuple, set] = defaultdict(set)
    for path in NEM_FILES:
        program = _program(path)
        if program is not None:
            compared += _agree(program)
            _printed_by_key(program, seen)
    assert compared > 100
    assert _one_form_per_key(seen) > 50


@st.composite
def _expr(draw, vars_: list[str], depth: int = 0) -> str:
    if depth >= 2 or draw(st.integers(0, 2)) == 0:
        leaves = [str(draw(st.integers(0, 3)))] + vars_
        return draw(st.sampled_from(leaves))
    op = draw(st.sampled_from(["+", "-", "*", "/", "mod"]))
    return f"({draw(_expr(vars_, depth + 1))} {op} {draw(_expr(vars_, depth + 1))})"


@st.composite
def _programs(draw) -> str:
    lines = ['device "npm_pro.nem"', "program p:", "buffer D : DDR (size=1048576)"]
    vars_: list[str] = []
    for k in range(draw(st.integers(1, 3))):
        upper = draw(_expr(vars_))
        lines.append("  " * k + f"loop {'ijk'[k]} in [0..{upper}]:")
        vars_.append("ijk"[k])
    ind = "  " * len(vars_)
    for _ in range(draw(st.integers(1, 2))):
        dst, src = draw(_expr(vars_)), draw(_expr(vars_))
        lines.append(
            ind + f"transfer.sync(dst=region(D, 4096 + {dst}, 64), src=region(D, {src}, 64))"
        )
    lines += ["  " * k + "endloop" for k in reversed(range(len(vars_)))]
    return "\n".join(lines) + "\n"


BOUNDS = ["1", "3", "{o}", "{o} + 1", "5 - {o}"]
OFFSETS = ["{v} * 64", "({v} mod 2) * 64 + 128", "({v} - 1) / 2", "{o} * 4 + {v}", "{v} * {v}", "7"]


@st.composite
def _repeated_nests(draw) -> str:
    """Ten nests of one or two loops, bounds and offsets from small pools
    (the variables differ per nest, as in lowered programs)."""
    lines = ['device "npm_pro.nem"', "program p:", "buffer D : DDR (size=1048576)"]
    for n in range(10):
        o, v = f"i{n}", f"j{n}"
        two = draw(st.booleans())
        if two:
            lines.append(f"loop {o} in [0..{draw(st.sampled_from(BOUNDS[:2]))}]:")
        outer = o if two else "0"
        upper = draw(st.sampled_from(BOUNDS)).format(o=outer)
        lines.append(f"  loop {v} in [0..{upper}]:")
        dst, src = (draw(st.sampled_from(OFFSETS)).format(o=outer, v=v) for _ in range(2))
        lines.append(
            f"    transfer.sync(dst=region(D, 4096 + {dst}, 64), src=region(D, {src}, 64))"
        )
        lines.append("  endloop")
        if two:
            lines.append("endloop")
    return "\n".join(lines) + "\n"


@seed(20261130)
@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(_programs())
def test_generated_programs(src):
    try:
        m = parse_nem(src, "gen.nem")
    except NemDiagnosticError:
        assume(False)
        return
    _agree(m.ops.first)


@seed(20261130)
@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(_repeated_nests())
def test_generated_forms(src):
    """Many keys are shared, each by accesses of one printed form."""
    try:
        m = parse_nem(src, "gen.nem")
    except NemDiagnosticError:
        assume(False)
        return
    seen: dict[tuple, set] = defaultdict(set)
    _printed_by_key(m.ops.first, seen)
    _one_form_per_key(seen)


@pytest.mark.parametrize(
    "offset, raised",
    [
        ("i * j", NotQuasiAffine),
        ("i / (j - j)", NotQuasiAffine),
        ("i mod (2 - 2)", ExprError),
        ("(i * 3 + j) mod 4", None),
    ],
)
def test_verdicts(offset, raised):
    """A product of loop variables and a division by a loop-dependent value
    are refused, a constant zero divisor is an error, the rest is taken."""
    src = (
        'device "npm_pro.nem"\nprogram p:\nbuffer D : DDR (size=65536)\n'
        "loop i in [0..3]:\n  loop j in [0..3]:\n"
        f"    transfer.sync(dst=region(D, 4096, 64), src=region(D, {offset}, 64))\n"
        "  endloop\nendloop\n"
    )
    finder = HazardFinder(parse_nem(src, "t.nem").ops.first)
    (src_acc,) = (a for accs in finder._collect().values() for a in accs if not a.write)  # noqa: SLF001
    loops = finder.s.tasks[src_acc.op].loops
    assert _raised(lambda: check_quasi_affine(finder.ev, loops, (src_acc.offset,))) is raised
    assert _agree(finder.program) == 2


def test_a_dag_tape_has_no_key():
    """`let a2 = a1 + a1 - a1` chains (issue 11): the tree of the offset has
    about 3^40 nodes, hashing it would never end; no key, no memo."""
    path = ROOT / "test/fuzz/corpus/nem-verify/let_dag_doubling.nem"
    program = _program(path)
    assert program is not None
    accesses = [(finder, acc, loops) for finder, acc, loops, _ in _accesses(program) if loops]
    assert accesses
    for finder, acc, loops in accesses:
        if finder.ev.static(acc.offset) is None:
            assert shape_key(finder.ev, loops, (acc.offset, acc.extent)) is None
