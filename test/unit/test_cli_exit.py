"""The tools' exit status (D-CLI-EXIT): 2 for a command line that cannot be
used (a flag, its value, a data file a flag names), 1 for a source with
errors (the program, its device file, a model) or a failed run, each with
a message and no traceback. An outside check (session 40) found a bad
`--onnx` model exiting 1 beside a bad `--input` array exiting 2; this pins
the rule that makes that the intended split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nem.cli import nem_compile, nem_run

REPO = Path(__file__).resolve().parents[2]
PROGRAM = str(REPO / "examples" / "gemm_bias_relu.nem")


def _files(tmp: Path) -> dict[str, str]:
    made = {
        "bad.nem": b"garbage\n",
        "bad.onnx": b"\x08\x07garbage",
        "bad.json": b'{"x":\n',
    }
    for name, data in made.items():
        (tmp / name).write_bytes(data)
    np.save(tmp / "wrong.npy", np.zeros(3, np.int8))
    return {name: str(tmp / name) for name in [*made, "wrong.npy"]}


CASES = [
    # sources: located diagnostics, exit 1
    ("program", nem_run.run, lambda f: [f["bad.nem"]], 1, "bad.nem:1:1: error"),
    ("device", nem_run.run, lambda f: [PROGRAM, "--device", "no_such"], 1, "[DEV-20]"),
    (
        "onnx model",
        nem_run.run,
        lambda f: [PROGRAM, "--timed", "--roofline", "--onnx", f["bad.onnx"]],
        1,
        "bad.onnx: error: not an ONNX model",
    ),
    ("compiled model", nem_compile.run, lambda f: [f["bad.onnx"]], 1, "not an ONNX model"),
    # the command line: usage errors, exit 2
    (
        "data file",
        nem_run.run,
        lambda f: [PROGRAM, "--input", f"A_L2={f['wrong.npy']}"],
        2,
        "nem-run: error: --input A_L2=",
    ),
    (
        "profile",
        nem_run.run,
        lambda f: [PROGRAM, "--timed", "--profile", f["bad.json"]],
        2,
        "nem-run: error: --profile",
    ),
    ("flags", nem_run.run, lambda f: [PROGRAM, "--json"], 2, "it needs --roofline"),
    (
        "flag value",
        nem_compile.run,
        lambda f: [f["bad.onnx"], "--tile-sizes", "x"],
        2,
        "--tile-sizes expects positive integers",
    ),
]


@pytest.mark.parametrize(
    ("what", "tool", "argv", "status", "says"), CASES, ids=[c[0] for c in CASES]
)
def test_exit_status_tells_the_command_line_from_the_source(
    what, tool, argv, status, says, tmp_path, capsys
):
    pytest.importorskip("onnx")
    try:
        got = tool(argv(_files(tmp_path)))
    except SystemExit as e:  # some usage errors leave `run` as argparse's do
        got = e.code
    assert got == status
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
