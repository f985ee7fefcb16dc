"""A pass plugin whose pass takes a name NEM already defines (`nem-verify`):
`nem-opt --load-pass-plugin` must refuse it (test/lit/cli/plugins.test, CLASH).
It is never run, so its `apply` does nothing."""

from dataclasses import dataclass

from xdsl.passes import ModulePass


@dataclass(frozen=True)
class Clash(ModulePass):
    name = "nem-verify"

    def apply(self, ctx, op):
        pass
