"""A pure loop nest (one escape-hatch kernel, D-LOW-ESCAPE) that makes a
view of a memref from outside it: the kernel runs the view as MLIR wrote
it, on the whole region of the memref viewed.  Session 49: such a nest was
refused ("memref operand does not come from a function argument,
memref.alloc or memref.subview"), by D-LOW-PEEL's log of the boxes the
kernel touches, which looked the view up among the conversion's own."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

pytest.importorskip("mlir.ir")

from raise_runs import INPUTS, lower_and_run, tool  # noqa: E402

NEST_VIEWS = INPUTS / "nest_views.mlir"


def test_a_row_subview_made_in_the_nest(tmp_path):
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    out = lower_and_run(
        NEST_VIEWS,
        tmp_path,
        {"x": x, "y": np.zeros((4, 6), np.float32)},
        ["y"],
        "mlir.kernel",
        entry="rows",
    )
    np.testing.assert_array_equal(out["y"], x + x)


def test_a_byte_view_made_in_the_nest(tmp_path):
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    out = lower_and_run(
        NEST_VIEWS,
        tmp_path,
        {"x": x, "y": np.zeros(96, np.int8)},
        ["y"],
        "mlir.kernel",
        entry="bytes",
    )
    np.testing.assert_array_equal(out["y"].view(np.float32).reshape(4, 6), x * x)


def test_a_subview_past_the_end_is_an_error_not_a_clipped_view(tmp_path):
    """numpy would clip the slice to the array; MLIR leaves such a subview
    undefined: the kernel interpreter names it (HAZ-04)."""
    nem = tmp_path / "p.nem"
    args = ["-p", "lower-to-nem{device=npm_pro_x1 entry=past_the_end}", "-t", "nem", "-o"]
    r = subprocess.run([tool("nem-opt"), str(NEST_VIEWS), *args, str(nem)], capture_output=True)
    assert r.returncode == 0, r.stderr
    x = tmp_path / "x.npy"
    np.save(x, np.ones((4, 6), np.float32))
    r = subprocess.run(
        [tool("nem-run"), str(nem), "--input", f"x={x}"], capture_output=True, text=True
    )
    assert r.returncode != 0
    assert "memref.subview offsets [0, 2], sizes [1, 6], strides [1, 1] leave the memref" in (
        r.stdout + r.stderr
    )
    # the kernel's indices are at fault, not the data (session 49: the fix said to check it)
    assert "fix: the kernel's indices leave the memref, whatever the data" in r.stdout + r.stderr


def _x_to_y_and_z(tmp_path, entry: str, shape: tuple[int, int]) -> tuple[np.ndarray, dict]:
    """Function `entry` of NEST_VIEWS lowered and run on a random x, y and z
    zero: x and the outputs y and z."""
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    zeros = np.zeros(shape, np.float32)
    inputs = {"x": x, "y": zeros, "z": zeros}
    return x, lower_and_run(NEST_VIEWS, tmp_path, inputs, ["y", "z"], "mlir.kernel", entry=entry)


def test_a_memref_read_through_views_only_is_an_input(tmp_path):
    """Two nests reading x through row subviews they make: x is each
    kernel's input only, so the two are independent (x was an output of
    both, and the second waited for the first; an outside user, session
    49)."""
    x, out = _x_to_y_and_z(tmp_path, "two_readers", (8, 16))
    np.testing.assert_array_equal(out["y"], x + np.float32(2))
    np.testing.assert_array_equal(out["z"], x * np.float32(2))
    text = (tmp_path / "prog.nem").read_text()
    computes = [ln for ln in text.splitlines() if "compute.async" in ln]
    assert len(computes) == 2
    assert all(" out region(x," not in ln and "deps=" not in ln for ln in computes), computes


def test_a_view_no_access_uses_keeps_its_source_an_argument(tmp_path):
    """The kernel runs the nest as written, its unused view too: the memref
    viewed is one of its arguments (an input), else the kernel text names
    a value it does not define and the task cannot run (session 49)."""
    x, out = _x_to_y_and_z(tmp_path, "dead_view", (4, 6))
    np.testing.assert_array_equal(out["y"], x)
    np.testing.assert_array_equal(out["z"], np.zeros_like(x))
    text = (tmp_path / "prog.nem").read_text()
    assert "in region(z, 0, 96) elem=f32, shape=[4, 6], layout=MN, region(x, 0, 96)" in text


def test_the_native_backend_leaves_views_to_the_interpreter():
    """The native kernels check each access against the memref it goes
    through, a view's shape, not the view against its source: a kernel
    with a view runs in the interpreter, which checks it (a byte view past
    the end read and wrote outside its buffer natively; session 49)."""
    from nem.runtime.mlir_kernel import CompiledKernel
    from nem.runtime.mlir_native_prep import unsupported

    kernel = (
        "func.func @kernel(%y: memref<96xi8>) {\n  %c0 = arith.constant 0 : index\n"
        "  %v = memref.view %y[%c0][] : memref<96xi8> to memref<4x6xf32>\n  return\n}"
    )
    assert unsupported(CompiledKernel(kernel).fn) == (
        "memref.view (a view is checked against its source by the interpreter only)"
    )
