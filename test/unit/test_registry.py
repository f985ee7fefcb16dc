"""The opcode registry, the op classes, the type-family catalog, the spec's
opcode list and docs/ops.md must agree.

`nem_dialect/nem/dialect/registry/opcodes.yaml` is the one source of opcode facts; this
file fails when something derived from it (op classes, dialect, docs) or
something it refers to (type families) drifts, and when the spec's opcode
list (typed in by hand below) is not covered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.context import Context

import nem.dialect.ops as ops_module
from nem.devices.device_resolver import load_config_file, shipped_devices_dir
from nem.dialect.dialect import NEM, nem_context
from nem.dialect.ops import COMPUTE_OPS, STATEMENT_OPS, ComputeOp
from nem.dialect.registry import ATTR_TYPES, OpcodeSpec, opcodes
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem

REPO = Path(__file__).resolve().parents[2]
REGISTRY = opcodes()

# The spec's opcode list, typed in by hand (SPEC "Task Taxonomy (Exhaustive)",
# Compute Tasks, plus gelu/silu/layernorm/rmsnorm/softmax/log_softmax named
# elsewhere in the spec, plus the `compute` escape hatch).
SPEC_OPCODES = {
    "elementwise_unary": [
        "relu",
        "leaky_relu",
        "sigmoid",
        "tanh",
        "exp",
        "log",
        "sqrt",
        "abs",
        "neg",
    ],
    "elementwise_binary": ["add", "sub", "mul", "div", "min", "max", "pow"],
    "elementwise_other": ["clamp"],
    "linear_algebra": ["gemm", "matmul"],
    "convolution": ["conv1d", "conv2d", "conv3d", "depthwise_conv2d"],
    "pooling": ["maxpool", "avgpool"],
    "view": ["transpose", "reshape", "slice", "concat", "split", "pad", "gather"],
    "reduction": ["reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin"],
    "conversion": ["cast", "quantize", "dequantize"],
    "elsewhere": ["gelu", "silu", "layernorm", "rmsnorm", "softmax", "log_softmax"],
    "generic": ["compute"],
}
SPEC_OPCODE_NAMES = [o for group in SPEC_OPCODES.values() for o in group]

# The spec's category of each Task-Taxonomy group, where the registry uses one.
SPEC_CATEGORY = {
    "elementwise_unary": "elementwise",
    "elementwise_binary": "elementwise",
    "elementwise_other": "elementwise",
    "linear_algebra": "linear_algebra",
    "convolution": "convolution",
    "pooling": "pooling",
    "view": "view",
    "reduction": "reduction",
    "conversion": "conversion",
    "generic": "generic",
}


@pytest.fixture(scope="module")
def catalog():
    return load_config_file(shipped_devices_dir() / "nem_baseline_1.0.nem").catalog


@pytest.fixture(scope="module")
def ctx() -> Context:
    return nem_context()


# ---------------------------------------------------------------------------
# Registry <-> op classes <-> dialect
# ---------------------------------------------------------------------------


def test_registry_is_not_empty_and_keys_match_names():
    assert len(REGISTRY) >= len(SPEC_OPCODE_NAMES)
    for name, spec in REGISTRY.items():
        assert spec.name == name


def test_every_opcode_has_exactly_one_op_class():
    assert list(COMPUTE_OPS) == list(REGISTRY), "COMPUTE_OPS must follow registry order"
    for name, spec in REGISTRY.items():
        classes = [c for c in COMPUTE_OPS.values() if c.name == f"nem.{name}"]
        assert len(classes) == 1, f"opcode {name}: {len(classes)} op classes named nem.{name}"
        cls = classes[0]
        assert COMPUTE_OPS[name] is cls
        assert issubclass(cls, ComputeOp)
        assert cls.SPEC is spec, f"{cls.__name__}.SPEC is not the registry entry of {name}"


def test_every_op_class_has_a_registry_opcode():
    for key, cls in COMPUTE_OPS.items():
        assert cls.name.startswith("nem.")
        opcode = cls.name.removeprefix("nem.")
        assert opcode == key
        assert opcode in REGISTRY, f"{cls.__name__} ({cls.name}) has no registry entry"


def test_op_class_names_are_unique():
    names = [c.__name__ for c in COMPUTE_OPS.values()]
    assert len(set(names)) == len(names)


def test_op_class_names_do_not_shadow_module_names():
    for cls in COMPUTE_OPS.values():
        existing = getattr(ops_module, cls.__name__, None)
        assert existing is None or existing is cls, (
            f"generated class {cls.__name__} ({cls.name}) has the name of "
            f"nem.dialect.ops.{cls.__name__}"
        )


def test_dialect_registers_exactly_the_registry_ops(ctx):
    statement_names = {op.name for op in STATEMENT_OPS}
    dialect_names = {op.name for op in NEM.operations}
    compute_in_dialect = dialect_names - statement_names
    assert compute_in_dialect == {f"nem.{n}" for n in REGISTRY}
    for name in REGISTRY:
        assert ctx.get_optional_op(f"nem.{name}") is COMPUTE_OPS[name]


# ---------------------------------------------------------------------------
# Registry <-> spec, type families
# ---------------------------------------------------------------------------


def test_spec_list_has_no_duplicates():
    assert len(set(SPEC_OPCODE_NAMES)) == len(SPEC_OPCODE_NAMES)


@pytest.mark.parametrize("opcode", SPEC_OPCODE_NAMES)
def test_every_spec_opcode_is_in_the_registry(opcode):
    assert opcode in REGISTRY, f"the spec names `{opcode}` but the registry has no entry"


def test_registry_has_no_opcode_the_spec_does_not_name():
    extra = set(REGISTRY) - set(SPEC_OPCODE_NAMES)
    assert not extra, f"registry opcodes the spec does not name: {sorted(extra)}"


@pytest.mark.parametrize("group", sorted(SPEC_CATEGORY))
def test_spec_groups_keep_their_category(group):
    for opcode in SPEC_OPCODES[group]:
        assert REGISTRY[opcode].category == SPEC_CATEGORY[group], opcode


def test_binary_and_unary_arity():
    for opcode in SPEC_OPCODES["elementwise_unary"] + ["gelu", "silu", "clamp"]:
        assert len(REGISTRY[opcode].inputs) == 1, opcode
    for opcode in SPEC_OPCODES["elementwise_binary"]:
        assert len(REGISTRY[opcode].inputs) == 2, opcode


def test_every_family_id_exists_in_the_baseline_catalog(catalog):
    known = set(catalog.families)
    for name, spec in REGISTRY.items():
        missing = [f for f in spec.families if f not in known]
        assert not missing, (
            f"opcode {name}: unknown type families {missing} (known: {sorted(known)})"
        )


def test_family_bindings_match_the_catalog(catalog):
    """Each operand's `binds` names an operand binding of every family of the
    opcode, and every binding of those families is bound by some operand."""
    for name, spec in REGISTRY.items():
        binds = {o.binds for o in spec.operands if o.binds}
        if not spec.families:
            assert not binds, f"opcode {name}: operands bind {binds} but it has no families"
            continue
        for fid in spec.families:
            fam = catalog.families[fid]
            names = {o for o, _ in fam.operands} | {b for v in fam.variants for b, _ in v.bindings}
            assert binds <= names, f"opcode {name}, family {fid}: unknown bindings {binds - names}"
            assert names <= binds, f"opcode {name}, family {fid}: unbound {names - binds}"


def test_registry_entries_are_well_formed():
    for name, spec in REGISTRY.items():
        assert spec.outputs or spec.open_attributes, f"{name}: no output operand"
        seen = set()
        for o in spec.operands:
            assert o.name not in seen, f"{name}: operand {o.name} twice"
            seen.add(o.name)
        # inputs come before outputs (positional `in ... out ...`)
        dirs = [o.dir for o in spec.operands]
        assert dirs == sorted(dirs, key=lambda d: d != "in"), f"{name}: operand order {dirs}"
        for a in spec.attributes.values():
            assert a.type in ATTR_TYPES
            assert not (a.required and a.default is not None), (
                f"{name}.{a.name}: required with a default"
            )


# ---------------------------------------------------------------------------
# docs/ops.md
# ---------------------------------------------------------------------------


def test_ops_doc_is_up_to_date():
    r = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_ops_doc.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 0, (
        "docs/ops.md is stale; run `python scripts/gen_ops_doc.py`\n" + r.stderr
    )


def test_ops_doc_mentions_every_opcode():
    text = (REPO / "docs" / "ops.md").read_text(encoding="utf-8")
    for name in REGISTRY:
        assert f"### `{name}`" in text
        assert f"`{name}.async`" in text and f"`{name}.sync`" in text
        assert f"`nem.{name}`" in text


# ---------------------------------------------------------------------------
# Every opcode parses in both forms and prints back identically
# ---------------------------------------------------------------------------

# An inline region per element type; the offset makes each operand distinct.
_ELEM_BY_BINDING_DEFAULT = "f16"
_ATTR_TEXT = {
    "int": "1",
    "int_list": "[1, 2]",
    "float": "0.5",
    "number": "2.5",
    "elem": "f32",
    "string": '"my_op"',
}


def _operand_text(i: int, elem: str) -> str:
    return f"region(B, {i * 64}, 64) elem={elem}, shape=[2, 16], layout=NC"


def _opcode_program(spec: OpcodeSpec, mode: str) -> str:
    """Canonical `.nem` text using every operand (variadic ones twice) and
    every attribute of `spec`."""
    ins, outs = [], []
    n = 0
    for o in spec.operands:
        elem = o.elem[0] if o.elem else _ELEM_BY_BINDING_DEFAULT
        for _ in range(2 if o.variadic else 1):
            (ins if o.dir == "in" else outs).append(_operand_text(n, elem))
            n += 1
    attrs = "".join(f" {a.name}={_ATTR_TEXT[a.type]}" for a in spec.attributes.values())
    if spec.open_attributes:
        attrs += " extra=3 flag=[1, 2, 3]"
    return (
        "buffer B : L1 (size=4096, align=64)\n"
        "t0 = transfer.async(dst=region(B, 3072, 64), src=region(B, 3136, 64))\n"
        f"t1 = {spec.name}.{mode} in {', '.join(ins)} out {', '.join(outs)} deps=[t0]{attrs}"
        ' @debug("x")\n'
        f"{spec.name}.{mode} in {ins[0]} out {outs[0]}{attrs}\n"
    )


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize("opcode", list(REGISTRY))
def test_opcode_roundtrips_through_nem_text(opcode, mode):
    spec = REGISTRY[opcode]
    text = _opcode_program(spec, mode)
    module = parse_nem(text, f"<{opcode}.{mode}>")
    module.verify()
    ops = [op for op in module.walk() if isinstance(op, ComputeOp)]
    assert [type(op) for op in ops] == [COMPUTE_OPS[opcode]] * 2
    assert all(op.is_sync == (mode == "sync") for op in ops)
    assert ops[0].token_name() == "t1" and ops[1].token_name() is None
    assert len(ops[0].ins) == sum(2 if o.variadic else 1 for o in spec.inputs)
    assert len(ops[0].outs) == sum(2 if o.variadic else 1 for o in spec.outputs)
    assert print_nem(module) == text
