"""ONNX Resize (D-COMPILE-RESIZE): a copy where it repeats elements, else
one product per resized axis with a matrix of ONNX's own weights.

Nearest upsampling of an axis by a whole factor `k` repeats each element
`k` times (output index `i` reads input index `i // k`) exactly where ONNX's
coordinate transformation and rounding give that index:

- `half_pixel`, `pytorch_half_pixel`, `half_pixel_symmetric` with
  `round_prefer_floor` or `round_prefer_ceil` (the defaults): the source
  coordinate `(i + 0.5) / k - 0.5` of `i = m k + r` lies strictly between
  `m - 0.5` and `m + 0.5`, so both roundings give `m`;
- `asymmetric` with `floor`: `floor(i / k) = m`;
- any mode but `tf_crop_and_resize` on an axis of factor 1 (the identity).

That is one broadcasting copy to `[n0, k0, n1, k1, ...]` and a reshape to
`[n0 k0, n1 k1, ...]` (as Tile, D-COMPILE-SHAPES, with the repeat inside
each element rather than around the tensor), exact for any data.

Every other Resize of float data (linear and cubic modes, `align_corners`,
other roundings, fractional or downsampling factors, `antialias`,
`exclude_outside`, `cubic_coeff_a`) is linear in its input and separable:
along each resized axis, output `o` is a weighted sum of input elements
with weights that depend on the axis' sizes and the attributes only.
Those weights are computed at compile time by onnx's reference
implementation itself, resizing the identity matrix along one axis (one
home for ONNX's semantics: `axis_weights`), but in mode nearest, whose
one-hot weights pick the input element at the source coordinate rounded:
that coordinate is computed in float32 as onnxruntime computes it
(`nearest_weights`; in f64, onnx's reference picked pixels a whole step
from onnxruntime's where the scale is not exact in binary); and each
resized axis becomes one matrix product with them (`einsum.contract`,
raised to a NEM matmul).  `roi` is read by `tf_crop_and_resize` only, so it
is taken and ignored (Resize-11 requires it); `tf_half_pixel_for_nn`
(Resize-11, deprecated at 13) is taken in mode nearest.
`tf_crop_and_resize` (its extrapolated outputs are not a weighted sum),
sizes kept to an aspect ratio and factors computed at run time are errors
naming what, at the node (integer data is refused before: Resize is not
one of `driver.INTEGER_DATA_OPS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir

from nem.frontends.onnx import emit
from nem.frontends.onnx.einsum import contract
from nem.frontends.onnx.graph import Importer, Node

EXACT = {
    b"half_pixel": (b"round_prefer_floor", b"round_prefer_ceil"),
    b"pytorch_half_pixel": (b"round_prefer_floor", b"round_prefer_ceil"),
    b"half_pixel_symmetric": (b"round_prefer_floor", b"round_prefer_ceil"),
    b"asymmetric": (b"floor",),
}
"""Coordinate transformation -> the nearest roundings under which a whole
factor `k` reads input index `i // k` (module docstring)."""

TRANSFORMS = (
    b"half_pixel",
    b"half_pixel_symmetric",
    b"pytorch_half_pixel",
    b"align_corners",
    b"asymmetric",
    b"tf_half_pixel_for_nn",
    b"tf_crop_and_resize",
)
"""ONNX's coordinate transformations (Resize-19 and Resize-11's `tf_half_pixel_for_nn`)."""

ROUNDINGS = (b"round_prefer_floor", b"round_prefer_ceil", b"floor", b"ceil")
"""ONNX's nearest modes."""

FIX = (
    "Resize of float data in modes nearest, linear and cubic is supported, scales or sizes "
    "constant, any coordinate_transformation_mode but tf_crop_and_resize"
)


def resize(imp: Importer, node: Node) -> None:
    mode = node.attrs.get("mode", b"nearest")
    transform = node.attrs.get("coordinate_transformation_mode", b"half_pixel")
    rounding = node.attrs.get("nearest_mode", b"round_prefer_floor")
    legacy = imp.source_opset < 11
    if legacy:
        # Resize-10 and Upsample, which onnx's version converter upgrades to
        # Resize with the defaults, half_pixel: their coordinates are
        # asymmetric, nearest rounding down where an axis grows and up where
        # it shrinks (onnxruntime's SIMPLE mode; session 55, an outside user:
        # 18 of 22 such cases wrong once roi was taken, refused before)
        transform, rounding = b"asymmetric", b"floor"
    if mode not in (b"nearest", b"linear", b"cubic"):
        raise imp.error(f"Resize mode '{mode.decode()}' is not one of nearest, linear, cubic")
    # ONNX's values only: `nearest_weights` reads any other as the default
    # (onnx's reference raised on them; a review, session 55)
    for attr, value, known in (
        ("coordinate_transformation_mode", transform, TRANSFORMS),
        ("nearest_mode", rounding, ROUNDINGS),
    ):
        if value not in known:
            raise imp.error(
                f"Resize {attr} '{value.decode()}' is not one of "
                + ", ".join(k.decode() for k in known)
            )
    if transform == b"tf_crop_and_resize":
        raise imp.error(
            "not supported: Resize with coordinate_transformation_mode tf_crop_and_resize",
            fix=FIX,
        )
    if transform == b"tf_half_pixel_for_nn" and mode != b"nearest":
        raise imp.error(
            f"not supported: Resize mode '{mode.decode()}' with coordinate_transformation_mode "
            "tf_half_pixel_for_nn (deprecated since opset 13; taken in mode nearest)",
            fix=FIX,
        )
    node.input(1)  # roi: read by tf_crop_and_resize only (ONNX), refused above
    x = imp.tensor(node.input(0))
    scales, out = _sizes(imp, node, list(x.shape))
    factors = [o // n if o % n == 0 else 0 for n, o in zip(x.shape, out)]
    if all(k == 1 for k in factors):
        imp.vals[node.outputs[0]] = x
        return
    if mode == b"nearest" and all(
        k == 1 or (k > 1 and scales[a] in (None, k) and rounding in EXACT.get(transform, ()))
        for a, k in enumerate(factors)
    ):
        wide = [d for n, k in zip(x.shape, factors) for d in (n, k)]
        value = emit.broadcast(imp.logical(x), [2 * d for d in range(x.rank)], wide)
        imp.define(node.outputs[0], emit.reshape(value, out))
        return
    value = imp.logical(x)
    letters = "abcdefghijklmnopqrstuvwxy"[: x.rank]
    for a in range(x.rank):
        if out[a] == x.shape[a] and scales[a] in (None, 1.0):
            continue  # the identity on this axis (module docstring)
        # align_corners maps corners of the output's length: onnxruntime reads
        # that length where onnx's reference takes input x scale (D-COMPILE-RESIZE)
        scale = None if transform == b"align_corners" else scales[a]
        given = scales[a]
        axis_rounding = b"ceil" if legacy and given is not None and given < 1 else rounding
        weights = (
            nearest_weights(transform, axis_rounding, x.shape[a], scales[a], out[a])
            if mode == b"nearest"
            else axis_weights(node, x.shape[a], scale, out[a], transform)
        )
        dtype = np.float16 if isinstance(x.elem, ir.F16Type) else np.float32
        w = imp.weight(weights.astype(dtype), f"{node.name}_axis{a}")
        term = letters[:a] + "z" + letters[a + 1 :]
        value = contract(imp, [letters, letters[a] + "z"], term, [value, imp.logical(w)])
    imp.define(node.outputs[0], value)


def _sizes(imp: Importer, node: Node, shape: list[int]) -> tuple[list[float | None], list[int]]:
    """Each axis' scale as given (None where `sizes` gives the axis' size)
    and output size, from `scales` (input 2) or `sizes` (input 3) over the
    `axes` attribute (opset 18; all axes by default)."""
    rank = len(shape)
    axes = [a + rank if a < 0 else a for a in node.attrs.get("axes", range(rank))]
    given_scales = imp.const(node.input(2)) if node.input(2) else None
    sizes = imp.const_ints(node, 3, "sizes") if node.input(3) else None
    if node.input(2) and given_scales is None:
        imp.const_ints(node, 2, "scales")  # the located "computed at run time" error
    scales: list[float | None] = [1.0] * rank
    out = list(shape)
    if given_scales is not None and given_scales.size:
        values = [float(s) for s in given_scales.reshape(-1)]
        if len(values) != len(axes):
            raise imp.error(f"Resize gives {len(values)} scales for {len(axes)} axes")
        for a, f in zip(axes, values):
            if not f > 0:
                raise imp.error(f"Resize scale {f:g} on axis {a} is not positive")
            scales[a], out[a] = f, int(np.floor(shape[a] * np.float32(f)))
            if out[a] != int(np.floor(shape[a] * float(np.float32(f)))):
                # (an internal error before: the output's shape is not ONNX's)
                raise imp.error(
                    f"not supported: Resize of axis {a} ({shape[a]} by {f:g}): ONNX's shape "
                    f"inference makes {int(np.floor(shape[a] * float(np.float32(f))))} outputs "
                    f"(in float64), onnxruntime {out[a]} (in float32)",
                    fix="give the output's sizes instead of scales",
                )
    elif sizes is not None:
        if node.attrs.get("keep_aspect_ratio_policy", b"stretch") != b"stretch":
            raise imp.error("not supported: Resize sizes with keep_aspect_ratio_policy", fix=FIX)
        if len(sizes) != len(axes):
            raise imp.error(f"Resize gives {len(sizes)} sizes for {len(axes)} axes")
        for a, n in zip(axes, sizes):
            scales[a], out[a] = None, n
    else:
        raise imp.error("Resize needs scales or sizes")
    if min(out) < 1:
        raise imp.error(f"not supported: Resize to an empty output {out}")
    return scales, out


def nearest_weights(
    transform: bytes, rounding: bytes, n: int, scale: float | None, out: int
) -> np.ndarray:
    """The `[n, out]` one-hot weights of one axis resized in mode nearest:
    output `o` reads the input element at its source coordinate rounded,
    computed in float32 as onnxruntime computes it (its `upsamplebase.h`
    formulas; the scale of `sizes` is out / n in float32), clamped to the
    axis.  onnx's reference computes the coordinate in f64, and where the
    scale is not exact in binary (0.6, 1.3) or `sizes` gives a fractional
    ratio (7 -> 17), f32 and f64 land on either side of a rounding point and
    pick another pixel: 12 of an outside user's 28 nearest cases differed
    from onnxruntime, the oracle (D-COMPILE-TOL; session 55).
    `half_pixel_symmetric` adds its offset in double, as onnxruntime's code
    does; `bench/bench_resize_nearest.py` counts the cases that still
    differ (ties onnxruntime breaks otherwise in some of its kernels)."""
    f = np.float32
    s = f(scale) if scale is not None else f(out) / f(n)
    i = np.arange(out, dtype=f)
    half = f(0.5)
    if transform == b"asymmetric":
        x = i / s
    elif transform == b"pytorch_half_pixel":
        x = (i + half) / s - half if out > 1 else np.zeros(out, f)
    elif transform == b"tf_half_pixel_for_nn":
        x = (i + half) / s
    elif transform == b"align_corners":
        x = i * f(n - 1) / f(out - 1) if out > 1 else np.zeros(out, f)
    elif transform == b"half_pixel_symmetric":
        offset = f(n) / f(2) * (f(1) - f(out) / (s * f(n)))
        x = (np.float64(offset) + (i.astype(np.float64) + 0.5) / np.float64(s) - 0.5).astype(f)
    else:  # half_pixel
        x = (i + half) / s - half
    if rounding == b"floor":
        idx = np.floor(x)
    elif rounding == b"ceil":
        idx = np.ceil(x)
    else:  # std::round: halves away from zero; round_prefer_floor takes their floor
        t = np.trunc(x)
        idx = t + np.sign(x) * (np.abs(x - t) >= half)  # (x - t is exact)
        if rounding != b"round_prefer_ceil":
            idx = np.where(x == t + half, np.floor(x), idx)
    weights = np.zeros((n, out))
    weights[np.clip(idx.astype(np.int64), 0, n - 1), np.arange(out)] = 1.0
    return weights


WEIGHT_ATTRIBUTES = (
    "mode",
    "coordinate_transformation_mode",
    "nearest_mode",
    "cubic_coeff_a",
    "exclude_outside",
    "antialias",
)
"""The attributes a resized axis' weights depend on (with its sizes)."""


PROBES = 16
"""Input classes (positions modulo it) `axis_weights` first probes a long
axis with: a column of its weights whose input support is narrower (linear
reads 2 inputs, cubic 4) is read off one class each; four times as many are
tried while the check fails, the identity at last."""


def axis_weights(node: Node, n: int, scale: float | None, out: int, transform: bytes) -> np.ndarray:
    """The `[n, out]` weights of one resized axis: column `o` holds what
    output `o` sums of each input element, as ONNX's reference implementation
    resizes (in f64) the `n x n` identity along its second axis, or on a long
    axis a few probes that give the same numbers (`_probed`): resizing the
    identity cost `n` rows of `out` outputs in Python, 87 s and 3.2 GB for an
    outside user's 16000 -> 8000 audio resampling (session 55)."""
    resize = axis_resize(node, n, scale, out, transform)
    k = PROBES
    while 2 * k < n:
        weights = _probed(resize, n, out, k)
        if weights is not None:
            return weights
        k *= 4
    return resize(np.eye(n))


def axis_resize(
    node: Node, n: int, scale: float | None, out: int, transform: bytes
) -> Callable[[np.ndarray], np.ndarray]:
    """`rows` (`[r, n]`, f64) resized along their second axis by onnx's
    reference evaluator as `node` resizes one axis of `n` to `out`."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    attrs = {k: node.attrs[k] for k in WEIGHT_ATTRIBUTES if k in node.attrs}
    attrs["coordinate_transformation_mode"] = transform  # (Resize-10's: `resize`)
    given = (
        numpy_helper.from_array(np.array([scale], np.float32), "s")
        if scale is not None
        else numpy_helper.from_array(np.array([out], np.int64), "s")
    )
    inputs = ["x", "", "s"] if scale is not None else ["x", "", "", "s"]
    graph = helper.make_graph(
        [helper.make_node("Resize", inputs, ["y"], axes=[1], **attrs)],
        "axis",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["rows", n])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        [given],
    )
    evaluator = ReferenceEvaluator(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    )

    def resize(rows: np.ndarray) -> np.ndarray:
        outputs: Any = evaluator.run(None, {"x": rows})
        return np.asarray(outputs[0])

    return resize


def _probed(
    resize: Callable[[np.ndarray], np.ndarray], n: int, out: int, k: int
) -> np.ndarray | None:
    """The weights from `2k + 2` resized rows instead of `n`: per class c of
    the inputs (positions `c + k q`), its comb (1 at the class) and the comb
    times q.  Where a column's support holds at most one input of each class,
    the comb's output is that input's weight w, exactly (a sum of it and
    zeros), and the other's q w names the input.  Two random rows check the
    result against the reference's own resize of them; None where they
    disagree (a support as wide as k: more classes, `axis_weights`)."""
    i = np.arange(n)
    combs = (i[None, :] % k == np.arange(k)[:, None]).astype(np.float64)
    checks = np.random.default_rng(0).standard_normal((2, n))
    y = resize(np.vstack([combs, combs * (i // k)[None, :], checks]))
    sums, moments, seen = y[:k], y[k : 2 * k], y[2 * k :]
    held = sums != 0
    q = np.rint(np.divide(moments, sums, out=np.zeros_like(sums), where=held))
    rows = np.arange(k)[:, None] + k * q
    if np.any(held & ((rows < 0) | (rows >= n))):
        return None
    weights = np.zeros((n, out))
    cols = np.broadcast_to(np.arange(out), sums.shape)
    weights[rows[held].astype(np.int64), cols[held]] = sums[held]
    scale = max(1.0, float(np.abs(seen).max(initial=0.0)))
    return weights if np.allclose(checks @ weights, seen, rtol=0, atol=1e-9 * scale) else None
