"""`nem-compile MODEL.onnx --bisect`: the stage bisector's command line
(nem.compile.bisect; docs/compile.md "Bisecting a wrong result").

The bisector itself lives with the compiler; the NEM program's run
(`run_nem`, the reference runtime) and the files are here, in the CLI layer,
which may import both (docs/design.md "Layout and boundaries").  Exit
status: 0 every step matches onnxruntime, 1 a step differs or the compile
fails, 2 bad usage (an unreadable model or input file).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nem.compile.pipeline import CompileOptions, CompileResult

if TYPE_CHECKING:
    from onnx import ModelProto

    from nem.runtime.api import NemInterpreter


def load_program(
    result: CompileResult,
    inputs: dict[str, np.ndarray],
    device: str,
    include_dirs: Sequence[str] = (),
    kernels: dict[str, Any] | None = None,
) -> NemInterpreter:
    """A `NemInterpreter` holding the compiled program with `inputs` (by ONNX
    name) and the weights written, as `nem-run --input STEM.weights.npz
    --input x=x.npy` starts (`kernels`: NemInterpreter's)."""
    from nem.runtime.api import NemInterpreter

    interp = NemInterpreter(device=device, include_dirs=include_dirs, kernels=kernels)
    interp.load_string(result.nem, "model.nem", check=False)
    iface = result.interface
    for name, _, _ in iface.inputs:
        interp.write_tensor(name, inputs[iface.onnx_names[name]].reshape(-1))
    for name, array in iface.weights.items():
        interp.write_tensor(name, np.ascontiguousarray(array).reshape(-1))
    return interp


def read_outputs(interp: NemInterpreter, result: CompileResult) -> dict[str, np.ndarray]:
    """The program's outputs by ONNX name, in the model's shapes."""
    iface = result.interface
    return {iface.onnx_names[n]: interp.read_tensor(n, shape) for n, shape, _ in iface.outputs}


def run_nem(
    result: CompileResult, inputs: dict[str, np.ndarray], options: CompileOptions
) -> dict[str, np.ndarray]:
    """The compiled program on `inputs` in the reference runtime (one run,
    source schedule); its outputs by ONNX name."""
    interp = load_program(result, inputs, options.device, options.include_dirs)
    r = interp.run()
    if not r.ok:
        raise RuntimeError(r.error.render() if r.error else f"the run ends in {r.status}")
    return read_outputs(interp, result)


def read_inputs(model: ModelProto, given: Sequence[str]) -> dict[str, np.ndarray] | None:
    """`--input NAME=FILE.npy` (an ONNX or a buffer name, as `python -m
    nem.compile.check` takes them) or `--input FILE.npz` (every array of it,
    by name: a fuzzer finding's `model.inputs.npz`); None when none is given.
    The files are read as `nem-run --input` reads them (nem.cli.inputs: a
    FIFO, a device, an archive bomb or a header declaring more than the
    input refused before any data is read), and each array must have its
    input's ONNX element type and shape, as onnxruntime takes it."""
    if not given:
        return None
    from onnx import helper

    from nem.cli.inputs import load_npy, read_archive
    from nem.compile.check import resolve_names
    from nem.frontends.onnx.graph import interface_names

    ports = interface_names(model.graph).inputs
    declared = {vi.name: vi.type.tensor_type for vi in model.graph.input}
    want: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
        o: (
            np.dtype(helper.tensor_dtype_to_np_dtype(declared[o].elem_type)),
            tuple(d.dim_value for d in declared[o].shape.dim),
        )
        for o, _ in ports
    }

    def candidates(name: str) -> list[str]:  # KeyError: no input of that name
        found = [o for o, b in ports if name in (o, b)]
        if not found:
            raise KeyError(
                f"the model has no input '{name}' (inputs: {', '.join(o for o, _ in ports)})"
            )
        return found

    def limit(name: str) -> int:
        return max(want[o][0].itemsize * int(np.prod(want[o][1])) for o in candidates(name))

    def check(name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        if not any(dtype == want[o][0] and shape == (want[o][1] or (1,)) for o in candidates(name)):
            o = candidates(name)[0]
            raise ValueError(
                f"input '{o}' is {want[o][0]} {list(want[o][1])}: save an "
                "array of that element type and shape"
            )

    pairs: list[tuple[str, np.ndarray]] = []
    for g in given:
        flag = f"--input {g}"
        if "=" not in g and g.endswith(".npz"):
            pairs += read_archive(g, flag, limit, check).items()
        elif "=" in g:
            name, path = g.split("=", 1)
            try:
                size = limit(name)
            except KeyError as e:
                raise ValueError(f"{flag}: {e.args[0]}") from None
            pairs.append(
                (
                    name,
                    load_npy(path, flag, size, f"input '{name}'", functools.partial(check, name)),
                )
            )
        else:
            raise ValueError(f"{flag}: expected NAME=FILE.npy or FILE.npz")
    names = resolve_names([n for n, _ in pairs], ports, "input")
    inputs = {names[n]: a.reshape(want[names[n]][1]) for n, a in pairs}
    if missing := [o for o, _ in ports if o not in inputs]:
        raise ValueError(
            f"--input: no array for the model's input(s) {', '.join(missing)}: "
            "give every input, or none for random ones"
        )
    return inputs


def run_bisect(
    src: str, options: CompileOptions, given: Sequence[str], seed: int, save_stem: str | None = None
) -> int:
    """Print the bisection of `src`; with `save_stem`, the programs of the
    last step that matches and of the first that differs go to
    STEM.before.mlir and STEM.after.mlir (or `.nem`), to `diff`."""
    from nem.compile.bisect import bisect

    if importlib.util.find_spec("onnxruntime") is None:
        print(
            "nem-compile: error: --bisect compares with onnxruntime: pip install onnxruntime "
            "(the 'test' extra)",
            file=sys.stderr,
        )
        return 1
    from nem.frontends.onnx import OnnxImportError
    from nem.frontends.onnx.validate import load_model, validate

    try:  # read and validated as compile_onnx reads it (D-COMPILE-VALIDATE)
        model = load_model(src, src, options.max_model_bytes)
        validate(model, src, options.max_nodes)
    except OnnxImportError as e:
        print(e.render(), file=sys.stderr)
        return 1
    try:
        inputs = read_inputs(model, given)
    except Exception as e:  # a bad input file or name (InputError, check's): one line
        print(f"nem-compile: error: --bisect: {e}", file=sys.stderr)
        return 2
    b = bisect(model, options, inputs, seed, run_nem=run_nem)
    print(f"{src}: {b.render()}")
    if save_stem and b.culprit is not None:
        for suffix, step in ((".before", b.last_match()), (".after", b.culprit)):
            if step is not None:
                path = f"{save_stem}{suffix}{'.nem' if step.stage == 'lower' else '.mlir'}"
                Path(path).write_text(step.text, encoding="utf-8")
                print(f"wrote {path} ({step.name})")
    if b.culprit is not None or b.compile_error is not None:
        return 1
    return 3 if b.not_run else 0  # 3: none differs, but a step was not run
