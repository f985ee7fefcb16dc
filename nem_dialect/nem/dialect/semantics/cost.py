"""The timed cost model (D-RT-COST): what a task asks of the unit it runs
on, as an amount of work, a rate and a fixed latency.

One home for the throughputs: the runtime's timed durations and roofline
bounds (`nem.runtime.task_cost`, `nem.runtime.roofline`, D-RT-ROOFLINE)
price evaluated task instances with it, and the token fit of
`nem-synthesize-deps` (`nem.passes.finish_times`, D-DEPS-SYNTH) prices a
task from its regions' static geometry, so the compiler's estimate and the
runtime agree by construction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from nem.dialect.ops import ComputeOp, TaskOp
from nem.dialect.semantics.transfers import moved_count

Profile = dict[str, dict[str, Any]]
"""The timed mode's throughputs and latencies by unit type (`DEFAULT_PROFILE`):
ints, or the numbers a user's profile gives (`set_timing_profile`)."""

UnitChars = Mapping[str, Mapping[str, Any]]
"""A device's unit characteristics by unit type (the MAC rates of its NMU)."""

DEFAULT_PROFILE: Profile = {
    "DMA": {"bandwidth": 32, "latency": 4},  # bytes/cycle, cycles
    "sDMA": {"bandwidth": 16, "latency": 16},
    "CSTL": {"throughput": 256, "latency": 1},  # elements/cycle
    "VPU": {"throughput": 64, "latency": 2},
    "NMU": {"macs": 1024, "latency": 2},  # fallback MACs/cycle
}
MIN_RATE, MAX_RATE = 0.001, 10**9
"""The range of a profile's rate (a bandwidth in bytes, a throughput in
elements, MACs, per cycle; `set_timing_profile` refuses others, D-RT-COST).
A task's duration is `amount / rate` cycles: with a rate of 1e-300 (an
outside user, session 66) a run printed a 300-digit cycle count.  From one
byte per thousand cycles to a billion per cycle covers any unit a profile
models, and keeps a duration of a terabyte-sized amount below 2**63 (the
integers of `--trace` and `--json`)."""

MAX_LATENCY = 10**9
"""A profile's largest latency in cycles (its smallest is 0): a second at
1 GHz, per task; above it a cycle count says nothing (D-RT-COST)."""

MAC_KEYS = {
    "i4": ("int4_macs", "int8_macs"),
    "i8": ("int8_macs",),
    "u8": ("int8_macs",),
    "i16": ("int16_macs", "int8_macs"),
    "u16": ("int16_macs", "int8_macs"),
    "f16": ("fp16_macs",),
    "bf16": ("bf16_macs", "fp16_macs"),
    "f32": ("fp32_macs",),
}


MAC_RATE_KEYS = tuple(dict.fromkeys(k for keys in MAC_KEYS.values() for k in keys))
"""The per-type MAC rates a device's `unit_characteristics.NMU` and a timing
profile's `NMU` may give (`fp32_macs`, ...)."""


def macs_per_cycle(elem: str | None, unit_chars: UnitChars, profile: Profile) -> int:
    """The NMU's MACs per cycle for input type `elem`: for each of its keys
    in order (`MAC_KEYS`: i4's `int4_macs`, then `int8_macs`), the timing
    profile's rate where it gives one (a user's `NMU.macs` sets every
    type's, `set_timing_profile`), else the device's; else `fp16_macs / 4`
    for f32, else the profile's `macs` (D-RT-COST)."""
    nmu = unit_chars.get("NMU", {})
    # key by key, the profile's before the device's: a profile's int8_macs is
    # not i4's rate where the device has int4_macs (a review, session 55)
    for key in MAC_KEYS.get(elem or "", ()):
        for rates in (profile["NMU"], nmu):
            if key in rates:
                return max(1, int(rates[key]))
    if elem == "f32" and "fp16_macs" in nmu:
        return max(1, int(nmu["fp16_macs"]) // 4)
    return int(profile["NMU"]["macs"])


class Work(NamedTuple):
    """What a task asks of its unit under D-RT-COST: `amount` units of work
    (bytes for a transfer, MACs for an NMU task, elements for CSTL and VPU),
    `rate` of them per cycle, plus a fixed `latency`.  The timed mode's cost
    (`Work.cycles`) and the roofline's bound (`nem.runtime.roofline`,
    D-RT-ROOFLINE) are both computed from it: one home for the throughputs."""

    amount: int
    rate: int
    latency: int

    @property
    def cycles(self) -> int:
        """The task's duration in timed mode."""
        return math.ceil(self.amount / self.rate) + self.latency


class Geometry(Protocol):
    """What the cost model reads of a region: an evaluated instance (the
    runtime's `RegionInst`) or a static view of a region op's type."""

    @property
    def elem(self) -> str | None: ...
    @property
    def shape(self) -> Sequence[int] | None: ...
    @property
    def strides(self) -> Sequence[int] | None: ...
    @property
    def extent(self) -> int: ...


def transfer_bytes(src: Geometry, dst: Geometry) -> int:
    """The bytes a transfer or store moves (D-SEM-TRANSFER, D-RT-STORE): two
    typed regions their elements (`moved_count`: not the span of a strided
    one), else the source's byte range."""
    if src.elem is not None and dst.elem is not None:
        return moved_count(dst.elem, dst.shape, dst.strides, dst.extent)
    return src.extent


def task_work(
    op: TaskOp,
    regions: Sequence[Geometry],
    unit_type: str,
    trans_a: int,
    unit_chars: UnitChars,
    profile: Profile,
) -> Work:
    """What `op` (its regions in `operand_regions` order: a compute op's
    `ins` read first; its `trans_a` attribute for a gemm, evaluated by the
    caller) asks of a unit of type `unit_type`; a transfer or store moves
    its source's elements into its destination."""
    if not isinstance(op, ComputeOp):
        p = profile.get(unit_type, profile["DMA"])
        if "bandwidth" not in p:
            p = profile["DMA"]
        return Work(transfer_bytes(regions[0], regions[1]), p["bandwidth"], p["latency"])
    if unit_type == "NMU":
        y = regions[len(op.ins)]
        ny = math.prod(y.shape or (1,))
        a, w = regions[0], regions[1]
        if op.SPEC.category == "convolution":
            ws = w.shape or (1,)
            k = math.prod(ws[:-2]) * (1 if op.opcode == "depthwise_conv2d" else ws[-2])
        else:
            k = (a.shape or (1,))[-2 if trans_a else -1]
        return Work(ny * k, macs_per_cycle(a.elem, unit_chars, profile), profile["NMU"]["latency"])
    p = profile.get(unit_type) or profile["CSTL"]
    if "throughput" not in p:
        p = profile["CSTL"]
    n = max(math.prod(r.shape) if r.shape else r.extent for r in regions)
    return Work(n, p["throughput"], p["latency"])
