from dataclasses import dataclass

from xdsl.passes import ModulePass


@dataclass(frozen=True)
class Explode(ModulePass):
    """A pass with a bug."""

    name = "explode"

    def apply(self, ctx, op):
        return {}["missing"]
