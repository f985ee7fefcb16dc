"""The hazard analysis's cost grows with the program, not with its
iterations nor the product of readers and writers (D-HAZ-SCALE, issue 11;
D-HAZ-SYMBOLIC, issue 30).

A buffer read whole by every iteration of a loop and rewritten piecewise
used to keep one reader per iteration in each byte segment and to compare
every read with the writer of every segment: quadratic ordering queries
(a 3 KB fuzz input, test/fuzz/corpus/mlir/hang-4198139d7fe2.mlir, took
10 s through `lower-to-nem`).  Decided over sets of instances, the same
loop costs the same for any trip count: counted in the analysis's work
(pairs of static accesses and isl queries) and `ordered` calls, not timed.
"""

from __future__ import annotations

from nem.analysis import hazard_finder
from nem.analysis.hazard_finder import find_races
from nem.analysis.race_memos import ShapeMemos
from nem.dialect.ops import ProgramOp
from nem.frontends.nem_text.parser import parse_nem


def tiles(n: int, window: int = 1) -> str:
    """Iteration i writes row i of `t`, then copies all of `t` out."""
    size = 256 * n
    deco = f" @max_in_flight({window})" if window > 1 else ""
    return f"""program p:
buffer src : DDR (size={size}, align=64)
buffer t : DDR (size={size}, align=64)
buffer out : DDR (size={size}, align=64)
loop i in [0..{n - 1}]{deco}:
  a = add.async in region(src, i * 256, 256) elem=f32, shape=[64], layout=C, region(src, i * 256, 256) elem=f32, shape=[64], layout=C out region(t, i * 256, 256) elem=f32, shape=[64], layout=C
  d = transfer.async(dst=region(out, 0, {size}) elem=f32, shape=[{n}, 64], layout=MN, src=region(t, 0, {size}) elem=f32, shape=[{n}, 64], layout=MN, deps=[a])
  wait(d)
endloop
"""


def _program(src: str) -> ProgramOp:
    return next(o for o in parse_nem(src, "t.nem").walk() if isinstance(o, ProgramOp))


def _counted(monkeypatch, name: str) -> list[int]:
    """A one-element list counting the calls of `hazard_finder.<name>`."""
    calls = [0]
    real = getattr(hazard_finder, name)

    def counting(*args):
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(hazard_finder, name, counting)
    return calls


def _queries(monkeypatch, src: str) -> tuple[int, int, list[str]]:
    """(`ordered` calls, the analysis's work, the messages) for `src`."""
    calls = _counted(monkeypatch, "ordered")
    finder = hazard_finder.HazardFinder(_program(src))
    diags = [d.message for d in finder.run()]
    return calls[0], finder.work, diags


def test_work_does_not_grow_with_iterations(monkeypatch):
    # RULE: HAZ-01
    small = _queries(monkeypatch, tiles(64))
    large = _queries(monkeypatch, tiles(4096))
    assert small[2] == large[2] == []
    # no race: `ordered` is only asked to confirm the instances a race names
    assert small[0] == large[0] == 0
    assert small[1] == large[1] and small[1] < 20, (small, large)


def test_a_race_is_still_found(monkeypatch):
    # RULE: HAZ-01
    # two iterations in flight: iteration i+1's add overwrites row i+1 of
    # `t` while iteration i's transfer may still be reading it
    # (and iteration i+1's transfer reads the row iteration i's add writes,
    # and the two transfers write the same bytes of `out`)
    calls, work, diags = _queries(monkeypatch, tiles(4096, window=2))
    kinds = sorted(d.split(" hazard")[0] for d in diags)
    assert kinds == ["read-after-write", "write-after-read", "write-after-write"], diags
    assert all("iterations at distance 1 < 2" in d for d in diags), diags
    assert calls == 3 and work < 40, (calls, work)


def test_scan_reports_its_work():
    scan = find_races(_program(tiles(64)))
    assert scan.races == [] and scan.work > 0


def test_a_second_analysis_decides_no_shape_again(monkeypatch):
    # RULE: HAZ-01
    # nem-compile analyses a program three times (synthesize-deps, the
    # arena ordering, the final nem-verify on the text read back): the race
    # sets and witnesses are memos of the pair's shape, which the driver
    # hands to each analysis (D-HAZ-SYMBOLIC); every pair is still looked
    # up, so the second analysis, on new ops, reports the same races.
    # Without the shared memos, the second decides every shape again.
    decided = []
    real = hazard_finder.HazardFinder._races

    def counting(self, *args):
        decided.append(args[0])
        return real(self, *args)

    monkeypatch.setattr(hazard_finder.HazardFinder, "_races", counting)
    memos = ShapeMemos()
    first = [
        d.message for d in hazard_finder.HazardFinder(_program(tiles(64, 2)), memos=memos).run()
    ]
    n = len(decided)
    again = [
        d.message for d in hazard_finder.HazardFinder(_program(tiles(64, 2)), memos=memos).run()
    ]
    assert n > 0 and len(decided) == n, (n, len(decided))
    assert again == first and len(first) == 3, first
    alone = [d.message for d in hazard_finder.HazardFinder(_program(tiles(64, 2))).run()]
    assert alone == first and len(decided) == 2 * n, (n, len(decided))


def test_the_pass_context_holds_one_run_s_shape_memos():
    # RULE: HAZ-01
    # the memos live on a driver's pass context (issue 36: no module-level
    # caches): one per run, none shared between two runs or under xDSL's
    # plain context
    from xdsl.context import Context

    from nem.passes.pass_context import pass_context, shape_memos

    ctx, other = pass_context(), pass_context()
    assert shape_memos(ctx) is shape_memos(ctx) is shape_memos(ctx.clone())
    assert shape_memos(other) is not shape_memos(ctx)
    assert shape_memos(Context()) is not shape_memos(Context())


def rewrites(n: int) -> str:
    """n tasks of one loop body writing the same 256 bytes, unordered: each
    pair races (WAW), each nearest only to its neighbours."""
    adds = "\n".join(
        f"  a{k} = add.async in region(src, 0, 256) elem=f32, shape=[64], "
        "layout=C, region(src, 0, 256) elem=f32, shape=[64], layout=C out "
        "region(t, 0, 256) elem=f32, shape=[64], layout=C"
        for k in range(n)
    )
    return f"""program p:
buffer src : DDR (size=256, align=64)
buffer t : DDR (size=256, align=64)
loop i in [0..1]:
{adds}
  wait({", ".join(f"a{k}" for k in range(n))})
endloop
"""


def test_a_chain_of_rewrites_finds_its_interveners_first(monkeypatch):
    # RULE: HAZ-01
    # a fuzz input (one async.execute of 200 linalg.adds into one buffer)
    # took 88 s in lower-to-nem: for each of the n^2/2 racing pairs, the
    # search for a write in between tried the n writes of the statement in
    # program order, an isl query each (n^3). The writes placed between
    # the two tasks go first: one query a pair.
    calls = _counted(monkeypatch, "key_compare")
    counts = []
    for n in (8, 16):
        calls[0] = 0
        diags = hazard_finder.HazardFinder(_program(rewrites(n))).run()
        assert len(diags) == n - 1, [d.message for d in diags]  # the nearest pairs
        counts.append(calls[0])
    assert counts[1] <= 4.5 * counts[0], counts


def repeated(copies: int, dep: bool) -> str:
    """A transfer writes `s`; a concat reads it `copies` times (a broadcast,
    D-LOW-BCAST-LET) into `t`, after the transfer only with `dep`."""
    deps = " deps=[w]" if dep else ""
    ins = ", ".join(["s_src"] * copies)
    return f"""program p:
buffer x : DDR (size=64, align=64)
buffer s : DDR (size=64, align=64)
buffer t : DDR (size={64 * copies}, align=64)
w = transfer.async(dst=region(s, 0, 64) elem=i8, shape=[16, 4], layout=MN, src=region(x, 0, 64) elem=i8, shape=[16, 4], layout=MN)
let s_src = region(s, 0, 64) elem=i8, shape=[1, 16, 4], strides=[64, 4, 1]
c = concat.async in {ins} out region(t, 0, {64 * copies}) elem=i8, shape=[{copies}, 16, 4], strides=[64, 4, 1]{deps} axis=0
wait(c)
"""


def test_a_region_read_several_times_is_one_access():
    # RULE: HAZ-01
    # a broadcast's concat reads one region E times (D-LOW-BCAST-CONCAT):
    # one access, its last copy's rank, not E that each pair with every
    # other access of the buffer (DenseNet-121: 28,568 of 60,067 operand
    # regions); the race with the unordered writer is found once, and an
    # ordered one is none
    finder = hazard_finder.HazardFinder(_program(repeated(8, dep=False)))
    by_buffer = finder._collect()
    on_s = next(
        accs
        for buf, accs in by_buffer.items()
        if getattr(buf.owner, "buffer_name", None) is not None and buf.owner.buffer_name.data == "s"
    )
    assert [(a.write, a.rank) for a in on_s] == [(True, 1), (False, 7)], on_s
    diags = [d.message for d in finder.run()]
    assert len(diags) == 1 and diags[0].startswith("read-after-write"), diags
    assert [
        d.message for d in hazard_finder.HazardFinder(_program(repeated(8, dep=True))).run()
    ] == []


def _shared_reads(n: int) -> str:
    """`n` tasks each read the whole of `w`, which nothing writes (a weight
    every node of a chain reads), and write a buffer of their own."""
    lines = ["program p:", "buffer w : DDR (size=256, align=64)"]
    for i in range(n):
        lines.append(f"buffer o{i} : DDR (size=256, align=64)")
        lines.append(
            f"r{i} = relu.async in region(w, 0, 256) elem=f32, shape=[64], layout=C "
            f"out region(o{i}, 0, 256) elem=f32, shape=[64], layout=C"
        )
    return "\n".join(lines) + "\n"


def _pair_steps(src: str) -> int:
    """Line events in `live_pairs` (`HazardFinder._pairs`) and the
    comprehensions it runs: the accesses it compares, counted, not timed."""
    import sys

    from nem.analysis import hazard_report

    code = hazard_report.live_pairs.__code__
    steps = [0]

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202
        if frame.f_code is code or (frame.f_back is not None and frame.f_back.f_code is code):
            if event == "line":
                steps[0] += 1
            return tracer
        return None

    program = _program(src)
    sys.settrace(tracer)
    try:
        find_races(program)
    finally:
        sys.settrace(None)
    return steps[0]


def test_reads_of_an_unwritten_buffer_meet_no_reads():
    """Two reads are no pair: a read meets only the live writes (issue 30;
    the reads of a weight 10,000 chain nodes share were compared with all
    the earlier ones, 17.5 of synthesize-deps' 54 s).  4x the readers,
    about 4x the work, not 16x."""
    # RULE: HAZ-01
    small, large = _pair_steps(_shared_reads(40)), _pair_steps(_shared_reads(160))
    assert large <= 5 * small, (small, large)


def test_a_narrowed_window_builds_no_task_nest_again(monkeypatch):
    """Narrowing a loop's window drops what depends on buffer instances but
    keeps each task's isl nest (loop bounds only, `RaceCache.narrowed`):
    one nest per task, however many rounds and narrowings (issue 30)."""
    from nem.analysis.presburger import Nest
    from nem.passes.synthesize_deps import synthesize

    built: list[object] = []
    real = Nest.__init__

    def counted(self, ev, boxes, loops, sp, g, base=None):
        if base is None:
            built.append(tuple(loops))
        real(self, ev, boxes, loops, sp, g, base)

    t = "elem=f32, shape=[256], layout=C"
    src = (
        'include "npm_pro_x1.nem"\ndevice npm_pro_x1\nprogram reload:\n'
        "buffer X : DDR (size=4096, align=64)\nbuffer Y : DDR (size=4096, align=64)\n"
        "buffer x : L1[0] (size=2048, align=64)\n"
        "loop i in [0..3] @max_in_flight(2):\n"
        f"  ld = transfer.async(dst=region(x, 0, 1024) {t}, src=region(X, i * 1024, 1024) {t})\n"
        f"  st = transfer.async(dst=region(Y, i * 1024, 1024) {t}, src=region(x, 0, 1024) {t})\n"
        "endloop\n"
    )
    prog = _program(src)
    monkeypatch.setattr(Nest, "__init__", counted)
    remarks = synthesize(prog, None, narrow_windows=True)
    assert [d.message.split(":")[0] for d in remarks] == ["loop 'i' runs one iteration at a time"]
    assert len(built) == 2  # ld, st (the old code built them again after the narrowing: 4)


def _rewritten_piecewise(n: int) -> str:
    """`b` written whole (w0), then again in two halves by two statements
    (w1, w2), then read whole by `n` statements; nothing is ordered."""
    t = "elem=f32, shape=[{}], layout=C"
    lines = [
        "program p:",
        "buffer x : DDR (size=256, align=64)",
        "buffer b : DDR (size=256, align=64)",
        f"w0 = transfer.async(dst=region(b, 0, 256) {t.format(64)}, src=region(x, 0, 256) {t.format(64)})",
        f"w1 = transfer.async(dst=region(b, 0, 128) {t.format(32)}, src=region(x, 0, 128) {t.format(32)})",
        f"w2 = transfer.async(dst=region(b, 128, 128) {t.format(32)}, src=region(x, 128, 128) {t.format(32)})",
    ]
    for i in range(n):
        lines.append(f"buffer o{i} : DDR (size=256, align=64)")
        lines.append(
            f"r{i} = transfer.async(dst=region(o{i}, 0, 256) {t.format(64)}, "
            f"src=region(b, 0, 256) {t.format(64)})"
        )
    return "\n".join(lines) + "\n"


def test_an_access_every_byte_of_which_later_writes_cover_dies():
    """An access pairs with no access after the statements whose covering
    writes together wrote every byte it can touch (w0 after w1 and w2, each
    covering a half: `live_pairs`); a single write covering it all was
    needed before, so w0 met every later read (DenseNet-121's arena
    ordering: most of its 85k candidate pairs, issue 30).  Those pairs are
    nowhere nearest: the races found are the enumerating replay's, word for
    word."""
    # RULE: HAZ-01
    import hazard_replay

    src = _rewritten_piecewise(6)
    finder = hazard_finder.HazardFinder(_program(src))
    (accs,) = [
        accs
        for buf, accs in finder._collect().items()
        if buf.owner.buffer_name.data == "b"  # type: ignore[union-attr]
    ]
    w0 = accs[0]
    met = [y.op.token_name() for x, y in finder._pairs(accs) if x is w0 and y is not w0]
    assert met == ["w1", "w2"], met  # before: w1, w2 and r0..r5
    diags = [d.message for d in finder.run()]
    assert diags == [d.message for d in hazard_replay.find_hazards(_program(src))]
    assert len(diags) == 2 + 2 * 6, diags  # w0-w1, w0-w2; each read after w1 and w2


def test_a_narrowed_window_keeps_the_other_buffers_accesses(monkeypatch):
    """Narrowing a loop's window changes the instances of the buffers
    declared in it only (D-SEM-INSTANCES): the next scan collects no access
    again, gives `t` (in the loop) new accesses with its new windows and
    keeps the program-scope buffers' accesses, pairs and conflict sets
    (`RaceCache.stale`, issue 30: DenseNet-121's 80 narrowings collected
    and paired the whole program again)."""
    from nem.passes.synthesize_deps import Synthesizer

    collected = _counted_method(monkeypatch, hazard_finder.HazardFinder, "_collect")
    t = "elem=f32, shape=[256], layout=C"
    src = (
        "program reload:\n"
        "buffer X : DDR (size=4096, align=64)\nbuffer Y : DDR (size=4096, align=64)\n"
        "buffer x : L1[0] (size=2048, align=64)\n"
        "loop i in [0..3] @max_in_flight(2):\n"
        "  buffer t : L1[0] (size=1024, align=64)\n"
        f"  ld = transfer.async(dst=region(x, 0, 1024) {t}, src=region(X, i * 1024, 1024) {t})\n"
        f"  cp = transfer.async(dst=region(t, 0, 1024) {t}, src=region(x, 0, 1024) {t})\n"
        f"  st = transfer.async(dst=region(Y, i * 1024, 1024) {t}, src=region(t, 0, 1024) {t})\n"
        "endloop\n"
    )
    prog = _program(src)
    s = Synthesizer(prog, None, narrow_windows=True)
    before: dict[str, list[object]] = {}
    real_scan = hazard_finder.HazardFinder.scan

    def scan(self):  # noqa: ANN001, ANN202
        real_scan(self)
        for buf, accs in (self.cache.by_buffer or {}).items():
            before.setdefault(buf.owner.buffer_name.data, []).append(accs)

    monkeypatch.setattr(hazard_finder.HazardFinder, "scan", scan)
    s.run()
    assert [d.message.split(":")[0] for d in s.remarks] == ["loop 'i' runs one iteration at a time"]
    assert collected[0] == 1  # before: once more after the narrowing
    first, last = before["x"][0], before["x"][-1]
    assert all(a is b for a, b in zip(first, last, strict=True))  # kept
    t_first, t_last = before["t"][0], before["t"][-1]
    assert [a.windows for a in t_first] == [(2,), (2,)]
    assert [a.windows for a in t_last] == [(1,), (1,)]  # its instances followed the window
    # and the ordering is the one a fresh analysis of the narrowed program finds
    assert find_races(prog).races == []


def _counted_method(monkeypatch, cls: type, name: str) -> list[int]:
    calls = [0]
    real = getattr(cls, name)

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(cls, name, counting)
    return calls
