"""Differential graph fuzzing of nem-compile against onnxruntime (issue 31).

Random valid ONNX models (`graph_gen`, op table `graph_ops`) go through the
documented chain on a sample of the compile matrix (`graph_case`): every
shipped device, both routes, `--engines 1` and the default, pipelining on
and off; each case is compiled, verified, run under 2 random schedules and
compared with onnxruntime at D-COMPILE-TOL, in a forked child with a
per-step CPU-time limit and an address-space limit.  Findings (every outcome
but PASS and REJECTED) are minimized (`graph_minimize`) and written as a
small `.onnx`, its inputs and a one-line reproduction command.

Usage (from the repository root; docs/testing.md "Differential graph fuzzing"):

  python test/fuzz/graph_fuzz.py campaign --seed S --models N -j 2 \\
         [--per-model K | --all-configs] [--devices D,..] [--routes R,..] \\
         [--ops Op,..] [--f16 P] [--tiles auto,1:2:3] [--timeout 120] [--mem-gb 4] [--minimize 10] \\
         [--out DIR]
  python test/fuzz/graph_fuzz.py replay MODEL.onnx [--device D --route R
         --engines 1 --no-pipeline]          # one case, its outcome (exit 1 unless PASS)
  python test/fuzz/graph_fuzz.py minimize MODEL.onnx [config flags] -o DIR
  python test/fuzz/graph_fuzz.py seeds -o DIR    # the known findings (graph_seeds)

A campaign writes DIR/models/ (each generated model with its inputs),
DIR/results.jsonl (one line per case), DIR/report.md (outcome counts,
REJECTED per op type and reason, outcomes per configuration, median
compile/verify/run times) and DIR/findings/ (the minimized findings).  The
matrix is sampled so that a campaign covers it: model i gets the next K
configurations of a seeded sequence of permutations of the matrix.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from graph_case import (  # noqa: E402
    BUGS,
    DEVICES,
    MEM_GB,
    OUTCOMES,
    ROUTES,
    STEP_TIMEOUT,
    CaseResult,
    Child,
    Config,
    fork_case,
    isolated,
    matrix,
    poll,
    run_case,
)
from graph_gen import F16_SHARE, generate, input_arrays, reference  # noqa: E402


def preload() -> None:
    """Import what the cases use before forking them (each child starts warm);
    nothing is run here, so no thread pool exists when the children fork."""
    import onnxruntime  # noqa: F401

    import nem.compile.engines  # noqa: F401
    import nem.compile.lower  # noqa: F401
    import nem.compile.tiling  # noqa: F401
    import nem.compile.transform  # noqa: F401
    import nem.frontends.onnx.converters  # noqa: F401
    import nem.passes.lowering.passes  # noqa: F401
    import nem.runtime.api  # noqa: F401


def config_schedule(seed: int, index: int, k: int, configs: Sequence[Config]) -> list[Config]:
    """The K configurations of model `index`: the next K distinct entries of
    a sequence of seeded permutations of `configs`, so that every
    len(configs)/K models cover the matrix."""
    if k >= len(configs):
        return list(configs)
    out: list[Config] = []
    pos = index * k
    while len(out) < k:
        cycle, at = divmod(pos, len(configs))
        perm = list(configs)
        random.Random(f"{seed}:configs:{cycle}").shuffle(perm)
        if perm[at] not in out:
            out.append(perm[at])
        pos += 1
    return out


# ---------------------------------------------------------------------------
# a case from files


def load_case(path: Path) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model and its inputs: `STEM.inputs.npz` beside it, else drawn from
    the model (`graph_gen.input_arrays`)."""
    model = onnx.load(str(path))
    npz = path.with_name(path.name.removesuffix(".onnx") + ".inputs.npz")
    if npz.exists():
        with np.load(npz) as f:
            return model, {k: f[k] for k in f.files}
    return model, input_arrays(model)


def case_fn(model: onnx.ModelProto, inputs: dict[str, np.ndarray], config: Config, timeout: float):
    """The child's work: onnxruntime's outputs, then the chain."""

    def fn() -> CaseResult:
        return run_case(model, config, inputs, reference(model, inputs), timeout)

    return fn


def wall_limit(timeout: float) -> float:
    """A case's wall-clock limit: its four steps' CPU limits, with room for a
    loaded machine."""
    return 4 * timeout * 2 + 60


# ---------------------------------------------------------------------------
# the campaign


def prepare_models(
    seed: int,
    count: int,
    out: Path,
    ops: Sequence[str] | None,
    start: int = 0,
    f16: float = F16_SHARE,
) -> dict[int, list[str]]:
    """Generate models start..start+count-1 into `out`/models (in a child:
    onnxruntime's threads stay out of the parent that forks the cases)."""
    models = out / "models"
    models.mkdir(parents=True, exist_ok=True)
    manifest = out / "models.json"

    def work() -> CaseResult:
        table = {}
        for i in range(start, start + count):
            g = generate(seed, i, ops, f16=f16)
            onnx.save(g.model, str(models / f"m{i}.onnx"))
            np.savez(models / f"m{i}.inputs.npz", **input_arrays(g.model))
            table[i] = g.ops
        manifest.write_text(json.dumps(table))
        return CaseResult("PASS")

    r = isolated(work, out, wall=600)
    if r.outcome != "PASS":
        raise SystemExit(f"graph_fuzz: generating the models failed: {r.detail}")
    return {int(k): v for k, v in json.loads(manifest.read_text()).items()}


def run_cases(
    cases: list[tuple[int, Config]], out: Path, jobs: int, timeout: float, mem_gb: float, log=print
) -> list[dict]:
    """Every (model index, config) case, `jobs` children at a time; one JSON
    line per case in out/results.jsonl."""
    preload()
    pending = list(cases)
    running: list[Child] = []
    rows: list[dict] = []
    scratch = out / "tmp"
    scratch.mkdir(exist_ok=True)
    with open(out / "results.jsonl", "a") as results:
        while pending or running:
            while pending and len(running) < jobs:
                i, cfg = pending.pop(0)
                model, inputs = load_case(out / "models" / f"m{i}.onnx")
                running.append(
                    fork_case(
                        case_fn(model, inputs, cfg, timeout),
                        scratch / f"case-{i}-{len(rows) + len(running)}.json",
                        wall_limit(timeout),
                        mem_gb,
                        tag=(i, cfg),
                    )
                )
            time.sleep(0.05)
            for child in list(running):
                r = poll(child)
                if r is None:
                    continue
                running.remove(child)
                child.out.unlink(missing_ok=True)
                i, cfg = child.tag
                row = {"model": i, "config": asdict(cfg), **asdict(r)}
                rows.append(row)
                results.write(json.dumps(row) + "\n")
                results.flush()
                log(
                    f"[{len(rows)}/{len(cases)}] m{i} {cfg.label}: {r.outcome}"
                    + (f" ({r.detail[:100]})" if r.outcome != "PASS" else "")
                )
    return rows


def campaign(args: argparse.Namespace) -> int:
    out = Path(args.out or f"graph_fuzz_{args.seed}")
    out.mkdir(parents=True, exist_ok=True)
    tiles = [
        None if t == "auto" else tuple(int(x) for x in t.split(":")) for t in args.tiles.split(",")
    ]
    configs = matrix(args.devices.split(","), args.routes.split(","), tiles=tiles)
    ops = args.ops.split(",") if args.ops else None
    t0 = time.monotonic()
    table = prepare_models(args.seed, args.models, out, ops, args.start, args.f16)
    k = len(configs) if args.all_configs else args.per_model
    cases = [(i, c) for i in sorted(table) for c in config_schedule(args.seed, i, k, configs)]
    print(
        f"graph_fuzz: {len(table)} models x {k} of {len(configs)} configurations = "
        f"{len(cases)} cases, -j {args.jobs} (out: {out})"
    )
    rows = run_cases(cases, out, args.jobs, args.timeout, args.mem_gb)
    findings = []
    if args.minimize:
        from graph_minimize import minimize_findings

        findings = minimize_findings(rows, out, args.minimize, args.jobs, args.timeout, args.mem_gb)
    text = report(rows, table, configs, time.monotonic() - t0, findings, args)
    (out / "report.md").write_text(text)
    print(text)
    return 1 if any(r["outcome"] in BUGS for r in rows) else 0


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s" if xs else "-"


def report(
    rows: list[dict],
    table: dict[int, list[str]],
    configs: Sequence[Config],
    seconds: float,
    findings: list[dict],
    args: argparse.Namespace,
) -> str:
    """The campaign's report (markdown): counts, REJECTED per op type and
    reason, outcomes per configuration, times, findings."""
    counts = Counter(r["outcome"] for r in rows)
    lines = [
        f"# Graph fuzz campaign: seed {args.seed}, {len(table)} models, {len(rows)} cases",
        "",
        f"{len(configs)} configurations in the matrix, {args.jobs} jobs, "
        f"{seconds / 60:.1f} min; step limit {args.timeout:g} CPU s.",
        "",
        "| outcome | cases |",
        "|---|---|",
    ]
    lines += [f"| {o} | {counts.get(o, 0)} |" for o in OUTCOMES]
    generated = Counter(op for ops in table.values() for op in ops)
    by_op: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        ops = set(table[r["model"]])
        for o in ops:
            by_op[o][r["outcome"]] += 1
    rejected = Counter(r["op"] for r in rows if r["outcome"] == "REJECTED")
    lines += [
        "",
        "## Per op type",
        "",
        "Nodes generated; cases of models holding the op, their outcomes, and how "
        "many were REJECTED with a diagnostic naming this op (the share is of the "
        "op's cases).",
        "",
        "| op | nodes | cases | " + " | ".join(OUTCOMES) + " | rejected naming it | share |",
        "|---" * (len(OUTCOMES) + 5) + "|",
    ]
    for o in sorted(generated):
        n = sum(by_op[o].values())
        lines.append(
            f"| {o} | {generated[o]} | {n} | "
            + " | ".join(str(by_op[o].get(k, 0)) for k in OUTCOMES)
            + f" | {rejected.get(o, 0)} | {100 * rejected.get(o, 0) / max(n, 1):.0f}% |"
        )
    for o in sorted(set(rejected) - set(generated)):
        lines.append(
            f"| {o} | - | - | " + " | ".join("-" for _ in OUTCOMES) + f" | {rejected[o]} | - |"
        )
    reasons = Counter(
        CaseResult.parse(_fields(r)).signature() for r in rows if r["outcome"] == "REJECTED"
    )
    lines += ["", "## REJECTED by reason", "", "| cases | reason |", "|---|---|"]
    lines += [f"| {n} | `{s}` |" for s, n in reasons.most_common()]
    lines += [
        "",
        "## Per configuration",
        "",
        "| configuration | " + " | ".join(OUTCOMES) + " |",
        "|---" * (len(OUTCOMES) + 1) + "|",
    ]
    per_cfg: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        per_cfg[Config.parse(r["config"]).label][r["outcome"]] += 1
    for label in sorted(per_cfg):
        lines.append(
            f"| `{label}` | " + " | ".join(str(per_cfg[label].get(o, 0)) for o in OUTCOMES) + " |"
        )
    lines += ["", "## Times per case (median)", ""]
    for step in ("compile", "verify", "run"):
        xs = [r["times"][step] for r in rows if step in r.get("times", {})]
        lines.append(f"- {step}: {_median(xs)} over {len(xs)} cases")
    bugs = [r for r in rows if r["outcome"] in BUGS]
    lines += ["", "## Bugs", ""]
    sigs: dict[str, list[dict]] = defaultdict(list)
    for r in bugs:
        sigs[CaseResult.parse(_fields(r)).signature()].append(r)
    for sig, rs in sorted(sigs.items(), key=lambda kv: -len(kv[1])):
        first = rs[0]
        lines.append(
            f"- {len(rs)} x {first['outcome']} ({first['step']}): {first['detail']}"
            f" -- e.g. m{first['model']} `{Config.parse(first['config']).label}`"
        )
    inexact = [r for r in rows if r["outcome"] == "REFERENCE-INEXACT"]
    if inexact:
        lines += [
            "",
            "## REFERENCE-INEXACT (onnxruntime less exact than the program; not bugs)",
            "",
        ]
        lines += [
            f"- m{r['model']} `{Config.parse(r['config']).label}`: {r['detail']}" for r in inexact
        ]
    if findings:
        lines += ["", "## Minimized findings", ""]
        for f in findings:
            lines.append(
                f"- {f['outcome']}: `{f['path']}` ({f['nodes']} nodes: "
                f"{', '.join(f['ops'])}): `{f['command']}`"
            )
    return "\n".join(lines) + "\n"


def _fields(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("model", "config")}


# ---------------------------------------------------------------------------
# command line


def config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="npm_pro_x1", choices=DEVICES)
    p.add_argument("--route", default="affine", choices=ROUTES)
    p.add_argument("--engines", type=int, default=None)
    p.add_argument("--no-pipeline", action="store_true")
    p.add_argument("--tile-sizes", help="A,B,...: nem-compile's --tile-sizes")
    p.add_argument(
        "--timeout",
        type=float,
        default=STEP_TIMEOUT,
        help="CPU seconds per step (compile, verify, run)",
    )
    p.add_argument("--mem-gb", type=float, default=MEM_GB)


def config_of(args: argparse.Namespace) -> Config:
    sizes = tuple(int(x) for x in args.tile_sizes.split(",")) if args.tile_sizes else None
    return Config(args.device, args.route, args.engines, not args.no_pipeline, sizes)


def replay_command(path: Path | str, config: Config) -> str:
    """The one-line reproduction of a finding."""
    return f"python test/fuzz/graph_fuzz.py replay {path} {config.label}"


def replay(args: argparse.Namespace) -> int:
    preload()
    path = Path(args.model)
    model, inputs = load_case(path)
    config = config_of(args)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    r = isolated(
        case_fn(model, inputs, config, args.timeout),
        Path(args.work),
        wall_limit(args.timeout),
        args.mem_gb,
    )
    print(f"{path} {config.label}: {r.outcome}" + (f": {r.detail}" if r.detail else ""))
    if r.times:
        print("times: " + ", ".join(f"{k} {v:.2f} s" for k, v in r.times.items()))
    return 0 if r.outcome == "PASS" else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="graph_fuzz.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("campaign", help="generate models, run the matrix, report")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--models", type=int, default=20)
    c.add_argument("--start", type=int, default=0, help="first model index")
    c.add_argument("-j", "--jobs", type=int, default=2)
    c.add_argument(
        "--per-model", type=int, default=4, metavar="K", help="configurations per model (default 4)"
    )
    c.add_argument("--all-configs", action="store_true", help="every configuration per model")
    c.add_argument("--devices", default=",".join(DEVICES))
    c.add_argument("--routes", default=",".join(ROUTES))
    c.add_argument("--ops", help="draw only these op types (comma-separated)")
    c.add_argument(
        "--f16",
        type=float,
        default=F16_SHARE,
        metavar="P",
        help=f"share of models drawn in f16 (default {F16_SHARE}; 1: f16 only)",
    )
    c.add_argument(
        "--tiles",
        default="auto",
        metavar="T,..",
        help="tile-size settings of the matrix: 'auto' (L1-derived) or sizes "
        "joined by ':' (e.g. auto,1:2,2:3:4); default auto",
    )
    c.add_argument("--timeout", type=float, default=STEP_TIMEOUT)
    c.add_argument("--mem-gb", type=float, default=MEM_GB)
    c.add_argument(
        "--minimize",
        type=int,
        default=10,
        metavar="M",
        help="minimize up to M findings, one per distinct signature (default "
        "10; 0: none), each for at most 400 tests or 10 minutes",
    )
    c.add_argument("--out", help="output directory (default graph_fuzz_SEED)")
    r = sub.add_parser("replay", help="run one model on one configuration")
    r.add_argument("model")
    r.add_argument("--work", default=".", help="scratch directory")
    config_args(r)
    m = sub.add_parser("minimize", help="minimize one model while its outcome persists")
    m.add_argument("model")
    m.add_argument("-o", dest="out", required=True)
    m.add_argument("-j", "--jobs", type=int, default=2)
    config_args(m)
    s = sub.add_parser("seeds", help="write the known findings (graph_seeds.py)")
    s.add_argument("-o", dest="out", required=True)
    args = p.parse_args(argv)
    if args.cmd == "campaign":
        return campaign(args)
    if args.cmd == "replay":
        return replay(args)
    if args.cmd == "minimize":
        from graph_minimize import minimize_file

        return minimize_file(
            Path(args.model), config_of(args), Path(args.out), args.jobs, args.timeout, args.mem_gb
        )
    from graph_seeds import write_seeds

    for path in write_seeds(Path(args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
