"""Casts inside larger elementwise trees (D-LOW-CAST-TREE): each entry of
test/lit/lowering/Inputs/raise/cast_trees.mlir (`cast_trees.test` checks
the tasks) -- the bodies nem-compile's importer writes for f16 models --
lowered for npm_pro_x1 (raised: f16 leaves cast to f32 scratch, f32 ops,
one cast back) and run under 3 random schedules, compared BIT FOR BIT with

* the same MLIR lowered for npm_pro, which has no f32 elementwise variants,
  so the nest stays one escape-hatch kernel (MLIR's own arithmetic), and
* numpy: each f32 op of the body in f32 (transcendentals as D-NUM-FLOAT
  defines them: the f64 value rounded to f32), the result cast once.

Inputs hold what the casts must get right: NaN, +-inf, -0.0, the f16
extremes, and values whose f32 result overflows f16 (inf with truncf).
"""

from __future__ import annotations

import numpy as np
import pytest
from raise_runs import INPUTS, lower_and_run

TREES = INPUTS / "cast_trees.mlir"
F16_EDGES = [np.nan, np.inf, -np.inf, -0.0, 0.0, 65504.0, -65504.0, 6.1e-5, 5.96e-8, 11.5]


def _f16(rng: np.random.Generator, shape, scale: float = 3.0) -> np.ndarray:
    x = (rng.standard_normal(shape) * scale).astype(np.float16)
    flat = x.reshape(-1)
    n = min(len(F16_EDGES), flat.size)
    flat[:n] = np.array(F16_EDGES[:n], np.float16)
    return x


def _f32(v) -> np.ndarray:
    return np.asarray(v, np.float32)


def _t(f, x: np.ndarray) -> np.ndarray:
    """A transcendental as NEM computes it: f64, rounded once to f32 (D-NUM-FLOAT)."""
    return f(x.astype(np.float64)).astype(np.float32)


def _softmax_exp(ins):
    x, m = ins["x"].astype(np.float32), ins["m"].astype(np.float32)
    return _t(np.exp, (x - m) * _f32(0.353553385))


def _softmax_div(ins):
    return (ins["e"] / ins["s"]).astype(np.float16)


def _layer_norm(ins):
    c6, c5 = _f32(0.0625), _f32(9.99999974e-6)
    rstd = _f32(1.0) / np.sqrt(ins["sq"] * c6 + c5)
    y = (ins["x"].astype(np.float32) - ins["sum"] * c6) * rstd
    return (y * ins["g"].astype(np.float32) + ins["b"].astype(np.float32)).astype(np.float16)


def _acc_extf(ins):
    return ins["y"] + ins["x"].astype(np.float32)


def _generic_mix(ins):
    return _t(np.tanh, ins["a"].astype(np.float32) * ins["c"]).astype(np.float16)


def _inputs(entry: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(23)
    if entry == "softmax_exp":
        x = _f16(rng, (1, 2, 8))
        return {
            "x": x,
            "m": np.array([[[1.5]], [[-0.0]]], np.float16).reshape(1, 2, 1),
            "e": np.zeros((1, 2, 8), np.float32),
        }
    if entry == "softmax_div":
        e = rng.standard_normal((1, 2, 8)).astype(np.float32) * 1e5  # beyond f16: inf
        e.reshape(-1)[:4] = [np.nan, np.inf, -0.0, 70000.0]
        return {
            "e": e,
            "s": np.array([0.5, -0.0], np.float32).reshape(1, 2, 1),
            "y": np.zeros((1, 2, 8), np.float16),
        }
    if entry == "layer_norm":
        g = _f16(rng, (16,))
        g[10:] = [60000.0, -60000.0, 1.0, 2.0, 0.5, 3.0]  # overflow f16 after the f32 chain
        return {
            "x": _f16(rng, (1, 2, 16)),
            "sum": np.array([3.0, -7.5], np.float32).reshape(1, 2, 1),
            "sq": np.array([40.0, 0.0], np.float32).reshape(1, 2, 1),
            "g": g,
            "b": _f16(rng, (16,)),
            "y": np.zeros((1, 2, 16), np.float16),
        }
    if entry == "acc_extf":
        y = rng.standard_normal((4, 8)).astype(np.float32)
        y.reshape(-1)[-3:] = [np.inf, -np.inf, -0.0]
        return {"x": _f16(rng, (4, 8)), "y": y}
    assert entry == "generic_mix"
    c = rng.standard_normal((4, 8)).astype(np.float32)
    c.reshape(-1)[-2:] = [np.nan, 1e30]
    return {"a": _f16(rng, (4, 8)), "c": c, "y": np.zeros((4, 8), np.float16)}


CASES = [
    ("softmax_exp", "e", _softmax_exp, "cast + cast + sub + clamp + mul + exp"),
    ("softmax_div", "y", _softmax_div, "div + cast"),
    ("layer_norm", "y", _layer_norm, "mul + cast + add + cast"),
    ("acc_extf", "y", _acc_extf, "-> cast + add"),
    ("generic_mix", "y", _generic_mix, "-> cast + mul + tanh + cast"),
]


@pytest.mark.parametrize("entry, out, ref, remark", CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow  # 48 s (5 cases)
def test_cast_tree_bit_exact(tmp_path, entry, out, ref, remark):
    ins = _inputs(entry)
    raised = lower_and_run(TREES, tmp_path, ins, [out], remark, entry)[out]
    kernel = lower_and_run(
        TREES, tmp_path, ins, [out], "escape-hatch task", entry, device="npm_pro"
    )[out]
    with np.errstate(all="ignore"):
        want = ref(ins)
    assert raised.dtype == want.dtype
    assert raised.tobytes() == kernel.tobytes()
    assert raised.tobytes() == want.tobytes()
    assert np.isnan(raised).any()  # the checks above saw the edges they are meant to
    assert np.isinf(raised).any() or entry == "generic_mix"  # tanh is bounded
