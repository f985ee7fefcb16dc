"""Kernels of the user's (`NemInterpreter(kernels={opcode: fn})`,
docs/python-api.md "Your own kernels"): what a kernel gets wrong is a
located error naming it, never a traceback from inside the runtime; its
inputs are read-only; an unknown opcode is refused up front (an outside
user's misspelt 'rleu' ran the reference relu without a word)."""

from __future__ import annotations

import numpy as np
import pytest

from nem.runtime import NemInterpreter
from nem.runtime.numerics import NotSupported, NumericError

RELU = """device "npm_pro_x1.nem"
program relu1:
buffer X : L2 (size=64, align=64)
buffer Y : L2 (size=64, align=64)
x = region(X, 0, 64) elem=f16, shape=[32], layout=N
y = region(Y, 0, 64) elem=f16, shape=[32], layout=N
t = relu.async in x out y
wait(t)
"""


def run_with(kernel) -> tuple[NemInterpreter, object]:
    it = NemInterpreter(kernels={"relu": kernel})
    it.load_string(RELU, "relu.nem")
    it.write_tensor("x", np.linspace(-2, 2, 32, dtype=np.float16))
    return it, it.run()


def test_a_working_kernel_replaces_the_reference_one():
    it, res = run_with(lambda ins, outs, attrs: [np.abs(ins[0].array)])
    assert res.ok
    assert it.read_tensor("y").tolist() == np.abs(np.linspace(-2, 2, 32, dtype=np.float16)).tolist()


def kernel_writing_its_input(ins, outs, attrs):
    ins[0].array[:] = 7
    return [ins[0].array.copy()]


@pytest.mark.parametrize(
    "kernel, message",
    [
        (
            lambda ins, outs, attrs: [np.zeros(16, np.float16)],
            "kernel 'relu' returned 16 elements for output y of shape [32]",
        ),
        (
            lambda ins, outs, attrs: None,
            "your kernel for 'relu' returned NoneType, not a list of arrays",
        ),
        (
            lambda ins, outs, attrs: [np.zeros(32)],
            "kernel 'relu' returned float64 for output y of type f16",
        ),
        (
            lambda ins, outs, attrs: 1 / 0,
            "your kernel for 'relu' raised ZeroDivisionError: division by zero",
        ),
        (lambda ins: [ins[0].array], "your kernel for 'relu' raised TypeError"),
        (
            kernel_writing_its_input,
            "your kernel for 'relu' raised ValueError: assignment destination is read-only",
        ),
    ],
)
def test_what_a_kernel_gets_wrong_is_a_located_error(kernel, message):
    it, res = run_with(kernel)
    assert res.status == "error" and res.error is not None
    assert message in res.error.message, res.error.render()
    assert res.error.loc is not None and res.error.loc.line == 7 and res.error.fix
    assert res.error.rule == "EXEC-03"
    assert (it.read_tensor("x") != 7).all()  # the input was not changed


def refusing(ins, outs, attrs):
    raise NotSupported("only positive inputs")


def undefined(ins, outs, attrs):
    raise NumericError("no relu of a negative zero")


@pytest.mark.parametrize(
    "kernel, message, fix",
    [
        (refusing, "not supported: only positive inputs", "your kernel for this opcode refused"),
        (
            undefined,
            "no defined result: no relu of a negative zero",
            "the input values have no defined result",
        ),
    ],
)
def test_a_kernel_refusing_its_operands_reads_as_the_reference_kernels(kernel, message, fix):
    """docs/python-api.md: a kernel raises NotSupported for inputs it does not
    handle (NumericError for values without a defined result) and the run
    stops as a reference kernel's would, not as a broken kernel."""
    _, res = run_with(kernel)
    assert res.error.message == message and res.error.rule == "EXEC-03"
    assert res.error.fix.startswith(fix), res.error.fix


def test_kernels_are_fixed_when_the_interpreter_is_made():
    """A run after prepare() binds the kernels; a later change would apply to
    unprepared runs only (D-RT-PREPARE): the mapping is read-only."""
    it = NemInterpreter(kernels={"relu": lambda ins, outs, attrs: [ins[0].array]})
    with pytest.raises(TypeError):
        it.kernels["relu"] = lambda ins, outs, attrs: [-ins[0].array]  # type: ignore[index]
    with pytest.raises(TypeError, match="kernels must be a dict {opcode: fn}, not list"):
        NemInterpreter(kernels=[("relu", abs)])


def test_unknown_opcodes_and_values_that_are_not_functions_are_refused():
    with pytest.raises(ValueError, match="'rleu' is not an opcode; did you mean 'relu'"):
        NemInterpreter(kernels={"rleu": abs})
    with pytest.raises(TypeError, match="the kernel for 'relu' is not callable"):
        NemInterpreter(kernels={"relu": 42})
