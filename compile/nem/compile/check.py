"""Comparing a compiled program's outputs with onnxruntime.

Tolerances per element type (D-COMPILE-TOL), elementwise
`|got - want| <= atol + rtol * |want|`:

* f32: atol 1e-5, rtol 1e-4. The programs compute in f32 with a different
  summation order than onnxruntime's kernels (blocked GEMM, vectorized
  reductions); for the models here (dot products of at most a few thousand
  terms of O(1) values) the differences are a few f32 ulps of the
  accumulated magnitude.
* f16: atol 1e-2, rtol 1e-2. linalg accumulates f16 matmuls and
  convolutions in f16 (every partial sum rounded to 11 bits), onnxruntime
  accumulates in f32: the difference grows with the reduction length (about
  sqrt(K) half-ulps), 1e-2 covers K up to a few hundred at O(1) values.
* f64: f32's, as the program computes an f64 model in f32 (D-COMPILE-F64).
* int32, int64, bool: exact (int64 is computed in i32, D-COMPILE-I64; a
  bool is an i32 0 or 1, D-COMPILE-BOOL).

    python -m nem.compile.check model.onnx --input x=x.npy --output y=y.npy

compares `y.npy` with onnxruntime's output `y` on the same input; exit
status 1 when an output is out of tolerance.  The arrays are those of the
program's buffers: an f64 (int64, bool) input or output of the model is f32
(int32) there (D-COMPILE-F64, D-COMPILE-I64, D-COMPILE-BOOL) and is
converted for onnxruntime.  The files are what `nem-run` takes and writes,
checked as it checks them (`Port`, `elements.dtype_mismatch`), and anything
else is refused (exit status 2) rather than compared: a `.npy` of the
buffer's element type in little-endian order (a big-endian file's bytes are
other numbers), an output's in the model's shape (`--output 'y:f32[4,10]=y.npy'`)
or its elements flat (`--output y=y.npy`; 1-D uint8 bytes too), or a raw file
of exactly the buffer's bytes; no `.npz` archive.  A float output out of tolerance of onnxruntime's, of a model
that holds float16 tensors, is also compared with onnx's reference
evaluator, which computes each op in its declared type (onnxruntime's CPU
kernels compute some float16 ops in float32, and may drop a Cast to float16
and back): within tolerance of it, the output passes, both lines printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnx

TOLERANCES = {
    np.dtype(np.float32): (1e-5, 1e-4),
    np.dtype(np.float16): (1e-2, 1e-2),
    np.dtype(np.float64): (1e-5, 1e-4),
    np.dtype(np.int32): (0.0, 0.0),
    np.dtype(np.int64): (0.0, 0.0),
    np.dtype(np.bool_): (0.0, 0.0),
}


def max_violation(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / (atol + rtol |want|): at most 1 is within tolerance."""
    atol, rtol = TOLERANCES[np.dtype(want.dtype)]
    g, w = got.astype(np.float64), want.astype(np.float64)
    if g.shape != w.shape:
        raise ValueError(f"shape {g.shape} differs from onnxruntime's {w.shape}")
    fin = _numbers(g, w)
    if fin is None:
        return float("inf")
    if atol == rtol == 0.0:  # integers: exact
        return 0.0 if np.array_equal(g[fin], w[fin]) else float("inf")
    return float(np.max(np.abs(g[fin] - w[fin]) / (atol + rtol * np.abs(w[fin])), initial=0.0))


def onnxruntime_run(
    model: str | Path | onnx.ModelProto, inputs: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The model's outputs by ONNX name (CPU execution provider)."""
    import onnx
    import onnxruntime as ort

    from nem.frontends.onnx.validate import load_model

    proto = model if isinstance(model, onnx.ModelProto) else load_model(str(model))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # errors only: not a warning per unused initializer
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, inputs)))


PROGRAM_DTYPES = {
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.int64): np.dtype(np.int32),
    np.dtype(np.bool_): np.dtype(np.int32),
}
"""The element type a program holds an ONNX type in (D-COMPILE-F64, D-COMPILE-I64,
D-COMPILE-BOOL)."""


class Port:
    """A model input or output as the program holds it: `dtype` and
    `shape` are its buffer's element type and the model's shape (None: an
    input whose shape is symbolic, which onnxruntime checks), and `text`
    names it in errors: `output 'y' (f32[4,10])`."""

    def __init__(
        self,
        kind: str,
        onnx_name: str,
        buffer: str,
        model_dtype: np.dtype,
        shape: Sequence[int] | None,
    ):
        self.dtype = PROGRAM_DTYPES.get(np.dtype(model_dtype), np.dtype(model_dtype))
        self.shape: tuple[int, ...] | None = None if shape is None else tuple(shape)
        self.kind, self.buffer = kind, buffer
        from nem.dialect.elements import elem_of_dtype

        self.elem = elem_of_dtype(self.dtype)
        dims = "?" if self.shape is None else ",".join(map(str, self.shape))
        self.text = (
            f"{kind} '{onnx_name}'"
            + (f" (buffer {buffer})" if buffer != onnx_name else "")
            + f" ({self.elem or self.dtype}[{dims}]"
            + (f"; {np.dtype(model_dtype)} in the model" if self.dtype != model_dtype else "")
            + ")"
        )

    @property
    def nbytes(self) -> int | None:
        return None if self.shape is None else int(np.prod(self.shape)) * self.dtype.itemsize

    def check_header(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Refuse (ValueError) a `.npy` array of `shape` and `dtype`: its
        element type must be the buffer's, by nem-run's own rule
        (`elements.dtype_mismatch`: a big-endian file is refused, not read
        as other numbers); an output's shape must be the model's or its
        elements flat (`nem-run --output y=y.npy` writes those), or 1-D
        bytes nem-run wrote of an untyped buffer.  An input's shape is
        onnxruntime's to check."""
        from nem.dialect.elements import dtype_mismatch

        flat = "nem-run --output " + self.buffer + "=FILE.npy"
        if self.kind == "output" and dtype == np.uint8 and self.dtype != np.uint8:
            if shape != (self.nbytes,):
                raise ValueError(
                    f"{self.nbytes} bytes (uint8) give {self.text}, not shape {list(shape)}"
                )
            return
        fix = f", as {flat} writes it" if self.kind == "output" else ", as nem-run --input takes"
        if self.elem and (why := dtype_mismatch(dtype, self.elem, self.text, fix)):
            raise ValueError(why)
        if self.kind == "output" and self.shape is not None:
            count = int(np.prod(self.shape))
            if shape not in (self.shape or (1,), (count,)):
                typed = f"{self.buffer}:{self.elem}[{','.join(map(str, self.shape))}]"
                raise ValueError(
                    f"shape {list(shape)} does not match {self.text}: give its {count} "
                    f"elements flat ({flat}) or in its shape (nem-run --output "
                    f"'{typed}=FILE.npy')"
                )


def _as_array(path: str, port: Port) -> np.ndarray:
    """The array of an `--input`/`--output` file for `port`: a `.npy`
    checked against it (`Port.check_header`, before its data is read), or
    a raw file of exactly the port's bytes.  A `.npz` archive is refused:
    nem-run writes one array a file (it was read as raw bytes, an outside
    user, session 66, as were a raw file 64 bytes long and a `.npy` of
    shape [40, 1] for a [4, 10] output, both compared and passed)."""
    from nem.dialect.array_files import load_npy
    from nem.dialect.limits import MAX_INPUT_FILE_BYTES
    from nem.dialect.source_files import read_file_bytes, regular_file

    if path.endswith(".npz"):
        raise ValueError(
            f"'{path}' is a .npz archive; give one array: a .npy file (numpy.save, "
            f"nem-run --{port.kind} {port.buffer}=FILE.npy) or the raw bytes"
        )
    limit = port.nbytes if port.nbytes is not None else MAX_INPUT_FILE_BYTES
    if path.endswith(".npy"):
        arr = load_npy(path, limit, port.text, port.check_header)
        if arr.dtype == np.uint8 and port.dtype != np.uint8:  # nem-run --output bytes
            arr = arr.view(port.dtype)
        if port.shape is None or arr.size != np.prod(port.shape):  # (an input: onnxruntime's)
            return arr
        return arr.reshape(port.shape)  # its elements in order, as nem-run writes them
    if port.shape is None or port.nbytes is None:
        raise ValueError(
            f"'{path}' is not a .npy file, and {port.text} has no fixed shape to read raw "
            "bytes in: save the array with numpy.save"
        )
    size = regular_file(path, "").st_size
    if size != port.nbytes:
        raise ValueError(
            f"'{path}' holds {size} bytes, {port.text} has {port.nbytes}: a raw file "
            f"holds exactly its bytes (as nem-run --{port.kind} {port.buffer}=FILE "
            "does), or give a .npy file"
        )
    data = read_file_bytes(path, port.nbytes, "")
    return np.frombuffer(data, port.dtype).reshape(port.shape)


def model_dtypes(inputs: dict[str, np.ndarray], model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The arrays nem-run took (f32 for an f64 input, int32 for an int64 or
    bool one) in the element types the model declares, for onnxruntime."""
    from onnx import helper

    declared = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
    out = {}
    for name, arr in inputs.items():
        elem = declared.get(name, 0)
        want = helper.tensor_dtype_to_np_dtype(elem) if elem else arr.dtype
        out[name] = arr.astype(want) if PROGRAM_DTYPES.get(want) == arr.dtype else arr
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m nem.compile.check", description="compare outputs with onnxruntime"
    )
    p.add_argument("model")
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="a model input, as nem-run --input takes it (a .npy array, or raw bytes)",
    )
    p.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a file the compiled program wrote (nem-run --output), read and compared with "
        "onnxruntime's output NAME; at least one",
    )
    args = p.parse_args(argv)
    pairs = [a.split("=", 1) for a in args.input + args.output]
    if any(len(x) != 2 for x in pairs):
        print("check: error: --input/--output expect NAME=FILE", file=sys.stderr)
        return 2
    try:
        return _compare(args)
    except _CheckError as e:
        print(f"check: error: {e}", file=sys.stderr)
        return 2


class _CheckError(Exception):
    """A bad file or name on the command line: one line, exit status 2."""


def _load(path: str, what: str, port: Port) -> np.ndarray:
    from nem.dialect.source_files import FileRefused, regular_file

    try:
        regular_file(path, "")  # a FIFO would block, a device never end (D-FILE-PATHS)
        return _as_array(path, port)
    except (OSError, ValueError, FileRefused) as e:  # missing, not .npy, wrong size
        raise _CheckError(f"{what}={path}: {e}") from None


def _input_ports(model: onnx.ModelProto, ports: Sequence[tuple[str, str]]) -> dict[str, Port]:
    """The model's inputs by ONNX name, as the program's buffers hold them
    (`ports`: `interface_names`' (ONNX name, buffer name) pairs)."""
    from onnx import helper

    declared = {vi.name: vi.type.tensor_type for vi in model.graph.input}
    out = {}
    for o, b in ports:
        t = declared[o]
        static = t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim)
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))
        except (KeyError, TypeError, ValueError):
            raise _CheckError(f"input '{o}' of the model has no numeric element type") from None
        out[o] = Port("input", o, b, dtype, [d.dim_value for d in t.shape.dim] if static else None)
    return out


def resolve_names(
    given: Sequence[str], ports: Sequence[tuple[str, str]], what: str
) -> dict[str, str]:
    """Each NAME of `--input`/`--output` NAME=FILE -> the ONNX name of the
    model input or output it denotes, `ports` being the (ONNX name, buffer
    name) pairs of `interface_names` (D-COMPILE-CHECK-NAMES).  NAME may be
    either spelling.  It can be both, for two tensors: ONNX `a.b` and `a_b`
    are buffers `a_b` and `a_bv2`, so `a_b` is one tensor's ONNX name and
    the other's buffer name.  Then a tensor that another NAME denotes
    unambiguously is not a candidate (`a.b` with `a_b`, or `a_bv2` with
    `a_b`, each settle it); two candidates left is an error naming both
    spellings.  Two NAMEs of one input is an error too (which array?)."""
    buffer_of, onnx_of = dict(ports), {b: o for o, b in ports}
    listing = ", ".join(o + (f" (buffer {b})" if b != o else "") for o, b in ports)
    cands: dict[str, set[str]] = {}
    for name in given:
        cands[name] = {name} & buffer_of.keys() | ({onnx_of[name]} if name in onnx_of else set())
        if not cands[name]:
            raise _CheckError(
                f"--{what} {name}: the model has no {what} '{name}' ({what}s: {listing or 'none'})"
            )
    changed = True
    while changed:  # settle ambiguous names by the tensors the others denote
        changed = False
        for name, c in cands.items():
            taken = {next(iter(d)) for n, d in cands.items() if n != name and len(d) == 1}
            if len(c) > 1 and c - taken and c - taken != c:
                cands[name], changed = c - taken, True
    for name, c in cands.items():
        if len(c) > 1:
            other = onnx_of[name]
            raise _CheckError(
                f"--{what} {name} is ambiguous: ONNX {what} '{name}' is buffer "
                f"'{buffer_of[name]}', and buffer '{name}' is ONNX {what} '{other}'\n"
                f"fix: write '{buffer_of[name]}' or '{other}' for the one you mean, or name "
                f"the other {what} too (by either spelling)"
            )
    chosen = {n: next(iter(c)) for n, c in cands.items()}
    if what == "input":
        by_tensor: dict[str, str] = {}
        for name, o in chosen.items():
            if o in by_tensor:
                raise _CheckError(
                    f"--input {by_tensor[o]} and --input {name} both name ONNX "
                    f"input '{o}' (buffer '{buffer_of[o]}'): give it once"
                )
            by_tensor[o] = name
    return chosen


def _compare(args: argparse.Namespace) -> int:
    import onnx

    from nem.dialect.source_files import regular_file
    from nem.frontends.onnx.graph import interface_names

    try:
        regular_file(args.model, "model")
        model = onnx.load(args.model)
    except Exception as e:  # onnx raises OSError, DecodeError, ...: any is a bad file
        raise _CheckError(f"{args.model}: cannot read the model: {e}") from None
    table = interface_names(model.graph)  # the compiler's buffer names
    given = [a.split("=", 1) for a in args.input]
    in_names = resolve_names([n for n, _ in given], table.inputs, "input")
    out_names = resolve_names([a.split("=", 1)[0] for a in args.output], table.outputs, "output")
    in_ports = _input_ports(model, table.inputs)
    inputs = {
        in_names[name]: _load(path, f"--input {name}", in_ports[in_names[name]])
        for name, path in given
    }
    missing = [(o, b) for o, b in table.inputs if o not in inputs]
    if missing:
        raise _CheckError(
            "no array for the model's input "
            + ", ".join(f"'{o}'" + (f" (buffer '{b}')" if b != o else "") for o, b in missing)
            + f"\nfix: give --input {missing[0][1]}=FILE.npy"
        )
    if not args.output:  # exit 0 having compared nothing would read as a pass
        raise _CheckError(
            "nothing to compare: give --output NAME=FILE, a file nem-run wrote (outputs: "
            + ", ".join(f"'{o}'" for o, _ in table.outputs)
            + ")"
        )
    try:
        want = onnxruntime_run(model, model_dtypes(inputs, model))
    except Exception as e:  # onnxruntime's Fail/InvalidArgument: missing or mis-shaped input
        raise _CheckError(f"onnxruntime cannot run {args.model}: {e}") from None
    ok = True
    second: dict[str, np.ndarray] | None = None
    for a in args.output:
        name, path = a.split("=", 1)
        ref = want[out_names[name]]
        buffer = dict(table.outputs)[out_names[name]]
        port = Port("output", out_names[name], buffer, ref.dtype, ref.shape)
        got = _load(path, f"--output {name}", port)
        v = max_violation(got, ref)
        atol, rtol = TOLERANCES[np.dtype(ref.dtype)]
        diff = _max_diff(got, ref)
        status = "OK" if v <= 1.0 else "MISMATCH"
        print(
            f"{name}: max |nem - onnxruntime| = {diff:.3g} (tolerance {atol:g} + {rtol:g}"
            f"*|ref|, {ref.dtype}): {status}"
        )
        if v > 1.0 and ref.dtype.kind == "f" and holds_float16(model):
            second = second or reference_run(model, model_dtypes(inputs, model))
            v = _second_opinion(name, got, second[out_names[name]], ref)
        ok &= v <= 1.0
    return 0 if ok else 1


def holds_float16(model: onnx.ModelProto) -> bool:
    """Whether a tensor of `model`'s graph is float16 (by onnx's shape
    inference, where it runs): then onnxruntime's result for any float
    output may differ from the declared arithmetic, an f32 output too.  An
    outside user, session 62: Cast(x, f16), Mul by 3, Cast to f32 gave
    0.00244 against onnxruntime at f32's tolerance, a MISMATCH, though the
    program matches the reference evaluator exactly (onnxruntime, which has
    no f16 Mul on the CPU, computes it in f32 and drops the first Cast's
    rounding)."""
    import onnx

    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # (a model shape inference rejects: the declared types only)
        graph = model.graph
    f16 = onnx.TensorProto.FLOAT16
    infos = (*graph.input, *graph.output, *graph.value_info)
    return any(v.type.tensor_type.elem_type == f16 for v in infos) or any(
        t.data_type == f16 for t in graph.initializer
    )


def reference_run(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's outputs by onnx's reference evaluator, which computes
    each op in its declared type."""
    from onnx.reference import ReferenceEvaluator

    with np.errstate(all="ignore"):  # (an overflow is its result, not a warning)
        outs = ReferenceEvaluator(model).run(None, inputs)
    return {o.name: np.asarray(v) for o, v in zip(model.graph.output, outs)}


def _numbers(g: np.ndarray, w: np.ndarray) -> np.ndarray | None:
    """Where both arrays hold a number, when each NaN and infinity of one is
    the other's (the same sign), else None."""
    odd = ~np.isfinite(g) | ~np.isfinite(w)
    return ~odd if np.array_equal(g[odd], w[odd], equal_nan=True) else None


def _max_diff(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| over the elements both hold a number in (inf where
    one holds a NaN or an infinity the other does not)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    fin = _numbers(g, w)
    return float("inf") if fin is None else float(np.max(np.abs(g[fin] - w[fin]), initial=0.0))


def _second_opinion(name: str, got: np.ndarray, ref: np.ndarray, ort: np.ndarray) -> float:
    """A float output of a model holding float16 tensors (`holds_float16`)
    onnxruntime disagrees with, against onnx's reference
    evaluator (printed; its violation returned): onnxruntime's CPU kernels
    compute some float16 ops in float32 and round once (a Mul then Round:
    x * 0.7 is 0.5 exactly in float16, which rounds to 0, and 0.50022 in
    float32, which rounds to 1; an outside review, session 54, found the
    check calling a right program a MISMATCH).  A reference that is not
    finite where onnxruntime's output is (an f16 sum of squares that
    overflows, which onnxruntime takes in float32: the same review) is no
    second opinion; where the program matches it, the line says that float16
    overflows there (an outside user read the MISMATCH as the program's
    fault, session 55)."""
    v = reference_violation(got, ref, ort)
    if v <= 1.0:
        verdict = "OK (onnxruntime computes some float16 ops in float32)"
    elif _overflows(ref, ort):
        why = "it is not finite where onnxruntime's output is"
        if max_violation(got, ref.astype(got.dtype)) <= 1.0:  # (say who overflows, session 55)
            why += (
                "; the program gives its values: float16 overflows here in the arithmetic "
                "the ONNX spec defines, which onnxruntime, computing in float32, does not show"
            )
        verdict = f"MISMATCH ({why})"
    else:
        verdict = "MISMATCH"
    print(f"{name}: max |nem - onnx reference evaluator| = {_max_diff(got, ref):.3g}: {verdict}")
    return v


def _overflows(ref: np.ndarray, ort: np.ndarray) -> bool:
    """Whether the reference evaluator's output is not finite where
    onnxruntime's is, or the other way: then it is no second opinion."""
    return not np.array_equal(np.isfinite(ref), np.isfinite(ort))


def reference_violation(got: np.ndarray, ref: np.ndarray, ort: np.ndarray) -> float:
    """The violation of float output `got` against onnx's reference
    evaluator's output `ref` (`_second_opinion`, and `nem.compile.bisect`'s
    steps), infinite where it overflows where onnxruntime's output `ort` does
    not."""
    return float("inf") if _overflows(ref, ort) else max_violation(got, ref.astype(got.dtype))


if __name__ == "__main__":
    sys.exit(main())
