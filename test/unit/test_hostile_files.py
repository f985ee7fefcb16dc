"""Hostile files (issue 33): the one reader and the one output rule of every
tool (D-FILE-PATHS), and array files whose headers lie (D-LIMITS).

Each case is also a corpus entry (test/fuzz/corpus/cli/*.json) run through
the tools; here the pieces are tested directly, and the memory-hungry
cases once under a 3 GiB address-space limit, as the issue's campaign ran
them.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nem.cli.inputs import InputError, check_output_path, load_npy, read_archive, read_input
from nem.dialect.source_files import FileRefused, FileTooLarge, read_file_bytes, regular_file

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ))

from file_gen import gen_array, npy_bytes  # noqa: E402
from harness import _patched_zip  # noqa: E402

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
HUGE = "{'descr': '<f2', 'fortran_order': False, 'shape': (1099511627776,), }"


def test_regular_file_names_what_a_path_is(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path, kind in (
        (tmp_path / "fifo", "a FIFO (named pipe)"),
        ("/dev/zero", "a character device"),
        (tmp_path, "a directory"),
    ):
        with pytest.raises(
            FileRefused, match=re.escape(f"cannot read input '{path}': it is {kind}")
        ):
            regular_file(path, "input")
    with pytest.raises(FileRefused, match="No such file or directory"):
        regular_file(tmp_path / "none")
    (tmp_path / "f").write_bytes(b"abcd")
    assert read_file_bytes(tmp_path / "f", 4) == b"abcd"
    with pytest.raises(FileTooLarge, match="has 4 bytes, above the limit of 3"):
        read_file_bytes(tmp_path / "f", 3)


def test_outputs_are_never_inputs(tmp_path):
    given = tmp_path / "m.onnx"
    given.write_bytes(b"model")
    (tmp_path / "soft.onnx").symlink_to(given)
    os.link(given, tmp_path / "hard.onnx")
    for out in (given, tmp_path / "soft.onnx", tmp_path / "hard.onnx"):
        with pytest.raises(InputError, match="is an input of this command"):
            check_output_path(str(out), "-o", [str(given)])
    check_output_path(str(tmp_path / "m.nem"), "-o", [str(given)])
    check_output_path("/dev/null", "-o", ["/dev/null"])  # the null device reads nothing back
    assert given.read_bytes() == b"model"


def test_npy_headers_are_checked_before_the_data(tmp_path):
    f = tmp_path / "huge.npy"
    f.write_bytes(npy_bytes(HUGE))
    with pytest.raises(
        InputError,
        match=r"declares a float16 array of shape \[1099511627776\] "
        r"\(2199023255552 bytes\), more than the 64 bytes of 'A'",
    ):
        read_input(str(f), "--input A=huge.npy", 64, "'A'")
    f.write_bytes(
        npy_bytes(
            "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }",
            version=2,
            header_len=0xFFFFFFFF,
        )
    )
    with pytest.raises(InputError, match="declares a header of 4294967295 bytes at byte offset 8"):
        load_npy(str(f), "--input", 64)
    f.write_bytes(npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (8,), }", b"\0" * 6))
    with pytest.raises(
        InputError, match="is truncated: its header declares 16 bytes of data, the file has 6"
    ):
        load_npy(str(f), "--input", 64)
    # bytes after the declared data (an outside tester's appended junk, read silently)
    f.write_bytes(npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", b"\0" * 8))
    with pytest.raises(InputError, match="has 4 bytes after its data"):
        load_npy(str(f), "--input", 64)
    f.write_bytes(npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"))
    with pytest.raises(InputError, match="holds Python objects"):
        load_npy(str(f), "--input", 64)


def test_header_is_checked_against_the_target(tmp_path):
    f = tmp_path / "a.npy"
    np.save(f, np.zeros(4, np.float64))

    def check(shape, dtype):
        raise ValueError(f"a {dtype} array does not match buffer A (f16[4])")

    with pytest.raises(
        InputError,
        match=r"float64 array does not match buffer A \(f16\[4\]\) "
        r"\(the file's header declares float64, shape \[4\]\)",
    ):
        read_input(str(f), "--input A=a.npy", 1 << 20, "'A'", check)


def test_npz_members_are_checked_before_they_are_decompressed(tmp_path):
    bomb = tmp_path / "bomb.npz"
    bomb.write_bytes(_patched_zip("A.npy", npy_bytes(HUGE), 2**30))
    with pytest.raises(
        InputError,
        match="member 'A.npy' has 1073741824 bytes, more than the 64 bytes of buffer 'A'",
    ):
        read_archive(str(bomb), "--input", lambda name: 64)
    small = tmp_path / "small.npz"
    with zipfile.ZipFile(small, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("A.npy", npy_bytes(HUGE))
    with pytest.raises(
        InputError,
        match=r"member 'A.npy' declares a float16 array of shape "
        r"\[1099511627776\]",
    ):
        read_archive(str(small), "--input", lambda name: 64)


def _limited(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=120, preexec_fn=limit
    )


def test_array_files_under_a_3_gib_limit(tmp_path):
    """A header length of 4 GiB made numpy allocate it (MemoryError under the
    limit); a raw file of 2 GiB was read whole; /dev/zero was read until the
    limit."""
    prog = tmp_path / "p.nem"
    prog.write_text("buffer A : DDR (size=2147483648)\nR = region(A, 0, 64)\n")
    (tmp_path / "h.npy").write_bytes(
        npy_bytes(
            "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }",
            version=2,
            header_len=0xFFFFFFFF,
        )
    )
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(2**31)
    for flag, given, problem in (
        ("--input", "A=h.npy", "declares a header of 4294967295"),
        ("--input-raw", "A=big.bin", "above the limit of"),
        ("--input-raw", "A=/dev/zero", "a character device"),
    ):
        r = _limited([str(BIN / "nem-run"), str(prog), flag, given, "--no-progress"], tmp_path)
        assert r.returncode == 2 and problem in r.stderr, r.stderr
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_a_broadcast_view_is_checked_on_its_size_and_never_made_contiguous():
    """D-RT-WRITE-VIEW: a 4 TiB stride-0 view was made contiguous before the
    bounds check (MemoryError); one that fits is written with no copy."""
    import tracemalloc

    from nem.runtime import NemInterpreter
    from nem.runtime.tensor_io import TensorIOError

    it = NemInterpreter()
    it.load_string(
        "buffer X : L2 (size=128)\nbuffer D : DDR (size=33554432)\n"
        "d = region(D, 0, 33554432) elem=f16, shape=[16777216], layout=C\n"
    )
    huge = np.broadcast_to(np.float16(1), (2**20, 2**21))  # 4 TiB, 2 bytes held
    for write in (
        lambda: it.write_tensor("X", huge),
        lambda: it.write_bytes("X", huge),
        lambda: it.write_tensor("X", huge, raw=True),
        lambda: it.ddr_write(0, huge),
        lambda: it.encode_tensor("X", huge),
    ):
        with pytest.raises(
            TensorIOError,
            match=r"writing 4398046511104 bytes at offset 0 "
            r"of (buffer X \(128 bytes\)|DDR)",
        ):
            write()
    with pytest.raises(TypeError, match="not int"):
        it.write_bytes("X", 2**42)
    fits = np.broadcast_to(np.float16(2), (2**24,))  # 32 MiB, fits D
    tracemalloc.start()
    try:
        assert it.write_tensor("D", fits) == it.write_tensor("d", fits) == 2**25
        assert it.write_bytes("D", fits) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak  # no 32 MiB copy
    assert (it.read_tensor("d") == 2).all()


def test_nem_compile_never_writes_its_model(tmp_path):
    model = tmp_path / "m.mlir"
    text = (ROOT / "test/lit/lowering/Inputs/eltwise_tiled.mlir").read_text()
    model.write_text(text)
    (tmp_path / "link.mlir").symlink_to(model)
    for args in (
        ["-o", str(tmp_path / "link.mlir")],
        ["-o", str(tmp_path / "m.nem"), "--save-temps"],
    ):
        if "--save-temps" in args:  # the import stage's temp would be m.import.mlir
            os.replace(model, tmp_path / "m.import.mlir")
            model = tmp_path / "m.import.mlir"
            (tmp_path / "m.mlir").symlink_to(model)
            args = [str(tmp_path / "m.mlir"), *args]
        else:
            args = [str(model), *args]
        r = subprocess.run(
            [str(BIN / "nem-compile"), *args, "--no-progress"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and "is an input of this command" in r.stderr, r.stderr
    assert model.read_text() == text


def test_nem_compile_to_the_null_device_writes_no_file(tmp_path):
    """`-o /dev/null` discards the program and its weights: the weights
    sidecar was `/dev/null.weights.npz`, a regular file created in /dev.
    `--save-temps`' stages, asked for explicitly, go beside the model, as
    with `-o -` (D-FILE-PATHS)."""
    import onnx
    from compile_runs import conv3x3_model

    model = tmp_path / "m.onnx"
    onnx.save(conv3x3_model(4, 2, 2), str(model))
    stray = Path(os.devnull + ".weights.npz")
    existed = stray.exists()
    try:
        for extra, left in (([], {"m.onnx"}), (["--save-temps"], None)):
            r = subprocess.run(
                [str(BIN / "nem-compile"), str(model), "-o", os.devnull, "--no-progress", *extra],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert r.returncode == 0, r.stderr
            assert existed or not stray.exists()
            files = {p.name for p in tmp_path.iterdir()}
            if left is not None:
                assert files == left  # no weights beside the model either
            else:
                assert "m.tile.mlir" in files and "m.weights.npz" not in files, files
    finally:
        if stray.exists() and not existed:
            stray.unlink()


def test_no_tool_writes_a_file_it_read_through_an_include(tmp_path):
    """An include or device file is read only once the program is parsed, after
    the up-front check: it is refused at the end (nem-opt, nem-compile) or
    before the run (nem-run), and left as it was (D-FILE-PATHS)."""
    device = ROOT / "devices/nem/devices/npm_pro_x1.nem"
    inc = tmp_path / "inc"
    inc.mkdir()
    shipped = device.read_text()
    prog = tmp_path / "p.nem"
    prog.write_text(
        'include "npm_pro_x1.nem"\ndevice npm_pro_x1\nbuffer x : DDR (size=16, align=64)\n'
    )
    (tmp_path / "link.nem").symlink_to(inc / "npm_pro_x1.nem")
    for tool, args in (
        ("nem-opt", [str(prog), "-o", "inc/npm_pro_x1.nem"]),
        ("nem-opt", [str(prog), "-t", "nemb", "-o", "link.nem"]),
        ("nem-run", [str(prog), "--output", "x=inc/npm_pro_x1.nem"]),
        ("nem-run", [str(prog), "--trace", "link.nem"]),
    ):
        (inc / "npm_pro_x1.nem").write_text(shipped)
        r = subprocess.run(
            [str(BIN / tool), "-I", "inc", *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert r.returncode in (1, 2) and "was read by this command" in r.stderr, r.stderr
        assert (inc / "npm_pro_x1.nem").read_text() == shipped, (tool, args)
    assert not [p for p in inc.iterdir() if p.name.endswith(".tmp")]  # no temp left


def test_python_api_arguments_name_the_parameter():
    """Issue 33: AttributeErrors deep inside, silent successes, an empty
    ValueError; each is now one line naming the function and parameter."""
    from nem.compile import compile_onnx
    from nem.dialect.verifier import verify_program
    from nem.frontends.nem_text.document import detect_format
    from nem.frontends.nem_text.parser import parse_nem
    from nem.frontends.nem_text.printer import print_nem
    from nem.passes.driver import run_pipeline
    from nem.runtime.api import NemInterpreter

    for call, message in (
        (lambda: parse_nem(None), "parse_nem: text must be a str, not NoneType"),
        (lambda: print_nem(None), "print_nem: module must be a ModuleOp"),
        (lambda: detect_format(3), "detect_format: text must be a str, not int"),
        (lambda: verify_program(None), "verify_program: program must be a nem ProgramOp"),
        (lambda: run_pipeline(None, "dce"), "run_pipeline: module must be a ModuleOp"),
        (lambda: NemInterpreter(device=123), "NemInterpreter: device must be a device name"),
        (lambda: compile_onnx(None), "compile_onnx: model must be a path"),
        (
            lambda: compile_onnx("m.onnx", tile_sizes=(-1,)),
            r"compile: tile_sizes must be positive ints, not \(-1,\)",
        ),
    ):
        with pytest.raises((TypeError, ValueError), match=message):
            call()
    from nem.dialect.limits import source_limit

    with (
        source_limit(64),
        pytest.raises(
            ValueError, match="parse_nem: text has more than 64 bytes, above the source limit"
        ),
    ):
        parse_nem("#" * 100)


def test_compiler_reads_back_its_own_program_past_the_source_limit():
    """The source limit bounds what a user gives a tool; nem-compile's final
    check reads back the program it wrote, which for a large network is
    over 8 MiB (a 10,000-node chain stopped at `parse_nem: text has more
    than 8388608 bytes`).  Here a 50 KB program under a 10,000-byte limit
    (the device files are read under it)."""
    pytest.importorskip("onnx")
    pytest.importorskip("mlir.ir")
    from nem.compile import compile_onnx
    from nem.dialect.limits import source_limit
    from nem.frontends.onnx import samples

    g = samples.GraphBuilder("f32", seed=1)
    x = "x"
    for i in range(12):
        x = g.op("Relu" if i % 2 else "Sigmoid", [x], name=f"n{i}")
    with source_limit(10_000):
        result = compile_onnx(g.model("m", {"x": (4, 8)}, {"y": x}), device="npm_pro_x1")
    assert len(result.nem.encode()) > 10_000


def test_generated_array_files_are_read_or_refused_never_crash(tmp_path):
    """The arrays fuzz target's files (seed 0, 300 of them) through the one
    reader, for `A_L2` (65,536 f16 elements): each is an array or an
    InputError, and a fair share loads (the generator reaches past the
    header checks; before, almost none did)."""
    import random

    from nem.dialect.array_files import check_npy_size

    rng, loaded = random.Random(0), 0
    limit = 65536 * 2

    def size(name):
        if name not in ("A_L2", "B_L2"):
            raise KeyError(f"no buffer '{name}'")
        return limit

    for i in range(300):
        data = gen_array(rng)
        path = tmp_path / (f"{i}.npz" if data[:2] == b"PK" else f"{i}.npy")
        path.write_bytes(data)
        try:
            arrays = (
                read_archive(str(path), "--input", size)
                if path.suffix == ".npz"
                else {"A_L2": load_npy(str(path), "--input", limit)}
            )
        except InputError:
            continue
        for a in arrays.values():
            assert check_npy_size(a.shape, a.dtype, str(path), limit, "A_L2") <= limit
        loaded += 1
    assert loaded >= 30, loaded


# hostile10's held-out set (issue 33): inputs written from the README, docs and --help


def test_two_outputs_of_one_command_are_refused(tmp_path):
    """`nem-run --output Y=o.npy --output A=o.npy` and `--output Y=t.json
    --trace t.json` ended with exit 0 and one of the two outputs lost."""
    from nem.cli.inputs import check_distinct_outputs

    out = tmp_path / "o.npy"
    (tmp_path / "sub").mkdir()
    for other in (str(out), str(tmp_path / "sub" / ".." / "o.npy")):
        with pytest.raises(
            InputError, match=re.escape("--trace: '") + ".*is also written by --output Y_L2"
        ):
            check_distinct_outputs([(str(out), "--output Y_L2"), (other, "--trace")])
    out.write_bytes(b"")
    os.link(out, tmp_path / "hard.npy")
    with pytest.raises(InputError, match="is also written by"):
        check_distinct_outputs([(str(out), "-o"), (str(tmp_path / "hard.npy"), "--trace")])
    check_distinct_outputs(
        [
            (str(out), "-o"),
            (str(tmp_path / "p.npy"), "--trace"),
            ("/dev/null", "--output A"),
            ("/dev/null", "--output B"),
            ("-", "-o"),
            ("-", "--trace"),
        ]
    )


def test_nem_run_refuses_two_outputs_in_one_file(tmp_path, capsys):
    from nem.cli.nem_run import main

    out = str(tmp_path / "o.npy")
    with pytest.raises(SystemExit) as e:
        main(
            [
                str(ROOT / "examples" / "gemm_bias_relu.nem"),
                "--random-inputs",
                "1",
                "--output",
                f"Y_L2={out}",
                "--output",
                f"A_L2={out}",
            ]
        )
    assert e.value.code == 2 and not os.path.exists(out)
    assert "--output A_L2: '" in capsys.readouterr().err


def test_empty_output_name_is_refused(tmp_path):
    """`nem-compile m.onnx -o ''` wrote m.nem beside the model, exit 0."""
    with pytest.raises(InputError, match="-o: the file name is empty"):
        check_output_path("", "-o")


def test_an_output_name_too_long_for_the_file_system_is_refused(tmp_path):
    """A 300-character file name (an outside user, session 63: `nem-run
    --output` said 'internal error: OSError: File name too long ... This is
    a bug in nem-run'): refused before any work, naming the file."""
    path = str(tmp_path / ("b" * 300 + ".npy"))
    with pytest.raises(InputError, match="cannot write .*File name too long"):
        check_output_path(path, "--output y")


def test_device_by_name_in_an_include_dir_is_that_file(tmp_path):
    """A broken `-I DIR/npm_lite.nem` was skipped and the shipped npm_lite
    targeted, exit 0 (D-DEV-LOOKUP); its own error now."""
    from nem.devices.device_lookup import find_device
    from nem.dialect.diagnostics import NemDiagnosticError

    shipped = (ROOT / "devices" / "nem" / "devices" / "npm_lite.nem").read_text()
    (tmp_path / "npm_lite.nem").write_text(shipped.replace("num_engines = 1", "num_engines = -1"))
    (tmp_path / "prog.nem").write_text("program p:\n")  # another .nem: skipped as before
    with pytest.raises(
        NemDiagnosticError,
        match=r"npm_lite\.nem:7:23: error: expected an "
        r"integer engine count",
    ):
        find_device("npm_lite", [str(tmp_path)])
    (tmp_path / "npm_lite.nem").write_text(shipped.replace("num_engines = 1", "num_engines = 2"))
    assert find_device("npm_lite", [str(tmp_path)]).topology.num_engines == 2
    (tmp_path / "npm_lite.nem").write_text("")  # empty: the shipped npm_lite, exit 0
    with pytest.raises(
        NemDiagnosticError,
        match=r"npm_lite\.nem' defines no device "
        r"'npm_lite' \[DEV-20\]",
    ):
        find_device("npm_lite", [str(tmp_path)])
    assert find_device("npm_mid", [str(tmp_path)]).name == "npm_mid"


def test_api_arguments_of_the_held_out_set():
    from nem.passes.driver import load_pass_plugin
    from nem.runtime.api import NemInterpreter

    with pytest.raises(
        TypeError, match="load_pass_plugin: path must be a str or Path, not NoneType"
    ):
        load_pass_plugin(None)  # type: ignore[arg-type]
    it = NemInterpreter(device="npm_lite")
    with pytest.raises(TypeError, match="load: path must be a str or Path, not int"):
        it.load(3)  # type: ignore[arg-type]
    it.load(str(ROOT / "examples" / "gemm_bias_relu.nem"))
    with pytest.raises(TypeError, match="raw must be a bool, not 'yes'"):
        it.write_tensor("A_L2", np.ones(4, np.float16), raw="yes")  # type: ignore[arg-type]
    assert it.write_tensor("A_L2", np.ones(4, np.float16), raw=np.bool_(False)) == 8
    with pytest.raises(
        ValueError,
        match=r"run_schedules: k=4611686018427387904 schedules of "
        r"an estimated 21 tasks .* exceed the task budget of 10000000",
    ):
        it.run_schedules(2**62)  # was a MemoryError
    with pytest.raises(ValueError, match="exceed the task budget of 40"):
        it.run_schedules(2, max_tasks=40)
    assert len(it.run_schedules(2, max_tasks=42)[0]) == 2


def test_what_a_plugin_or_device_path_is(tmp_path):
    """A directory or /dev/null as a pass plugin was "no such file"; a FIFO
    as `nem-run --device D.nem` "device 'D.nem' not found"."""
    from nem.dialect.diagnostics import NemDiagnosticError
    from nem.passes.driver import PluginError, load_pass_plugin
    from nem.runtime.api import NemInterpreter

    for path, why in (
        (tmp_path, "it is a directory"),
        ("/dev/null", "a character device"),
        (tmp_path / "none.py", "no such file"),
    ):
        with pytest.raises(PluginError, match=why):
            load_pass_plugin(path)
    os.mkfifo(tmp_path / "d.nem")
    with pytest.raises(NemDiagnosticError, match=r"device file '.*d\.nem': it is a FIFO"):
        NemInterpreter(device=str(tmp_path / "d.nem"))


def _tool(name: str, *args: str, stdin=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / name), *args], capture_output=True, text=True, timeout=120, stdin=stdin
    )


def test_nem_compile_never_writes_its_models_external_data(tmp_path):
    """A model whose weights are external data in `m.weights.npz` (or in
    the `-o` file itself): `nem-compile m.onnx -o m.nem` wrote its own
    weights over them, and the model's data was gone (an outside tester,
    session 66).  Both are inputs of the compile (D-FILE-PATHS)."""
    import onnx
    from onnx import external_data_helper

    from nem.frontends.onnx import samples

    base = samples.mlp()
    cases = (("m.weights.npz", "m.onnx", "m.nem"), ("out.nem", "o.onnx", "out.nem"))
    for location, model, out in cases:
        m = onnx.ModelProto()
        m.CopyFrom(base)
        external_data_helper.convert_model_to_external_data(
            m, all_tensors_to_one_file=True, location=location, size_threshold=0
        )
        onnx.save_model(m, str(tmp_path / model))
        data = (tmp_path / location).read_bytes()
        r = _tool("nem-compile", str(tmp_path / model), "-o", str(tmp_path / out))
        assert r.returncode == 2 and "is an input of this command" in r.stderr, r.stderr
        assert (tmp_path / location).read_bytes() == data
    r = _tool("nem-compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "fresh.nem"))
    assert r.returncode == 0, r.stderr  # (its weights beside it are another file)


def test_no_tool_writes_the_file_behind_its_standard_input(tmp_path):
    """`nem-opt - -o g.nem < g.nem` rewrote the program it read in canonical
    form (its comments lost), `nem-run - --trace g.nem < g.nem` replaced it
    with a trace (an outside tester, session 66)."""
    text = (ROOT / "examples/gemm_bias_relu.nem").read_text()
    program = tmp_path / "g.nem"
    program.write_text(text)
    for tool, args in (
        ("nem-opt", ["-", "-o", str(program)]),
        ("nem-run", ["-", "--random-inputs", "1", "--trace", str(program)]),
    ):
        with program.open() as stdin:
            r = _tool(tool, *args, stdin=stdin)
        assert r.returncode != 0 and "standard input" in r.stderr, (tool, r.stderr)
        assert program.read_text() == text
    with program.open() as stdin:  # (another output file is fine)
        assert _tool("nem-opt", "-", "-o", str(tmp_path / "o.nem"), stdin=stdin).returncode == 0
