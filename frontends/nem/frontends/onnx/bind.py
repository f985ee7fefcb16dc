"""Graph inputs bound to values at compile time (D-COMPILE-BIND).

A NEM program has no shapes or indices computed at run time: a
reduction's axes, a Slice's starts, a Resize's sizes, a Clip's bounds
must be known when it is compiled.  A model that takes such an operand
as a graph input (onnx's node tests do, and hand-written models) is
compiled for given values of it, as `jax.jit` compiles for its static
arguments: `bind_inputs` makes each bound input an initializer of a copy
of the model, so that the simplifier folds it into the shapes it fixes
and the converters read it as any constant.  The user's model is not
modified.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from nem.frontends.onnx.diagnostics import OnnxImportError

INDEX_OPERANDS = frozenset(
    {
        "shape",
        "axes",
        "starts",
        "ends",
        "steps",
        "split",
        "pads",
        "repeats",
        "sizes",
        "scales",
        "roi",
    }
)
"""Schema names of inputs that are compile-time operands of any op that
has them (the importer reads their values, D-COMPILE-SHAPES)."""

OP_OPERANDS = frozenset(
    {
        ("ConstantOfShape", "input"),
        ("Clip", "min"),
        ("Clip", "max"),
        ("Pad", "constant_value"),
        ("TopK", "K"),
        ("CumSum", "axis"),
        ("Dropout", "ratio"),
        ("Dropout", "training_mode"),
    }
)
"""(op type, schema name) of the other compile-time operands: a name that
is data in most ops (`input`) or a value the importer folds into the
computation (a Clip bound, a Pad value)."""


def formal_name(node: onnx.NodeProto, k: int, opset: int) -> str:
    """The schema name of `node`'s input `k` ('' for an op onnx does not
    know); a variadic last input names every input from its position on."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except onnx.defs.SchemaError:
        return ""
    formals = list(schema.inputs)
    return formals[min(k, len(formals) - 1)].name if formals else ""


def is_compile_time(op_type: str, formal: str) -> bool:
    """Whether an input of this schema name is read at compile time."""
    return formal in INDEX_OPERANDS or (op_type, formal) in OP_OPERANDS


def bind_fix(name: str) -> str:
    """The fix for a graph input read as a compile-time operand."""
    return (
        f"bind '{name}' at compile time (nem-compile --bind {name}=VALUES, or "
        f"compile_onnx(model, bind={{'{name}': array}}): D-COMPILE-BIND), or make it "
        "an initializer or Constant"
    )


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def compile_time_inputs(model: onnx.ModelProto) -> list[str]:
    """The graph inputs (not initializers) that some node reads as a
    compile-time operand: the program cannot take them at run time, so
    they must be bound (`bind_inputs`)."""
    opset = _opset(model)
    inits = {t.name for t in model.graph.initializer}
    wanted = {i.name for i in model.graph.input} - inits
    found: list[str] = []
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            if (
                name in wanted
                and name not in found
                and is_compile_time(node.op_type, formal_name(node, k, opset))
            ):
                found.append(name)
    return [i.name for i in model.graph.input if i.name in found]


def bind_inputs(model: onnx.ModelProto, bind: Mapping[str, object], where: str) -> onnx.ModelProto:
    """A copy of `model` with each graph input named in `bind` replaced by
    an initializer holding its value: converted to the input's declared
    element type (an integer input takes integral values only) and shape
    (a flat list of the right length takes the declared shape).  An
    unknown name, a value of the wrong size or one the type cannot hold
    is an error naming the input."""
    inputs = {i.name: i for i in model.graph.input}
    inits = {t.name for t in model.graph.initializer}
    free = [n for n in inputs if n not in inits]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for name, value in bind.items():
        if name not in free:
            what = "an initializer" if name in inits else "not a graph input"
            raise OnnxImportError(
                f"cannot bind '{name}': it is {what} of the model (D-COMPILE-BIND)",
                where,
                fix=f"bind one of the model's inputs: {', '.join(free) or '(none)'}",
            )
        tensor = _bound_tensor(name, inputs[name], value, where)
        kept = [i for i in out.graph.input if i.name != name]
        del out.graph.input[:]
        out.graph.input.extend(kept)
        out.graph.initializer.append(tensor)
    return out


def _bound_tensor(
    name: str, vi: onnx.ValueInfoProto, value: object, where: str
) -> onnx.TensorProto:
    def refuse(why: str, fix: str) -> OnnxImportError:
        return OnnxImportError(f"cannot bind '{name}': {why} (D-COMPILE-BIND)", where, fix=fix)

    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or not tt.elem_type:
        raise refuse("it is not a tensor of a known element type", "bind a tensor input")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise refuse(f"its value is not an array ({e})", "give numbers") from None
    if array.dtype.kind not in "biuf":
        raise refuse(f"its value has element type {array.dtype}", "give numbers")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    static = [d for d in dims if d is not None]
    if tt.HasField("shape") and len(static) == len(dims) and array.shape != tuple(static):
        size = math.prod(static)
        if array.size != size:
            raise refuse(
                f"{array.size} value(s) given, the input is declared "
                f"{'x'.join(map(str, static)) or 'a scalar'}",
                f"give {size} value(s)",
            )
        array = array.reshape(static)
    elif tt.HasField("shape") and array.ndim != len(dims):
        raise refuse(
            f"a value of rank {array.ndim} given, the input is declared of rank {len(dims)}",
            f"give a value of rank {len(dims)}",
        )
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        if array.dtype.kind == "f" and not np.array_equal(array, np.round(array)):
            raise refuse(
                f"the input is {onnx.TensorProto.DataType.Name(tt.elem_type)}, "
                "a value given is not an integer",
                "give integers",
            )
        if dtype != np.bool_ and array.size:
            info = np.iinfo(dtype)
            if array.min() < info.min or array.max() > info.max:
                raise refuse(
                    f"a value is outside {np.dtype(dtype).name}'s range", "give values in range"
                )
    return numpy_helper.from_array(array.astype(dtype), name)
