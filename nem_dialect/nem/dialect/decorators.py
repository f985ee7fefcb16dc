"""Where each decorator may appear and what it takes: the one home of
decorator facts (SPEC §7, DECO-01..03, RES-01/02).

Targets: `region` (region declarations, lets and compute/transfer operands),
`buffer`, `loop`, `transfer`, `store`, `compute`, `wait`.  The spec has no
applicability table (docs/conformance.md Gaps A); the choices are decision D-DECO-1.
"""

from __future__ import annotations

from dataclasses import dataclass

from nem.dialect.attributes import (
    DebugAttr,
    DecoratorAttr,
    DeterministicAttr,
    MaterializedAttr,
    MaxInFlightAttr,
    MemmoveAttr,
    ProfileAttr,
    ReadonlyAttr,
    ResourceAttr,
    SeqEngineAttr,
    WriteonlyAttr,
)

TASKS = frozenset({"transfer", "store", "compute"})
ALL = frozenset({"region", "buffer", "loop", "transfer", "store", "compute", "wait"})


@dataclass(frozen=True)
class DecoratorInfo:
    attr: type[DecoratorAttr]
    args: str  # "none" | "int" | "unit" | "tag"
    targets: frozenset[str]
    usage: str


DECORATORS: dict[str, DecoratorInfo] = {
    "materialized": DecoratorInfo(MaterializedAttr, "none", frozenset({"region"}), "@materialized"),
    "readonly": DecoratorInfo(ReadonlyAttr, "none", frozenset({"region"}), "@readonly"),
    "writeonly": DecoratorInfo(WriteonlyAttr, "none", frozenset({"region"}), "@writeonly"),
    "deterministic": DecoratorInfo(DeterministicAttr, "none", TASKS | {"loop"}, "@deterministic"),
    "memmove": DecoratorInfo(MemmoveAttr, "none", frozenset({"transfer"}), "@memmove"),
    "max_in_flight": DecoratorInfo(MaxInFlightAttr, "int", frozenset({"loop"}), "@max_in_flight(N)"),
    "resource": DecoratorInfo(ResourceAttr, "unit", TASKS, "@resource(UNIT[i])"),
    "seq_engine": DecoratorInfo(SeqEngineAttr, "int", TASKS, "@seq_engine(k)"),
    "debug": DecoratorInfo(DebugAttr, "tag", ALL, "@debug(name)"),
    "profile": DecoratorInfo(ProfileAttr, "tag", ALL, "@profile(tag)"),
}


TARGET_WORDS = {"region": "a region", "buffer": "a buffer", "loop": "a loop",
                "transfer": "a transfer task", "store": "a store task",
                "compute": "a compute task", "wait": "a wait"}


def info_of(attr: DecoratorAttr) -> DecoratorInfo:
    return DECORATORS[attr.DECO_NAME]


def allowed_on(target: str) -> list[str]:
    return [d.usage for d in DECORATORS.values() if target in d.targets]
