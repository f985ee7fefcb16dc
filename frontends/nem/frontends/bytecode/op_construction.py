"""Ops built for the bytecode reader without xDSL's generic construction path.

`create_op` sets the object state `Operation.__init__` gives an op directly
(the generic wrappers cost most of the reader's IR construction time); its
one home is `nem.dialect.op_build` (decision D-IR-BUILD), shared with the
`.nem` parser and every NEM op's constructor, and it is one of the
private-API sites listed in docs/upstream-reports.md (reports 9-11).
"""

from __future__ import annotations

from typing import cast

from xdsl.ir import Operation, SSAValue

from nem.dialect.op_build import create_op

__all__ = ["create_op", "first_result"]

_item = tuple.__getitem__


def first_result(op: Operation) -> SSAValue:
    """`op.results[0]`, without SSAValues' indexing (Python code that
    type-checks the index) on the path of every value the reader makes."""
    return cast(SSAValue, _item(op.results, 0))
