"""`nem.analysis.buffer_lifetimes` and `nem-share-buffers` (D-LOW-SHARE):
lifetimes by top-level statement (a loop is one), first-fit packing that
keeps each buffer's alignment, and a packed program that is still
race-free and computes the same outputs as the unpacked one."""

from __future__ import annotations

import numpy as np
import pytest

from nem.analysis.buffer_lifetimes import lifetimes, pack
from nem.analysis.hazard_finder import find_hazards
from nem.dialect.ops import BufferOp, LoopOp, ProgramOp, RegionOp
from nem.frontends.nem_text import parse_nem, print_nem
from nem.passes.pass_context import pass_context
from nem.passes.share_buffers import ShareBuffersPass
from nem.runtime import NemInterpreter

T = "elem=f32, shape=[{n}], layout=C"


def _move(name: str, dst: str, src: str, n: int, deps: str = "") -> str:
    t = T.format(n=n // 4)
    return f"{name} = transfer.async(dst={dst} {t}, src={src} {t}{deps})\n"


PROGRAM = (
    'include "npm_pro_x1.nem"\ndevice npm_pro_x1\nprogram p:\n'
    "buffer X : DDR (size=8192, align=64)\nbuffer Y : DDR (size=8192, align=64)\n"
    "buffer a : L1[0] (size=192, align=64)\n"  # live in the loop only
    "buffer b : L1[0] (size=256, align=256)\n"  # live in the loop and after it
    "buffer c : L1[0] (size=512, align=128)\n"  # after the loop
    "loop i in [0..1]:\n"
    + "  "
    + _move("la", "region(a, 0, 64)", "region(X, i * 64, 64)", 64)
    + "  "
    + _move("lb", "region(b, 0, 256)", "region(X, 1024, 256)", 256)
    + "  "
    + _move("sa", "region(Y, i * 64, 64)", "region(a, 0, 64)", 64, ", deps=[la, lb]")
    + "  wait(sa)\nendloop\n"
    + _move("sb", "region(Y, 512, 256)", "region(b, 0, 256)", 256)
    + _move("lc", "region(c, 0, 512)", "region(X, 2048, 512)", 512)
    + _move("sc", "region(Y, 1024, 512)", "region(c, 0, 512)", 512, ", deps=[lc]")
    + "wait(sb, sc)\n"
)


def _program(text: str) -> tuple[object, ProgramOp]:
    module = parse_nem(text, "p.nem")
    return module, next(op for op in module.walk() if isinstance(op, ProgramOp))


def test_lifetimes_are_top_level_intervals():
    _, prog = _program(PROGRAM)
    spans = {lt.buffer.buffer_name.data: (lt.first, lt.last) for lt in lifetimes(prog, ["L1[0]"])}
    at = {
        getattr(op, "token", None) and op.token.data: prog.block.get_operation_index(op)
        for op in prog.block.ops
    }
    loop = next(
        prog.block.get_operation_index(op) for op in prog.block.ops if isinstance(op, LoopOp)
    )
    assert spans["a"] == (loop, loop)  # a use in a loop: the loop
    assert spans["b"] == (loop, at["sb"])
    # c's region ops are printed just before lc (they count as uses)
    assert at["sb"] < spans["c"][0] <= at["lc"] and spans["c"][1] == at["sc"]


def test_first_fit_keeps_alignment_and_separates_overlapping_lifetimes():
    _, prog = _program(PROGRAM)
    packing = pack(lifetimes(prog, ["L1[0]"]))
    assert packing is not None
    off = {b.buffer_name.data: o for b, o in packing.offsets.items()}
    # c (largest) at 0; b overlaps a's lifetime, not c's: 0; a overlaps b
    # (bytes [0, 256)) but not c: next multiple of its align after b
    assert off == {"c": 0, "b": 0, "a": 256}
    assert packing.size == 512 and packing.align == 256
    assert packing.separate == 256 + 512 + 192 and packing.saved == 448


def test_overlapping_lifetimes_are_not_packed():
    text = PROGRAM.replace("buffer c : L1[0]", "buffer c : L1[1]")  # a and b overlap
    _, prog = _program(text)
    assert pack(lifetimes(prog, ["L1[0]"])) is None


def _outputs(text: str) -> np.ndarray:
    it = NemInterpreter(device="npm_pro_x1")
    it.load_string(text, "p.nem")
    it.write_tensor("X", np.arange(2048, dtype=np.float32))
    assert it.run().ok
    return it.read_tensor("Y").copy()


def test_packed_program_is_race_free_and_computes_the_same():
    module, prog = _program(PROGRAM)
    ShareBuffersPass().apply(pass_context(file="p.nem"), module)
    packed = print_nem(module)
    assert "L1_0_arena" in packed and "buffer a " not in packed
    assert not find_hazards(prog)
    assert np.array_equal(_outputs(packed), _outputs(PROGRAM))
    # the reuse needed an order the program did not have: lc after sb
    assert "deps=[sb]" in packed


def _first_fit_reference(items):
    """First fit as D-LOW-SHARE states it, against every placed buffer."""
    placed = []
    for k in sorted(range(len(items)), key=lambda k: (-items[k].size, k)):
        item = items[k]
        busy = sorted(
            (off, off + o.size)
            for o, off in placed
            if item.first <= o.last and o.first <= item.last
        )
        off = 0
        for lo, hi in busy:
            if off + item.size <= lo:
                break
            if hi > off:
                off = -(-hi // item.align) * item.align
        placed.append((item, off))
    return {item.buffer: off for item, off in placed}


def test_packing_matches_first_fit_against_every_buffer():
    """The packing keeps placed buffers by the statements they are live at
    (in buckets of `_Live.SPAN`: linear in the program, DenseNet-121 lowers
    to 2,734 L1 buffers per engine) and finds the sharing ones by a sweep;
    both agree with the rule checked against every other buffer, on random
    lifetimes, short ones and ones across buckets."""
    import random

    from nem.analysis import buffer_lifetimes as bl

    rng = random.Random(7)
    for _ in range(200):
        items = []
        for k in range(rng.randint(1, 30)):
            first = rng.randint(0, 20 if rng.random() < 0.5 else 300)
            items.append(
                bl.Lifetime(
                    object(),
                    rng.choice([64, 128, 96, 4096, 100]),
                    rng.choice([1, 64]),
                    first,
                    first + rng.choice([0, 0, 1, 5, 63, 64, 130]),
                )
            )
        offsets = bl._first_fit(items)
        assert offsets == _first_fit_reference(items)
        want = [
            it
            for it in items
            if any(
                o is not it
                and offsets[it.buffer] < offsets[o.buffer] + o.size
                and offsets[o.buffer] < offsets[it.buffer] + it.size
                for o in items
            )
        ]
        assert bl._sharing(items, offsets) == want


class _Buffer:
    """A stand-in for a BufferOp: `pack` reads only the level off it."""

    class result:  # noqa: N801 - mirrors BufferOp.result.type.level.data
        class type:  # noqa: N801
            class level:  # noqa: N801
                data = "L1[0]"


def test_pack_refits_only_a_proper_subset():
    """`pack` first-fits the sharing items again on their own, and reuses
    the first fit when every item shares (the same input, so the same
    offsets): its offsets are the reference first fit of the sharing ones,
    on random lifetimes where some items share and some do not."""
    import random

    from nem.analysis import buffer_lifetimes as bl

    rng = random.Random(11)
    subsets = 0
    for _ in range(300):
        items = []
        for k in range(rng.randint(2, 12)):
            first = rng.randint(0, 12)
            items.append(
                bl.Lifetime(
                    _Buffer(),
                    rng.choice([64, 96, 128, 4096]),
                    rng.choice([1, 64]),
                    first,
                    first + rng.choice([0, 1, 3]),
                )
            )
        sharing = bl._sharing(items, _first_fit_reference(items))
        packing = bl.pack(items)
        if packing is None:
            continue
        subsets += len(sharing) < len(items)
        assert packing.offsets == _first_fit_reference(sharing)
        assert list(packing.offsets) == [it.buffer for it in sharing]
    assert subsets > 20  # the refit was exercised


def test_ordering_the_reuse_pairs_only_accesses_of_different_packed_buffers():
    """Each packed buffer was race-free before packing: the ordering's scan
    decides only pairs across them (fewer pairs, the same races)."""
    from nem.analysis.hazard_finder import find_races

    module, _ = _program(PROGRAM)
    (packed,) = ShareBuffersPass().pack(pass_context(file="p.nem"), module)
    assert set(packed.members.values()) == {"a", "b", "c"}
    all_pairs = find_races(packed.program, buffers=packed.arenas)
    across = find_races(packed.program, buffers=packed.arenas, members=packed.members)
    assert across.work < all_pairs.work
    assert (
        [(r.earlier.inst.task.op, r.later.inst.task.op) for r in across.races]
        == [(r.earlier.inst.task.op, r.later.inst.task.op) for r in all_pairs.races]
        != []
    )


def test_packed_footprints_are_those_of_the_packed_program():
    """What nem-compile asks before ordering (D-COMPILE-L1) is what the
    capacity check measures once the buffers are packed."""
    from nem.analysis.capacity import memory_maps
    from nem.dialect.semantics.layout import footprint
    from nem.passes.share_buffers import packed_footprints

    module, prog = _program(PROGRAM)
    before = packed_footprints(prog, None, "L1", over_capacity_only=False)
    ShareBuffersPass().pack(pass_context(file="p.nem"), module)
    after = {key: footprint(placed) for key, placed in memory_maps(prog).items()}
    assert before == after and before["L1[0]"] == 512


def test_over_capacity_lays_the_program_out_once_for_all_levels(monkeypatch):
    """Which levels overflow is read from one layout of the program, not one
    per level: DenseNet-121's four L1[k] laid it out four times per question,
    twice per compile (issue 30).  Counted in `memory_maps` calls."""
    import nem.analysis.capacity as cap
    from nem.devices.device_lookup import find_device
    from nem.passes.share_buffers import packed_footprints

    calls = []
    real = cap.memory_maps
    monkeypatch.setattr(cap, "memory_maps", lambda *a, **k: calls.append(1) or real(*a, **k))
    extra = "".join(f"buffer e{k} : L1[{k}] (size=64)\n" for k in (1, 2, 3))
    module, prog = _program(PROGRAM.replace("buffer a :", extra + "buffer a :", 1))
    levels = {op.result.type.level.data for op in prog.block.ops if isinstance(op, BufferOp)}
    assert levels - {"DDR"} == {"L1[0]", "L1[1]", "L1[2]", "L1[3]"}
    device = find_device("npm_pro_x1", ())
    packed_footprints(prog, device, "L1", over_capacity_only=True)
    assert len(calls) == 1
    ShareBuffersPass(over_capacity_only=True, device="npm_pro_x1").pack(
        pass_context(file="p.nem"), module
    )
    assert len(calls) == 2


def test_ordering_the_reuse_bounds_only_the_arenas_accesses(monkeypatch):
    """The arena ordering asks for the arenas' races only: the other
    buffers' accesses are not collected (DenseNet-121: a whole program's
    byte bounds per scan, issue 30).  Counted in `_bounds` calls."""
    from nem.analysis.hazard_finder import HazardFinder, find_races
    from nem.dialect.ops import RegionOp, TaskOp

    module, prog = _program(PROGRAM)
    (packed,) = ShareBuffersPass().pack(pass_context(file="p.nem"), module)
    calls = []
    real = HazardFinder._bounds
    monkeypatch.setattr(HazardFinder, "_bounds", lambda self, *a: calls.append(1) or real(self, *a))
    find_races(packed.program, buffers=packed.arenas, members=packed.members)
    on_arenas = sum(
        1
        for op in prog.walk()
        if isinstance(op, TaskOp)
        for v in op.operands
        if isinstance(v.owner, RegionOp) and v.owner.buffer in packed.arenas
    )
    assert 0 < len(calls) == on_arenas


def _count_packs(monkeypatch) -> list[int]:
    import nem.analysis.buffer_lifetimes as bl

    calls: list[int] = []
    real = bl.pack
    monkeypatch.setattr(bl, "pack", lambda items: calls.append(1) or real(items))
    return calls


UNORDERED = (
    PROGRAM.replace(", deps=[la, lb]", "")
    .replace(", deps=[lc]", "")
    .replace("  wait(sa)\n", "")
    .replace("wait(sb, sc)\n", "")
)


def test_the_estimates_packing_is_reused_after_ordering(monkeypatch):
    """nem-compile packs the unordered program to ask whether L1 fits
    (D-COMPILE-L1); nem-synthesize-deps then adds deps and waits only, so
    `pack` reuses that packing instead of computing it again (issue 30:
    1.7 s on DenseNet-121).  Counted in `buffer_lifetimes.pack` calls; the
    packed program is the one a fresh pack writes."""
    from nem.compile.lower import _check_packed_l1
    from nem.passes.synthesize_deps import SynthesizeDepsPass

    share = ShareBuffersPass()
    fresh, _ = _program(UNORDERED)
    SynthesizeDepsPass(device="npm_pro_x1").apply(pass_context(file="p.nem"), fresh)
    share.pack(pass_context(file="p.nem"), fresh)
    calls = _count_packs(monkeypatch)
    module, prog = _program(UNORDERED)
    plans = _check_packed_l1(module, share, "npm_pro_x1", ())
    assert len(calls) == 1 and plans[prog].packings
    ctx = pass_context(file="p.nem")
    before = len(prog.block.ops)
    SynthesizeDepsPass(device="npm_pro_x1").apply(ctx, module)
    assert len(prog.block.ops) > before  # waits were added: statements renumbered
    (packed,) = share.pack(ctx, module, plans)
    assert len(calls) == 1  # not packed again
    assert set(packed.members.values()) == {"a", "b", "c"}
    assert print_nem(module) == print_nem(fresh)


def test_a_moved_use_packs_again(monkeypatch):
    """The reuse is guarded (`buffer_lifetimes.same_packing`): when a use of a
    buffer moved so that lifetimes overlap differently, the packing is
    computed again, and it is the one a fresh pack of the program writes."""
    from nem.analysis.buffer_lifetimes import plan

    module, prog = _program(PROGRAM)
    old = plan(prog, ["L1[0]"])
    offsets = {b.buffer_name.data: o for b, o in old.packings[0].offsets.items()}
    assert offsets == {"c": 0, "b": 0, "a": 256}
    # c's load (and its region ops) moves before the loop: c overlaps a and b
    lc = next(op for op in prog.block.ops if getattr(op, "token", None) and op.token.data == "lc")
    loop = next(op for op in prog.block.ops if isinstance(op, LoopOp))
    for v in lc.operands:
        if isinstance(v.owner, RegionOp) and v.owner.buffer.owner.buffer_name.data == "c":
            region = v.owner
    for op in (region.offset.owner, region.extent.owner, region, lc):
        if op.parent_op() is prog:
            op.detach()
            prog.block.insert_op_before(op, loop)
    moved = print_nem(module)
    calls = _count_packs(monkeypatch)
    ShareBuffersPass().pack(pass_context(file="p.nem"), module, {prog: old})
    assert len(calls) == 1  # the guard saw the move: packed again
    fresh, _ = _program(moved)
    ShareBuffersPass().pack(pass_context(file="p.nem"), fresh)
    assert print_nem(module) == print_nem(fresh)
    assert "L1_0_arena" not in print_nem(module)  # c overlaps both: only a and b can share


def test_same_packing_reads_only_how_lifetime_ends_compare():
    """Statement numbers may shift (waits inserted, dead constants removed):
    only the order of the ends matters, and the buffers, sizes, aligns."""
    from nem.analysis.buffer_lifetimes import Lifetime, same_packing

    _, prog = _program(PROGRAM)
    a, b = [op for op in prog.block.ops if isinstance(op, BufferOp)][2:4]
    old = [Lifetime(a, 64, 64, 3, 5), Lifetime(b, 64, 64, 5, 9)]
    assert same_packing(old, [Lifetime(a, 64, 64, 4, 7), Lifetime(b, 64, 64, 7, 20)])
    assert not same_packing(old, [Lifetime(a, 64, 64, 4, 7), Lifetime(b, 64, 64, 8, 20)])
    assert not same_packing(old, [Lifetime(a, 64, 64, 3, 5), Lifetime(b, 128, 64, 5, 9)])
    assert not same_packing(old, [Lifetime(b, 64, 64, 3, 5), Lifetime(a, 64, 64, 5, 9)])


U = 131072
"""The unit of `PEELED`'s sizes: 9 units do not fit L1 (1 MiB), 6 do."""
PEELED = (
    'include "npm_pro_x1.nem"\ndevice npm_pro_x1\nprogram p:\n'
    f"buffer X : DDR (size={8 * U}, align=64)\nbuffer Y : DDR (size={8 * U}, align=64)\n"
    f"buffer w : L1[0] (size={4 * U}, align=64)\n"  # staged once, read by the peel and the loop
    f"buffer p : L1[0] (size={U}, align=64)\n"  # the peeled tile's, before the loop
    f"buffer s : L1[0] (size={2 * U}, align=64)\n"  # the loop's tiles
    f"buffer c : L1[0] (size={2 * U}, align=64)\n"  # after the loop
    + _move("lw", f"region(w, 0, {4 * U})", f"region(X, 0, {4 * U})", 4 * U)
    + _move("lp", f"region(p, 0, {U})", f"region(X, {4 * U}, {U})", U)
    + _move("sp", f"region(Y, 0, {U})", f"region(p, 0, {U})", U, ", deps=[lp]")
    + _move("pw", f"region(Y, {U}, {U})", f"region(w, 0, {U})", U, ", deps=[lw]")
    + "loop i in [0..1]:\n"
    + "  "
    + _move("ls", f"region(s, 0, {2 * U})", f"region(X, i * {U} + {5 * U}, {2 * U})", 2 * U)
    + "  "
    + _move("ss", f"region(Y, i * {U} + {2 * U}, {U})", f"region(s, 0, {U})", U, ", deps=[ls]")
    + "  "
    + _move(
        "cw", f"region(Y, i * {U} + {4 * U}, {U})", f"region(w, i * {U}, {U})", U, ", deps=[lw]"
    )
    + "  wait(ss, cw)\nendloop\n"
    + _move("lc", f"region(c, 0, {2 * U})", f"region(X, {6 * U}, {2 * U})", 2 * U)
    + _move("sc", f"region(Y, {6 * U}, {2 * U})", f"region(c, 0, {2 * U})", 2 * U, ", deps=[lc]")
    + "wait(sp, pw, sc)\n"
)


def _units(packing) -> dict[str, float]:
    return {b.buffer_name.data: o / U for b, o in packing.offsets.items()}


def test_spread_keeps_a_peel_off_the_bytes_of_the_loop_after_it():
    """The plain first fit puts the peeled tile's buffer `p` (straight-line
    statements just before the loop) on the loop's buffer `s`: the loop's
    first load then waits for the peel's store.  With room to spare,
    `spread` keeps the buffers of neighbouring phases apart; without, the
    packing is kept; with room for all, nothing is packed (D-LOW-SHARE)."""
    from nem.analysis.buffer_lifetimes import plan, spread

    _, prog = _program(PEELED)
    found = plan(prog, ["L1[0]"])
    (packing,) = found.packings
    assert _units(packing) == {"w": 0, "p": 4, "s": 4, "c": 0} and packing.size == 6 * U
    phases = {lt.buffer.buffer_name.data: lt.phases for lt in found.lifetimes}
    assert phases == {"w": (0, 1), "p": (0, 0), "s": (1, 1), "c": (2, 2)}
    # c, used two phases after w, may share its bytes: not p and s
    (apart,) = spread(found, {"L1[0]": U}).packings
    assert _units(apart) == {"w": 0, "p": 6, "s": 4, "c": 0} and apart.size == 7 * U
    assert spread(found, {"L1[0]": U - 1}) is found
    (roomy,) = spread(found, {"L1[0]": 3 * U}).packings
    assert _units(roomy) == {"w": 0, "p": 6, "s": 4, "c": 6} and roomy.size == 8 * U
    # without c, p and s alone share: kept apart, nothing is packed
    _, prog = _program(PEELED.replace("buffer c : L1[0]", "buffer c : L1[1]"))
    found = plan(prog, ["L1[0]"])
    assert _units(found.packings[0]) == {"p": 0, "s": 0}
    assert spread(found, {"L1[0]": U}).packings == ()


def test_a_spread_packing_is_race_free_and_lets_the_loop_start_before_the_peel_ends():
    """`nem-share-buffers{over-capacity-only=true}` (nem-compile's) spreads
    where the level has room: the loop's load no longer waits for the
    peel's store, and the program still computes the same.  Without
    over-capacity-only it packs as tight as before."""
    module, prog = _program(PEELED)
    ShareBuffersPass(over_capacity_only=True).apply(pass_context(file="p.nem"), module)
    packed = print_nem(module)
    assert f"region(L1_0_arena, {6 * U}, {U})" in packed  # p, on c's bytes
    assert not find_hazards(prog)
    ls = next(line for line in packed.splitlines() if line.strip().startswith("ls ="))
    assert "deps" not in ls
    tight, _ = _program(PEELED)  # (unpacked, it does not fit L1)
    ShareBuffersPass().apply(pass_context(file="p.nem"), tight)
    ls = next(line for line in print_nem(tight).splitlines() if line.strip().startswith("ls ="))
    assert "deps=[sp]" in ls
    assert np.array_equal(_outputs(packed), _outputs(print_nem(tight)))


@pytest.mark.slow  # ~8 s: two compiles of the conv, timed and random-schedule runs
def test_resnet50_res3_branch2a_conv_runs_its_peels_beside_its_tile_loop(monkeypatch):
    """ResNet-50's n48 (1x1 conv 512->128 on 28x28, + relu), the 28 rows
    split over 4 engines in parts of 7: each engine's loop runs 3 tiles of 2
    rows and its 7th row is a peeled tile, which the jam puts before the
    loop.  Packed tight, the peel's buffers lay on the loop's slots and the
    loop's first loads waited for the peel's store; spread (D-LOW-SHARE),
    they do not: the same output bits under random schedules, race-free,
    `nem-verify` clean (compile_onnx verifies), fewer timed cycles (57,152
    -> 50,868 for the whole program, the cut's NCHW transposes included;
    36,848 -> 34,176 since session 24 split the transposes' L1-to-L1 copies
    over the DMAs and priced the engine split by the bytes moved; 31,640 ->
    31,352 since session 25 waits for the weights before the loop,
    D-NEM-SPLIT-TRANSFERS: the loop's first loads no longer queue behind
    them, so the spread has less to gain).  The input is turned to NHWC in
    DDR first, as n48's (an activation) is, not read through a transposed
    view (D-COMPILE-LAYOUT, session 26)."""
    from compile_runs import conv1x1_relu_model, only_output, timed_cycles

    import nem.analysis.buffer_lifetimes as bl
    from nem.compile import compile_onnx

    model = conv1x1_relu_model(28, 512, 128)
    new = compile_onnx(model, device="npm_pro_x1", transposed_reads=False)
    monkeypatch.setattr(bl, "SPREAD_TRIES", 0)
    old = compile_onnx(model, device="npm_pro_x1", transposed_reads=False)
    assert new.nem != old.nem
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < timed_cycles(old.nem)


def _region(name: str, buf: str, off: int) -> str:
    return f"{name} = region({buf}, {off}, 512) elem=f16, shape=[16, 16], layout=MN\n"


def _layer(n: int, src: str) -> str:
    """Layer `n`: its input (from `src`) and weights (from W) loaded into
    L1[0], a gemm on the NMU, its output stored to Y."""
    return (
        _region(f"X{n}", src, 0 if src == "X" else 512 * (n - 1))
        + _region(f"V{n}", "W", 512 * n)
        + _region(f"Z{n}", "Y", 512 * n)
        + _region(f"A{n}", f"a{n}", 0)
        + _region(f"W{n}", f"w{n}", 0)
        + _region(f"Y{n}", f"y{n}", 0)
        + f"la{n} = transfer.async(dst=A{n}, src=X{n}{', deps=[s1]' if n == 2 else ''})\n"
        + f"lw{n} = transfer.async(dst=W{n}, src=V{n})\n"
        + f"g{n} = gemm.async in A{n}, W{n} out Y{n} deps=[la{n}, lw{n}]\n"
        + f"s{n} = transfer.async(dst=Z{n}, src=Y{n}, deps=[g{n}])\n"
    )


LAYERS = (
    'include "npm_pro_x1.nem"\ndevice npm_pro_x1\nprogram p:\n'
    "buffer X : DDR (size=4096, align=64)\nbuffer W : DDR (size=4096, align=64)\n"
    "buffer Y : DDR (size=4096, align=64)\n"
    + "".join(f"buffer {b}{n} : L1[0] (size=512, align=64)\n" for n in (1, 2) for b in "awy")
    + _layer(1, "X")
    + _layer(2, "Y")
    + "wait(s2)\n"
)
"""Two layers on engine 0, one straight-line phase: each loads its input
and weights (from W, which nothing writes), computes on the NMU, stores."""


@pytest.mark.parametrize("gemm, early", [(100, {"w2"}), (300, set())])
def test_weights_loaded_ahead_are_early_after_a_compute_no_longer_than_their_load(gemm, early):
    """`Lifetime.early` (session 41, D-LOW-SHARE): a buffer whose first use
    loads it from a buffer no transfer writes (w2, not a2: Y is stored),
    when the previous nest phase computes on the NMUs no longer than that
    load (by `cycles`; every transfer here takes 200).  w1 has no nest
    before; without `cycles` nothing is early."""
    _, prog = _program(LAYERS)
    found = lifetimes(prog, ["L1[0]"], cycles=lambda t: gemm if t.name == "nem.gemm" else 200)
    nests = {lt.buffer.buffer_name.data: lt.nests for lt in found}
    assert nests == {
        "a1": (0, 0),
        "w1": (0, 0),
        "y1": (0, 0),
        "a2": (1, 1),
        "w2": (1, 1),
        "y2": (1, 1),
    }
    assert {lt.buffer.buffer_name.data for lt in found if lt.early} == early
    assert not any(lt.early for lt in lifetimes(prog, ["L1[0]"]))


def test_spread_keeps_early_weights_off_the_previous_nests_bytes():
    """Where the phase cannot be kept apart, an early buffer (w, the next
    layer's weights) keeps off the buffers of its own and the neighbouring
    nest phases (y, the previous layer's output: its load would wait for
    y's store) and may take those of a farther one (z); a buffer not early
    goes where the plain first fit puts it, on y's bytes."""
    from nem.analysis.buffer_lifetimes import Lifetime, Plan, spread

    _, prog = _program(PROGRAM)
    a, b, c = (
        op for op in prog.walk() if isinstance(op, BufferOp) and op.buffer_name.data in "abc"
    )
    y = Lifetime(a, 2 * U, 1, 0, 1, (0, 0), (0, 0))
    z = Lifetime(b, U, 1, 6, 7, (0, 0), (3, 3))
    for early, w_at in ((True, 2), (False, 0)):
        w = Lifetime(c, U, 1, 2, 3, (0, 0), (1, 1), early)
        items = [y, z, w]
        packing = pack(items)
        assert packing is not None and _units(packing) == {"a": 0, "b": 0, "c": 0}
        (apart,) = spread(Plan(("L1[0]",), tuple(items), (packing,)), {"L1[0]": U}).packings
        assert _units(apart) == {"a": 0, "b": 2, "c": w_at} and apart.size == 3 * U


def test_spread_lowers_its_limit_faster_while_the_overshoot_does_not_shrink():
    """A buffer kept apart (w1, apart from a1's phase) pushes one that
    cannot be kept apart (y1, live across both phases) past the room by
    one byte, and lowering the limit by that byte leaves w1 apart: tried
    again with the limit lowered by the overshoot only, the spread never
    fitted within its tries and the whole level kept its tight packing
    (VGG-19's L1[3], and Inception v1's once its 13-row layers' engine
    parts are even: session 45).  Each try lowers the limit twice as far
    as the last, so w1 gives up its apart bytes and a2 still keeps off
    the bytes of the phase before it (D-LOW-SHARE)."""
    from nem.analysis.buffer_lifetimes import Lifetime, Packing, Plan, spread

    _, prog = _program(LAYERS)
    bufs = {op.buffer_name.data: op for op in prog.walk() if isinstance(op, BufferOp)}
    u = 24
    items = (
        Lifetime(bufs["a1"], 4 * u, 1, 0, 0, (0, 0)),
        Lifetime(bufs["w1"], 3 * u, 1, 1, 1, (1, 1)),
        Lifetime(bufs["y1"], 2 * u, 1, 0, 1, (0, 1)),
        Lifetime(bufs["a2"], u, 1, 2, 2, (2, 2)),
    )
    tight = Packing("L1[0]", {it.buffer: 0 for it in items} | {bufs["y1"]: 4 * u}, 6 * u, 1, 10 * u)
    found = Plan(("L1[0]",), items, (tight,))
    (apart,) = spread(found, {"L1[0]": 3 * u - 1}).packings
    assert {b.buffer_name.data: o / u for b, o in apart.offsets.items()} == {
        "a1": 0,
        "w1": 0,
        "y1": 4,
        "a2": 3,
    }
    assert apart.size == 6 * u
