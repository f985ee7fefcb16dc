"""The lines `nem-compile -v` prints of a compiled model's interface: each
input's and output's buffer, element type and shape (its ONNX name and
type where they differ), and a `nem-run` command line to paste that feeds
the inputs and writes each output in the model's shape (D-COMPILE-IFACE)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from nem.compile.pipeline import Interface


BF16_FILES = (
    "a .npy file holds no bf16: give its bits, a.view(numpy.uint16), with --input-raw; "
    "an output's bytes go to a raw file"
)
"""What the interface lines say of a bf16 port (an outside user, session 66:
the run line named a `uint8` output nem-run refused)."""


def interface_lines(iface: Interface, out: str, weights: str) -> list[str]:
    """The buffers that hold the model's inputs and outputs, with their ONNX
    names (sanitized names are not guessable: `input.1` is `input1`,
    D-COMPILE-IFACE), and a `nem-run` command line that writes each output
    with the model's shape (a buffer's `--output` is its flat elements)."""
    from nem.cli.common import command_line, path_word
    from nem.dialect.elements import elem_of_dtype

    def typed(shape: Sequence[int], dtype: Any) -> str:
        elem = elem_of_dtype(np.dtype(dtype)) or np.dtype(dtype).name
        return f"{elem}[{','.join(map(str, shape))}]"

    lines, run = [], ["nem-run", path_word(out)]
    if weights:
        run += ["--input", path_word(weights)]
    for kind, ports in (("input", iface.inputs), ("output", iface.outputs)):
        for name, shape, dtype in ports:
            onnx = iface.onnx_names.get(name)
            model = iface.onnx_dtypes.get(name)
            lines.append(
                f"{kind}: {name} {typed(shape, dtype)}"
                + (f" (ONNX '{onnx}')" if onnx and onnx != name else "")
                + (
                    f" ({model.name} in the model: the program holds"
                    f" {np.dtype(dtype).name}, which nem-run --input takes)"
                    if model is not None
                    else ""
                )
                + (f" ({BF16_FILES})" if typed(shape, dtype).startswith("bf16") else "")
            )
            if typed(shape, dtype).startswith("bf16"):  # (.npy has no bf16: its bits)
                run += (
                    ["--input-raw", f"{name}={name}.npy"]
                    if kind == "input"
                    else ["--output", f"{name}={name}.bin"]
                )
                continue
            run += (
                ["--input", f"{name}={name}.npy"]
                if kind == "input"
                else ["--output", f"{name}:{typed(shape, dtype)}={name}.npy"]
            )
    return [*lines, "run: " + command_line(run)]
