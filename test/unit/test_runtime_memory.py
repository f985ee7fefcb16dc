"""The runtime memory model: allocation, typed views, i4 packing, bounds.
RULE: BUF-07 TYPE-04 TYPE-05 HAZ-04"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nem.runtime import NemInterpreter
from nem.runtime.memory import Memory, MemoryError_, RegionInst, pack_i4_into, unpack_i4


def test_allocation_by_decreasing_alignment():
    m = Memory(num_engines=2, l2_size=4096, l1_size=1024, ddr_size=1 << 20)
    m.allocate("A", "L2", 10, 64)
    m.allocate("B", "L2", 100, 256)
    m.allocate("C", "L1[1]", 8, None)
    m.allocate("D", "L1", 8, 16)
    a, b, c, d = (m.buffer(n) for n in "ABCD")
    # the layout of semantics.layout, the one the capacity check verifies (D-SEM-LAYOUT)
    assert (a.offset, b.offset, c.offset, d.offset) == (128, 0, 0, 0)
    assert d.level == "L1[0]" and c.level == "L1[1]"
    with pytest.raises(MemoryError_) as e:
        m.allocate("E", "L2", 4096, 64)
    assert e.value.rule == "DEV-16"
    with pytest.raises(MemoryError_):
        m.level("L1[2]")


def test_i4_packing_order_low_nibble_first():
    raw = np.zeros(2, np.uint8)
    pack_i4_into(raw, np.arange(4), np.array([1, -2, 7, -8]))
    assert list(raw) == [0xE1, 0x87]  # D-RT-I4: element 2k low nibble, 2k+1 high nibble
    assert list(unpack_i4(raw, np.arange(4))) == [1, -2, 7, -8]


def _region(m, elem, shape, strides=None, start=0, extent=64):
    b = m.allocate("B", "L2", 64, 64) if "B" not in m.buffers else m.buffer("B")
    return RegionInst(
        "R",
        m.levels["L2"],
        b,
        b.offset + start,
        extent,
        elem,
        shape,
        strides,
        None,
        strides is None,
    )


def test_i4_region_roundtrip_with_strides():
    m = Memory(1, 4096, 1024, 1 << 16)
    r = _region(m, "i4", (2, 3), strides=(4, 1))  # element strides (TYPE-04)
    vals = np.array([[1, 2, 3], [-1, -2, -3]], np.int8)
    r.write(vals)
    assert np.array_equal(r.read(), vals)
    raw = r.raw()
    assert raw[0] == 0x21 and raw[1] & 0x0F == 0x3 and raw[2] == 0xEF and raw[3] & 0x0F == 0xD


def test_bf16_and_strided_views():
    m = Memory(1, 4096, 1024, 1 << 16)
    r = _region(m, "bf16", (2, 2), strides=(4, 1))
    r.write(np.array([[1.5, -2], [3, 4]], ml_dtypes.bfloat16))
    v = r.view()
    assert v.dtype == ml_dtypes.bfloat16 and v.strides == (8, 2)
    assert float(v[1, 0]) == 3.0
    assert m.levels["L2"].data[8:10].view(ml_dtypes.bfloat16)[0] == 3.0


def test_region_bounds_are_checked():
    m = Memory(1, 4096, 1024, 1 << 16)
    r = _region(m, "f32", (4, 8), extent=64)  # 128 bytes of elements in 64
    with pytest.raises(MemoryError_) as e:
        r.check()
    assert e.value.rule == "EXT-02"
    r2 = _region(m, None, None, start=32, extent=64)
    with pytest.raises(MemoryError_) as e:
        r2.check()
    assert e.value.rule == "HAZ-04"


def test_ddr_default_size_and_tensor_io():
    it = NemInterpreter(ddr_size=1 << 20)
    it.load_string(
        "program p:\nbuffer D : DDR (size=64, align=64)\n"
        "buffer E : DDR (size=64, align=64)\n"
        "t = transfer.sync(dst=region(E, 0, 64), src=region(D, 0, 64))\n",
        "p.nem",
    )
    assert it.ddr_info()["size"] == 1 << 20
    x = np.arange(16, dtype=np.float32)
    it.write_tensor("D", x)
    it.run()
    assert np.array_equal(it.read_tensor("E", (16,), np.float32), x)
    assert it.ddr_read(64, 64) == x.tobytes()  # E follows D (declaration order)
    with pytest.raises(ValueError):
        it.write_tensor("D", np.zeros(32, np.float32))
