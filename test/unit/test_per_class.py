"""`nem.dialect.per_class`: facts decided once per class (issue 30's walks,
issue 36's one home for the per-class tables)."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import IntegerAttr, MemRefType

from nem.dialect.ops import ComputeOp, LoopOp, TaskOp, TransferOp, WaitOp
from nem.dialect.per_class import PerClass, first_base_table, subclass_table


def test_the_fact_is_computed_once_per_class():
    calls: list[type] = []

    def fact(cls: type) -> str:
        calls.append(cls)
        return cls.__name__

    table = PerClass(fact)
    assert [table[c] for c in (int, str, int, int, str)] == ["int", "str", "int", "int", "str"]
    assert calls == [int, str]


def test_keys_must_be_classes():
    table = subclass_table(TaskOp)
    with pytest.raises(TypeError, match="keyed by classes"):
        table[3]  # type: ignore[index]
    assert 3 not in table


def test_subclass_table_follows_issubclass():
    table = subclass_table(TaskOp)
    for cls in (TransferOp, ComputeOp, LoopOp, WaitOp, MemRefType):
        assert table[cls] is issubclass(cls, TaskOp)


def test_first_base_table_takes_the_first_matching_base():
    table = first_base_table(((TransferOp, "transfer"), (TaskOp, "task")), "other")
    assert table[TransferOp] == "transfer"
    assert table[ComputeOp] == "task"
    assert table[LoopOp] == "other"
    reversed_order = first_base_table(((TaskOp, "task"), (TransferOp, "transfer")), "other")
    assert reversed_order[TransferOp] == "task"
    kinds = first_base_table(((MemRefType, 1), (IntegerAttr, 2)), 0)
    assert (kinds[MemRefType], kinds[IntegerAttr], kinds[LoopOp]) == (1, 2, 0)
