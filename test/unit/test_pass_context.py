"""Passes get the driver's options and hand back their diagnostics through the
context `apply(ctx, op)` receives (`nem.passes.pass_context`), not through
global state (issue 15)."""

from __future__ import annotations

from dataclasses import dataclass

from nem_programs import program
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.dialect.diagnostics import Diagnostic
from nem.frontends.upstream_dialects import lowering_context
from nem.passes.driver import run_pipeline
from nem.passes.pass_context import NemPassContext, collecting, driver_options, pass_context, report


@dataclass(frozen=True)
class Remark(ModulePass):
    name = "test-remark"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        report(ctx, [Diagnostic("remark", f"seen by {driver_options(ctx).file}")])


def test_each_run_collects_its_own_diagnostics() -> None:
    """Two runs with two contexts: each holds only its own remarks, and the
    context keeps the registry it was built from."""
    module, _ = program("buffer B : L1 (size=64)\n")
    a = pass_context(lowering_context(), file="a.nem")
    b = pass_context(lowering_context(), file="b.nem")
    Remark().apply(a, module)
    Remark().apply(b, module)
    Remark().apply(a, module)
    assert [d.message for d in a.diagnostics] == ["seen by a.nem", "seen by a.nem"]
    assert [d.message for d in b.diagnostics] == ["seen by b.nem"]
    assert a.get_optional_op("affine.dma_start") is not None  # the lowering's registry


def test_clone_and_collecting_share_what_they_should() -> None:
    ctx = pass_context(file="f.nem", include_dirs=["inc"], device="npm_lite")
    clone = ctx.clone()
    assert isinstance(clone, NemPassContext)
    assert (clone.file, clone.include_dirs, clone.device) == ("f.nem", ("inc",), "npm_lite")
    report(clone, [Diagnostic("remark", "from a clone")])
    assert [d.message for d in ctx.diagnostics] == ["from a clone"]  # same list
    inner = collecting(ctx)
    report(inner, [Diagnostic("warning", "staged")])
    assert [d.message for d in inner.diagnostics] == ["staged"]
    assert len(ctx.diagnostics) == 1 and inner.cache is ctx.cache


def test_plain_xdsl_context_prints_to_stderr(capsys) -> None:
    """Under a plain `Context` (a pass run by xdsl-opt) there is no driver:
    the remark is printed, and no option is set."""
    module, _ = program("buffer B : L1 (size=64)\n")
    Remark().apply(Context(), module)
    assert "remark: seen by None" in capsys.readouterr().err
    assert driver_options(Context()).device is None


def test_run_pipeline_returns_the_run_diagnostics() -> None:
    module, _ = program("buffer B : L1 (size=64)\n")
    diags = run_pipeline(module, "nem-verify", file="t.nem")
    assert [(d.severity, d.rule) for d in diags] == [("remark", "DEV-20")]
    assert run_pipeline(module, "nem-verify", file="t.nem") == diags  # nothing carried over
