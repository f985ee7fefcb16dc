"""What a handler of the conversion is given: the NEM block being filled
(`BlockState`) and the conversion itself (`Lowering`, which
`nem.passes.lowering.driver.Lowerer` implements), so that handlers depend on
this module, not on the driver that calls them (the table of handlers is
`nem.passes.lowering.handlers`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from xdsl.ir import Block, Operation

from nem.dialect.builder import NemBuilder
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.dma_tags import TagTable


class Lowering(Protocol):
    """The conversion run, as its handlers see it: the run's state and the
    lowering of nested blocks (loop and `nem_lowering.scope` bodies)."""

    ctx: LoweringContext

    def lower_ops(self, ops: Sequence[Operation], st: BlockState) -> None: ...

    def lower_block(self, src: Block, builder: NemBuilder) -> None: ...


Handler = Callable[[Lowering, Any, "BlockState"], None]
"""`handler(lowerer, op, block_state)`: lowers one op of its class."""


@dataclass
class BlockState:
    """The NEM block being filled from one MLIR block."""

    builder: NemBuilder
    """Builds at the end of the NEM block."""
    tags: TagTable = field(default_factory=TagTable)
    skip: set[Operation] = field(default_factory=set)
    """Ops of the block lowered with another one: the stores a kernel runs
    after its loop (D-LOW-CARRIED), the last iteration after a re-rolled
    loop (D-LOW-PIPE, `loops.lower_for`)."""
    top: bool = False
    """The entry function's block: each of its ops (a loop nest) gets scratch
    buffers of its own (D-LOW-SHARE)."""

    @property
    def block(self) -> Block:
        ip = self.builder.insertion_point
        return ip.block
