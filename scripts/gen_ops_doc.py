#!/usr/bin/env python3
"""Generate `docs/ops.md`, the NEM compute-op reference, from the opcode registry.

    python scripts/gen_ops_doc.py            # (re)write docs/ops.md
    python scripts/gen_ops_doc.py --check    # exit 1 if docs/ops.md is stale
    python scripts/gen_ops_doc.py -o FILE    # write elsewhere ("-" = stdout)

Everything in the reference comes from `nem.dialect.registry.opcodes()`
(`nem_dialect/nem/dialect/registry/opcodes.yaml`) and the op classes generated from it
(`nem.dialect.ops.COMPUTE_OPS`); never edit docs/ops.md by hand.  The output
is deterministic (registry order, no timestamps) so `--check` can compare it
byte for byte; test/unit/test_registry.py runs `--check`.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from importlib import resources
from pathlib import Path

import yaml

from nem.dialect.ops import COMPUTE_OPS
from nem.dialect.registry import AttributeSpec, OpcodeSpec, OperandSpec, opcodes

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO_ROOT / "docs" / "ops.md"

CATEGORY_TITLES = {
    "elementwise": "Elementwise",
    "linear_algebra": "Linear algebra",
    "convolution": "Convolution",
    "pooling": "Pooling",
    "view": "Layout / tensor view",
    "reduction": "Reduction",
    "conversion": "Casting and quantization",
    "normalization": "Normalization",
    "softmax": "Softmax",
    "generic": "Generic escape hatch",
}

SYMBOLIC_DEFAULTS = {
    "family_accum": "the `accum` of the matched type family (TYPE-06)",
    "last": "the last axis",
}


def _schema_categories() -> list[str]:
    text = resources.files("nem.dialect").joinpath("registry/schema.yaml").read_text()
    return list(yaml.safe_load(text)["opcode"]["category"])


def _anchor(name: str) -> str:
    return name.replace("_", "-")


def _code(text: object) -> str:
    return f"`{text}`"


def _default(a: AttributeSpec) -> str:
    if a.required:
        return "—"
    if a.default is None:
        return "none"
    if isinstance(a.default, str) and a.default in SYMBOLIC_DEFAULTS:
        return f"`{a.default}` ({SYMBOLIC_DEFAULTS[a.default]})"
    if isinstance(a.default, list):
        return _code("[" + ", ".join(str(v) for v in a.default) + "]")
    return _code(a.default)


def _binding(o: OperandSpec) -> str:
    if o.binds:
        return _code(o.binds)
    if o.elem:
        return "none; elem ∈ {" + ", ".join(o.elem) + "}"
    return "none"


def _usage(spec: OpcodeSpec, mode: str) -> str:
    """`gemm.async in A, B[, C] out Y [deps=[...]] [attr=...]`."""

    def side(ops: tuple[OperandSpec, ...]) -> str:
        parts = []
        for i, o in enumerate(ops):
            text = o.name + (", ..." if o.variadic else "")
            parts.append(
                f"[{', ' if i else ''}{text}]" if not o.required else f"{', ' if i else ''}{text}"
            )
        return "".join(parts)

    text = f"{spec.name}.{mode} in {side(spec.inputs)} out {side(spec.outputs)} [deps=[...]]"
    for a in spec.attributes.values():
        item = f"{a.name}=<{a.type}>"
        text += f" {item}" if a.required else f" [{item}]"
    if spec.open_attributes:
        text += " [key=value ...]"
    return text


def _opcode_section(spec: OpcodeSpec) -> list[str]:
    cls = COMPUTE_OPS.get(spec.name)
    lines = [f"### `{spec.name}`", ""]
    lines.append(f"- Forms: `{spec.name}.async`, `{spec.name}.sync`")
    if cls is not None:
        lines.append(
            f"- xDSL op: `{cls.name}` (class `{cls.__module__}.{cls.__name__}`, "
            f'in `COMPUTE_OPS["{spec.name}"]`)'
        )
    else:
        lines.append("- xDSL op: **missing** (no class in `COMPUTE_OPS`)")
    lines.append(f"- Execution unit: `{spec.unit}`")
    lines.append(f"- Hardware status: `{spec.hw_status}`")
    lines.append(f"- Stability: `{spec.stability}`")
    lines.append(
        f"- Bytecode opcode number: `{spec.code}` (stable, never reused; "
        "[docs/bytecode.md](bytecode.md))"
    )
    fams = (
        ", ".join(_code(f) for f in spec.families) if spec.families else "none (not family-checked)"
    )
    lines.append(f"- Type families: {fams}")
    lines.append(f"- Signature: `{spec.signature()}`")
    lines += ["", "```text", _usage(spec, "async"), _usage(spec, "sync"), "```", ""]
    lines += [
        "| # | operand | dir | role | required | variadic | family binding |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, o in enumerate(spec.operands):
        lines.append(
            f"| {i} | `{o.name}` | {o.dir} | {o.role} | "
            f"{'yes' if o.required else 'no'} | {'yes' if o.variadic else 'no'} | "
            f"{_binding(o)} |"
        )
    lines.append("")
    if spec.attributes:
        lines += ["| attribute | type | required | default |", "| --- | --- | --- | --- |"]
        for a in spec.attributes.values():
            type_ = (
                a.type
                if a.values is None
                else f"{a.type}: " + " or ".join(f'`"{v}"`' for v in a.values)
            )
            lines.append(
                f"| `{a.name}` | {type_} | {'yes' if a.required else 'no'} | {_default(a)} |"
            )
    else:
        lines.append("No attributes.")
    if spec.open_attributes:
        lines += ["", "Open attribute set: any other `key=value` is accepted and passed through."]
    lines.append("")
    return lines


def render() -> str:
    ops = opcodes()
    order = _schema_categories()
    cats = sorted(
        {s.category for s in ops.values()},
        key=lambda c: order.index(c) if c in order else len(order),
    )
    lines = [
        "# NEM compute-op reference",
        "",
        "<!-- GENERATED by scripts/gen_ops_doc.py from nem_dialect/nem/dialect/registry/opcodes.yaml;"
        " do not edit. Regenerate: python scripts/gen_ops_doc.py -->",
        "",
        "Every compute opcode of the registry, grouped by category. Each has an `.async` "
        "form (returns a completion token) and a `.sync` form (TASK-09). Operands are "
        "positional: inputs after `in`, outputs after `out`, in the order listed. "
        "`[x]` marks an optional operand, `x, ...` a variadic one. The family binding "
        "is the name under which the operand's element type is matched against the "
        "opcode's type families (`devices/nem/devices/nem_baseline_1.0.nem`).",
        "",
        f"{len(ops)} opcodes in {len(cats)} categories.",
        "",
        "## Summary",
        "",
        "| opcode | category | unit | hardware | stability | families | xDSL op |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cats:
        for s in ops.values():
            if s.category != c:
                continue
            fams = ", ".join(s.families) if s.families else "—"
            lines.append(
                f"| [`{s.name}`](#{_anchor(s.name)}) | {c} | {s.unit} | {s.hw_status} | "
                f"{s.stability} | {fams} | `nem.{s.name}` |"
            )
    lines.append("")
    for c in cats:
        lines += [f"## {CATEGORY_TITLES.get(c, c)} (`{c}`)", ""]
        for s in ops.values():
            if s.category == c:
                lines += _opcode_section(s)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--check",
        action="store_true",
        help="exit 1 (with a diff) if the output file is not up to date",
    )
    ap.add_argument(
        "-o",
        "--output",
        default=str(DEFAULT_OUTPUT),
        help="output file (default: docs/ops.md; '-' for stdout)",
    )
    args = ap.parse_args(argv)
    text = render()
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    if args.check:
        old = out.read_text(encoding="utf-8") if out.exists() else ""
        if old == text:
            return 0
        diff = difflib.unified_diff(
            old.splitlines(True), text.splitlines(True), str(out), "generated", n=1
        )
        sys.stderr.writelines(list(diff)[:80])
        print(f"\n{out} is stale: run `python scripts/gen_ops_doc.py`", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
