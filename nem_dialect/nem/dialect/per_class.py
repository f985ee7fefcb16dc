"""Facts about a class, decided once per class.

xDSL's op and attribute classes are ABCs: `isinstance` and `issubclass` on
them run Python code (`ABCMeta.__subclasscheck__`).  The walks over a lowered
CNN ask such questions of hundreds of thousands of ops, of a few dozen
classes (issue 30).  A `PerClass` table computes its fact on a class's first
lookup and answers every later one with a plain dict lookup, `table[type(op)]`,
which runs in C.

Its size is bounded by the number of classes the process defines, not by the
programs it handles, so a module-level table is not process state that grows
with the input (test_module_state.py accepts it for that reason).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

V = TypeVar("V")


class PerClass(dict[type, V]):
    """`table[cls]` is `fact(cls)`, computed on the first lookup of `cls`."""

    __slots__ = ("fact",)

    def __init__(self, fact: Callable[[type], V]) -> None:
        super().__init__()
        self.fact = fact

    def __missing__(self, cls: type) -> V:
        if not isinstance(cls, type):  # a table keyed by objects would grow with the input
            raise TypeError(f"a PerClass table is keyed by classes, not {type(cls).__name__}")
        value = self[cls] = self.fact(cls)
        return value


def subclass_table(base: type) -> PerClass[bool]:
    """`table[cls]` is `issubclass(cls, base)`."""
    return PerClass(lambda cls: issubclass(cls, base))


def first_base_table(bases: Sequence[tuple[type, V]], default: V) -> PerClass[V]:
    """`table[cls]` is the value paired with the first class of `bases` that
    `cls` derives from, `default` when none (a class's kind for a walk that
    treats a few op or attribute families apart)."""
    return PerClass(lambda cls: next((v for base, v in bases if issubclass(cls, base)), default))
