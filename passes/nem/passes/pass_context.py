"""The context a driver runs NEM passes with: where their warnings and remarks
go, and the driver's options a pass may need.

xDSL's `ModulePass.apply(ctx, module)` has a context but no channel for
warnings and remarks.  MLIR keeps its diagnostic engine on the context; NEM
does the same: a driver (`nem-opt`, `run_pipeline`, `nem-compile`, a test)
runs passes with a `NemPassContext` -- an xDSL `Context` that also holds the
diagnostics list, the input file, and `nem-opt -I` / `--device` -- built
from its own context with `pass_context(ctx, ...)`.  A pass hands its
diagnostics to `report(ctx, diags)`:

* errors: a pass raises `NemDiagnosticError(all its diagnostics)` (errors,
  warnings and remarks of that pass together, so the order is kept);
* no error: `report` appends them to `ctx.diagnostics`, which the driver
  prints (or checks with `--verify-diagnostics`).

Run with a plain xDSL `Context` (a pass run by `xdsl-opt`), `report` prints
to stderr and `driver_options(ctx)` is empty (no `-I`, no `--device`; the
program's directive still names its device).  Nothing here is global: two
pipelines run with two contexts do not see each other's diagnostics.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.context import Context

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError

if TYPE_CHECKING:
    from nem.analysis.race_memos import ShapeMemos
    from nem.dialect.expressions import BuildFacts


@dataclass
class NemPassContext(Context):
    """An xDSL context plus what a NEM driver tells its passes."""

    file: str | None = None
    """The input file (programs also carry it in their locations)."""
    include_dirs: tuple[str, ...] = ()
    """`nem-opt -I`: where `device=NAME` and include files are found."""
    device: str | None = None
    """`nem-opt --device NAME`: overrides the program's directive."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    """Warnings and remarks the passes reported, in order."""
    cache: dict[object, Any] = field(default_factory=dict)
    """Per-run memo (resolved devices, ...) shared by the passes of one run."""
    progress: Callable[[str, int, int], None] | None = None
    """How far a long pass is, for the driver's progress display: called with
    (what is counted, done, total), e.g. ("nests lowered", 12, 80)."""

    def clone(self) -> NemPassContext:
        """A copy of the dialect registry sharing the driver's options,
        diagnostics list and cache (a pass that clones its context still
        reports to its driver)."""
        return NemPassContext(
            **_registry(Context.clone(self)),
            file=self.file,
            include_dirs=self.include_dirs,
            device=self.device,
            diagnostics=self.diagnostics,
            cache=self.cache,
            progress=self.progress,
        )


def pass_context(
    ctx: Context | None = None,
    file: str | None = None,
    include_dirs: Iterable[str] = (),
    device: str | None = None,
) -> NemPassContext:
    """`ctx` (default: an empty context) as a `NemPassContext` for one run,
    with the driver's input file, `-I` directories and `--device`."""
    registry = _registry(ctx.clone() if ctx is not None else Context())
    return NemPassContext(**registry, file=file, include_dirs=tuple(include_dirs), device=device)


def _registry(ctx: Context) -> dict[str, Any]:
    """The constructor arguments of a `Context` that are its registry (its
    dataclass fields), taken from `ctx`."""
    return {f.name: getattr(ctx, f.name) for f in dataclasses.fields(Context)}


def collecting(ctx: Context) -> NemPassContext:
    """`ctx` with an empty diagnostics list of its own (same registry, driver
    options and cache): a pass running other passes (the staged
    `nem-verify`) collects their diagnostics to report them together."""
    if isinstance(ctx, NemPassContext):
        return dataclasses.replace(ctx, diagnostics=[])
    return pass_context(ctx)


def driver_options(ctx: Context) -> NemPassContext:
    """The driver's options of `ctx`: itself when a driver made it, else
    none (a plain xDSL context)."""
    return ctx if isinstance(ctx, NemPassContext) else NemPassContext()


def report(ctx: Context, diags: Iterable[Diagnostic]) -> None:
    """Deliver a pass's diagnostics: raise if any is an error, else record
    them on the driver's context (print them without a driver)."""
    diags = list(diags)
    if any(d.severity == "error" for d in diags):
        raise NemDiagnosticError(diags)
    if isinstance(ctx, NemPassContext):
        ctx.diagnostics.extend(diags)
    else:
        for d in diags:
            print(d.render(), file=sys.stderr)


SHAPE_MEMOS = "shape memos"
"""The key of `shape_memos` in `NemPassContext.cache` (a driver that runs
two contexts on one program gives the second the first's)."""


BUILT_FACTS = "built facts"
"""The key, in `NemPassContext.cache`, of `(program, BuildFacts)`: what the
front end that just built `program` established of it (D-BC-SEED), for the
static rules' pass to take once (`take_built_facts`).  Set by a driver that
runs the verification on the program exactly as built (`verify_nem`)."""


def take_built_facts(ctx: Context, program: object) -> BuildFacts | None:
    """The facts stored under BUILT_FACTS for this very `program`, removed
    (they hold for the IR as built, which a later pass may change); None
    when there are none."""
    if not isinstance(ctx, NemPassContext):
        return None
    built = ctx.cache.get(BUILT_FACTS)
    if built is None or built[0] is not program:
        return None
    del ctx.cache[BUILT_FACTS]
    facts: BuildFacts = built[1]
    return facts


def shape_memos(ctx: Context) -> ShapeMemos:
    """The race analysis's answers by shape (D-HAZ-SYMBOLIC) for a pass run
    with `ctx`: kept in a `NemPassContext`'s cache, so every analysis of one
    run (the rounds of `nem-synthesize-deps`, `nem-share-buffers`'
    ordering, `nem-check-hazards` in `nem-verify`) decides each shape once;
    a fresh set under a plain xDSL context."""
    from nem.analysis.race_memos import ShapeMemos

    if isinstance(ctx, NemPassContext):
        memos = ctx.cache.get(SHAPE_MEMOS)
        if memos is None:
            memos = ctx.cache[SHAPE_MEMOS] = ShapeMemos()
        return memos
    return ShapeMemos()
