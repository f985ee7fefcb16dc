"""Small NEM programs shared by the runtime tests."""

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
