"""`python -m nem.compile.check` names (D-COMPILE-CHECK-NAMES): each
`--input`/`--output` NAME is an ONNX name or a buffer name, mapped through
the compiler's own table (`nem.frontends.onnx.graph.interface_names`); a
NAME that is one tensor's ONNX name and another's buffer name is settled by
the other NAMEs, else it is an error naming both spellings.  The outside
report: ONNX `a.b` and `a_b` are buffers `a_b` and `a_bv2`, and `--input
a.b=.. --input a_b=..` fed both arrays to `a.b`."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from onnx import TensorProto, helper  # noqa: E402

from nem.compile.check import _CheckError, main, resolve_names  # noqa: E402
from nem.frontends.onnx import import_onnx  # noqa: E402
from nem.frontends.onnx.graph import interface_names  # noqa: E402


def _model(names=("a.b", "a_b"), out="y.0"):
    vis = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in names]
    g = helper.make_graph(
        [helper.make_node("Sub", list(names[:2]), [out], name="sub")],
        "g",
        vis,
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [3])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


PORTS = (("a.b", "a_b"), ("a_b", "a_bv2"))


def test_the_table_is_the_importers():
    """One home for the names: the importer's buffers are the table's."""
    m = _model()
    table = interface_names(m.graph)
    im = import_onnx(m)
    assert table.inputs == PORTS == tuple((p.onnx_name, p.name) for p in im.inputs)
    assert table.outputs == (("y.0", "y0"),) == tuple((p.onnx_name, p.name) for p in im.outputs)


@pytest.mark.parametrize(
    "given, want",
    [
        (["a.b", "a_b"], ["a.b", "a_b"]),  # ONNX names
        (["a_b", "a_bv2"], ["a.b", "a_b"]),  # buffer names (nem-compile -v's run line)
        (["a_bv2", "a_b"], ["a_b", "a.b"]),
        (["a.b", "a_bv2"], ["a.b", "a_b"]),  # unambiguous either way
        (["a.b"], ["a.b"]),
        (["a_bv2"], ["a_b"]),
    ],
)
def test_names_resolve(given, want):
    assert list(resolve_names(given, PORTS, "input").values()) == want


def test_an_ambiguous_name_is_an_error_naming_both_spellings():
    with pytest.raises(_CheckError) as e:
        resolve_names(["a_b"], PORTS, "input")
    assert str(e.value) == (
        "--input a_b is ambiguous: ONNX input 'a_b' is buffer 'a_bv2', and buffer 'a_b' is "
        "ONNX input 'a.b'\nfix: write 'a_bv2' or 'a.b' for the one you mean, or name the other "
        "input too (by either spelling)"
    )


@pytest.mark.parametrize(
    "given, message",
    [
        (["a.b", "a_bv2", "a_b"], "--input a_b is ambiguous"),  # all three: nothing left over
        (
            ["a.b", "a_bv3"],
            "--input a_bv3: the model has no input 'a_bv3' (inputs: a.b "
            "(buffer a_b), a_b (buffer a_bv2))",
        ),
    ],
)
def test_bad_names(given, message):
    with pytest.raises(_CheckError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_names(given, PORTS, "input")


def test_one_input_twice_is_an_error():
    ports = (("x.1", "x1"), ("z", "z"))
    with pytest.raises(
        _CheckError,
        match=r"--input x.1 and --input x1 both name ONNX input "
        r"'x.1' \(buffer 'x1'\): give it once",
    ):
        resolve_names(["x.1", "x1"], ports, "input")
    # outputs: one output compared with two files is fine
    assert resolve_names(["x.1", "x1"], ports, "output") == {"x.1": "x.1", "x1": "x.1"}


def test_check_runs_with_onnx_names_and_catches_swapped_arrays(tmp_path, capsys):
    m = _model()
    onnx.save(m, tmp_path / "m.onnx")
    a, b = np.arange(3, dtype=np.float32), np.full(3, 10, np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "y.npy", a - b)
    args = [str(tmp_path / "m.onnx"), "--output", f"y.0={tmp_path / 'y.npy'}"]
    assert (
        main(
            [*args, "--input", f"a.b={tmp_path / 'a.npy'}", "--input", f"a_b={tmp_path / 'b.npy'}"]
        )
        == 0
    )
    assert "y.0: max |nem - onnxruntime| = 0 " in capsys.readouterr().out
    assert (
        main(
            [*args, "--input", f"a.b={tmp_path / 'b.npy'}", "--input", f"a_b={tmp_path / 'a.npy'}"]
        )
        == 1
    )
    assert "MISMATCH" in capsys.readouterr().out
    assert main([*args, "--input", f"a_b={tmp_path / 'a.npy'}"]) == 2
    assert "check: error: --input a_b is ambiguous" in capsys.readouterr().err


def test_check_refuses_files_it_cannot_read_with_one_line(tmp_path, capsys):
    """hostile8, by hand: a FIFO as the model, an input or an output hung
    (np.load, onnx.load opened it); an empty `.npy` or a header declaring
    2^40 elements were tracebacks (EOFError, a 2 TiB allocation)."""
    import os

    onnx.save(_model(), tmp_path / "m.onnx")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty.npy").write_bytes(b"")
    np.save(tmp_path / "a.npy", np.arange(3, dtype=np.float32))
    raw = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "huge.npy").write_bytes(raw.replace(b"(3,), ", b"(1099511627776,),"))
    m, a = str(tmp_path / "m.onnx"), f"a.b={tmp_path / 'a.npy'}"
    for args, says in [
        ([str(tmp_path / "fifo"), "--input", a], "cannot read model '"),
        ([m, "--input", f"a.b={tmp_path / 'fifo'}"], "it is a FIFO (named pipe)"),
        (
            [
                m,
                "--input",
                a,
                "--input",
                f"a_b={tmp_path / 'a.npy'}",
                "--output",
                f"y.0={tmp_path / 'fifo'}",
            ],
            "--output y.0=",
        ),
        ([m, "--input", f"a.b={tmp_path / 'empty.npy'}"], "is not a .npy file (no NumPy header)"),
        (
            [m, "--input", f"a.b={tmp_path / 'huge.npy'}"],
            "declares a float32 array of shape [1099511627776]",
        ),
    ]:
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("check: error: ") and says in err, err
        assert len(err.splitlines()) == 1, err


def test_check_without_an_output_is_an_error(tmp_path, capsys):
    """With no `--output` it compared nothing and exited 0, which reads as a
    pass (an outside check, session 40)."""
    onnx.save(_model(), tmp_path / "m.onnx")
    np.save(tmp_path / "a.npy", np.arange(3, dtype=np.float32))
    a = tmp_path / "a.npy"
    assert main([str(tmp_path / "m.onnx"), "--input", f"a.b={a}", "--input", f"a_b={a}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("check: error: nothing to compare: give --output NAME=FILE"), err


def _mul_round() -> onnx.ModelProto:
    """f16 x * 0.7 -> Round -> Equal 0 -> Where(-1.5, x): the outside
    review's minimized model (session 54)."""
    f16 = TensorProto.FLOAT16
    consts = [helper.make_tensor(n, f16, [], [v]) for n, v in (("c", 0.7), ("z", 0.0), ("m", -1.5))]
    nodes = [
        helper.make_node("Mul", ["x", "c"], ["p"], name="mul"),
        helper.make_node("Round", ["p"], ["r"], name="round"),
        helper.make_node("Equal", ["r", "z"], ["e"], name="eq"),
        helper.make_node("Where", ["e", "m", "x"], ["y"], name="where"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", f16, [4])],
        [helper.make_tensor_value_info("y", f16, [4])],
        consts,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_an_f16_mismatch_with_onnxruntime_gets_the_reference_evaluators_opinion(tmp_path, capsys):
    """onnxruntime computes an f16 Mul then Round in f32: x = 0.7144 gives
    0.5 in f16 (Round: 0, so Where picks -1.5) and 0.50022 in f32 (Round: 1,
    Where picks x).  The program is right by ONNX's types, and onnx's
    reference evaluator says so: the check prints both comparisons and
    passes (an outside review, session 54: a bare MISMATCH, exit 1); a
    program the reference evaluator disagrees with still fails."""
    x = np.array([0.7144, 2.0, -3.0, 0.25], np.float16)
    right = np.array([-1.5, 2.0, -3.0, -1.5], np.float16)  # f16 arithmetic: 0.7144*0.7 = 0.5
    wrong = np.array([0.7144, 2.0, -3.0, 0.0], np.float16)
    _judged_by_the_reference(tmp_path, capsys, _mul_round(), x, right, wrong)


def _judged_by_the_reference(tmp_path, capsys, model, x, right, wrong) -> None:
    """The check of `model` on `x`: `right` (off onnxruntime's output, on
    the reference evaluator's) passes and `wrong` fails, each printing both
    comparisons."""
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    np.save(tmp_path / "x.npy", x)
    for got, code in ((right, 0), (wrong, 1)):
        np.save(tmp_path / "y.npy", got)
        argv = [
            str(path),
            "--input",
            f"x={tmp_path / 'x.npy'}",
            "--output",
            f"y={tmp_path / 'y.npy'}",
        ]
        assert main(argv) == code
        out = capsys.readouterr().out.splitlines()
        assert "max |nem - onnxruntime|" in out[0] and ": MISMATCH" in out[0]
        assert "max |nem - onnx reference evaluator|" in out[1]


def _f16_mul_to_f32() -> onnx.ModelProto:
    """Cast(x, f16) * 3 (f16) -> Cast to f32: the outside user's minimized
    model (session 62)."""
    nodes = [
        helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Mul", ["h", "k"], ["p"]),
        helper.make_node("Cast", ["p"], ["y"], to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 7])],
        [helper.make_tensor("k", TensorProto.FLOAT16, [], [3.0])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_an_f32_output_computed_in_f16_gets_the_reference_evaluators_opinion(tmp_path, capsys):
    """An f32 output of a model computing in f16: onnxruntime, with no f16
    Mul on the CPU, computes Cast-Mul in f32 and skips the first rounding,
    1 f16 ulp off the declared arithmetic on 8 of 21 elements; judged at
    f32's tolerance, the check called the exact program a MISMATCH (exit 1).
    The program's values (f16 arithmetic, which the reference evaluator
    computes) pass, both lines printed; values off the reference fail."""
    x = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32)
    exact = (x.astype(np.float16) * np.float16(3)).astype(np.float32)
    once = (x * 3).astype(np.float16).astype(np.float32)  # onnxruntime's rounding
    assert not np.array_equal(exact, once)  # (else the inputs show nothing)
    _judged_by_the_reference(tmp_path, capsys, _f16_mul_to_f32(), x, exact, exact + 0.01)


def test_non_finite_values_must_sit_where_onnxruntime_s_do():
    """An infinity against onnxruntime's infinity of the other sign, or a
    NaN against a number, is out of tolerance; the same infinity is not
    (the check passed +inf against -inf and printed a difference of nan)."""
    from nem.compile.check import max_violation

    want = np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)
    assert max_violation(want.copy(), want) == 0.0
    for bad in ([-np.inf, -np.inf, 1.0, np.nan], [np.inf, -np.inf, np.nan, np.nan]):
        assert max_violation(np.array(bad, np.float32), want) == float("inf")


def test_a_reference_that_overflows_where_onnxruntime_does_not_is_no_second_opinion(capsys):
    """An f16 ReduceL2 of [200, 200]: its sum of squares overflows f16, so
    the program and onnx's reference evaluator (the body in f16) give inf,
    onnxruntime (in f32) 282.8: a MISMATCH, not the reference's OK (an
    outside review, session 54)."""
    from nem.compile.check import _second_opinion

    inf = np.array([np.inf], np.float16)
    assert _second_opinion("y", inf, inf, np.array([282.8], np.float16)) == float("inf")
    out = capsys.readouterr().out
    assert "MISMATCH (it is not finite where onnxruntime's output is; the program gives its " in out
    assert _second_opinion("y", np.array([3.0], np.float16), inf, np.array([282.8], np.float16))
    assert "MISMATCH (it is not finite where onnxruntime's output is)" in capsys.readouterr().out
    assert _second_opinion("y", inf, inf, inf) == 0.0


def test_tf_style_names_are_the_programs_buffers():
    """ONNX names of tf2onnx's form (`x_1:0`, `Identity_1:0`) name the
    program's buffers as the interface says: `x_1:0` was `x_10` in the
    interface and `x` in the program (xDSL read the `_10` as its uniquing
    suffix), while ONNX `x` was `x_v1` there, so inputs written by the
    interface's names went to each other's buffers (an outside user, session
    55: y = -9 where onnxruntime gives 9, no warning)."""
    from compile_runs import run_api

    from nem.compile import compile_onnx

    m = _model(("x_1:0", "x"), out="Identity_1:0")
    ports = interface_names(m.graph)
    assert ports.inputs == (("x_1:0", "x10"), ("x", "x")) and ports.outputs == (
        ("Identity_1:0", "Identity10"),
    )
    nem = compile_onnx(m, device="npm_pro_x1").nem
    for name in ("x10", "x", "Identity10"):
        assert f"\nbuffer {name} : DDR" in nem
    run_api(m)


def _sub_check(tmp_path, capsys, y_file, x=None):
    """`check` of `_model(("x", "w"), "y")` (x - w, f32[3]) with `y_file`
    as the program's output (its exit status, stdout and stderr)."""
    onnx.save(_model(("x", "w"), "y"), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.arange(3, dtype=np.float32) if x is None else x)
    np.save(tmp_path / "w.npy", np.ones(3, np.float32))
    code = main(
        [
            str(tmp_path / "m.onnx"),
            "--input",
            f"x={tmp_path / 'x.npy'}",
            "--input",
            f"w={tmp_path / 'w.npy'}",
            "--output",
            f"y={y_file}",
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


def test_an_output_file_of_another_size_type_or_shape_is_refused(tmp_path, capsys):
    """An outside user (session 66): a raw file 64 bytes longer than the
    output, or a `.npy` of the right size and another shape, were compared
    and passed (exit 0); an int32, f16 or transposed array got a numeric
    MISMATCH, and a `.npz` was read as raw float bytes.  Each is an error
    naming the file, what it holds and what nem-run writes; what nem-run
    writes (the typed array, its elements flat, the raw bytes, uint8 bytes)
    is compared."""
    y = np.arange(3, dtype=np.float32) - 1
    good = {
        "y.npy": y,
        "flat.npy": y.ravel(),
        "u8.npy": np.frombuffer(y.tobytes(), np.uint8),
        "y.bin": y.tobytes(),
    }
    bad = {
        "long.bin": (
            y.tobytes() + bytes(64),
            "long.bin' holds 76 bytes, output 'y' (f32[3]) has 12",
        ),
        "i32.npy": (y.astype(np.int32), "an int32 array does not match output 'y' (f32[3])"),
        "f16.npy": (y.astype(np.float16), "a float16 array does not match output 'y' (f32[3])"),
        "col.npy": (y.reshape(3, 1), "shape [3, 1] does not match output 'y' (f32[3])"),
        "y.npz": (None, "y.npz' is a .npz archive; give one array"),
    }
    for name, data in [*good.items(), *((n, d) for n, (d, _) in bad.items())]:
        path = tmp_path / name
        if name.endswith(".npy"):
            np.save(path, data)
        elif name.endswith(".npz"):
            np.savez(path, y=y)
        else:
            path.write_bytes(data)
    for name in good:
        code, out, err = _sub_check(tmp_path, capsys, tmp_path / name)
        assert code == 0 and out.endswith(": OK\n"), (name, out, err)
    for name, (_, says) in bad.items():
        code, out, err = _sub_check(tmp_path, capsys, tmp_path / name)
        assert code == 2 and not out, (name, out)
        assert err.startswith(f"check: error: --output y={tmp_path / name}: "), err
        assert says in err and len(err.splitlines()) == 1, err
    _, _, err = _sub_check(tmp_path, capsys, tmp_path / "col.npy")
    assert "(the file's header declares float32, shape [3, 1])" in err
    assert "nem-run --output y=FILE.npy" in err and "'y:f32[3]=FILE.npy'" in err


def test_a_big_endian_input_is_refused_as_nem_run_refuses_it(tmp_path, capsys):
    """An outside user (session 66): a big-endian `>f4` input went to
    onnxruntime as it was, whose output was other numbers, and the check
    blamed the program (`max |nem - onnxruntime| = inf: MISMATCH`); nem-run
    refuses the file.  The check refuses it by nem-run's own rule
    (`elements.dtype_mismatch`), saying how to convert it."""
    from nem.dialect.elements import dtype_mismatch

    y = np.arange(3, dtype=np.float32) - 1
    np.save(tmp_path / "y.npy", y)
    code, out, err = _sub_check(tmp_path, capsys, tmp_path / "y.npy", x=(y + 1).astype(">f4"))
    assert code == 2 and not out, out
    why = dtype_mismatch(np.dtype(">f4"), "f32", "input 'x' (f32[3])", ", as nem-run --input takes")
    assert err == f"check: error: --input x={tmp_path / 'x.npy'}: {why} " + (
        "(the file's header declares >f4, shape [3])\n"
    )
    assert "big-endian: numpy's a.astype('<f4') converts them" in err
    code, _, err = _sub_check(tmp_path, capsys, tmp_path / "y.npy", x=np.ones(3, np.float64))
    assert code == 2 and "a float64 array does not match input 'x' (f32[3])" in err, err
