"""Canonical `.nem` text for type families, devices and config documents.

The layout follows the spec's own examples (family bodies exactly as in the
appendix, four-space indentation, one block per device field), so the shipped
files are close to their printed form.  Comments are not kept.  Guarantees,
tested on every file in devices/: print(parse(x)) is a fixpoint and
parse(print(parse(x))) == parse(x).  A resolved `Device` prints as a
stand-alone base device (`nem-opt --print-device NAME`).
"""

from __future__ import annotations

from nem.dialect.device_model import Device, DeviceDecl, Topology
from nem.dialect.family_model import TypeFamily, VariantRef
from nem.frontends.nem_text.config_parser import ConfigDocument
from nem.frontends.nem_text.lexer import quote

_IND = "    "


def print_type_family(fam: TypeFamily) -> str:
    params = ""
    if fam.params:
        params = "<" + ", ".join(f"{p}: {{{', '.join(d)}}}" for p, d in fam.params) + ">"
    lines = [f"type_family {fam.id}{params} {{"]
    lines += [f"{_IND}{name}: {t}" for name, t in fam.operands]
    for name, value in fam.attributes:
        on = (
            f" on {', '.join(fam.quant_required_on)}"
            if name == "quant" and fam.quant_required_on
            else ""
        )
        lines.append(f"{_IND}{name} = {value}{on}")
    lines += ["", f"{_IND}variants:"]
    for v in fam.variants:
        body = "  ".join(f"{b}: {t}" for b, t in v.bindings)
        lines.append(f"      {v.name}: {{ {body} }}" if body else f"      {v.name}: {{}}")
        entries = "   ".join(f"{c} <{', '.join(i)}>" if i else c for c, i in v.conformance)
        lines.append(
            f"        conformance: {{ {entries} }}" if entries else "        conformance: {}"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _topology(t: Topology) -> list[str]:
    lines = [
        "topology {",
        f"{_IND}num_engines = {t.num_engines}",
        f"{_IND}l2_size_bytes = {t.l2_size_bytes}",
    ]
    if t.device_units:
        lines.append(f"{_IND}device_units {{")
        lines += [f"{_IND * 2}{u} = {n}" for u, n in t.device_units.items()]
        lines.append(f"{_IND}}}")
    lines.append(f"{_IND}per_engine {{")
    lines += [f"{_IND * 2}{u} = {n}" for u, n in t.per_engine.items()]
    lines += [f"{_IND * 2}l1_size_bytes = {t.l1_size_bytes}", f"{_IND}}}", "}"]
    return lines


def _refs(block: str, refs: tuple[VariantRef, ...]) -> list[str]:
    return [f"{block} {{", *(f"{_IND}{r}" for r in refs), "}"]


def _device(
    name: str,
    parent: str | None,
    spec: str | None,
    topology: Topology | None,
    chars: dict[str, dict[str, int]],
    mandatory: tuple[VariantRef, ...],
    extended: tuple[VariantRef, ...],
    show_empty_mandatory: bool,
) -> str:
    blocks: list[list[str]] = []
    if spec is not None:
        blocks.append([f"spec_version = {quote(spec)}"])
    if topology is not None:
        blocks.append(_topology(topology))
    if chars:
        lines = ["unit_characteristics {"]
        for unit, keys in chars.items():
            lines.append(f"{_IND}{unit} {{")
            lines += [f"{_IND * 2}{k} = {v}" for k, v in keys.items()]
            lines.append(f"{_IND}}}")
        blocks.append(lines + ["}"])
    if mandatory or show_empty_mandatory:
        blocks.append(_refs("opcode.mandatory", mandatory))
    if extended:
        blocks.append(_refs("opcode.extended", extended))
    head = f"device {name}" + (f" extends {parent}" if parent else "") + " {"
    body = "\n\n".join("\n".join(_IND + ln if ln else ln for ln in b) for b in blocks)
    return f"{head}\n{body}\n}}\n" if body else f"{head}\n}}\n"


def print_device_decl(dev: DeviceDecl) -> str:
    # A base device always has an opcode.mandatory block (GRAM-18), even if empty.
    return _device(
        dev.name,
        dev.parent,
        dev.spec_version,
        dev.topology,
        dev.unit_characteristics,
        dev.mandatory,
        dev.extended,
        dev.parent is None,
    )


def print_device(dev: Device) -> str:
    """A resolved device as a self-contained base device, with its chain as a comment."""
    chain = " -> ".join((dev.name, *dev.ancestors))
    return f"# resolved: {chain}\n" + _device(
        dev.name,
        None,
        dev.spec_version,
        dev.topology,
        dev.unit_characteristics,
        dev.mandatory,
        dev.extended,
        True,
    )


def print_config_document(doc: ConfigDocument) -> str:
    parts = []
    if doc.includes:
        parts.append("".join(f"include {quote(p)}\n" for p in doc.includes))
    parts += [print_type_family(f) for f in doc.families]
    parts += [print_device_decl(d) for d in doc.devices]
    return "\n".join(parts)
