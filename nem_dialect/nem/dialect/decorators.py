"""Where each decorator may appear and what it takes: the one home of
decorator facts (SPEC §7, DECO-01..03, RES-01/02).

Targets: `region` (region declarations, lets and compute/transfer operands),
`buffer`, `loop`, `transfer`, `store`, `compute`, `wait`.  The spec has no
applicability table (docs/conformance.md Gaps A); the choices are decision D-DECO-1.
"""

from __future__ import annotations

from collections.abc import Callable
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
    "max_in_flight": DecoratorInfo(
        MaxInFlightAttr, "int", frozenset({"loop"}), "@max_in_flight(N)"
    ),
    "resource": DecoratorInfo(ResourceAttr, "unit", TASKS, "@resource(UNIT[i])"),
    "seq_engine": DecoratorInfo(SeqEngineAttr, "int", TASKS, "@seq_engine(k)"),
    "debug": DecoratorInfo(DebugAttr, "tag", ALL, "@debug(name)"),
    "profile": DecoratorInfo(ProfileAttr, "tag", ALL, "@profile(tag)"),
}


TARGET_WORDS = {
    "region": "a region",
    "buffer": "a buffer",
    "loop": "a loop",
    "transfer": "a transfer task",
    "store": "a store task",
    "compute": "a compute task",
    "wait": "a wait",
}


DecoratorSpec = DecoratorAttr | str | tuple[object, ...]
"""A decorator as Python code writes it: an attribute (`MaxInFlightAttr(2)`),
a name (`"readonly"`, `"@readonly"`) or a name with its arguments
(`("max_in_flight", 2)`, `("resource", "CSTL", 0)`, `("debug", "tag")`)."""


class DecoratorError(ValueError):
    """A decorator written wrongly in Python; `rule` is DECO-01 or DECO-03."""

    def __init__(self, message: str, rule: str):
        super().__init__(message)
        self.rule = rule


def make_decorator(spec: DecoratorSpec) -> DecoratorAttr:
    """The decorator attribute of `spec`, checked against `DECORATORS`
    (`DecoratorError`: unknown name DECO-01, wrong arguments DECO-03, as the
    parser says).
    Where it may appear (DECO-02) is the verifier's to check."""
    if isinstance(spec, DecoratorAttr):
        return spec
    name, *args = (spec,) if isinstance(spec, str) else spec
    if not isinstance(name, str):
        raise DecoratorError(f"a decorator is a name or (name, args...), not {spec!r}", "DECO-03")
    info = DECORATORS.get(name.removeprefix("@"))
    if info is None:
        raise DecoratorError(
            f"unknown decorator '@{name.removeprefix('@')}'; known: "
            + ", ".join(d.usage for d in DECORATORS.values()),
            "DECO-01",
        )
    want = {"none": 0, "int": 1, "tag": 1, "unit": 2}[info.args]
    checks: dict[str, Callable[[], bool]] = {
        "none": lambda: True,
        "int": lambda: isinstance(args[0], int) and not isinstance(args[0], bool),
        "tag": lambda: isinstance(args[0], str),
        "unit": lambda: isinstance(args[0], str) and isinstance(args[1], int),
    }
    ok = len(args) == want and checks[info.args]()
    if not ok:
        python = {
            "none": f'"{name}"',
            "int": f'("{name}", 2)',
            "tag": f'("{name}", "tag")',
            "unit": f'("{name}", "CSTL", 0)',
        }[info.args]
        raise DecoratorError(f"{info.usage} written as {spec!r}; write {python}", "DECO-03")
    if info.args == "tag":
        tag = args[0]
        assert isinstance(tag, str)  # checks["tag"]
        return info.attr(tag, not tag.isidentifier())
    return info.attr(*args)


def allowed_on(target: str) -> list[str]:
    return [d.usage for d in DECORATORS.values() if target in d.targets]
