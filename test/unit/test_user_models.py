"""Outsider acceptance (issues 16 and 12: "models written by someone else will
be compiled and run the same way"): the models of `user_models.py`, written
from README.md and docs/compile.md alone, go through the documented chain

    nem-compile model.onnx --device D -o m.nem        (+ m.weights.npz)
    nem-opt m.nem -p nem-verify                        (no error, no warning)
    nem-run m.nem --input m.weights.npz --input x=x.npy --output y=y.npy --schedules 2
    python -m nem.compile.check model.onnx --input x=x.npy --output y=y.npy   (D-COMPILE-TOL)

The tools run in-process through their `main` functions (the installed
commands are those functions; one test runs the real commands), which keeps
the default set fast enough for CI: every model once on npm_pro_x1 (f32
and f16 alternating), the transform route and `.nemb` output once each.
`NEM_USER_MODELS=full` runs every model in f32 and f16 on npm_pro_x1,
npm_lite, npm_mid and npm_pro (f32 runs on the last three as escape-hatch
kernels where they have no f32 variant), and the transform route and `.nemb`
output for every model (about ten minutes).

Also the regression tests of what an outsider hit: the diagnostics of
`nem.compile.check` and of `nem-compile` on `.mlir` input upstream cannot
bufferize or parse.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from user_models import MODELS, input_array  # noqa: E402

from nem.cli import nem_compile, nem_opt, nem_run  # noqa: E402
from nem.compile import check  # noqa: E402

FULL = os.environ.get("NEM_USER_MODELS") == "full"
BIN = Path(sys.executable).parent


def run_main(main: Callable[..., object], *args: str) -> tuple[int, str, str]:
    """A tool's `main(argv)` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code
    return int(code or 0), out.getvalue(), err.getvalue()


def ok(main: Callable[..., object], *args: str) -> tuple[str, str]:
    code, out, err = run_main(main, *args)
    assert code == 0, f"{main.__module__} {' '.join(args)} -> {code}\n{out}\n{err}"
    return out, err


def chain(
    tmp_path: Path,
    model: onnx.ModelProto,
    device: str,
    compile_args: tuple[str, ...] = (),
    suffix: str = ".nem",
) -> None:
    """The documented chain on one model (one input `x`, one output `y`);
    fails on any error, warning, race, schedule-dependent result or mismatch
    with onnxruntime."""
    src, x = tmp_path / "model.onnx", tmp_path / "x.npy"
    onnx.save(model, src)
    np.save(x, input_array(model)[1])
    prog = tmp_path / f"m{suffix}"
    ok(
        nem_compile.main,
        str(src),
        "--device",
        device,
        "-o",
        str(prog),
        "--no-progress",
        *compile_args,
    )
    run = [
        str(prog),
        "--input",
        f"x={x}",
        "--output",
        f"y={tmp_path / 'y.npy'}",
        "--schedules",
        "2",
        "-j",
        "1",
    ]
    if suffix == ".nem":
        _, err = ok(nem_opt.main, str(prog), "-p", "nem-verify", "-o", os.devnull)
        assert err == "", err  # no warning either
        if (tmp_path / "m.weights.npz").exists():
            run += ["--input", str(tmp_path / "m.weights.npz")]
    else:
        run += ["--device", device]
    out, _ = ok(nem_run.main, *run)
    assert "races: 0 distinct" in out and "identical across all schedules" in out, out
    out, _ = ok(check.main, str(src), "--input", f"x={x}", "--output", f"y={tmp_path / 'y.npy'}")
    assert out.rstrip().endswith(": OK"), out


# The default set (CI, about a minute on a quiet 2-core machine): every model
# once, the element types alternating; the transform route and .nemb once each.
DEFAULT = [
    ("mobilenet_block", "f16"),
    ("unet_block", "f32"),
    ("gated_mlp", "f16"),
    ("attention", "f32"),
    ("eltwise_mix", "f16"),
    ("grouped_cnn", "f32"),
]
BOTH = [(n, d) for n in MODELS for d in ("f32", "f16")]
DEVICES = ("npm_pro_x1", "npm_lite", "npm_mid", "npm_pro")


@pytest.mark.parametrize(
    "name,dtype,device",
    [(n, d, dev) for n, d in BOTH for dev in DEVICES]
    if FULL
    else [(n, d, "npm_pro_x1") for n, d in DEFAULT],
)
@pytest.mark.slow  # 24 s (6 cases)
def test_user_model(tmp_path, name, dtype, device):
    chain(tmp_path, MODELS[name](dtype), device)


@pytest.mark.parametrize("name,dtype", BOTH if FULL else [("mobilenet_block", "f32")])
@pytest.mark.slow  # 8 s
def test_user_model_transform_route(tmp_path, name, dtype):
    chain(tmp_path, MODELS[name](dtype), "npm_pro_x1", ("--route", "transform"))


@pytest.mark.parametrize("name,dtype", BOTH if FULL else [("gated_mlp", "f16")])
@pytest.mark.slow  # 9 s
def test_user_model_nemb(tmp_path, name, dtype):
    chain(tmp_path, MODELS[name](dtype), "npm_pro_x1", suffix=".nemb")


@pytest.mark.slow  # 10 s
def test_installed_commands(tmp_path):
    """The same chain through the installed commands, as the docs write it."""
    model = MODELS["unet_block"]("f16")
    onnx.save(model, tmp_path / "u.onnx")
    np.save(tmp_path / "x.npy", input_array(model)[1])

    def tool(*args: str) -> subprocess.CompletedProcess:
        r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, f"{args}:\n{r.stdout}\n{r.stderr}"
        return r

    tool(str(BIN / "nem-compile"), "u.onnx", "--device", "npm_lite", "-o", "u.nem", "--no-progress")
    assert tool(str(BIN / "nem-opt"), "u.nem", "-p", "nem-verify", "-o", os.devnull).stderr == ""
    tool(
        str(BIN / "nem-run"),
        "u.nem",
        "--input",
        "u.weights.npz",
        "--input",
        "x=x.npy",
        "--output",
        "y=y.npy",
        "--schedules",
        "2",
    )
    r = tool(
        sys.executable,
        "-m",
        "nem.compile.check",
        "u.onnx",
        "--input",
        "x=x.npy",
        "--output",
        "y=y.npy",
    )
    assert r.stdout.rstrip().endswith(": OK"), r.stdout


# ---------------------------------------------------------------------------
# Regression tests: what the outsider hit.


@pytest.fixture
def mobilenet(tmp_path):
    model = MODELS["mobilenet_block"]("f32")
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", input_array(model)[1])
    np.save(tmp_path / "bad.npy", np.zeros(5, np.float32))
    return tmp_path


@pytest.mark.parametrize(
    "args,message",
    [
        # an output nem-run did not write (it failed): was a FileNotFoundError traceback
        (
            ["--input", "x=x.npy", "--output", "y=missing.npy"],
            "check: error: --output y=missing.npy: cannot read 'missing.npy': No such file or "
            "directory",
        ),
        (
            ["--input", "x=x.npy", "--output", "y=bad.npy"],
            "check: error: --output y=bad.npy: shape [5] does not match output 'y' "
            "(f32[2,12,17,13])",
        ),
        (
            ["--input", "x=x.npy", "--output", "z=bad.npy"],
            "check: error: --output z: the model has no output 'z' (outputs: y)",
        ),
        (["--input", "q=x.npy"], "check: error: --input q: the model has no input 'q' (inputs: x)"),
        (
            ["--input", "x=bad.npy", "--output", "y=missing.npy"],
            "check: error: onnxruntime cannot run m.onnx: ",
        ),
    ],
)
def test_check_bad_files_are_one_line_errors(mobilenet, monkeypatch, args, message):
    monkeypatch.chdir(mobilenet)
    code, out, err = run_main(check.main, "m.onnx", *args)
    assert code == 2 and err.startswith(message) and "Traceback" not in err, err


def test_check_missing_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(check.main, "nope.onnx")
    assert code == 2 and err.startswith("check: error: nope.onnx: cannot read the model"), err


SIN_ON_TENSORS = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = math.sin %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


def test_mlir_input_upstream_cannot_bufferize(tmp_path):
    """Valid MLIR that one-shot-bufferize refuses (math.sin on a tensor) was
    "nem-compile: internal error: MLIRError ..." (exit 2); it is the user's
    input, located in it, in stage 'bufferize'."""
    (tmp_path / "sin.mlir").write_text(SIN_ON_TENSORS)
    code, _, err = run_main(
        nem_compile.main,
        str(tmp_path / "sin.mlir"),
        "-o",
        str(tmp_path / "sin.nem"),
        "--no-progress",
    )
    assert code == 1, err
    assert f"{tmp_path / 'sin.mlir'}:2:8: error: op was not bufferized" in err, err
    assert "internal error" not in err and "failed in stage 'bufferize'" in err, err


def test_mlir_parse_error_names_the_file(tmp_path):
    """Upstream's parse error said `"-":2:8`; it names the input file."""
    (tmp_path / "bad.mlir").write_text(SIN_ON_TENSORS.replace("math.sin", "foo.bar"))
    code, _, err = run_main(
        nem_compile.main,
        str(tmp_path / "bad.mlir"),
        "-o",
        str(tmp_path / "bad.nem"),
        "--no-progress",
    )
    assert code == 1 and f"{tmp_path / 'bad.mlir'}:2:8: error: Dialect `foo' not found" in err, err
    assert '"-"' not in err, err


def test_compile_mlir_api_raises_compile_error():
    """The Python API raised mlir's MLIRError (a traceback) on the same input."""
    from nem.compile import CompileError, compile_mlir

    with pytest.raises(CompileError) as e:
        compile_mlir(SIN_ON_TENSORS)
    assert e.value.stage == "bufferize" and "<mlir>:2:8: error: op was not bufferized" in str(
        e.value
    )


def test_nem_run_unknown_input_name_is_not_quoted(tmp_path):
    """`nem-run --input NAME=x.npy` with a name the program lacks printed the
    KeyError's repr: `"no buffer or region named ..."` in quotes."""
    prog = tmp_path / "p.nem"
    prog.write_text("buffer X : L2 (size=16)\n")
    np.save(tmp_path / "x.npy", np.zeros(4, np.float32))
    code, _, err = run_main(nem_run.main, str(prog), "--input", f"q={tmp_path / 'x.npy'}")
    assert code == 2, err
    assert err.startswith(
        f"nem-run: error: --input q={tmp_path / 'x.npy'}: no buffer or region named 'q' (known: X)"
    ), err


def test_verbose_prints_the_interface_and_a_run_line(tmp_path, monkeypatch):
    """An outsider cannot guess sanitized buffer names (docs/compile.md said
    `input.1` -> `input_1`; it is `input1`) nor get the model's output shape
    from `--output y=y.npy` (a buffer's flat elements): `nem-compile -v`
    lists the interface and a nem-run line, which runs as printed."""
    monkeypatch.chdir(tmp_path)
    h = onnx.helper
    graph = h.make_graph(
        [h.make_node("Add", ["input.1", "x:0"], ["s"]), h.make_node("Relu", ["s"], ["out.a"])],
        "g",
        [h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [3, 5]) for n in ("input.1", "x:0")],
        [h.make_tensor_value_info("out.a", onnx.TensorProto.FLOAT, [3, 5])],
    )
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), "two.onnx")
    _, err = ok(nem_compile.main, "two.onnx", "-o", "two.nem", "-v", "--no-progress")
    lines = [ln for ln in err.splitlines() if ln.startswith(("input:", "output:", "run:"))]
    assert lines == [
        "input: input1 f32[3,5] (ONNX 'input.1')",
        "input: x0 f32[3,5] (ONNX 'x:0')",
        "output: out_a f32[3,5] (ONNX 'out.a')",
        "run: nem-run two.nem --input input1=input1.npy --input x0=x0.npy "
        "--output 'out_a:f32[3,5]=out_a.npy'",
    ], err
    a, b = np.arange(15, dtype=np.float32).reshape(3, 5) - 7, np.ones((3, 5), np.float32)
    np.save("input1.npy", a)
    np.save("x0.npy", b)
    args = [arg.strip("'") for arg in lines[-1].split()[2:]]  # after "run: nem-run"
    ok(nem_run.main, *args)
    np.testing.assert_array_equal(np.load("out_a.npy"), np.maximum(a + b, 0))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_matmul_of_two_vectors(tmp_path, dtype):
    """MatMul of two 1-D operands (docs/compile.md: "1-D operands") gives a
    scalar; the importer's reshape to rank 0 was an invalid
    `tensor.expand_shape` ("internal error: MLIRError: Verification failed")."""
    h, elem = onnx.helper, onnx.TensorProto.FLOAT if dtype == "f32" else onnx.TensorProto.FLOAT16
    v = onnx.numpy_helper.from_array(
        np.linspace(-1, 1, 6).astype(np.float32 if dtype == "f32" else np.float16), "v"
    )
    graph = h.make_graph(
        [h.make_node("MatMul", ["x", "v"], ["y"])],
        "dot",
        [h.make_tensor_value_info("x", elem, [6])],
        [h.make_tensor_value_info("y", elem, [])],
        initializer=[v],
    )
    chain(tmp_path, h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), "npm_pro_x1")


def test_depthwise_conv_partial_row_tile(tmp_path):
    """A depthwise Conv with pads whose row tiles do not divide the rows
    (17 rows in tiles of 5; a plain Conv of the same shape compiled): the
    lowering stopped with "this strided DMA of a partial tile cannot be
    narrowed to 1 rows of 480 of 840 elements: another access to ... may use
    the elements left out" (as did the L1-derived tiles of a [1, 32, 113, 113]
    f16 depthwise Conv on npm_lite), until main's partial-tile work of
    2026-11-27; kept as the outsider's regression test."""
    h = onnx.helper
    w = onnx.numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((8, 1, 3, 3)).astype(np.float32), "w"
    )
    graph = h.make_graph(
        [h.make_node("Conv", ["x", "w"], ["y"], group=8, pads=[1, 1, 1, 1])],
        "dw",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 8, 17, 13])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 8, 17, 13])],
        initializer=[w],
    )
    chain(
        tmp_path,
        h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]),
        "npm_pro_x1",
        ("--tile-sizes", "1,5"),
    )


def test_mlir_dynamic_signature_is_located_in_the_input(tmp_path):
    """A dynamic dimension in the entry's signature was reported at
    `dyn.tile.mlir:2:3` (a file the user does not have) in stage 'lower'
    with "fix: tile with static sizes"; it is an import error at the
    function in the user's file."""
    src = tmp_path / "dyn.mlir"
    src.write_text(
        "func.func @f(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {\n  return %x : tensor<?x4xf32>\n}\n"
    )
    code, _, err = run_main(
        nem_compile.main, str(src), "-o", str(tmp_path / "dyn.nem"), "--no-progress"
    )
    assert code == 1 and err.startswith(
        f"{src}:1:1: error: not supported: dynamic shape tensor<?x4xf32> in the signature of "
        "@f: NEM buffers have static sizes"
    ), err
    assert "failed in stage 'import'" in err, err


def test_lowering_error_says_where_its_file_is(tmp_path):
    """The lowering's diagnostics name STEM.tile.mlir, written only with
    --save-temps: a failed compile says so."""
    src = tmp_path / "wide.mlir"
    src.write_text(
        "func.func @f(%x: tensor<4xi64>) -> tensor<4xi64> {\n  return %x : tensor<4xi64>\n}\n"
    )
    out = tmp_path / "wide.nem"
    code, _, err = run_main(nem_compile.main, str(src), "-o", str(out), "--no-progress")
    assert code == 1 and f"{tmp_path / 'wide.tile.mlir'}:" in err, err
    assert err.rstrip().endswith(
        f"the lowering's locations are in {tmp_path / 'wide.tile.mlir'}, "
        "the tiled program: rerun with --save-temps to write it"
    ), err
    code, _, err = run_main(
        nem_compile.main, str(src), "-o", str(out), "--no-progress", "--save-temps"
    )
    assert code == 1 and (tmp_path / "wide.tile.mlir").exists() and "rerun" not in err, err


def test_stdout_output_keeps_the_weights(tmp_path):
    """`nem-compile model.onnx -o -` printed the program and dropped the
    weights without a word: the program could not be run."""
    onnx.save(MODELS["gated_mlp"]("f32"), tmp_path / "g.onnx")
    out, err = ok(nem_compile.main, str(tmp_path / "g.onnx"), "-o", "-", "--no-progress")
    assert out.startswith('include "npm_pro_x1.nem"'), out[:200]
    weights = tmp_path / "g.weights.npz"
    assert err == f"nem-compile: weights written to {weights}\n", err
    assert set(np.load(weights).files) >= {"w1", "b1", "wu", "w2"}
