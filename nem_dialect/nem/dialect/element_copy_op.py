"""`nem_lowering.element_copy`: a one-element copy, what
`nem-raise-scalar-copies` makes of a scalar load whose one use is a store of
its value in the same block, where the conversion lowers ops one by one
(what `affine-data-copy-generate` emits for a one-element copy,
D-LOW-SCALAR-COPY):

    %v = affine.load %A[%i] : memref<8xf32>
    affine.store %v, %B[%j] : memref<4xf32, 2>
    -> "nem_lowering.element_copy"() ({
         %v = affine.load %A[%i] : memref<8xf32>
         affine.store %v, %B[%j] : memref<4xf32, 2>
       }) : () -> ()

at the store's place.  Its one block holds the load and the store as they
were (maps, indices, locations): the conversion lowers the op as one
`transfer` of one element, the source region at the load, the destination
at the store, each access checked against its memref's bounds at itself
(D-LOW-BOUNDS).

It lives with the IR, as `nem_lowering.scope` does: it imports nothing of
the toolchain.
"""

from __future__ import annotations

from xdsl.dialects import affine, memref
from xdsl.ir import Block, Operation, Region
from xdsl.irdl import IRDLOperation, irdl_op_definition, region_def, traits_def
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

LOADS = (affine.LoadOp, memref.LoadOp)
STORES = (affine.StoreOp, memref.StoreOp)


@irdl_op_definition
class ElementCopyOp(IRDLOperation):
    """A load and the store of its value, as one copy of one element
    (module docstring)."""

    name = "nem_lowering.element_copy"

    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    def __init__(self, body: Block):
        super().__init__(regions=[Region(body)])

    @property
    def load(self) -> Operation:
        """The load (checked by `verify_`)."""
        op = self.body.block.first_op
        assert op is not None
        return op

    @property
    def store(self) -> Operation:
        """The store of the load's value (checked by `verify_`)."""
        op = self.body.block.last_op
        assert op is not None
        return op

    def verify_(self) -> None:
        ops = list(self.body.block.ops)
        if (
            len(ops) != 2
            or not isinstance(ops[0], LOADS)
            or not isinstance(ops[1], STORES)
            or ops[1].value is not ops[0].results[0]
            or len(list(ops[0].results[0].uses)) != 1
        ):
            raise VerifyException(
                "its block holds a load and the store of the loaded value, its one use"
            )
