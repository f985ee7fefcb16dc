"""Generated NEM programs over the features that interact in the execution
model, and the static and dynamic verdicts compared by the differential test
(`test_differential.py`, docs/design.md "Execution model").

Features: nested and pipelined loops (`@max_in_flight(1..3)`), ping-pong
slots indexed by `mod`, slots indexed by the loop variable, fixed offsets,
dense tiles and strided halves of tiles (spans overlapping, elements
disjoint or not: D-HAZ-ELEMENTS),
deps and waits present or omitted, `.sync` and `.async`, a buffer declared
in a loop body, transfers, stores and compute on several engines (`L1[k]`),
and tokens of tasks before a loop used inside it and waited after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

TILE = 64  # bytes: 32 f16 elements
SLOTS = 16  # tiles per L1 buffer
HEADER = """\
device "npm_pro.nem"
program diff:
buffer D : DDR (size={ddr})
buffer M : L2 (size={l2})
buffer A0 : L1[0] (size={l1})
buffer A1 : L1[1] (size={l1})
""".format(ddr=128 * TILE, l2=32 * TILE, l1=SLOTS * TILE)


def on_generated_programs(
    fixed_seed: int, examples: int
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The test's one argument drawn by `programs()`, as the differential
    tests draw it: `examples` programs from a fixed seed and no example
    database, so that every run (CI's included) checks the same programs;
    no deadline and no health check for slow or large draws (a program's
    draw and runs take as long as its loops make them)."""

    def wrap(test: Callable[..., Any]) -> Callable[..., Any]:
        checked = settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        return seed(fixed_seed)(checked(given(programs())(test)))

    return wrap


def _reg(buf: str, off: str, half: str = "") -> str:
    """A tile at `off`: dense (32 f16), or one of its strided halves (16 f16,
    D-HAZ-ELEMENTS): `a` its elements 0-7 and 16-23, `b` 8-15 and 24-31,
    whose byte spans [off, off + 48) and [off + 16, off + 64) overlap while
    their elements do not (and each meets the dense tile's)."""
    if not half:
        return f"region({buf}, {off}, {TILE}) elem=f16, shape=[32], layout=C"
    start = off if half == "a" else f"{off} + {TILE // 4}"
    return f"region({buf}, {start}, {3 * TILE // 4}) elem=f16, shape=[2, 8], strides=[16, 1]"


@dataclass
class _Block:
    indent: str
    tokens: list[str] = field(default_factory=list)  # tokens visible here, in order
    lines: list[str] = field(default_factory=list)


@st.composite
def programs(draw) -> str:
    """One program: tasks before a loop, a (maybe nested, maybe pipelined)
    loop, tasks after it."""
    counter = [0]
    outer = _Block("")

    def offset(vars_: list[tuple[str, int]]) -> str:
        kinds = ["fixed"] + (["mod", "var"] if vars_ else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "fixed":
            return f"{draw(st.integers(0, 3)) * TILE}"
        if kind == "mod":
            v, _ = draw(st.sampled_from(vars_))
            return f"({v} mod {draw(st.integers(1, 3))}) * {TILE}"
        # linear in every loop variable: distinct slot per iteration point
        expr, stride = "0", 1
        for v, trip in reversed(vars_):
            expr = f"{expr} + {v} * {stride}" if expr != "0" else f"{v} * {stride}"
            stride *= trip
        return f"({expr}) * {TILE}"

    def task(block: _Block, vars_: list[tuple[str, int]], local: str | None) -> None:
        counter[0] += 1
        name = f"t{counter[0]}"
        k = draw(st.integers(0, 1))
        l1 = local if local is not None and draw(st.booleans()) else f"A{k}"
        off = "0" if l1 == local else offset(vars_)
        kind = draw(st.sampled_from(["load", "relu", "store", "move"]))
        # a third of the tasks move strided halves of tiles (equal element counts)
        halves = draw(st.integers(0, 2)) == 0

        def half() -> str:
            return draw(st.sampled_from("ab")) if halves else ""

        mine = half()  # the L1 side's (relu: both, so an in-place relu stays one region)
        if kind == "load":
            body = (
                f"transfer{{s}}(dst={_reg(l1, off, mine)}, "
                f"src={_reg('D', offset(vars_), half())}{{d}})"
            )
        elif kind == "relu":
            out = "0" if l1 == local else offset(vars_)
            body = f"relu{{s}} in {_reg(l1, off, mine)} out {_reg(l1, out, mine)}{{d}}"
        elif kind == "store":
            dst = _reg("D", "4096 + " + offset(vars_), half())
            body = f"store{{s}}(dst={dst}, src={_reg(l1, off, mine)}{{d}})"
        else:
            dst = _reg("M", offset(vars_), half())
            body = f"transfer{{s}}(dst={dst}, src={_reg(l1, off, mine)}{{d}})"
        deps = []
        if block.tokens and draw(st.booleans()):
            deps = [draw(st.sampled_from(block.tokens))]
        sync = draw(st.integers(0, 4)) == 0
        d = ""
        if deps:
            d = f", deps=[{', '.join(deps)}]" if kind != "relu" else f" deps=[{', '.join(deps)}]"
        block.lines.append(
            block.indent + f"{name} = " + body.format(s=".sync" if sync else ".async", d=d)
        )
        if not sync:
            block.tokens.append(name)
            if draw(st.integers(0, 2)) == 0:
                block.lines.append(block.indent + f"wait({name})")

    def loop(parent: _Block, vars_: list[tuple[str, int]], depth: int) -> None:
        var = "ij"[depth]
        trip = draw(st.integers(1, 4 if depth == 0 else 3))
        n = draw(st.integers(1, 3))
        deco = f" @max_in_flight({n})" if n > 1 or draw(st.booleans()) else ""
        parent.lines.append(parent.indent + f"loop {var} in [0..{trip - 1}]{deco}:")
        body = _Block(parent.indent + "  ", list(parent.tokens))
        vs = vars_ + [(var, trip)]
        local = None
        if draw(st.integers(0, 3)) == 0:
            local = f"B{depth}"
            body.lines.append(
                body.indent + f"buffer {local} : L1[{draw(st.integers(0, 1))}] (size={TILE})"
            )
        for _ in range(draw(st.integers(1, 3))):
            if depth == 0 and draw(st.integers(0, 3)) == 0:
                loop(body, vs, depth + 1)
            else:
                task(body, vs, local)
        parent.lines += body.lines
        parent.lines.append(parent.indent + "endloop")

    for _ in range(draw(st.integers(0, 2))):
        task(outer, [], None)
    loop(outer, [], 0)
    for _ in range(draw(st.integers(0, 2))):
        task(outer, [], None)
    return HEADER + "\n".join(outer.lines) + "\n"


def nested_loops(n: int) -> str:
    """`n` nested 2-iteration loops around one transfer (issue 11: the checker's
    cost doubled per level)."""
    lines = ["program p:", "buffer B : L2 (size=64)"]
    lines += ["  " * k + f"loop i{k} in [0..1]:" for k in range(n)]
    lines.append("  " * n + "t = transfer.sync(dst=region(B, 0, 8), src=region(B, 8, 8))")
    lines += ["  " * k + "endloop" for k in reversed(range(n))]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# verdicts
# ---------------------------------------------------------------------------


def static_verdict(src: str) -> list:
    """The errors of the `nem-verify` pipeline (as `nem-opt -p nem-verify`)."""
    from nem.dialect.diagnostics import NemDiagnosticError
    from nem.frontends.nem_text.parser import parse_nem
    from nem.passes.pass_context import pass_context
    from nem.passes.pipeline import VerifyPipelinePass

    module = parse_nem(src, "gen.nem")
    ctx = pass_context(file="gen.nem")
    try:
        VerifyPipelinePass().apply(ctx, module)
    except NemDiagnosticError as e:
        return [d for d in (*ctx.diagnostics, *e.diagnostics) if d.severity == "error"]
    return [d for d in ctx.diagnostics if d.severity == "error"]


@dataclass
class Dynamic:
    races: list
    deadlocks: int
    errors: list
    schedules: int
    complete: bool


def dynamic_verdict(src: str, max_schedules: int = 64, k: int = 10) -> Dynamic:
    """The explorer's verdict; its race set is exact (every unordered conflicting
    pair of the recorded execution), random schedules add the deadlock check
    when the orientation space is larger than `max_schedules`."""
    from nem.runtime import NemInterpreter

    it = NemInterpreter()
    it.load_string(src, "gen.nem", check=False)
    it.randomize_inputs(1)
    ex = it.explore(max_schedules)
    dead, errors, n = len(ex.deadlocks), list(ex.errors), ex.schedules
    if not ex.complete:
        results, _ = it.run_schedules(k, seed=0)
        dead += sum(1 for r in results if r.deadlock)
        errors += [r.error for r in results if r.error is not None]
        n += k
    return Dynamic([w.race for w in ex.races], dead, errors, n, ex.complete)


def static_class(diag) -> str:
    """The kind of a hazard diagnostic (for the static-only classes)."""
    m = diag.message
    if "after loop" in m:
        return "HAZ-01 after endloop"
    if "across iterations" in m:
        return "HAZ-03 across iterations"
    return f"{diag.rule} ordering"
