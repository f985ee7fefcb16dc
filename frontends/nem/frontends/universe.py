"""The `xdsl.universe` entry point of the NEM toolchain (pyproject.toml
`[project.entry-points."xdsl.universe"]`): the dialects NEM adds to xDSL's,
found by any xDSL tool through `xdsl.universe.Universe.get_multiverse()`.

- `nem`: the NEM IR dialect (`nem.dialect.dialect.NEM`);
- `async`: the upstream MLIR `async` dialect, which xDSL lacks
  (`nem.frontends.upstream_dialects.async_dialect`);
- `nem_lowering`: the lowering's own ops before the conversion
  (`nem.dialect.kernel_op`, D-LOW-OUTLINE; `nem.dialect.view_op`, D-LOW-VIEW-OP).

NEM's passes are not listed here: `nem.passes.driver` registers them (with
the plug-ins of `--load-pass-plugin`) on top of every universe's passes.
"""

from __future__ import annotations

from xdsl.ir import Dialect
from xdsl.universe import Universe


def _nem() -> Dialect:
    from nem.dialect.dialect import NEM

    return NEM


def _async() -> Dialect:
    from nem.frontends.upstream_dialects.async_dialect import Async

    return Async


def _nem_lowering() -> Dialect:
    from nem.dialect.kernel_op import NEM_LOWERING

    return NEM_LOWERING


NEM_UNIVERSE = Universe(all_dialects={"nem": _nem, "async": _async, "nem_lowering": _nem_lowering})
