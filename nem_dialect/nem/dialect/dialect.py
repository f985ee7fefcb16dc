"""The `nem` xDSL dialect: every op and attribute of the NEM IR."""

from xdsl.context import Context
from xdsl.dialects import arith, builtin
from xdsl.ir import Dialect

from nem.dialect.attributes import ATTRIBUTES
from nem.dialect.ops import COMPUTE_OPS, STATEMENT_OPS

NEM = Dialect("nem", [*STATEMENT_OPS, *COMPUTE_OPS.values()], ATTRIBUTES)


def nem_context() -> Context:
    """An xDSL context that parses NEM IR: builtin, arith (expressions), nem."""
    ctx = Context()
    ctx.load_dialect(builtin.Builtin)
    ctx.load_dialect(arith.Arith)
    ctx.load_dialect(NEM)
    return ctx
