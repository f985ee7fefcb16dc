"""Small NEM programs shared by the runtime tests, and what they compare."""

from nem.runtime import scheduler as sched_mod

PINGPONG = """\
program pingpong:
const T = {T}
const tile = 256
buffer X_L2 : L2 (size=T * tile, align=64)
buffer Y_L2 : L2 (size=T * tile, align=64)
buffer X_L1 : L1 (size=2 * tile, align=64)
loop i in [0..T-1] @max_in_flight({N}):
  let src = region(X_L2, i * tile, tile)
  let slot = region(X_L1, (i mod 2) * tile, tile)
  let dst = region(Y_L2, i * tile, tile)
  tX = transfer.async(dst=slot, src=src)
  tS = store.async(dst=dst, src=slot, deps=[tX])
  wait(tS)
endloop
"""


def pingpong(N: int, T: int = 6) -> str:
    return PINGPONG.format(N=N, T=T)


LOOP = """\
program lazy:
const T = {T}
buffer X_DDR : DDR (size=64 * T, align=64)
buffer X_L1 : L1 (size=128, align=64)
loop i in [0..T-1] @max_in_flight(2):
  t = transfer.async(dst=region(X_L1, (i mod 2) * 64, 64), src=region(X_DDR, i * 64, 64))
endloop
"""

ELTWISE = """\
program eltwise:
buffer X_L2 : L2 (size=4096, align=64)
buffer Y_L2 : L2 (size=4096, align=64)
buffer Z_L2 : L2 (size=4096, align=64)
buffer X_L1 : L1 (size=4096, align=64)
buffer Y_L1 : L1 (size=4096, align=64)
buffer Z_L1 : L1 (size=4096, align=64)
loop i in [0..3] @max_in_flight(2):
  let xs = region(X_L2, i * 1024, 1024) elem=f32, shape=[16, 16], layout=MN
  let ys = region(Y_L2, i * 1024, 1024) elem=f32, shape=[16, 16], layout=MN
  let zs = region(Z_L2, i * 1024, 1024) elem=f32, shape=[16, 16], layout=MN
  let x = region(X_L1, i * 1024, 1024) elem=f32, shape=[16, 16], layout=MN
  let y = region(Y_L1, i * 1024, 1024) elem=f32, shape=[16, 16], layout=MN
  let z = region(Z_L1, i * 1024, 1024) elem=f32, shape=[16, 16], layout=MN
  tX = transfer.async(dst=x, src=xs)
  tY = transfer.async(dst=y, src=ys)
  tA = add.async in x, y out z deps=[tX, tY]
  tR = relu.async in z out z deps=[tA]
  tS = store.sync(dst=zs, src=z, deps=[tR])
endloop
"""


DIVS = """\
program divs:
buffer X : L1 (size=1024, align=64)
buffer Y : L1 (size=1024, align=64)
buffer Z : L1 (size=1024, align=64)
loop i in [0..3] @max_in_flight(1):
  let x = region(X, i * 256, 256) elem=i32, shape=[64], layout=C
  let y = region(Y, i * 256, 256) elem=i32, shape=[64], layout=C
  let z = region(Z, i * 256, 256) elem=i32, shape=[64], layout=C
  tD = div.sync in x, y out z
endloop
"""


PIPE = """\
program pipe:
buffer X_L2 : L2 (size=1024)
buffer Y_L2 : L2 (size=1024)
buffer S : L1 (size=512)
loop i in [0..3] @max_in_flight(2):
  let x = region(X_L2, i * 256, 256) elem=f32, shape=[64], layout=C
  let y = region(Y_L2, i * 256, 256) elem=f32, shape=[64], layout=C
  let s = region(S, (i mod 2) * 256, 256) elem=f32, shape=[64], layout=C
  tin = transfer.async(dst=s, src=x)
  tr = relu.async in s out s deps=[tin]
  tout = store.async(dst=y, src=s, deps=[tr])
  wait(tout)
endloop
"""
"""The program of docs/python-api.md, "Stepping through a session"."""

NEST = """\
program nest:
buffer X : L2 (size=256)
loop i in [0..3] @max_in_flight(2):
  buffer T : L1 (size=64)
  let t = region(T, 0, 16) elem=f32, shape=[4], layout=C
  loop j in [0..i]:
    let r = region(X, (i * 4 + j) * 16, 16) elem=f32, shape=[4], layout=C
    c = transfer.sync(dst=t, src=r)
  endloop
endloop
"""
"""Nested loops, the inner bound depending on the outer variable, and a
loop-body buffer with one instance per in-flight iteration (D-SEM-INSTANCES):
after a run, instance 0 of T holds X[40:44] (i=2, j=2), instance 1 X[60:64]
(i=3, j=3)."""


def run_summary(it, r) -> tuple:
    """What a run reports, comparable across runs (D-RT-REPLAY, D-RT-PREPARE)."""
    return (
        r.status,
        r.tasks_run,
        r.counts,
        r.race_count,
        [str(x) for x in r.races],
        [str(u) for u in r.unconsumed],
        r.max_active_iterations,
        r.error.message if r.error else None,
        r.error.loc if r.error else None,
    )


def issued_tasks(monkeypatch) -> list:
    """The task templates the scheduler issues from now on (none when a run is replayed)."""
    calls: list = []
    orig = sched_mod.Scheduler._issue

    def counting(self, frame, tpl):
        calls.append(tpl)
        return orig(self, frame, tpl)

    monkeypatch.setattr(sched_mod.Scheduler, "_issue", counting)
    return calls
