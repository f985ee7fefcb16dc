"""Minimizing a graph-fuzz finding while its outcome persists.

Greedy reduction (delta debugging over graph edits), every candidate a valid
model (`graph_gen.validate`) whose onnxruntime outputs are finite and in
range, tested by the same isolated case as the campaign:

  1. drop a graph output (dead nodes, inputs and initializers go with it);
  2. delete a node: its output becomes a graph input (what computed it goes
     if nothing else reads it), or its uses read the node's first input;
  3. shrink a dimension of a graph input (to 1, half, one less), alone or
     with every initializer dimension of the same size;
  4. drop an attribute (its default), or set strides/dilations to 1 and
     pads to 0.

The first candidate (in that order) that keeps the outcome is taken and the
search restarts, until no candidate does or the budget (tests, minutes)
runs out.  "Keeps the outcome": the same outcome and, for everything but a
miscompile, the same signature (`CaseResult.signature`: step and diagnostic
with names and numbers blanked); a miscompile must stay clearly out of
tolerance (`MISCOMPILE_FLOOR`), so that the reduction does not drift to a
rounding difference.  New graph inputs are drawn positive (metadata
`fuzz.positive`), so a cut never hands a Div or Sqrt a value near zero.

The result is written as DIR/model.onnx, model.inputs.npz, info.json and
README.txt, whose last line is the one-line reproduction command.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
from graph_case import BUGS, MEM_GB, CaseResult, Config, fork_case, poll, run_case
from graph_gen import POSITIVE_KEY, input_arrays, numerics_ok, reference, validate
from onnx import helper, numpy_helper

MISCOMPILE_FLOOR = 10.0
"""A candidate of a miscompile keeps it when its violation (error over
tolerance) is at least this, or the original's if that was smaller."""


# ---------------------------------------------------------------------------
# graph edits (each returns a new model, or None when the edit does not apply)


def _positive(model: onnx.ModelProto) -> set[str]:
    props = {p.key: p.value for p in model.metadata_props}
    return set(filter(None, props.get(POSITIVE_KEY, "").split(",")))


def _set_positive(model: onnx.ModelProto, names: set[str]) -> None:
    kept = {vi.name for vi in model.graph.input} & names
    del model.metadata_props[:]
    if kept:
        helper.set_model_props(model, {POSITIVE_KEY: ",".join(sorted(kept))})


def finish(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """Drop dead nodes, inputs and initializers, re-infer the output shapes,
    validate; None when the edit made an invalid model."""
    g = model.graph
    live = {o.name for o in g.output}
    keep = []
    for node in reversed(g.node):
        if any(o in live for o in node.output):
            keep.append(node)
            live.update(i for i in node.input if i)
    del g.node[:]
    g.node.extend(reversed(keep))
    for field in (g.input, g.initializer):
        kept = [x for x in field if x.name in live]
        del field[:]
        field.extend(kept)
    del g.value_info[:]
    if not g.node or not g.input:
        return None
    outputs = [o.name for o in g.output]
    for o in g.output:
        o.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        types = {vi.name: vi.type for vi in [*inferred.graph.value_info, *inferred.graph.output]}
        del g.output[:]
        g.output.extend(onnx.helper.make_value_info(n, types[n]) for n in outputs)
        if any(d.dim_value <= 0 for o in g.output for d in o.type.tensor_type.shape.dim):
            return None
        validate(model)
    except Exception:  # onnx's checker and inference errors: not a valid candidate
        return None
    _set_positive(model, _positive(model))
    return model


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    return {vi.name: vi.type for vi in [*g.input, *g.value_info, *g.output]}


def drop_output(model: onnx.ModelProto, k: int) -> onnx.ModelProto | None:
    if len(model.graph.output) < 2:
        return None
    m = copy.deepcopy(model)
    del m.graph.output[k]
    return finish(m)


def cut_node(model: onnx.ModelProto, k: int) -> onnx.ModelProto | None:
    """Node k's outputs become graph inputs (positive)."""
    g = model.graph
    node = g.node[k]
    outs = {o.name for o in g.output}
    if node.op_type == "Constant" or any(o in outs for o in node.output):
        return None
    types = _value_types(model)
    m = copy.deepcopy(model)
    del m.graph.node[k]
    pos = _positive(m)
    for o in node.output:
        if o and o in types and any(o in n.input for n in m.graph.node):
            m.graph.input.append(helper.make_value_info(o, types[o]))
            pos.add(o)
    _set_positive(m, pos)
    return finish(m)


def bypass_node(model: onnx.ModelProto, k: int) -> onnx.ModelProto | None:
    """Node k's uses read its first input instead (same type required)."""
    g = model.graph
    node = g.node[k]
    if node.op_type == "Constant" or not node.input or len(node.output) != 1:
        return None
    types = _value_types(model)
    src, dst = node.input[0], node.output[0]
    if src not in types or types.get(src) != types.get(dst):
        return None
    m = copy.deepcopy(model)
    del m.graph.node[k]
    for n in m.graph.node:
        n.input[:] = [src if i == dst else i for i in n.input]
    for o in m.graph.output:
        if o.name == dst:
            if any(x.name == src for x in m.graph.output) or any(
                x.name == src for x in m.graph.input
            ):
                return None
            o.name = src
    return finish(m)


def shrink_input(
    model: onnx.ModelProto, k: int, dim: int, new: int, with_weights: bool
) -> onnx.ModelProto | None:
    m = copy.deepcopy(model)
    d = m.graph.input[k].type.tensor_type.shape.dim[dim]
    old = d.dim_value
    if new < 1 or new >= old:
        return None
    d.dim_value = new
    if with_weights:
        for i, init in enumerate(m.graph.initializer):
            a = numpy_helper.to_array(init)
            if a.dtype.kind != "f" or old not in a.shape:
                continue
            idx = tuple(slice(0, new) if s == old else slice(None) for s in a.shape)
            m.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(np.ascontiguousarray(a[idx]), init.name)
            )
    return finish(m)


_NEUTRAL = {"strides": 1, "dilations": 1, "pads": 0}


def simplify_attr(model: onnx.ModelProto, k: int, name: str, drop: bool) -> onnx.ModelProto | None:
    m = copy.deepcopy(model)
    node = m.graph.node[k]
    attr = next(a for a in node.attribute if a.name == name)
    if drop:
        node.attribute.remove(attr)
    elif name in _NEUTRAL and attr.ints and any(x != _NEUTRAL[name] for x in attr.ints):
        attr.ints[:] = [_NEUTRAL[name]] * len(attr.ints)
    else:
        return None
    return finish(m)


def candidates(model: onnx.ModelProto) -> Iterator[Callable[[], onnx.ModelProto | None]]:
    """The edits of one round, smallest result first."""
    g = model.graph
    for k in range(len(g.output)):
        yield lambda k=k: drop_output(model, k)
    for k in range(len(g.node)):
        yield lambda k=k: cut_node(model, k)
        yield lambda k=k: bypass_node(model, k)
    for k, vi in enumerate(g.input):
        for dim, d in enumerate(vi.type.tensor_type.shape.dim):
            for new in dict.fromkeys((1, d.dim_value // 2, d.dim_value - 1)):
                for w in (True, False):
                    yield lambda k=k, dim=dim, new=new, w=w: shrink_input(model, k, dim, new, w)
    for k, node in enumerate(g.node):
        for a in node.attribute:
            for drop in (False, True):
                yield lambda k=k, n=a.name, drop=drop: simplify_attr(model, k, n, drop)


# ---------------------------------------------------------------------------
# the search


def test_fn(model: onnx.ModelProto, config: Config, timeout: float, kernels: dict | None = None):
    """The case a candidate runs in its child: SKIP when onnxruntime's
    outputs are not finite or leave the safe range (`kernels`: as run_case's)."""

    def fn() -> CaseResult:
        if not numerics_ok(model):
            return CaseResult("SKIP")
        inputs = input_arrays(model)
        return run_case(model, config, inputs, reference(model, inputs), timeout, kernels)

    return fn


def keeps(target: CaseResult, r: CaseResult) -> bool:
    if r.outcome != target.outcome:
        return False
    if r.outcome == "MISCOMPILE":
        return r.violation >= min(MISCOMPILE_FLOOR, target.violation)
    return r.signature() == target.signature()


def minimize(
    model: onnx.ModelProto,
    config: Config,
    target: CaseResult,
    scratch: Path,
    jobs: int = 2,
    timeout: float = 120.0,
    mem_gb: float = MEM_GB,
    max_tests: int = 400,
    max_minutes: float = 10.0,
    log=print,
    kernels: dict | None = None,
) -> tuple[onnx.ModelProto, CaseResult, int]:
    """(the smallest model found, its result, the number of tests run);
    `kernels` replaces runtime kernels (the tests plant a bug with it)."""
    from graph_fuzz import wall_limit

    scratch.mkdir(parents=True, exist_ok=True)
    best, best_r, tests = model, target, 0
    deadline = time.monotonic() + 60 * max_minutes
    progress = True
    while progress and tests < max_tests and time.monotonic() < deadline:
        progress = False
        pending = candidates(best)
        while not progress and tests < max_tests and time.monotonic() < deadline:
            batch = []
            for make in pending:
                cand = make()
                if cand is not None:
                    batch.append(cand)
                if len(batch) == jobs:
                    break
            if not batch:
                break
            children = [
                fork_case(
                    test_fn(c, config, timeout, kernels),
                    scratch / f"t{tests}-{i}.json",
                    wall_limit(timeout),
                    mem_gb,
                    tag=c,
                )
                for i, c in enumerate(batch)
            ]
            results = []
            for child in children:
                while (r := poll(child)) is None:
                    time.sleep(0.05)
                child.out.unlink(missing_ok=True)
                results.append((child.tag, r))
            tests += len(batch)
            for cand, r in results:
                if keeps(target, r):
                    best, best_r, progress = cand, r, True
                    log(
                        f"  minimize: {len(best.graph.node)} nodes, "
                        f"{sum(1 for _ in best.graph.input)} inputs ({tests} tests)"
                    )
                    break
    return best, best_r, tests


def write_finding(
    model: onnx.ModelProto,
    config: Config,
    result: CaseResult,
    root: Path,
    note: str = "",
    name: str | None = None,
) -> dict:
    """DIR/<outcome>-<ops>-<hash>/ with the model, its inputs, info.json and
    README.txt (the reproduction command on its last line)."""
    from graph_fuzz import replay_command

    ops = [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    digest = hashlib.sha1(model.SerializeToString()).hexdigest()[:8]
    name = name or f"{result.outcome.lower()}-{'-'.join(dict.fromkeys(ops))[:60]}-{digest}"
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(d / "model.onnx"))
    inputs = input_arrays(model)
    np.savez(d / "model.inputs.npz", **inputs)
    command = replay_command(d / "model.onnx", config)
    info = {
        "outcome": result.outcome,
        "step": result.step,
        "detail": result.detail,
        "config": config.label,
        "ops": ops,
        "nodes": len(ops),
        "path": str(d / "model.onnx"),
        "command": command,
        "note": note,
    }
    (d / "info.json").write_text(json.dumps(info, indent=1))
    shapes = ", ".join(
        f"{vi.name}{[x.dim_value for x in vi.type.tensor_type.shape.dim]}"
        for vi in model.graph.input
    )
    bisect = (
        f"nem-compile {d / 'model.onnx'} {' '.join(config.flags(route=True))} --bisect "
        f"--input {d / 'model.inputs.npz'}"
    )
    (d / "README.txt").write_text(
        f"{result.outcome} ({result.step}): {result.detail}\n"
        f"config: {config.label}\nnodes: {', '.join(ops)}\ninputs: {shapes}\n"
        + (f"{note}\n" if note else "")
        + f"where (a miscompile): {bisect}\n{command}\n"
    )
    return info


def minimize_findings(
    rows: list[dict], out: Path, limit: int, jobs: int, timeout: float, mem_gb: float
) -> list[dict]:
    """Minimize up to `limit` findings of a campaign, one per signature (a
    miscompile: one per device and route), into out/findings."""
    from graph_fuzz import load_case

    seen, infos, minimized = set(), [], set()
    for row in rows:
        if row["outcome"] not in BUGS or len(infos) >= limit:
            continue
        r = CaseResult.parse({k: v for k, v in row.items() if k not in ("model", "config")})
        cfg = Config.parse(row["config"])
        key = (r.outcome, cfg.device, cfg.route) if r.outcome == "MISCOMPILE" else r.signature()
        if key in seen:
            continue
        seen.add(key)
        model, _ = load_case(out / "models" / f"m{row['model']}.onnx")
        print(f"graph_fuzz: minimizing m{row['model']} {cfg.label}: {r.outcome} {r.detail[:80]}")
        small, small_r, tests = minimize(model, cfg, r, out / "tmp", jobs, timeout, mem_gb)
        key2 = (small_r.outcome, cfg.device, tuple(n.op_type for n in small.graph.node))
        if key2 in minimized:
            continue
        minimized.add(key2)
        infos.append(
            write_finding(
                small, cfg, small_r, out / "findings", f"from m{row['model']} ({tests} tests)"
            )
        )
    return infos


def minimize_file(
    path: Path, config: Config, out: Path, jobs: int, timeout: float, mem_gb: float
) -> int:
    """`graph_fuzz.py minimize`: the model's outcome on `config`, minimized."""
    from graph_case import isolated
    from graph_fuzz import load_case, preload, wall_limit

    preload()
    model, _ = load_case(path)
    out.mkdir(parents=True, exist_ok=True)
    target = isolated(test_fn(model, config, timeout), out, wall_limit(timeout), mem_gb)
    print(f"{path} {config.label}: {target.outcome} {target.detail}")
    if target.outcome in ("PASS", "SKIP"):
        return 1
    small, r, tests = minimize(model, config, target, out / "tmp", jobs, timeout, mem_gb)
    info = write_finding(small, config, r, out, f"minimized from {path} ({tests} tests)")
    print(json.dumps(info, indent=1))
    return 0
