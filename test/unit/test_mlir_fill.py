"""Constant-fill escape-hatch kernels run as a numpy fill (D-RT-MLIR-FILL):
bit for bit what xDSL's interpreter (the reference, D-RT-MLIR-KERNEL)
computes, and only for kernels that are exactly a fill of a whole memref."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from kernel_runs import HATCH, assert_bits, run

from nem.runtime import mlir_fill
from nem.runtime.escape_hatch import EscapeHatch
from nem.runtime.kernels import NumericError, Tensor
from nem.runtime.mlir_kernel import CompiledKernel

DTYPES = {"f32": np.float32, "i32": np.int32, "i8": np.int8, "u8": np.uint8}
MLIR = {"f32": "f32", "i32": "i32", "i8": "i8", "u8": "i8"}  # u8 regions: signless i8 memrefs


def fill_text(
    shape,
    elem: str,
    value: str,
    order=None,
    syms: bool = True,
    store_arg: int = 0,
    bounds=None,
    step: int = 1,
    offset: int = 0,
) -> str:
    """A lowering-style fill kernel: `in Y out Y` (two aliased memrefs), loops
    in `order` over `shape`, the constant stored through a map of symbols
    (as the lowering prints it) or of dims."""
    n = len(shape)
    order = order or list(range(n))
    bounds = bounds or shape
    mt = f"memref<{'x'.join(map(str, shape))}x{elem}>"
    lines = [
        f"func.func @kernel(%a0: {mt}, %a1: {mt}) {{",
        f"  %c = arith.constant {value} : {elem}",
    ]
    for depth, d in enumerate(order):
        lines.append("  " * (depth + 1) + f"affine.for %i{d} = 0 to {bounds[d]} step {step} {{")
    names = ", ".join(f"s{k}" if syms else f"d{k}" for k in range(n))
    res = ", ".join(
        (f"s{k}" if syms else f"d{k}") + (f" + {offset}" if offset and k == 0 else "")
        for k in range(n)
    )
    m = f"()[{names}] -> ({res})" if syms else f"({names}) -> ({res})"
    ivs = ", ".join(f"%i{k}" for k in range(n))
    lines.append(
        "  " * (n + 1) + f'"affine.store"(%c, %a{store_arg}, {ivs}) '
        f"<{{map = affine_map<{m}>}}> : ({elem}, {mt}, {', '.join(['index'] * n)}) -> ()"
    )
    for depth in range(n, 0, -1):
        lines.append("  " * depth + "}")
    lines += ["  func.return", "}"]
    return "\n".join(lines)


def _run_both(text: str, shape, elem: str, monkeypatch) -> tuple[np.ndarray, np.ndarray]:
    """The kernel on `in Y out Y` (one array, as the engine binds an in-place
    task) run by the interpreter and by the default backend."""
    dt = DTYPES[elem]
    start = np.arange(int(np.prod(shape)), dtype=dt).reshape(shape)
    outs = []
    for b in ("interpreter", "auto"):
        HATCH[:] = [EscapeHatch(b)]
        y = start.copy()
        (z,) = run(text, [Tensor(y, elem)], [Tensor(y, elem)])
        outs.append(np.asarray(z))
    return outs[0], outs[1]


VALUES = {
    "f32": [
        "0.000000e+00",
        "-0.000000e+00",
        "0xff800000",
        "0x7fc00001",
        "1.000000e-01",
        "1.401298e-45",
        "3.402823e+38",
    ],
    "i32": ["-1", "2147483647", "0"],
    "i8": ["-128", "127"],
    "u8": ["-1", "-128"],
}


@pytest.mark.parametrize("elem,value", [(e, v) for e, vs in VALUES.items() for v in vs])
def test_fill_is_the_interpreters_result(elem, value, monkeypatch):
    shape = (2, 3, 5)
    text = fill_text(shape, MLIR[elem], value, order=[1, 0, 2])
    assert mlir_fill.fill_of(CompiledKernel(text).fn, 2) is not None
    ref, got = _run_both(text, shape, elem, monkeypatch)
    assert_bits(got, ref)


@pytest.mark.parametrize("shape", [(7,), (1, 9, 4), (2, 1, 3, 4)])
@pytest.mark.parametrize("syms", [True, False])
def test_fill_any_rank_order_and_map_form(shape, syms, monkeypatch):
    for order in itertools.islice(itertools.permutations(range(len(shape))), 3):
        text = fill_text(shape, "f32", "-1.500000e+00", order=list(order), syms=syms)
        assert mlir_fill.fill_of(CompiledKernel(text).fn, 2) is not None
        ref, got = _run_both(text, shape, "f32", monkeypatch)
        assert_bits(got, ref)


NEAR_MISSES = {
    "short bound": dict(bounds=(2, 2, 5)),
    "step 2": dict(step=2),
    "offset in the map": dict(offset=1),
}


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_near_misses_are_not_fills(name, monkeypatch):
    """A kernel that does not store the constant into every element exactly
    once is left to the backends: same result (or the same error) as the
    interpreter's."""
    shape = (2, 3, 5)
    text = fill_text(shape, "f32", "2.000000e+00", **NEAR_MISSES[name])
    assert mlir_fill.fill_of(CompiledKernel(text).fn, 2) is None
    try:
        ref, got = _run_both(text, shape, "f32", monkeypatch)
    except NumericError as e:  # the offset map stores out of bounds
        assert name == "offset in the map", e
        return
    assert_bits(got, ref)
    assert not np.all(ref == 2.0)


def _kernel(mt: str, body: str) -> str:
    """A kernel over `in Y out Y` memrefs of type `mt` with `body` (%c: 1.0)."""
    return (
        f"func.func @kernel(%a0: {mt}, %a1: {mt}) {{\n"
        f"  %c = arith.constant 1.0 : f32\n{body}\n  func.return\n}}"
    )


LOOP = "  affine.for %i = 0 to 4 {{\n{}\n  }}"
OTHER_MISSES = {
    "a loaded value": _kernel(
        "memref<4xf32>",
        LOOP.format(
            "    %v = affine.load %a0[%i] : memref<4xf32>\n"
            "    affine.store %v, %a1[%i] : memref<4xf32>"
        ),
    ),
    "two stores": _kernel(
        "memref<4xf32>",
        LOOP.format(
            "    affine.store %c, %a0[%i] : memref<4xf32>\n"
            "    affine.store %c, %a1[%i] : memref<4xf32>"
        ),
    ),
    "a repeated index": _kernel(
        "memref<4x4xf32>",
        LOOP.format(
            "    affine.for %j = 0 to 4 {\n"
            "      affine.store %c, %a1[%i, %i] : memref<4x4xf32>\n    }"
        ),
    ),
    "a second nest": _kernel(
        "memref<4xf32>",
        "\n".join([LOOP.format("    affine.store %c, %a1[%i] : memref<4xf32>")] * 2),
    ),
    "f16 elements": fill_text((4,), "f16", "1.000000e-01"),
}


@pytest.mark.parametrize("name", OTHER_MISSES)
def test_other_kernels_are_not_fills(name):
    assert mlir_fill.fill_of(CompiledKernel(OTHER_MISSES[name]).fn, 2) is None


def test_a_fill_of_an_input_only_is_left_to_the_backends():
    """`in X out Y` on separate memory, the constant stored into X: not a
    fill of an output, so not taken (the backends decide what it means)."""
    text = fill_text((4,), "f32", "1.000000e+00")
    fn = CompiledKernel(text).fn
    assert mlir_fill.fill_of(fn, 2) == (0, 1.0)
    assert mlir_fill.fill_kernel(fn, [0, 1], 1) is None
    assert mlir_fill.fill_kernel(fn, [0, 0], 1) is not None


def test_interpreter_backend_does_not_take_fills(monkeypatch):
    """NEM_MLIR_KERNEL=interpreter keeps every kernel in the reference."""
    text = fill_text((4,), "f32", "1.000000e+00")
    seen = []
    orig = mlir_fill.fill_kernel
    monkeypatch.setattr(
        "nem.runtime.escape_hatch.fill_kernel", lambda *a: seen.append(a) or orig(*a)
    )
    HATCH[:] = [EscapeHatch("interpreter")]
    y = np.zeros(4, np.float32)
    run(text, [Tensor(y, "f32")], [Tensor(y, "f32")])
    assert seen == []
