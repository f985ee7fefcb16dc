"""Config documents, the baseline catalog and device resolution (the
type-family matcher: test_family_matcher.py).

Expected variant lists are typed in from the spec's "Variant Expansion
Reference" tables, an independent check of devices/nem/devices/nem_baseline_1.0.nem.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nem.devices.device_resolver import (
    load_config_file,
    resolve_device,
    resolve_device_file,
    scope_for_document,
    shipped_devices_dir,
)
from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc
from nem.dialect.families import Catalog
from nem.dialect.family_model import VariantRef
from nem.frontends.nem_text.config_parser import parse_config_document, parse_device_config
from nem.frontends.nem_text.config_printer import (
    print_config_document,
    print_device,
    print_type_family,
)
from nem.frontends.nem_text.cursor import TokenCursor
from nem.frontends.nem_text.lexer import tokenize

DEVICES = shipped_devices_dir()
BASELINE = DEVICES / "nem_baseline_1.0.nem"

# SPEC Appendix, "Variant Expansion Reference" tables (class per reference).
SPEC_EXPANSION = {
    "conv2d.int8<i8>.no_bias": "MUST",
    "conv2d.int8<i8>.with_bias": "MUST",
    "conv2d.int8<i16>.with_bias": "MAY",
    "conv2d.float<f16>.no_bias": "MUST",
    "conv2d.float<f16>.with_bias": "MUST",
    "conv2d.float<bf16>.no_bias": "MAY",
    "conv2d.float<bf16>.with_bias": "MAY",
    "conv2d.float<f32>.no_bias": "MAY",
    "conv2d.float<f32>.with_bias": "MAY",
    "conv2d.int4.no_bias": "MAY",
    "conv2d.int4.with_bias": "MAY",
    "gemm.int8<i8>.no_bias": "MUST",
    "gemm.int8<i8>.with_bias": "MUST",
    "gemm.int8<i16>.with_bias": "MAY",
    "gemm.float<f16>.no_bias": "MUST",
    "gemm.float<f16>.with_bias": "MUST",
    "gemm.float<bf16>.no_bias": "MAY",
    "gemm.float<f32>.no_bias": "MAY",
    "gemm.int4.no_bias": "MAY",
    "gemm.int4.with_bias": "MAY",
    "eltwise<i8>.default": "MUST",
    "eltwise<i16>.default": "MAY",
    "eltwise<i32>.default": "MAY",
    "eltwise<f16>.default": "MUST",
    "eltwise<bf16>.default": "MAY",
    "eltwise<f32>.default": "MAY",
    "view<i8>.default": "MUST",
    "view<i16>.default": "MAY",
    "view<i32>.default": "MAY",
    "view<f16>.default": "MUST",
    "view<bf16>.default": "MAY",
    "view<f32>.default": "MAY",
    "norm<f16>.default": "MUST",
    "norm<bf16>.default": "MAY",
    "norm<f32>.default": "MAY",
    "softmax<f16>.default": "MUST",
    "softmax<bf16>.default": "MAY",
    "softmax<f32>.default": "MAY",
    "cast.default": "MUST",
    "quantize<f16, i8>.default": "MUST",
    "quantize<f32, i8>.default": "MAY",
    "dequantize<i8, f16>.default": "MUST",
    "dequantize<i8, f32>.default": "MAY",
}
# Decisions D-FAM-POOL / D-FAM-REDUCE (not spec text): families the spec does not
# define add no MUST obligation.
DECISION_EXPANSION = {
    "pool<i8>.default": "MAY",
    "pool<f16>.default": "MAY",
    "pool<i16>.default": "MAY",
    "pool<bf16>.default": "MAY",
    "pool<f32>.default": "MAY",
    **{f"reduce<{t}>.default": "MAY" for t in ("i8", "i16", "i32", "f16", "bf16", "f32")},
}
BASELINE_POOL = ["pool<i8>.default", "pool<f16>.default"]  # D-FAM-POOL
BF16_EXTRAS = [
    "gemm.float<bf16>.no_bias",
    "conv2d.float<bf16>.no_bias",
    "conv2d.float<bf16>.with_bias",
    "eltwise<bf16>.default",
    "view<bf16>.default",
]


def refs(*texts: str) -> set[VariantRef]:
    return {VariantRef.parse(t) for t in texts}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def diag_of(excinfo) -> object:
    return excinfo.value.diagnostics[0]


def expect_error(rule: str, line: int, fn, *args):
    with pytest.raises(NemDiagnosticError) as excinfo:
        fn(*args)
    diag = diag_of(excinfo)
    assert (diag.rule, diag.loc.line if diag.loc else None) == (rule, line), diag.render()
    return diag


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_config_file(BASELINE).catalog


TOPOLOGY = """\
    topology {
        num_engines = 1
        l2_size_bytes = 1024 * 1024
        per_engine { NMU = 1  CSTL = 1  l1_size_bytes = 4096 }
    }"""


def device_file(tmp_path: Path, body: str, name: str = "dev.nem") -> Path:
    return write(tmp_path, name, 'include "nem_baseline_1.0.nem"\n' + textwrap.dedent(body))


def resolve_text(tmp_path: Path, body: str, target: str):
    return resolve_device(load_config_file(device_file(tmp_path, body)), target)


# -- baseline catalog ---------------------------------------------------------------


def test_baseline_has_every_spec_variant_with_its_class(catalog):
    # RULE: FAM-03..FAM-08, FAM-13, FAM-15, FAM-18..FAM-22
    got = {str(r): catalog.conformance(r) for r in catalog.all_variant_refs()}
    assert got == {**SPEC_EXPANSION, **DECISION_EXPANSION}


def test_baseline_device_lists_exactly_the_must_variants(catalog):
    # RULE: DEV-08
    scope = load_config_file(BASELINE)
    decl = scope.devices["nem_baseline_1_0"]
    assert decl.topology is None and decl.spec_version == "1.0"
    want = {k for k, c in {**SPEC_EXPANSION, **DECISION_EXPANSION}.items() if c == "MUST"}
    assert want == {str(r) for r in catalog.must_refs()}
    # plus pool<i8>/pool<f16>: MAY variants every device extending the baseline supports
    assert {str(r) for r in decl.mandatory} == want | set(BASELINE_POOL)


def test_appendix_special_forms(catalog):
    # RULE: GRAM-22
    fams = catalog.families
    assert fams["quantize"].quant_required_on == ("dst",)
    assert fams["dequantize"].quant_required_on == ("src",)
    assert dict(fams["cast"].operands) == {"src": "any_supported", "dst": "any_supported"}
    assert fams["cast"].variants[0].conformance == (("MUST", ()),)
    assert fams["gemm.float"].accum == "f32" and fams["gemm.int8"].quant == "required"


def test_variant_ref_text_forms():
    # RULE: GRAM-21
    assert str(VariantRef.parse("gemm.float<bf16>.no_bias")) == "gemm.float<bf16>.no_bias"
    assert VariantRef.parse("quantize<f16,i8>.default").inst == ("f16", "i8")
    assert VariantRef.parse("cast.default") == VariantRef("cast", (), "default")
    assert VariantRef.parse("gemm.int4.no_bias") == VariantRef("gemm.int4", (), "no_bias")
    with pytest.raises(NemDiagnosticError):
        VariantRef.parse("gemm<")


# -- shipped devices -------------------------------------------------------------


@pytest.mark.parametrize(
    "name,extra_mandatory,extended",
    [
        (
            "npm_lite",
            ["gemm.float<bf16>.no_bias", "eltwise<bf16>.default", "view<bf16>.default"],
            [],
        ),
        ("npm_mid", BF16_EXTRAS, []),
        ("npm_pro", BF16_EXTRAS, ["gemm.float<f32>.no_bias"]),
        (
            "npm_pro_x1",
            BF16_EXTRAS,
            ["gemm.float<f32>.no_bias", "conv2d.float<f32>.no_bias", "eltwise<f32>.default"],
        ),
    ],
)
def test_shipped_devices_resolve(catalog, name, extra_mandatory, extended):
    # RULE: DEV-12, INH-01, INH-06, INH-07
    dev = resolve_device(load_config_file(DEVICES / f"{name}.nem"), name)
    assert set(dev.mandatory) == set(catalog.must_refs()) | refs(*BASELINE_POOL, *extra_mandatory)
    assert set(dev.extended) == refs(*extended)
    assert dev.effective == set(dev.mandatory) | set(dev.extended)
    assert dev.spec_version == "1.0" and not dev.warnings


def test_npm_pro_x1_inherits_everything_but_extends_extended():
    # RULE: INH-01, INH-07
    scope = load_config_file(DEVICES / "npm_pro_x1.nem")
    x1, pro = resolve_device(scope, "npm_pro_x1"), resolve_device(scope, "npm_pro")
    assert x1.ancestors == ("npm_pro", "nem_baseline_1_0")
    assert (x1.topology, x1.unit_characteristics, x1.mandatory) == (
        pro.topology,
        pro.unit_characteristics,
        pro.mandatory,
    )
    # The spec: "The opcode.extended set is the union of parent and child".
    assert set(x1.extended) == refs(
        "gemm.float<f32>.no_bias", "conv2d.float<f32>.no_bias", "eltwise<f32>.default"
    )


def test_device_helpers():
    dev = resolve_device(load_config_file(DEVICES / "npm_lite.nem"), "npm_lite")
    assert dev.units("CSTL") == 2 and dev.units("WDM") == 0 and dev.units("sDMA") == 1
    assert dev.max_active_tokens == 16
    assert dev.topology.l1_size_bytes == 524288 and dev.topology.l2_size_bytes == 1048576
    assert dev.effective_for_family(["gemm.float"]) == refs(
        "gemm.float<f16>.no_bias", "gemm.float<f16>.with_bias", "gemm.float<bf16>.no_bias"
    )


def test_resolve_device_file_default_choice(tmp_path):
    # RULE: DEV-20 (decision D-DEV-FILE: last device of the file that nothing extends)
    assert resolve_device_file(DEVICES / "npm_pro_x1.nem").name == "npm_pro_x1"
    path = device_file(
        tmp_path,
        f"""
        device a extends nem_baseline_1_0 {{
        {TOPOLOGY}
        }}
        device b extends a {{ }}
        device c extends nem_baseline_1_0 {{
        {TOPOLOGY}
        }}
        """,
    )
    assert resolve_device_file(path).name == "c"
    assert resolve_device_file(path, "b").ancestors == ("a", "nem_baseline_1_0")
    empty = write(tmp_path, "e.nem", "")
    expect_error("DEV-20", 3, resolve_device_file, empty, None, (), SourceLoc("p.nem", 3, 8))
    expect_error(
        "DEV-20", 3, resolve_device_file, tmp_path / "no.nem", None, (), SourceLoc("p.nem", 3, 8)
    )


# -- round trips -------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(DEVICES.glob("*.nem")), ids=lambda p: p.name)
def test_round_trip_fixpoint(path):
    doc = parse_config_document(path.read_text(), str(path))
    text = print_config_document(doc)
    again = parse_config_document(text, "printed.nem")
    assert again == doc
    assert print_config_document(again) == text


def test_baseline_families_print_as_the_appendix(catalog):
    appendix_gemm = """\
        type_family gemm.float<T: {f16, bf16, f32}> {
            A: T
            B: T
            Y: T
            accum = f32
            quant = absent

            variants:
              no_bias: { C: absent }
                conformance: { MUST <f16>   MAY <bf16>   MAY <f32> }
              with_bias: { C: T }
                conformance: { MUST <f16> }
        }
        """
    assert print_type_family(catalog.families["gemm.float"]) == textwrap.dedent(appendix_gemm)
    assert "quant = required on dst" in print_type_family(catalog.families["quantize"])


def test_resolved_device_prints_as_a_valid_base_device(tmp_path):
    dev = resolve_device(load_config_file(DEVICES / "npm_pro_x1.nem"), "npm_pro_x1")
    path = write(tmp_path, "x.nem", 'include "nem_baseline_1.0.nem"\n' + print_device(dev))
    again = resolve_device(load_config_file(path), "npm_pro_x1")
    assert (
        again.topology,
        again.unit_characteristics,
        set(again.mandatory),
        set(again.extended),
    ) == (dev.topology, dev.unit_characteristics, set(dev.mandatory), set(dev.extended))


# -- parser -------------------------------------------------------------------------


def test_parse_device_config_from_cursor_and_size_expressions():
    # RULE: GRAM-18, GRAM-19
    text = (
        "device d extends p { topology { num_engines = 2  l2_size_bytes = (1 + 3) * 1024 "
        "- 10 mod 4  per_engine { l1_size_bytes = 7 / 2 } } }\nprogram x:"
    )
    cur = TokenCursor(tokenize(text, "p.nem"), "p.nem")
    decl = parse_device_config(cur)
    assert decl.topology.l2_size_bytes == 4094 and decl.topology.l1_size_bytes == 3
    assert cur.tok.text == "program"


@pytest.mark.parametrize(
    "rule,line,text",
    [
        # RULE: GRAM-18 (block order)
        (
            "GRAM-18",
            3,
            "device d extends p {\n  opcode.mandatory { cast.default }\n  topology { }\n}",
        ),
        # RULE: GRAM-18 (base device without opcode.mandatory)
        ("GRAM-18", 1, 'device d {\n  spec_version = "1.0"\n}'),
        # RULE: DEV-01 (base device without spec_version)
        ("DEV-01", 1, "device d {\n  opcode.mandatory { cast.default }\n}"),
        # RULE: INH-02 (derived device declares spec_version)
        ("INH-02", 2, 'device d extends p {\n  spec_version = "1.0"\n}'),
        # RULE: GRAM-19 (l1_size_bytes must be last in per_engine)
        (
            "GRAM-19",
            3,
            "device d extends p { topology { num_engines = 1 l2_size_bytes = 1\n"
            "  per_engine { l1_size_bytes = 1\n  NMU = 1 } } }",
        ),
        # RULE: GRAM-19 (no consts in config expressions)
        (
            "GRAM-19",
            2,
            "device d extends p { topology { num_engines = 1\n l2_size_bytes = K\n"
            " per_engine { l1_size_bytes = 1 } } }",
        ),
        # RULE: LEX-03 (FLOAT size)
        ("LEX-03", 1, "device d extends p { topology { num_engines = 1 l2_size_bytes = 1.5 } }"),
        # RULE: GRAM-20 (characteristic values are integer literals)
        ("GRAM-20", 2, 'device d extends p { unit_characteristics {\n NMU { x = "a" } } }'),
        # RULE: GRAM-21 (variant reference form)
        ("GRAM-21", 2, "device d extends p { opcode.mandatory {\n gemm.float<f16> } }"),
        # RULE: GRAM-01 (program text in a config document)
        ("GRAM-01", 2, "type_family f { variants: }\nbuffer b : L2 (size = 4)"),
        # RULE: GRAM-22 (operand binding after attribute binding)
        ("GRAM-22", 3, "type_family f {\n accum = f32\n X: f32\n variants: }"),
        # RULE: TFD-01 (instantiation outside the parameter domain)
        (
            "TFD-01",
            3,
            "type_family f<T: {f16}> { X: T variants:\n d: {}\n conformance: { MUST <i8> } }",
        ),
        # RULE: TFD-01 (arity: a non-parameterized family takes no instantiation)
        ("TFD-01", 2, "type_family f { X: i8 variants: d: {}\n conformance: { MUST <i8> } }"),
        # RULE: TFD-02 (one class per instantiation)
        (
            "TFD-02",
            2,
            "type_family f<T: {f16}> { X: T variants: d: {}\n"
            " conformance: { MUST <f16> MAY <f16> } }",
        ),
        # RULE: TFD-03 (undeclared type variable)
        ("TFD-03", 2, "type_family f<T: {f16}> {\n X: U variants: }"),
        # RULE: TFD-04 (duplicate variant names)
        (
            "TFD-04",
            3,
            "type_family f { X: i8 variants:\n d: {} conformance: { MAY }\n"
            " d: {} conformance: { MAY } }",
        ),
        # RULE: TYPE-01 (unknown element type in a parameter set)
        ("TYPE-01", 1, "type_family f<T: {f64}> { variants: }"),
    ],
)
def test_parse_errors(rule, line, text):
    expect_error(rule, line, parse_config_document, text, "bad.nem")


@pytest.mark.parametrize(
    "rule,line,text",
    [
        # RULE: TFD-03 (quant = required on an unknown operand)
        ("TFD-03", 1, "type_family f { X: i8  quant = required on Z  variants: }"),
        # RULE: TFD-03 (quant value)
        ("TFD-03", 2, "type_family f { X: i8\n  quant = maybe  variants: }"),
        # RULE: TFD-03 (accum must be an element type)
        ("TFD-03", 2, "type_family f { X: i8\n  accum = wide  variants: }"),
    ],
)
def test_family_attribute_errors(rule, line, text):
    expect_error(rule, line, parse_config_document, text, "bad.nem")


def test_inline_program_device_scope(tmp_path):
    # RULE: DEV-20 (a program's includes + inline device, as the program parser hands them over)
    prog = tmp_path / "prog.nem"
    text = (
        f'include "nem_baseline_1.0.nem"\ndevice mine extends nem_baseline_1_0 {{\n{TOPOLOGY}\n}}\n'
    )
    doc = parse_config_document(text + "program p:\n", str(prog), included=True)
    dev = resolve_device(scope_for_document(doc), "mine")
    assert dev.ancestors == ("nem_baseline_1_0",) and dev.topology.num_engines == 1


def test_included_program_is_ignored(tmp_path):
    # RULE: INC-05
    write(
        tmp_path,
        "prog.nem",
        """\
        include "nem_baseline_1.0.nem"
        device npm_pro_x1
        program p:
        buffer b : L2 (size = 4)
        """,
    )
    main = write(tmp_path, "main.nem", 'include "prog.nem"\n')
    scope = load_config_file(main)
    assert "nem_baseline_1_0" in scope.devices and "gemm.float" in scope.families


# -- includes ---------------------------------------------------------------------


def test_include_cycle_reports_chain(tmp_path):
    # RULE: INC-03
    write(tmp_path, "a.nem", 'include "b.nem"\n')
    write(tmp_path, "b.nem", '\ninclude "c.nem"\n')
    write(tmp_path, "c.nem", 'include "a.nem"\n')
    diag = expect_error("INC-03", 1, load_config_file, tmp_path / "a.nem")
    assert "a.nem -> " in diag.message and diag.loc.file.endswith("c.nem")


def test_self_include_is_a_cycle(tmp_path):
    # RULE: INC-03
    expect_error("INC-03", 1, load_config_file, write(tmp_path, "a.nem", 'include "a.nem"\n'))


def test_same_file_twice_is_loaded_once(tmp_path):
    # RULE: INC-06 (a diamond is not a duplicate)
    write(tmp_path, "l.nem", 'include "nem_baseline_1.0.nem"\n')
    write(tmp_path, "r.nem", 'include "nem_baseline_1.0.nem"\n')
    scope = load_config_file(write(tmp_path, "m.nem", 'include "l.nem"\ninclude "r.nem"\n'))
    assert "nem_baseline_1_0" in scope.devices


def test_duplicate_device_across_files(tmp_path):
    # RULE: INC-06
    body = f"device d extends nem_baseline_1_0 {{\n{TOPOLOGY}\n}}\n"
    device_file(tmp_path, body, "one.nem")
    device_file(tmp_path, "\n\n" + body, "two.nem")
    write(tmp_path, "m.nem", 'include "one.nem"\ninclude "two.nem"\n')
    diag = expect_error("INC-06", 4, load_config_file, tmp_path / "m.nem")
    assert diag.notes and diag.notes[0].loc.file.endswith("one.nem")


def test_duplicate_family_across_files(tmp_path):
    # RULE: INC-06
    write(tmp_path, "f.nem", "type_family eltwise { variants: }\n")
    expect_error(
        "INC-06",
        1,
        load_config_file,
        write(tmp_path, "m.nem", 'include "nem_baseline_1.0.nem"\ninclude "f.nem"\n'),
    )


def test_include_search_order(tmp_path):
    # RULE: INC-02 (relative to the including file first, then -I dirs in order, then devices/)
    for dir_, stem in [("here", "x"), ("i1", "x"), ("i1", "y"), ("i2", "y"), ("i2", "z")]:
        write(tmp_path, f"{dir_}/{stem}.nem", f"type_family {dir_}_{stem} {{ variants: }}\n")
    main = write(
        tmp_path,
        "here/m.nem",
        'include "x.nem"\ninclude "y.nem"\ninclude "z.nem"\ninclude "nem_baseline_1.0.nem"\n',
    )
    scope = load_config_file(main, [tmp_path / "i1", tmp_path / "i2"])
    assert {f for f in scope.families if "_" in f and "." not in f} == {"here_x", "i1_y", "i2_z"}
    assert "gemm.float" in scope.families


def test_spec_multi_file_example_with_include_dir(tmp_path):
    # RULE: INC-01 (transitive includes; docs/conformance.md Gaps D, `-I` resolves "devices/npm_pro.nem")
    main = write(tmp_path, "kernels/matmul.nem", 'include "devices/npm_pro_x1.nem"\n')
    scope = load_config_file(main, [DEVICES.parent])
    assert resolve_device(scope, "npm_pro_x1").ancestors[-1] == "nem_baseline_1_0"


def test_missing_include(tmp_path):
    # RULE: INC-02
    expect_error("INC-02", 2, load_config_file, write(tmp_path, "m.nem", '\ninclude "no.nem"\n'))


# -- inheritance -------------------------------------------------------------------


def test_topology_is_replaced_not_merged(tmp_path):
    # RULE: INH-03
    dev = resolve_text(
        tmp_path,
        """\
        device p extends nem_baseline_1_0 {
            topology {
                num_engines = 2  l2_size_bytes = 100
                device_units { sDMA = 2 }
                per_engine { NMU = 2  DMA = 2  l1_size_bytes = 10 }
            }
        }
        device c extends p {
            topology { num_engines = 1  l2_size_bytes = 50  per_engine { NMU = 1  l1_size_bytes = 5 } }
        }
        """,
        "c",
    )
    assert dev.topology.device_units == {} and dev.topology.per_engine == {"NMU": 1}
    assert dev.units("DMA") == 0 and dev.topology.l2_size_bytes == 50


def test_abstract_parent_needs_topology(tmp_path):
    # RULE: INH-04
    body = "device c extends nem_baseline_1_0 {\n  opcode.mandatory { eltwise<f32>.default }\n}\n"
    expect_error("INH-04", 2, resolve_text, tmp_path, body, "c")


def test_abstract_intermediate_device_is_fine(tmp_path):
    # RULE: INH-04, DEV-07 (checked on the resolved target only, docs/conformance.md Gaps B)
    dev = resolve_text(
        tmp_path,
        f"""\
        device mid extends nem_baseline_1_0 {{ opcode.extended {{ eltwise<f32>.default }} }}
        device leaf extends mid {{
        {TOPOLOGY}
        }}
        """,
        "leaf",
    )
    assert refs("eltwise<f32>.default") == set(dev.extended)


def test_base_device_without_topology(tmp_path):
    # RULE: DEV-07
    scope = load_config_file(BASELINE)
    with pytest.raises(NemDiagnosticError) as excinfo:
        resolve_device(scope, "nem_baseline_1_0")
    assert diag_of(excinfo).rule == "DEV-07"
    assert diag_of(excinfo).loc.line == scope.devices["nem_baseline_1_0"].loc.line


def test_unit_characteristics_merge(tmp_path):
    # RULE: INH-05, DEV-11 (unknown keys are kept)
    dev = resolve_text(
        tmp_path,
        f"""\
        device p extends nem_baseline_1_0 {{
        {TOPOLOGY}
            unit_characteristics {{ NMU {{ int8_macs = 1  fp16_macs = 2 }} SEQ {{ max_active_tokens = 8 }} }}
        }}
        device c extends p {{
            unit_characteristics {{ NMU {{ fp16_macs = 3  future_key = 9 }} VPU {{ lanes = 4 }} }}
        }}
        """,
        "c",
    )
    assert dev.unit_characteristics == {
        "NMU": {"int8_macs": 1, "fp16_macs": 3, "future_key": 9},
        "SEQ": {"max_active_tokens": 8},
        "VPU": {"lanes": 4},
    }


def test_mandatory_and_extended_are_unions(tmp_path):
    # RULE: INH-06, INH-07
    dev = resolve_text(
        tmp_path,
        f"""\
        device p extends nem_baseline_1_0 {{
        {TOPOLOGY}
            opcode.mandatory {{ eltwise<bf16>.default }}
            opcode.extended {{ eltwise<f32>.default }}
        }}
        device c extends p {{
            opcode.mandatory {{ view<bf16>.default }}
            opcode.extended {{ view<f32>.default }}
        }}
        """,
        "c",
    )
    assert refs("eltwise<bf16>.default", "view<bf16>.default") <= set(dev.mandatory)
    assert set(dev.extended) == refs("eltwise<f32>.default", "view<f32>.default")


@pytest.mark.parametrize(
    "body,line",
    [
        # RULE: INH-08 (self extension)
        ("device a extends a { }\n", 2),
        # RULE: INH-08 (cycle a -> b -> a)
        ("device a extends b { }\ndevice b extends a { }\n", 2),
        # RULE: INH-08 (parent defined after the child)
        (f"device c extends p {{ }}\ndevice p extends nem_baseline_1_0 {{\n{TOPOLOGY}\n}}\n", 2),
        # RULE: INH-08 (unknown parent)
        ("\ndevice c extends nowhere { }\n", 3),
    ],
)
def test_inheritance_errors(tmp_path, body, line):
    target = body.split()[1] if not body.startswith("\n") else "c"
    expect_error("INH-08", line, resolve_text, tmp_path, body, target)


def test_parent_must_be_visible_through_includes(tmp_path):
    # RULE: INH-08 (a sibling include does not make a parent visible)
    device_file(tmp_path, f"device p extends nem_baseline_1_0 {{\n{TOPOLOGY}\n}}\n", "p.nem")
    write(tmp_path, "c.nem", "device c extends p { }\n")
    main = write(tmp_path, "m.nem", 'include "p.nem"\ninclude "c.nem"\n')
    expect_error("INH-08", 1, lambda: resolve_device(load_config_file(main), "c"))


# -- schema rules --------------------------------------------------------------------


def test_duplicate_in_mandatory_and_extended_warns(tmp_path):
    # RULE: DEV-02, DEV-03
    dev = resolve_text(
        tmp_path,
        f"""\
        device d extends nem_baseline_1_0 {{
        {TOPOLOGY}
            opcode.extended {{
                eltwise<f32>.default
                eltwise<f16>.default
            }}
        }}
        """,
        "d",
    )
    assert [(w.severity, w.rule, w.loc.line) for w in dev.warnings] == [("warning", "DEV-03", 10)]
    assert set(dev.extended) == refs("eltwise<f32>.default")
    assert VariantRef.parse("eltwise<f16>.default") in dev.mandatory


@pytest.mark.parametrize(
    "rule,line,topology",
    [
        # RULE: DEV-04 (num_engines >= 1)
        ("DEV-04", 4, "num_engines = 0 l2_size_bytes = 1 per_engine { l1_size_bytes = 1 }"),
        # RULE: DEV-04 (per-engine counts >= 1)
        ("DEV-04", 4, "num_engines = 1 l2_size_bytes = 1 per_engine { NMU = 0 l1_size_bytes = 1 }"),
        # RULE: DEV-06 (sizes > 0)
        ("DEV-06", 4, "num_engines = 1 l2_size_bytes = 0 per_engine { l1_size_bytes = 1 }"),
        # RULE: DEV-06 (l1 > 0 after evaluation)
        ("DEV-06", 4, "num_engines = 1 l2_size_bytes = 8 per_engine { l1_size_bytes = 2 - 3 }"),
        # RULE: DEV-09 (device-level unit in per_engine)
        (
            "DEV-09",
            4,
            "num_engines = 1 l2_size_bytes = 8 per_engine { sDMA = 1 l1_size_bytes = 2 }",
        ),
        # RULE: DEV-09 (per-engine unit in device_units)
        (
            "DEV-09",
            4,
            "num_engines = 1 l2_size_bytes = 8 device_units { NMU = 1 } "
            "per_engine { l1_size_bytes = 2 }",
        ),
    ],
)
def test_topology_schema_errors(tmp_path, rule, line, topology):
    body = f"\ndevice d extends nem_baseline_1_0 {{\n    topology {{ {topology} }}\n}}\n"
    expect_error(rule, line, resolve_text, tmp_path, body, "d")


def test_zero_live_tokens_is_an_error_at_the_key(tmp_path):
    """A sequencer that holds no token runs no async task (D-DEV-TOKENS):
    the device is refused where the key is written (hostile10 found it
    accepted, nem-verify then rejecting every program and nem-run running
    them); 1 is a device."""
    body = (
        "\ndevice d extends nem_baseline_1_0 {\n"
        "    topology { num_engines = 1 l2_size_bytes = 8 per_engine { l1_size_bytes = 2 } }\n"
        "    unit_characteristics { SEQ { max_active_tokens = 0 } }\n}\n"
    )
    diag = expect_error("DEV-17", 5, resolve_text, tmp_path, body, "d")
    assert "max_active_tokens" in diag.message and diag.fix
    dev = resolve_text(tmp_path, body.replace("= 0", "= 1"), "d")
    assert dev.max_active_tokens == 1


def test_device_units_may_be_zero(tmp_path):
    # RULE: DEV-05
    dev = resolve_text(
        tmp_path,
        """\
        device d extends nem_baseline_1_0 {
            topology { num_engines = 1 l2_size_bytes = 8
                       device_units { sDMA = 0 WDM = 0 } per_engine { l1_size_bytes = 2 } }
        }
        """,
        "d",
    )
    assert dev.units("sDMA") == 0


def test_missing_must_variants(tmp_path):
    # RULE: DEV-08
    body = f"""\
        device d {{
            spec_version = "1.0"
        {TOPOLOGY}
            opcode.mandatory {{ eltwise<f16>.default }}
        }}
        """
    diag = expect_error("DEV-08", 2, resolve_text, tmp_path, body, "d")
    assert "lacks 16 MUST variant(s)" in diag.message


def test_unknown_spec_version(tmp_path):
    # RULE: DEV-01
    body = f'device d {{\n    spec_version = "9.9"\n{TOPOLOGY}\n opcode.mandatory {{ cast.default }}\n}}\n'
    expect_error("DEV-01", 3, resolve_text, tmp_path, body, "d")


@pytest.mark.parametrize(
    "ref",
    [
        "gemm.float<bf16>.with_bias",  # in the domain, but no conformance class (docs/conformance.md Gaps B)
        "conv2d.int8<i16>.no_bias",
        "gemm.float<i8>.no_bias",
        "gemm.float.no_bias",
        "gemm.float<f16>.fused",
        "matmul.float<f16>.no_bias",
    ],
)
def test_unknown_variant_refs(tmp_path, ref):
    # RULE: DEV-10
    body = (
        f"device d extends nem_baseline_1_0 {{\n{TOPOLOGY}\n opcode.extended {{\n {ref}\n }}\n}}\n"
    )
    expect_error("DEV-10", 9, resolve_text, tmp_path, body, "d")


def test_no_baseline_warns(tmp_path):
    # RULE: DEV-21
    must = "\n".join(str(r) for r in load_config_file(BASELINE).catalog.must_refs())
    dev = resolve_text(
        tmp_path,
        f'device d {{\n spec_version = "1.0"\n{TOPOLOGY}\n opcode.mandatory {{\n{must}\n }}\n}}\n',
        "d",
    )
    assert [w.rule for w in dev.warnings] == ["DEV-21"]


def test_unknown_device_name():
    # RULE: DEV-20
    with pytest.raises(NemDiagnosticError) as excinfo:
        resolve_device(load_config_file(BASELINE), "npm_nothing")
    assert diag_of(excinfo).rule == "DEV-20"
