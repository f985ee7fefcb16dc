"""ONNX Resize: nearest upsampling by whole factors (D-COMPILE-RESIZE).

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
each element rather than around the tensor).  Anything else (linear or
cubic modes, `align_corners`, other roundings, fractional or downsampling
factors, sizes kept to an aspect ratio, factors computed at run time) is
an error naming what, at the node.
"""

from __future__ import annotations

from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node

EXACT = {
    b"half_pixel": (b"round_prefer_floor", b"round_prefer_ceil"),
    b"pytorch_half_pixel": (b"round_prefer_floor", b"round_prefer_ceil"),
    b"half_pixel_symmetric": (b"round_prefer_floor", b"round_prefer_ceil"),
    b"asymmetric": (b"floor",),
}
"""Coordinate transformation -> the nearest roundings under which a whole
factor `k` reads input index `i // k` (module docstring)."""

FIX = (
    "nearest upsampling by whole factors is supported (coordinate modes "
    "half_pixel with round_prefer_floor/ceil, or asymmetric with floor)"
)


def resize(imp: Importer, node: Node) -> None:
    mode = node.attrs.get("mode", b"nearest")
    transform = node.attrs.get("coordinate_transformation_mode", b"half_pixel")
    rounding = node.attrs.get("nearest_mode", b"round_prefer_floor")
    if mode != b"nearest":
        raise imp.error(f"not supported: Resize mode {mode.decode()}", fix=FIX)
    x = imp.tensor(node.input(0))
    factors = _factors(imp, node, list(x.shape))
    if transform == b"tf_crop_and_resize" or (
        any(k > 1 for k in factors) and rounding not in EXACT.get(transform, ())
    ):
        raise imp.error(
            "not supported: Resize (nearest) with coordinate_transformation_mode "
            f"{transform.decode()} and nearest_mode {rounding.decode()}: the output "
            "does not repeat each element a whole number of times",
            fix=FIX,
        )
    if all(k == 1 for k in factors):
        imp.vals[node.outputs[0]] = x
        return
    wide = [d for n, k in zip(x.shape, factors) for d in (n, k)]
    value = emit.broadcast(imp.logical(x), [2 * d for d in range(x.rank)], wide)
    imp.define(node.outputs[0], emit.reshape(value, [n * k for n, k in zip(x.shape, factors)]))


def _factors(imp: Importer, node: Node, shape: list[int]) -> list[int]:
    """The whole factor of each axis, from `scales` (input 2) or `sizes`
    (input 3) over the `axes` attribute (opset 18; all axes by default)."""
    rank = len(shape)
    axes = [a + rank if a < 0 else a for a in node.attrs.get("axes", range(rank))]
    scales = imp.const(node.input(2)) if node.input(2) else None
    sizes = imp.const_ints(node, 3, "sizes") if node.input(3) else None
    if node.input(2) and scales is None:
        imp.const_ints(node, 2, "scales")  # the located "computed at run time" error
    given: list[float]
    if scales is not None and scales.size:
        given = [float(s) for s in scales.reshape(-1)]
    elif sizes is not None:
        if node.attrs.get("keep_aspect_ratio_policy", b"stretch") != b"stretch":
            raise imp.error("not supported: Resize sizes with keep_aspect_ratio_policy", fix=FIX)
        given = [s / shape[a] for s, a in zip(sizes, axes)]
    else:
        raise imp.error("Resize needs scales or sizes")
    if len(given) != len(axes):
        raise imp.error(f"Resize gives {len(given)} factors for {len(axes)} axes")
    factors = [1] * rank
    for a, f in zip(axes, given):
        if f < 1 or not float(f).is_integer():
            raise imp.error(f"not supported: Resize by {f:g} on axis {a}", fix=FIX)
        factors[a] = int(f)
    return factors
