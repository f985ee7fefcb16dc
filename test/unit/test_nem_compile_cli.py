"""`nem-compile` as a command and as `compile_onnx`/`compile_mlir` (issue 16):
its options, `--save-temps` and timings, MLIR input (linalg on tensors, named
ops, constant weights to the sidecar) and its diagnostics: located, with the
exit status the docs give, never a traceback.  The end-to-end runs of models
are test_nem_compile.py."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from compile_runs import BIN, DEVICE, MLIR_MATMUL, tool  # noqa: E402

from nem.compile import CompileError, CompileOptions, compile_mlir, compile_onnx  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402
from nem.runtime.api import NemInterpreter  # noqa: E402


@pytest.mark.slow  # 6 s
def test_cli_dump_after_save_temps_and_timings(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(samples.mlp(), path)
    r = tool(
        "nem-compile",
        str(path),
        "-o",
        str(tmp_path / "out.nem"),
        "--dump-after=tile",
        "--save-temps",
        "-v",
        "--no-pipeline",
        "--engines",
        "1",
    )
    assert r.stdout.startswith("// ----- nem-compile: after tile\n")
    assert "transform.structured" not in r.stdout and "linalg.matmul" in r.stdout
    for stage in ("import", "bufferize", "tile", "lower", "total"):
        assert f"nem-compile: {stage:<10}" in r.stderr
    # each stage's time as it ends, the lowering's passes too, before the remarks
    err = r.stderr
    assert (
        err.index("nem-compile: tile ")
        < err.index("nem-compile:   lower/parse")
        < err.index("nem-compile:   lower/nem-synthesize-deps")
        < err.index("nem-compile:   lower/nem-verify")
        < err.index("nem-compile: lower ")
        < err.index("remark: lowered @main to NEM")
        < err.index("nem-compile: total")
    )
    for suffix in (".import.mlir", ".bufferize.mlir", ".tile.mlir"):
        assert (tmp_path / f"out{suffix}").is_file()
    assert "linalg.matmul" in (tmp_path / "out.import.mlir").read_text()
    assert "memref<4x64xf32>" in (tmp_path / "out.bufferize.mlir").read_text()
    assert "max_in_flight" not in (tmp_path / "out.nem").read_text()
    with np.load(tmp_path / "out.weights.npz") as npz:
        assert sorted(npz.files) == sorted(["fc1_w", "fc1_b", "fc2_w", "fc2_b", "fc3_w", "fc3_b"])


@pytest.mark.slow  # 5 s
def test_cli_unsupported_op_is_located(tmp_path):
    g = samples.GraphBuilder("f32")
    y = g.op("Hardmax", ["x"], name="hm")
    path = tmp_path / "bad.onnx"
    onnx.save(g.model("bad", {"x": (2, 3)}, {"y": y}), path)
    r = tool("nem-compile", str(path), ok=False)
    assert r.returncode == 1
    assert r.stderr.startswith(
        f"{path}: node 0 'hm' (Hardmax): error: not supported: op "
        "type Hardmax\nfix: express it with the supported op types "
    )
    assert "Traceback" not in r.stderr
    assert "nem-compile: failed in stage 'import'" in r.stderr


@pytest.mark.parametrize(
    "body,upstream_says",
    [
        # an op of an unregistered dialect in linalg.map's short form: LLVM ERROR
        (
            "%e = tensor.empty() : tensor<4xf32>\n"
            "  %y = linalg.map { f16df } ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>)\n",
            "LLVM ERROR: .f16df created with unregistered dialect",
        ),
        # a 2^63 dilation: an assertion in upstream's op verifier
        (
            "%k = tensor.empty() : tensor<2x2xf32>\n  %y = arith.negf %x : tensor<4xf32>\n"
            "  %p = tensor.empty() : tensor<1x4x4x1xf32>\n  %o = tensor.empty() : tensor<1x2x2x1xf32>\n"
            "  %q = linalg.pooling_nhwc_max {dilations = dense<9223372036854775807> : vector<2xi64>, "
            "strides = dense<2> : vector<2xi64>} ins(%p, %k : tensor<1x4x4x1xf32>, tensor<2x2xf32>) "
            "outs(%o : tensor<1x2x2x1xf32>) -> tensor<1x2x2x1xf32>\n",
            "Assertion",
        ),
    ],
)
@pytest.mark.slow  # 4 s (2 cases)
def test_cli_upstream_abort_is_an_import_error(tmp_path, body, upstream_says):
    """Upstream MLIR aborts on these (fuzz campaign 2026-11-26); nem-compile
    parses in a forked child first (D-LOW-UPSTREAM) and reports it."""
    path = tmp_path / "bad.mlir"
    path.write_text(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  "
        + body
        + "  return %y : tensor<4xf32>\n}\n"
    )
    r = tool("nem-compile", str(path), ok=False)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(
        f"{path}:1:1: error: not supported: upstream MLIR aborted "
        "(SIGABRT) while parsing the module: "
    ), r.stderr
    assert upstream_says in r.stderr
    assert "nem-compile: failed in stage 'import'" in r.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["--tile-sizes", "0,4"], "--tile-sizes expects positive integers"),
        # hostile8: checked before any work, with the tool's prefix (were a bare line and an
        # unprefixed `error:` of a failed stage, which the fuzz harness calls unlocated)
        (
            ["--engines", "9"],
            "nem-compile: error: --engines 9: device npm_pro_x1 has 4 engine(s); "
            "give N from 1 to 4\n",
        ),
        (["--device", "npm_nope"], "nem-compile: error: device 'npm_nope' not found [DEV-20]\n"),
        (["-o", "no/such/dir/x.nemb"], "-o: cannot write 'no/such/dir/x.nemb': directory"),
    ],
)
@pytest.mark.slow  # 6 s (4 cases)
def test_cli_bad_options(tmp_path, args, message):
    path = tmp_path / "mlp.onnx"
    onnx.save(samples.mlp(), path)
    r = tool("nem-compile", str(path), *args, ok=False)
    assert r.returncode in (1, 2)
    assert message in r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


@pytest.mark.slow  # 7 s
def test_cli_onnx_front_end_exit_statuses(tmp_path):
    """Outside report, findings 1 and 5: an invalid model (Add of f32 and
    f16) is a located diagnostic, exit 1, not an internal error (exit 2);
    `--tile-sizes -1,2` reaches the tool's check (exit 2), where argparse
    said 'expected one argument'."""
    h = onnx.helper
    g = h.make_graph(
        [h.make_node("Add", ["a", "b"], ["y"], name="add")],
        "g",
        [
            h.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [3]),
            h.make_tensor_value_info("b", onnx.TensorProto.FLOAT16, [3]),
        ],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])],
    )
    path = tmp_path / "mixed.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    r = tool("nem-compile", str(path), "-o", str(tmp_path / "m.nem"), ok=False)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(
        f"{path}: node 0 'add' (Add): error: inputs have different element types: 'a' f32, 'b' f16"
    ), r.stderr
    assert "\nfix: " in r.stderr and "internal error" not in r.stderr
    for sizes in (["--tile-sizes", "-1,2"], ["--tile-sizes=-1,2"], ["--tile-sizes", "-3"]):
        r = tool("nem-compile", str(path), *sizes, ok=False)
        assert r.returncode == 2, r.stderr
        value = sizes[-1].removeprefix("--tile-sizes=")
        assert (
            r.stderr == f"nem-compile: error: --tile-sizes expects positive integers, "
            f"got '{value}'\n"
        )


def test_cli_missing_input_and_bad_suffix(tmp_path):
    r = tool("nem-compile", str(tmp_path / "none.onnx"), ok=False)
    assert r.returncode == 1 and "none.onnx': No such file or directory" in r.stderr
    (tmp_path / "m.txt").write_text("x")
    r = tool("nem-compile", str(tmp_path / "m.txt"), ok=False)
    assert r.returncode == 2 and "expected a .onnx model or .mlir" in r.stderr


def test_cli_says_when_the_mlir_extra_is_missing(tmp_path):
    """Without the bindings, one clear line and exit 1 (simulated by hiding them)."""
    code = (
        "import sys, importlib.util as u; real = u.find_spec\n"
        "u.find_spec = lambda n, *a: None if n.split('.')[0] == 'mlir' else real(n, *a)\n"
        "from nem.cli.nem_compile import main; main(sys.argv[1:])"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m.onnx")], capture_output=True, text=True
    )
    assert r.returncode == 1
    assert "needs the upstream MLIR Python bindings (the 'mlir' extra)" in r.stderr


def test_an_internal_error_names_its_stage_and_the_options_that_may_avoid_it(tmp_path):
    """A bug in a stage (simulated: the tile stage's fill-tile sharing
    raises) is one line, exit 2, no traceback, with notes: the stage and the
    model, and the options that turn one transformation off (an outside
    user, session 61: the crash named neither, and `--no-share-staged`
    avoided it)."""
    onnx.save(samples.mlp(), tmp_path / "m.onnx")
    code = (
        "import sys; from nem.compile import fill_tiles\n"
        "def boom(fn): raise RuntimeError('the operation has been invalidated')\n"
        "fill_tiles.share_fill_tiles = boom\n"
        "from nem.cli.nem_compile import main; main(sys.argv[1:])"
    )
    args = [str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.nemb"), "--no-progress"]
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [
        "nem-compile: internal error: RuntimeError: the operation has been invalidated",
        f"note: in nem-compile's stage 'tile', compiling {tmp_path / 'm.onnx'}",
        "note: options that turn one transformation off may avoid it: --engines 1, "
        "--no-pipeline, --no-split-transfers, --no-pad-in-place, --no-fuse, --no-fuse-chains, "
        "--no-share-staged, or the other tiling route: --route affine",
        "This is a bug in nem-compile; rerun with NEM_TRACEBACK=1 for the traceback.",
    ]


@pytest.mark.slow  # 5 s
def test_mlir_input(tmp_path):
    src = tmp_path / "mm.mlir"
    src.write_text(MLIR_MATMUL)
    tool("nem-compile", str(src), "-o", str(tmp_path / "mm.nem"), "--tile-sizes", "4")
    text = (tmp_path / "mm.nem").read_text()
    assert "buffer a : DDR" in text and "buffer result0 : DDR" in text
    rng = np.random.default_rng(0)
    a, b = (
        rng.uniform(-1, 1, (16, 32)).astype(np.float32),
        rng.uniform(-1, 1, (32, 8)).astype(np.float32),
    )
    it = NemInterpreter(device=DEVICE)
    it.load(tmp_path / "mm.nem")
    it.write_tensor("a", a)
    it.write_tensor("b", b)
    assert it.run().status == "completed"
    np.testing.assert_allclose(
        it.read_tensor("result0", (16, 8), np.float32), a @ b, rtol=1e-5, atol=1e-5
    )


MLIR_NAMED = """
func.func @main(%x: tensor<2x8x16xf32>, %w: tensor<2x16x4xf32>, %b: tensor<4xf32>) -> tensor<2x8xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %m = linalg.batch_matmul ins(%x, %w : tensor<2x8x16xf32>, tensor<2x16x4xf32>)
      outs(%f : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %eb = tensor.empty() : tensor<2x8x4xf32>
  %bb = linalg.broadcast ins(%b : tensor<4xf32>) outs(%eb : tensor<2x8x4xf32>) dimensions = [0, 1]
  %e2 = tensor.empty() : tensor<2x8x4xf32>
  %s = linalg.add ins(%m, %bb : tensor<2x8x4xf32>, tensor<2x8x4xf32>) outs(%e2 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %er = tensor.empty() : tensor<2x8xf32>
  %fr = linalg.fill ins(%z : f32) outs(%er : tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = linalg.reduce ins(%s : tensor<2x8x4xf32>) outs(%fr : tensor<2x8xf32>) dimensions = [2]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  return %r : tensor<2x8xf32>
}
"""


@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.slow  # 4 s (2 cases)
def test_named_linalg_ops_on_tensors(route):
    """linalg on tensors with named ops a front end writes (batch_matmul,
    broadcast, add, reduce) compiles on both routes; on the transform route
    `linalg.broadcast` and `linalg.reduce` keep the `memref.cast`s promotion
    puts on their operands, so they are generalized before tiling, as
    `linalg.transpose` is (it was "not supported: the tiled program does not
    parse in xDSL")."""
    result = compile_mlir(MLIR_NAMED, CompileOptions(device=DEVICE, route=route))
    rng = np.random.default_rng(4)
    x, w = rng.uniform(-1, 1, (2, 8, 16)), rng.uniform(-1, 1, (2, 16, 4))
    b = rng.uniform(-1, 1, 4)
    it = NemInterpreter(device=DEVICE)
    it.load_string(result.nem, file="m.nem")
    for name, v in (("x", x), ("w", w), ("b", b)):
        it.write_tensor(name, v.astype(np.float32))
    assert it.run().status == "completed"
    want = ((x.astype(np.float32) @ w.astype(np.float32)) + b.astype(np.float32)).sum(-1)
    np.testing.assert_allclose(
        it.read_tensor("result0", (2, 8), np.float32), want, rtol=1e-5, atol=1e-5
    )


MLIR_CONST_WEIGHTS = """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w = arith.constant dense<[[1.0, -2.0, 0.5, 0.25], [3.0, 1.5, -1.0, 2.0], [0.5, 0.5, 0.5, 0.5],
    [-1.0, 1.0, -1.0, 1.0], [2.0, 0.0, 1.0, -3.0], [1.0, 1.0, 1.0, 1.0], [0.0, 2.0, 0.0, 2.0],
    [-0.5, 0.25, 1.0, 0.0], [1.0, -2.0, 0.5, 0.25], [3.0, 1.5, -1.0, 2.0], [0.5, 0.5, 0.5, 0.5],
    [-1.0, 1.0, -1.0, 1.0], [2.0, 0.0, 1.0, -3.0], [1.0, 1.0, 1.0, 1.0], [0.0, 2.0, 0.0, 2.0],
    [-0.5, 0.25, 1.0, 0.0]]> : tensor<16x4xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x4xf32>) outs(%f : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %m : tensor<8x4xf32>
}
"""


@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.slow  # 15 s (2 cases)
def test_mlir_constant_weights_go_to_the_sidecar(tmp_path, route):
    """A constant tensor of the `.mlir` input (`arith.constant dense`, a
    `memref.global` once bufferized) is a weight of the interface
    (D-COMPILE-CONSTS): `nem-compile` writes it to STEM.weights.npz, embeds
    it in a `.nemb`, and the run matches numpy (it was "pass weights=FILE.npz
    to lower-to-nem", an option nem-compile has no way to pass; and the
    transform route's tile planning copied the function without its globals:
    "'memref.get_global' op ... does not reference a valid global memref")."""
    src = tmp_path / "cw.mlir"
    src.write_text(MLIR_CONST_WEIGHTS)
    r = tool("nem-compile", str(src), "--route", route, "-o", str(tmp_path / "cw.nem"), "-v")
    assert "weights:" in r.stderr and "cw.weights.npz" in r.stderr, r.stderr
    with np.load(tmp_path / "cw.weights.npz") as npz:
        (name,) = npz.files
        w = npz[name]
    assert w.shape == (16, 4) and w[1, 1] == 1.5
    x = np.random.default_rng(5).uniform(-1, 1, (8, 16)).astype(np.float32)
    for prog in ("nem", "nemb"):
        if prog == "nemb":
            tool("nem-compile", str(src), "--route", route, "-o", str(tmp_path / "cw.nemb"))
        it = NemInterpreter(device=DEVICE)
        it.load(tmp_path / f"cw.{prog}")
        if prog == "nem":
            it.write_tensor(name, w)
        it.write_tensor("x", x)
        assert it.run().status == "completed"
        np.testing.assert_allclose(
            it.read_tensor("result0", (8, 4), np.float32), x @ w, rtol=1e-5, atol=1e-5
        )


def test_api_errors():
    with pytest.raises(CompileError) as e:
        compile_mlir("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> { return %y }")
    assert e.value.stage == "import"
    with pytest.raises(CompileError, match="unknown route"):
        compile_onnx(samples.mlp(), CompileOptions(route="magic"))


@pytest.mark.slow  # 5 s
def test_the_run_line_pastes_into_a_shell(tmp_path):
    """`nem-compile -v`'s `weights:` and `run:` lines are commands to paste
    (an outside user, session 66): a file name with a space was split into
    two arguments, and `-m.onnx` gave `nem-run -m.nem --input
    -m.weights.npz`, which argparse reads as options.  Each word is quoted
    now, a path starting with `-` written `./-m.nem`, and the pasted line
    runs."""
    import shlex

    onnx.save(samples.mlp(), tmp_path / "-my model.onnx")
    r = subprocess.run(
        [str(BIN / "nem-compile"), "-my model.onnx", "-v"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    lines = {
        ln.split(": ", 1)[0]: ln.split(": ", 1)[1]
        for ln in r.stderr.splitlines()
        if ln.startswith(("weights: ", "run: "))
    }
    weights = lines["weights"].split("; ", 1)[1].removesuffix(")")
    assert shlex.split(weights) == [
        "nem-run",
        "./-my model.nem",
        "--input",
        "./-my model.weights.npz",
    ]
    run = shlex.split(lines["run"])
    assert run[:4] == [*shlex.split(weights)[:2], "--input", "./-my model.weights.npz"], run
    np.save(tmp_path / "x.npy", np.zeros((4, 64), np.float32))
    ran = subprocess.run(
        [str(BIN / "nem-run"), *run[1:]], capture_output=True, text=True, cwd=tmp_path
    )
    assert ran.returncode == 0 and (tmp_path / "y.npy").exists(), ran.stderr
