"""`Structure.dep_reaches` (the happens-before model's "A's token reaches B
through deps") against a plain breadth-first search over the tasks' dep
tokens, on random programs: every ordered pair of tasks, with windows small
enough that most answers come from the backward search beyond the window,
and with the default window (issue 30: the per-task bit set is a window now,
not every earlier task); `Structure.reached_deps` against the same search.
RULE: HAZ-01
"""

from __future__ import annotations

import random
from collections import deque

import pytest

from nem.analysis.happens_before import Structure, task_operands
from nem.dialect.ops import ProgramOp, TaskOp
from nem.frontends.nem_text.parser import parse_nem


def _deps(names: list[str]) -> str:
    return f", deps=[{', '.join(names)}]" if names else ""


def _program(rnd: random.Random, n: int) -> str:
    """`n` transfers with random deps on earlier tokens (some in a loop,
    whose tokens stay inside it), waits between them."""
    lines = ["program p:", "buffer A : L2 (size=64)", "buffer L : L1[0] (size=64)"]
    outer: list[str] = []
    k = 0
    while k < n:
        if rnd.random() < 0.15:
            inner: list[str] = []
            lines.append("loop i in [0..2]:")
            for _ in range(rnd.randint(1, 4)):
                pool = outer + inner
                deps = rnd.sample(pool, min(len(pool), rnd.randint(0, 3)))
                lines.append(
                    f"  t{k} = transfer.async(dst=region(L, 0, 16), "
                    f"src=region(A, 0, 16){_deps(deps)})"
                )
                inner.append(f"t{k}")
                k += 1
            lines.append(f"  wait({', '.join(inner)})")
            lines.append("endloop")
            continue
        deps = rnd.sample(outer, min(len(outer), rnd.choice([0, 1, 1, 1, 2, 3])))
        # mostly recent tokens (chains), sometimes far ones
        if outer and rnd.random() < 0.6:
            deps = [outer[-1]] + [d for d in deps if d != outer[-1]]
        lines.append(
            f"t{k} = transfer.async(dst=region(L, 0, 16), src=region(A, 0, 16){_deps(deps)})"
        )
        outer.append(f"t{k}")
        k += 1
        if rnd.random() < 0.1:
            lines.append(f"wait({outer[-1]})")
    lines.append(f"wait({', '.join(outer)})" if outer else "")
    return "\n".join(lines) + "\n"


def _bfs_reaches(program: ProgramOp) -> set[tuple[TaskOp, TaskOp]]:
    """(a, b): a's token reaches b through deps, by search from each b over
    the dep operands (a dep issued after its task orders nothing)."""
    order = {op: k for k, op in enumerate(program.walk())}
    out = set()
    for b in program.walk():
        if not isinstance(b, TaskOp):
            continue
        todo, seen = deque([b]), {b}
        while todo:
            x = todo.popleft()
            for v in task_operands(x)[2]:
                d = v.owner
                if isinstance(d, TaskOp) and order[d] < order[x] and d not in seen:
                    seen.add(d)
                    out.add((d, b))
                    todo.append(d)
    return out


def _random_structure(seed: int, window: int) -> tuple[str, set[tuple[TaskOp, TaskOp]], Structure]:
    """A random program (`_program`), the plain search's pairs, and its
    `Structure` with `window`."""
    rnd = random.Random(seed)
    src = _program(rnd, rnd.randint(5, 60))
    program = next(o for o in parse_nem(src, "reach.nem").walk() if isinstance(o, ProgramOp))
    s = Structure(program)
    s.reach_window = window
    return src, _bfs_reaches(program), s


@pytest.mark.parametrize("window", [1, 2, 3, 7, Structure.reach_window])
@pytest.mark.parametrize("seed", range(12))
def test_dep_reaches_matches_a_plain_search(seed: int, window: int):
    src, expected, s = _random_structure(seed, window)
    tasks = list(s.tasks.values())
    for a in tasks:
        for b in tasks:
            assert s.dep_reaches(a, b) == ((a.op, b.op) in expected), (
                a.op.token_name(),
                b.op.token_name(),
                window,
                src,
            )


@pytest.mark.parametrize("window", [1, 3, Structure.reach_window])
@pytest.mark.parametrize("seed", range(12))
def test_reached_deps_are_the_deps_another_dep_reaches(seed: int, window: int):
    """`Structure.reached_deps` (D-NEM-SPLIT-TRANSFERS, session 43): a task's
    deps that another of its deps reaches, by the plain search, among those
    within the window of the task (a farther one is never reported)."""
    src, expected, s = _random_structure(seed, window)
    tasks = list(s.tasks.values())
    rank = {t: k for k, t in enumerate(tasks)}
    for t in tasks:
        want = {
            d
            for d in t.deps
            if 0 < rank[t] - rank[d] <= window
            and any((d.op, e.op) in expected for e in t.deps if e is not d)
        }
        assert s.reached_deps(t) == want, (t.op.token_name(), window, src)


def test_a_long_chain_keeps_a_window_per_task():
    """Memory grows with the program: a chain of 3,000 tasks keeps at most
    `reach_window` bits per task (a bit set of every earlier task was 3,000
    * 3,000 / 2 bits), and its ends still reach each other."""
    n = 3000
    lines = ["program p:", "buffer A : L2 (size=64)", "buffer L : L1[0] (size=64)"]
    for k in range(n):
        deps = _deps([f"t{k - 1}"] if k else [])
        lines.append(f"t{k} = transfer.async(dst=region(L, 0, 16), src=region(A, 0, 16){deps})")
    lines.append(f"wait(t{n - 1})")
    program = next(
        o
        for o in parse_nem("\n".join(lines) + "\n", "chain.nem").walk()
        if isinstance(o, ProgramOp)
    )
    s = Structure(program)
    tasks = list(s.tasks.values())
    assert s.dep_reaches(tasks[0], tasks[-1]) and not s.dep_reaches(tasks[-1], tasks[0])
    assert s.dep_reaches(tasks[5], tasks[5 + s.reach_window + 1])
    assert s._reach is not None
    assert max(r.bit_length() for r in s._reach.values()) <= s.reach_window


def _facts(s: Structure) -> tuple:
    """What a `Structure` says of its program, by op identity."""
    return (
        [id(o) for o in s.order],
        {id(o): v for o, v in s.pos.items()},
        {id(o): v for o, v in s.index.items()},
        {
            id(o): (
                t.index,
                t.pos,
                [id(d.op) for d in t.deps],
                {id(b): i for b, i in t.cover.items()},
                sorted(map(id, t.used_in)),
            )
            for o, t in s.tasks.items()
        },
        dict(s.window),
    )


@pytest.mark.parametrize("seed", range(8))
def test_a_structure_replayed_from_its_skeleton_is_a_fresh_one(monkeypatch, seed: int):
    """`nem-synthesize-deps` builds the model again after each change of
    deps and closing waits, replaying the statements of the first build
    (`Skeleton`) instead of listing every op of the program (issue 30): each
    replayed build says what a fresh one does, and lists no block again."""
    from nem.analysis import happens_before, hazard_finder
    from nem.passes import synthesize_deps

    rnd = random.Random(seed)
    program = next(
        o
        for o in parse_nem(_program(rnd, rnd.randint(5, 40)), "rebuild.nem").walk()
        if isinstance(o, ProgramOp)
    )
    listed = [0]
    real_block_ops = happens_before.block_ops

    def counted(block):  # noqa: ANN001, ANN202
        listed[0] += 1
        return real_block_ops(block)

    replayed = [0]

    class Checked(Structure):
        def __init__(self, program, skeleton=None):  # noqa: ANN001
            before = listed[0]
            super().__init__(program, skeleton)
            if skeleton is not None:
                assert listed[0] == before  # replayed: no block listed
                replayed[0] += 1
                assert _facts(self) == _facts(Structure(program))

    monkeypatch.setattr(happens_before, "block_ops", counted)
    monkeypatch.setattr(hazard_finder, "Structure", Checked)
    monkeypatch.setattr(synthesize_deps, "Structure", Checked)
    synthesize_deps.synthesize(program, None)
    assert replayed[0] >= 1
