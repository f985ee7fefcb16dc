"""How far compiled programs are from the device's limit (issue 35, the
baseline of its "Numbers"):

  python bench/bench_roofline.py [--device npm_pro_x1] [--models mlp,cnn,...]
                                 [--dtypes f32,f16] [--cnns squeezenet,resnet50]
                                 [--cnn-dtypes f32,f16]
                                 [--groups 3] [--json FILE] [--tune SECONDS]
                                 [--split-units] [--per-node]

Per model, compiled by `nem-compile`'s defaults for the device (L1-derived
tiles, pipelined, every engine) and run once in timed mode: the cycles, the
bound of the timed cost model (D-RT-COST: the largest over unit kinds of
work / (units x throughput), D-RT-ROOFLINE), their ratio, the unit kind of
the bound and the one that binds the run, and the `--groups` groups of
tasks with the most busy cycles above their own bound (a group's cycles
are its busy cycles, D-RT-ROOFLINE); with `--tune`, the model
compiled again with `nem-compile --tune` (that budget, D-COMPILE-TUNE): its
cycles, ratio, compile CPU time and ops retiled of ops searched (with
`--per-node`, its Conv layers within 2x too; in `--json`, each op's choice); with
`--split-units`, compiled again with `nem-compile --split-units`
(D-COMPILE-SPLIT-OPT): its tasks, cycles, ratio and compile CPU time; with
`--per-node`, compiled with each instruction's ONNX node (D-BC-NODES) so the
groups are ONNX nodes, and each model's Conv layers summed up: how many run
within 2x of their own bound (the issue's goal), their median ratio, the
farthest one, and the same against each node's ideal bound (its tensors
moved once, D-RT-ROOFLINE "Ideal bound"), their busy cycles summed (layers that overlap count each;
before session 18 a group's cycles ran from its first start to its last
end, so these ratios are not comparable with the figures of earlier
sessions).  Models: the project's
samples (`nem.frontends.onnx.samples`) in each `--dtypes`, then the light
CNNs named by `--cnns` (`onnx/backend/test/data/light/light_<name>.onnx`;
none by default: ResNet-50 takes minutes of CPU), as shipped and, with
`--cnn-dtypes f32,f16` (or `f16`), their float16 copies
(`light_cnns.f16_copy`: what issue 35's f16 figures ran).  Cycles depend on the
program only, not on the inputs: the buffers keep their zeros.

Baseline (one run, 2026-11-28, npm_pro_x1; docs/compile.md has the table):
cycles / bound = ratio, the bound made by the DMA work on every model: mlp
723/284 = 2.55x (f16 395/142 = 2.79x), cnn 1467/319 = 4.60x (f16 830/160 =
5.20x), resblock 1105/178 = 6.22x (f16 653/89 = 7.32x), transformer 428/136
= 3.15x (f16 313/68 = 4.63x), SqueezeNet 10,247,749/1,247,819 = 8.21x,
ResNet-50 185,646,389/23,514,562 = 7.89x (its farthest groups: loop nests of
2,088,196 cycles against 266,336).  `binds` is `latency` everywhere but the
f32 transformer block (DMA).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys

from nem.compile import CompileError, compile_onnx
from nem.frontends.onnx import light_cnns, samples
from nem.runtime.api import NemInterpreter
from nem.runtime.roofline import WITHIN, shown, shown_bound


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_run(nem: str | bytes, label: str, device: str, least=None):
    """One timed run of the program (`.nem` text, or `.nemb` bytes whose
    instructions carry their ONNX nodes, D-BC-NODES): (its RunResult, its
    roofline Report, with ideal bounds from `least`, the nodes' least work)."""
    it = NemInterpreter(device=device, trace=False)
    it.set_mode("timed")
    if isinstance(nem, bytes):
        it.load_bytecode(nem, f"{label}.nemb")
    else:
        it.load_string(nem, file=f"{label}.nem")
    s = it.start()
    res = s.run_to_end()
    return res, s.roofline(least)


def conv_layers(rep) -> dict:
    """The issue's per-layer goal: how many Conv nodes run within 2x of their
    own bound (their busy cycles over it), their median ratio and the
    farthest one; of those over, how many are within 2x of all the work
    run in their cycles (`shared_bound`: concurrent layers on their units),
    and the others, over 2x of both (their units idle), by name."""
    convs = sorted(
        (g for g in rep.groups if g.name.endswith("(Conv)") and g.ratio is not None),
        key=lambda g: g.ratio,
    )
    if not convs:
        return {"convs": 0}
    mid = convs[len(convs) // 2]
    ideal = sorted(g.ideal_ratio for g in convs if g.ideal_ratio is not None)
    return {
        "convs": len(convs),
        "within_2x": sum(g.ratio <= WITHIN for g in convs),
        "median_ratio": mid.ratio,
        "within_2x_ideal": sum(r <= WITHIN for r in ideal),
        "median_ideal_ratio": ideal[len(ideal) // 2] if ideal else None,
        "conv_cycles": sum(g.cycles for g in convs),
        "over_2x_critical": sum(g.critical for g in convs if g.ratio > WITHIN),
        "over_2x_shared_within": sum(g.busy_beside() for g in convs),
        "over_2x_idle": [
            {"group": g.name, "ratio": g.ratio, "shared_ratio": g.shared_ratio}
            for g in convs
            if g.ratio > WITHIN and not g.busy_beside()
        ],
        "farthest": {"group": convs[-1].name, "ratio": convs[-1].ratio},
    }


def measure(
    label: str,
    model,
    device: str,
    groups: int,
    tune: float | None = None,
    split: bool = False,
    per_node: bool = False,
) -> dict:
    """Compile `model` (an onnx.ModelProto or a path), run it timed, return its
    row; with `tune` (a budget in seconds), compiled again with `--tune` too;
    with `split`, again with `--split-units`; with `per_node`, compiled with
    each instruction's ONNX node and run as the `.nemb` `nem-compile -o`
    writes, so the groups are ONNX nodes and the row has the Conv layers'
    figures (`conv_layers`)."""
    t0 = cpu()
    try:
        result = compile_onnx(model, device=device, origins=per_node)
    except CompileError as e:
        return {
            "model": label,
            "status": f"compile failed in {e.stage}: {str(e).splitlines()[0][:120]}",
        }
    t1 = cpu()
    program: str | bytes = result.nem
    least = None
    if per_node:
        import onnx

        from nem.cli.nem_compile import nemb_bytes
        from nem.frontends.onnx.traffic import NodeTraffic

        program = nemb_bytes(
            result, f"{label}.nemb", str(model) if isinstance(model, str) else label
        )
        least = NodeTraffic(onnx.load(model) if isinstance(model, str) else model).of
    res, rep = timed_run(program, label, device, least)
    worst = sorted(rep.groups, key=lambda g: g.bound - g.cycles)[:groups]
    row = {
        "model": label,
        "status": res.status,
        "compile_s": round(t1 - t0, 1),
        "run_s": round(cpu() - t1, 1),
        "tasks": res.tasks_run,
        "cycles": rep.total.cycles,
        "bound": round(rep.total.bound, 3),
        "ratio": rep.total.ratio,
        "ideal_bound": rep.total.ideal_bound,
        "roof": rep.total.roof,
        "binds": rep.total.binds,
        "groups": len(rep.groups),
        "farthest": [
            {
                "group": g.name,
                "cycles": g.cycles,
                "critical": g.critical,
                "bound": round(g.bound, 3),
                "binds": g.binds,
            }
            for g in worst
        ],
    }
    if per_node:
        row["layers"] = conv_layers(rep)
    if split:
        t2 = cpu()
        units = compile_onnx(model, device=device, split_units=True)
        t3 = cpu()
        sres, srep = timed_run(units.nem, label, device)
        row["split"] = {
            "tasks": sres.tasks_run,
            "cycles": srep.total.cycles,
            "ratio": srep.total.ratio,
            "compile_s": round(t3 - t2, 1),
        }
    if tune is not None:
        from nem.cli.roofline_cli import timed_score
        from nem.compile import CompileOptions
        from nem.compile.tune import compile_tuned

        t2 = cpu()
        tuned, report = compile_tuned(
            model, CompileOptions(device=device, origins=per_node), timed_score, budget=tune
        )
        t3 = cpu()
        tuned_program: str | bytes = tuned.nem
        if per_node:
            tuned_program = nemb_bytes(
                tuned, f"{label}.nemb", str(model) if isinstance(model, str) else label
            )
        _, trep = timed_run(tuned_program, label, device, least)
        row["tune"] = {
            "cycles": trep.total.cycles,
            "bound": round(trep.total.bound, 1),
            "ratio": trep.total.ratio,
            "compile_s": round(t3 - t2, 1),
            "ops_searched": len(report.nests),
            "retiled": sum(n.retiled for n in report.nests),
            "whole": report.whole,  # the whole program untuned, tuned (D-COMPILE-TUNE)
            "dropped": report.fallback,
            "searched": [
                {
                    "op": n.key,
                    "default": n.default,
                    "best": str(n.best),
                    "tried": n.tried,
                    "default_cycles": n.default_cycles,
                    "best_cycles": n.best_cycles,
                }
                for n in report.nests
            ],
        }
        if per_node:
            row["tune"]["layers"] = conv_layers(trep)
    return row


def show(row: dict) -> None:
    if "cycles" not in row:
        print(f"{row['model']:<22}{row['status']}")
        return
    bound, ratio = shown(row["cycles"], row["bound"])
    print(
        f"{row['model']:<22}{row['tasks']:>8}{row['cycles']:>12}{bound:>12}"
        f"{ratio:>8}  {row['roof'] or '-':<6}{row['binds']:<9}{row['compile_s']:>7}"
        f"{row['run_s']:>7}",
        end="",
    )
    if "split" in row:
        s = row["split"]
        print(f"{s['tasks']:>8}{s['cycles']:>12}{s['ratio']:>8.2f}{s['compile_s']:>8}", end="")
    if "tune" in row:
        t = row["tune"]
        print(
            f"{t['cycles']:>12}{t['ratio']:>8.2f}{t['compile_s']:>8}  "
            f"{t['retiled']}/{t['ops_searched']}",
            end="",
        )
        if "layers" in t and t["layers"]["convs"]:
            print(f"  tuned: {t['layers']['within_2x']} Conv layers within 2x", end="")
        if t["dropped"]:
            print(f"  (tuned sizes dropped: {t['dropped']})", end="")
    print()
    layers = row.get("layers")
    if layers and layers["convs"]:
        far = layers["farthest"]
        print(
            f"{'':<4}{layers['convs']} Conv layers: {layers['within_2x']} within 2x of their "
            f"bound, median ratio {layers['median_ratio']:.2f}, {layers['conv_cycles']} cycles; "
            f"farthest {far['group']} at {far['ratio']:.2f}; those over 2x: "
            f"{layers['over_2x_critical']} cycles of the critical path, "
            f"{layers['over_2x_shared_within']} within 2x of all the work run in their cycles"
        )
        if layers["over_2x_idle"]:
            print(
                f"{'':<4}over 2x of both, their units idle: "
                + ", ".join(
                    f"{g['group']} {g['ratio']:.2f} / {g['shared_ratio'] or 0:.2f}"
                    for g in layers["over_2x_idle"]
                )
            )
        if layers["median_ideal_ratio"] is not None:
            print(
                f"{'':<4}against the ideal bound (each node's tensors once): "
                f"{layers['within_2x_ideal']} within 2x, median ratio "
                f"{layers['median_ideal_ratio']:.2f}; program {row['cycles']} cycles / ideal "
                f"{shown_bound(row['ideal_bound'] or 0)}"
            )
    for g in row["farthest"]:
        print(
            f"{'':<4}{g['group']:<40}{g['cycles']:>10} cycles, bound {shown_bound(g['bound'])}, "
            f"binds {g['binds']}, {g['critical']} on the critical path"
        )
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="npm_pro_x1")
    p.add_argument("--models", type=samples.model_names, default="mlp,cnn,resblock,transformer")
    p.add_argument("--dtypes", type=samples.dtype_names, default="f32,f16")
    p.add_argument(
        "--cnns", type=light_cnns.names, default="", help="light CNNs, e.g. squeezenet,resnet50"
    )
    p.add_argument(
        "--cnn-dtypes",
        type=light_cnns.dtypes,
        default="f32",
        help="the light CNNs as shipped (f32) and/or their f16 copies "
        "(light_cnns.f16_copy), e.g. f32,f16",
    )
    p.add_argument(
        "--groups",
        type=int,
        default=3,
        metavar="N",
        help="print the N groups farthest above their bound",
    )
    p.add_argument(
        "--per-node",
        action="store_true",
        help="group by ONNX node (compiled with origins, run as the .nemb nem-compile "
        "writes) and report the Conv layers within 2x of their bound (issue 35)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    p.add_argument(
        "--tune",
        type=float,
        metavar="SECONDS",
        help="also compile with --tune (this budget per model): tuned cycles, "
        "ratio, compile CPU s, ops retiled/searched (D-COMPILE-TUNE)",
    )
    p.add_argument(
        "--split-units",
        action="store_true",
        help="also compile with --split-units: its tasks, cycles, ratio, compile CPU s "
        "(D-COMPILE-SPLIT-OPT)",
    )
    args = p.parse_args()
    print(f"device {args.device}; cycles and bound per D-RT-COST / D-RT-ROOFLINE")
    print(
        f"{'model':<22}{'tasks':>8}{'cycles':>12}{'bound':>12}{'ratio':>8}  "
        f"{'roof':<6}{'binds':<9}{'comp s':>7}{'run s':>7}"
        + (f"{'tasks':>8}{'split':>12}{'ratio':>8}{'comp s':>8}" if args.split_units else "")
        + (f"{'tuned':>12}{'ratio':>8}{'comp s':>8}  retiled" if args.tune else "")
    )
    rows = []
    todo = [
        (f"{name} {dtype}", samples.MODELS[name](dtype))
        for name in args.models
        for dtype in args.dtypes
    ]
    if args.cnns:
        todo += [
            (name, str(light_cnns.path(name)))
            if dtype == "f32"
            else (f"{name} {dtype}", light_cnns.f16_copy(name))
            for name in args.cnns
            for dtype in args.cnn_dtypes
        ]
    for label, model in todo:
        rows.append(
            measure(
                label,
                model,
                args.device,
                args.groups,
                args.tune,
                args.split_units,
                args.per_node,
            )
        )
        show(rows[-1])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
