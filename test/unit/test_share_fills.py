"""`nem-share-constant-fills` keeps a compiled model's results and L1's
capacity (D-LOW-FILL-SHARE).

The models are compiled with the pass and without it (no window tried:
nothing shared) and both programs run on the same inputs under random
schedules, race-free: the outputs are equal bit for bit and the shared
program runs fewer tasks.  A hand-written program whose unbounded sharing
would make L1 overflow once packed: the pass shares less (a narrower
window) and the result fits.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from nem.frontends.nem_text import parse_nem
from nem.passes import share_fills
from nem.passes.share_buffers import packed_footprints
from nem.passes.share_fills import apply_shares, find_shares, share_constant_fills

DEVICE = "npm_pro_x1"


def _pool_model(hw: int, c: int, f: int):
    """Relu -> MaxPool 3x3 pad 1 -> Conv 3x3 pad 1: the pool's padded input
    gets `-inf` border strips, the conv's a zero border."""
    from compile_runs import graph_model
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (f, c, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Conv", ["p", "w"], ["y"], pads=[1] * 4),
    ]
    return graph_model(nodes, [1, c, hw, hw], [w], opset=17)


def _conv_chain_model(hw: int, c: int):
    """Conv 3x3 pad 1 -> Relu -> Conv 3x3 pad 1: two zero-padded inputs."""
    from compile_runs import graph_model
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(1)
    ws = [
        numpy_helper.from_array(rng.uniform(-1, 1, (c, c, 3, 3)).astype(np.float32), n)
        for n in ("w1", "w2")
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1] * 4),
    ]
    return graph_model(nodes, [1, c, hw, hw], ws, opset=17)


def _compile(model, shared: bool, monkeypatch):
    from nem.compile import compile_onnx, fill_tiles

    with monkeypatch.context() as m:
        # the tile stage's sharing within one border (D-COMPILE-FILL-TILES)
        # would leave this pass nothing to share: off
        m.setattr(fill_tiles, "runs", lambda *args: [])
        if not shared:
            m.setattr(share_fills, "WINDOWS", ())
        return compile_onnx(model, device=DEVICE)


def test_sharing_keeps_results_bit_for_bit(monkeypatch):
    """The pool's `-inf` strips: fewer tasks, the same output bits."""
    pytest.importorskip("mlir.ir")
    pytest.importorskip("onnx")
    from compile_runs import run_compiled, timed_tasks

    model = _pool_model(13, 16, 8)
    outs, tasks = {}, {}
    for shared in (False, True):
        result = _compile(model, shared, monkeypatch)
        it, _ = run_compiled(result, model, DEVICE, schedules=3)
        ((name, shape, dtype),) = result.interface.outputs
        outs[shared] = it.read_tensor(name, shape, dtype).view(np.uint32)
        tasks[shared] = timed_tasks(result.nem)
    np.testing.assert_array_equal(outs[False], outs[True])
    assert tasks[True] < tasks[False]


def test_lone_zero_fills_are_left(monkeypatch):
    """A padded convolution chain's borders are lone zero clamps (chains of
    one task, below `MIN_TASKS`): the program is the one without the pass."""
    pytest.importorskip("mlir.ir")
    pytest.importorskip("onnx")

    model = _conv_chain_model(12, 16)
    plain = _compile(model, False, monkeypatch).nem
    assert "min=0 max=0" in plain
    assert _compile(model, True, monkeypatch).nem == plain


def _chain(buf: str, size: int, name: str, dst: int) -> str:
    """A `-inf` fill chain into `buf` (`size` bytes) and its store at `dst`."""
    n = size // 4
    i8 = f"region({buf}, 0, {size}) elem=i8, shape=[{size}], layout=C"
    f32 = f"region({buf}, 0, {size}) elem=f32, shape=[{n}], layout=C"
    inf = "(0 - 3.4028234663852886e+38)"
    return (
        f"c{name} = clamp.async in {i8} out {i8} min=0 max=0\n"
        f"f{name} = clamp.async in {f32} out {f32} min={inf} max={inf}\n"
        f"a{name} = add.async in {f32}, {f32} out {f32}\n"
        f"s{name} = transfer.async(dst=region(pad, {dst}, {size}) elem=f32, shape=[{n}], "
        f"layout=C, src={f32})\n"
    )


def _capacity_program() -> str:
    """Two pairs of identical chains: b1, b2 (64 bytes) next to each other,
    b3, b4 (128 bytes) around 20 copies through a 4 KB buffer `big`: b4
    reading b3 keeps b3 alive beside `big`."""
    copies = "".join(
        f"l{k} = transfer.async(dst=region(big, 0, 4096) elem=i8, shape=[4096], layout=C, "
        f"src=region(src, 0, 4096) elem=i8, shape=[4096], layout=C)\n"
        f"t{k} = transfer.async(dst=region(src, 0, 4096) elem=i8, shape=[4096], layout=C, "
        f"src=region(big, 0, 4096) elem=i8, shape=[4096], layout=C)\n"
        for k in range(10)
    )
    return (
        'device "npm_pro_x1.nem"\n\nprogram cap:\n\n'
        "buffer pad : DDR (size=1024, align=64)\n"
        "buffer src : DDR (size=4096, align=64)\n"
        "buffer big : L1[0] (size=4096, align=64)\n"
        + "".join(
            f"buffer b{k} : L1[0] (size={s}, align=64)\n"
            for k, s in ((1, 64), (2, 64), (3, 128), (4, 128))
        )
        + "\n"
        + _chain("b1", 64, "1", 0)
        + _chain("b2", 64, "2", 64)
        + _chain("b3", 128, "3", 128)
        + copies
        + _chain("b4", 128, "4", 256)
    )


def test_sharing_stays_within_l1():
    """With L1[0] the size the unshared program needs once packed (4 KB),
    unbounded sharing would need more; the pass shares within a window
    (b2 reads b1, b4 keeps its chain) and the program still fits.  With the
    device's own L1 both pairs are shared."""
    from nem.devices.device_lookup import find_device

    def program():
        return next(
            op
            for op in parse_nem(_capacity_program(), "cap.nem").walk()
            if op.name == "nem.program"
        )

    dev = find_device(DEVICE)
    small = replace(dev, topology=replace(dev.topology, l1_size_bytes=4096))
    assert packed_footprints(program(), small)["L1[0]"] == 4096
    unbounded = program()
    assert len(find_shares(unbounded, None)) == 2
    apply_shares(find_shares(unbounded, None))
    assert packed_footprints(unbounded, small)["L1[0]"] > 4096

    bounded = program()
    assert share_constant_fills(bounded, small) == 1
    assert packed_footprints(bounded, small)["L1[0]"] <= 4096
    names = {op.buffer_name.data for op in bounded.walk() if op.name == "nem.buffer"}
    assert "b2" not in names and {"b1", "b3", "b4"} <= names

    roomy = program()
    assert share_constant_fills(roomy, dev) == 2
