"""The `memory-spaces` option (D-LOW-OPT-SPACES): `parse_spaces` and nem-opt's
quoting of MLIR's unquoted spelling before xDSL parses the pipeline."""

from __future__ import annotations

import subprocess

import pytest
from lowering_runs import INPUTS, tool

from nem.dialect.diagnostics import NemDiagnosticError
from nem.passes.lowering.passes import parse_spaces
from nem.passes.pipeline_spec import quote_option_values


@pytest.mark.parametrize(
    "text",
    [
        "0:DDR,1:L1,2:L1[1]",
        "0-DDR,1-L1,2-L1[1]",
        ("0-DDR", "1-L1", "2-L1[1]"),
        " 0 : DDR , 1:L1,2-L1[1] ",
    ],
)
def test_forms(text):
    assert parse_spaces(text) == {0: "DDR", 1: "L1", 2: "L1[1]"}


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "0:DDR,1:FOO",
            "bad memory-spaces item '1:FOO': 'FOO' is not a memory level (DDR, L2, L1 or L1[k])",
        ),
        ("x:DDR", "bad memory-spaces item 'x:DDR': memory space 'x' is not a non-negative integer"),
        (
            "-1:DDR",
            "bad memory-spaces item '-1:DDR': memory space '-1' is not a non-negative integer",
        ),
        ("0:DDR,0:L2", "bad memory-spaces item '0:L2': memory space 0 is already mapped to DDR"),
        ("0:DDR,,1:L2", "bad memory-spaces item '': expected SPACE:LEVEL, e.g. 1:L2"),
        ("1:L1[x]", "bad memory-spaces item '1:L1[x]': 'L1[x]' is not a memory level"),
        # the one spelling check of levels (attributes.mem_level_error), as the builder's
        (
            "1:L2[1]",
            "bad memory-spaces item '1:L2[1]': 'L2[1]' is not a memory level: only L1 "
            "takes an engine index",
        ),
        ("", "bad memory-spaces value: empty"),
    ],
)
def test_bad_values(text, message):
    with pytest.raises(NemDiagnosticError) as e:
        parse_spaces(text)
    d = e.value.diagnostics[0]
    assert d.message.startswith(message) and "\n" not in d.render()


@pytest.mark.parametrize(
    "spec,want",
    [
        (
            "lower-to-nem{memory-spaces=0:DDR,1:L1 device=x}",
            'lower-to-nem{memory-spaces="0:DDR,1:L1" device=x}',
        ),
        (
            "lower-to-nem{device=x memory-spaces=0:DDR,1:L1[0]}",
            'lower-to-nem{device=x memory-spaces="0:DDR,1:L1[0]"}',
        ),
        ('lower-to-nem{memory-spaces="0:DDR,1:L1"}', 'lower-to-nem{memory-spaces="0:DDR,1:L1"}'),
        ("lower-to-nem{memory-spaces=0-DDR,1-L1}", 'lower-to-nem{memory-spaces="0-DDR,1-L1"}'),
        (
            "convert-affine-to-nem{memory_spaces=0:DDR},nem-verify",
            'convert-affine-to-nem{memory_spaces="0:DDR"},nem-verify',
        ),
        (
            'lower-to-nem{entry="memory-spaces=x" memory-spaces=0:DDR}',
            'lower-to-nem{entry="memory-spaces=x" memory-spaces="0:DDR"}',
        ),
        (
            "lower-to-nem{device=x weights=p3.w.npz remarks=true}",
            'lower-to-nem{device=x weights="p3.w.npz" remarks=true}',
        ),
        ('lower-to-nem{weights="out/w.npz"}', 'lower-to-nem{weights="out/w.npz"}'),
        ("lower-to-nem{entry=weights}", "lower-to-nem{entry=weights}"),
        ("nem-verify", "nem-verify"),
        ("", ""),
    ],
)
def test_quote_option_values(spec, want):
    assert quote_option_values(spec) == want


def test_quote_option_values_names_the_pass():
    with pytest.raises(NemDiagnosticError) as e:
        quote_option_values("nem-verify,convert-affine-to-nem{memory-spaces=0:HBM}")
    assert e.value.diagnostics[0].message.startswith(
        "convert-affine-to-nem: bad memory-spaces item '0:HBM': 'HBM' is not a memory level"
    )


@pytest.mark.parametrize(
    "opt,err",
    [
        (
            "memory-spaces=0:DDR,1:FOO",
            "nem-opt: error: lower-to-nem: bad memory-spaces item '1:FOO': "
            "'FOO' is not a memory level (DDR, L2, L1 or L1[k])\n",
        ),
        (
            "memory-spaces=x:DDR",
            "nem-opt: error: lower-to-nem: bad memory-spaces item 'x:DDR': "
            "memory space 'x' is not a non-negative integer\n",
        ),
    ],
)
@pytest.mark.slow  # 3 s (2 cases)
def test_cli_errors_are_one_line(opt, err):
    r = subprocess.run(
        [
            tool("nem-opt"),
            str(INPUTS / "async_pipeline.mlir"),
            "-p",
            f"lower-to-nem{{{opt} device=npm_pro_x1}}",
            "-t",
            "nem",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(err) and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1


@pytest.mark.slow  # 8 s
def test_cli_unquoted_spelling(tmp_path):
    outs = []
    for opt in (
        "memory-spaces=0:DDR,1:L2,2:L2 device=npm_pro_x1",
        "device=npm_pro_x1 memory-spaces=0:DDR,1:L2,2:L2",
        'device=npm_pro_x1 memory-spaces="0:DDR,1:L2,2:L2"',
        "device=npm_pro_x1 memory-spaces=0-DDR,1-L2,2-L2",
    ):
        r = subprocess.run(
            [
                tool("nem-opt"),
                str(INPUTS / "async_pipeline.mlir"),
                "-p",
                f"lower-to-nem{{{opt}}}",
                "-t",
                "nem",
            ],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert "buffer a : L2 (size=16384, align=64)" in outs[0]
    assert len(set(outs)) == 1
