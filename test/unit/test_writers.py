"""`nem.compile.writers.Writers`, the one answer to "may an op between these
two write this buffer?" that the prologue fusion, the elementwise chains and
the shared staged copies ask (session 65; before, three walks over the
buffer's uses per query, one of them from the read view only, blind to a
write through a sibling view of the same buffer)."""

from __future__ import annotations

import pytest

ir = pytest.importorskip("mlir.ir")

from nem.compile.writers import Writers, root_of  # noqa: E402

IR = """
func.func @f(%w: memref<8xf32>, %o: memref<4xf32>) {
  %b = memref.alloc() : memref<8xf32>
  %lo = memref.subview %b[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %hi = memref.subview %b[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  linalg.copy ins(%w : memref<8xf32>) outs(%b : memref<8xf32>)
  linalg.copy ins(%lo : memref<4xf32, strided<[1]>>) outs(%o : memref<4xf32>)
  linalg.copy ins(%o : memref<4xf32>) outs(%hi : memref<4xf32, strided<[1], offset: 4>>)
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c2 step %c1 {
    linalg.copy ins(%w : memref<8xf32>) outs(%b : memref<8xf32>)
  }
  linalg.copy ins(%lo : memref<4xf32, strided<[1]>>) outs(%o : memref<4xf32>)
  memref.dealloc %b : memref<8xf32>
  return
}
"""


@pytest.fixture
def block():
    ctx = ir.Context()
    module = ir.Module.parse(IR, ctx)
    yield module.body.operations[0].regions[0].blocks[0]


def test_a_write_through_a_sibling_view_counts(block):
    """Reading `%lo` at the first copy from it and again at the copy into
    `%hi`'s next: the copy into `%hi` writes the same buffer, through
    another view."""
    ops = [o.operation for o in block.operations]
    w = Writers(block)
    lo = ops[1].results[0]
    assert root_of(lo) == ops[0].results[0]
    assert w.between(lo, ops[4], ops[6])  # (%hi written at 5)
    assert not w.between(lo, ops[4], ops[5])  # (strictly between: nothing)
    assert not w.between(ops[4].operands[1], ops[3], ops[4])


def test_a_write_inside_a_loop_counts_at_the_loop(block):
    """The copy inside the `scf.for` writes `%b`: between the loop's
    neighbours it counts, at the loop's position; a read (the copy's
    input `%w`) does not."""
    ops = [o.operation for o in block.operations]
    w = Writers(block)
    loop = next(k for k, op in enumerate(ops) if op.name == "scf.for")
    assert w.between(ops[2].results[0], ops[loop - 1], ops[loop + 1])
    assert not w.between(block.arguments[0], ops[0], ops[-1])
