"""NEM bytecode through the tools (docs/bytecode.md, "Tools"): `nem-opt -t
nemb`, `.nemb` input by extension and by magic number, `--dump-nemb`,
`--embed`, stripping, and `nem-run` binding a `.nemb` file to a device late.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.bytecode.loader import load_nemb
from nem.frontends.bytecode.writer import write_nemb
from nem.frontends.nem_text.parser import parse_nem
from nem.runtime.api import NemInterpreter

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "examples/gemm_bias_relu.nem"

# f32 gemm: gemm.float<f32>.no_bias is in npm_pro's extended set, not in npm_lite's.
F32_GEMM = """\
device "npm_pro.nem"

program f32_gemm:

buffer A : L2 (size=4096, align=64)
buffer B : L2 (size=4096, align=64)
buffer Y : L2 (size=4096, align=64)
Ar = region(A, 0, 4096) elem=f32, shape=[32, 32], layout=MK
Br = region(B, 0, 4096) elem=f32, shape=[32, 32], layout=KN
Yr = region(Y, 0, 4096) elem=f32, shape=[32, 32], layout=MN
t = gemm.sync in Ar, Br out Yr accum_type=f32
"""


def tool(*args: str, cwd: Path | None = None, input: bytes = b""):
    exe = "nem-opt" if args[0] == "opt" else "nem-run"
    return subprocess.run(
        [str(Path(sys.executable).parent / exe), *args[1:]],
        cwd=cwd,
        capture_output=True,
        input=input,
        check=False,
    )


@pytest.mark.slow  # 7 s
def test_nem_to_nemb_to_nem_gives_the_canonical_text(tmp_path):
    out = tmp_path / "g.nemb"
    assert tool("opt", str(GEMM), "-t", "nemb", "-o", str(out)).returncode == 0
    assert out.read_bytes()[:4] == b"NEMB"
    back = tool("opt", str(out), "-t", "nem")
    assert back.returncode == 0, back.stderr
    assert back.stdout == tool("opt", str(GEMM)).stdout
    # by magic number too: any file name, and standard input
    other = tmp_path / "g.bin"
    other.write_bytes(out.read_bytes())
    assert tool("opt", str(other)).stdout == back.stdout
    assert tool("opt", input=out.read_bytes()).stdout == back.stdout
    # -t mlir from bytecode
    assert b'"nem.program"' in tool("opt", str(out), "-t", "mlir", "--print-op-generic").stdout


@pytest.mark.slow  # 3 s
def test_writes_are_deterministic(tmp_path):
    a, b = tmp_path / "a.nemb", tmp_path / "b.nemb"
    tool("opt", str(GEMM), "-t", "nemb", "-o", str(a))
    tool("opt", str(GEMM), "-t", "nemb", "-o", str(b))
    assert a.read_bytes() == b.read_bytes()
    again = tmp_path / "c.nemb"
    tool("opt", str(a), "-t", "nemb", "-o", str(again))
    assert again.read_bytes() == a.read_bytes()


# RULE: DEV-13
@pytest.mark.slow  # 9 s
def test_loading_for_a_device_lacking_a_variant_names_the_variant(tmp_path):
    src = tmp_path / "f32_gemm.nem"
    src.write_text(F32_GEMM)
    nemb = tmp_path / "f32_gemm.nemb"
    assert tool("opt", str(src), "-t", "nemb", "-o", str(nemb)).returncode == 0
    ok = tool("run", str(nemb), "--device", "npm_pro", "--no-progress")
    assert ok.returncode == 0, ok.stderr
    bad = tool("run", str(nemb), "--device", "npm_lite", "--no-progress")
    assert bad.returncode == 1
    err = bad.stderr.decode()
    assert "gemm.float<f32>.no_bias" in err and "npm_lite" in err and "[DEV-13]" in err
    # at the task's line, from the Debug section, as for the .nem text (was 1:1)
    assert err.startswith(f"{src}:11:1: error: the program uses gemm as"), err
    stripped = tmp_path / "stripped.nemb"
    assert tool("opt", str(src), "-t", "nemb", "--strip-debug", "-o", str(stripped)).returncode == 0
    no_debug = tool("run", str(stripped), "--device", "npm_lite", "--no-progress").stderr.decode()
    assert no_debug.startswith("nem-run: error: the program uses gemm as"), no_debug
    assert "Traceback" not in err
    # the same through the API, and in the dump
    with pytest.raises(NemDiagnosticError, match=r"gemm.float<f32>.no_bias"):
        NemInterpreter(device="npm_lite").load(nemb)
    dump = tool("opt", str(nemb), "--dump-nemb", "--device", "npm_lite").stdout.decode()
    assert "variant: gemm: one of gemm.float<f32>.no_bias" in dump
    assert "on device 'npm_lite': 1 problem(s)" in dump


@pytest.mark.slow  # 7 s
def test_dump_lists_sections_capabilities_and_relocations(tmp_path):
    out = tmp_path / "g.nemb"
    tool("opt", str(GEMM), "-t", "nemb", "-o", str(out))
    dump = tool("opt", str(out), "--dump-nemb", "--device", "npm_lite").stdout.decode()
    for needle in (
        "NEM bytecode 1.0",
        "CRC-32",
        "build: nem-toolchain",
        "sections:",
        "Code          yes",
        "Debug         no",
        "requires:",
        "opcodes: relu (1), gemm (20)",
        "relocations: 7 buffer slot(s), placed on device 'npm_lite'",
        "A_L2            L2          131072     64      1  r-      L2+0",
        "on device 'npm_lite': loadable",
    ):
        assert needle in dump, (needle, dump)


def _embedded_gemm(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    """examples/gemm_bias_relu.nem as `g.nemb` with its bias embedded:
    (the .nemb, the bias's .npy, the bias)."""
    bias = np.arange(128, dtype=np.float16)
    npy = tmp_path / "bias.npy"
    np.save(npy, bias)
    out = tmp_path / "g.nemb"
    r = tool("opt", str(GEMM), "-t", "nemb", "--embed", f"C_L2={npy}", "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out, npy, bias


@pytest.mark.slow  # 7 s
def test_embedded_weights_are_the_initial_contents(tmp_path):
    out, npy, bias = _embedded_gemm(tmp_path)
    interp = NemInterpreter()
    interp.load(out)
    assert np.array_equal(interp.read_tensor("C_L2", (128,), np.float16), bias)
    # kept through nem-opt .nemb -> .nemb, dropped with a remark for text
    again = tmp_path / "again.nemb"
    assert tool("opt", str(out), "-t", "nemb", "-o", str(again)).returncode == 0
    assert again.read_bytes() == out.read_bytes()
    text = tool("opt", str(out), "-t", "nem")
    assert b"1 embedded data segment(s) not written" in text.stderr
    # checking alone (`-o /dev/null`): nothing written, no remark (an outside user, session 56)
    checked = tool("opt", str(out), "-p", "nem-verify", "-o", os.devnull)
    assert b"not written" not in checked.stderr
    # the dump's Data section holds the segment's 256 bytes (it said 4: its
    # vector of one table, not what the table holds)
    dump = tool("opt", str(out), "--dump-nemb").stdout.decode()
    data = next(ln for ln in dump.splitlines() if ln.strip().startswith("Data "))
    assert int(data.split()[-1]) >= 256, dump
    assert "slot 4 (C_L2) +0: 256 bytes" in dump or "(C_L2) +0: 256 bytes" in dump, dump
    bad = tool("opt", str(GEMM), "-t", "nemb", "--embed", f"nope={npy}", "-o", str(out))
    assert bad.returncode == 1 and b"no buffer or region named 'nope'" in bad.stderr


@pytest.mark.slow  # 4 nem-opt runs
def test_an_output_named_nemb_is_bytecode(tmp_path):
    """`-o Y.nemb` without `-t` writes NEM bytecode, its embedded weights
    kept, from a .nemb or a .nem input; with `-t nem` it is an error and
    writes nothing (an outside user, session 52: `nem-opt X.nemb -p
    nem-verify -o Y.nemb` wrote .nem text into Y.nemb, which nem-run then
    refused by its name) (D-OPT-TARGET)."""
    src, _, bias = _embedded_gemm(tmp_path)
    out = tmp_path / "y.nemb"
    r = tool("opt", str(src), "-p", "nem-verify", "-o", str(out))
    assert r.returncode == 0 and b"not written" not in r.stderr, r.stderr
    assert out.read_bytes() == src.read_bytes()
    interp = NemInterpreter()
    interp.load(out)
    assert np.array_equal(interp.read_tensor("C_L2", (128,), np.float16), bias)
    from_text = tmp_path / "t.nemb"
    assert tool("opt", str(GEMM), "-o", str(from_text)).returncode == 0
    assert from_text.read_bytes()[:4] == b"NEMB"
    refused = tmp_path / "r.nemb"
    r = tool("opt", str(src), "-t", "nem", "-o", str(refused))
    assert r.returncode == 1 and not refused.exists()
    assert (
        b"-o " + str(refused).encode() + b" names NEM bytecode, but -t nem writes text" in r.stderr
    )
    assert b"fix: use -t nemb" in r.stderr


@pytest.mark.slow  # 5 s
def test_embedded_arrays_are_checked_as_run_inputs(tmp_path):
    """D-RT-TENSOR-IO: `--embed BUF=FILE.npy` takes an array of the buffer's
    element type, as `nem-run --input` does (a float64 array was stored as
    raw bytes into an f16 buffer); a non-.npy file is the raw opt-in."""
    ones = np.ones(64, dtype=np.float64)
    npy, out = tmp_path / "ones64.npy", tmp_path / "g.nemb"
    np.save(npy, ones)
    r = tool("opt", str(GEMM), "-t", "nemb", "--embed", f"C_L2={npy}", "-o", str(out))
    assert r.returncode == 1 and not out.exists()
    assert (
        f"--embed C_L2={npy}: a float64 array does not match buffer C_L2 (f16[128]): "
        "write an array of f16 (float16)"
    ).encode() in r.stderr
    assert b"--embed C_L2=ones64.bin" in r.stderr
    run = tool("run", str(GEMM), "--input", f"C_L2={npy}", "--no-progress")
    assert run.returncode == 2 and b"a float64 array does not match buffer C_L2" in run.stderr
    big = tmp_path / "big.npy"
    np.save(big, np.zeros(129, dtype=np.float16))
    r = tool("opt", str(GEMM), "-t", "nemb", "--embed", f"C_L2={big}", "-o", str(out))
    assert r.returncode == 1 and b"258 bytes at offset 0 of buffer C_L2 (256 bytes)" in r.stderr
    raw = tmp_path / "ones64.bin"
    ones.tofile(raw)
    assert (
        tool("opt", str(GEMM), "-t", "nemb", "--embed", f"C_L2={raw}", "-o", str(out)).returncode
        == 1
    )  # 512 bytes: too big for C_L2 even raw
    ones[:32].tofile(raw)
    assert (
        tool("opt", str(GEMM), "-t", "nemb", "--embed", f"C_L2={raw}", "-o", str(out)).returncode
        == 0
    )
    interp = NemInterpreter()
    interp.load(out)
    assert interp.read_tensor("C_L2", (32,), np.float64).tolist() == [1.0] * 32


@pytest.mark.slow  # 4 s
def test_embed_with_text_output_is_refused_and_a_partial_embed_warns(tmp_path):
    """`--embed` with text output (no -t, -t nem, -t mlir) exited 0 with the
    bytes of the run without it, the arrays dropped unsaid; an array filling
    20 of a buffer's 65,536 bytes was embedded without the warning nem-run
    --input gives (an outside user, session 66)."""
    w, small = tmp_path / "w.npy", tmp_path / "s.npy"
    np.save(w, np.ones((256, 128), np.float16))
    np.save(small, np.ones(10, np.float16))
    for target in ([], ["-t", "nem"], ["-t", "mlir"]):
        out = tmp_path / "out.txt"
        r = tool("opt", str(GEMM), *target, "--embed", f"B_L2={w}", "-o", str(out))
        assert r.returncode == 1 and not out.exists(), (target, r.stderr)
        err = r.stderr.decode()
        assert err.startswith("nem-opt: error: --embed takes effect only in NEM bytecode, but ")
        assert "fix: add -t nemb -o FILE.nemb" in err
    r = tool("opt", str(GEMM), "--strip-names")
    assert r.returncode == 1 and b"--strip-names takes effect only in NEM bytecode" in r.stderr
    out = tmp_path / "p.nemb"
    r = tool("opt", str(GEMM), "--embed", f"B_L2={small}", "-o", str(out))
    assert r.returncode == 0 and out.exists(), r.stderr
    warning = f"--embed B_L2={small}: the array fills 20 of the 65536 bytes of 'B_L2'; the other "
    assert r.stderr.decode().startswith(f"nem-opt: warning: {warning}")
    run = tool("run", str(GEMM), "--input", f"B_L2={small}", "--no-progress")
    assert f"nem-run: warning: --input B_L2={small}: the array fills 20 of" in run.stderr.decode()


@pytest.mark.slow  # 3 s
def test_stripped_names_and_debug(tmp_path):
    full, bare = tmp_path / "full.nemb", tmp_path / "bare.nemb"
    tool("opt", str(GEMM), "-t", "nemb", "-o", str(full))
    tool("opt", str(GEMM), "-t", "nemb", "--strip-names", "--strip-debug", "-o", str(bare))
    assert bare.stat().st_size < full.stat().st_size
    text = tool("opt", str(bare)).stdout.decode()
    assert "A_L2" not in text and "buffer _v" in text
    run = tool("run", str(bare), "--random-inputs", "1", "--no-progress")
    assert run.returncode == 0 and b"status: completed" in run.stdout


def test_diagnostics_of_a_loaded_program_point_at_the_source(tmp_path):
    bad = "buffer B : L2 (size=64)\nR = region(B, 32, 64)\n"
    module = parse_nem(bad, "bad.nem")
    data = write_nemb(module)
    with pytest.raises(NemDiagnosticError) as info:
        load_nemb(data, "bad.nemb")
    assert info.value.diagnostics[0].headline().startswith("bad.nem:2:1: error:")
    f = tmp_path / "bad.nemb"
    f.write_bytes(data)
    r = tool("opt", str(f))
    assert r.returncode == 1 and b"[REG-02]" in r.stderr


def test_garbage_is_one_located_line_and_its_fix(tmp_path):
    f = tmp_path / "junk.nemb"
    f.write_bytes(b"NEMB" + bytes(range(40)))
    for r in (tool("opt", str(f)), tool("run", str(f))):
        assert r.returncode == 1
        lines = r.stderr.decode().strip().splitlines()
        assert len(lines) == 2 and "junk.nemb: byte" in lines[0], lines
        assert lines[1].startswith("fix: ") and "write the file again" in lines[1], lines


@pytest.mark.slow  # 3 s
def test_relocations_resolve_where_the_runtime_places_the_buffers():
    """The loader's relocation of buffer slots and the runtime's allocation
    (D-RT-MEM) must agree: the same layout policy (capacity.place)."""
    from bytecode_corpus import corpus

    from nem.frontends.bytecode.requirements import resolve_slots

    checked = 0
    for name, text in corpus():
        loaded = load_nemb(write_nemb(parse_nem(text, name)), name + "b")
        interp = NemInterpreter()
        try:
            prog = interp.load_bytecode(write_nemb(loaded.module), name + "b")
        except NemDiagnosticError:
            continue
        for slot, (key, offsets) in zip(loaded.slots, resolve_slots(loaded.slots)):
            if slot.in_loop or slot.copies != 1 or not offsets:
                continue
            b = prog.memory.buffer(slot.name)
            assert (b.level if b.level != "L1" else "L1[0]", b.offset) == (key, offsets[0]), (
                name,
                slot,
            )
            checked += 1
    assert checked > 50


@pytest.mark.slow  # 4 s
def test_embedded_regions_land_at_their_offsets(tmp_path):
    """`--embed NAME=FILE.npy` takes a top-level region as `nem-run --input`
    does (D-RT-TENSOR-IO: one implementation): its dtype and shape are
    checked and its bytes land at the region's offset in its buffer; two
    regions of one buffer are two segments."""
    prog = tmp_path / "w.nem"
    prog.write_text(
        "program w:\n"
        "buffer W : L2 (size=256, align=64)\n"
        "buffer O : L2 (size=256, align=64)\n"
        "w_lo = region(W, 0, 128) elem=f16, shape=[64], layout=N\n"
        "w_hi = region(W, 128, 128) elem=f16, shape=[8, 8], layout=MN\n"
        "t = transfer.sync(dst=region(O, 0, 256), src=region(W, 0, 256))\n"
    )
    hi, lo = np.arange(64, dtype=np.float16).reshape(8, 8), np.full(64, 2, np.float16)
    np.save(tmp_path / "hi.npy", hi)
    np.save(tmp_path / "lo.npy", lo)
    out = tmp_path / "w.nemb"
    r = tool(
        "opt",
        str(prog),
        "-t",
        "nemb",
        "--embed",
        f"w_hi={tmp_path / 'hi.npy'}",
        "--embed",
        f"w_lo={tmp_path / 'lo.npy'}",
        "-o",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    interp = NemInterpreter()
    interp.load(out)
    w = interp.read_tensor("W", (128,), np.float16)
    assert w[:64].tolist() == lo.tolist() and w[64:].tolist() == hi.reshape(-1).tolist()
    np.save(tmp_path / "flat.npy", hi.reshape(-1))
    bad = tool(
        "opt", str(prog), "-t", "nemb", "--embed", f"w_hi={tmp_path / 'flat.npy'}", "-o", str(out)
    )
    assert bad.returncode == 1
    assert b"shape [64] does not match region w_hi (f16[8, 8])" in bad.stderr, bad.stderr


def _opt_in_process(argv: list[str]) -> tuple[int, str]:
    """nem-opt's main with text-only standard streams (a notebook's, the
    fuzz harness's): exit code and standard error."""
    import contextlib
    import io

    from nem.cli.nem_opt import main

    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        pytest.raises(SystemExit) as e,
    ):
        main(argv)
    return e.value.code, err.getvalue()


def test_bytecode_to_a_text_stdout_and_mlir_parse_errors_are_diagnostics(tmp_path):
    """Hostile-input campaign (cli target, seed 6): `-t nemb` to a standard
    output that takes text only, and a .nem program forced through `-f mlir`
    with `-t nemb`, were internal errors (AttributeError, xDSL ParseError)."""
    code, err = _opt_in_process([str(GEMM), "-t", "nemb"])
    assert (
        code == 1
        and err.strip()
        == "nem-opt: error: cannot open standard output: it "
        "takes text only; write the bytecode with -o FILE"
    ), err
    code, err = _opt_in_process(
        [str(GEMM), "-t", "nemb", "-f", "mlir", "-o", str(tmp_path / "g.nemb")]
    )
    assert code == 1 and f"{GEMM}:1:1: error:" in err and "internal" not in err, err
    assert not (tmp_path / "g.nemb").exists()
