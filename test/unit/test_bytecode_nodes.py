"""The ONNX node of each instruction in a `.nemb` (D-BC-NODES, format 1.2):
the writer keeps `fused[FILE:LINE:COL, NODE]` locations in `Debug.nodes`,
the reader gives them back (diagnostics keep the file position), a damaged
origin is a located error, and `nem-compile -o FILE.nemb` makes `nem-run
--roofline` group a compiled model by ONNX node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xdsl.dialects.builtin import FileLineColLoc, FusedLoc, NoneAttr

from nem.dialect.diagnostics import SourceLoc
from nem.frontends.bytecode.container import BytecodeError, read_header
from nem.frontends.bytecode.reader import read_nemb
from nem.frontends.bytecode.writer import write_nemb
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import printed_statements
from nem.frontends.upstream_dialects.mlir_input import parse_location

REPO = Path(__file__).resolve().parents[2]
NODE = 'loc("conv1"("Conv"("m.onnx":3:1)))'


def _located(text: str, file: str = "p.nem"):
    module = parse_nem(text, file)
    first = next(iter(printed_statements(module)))
    first.location = FusedLoc([first.location, parse_location(NODE)], NoneAttr())
    return module, first


def test_a_node_survives_the_round_trip_and_the_file_position_stays():
    text = (REPO / "examples" / "conv2d_relu.nem").read_text()
    module, first = _located(text)
    data = write_nemb(module)
    assert read_header(data).minor == 2
    back = read_nemb(data, "p.nemb").module
    ops = list(printed_statements(back))
    loc = ops[0].location
    assert isinstance(loc, FusedLoc)
    assert str(loc.locations.data[1]) == NODE
    assert SourceLoc.of(ops[0]) == SourceLoc.of(first)  # diagnostics: the .nem line
    assert all(isinstance(o.location, FileLineColLoc) for o in ops[1:])


def test_without_nodes_the_format_is_unchanged():
    text = (REPO / "examples" / "conv2d_relu.nem").read_text()
    data = write_nemb(parse_nem(text, "p.nem"))
    assert read_header(data).minor < 2


def test_a_damaged_origin_is_a_located_error():
    text = (REPO / "examples" / "conv2d_relu.nem").read_text()
    module, _ = _located(text)
    data = write_nemb(module)
    bad = data.replace(b'"conv1"("Conv"', b'"conv1"(!Conv"')
    assert bad != data
    from bytecode_corpus import reseal

    with pytest.raises(BytecodeError, match="is not an MLIR location"):
        read_nemb(reseal(bad), "p.nemb")


@pytest.mark.slow  # ~8 s alone (one compile of the cnn sample, one timed run)
def test_a_compiled_nemb_reports_by_onnx_node(tmp_path, capsys):
    pytest.importorskip("mlir.ir")
    onnx = pytest.importorskip("onnx")
    from nem.cli.nem_compile import run as compile_run
    from nem.cli.nem_run import run as nem_run
    from nem.frontends.onnx import samples

    model = tmp_path / "cnn.onnx"
    onnx.save(samples.cnn("f32"), str(model))
    out = tmp_path / "cnn.nemb"
    assert compile_run([str(model), "-o", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    nem_run([str(out), "--mode", "timed", "--roofline", "--json"])
    report = json.loads(capsys.readouterr().out)
    names = [g["name"] for g in report["groups"]]
    # conv1_relu runs on conv1's tiles in L1 (D-COMPILE-FUSE-L1): its tasks are conv1's
    # the input's change of layout a row of its own (D-COMPILE-LAYOUT, `LAYOUT`)
    assert names[:3] == ["layout of 'x'", "node 'conv1' (Conv)", "node 'pool1' (MaxPool)"], names
    assert all(n.startswith("node ") for n in names[1:]), names


@pytest.mark.slow  # ~5 s alone (one compile of the cnn sample)
def test_the_nemb_of_the_verified_program_is_the_nemb_of_its_text(tmp_path):
    """`nemb_bytes` encodes the program nem-verify read back (`Verified`,
    session 50: not the text parsed a third time); the bytes must be those
    of the text parsed again under the output's name, which it falls back
    to once the first call took the verified program."""
    pytest.importorskip("mlir.ir")
    onnx = pytest.importorskip("onnx")
    from nem.cli.nem_compile import nemb_bytes
    from nem.compile import compile_onnx
    from nem.frontends.onnx import samples

    model = tmp_path / "cnn.onnx"
    onnx.save(samples.cnn("f32"), str(model))
    result = compile_onnx(str(model), device="npm_pro_x1")
    assert result.verified is not None
    first = nemb_bytes(result, str(tmp_path / "cnn.nemb"), str(model))
    assert result.verified is None
    again = nemb_bytes(result, str(tmp_path / "elsewhere.nemb"), str(model))
    assert first == again
    program = read_nemb(first, "cnn.nemb").module
    assert all(SourceLoc.of(op).file == "cnn.nemb" for op in printed_statements(program))


def test_origin_with_an_unterminated_string_is_not_a_location():
    """An origin is untrusted text: it is pre-scanned before xDSL's lexer, whose
    string regex backtracks exponentially on an unterminated string (upstream
    report 1, D-XDSL-STRING-LEXER; 40 characters would not finish)."""
    assert parse_location('loc("' + "a" * 40) is None
    assert parse_location('loc("' + "\\a" * 20 + '")') is None
    assert parse_location('loc("conv1")') is not None
