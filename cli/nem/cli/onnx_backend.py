"""An ONNX backend for onnx's test runner: `nem-compile` + the reference
runtime behind `onnx.backend.base.Backend` (D-COMPILE-BACKEND).

    from nem.cli.onnx_backend import NemBackend
    rep = NemBackend.prepare(onnx.load("model.onnx"))     # compiles (npm_pro_x1)
    outputs = rep.run([x])                                # runs in nem-run's runtime

`prepare` compiles the model (`nem.compile.compile_onnx`, the options of
nem-compile as keywords: `nem_device=`, `route=`, ...); `run` takes the
inputs as onnx's runner gives them (a list in the order of the model's
graph inputs, or a dict by ONNX name), writes them into the program's
input buffers, runs it to completion and returns the outputs with the
model's declared shapes and element types: what the program computes in
f32 or i32 for a model's f64, int64 or bool (D-COMPILE-F64, D-COMPILE-I64,
D-COMPILE-BOOL: a bool is an i32 0 or 1) is returned as f64, int64 or bool.  An int64 input outside int32's range is an
error, not a wrapped value.  A graph input the program does not read (an
integer whose values only fix a shape the model declares,
D-COMPILE-IFACE) is ignored.  A graph input read as a compile-time
operand (a reduction's axes, a Slice's starts: D-COMPILE-BIND) is bound to
the value `run` is given: such a model is compiled at its first `run`,
and again for other values of those inputs.

It lives with the tools because it joins the compiler and the runtime
(`nem.compile` imports no runtime).  The backend test of the onnx
package's data (`test/unit/test_onnx_backend.py`) and
`bench/bench_onnx_backend.py` use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

DEFAULT_DEVICE = "npm_pro_x1"


def load_case(case_dir: str) -> tuple[onnx.ModelProto, list[np.ndarray], list[np.ndarray]]:
    """The model of an onnx backend test case and its `test_data_set_0`
    (inputs, expected outputs), read as onnx's runner reads them."""
    import glob
    import os

    from onnx import numpy_helper

    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    data = os.path.join(case_dir, "test_data_set_0")

    def arrays(prefix: str) -> list[np.ndarray]:
        files = sorted(
            glob.glob(os.path.join(data, f"{prefix}_*.pb")),
            key=lambda f: int(f.rsplit("_", 1)[1].split(".")[0]),
        )
        return [numpy_helper.to_array(onnx.load_tensor(f)) for f in files]

    return model, arrays("input"), arrays("output")


class NemRunError(RuntimeError):
    """The compiled program did not complete (deadlock, runtime error, race)."""


class NemRep(BackendRep):
    """A compiled model, run once per `run` call on a fresh memory.  A
    model whose graph inputs include compile-time operands (`late`: a
    reduction's axes, a Slice's starts, ...) is compiled at `run`, with
    those inputs bound to the values given (D-COMPILE-BIND), once per
    distinct value."""

    def __init__(
        self,
        model: onnx.ModelProto,
        result: Any,
        device: str,
        options: dict[str, Any] | None = None,
        late: Sequence[str] = (),
    ):
        self.model = model
        self.result = result
        self.device = device
        self.options = options or {}
        self.late = list(late)
        self.compiled: dict[tuple[Any, ...], Any] = {}
        self.declared = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}

    def _feeds(
        self, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        if isinstance(inputs, Mapping):
            return {str(k): np.asarray(v) for k, v in inputs.items()}
        names = [i.name for i in self.model.graph.input]
        return {names[k]: np.asarray(v) for k, v in enumerate(inputs)}

    def _result(self, feeds: dict[str, np.ndarray]) -> Any:
        """The program for these feeds: the one compiled by `prepare`, or
        the one compiled for the values of the late inputs."""
        if not self.late:
            return self.result
        missing = [n for n in self.late if n not in feeds]
        if missing:
            raise ValueError(f"no value given for input '{missing[0]}'")
        key = tuple((n, feeds[n].dtype.str, feeds[n].shape, feeds[n].tobytes()) for n in self.late)
        if key not in self.compiled:
            from nem.compile import compile_onnx

            bind = {**dict(self.options.get("bind", {})), **{n: feeds[n] for n in self.late}}
            options = {**self.options, "bind": bind}
            self.compiled[key] = compile_onnx(self.model, device=self.device, **options)
        return self.compiled[key]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        from nem.runtime.api import NemInterpreter

        feeds = self._feeds(inputs)
        result = self._result(feeds)
        iface = result.interface
        it = NemInterpreter(device=self.device)
        it.load_string(result.nem, file="model.nem")
        for name, array in iface.weights.items():
            it.write_tensor(name, array)
        for buf, shape, dtype in iface.inputs:
            onnx_name = iface.onnx_names[buf]
            if onnx_name not in feeds:
                raise ValueError(f"no value given for input '{onnx_name}'")
            it.write_tensor(buf, _as_buffer(feeds[onnx_name], dtype, onnx_name).reshape(shape))
        res = it.run()
        if not res.ok:
            why = res.error.render() if res.error is not None else res.status
            raise NemRunError(f"the program did not complete: {why}")
        outs = []
        for buf, shape, dtype in iface.outputs:
            got = it.read_tensor(buf, shape, dtype)
            elem = self.declared.get(iface.onnx_names[buf], 0)
            want = onnx.helper.tensor_dtype_to_np_dtype(elem) if elem else got.dtype
            outs.append(np.asarray(got).astype(want).reshape(shape))
        return tuple(outs)


class InputRangeError(ValueError):
    """An f64 or int64 input whose values the program's f32 or i32 cannot hold."""


def _as_buffer(array: np.ndarray, dtype: np.dtype, name: str) -> np.ndarray:
    """`array` in the buffer's element type: f64 rounded to f32 (finite
    values beyond f32's range are an error, not an inf), int64 narrowed to
    int32 when every value fits, a bool as an int32 0 or 1."""
    if array.dtype == dtype:
        return array
    if np.issubdtype(array.dtype, np.integer) and np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise InputRangeError(
                f"input '{name}' has values outside {np.dtype(dtype).name}'s "
                "range: the program computes int64 in int32 "
                "(D-COMPILE-I64)"
            )
    if np.issubdtype(array.dtype, np.floating) and np.issubdtype(dtype, np.floating):
        finite = array[np.isfinite(array)]
        if finite.size and np.abs(finite).max() > np.finfo(dtype).max:
            raise InputRangeError(
                f"input '{name}' has values beyond {np.dtype(dtype).name}'s "
                f"range (up to {np.abs(finite).max():.3g}): the program "
                "computes f64 in f32 (D-COMPILE-F64)"
            )
    return array.astype(dtype)


class NemBackend(Backend):
    """onnx's backend interface over nem-compile and the reference runtime."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> NemRep:
        from nem.compile import compile_onnx
        from nem.frontends.onnx.bind import compile_time_inputs

        target = kwargs.pop("nem_device", DEFAULT_DEVICE)
        bound = dict(kwargs.get("bind", {}))
        late = [n for n in compile_time_inputs(model) if n not in bound]
        if late:  # compiled at run, for the values given (D-COMPILE-BIND)
            return NemRep(model, None, target, kwargs, late)
        result = compile_onnx(model, device=target, **kwargs)
        return NemRep(model, result, target)

    @classmethod
    def run_model(
        cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"  # onnx's runner asks for CPU; the target is nem_device
