"""The `nem` xDSL dialect: every op and attribute of the NEM IR."""

from xdsl.ir import Dialect

from nem.dialect.attributes import ATTRIBUTES
from nem.dialect.ops import COMPUTE_OPS, STATEMENT_OPS

NEM = Dialect("nem", [*STATEMENT_OPS, *COMPUTE_OPS.values()], ATTRIBUTES)
