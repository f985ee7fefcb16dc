"""The transform scripts of the transform-dialect tiling route
(`nem.compile.transform`, whose docstring shows their shape): the text
that splits an op over the engines, tiles, stages and peels each part
(`script`), or only splits it (`split_script`), and running a script with
the upstream interpreter (`apply_transform`, `apply_parsed`).  Apart from
the planning that decides the sizes, which reads the IR: these only write
text and hand it to MLIR."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir
from mlir.dialects.transform import interpreter

from nem.compile.target import FAST_SPACE

if TYPE_CHECKING:
    from nem.compile.plan import Plan

TAG = "nem_tile"
PIN = "nem_engine"
"""An op made by privatizing a reduction split: whole, on this engine."""


def script(plans: list[tuple[int, Plan, bool, tuple[int, ...]]], keep: tuple[str, ...] = ()) -> str:
    """The transform module tiling op `nem_tile = K` of each (K, plan,
    generalize first, the operands to stage): split over the engines, then
    each part tiled, those operands of its tile staged in its engine's L1
    (`structured.promote` into memory space FAST_SPACE + engine), then
    peeled.  `keep`: unit
    attributes of the ops that `structured.generalize` drops (it keeps
    none), annotated on the generic op again (`zero_init.MARK`)."""
    lines = [*_HEADER]
    for k, plan, generalize, staged in plans:
        match = f"%op{k}_m" if generalize else f"%op{k}"
        lines.append(_match(match, k))
        if generalize:
            lines.append(
                f"    %op{k} = transform.structured.generalize {match} "
                ": (!transform.any_op) -> !transform.any_op"
            )
            lines += [f'    transform.annotate %op{k} "{a}" : !transform.any_op' for a in keep]
        split, parts = _split(k, plan)
        lines += split
        for j, (handle, engine) in enumerate(zip(parts, plan.engines)):
            lines += _tile_part(
                f"{k}_{j}", handle, plan.part_extents(j), plan.sizes, staged, FAST_SPACE + engine
            )
    lines += ["    transform.yield", "  }", "}"]
    return "\n".join(lines)


def split_script(plans: list[tuple[int, Plan]]) -> str:
    """The transform module splitting op `nem_tile = K` of each (K, plan)
    into its parts, and nothing else (the parts of a reduction split, to be
    privatized before tiling)."""
    lines = [*_HEADER]
    for k, plan in plans:
        lines += [_match(f"%op{k}", k), *_split(k, plan)[0]]
    lines += ["    transform.yield", "  }", "}"]
    return "\n".join(lines)


_HEADER = (
    "module attributes {transform.with_named_sequence} {",
    "  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {",
)


def _match(handle: str, k: int) -> str:
    return (
        f"    {handle} = transform.structured.match attributes{{{TAG} = {k} : i64}} in %root "
        ": (!transform.any_op) -> !transform.any_op"
    )


def _split(k: int, plan: Plan) -> tuple[list[str], list[str]]:
    """The lines splitting `%opK` into the plan's parts, and the parts' handles."""
    lines: list[str] = []
    parts = [f"%op{k}"]
    for j in range(1, len(plan.engines)):  # split off part j-1, keep splitting the rest
        lines += [
            f"    %s{k}_{j} = transform.structured.split {parts[-1]} after {plan.chunk} "
            f"{{dimension = {plan.split_dim}}} : !transform.any_op",
            f"    %op{k}p{j - 1}, %op{k}r{j} = transform.split_handle %s{k}_{j} "
            ": (!transform.any_op) -> (!transform.any_op, !transform.any_op)",
        ]
        parts[-1:] = [f"%op{k}p{j - 1}", f"%op{k}r{j}"]
    return lines, parts


def _tile_part(
    tag: str, handle: str, extents: list[int], sizes: list[int], staged: tuple[int, ...], space: int
) -> list[str]:
    """Tile, promote and peel one op (or part of a split op)."""
    # a tile size equal to its loop's extent: not tiled, except that an op
    # with no loop tiled gets one tile (its operands become subviews, which
    # promote stages)
    tiled = [s if s < e else 0 for s, e in zip(sizes, extents)]
    if not any(tiled):
        tiled = list(extents)
    n = sum(1 for s in tiled if s)
    results = ", ".join(["!transform.any_op"] * (n + 1))
    lines = [
        f"    %t{tag}, %l{tag}:{n} = transform.structured.tile_using_for {handle} tile_sizes "
        f"[{', '.join(map(str, tiled))}] : (!transform.any_op) -> ({results})",
        f"    %p{tag} = transform.structured.promote %t{tag} {{operands_to_promote = "
        f"[{', '.join(map(str, staged))}], memory_space = {space} : i64}} "
        ": (!transform.any_op) -> !transform.any_op",
    ]
    # peel innermost first: peeling a loop invalidates the handles nested in it
    loops = [(j, s, e) for j, (s, e) in enumerate((s, e) for s, e in zip(tiled, extents) if s)]
    for j, s, e in reversed(loops):
        if e % s:
            lines += [
                f"    %f{tag}_{j} = transform.cast %l{tag}#{j} : !transform.any_op to "
                '!transform.op<"scf.for">',
                f"    %m{tag}_{j}, %r{tag}_{j} = transform.loop.peel %f{tag}_{j} : "
                '(!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)',
            ]
    return lines


Parsed = tuple[ir.Module, ir.OpView]
"""A transform module and its entry `transform.named_sequence`."""


def parse_transform(text: str, context: ir.Context) -> Parsed:
    """The transform module `text`, parsed, with its named sequence."""
    transform = ir.Module.parse(text, context)
    seq = next(
        o for o in transform.body.operations if o.operation.name == "transform.named_sequence"
    )
    return transform, seq


def apply_transform(payload: ir.Module | ir.Operation, text: str) -> None:
    """Run the transform module `text` on `payload` (a module, or one op that
    its script matches and transforms), in place."""
    apply_parsed(payload, parse_transform(text, payload.context))


def apply_parsed(payload: ir.Module | ir.Operation, parsed: Parsed) -> None:
    """`apply_transform` of a parsed transform module (the interpreter only
    reads it: one parse serves every payload)."""
    transform, seq = parsed
    root = payload.operation if isinstance(payload, ir.Module) else payload
    # without the interpreter's expensive checks (a verification of the
    # payload and a walk for handle invalidation after each transform op:
    # 0.8 s of DenseNet-121's tile stage): the scripts are ours, a fixed
    # shape whose handles are never used after their op is rewritten
    options = interpreter.TransformOptions()
    options.expensive_checks = False
    interpreter.apply_named_sequence(root, seq, transform, options)
