"""Extending nem-opt (issue 14, D-OPT-PLUGIN): installed packages through
xDSL's `xdsl.universe` entry points, and the Python API of the pass driver
(`nem.passes.driver`): plugins, pipelines, `run_pipeline`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.nem_text import parse_nem, print_nem
from nem.passes.driver import (
    PluginError,
    load_pass_plugin,
    pass_options,
    pass_summary,
    run_pipeline,
)

ROOT = Path(__file__).resolve().parents[2]
SCALE = ROOT / "test/lit/cli/Inputs/scale.nem"
PLUGIN = ROOT / "test/lit/cli/Inputs/count_tasks_plugin.py"

UNIVERSE = '''
from dataclasses import dataclass
from xdsl.passes import ModulePass
from xdsl.universe import Universe

from nem.dialect.diagnostics import Diagnostic
from nem.passes.pass_context import report


@dataclass(frozen=True)
class Hello(ModulePass):
    """Say hello (a remark)."""

    name = "ep-hello"

    def apply(self, ctx, op):
        report(ctx, [Diagnostic("remark", "hello from an entry point")])


UNIVERSE = Universe(all_passes={"ep-hello": lambda: Hello})
'''


def _install(site: Path, dist: str, module: str, code: str | None, target: str) -> None:
    """A minimal installed distribution: `dist`-0.1.dist-info with an
    `xdsl.universe` entry point `dist = target`, and `module`.py."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[xdsl.universe]\n{dist} = {target}\n")
    if code is not None:
        (site / f"{module}.py").write_text(code)


def _nem_opt(site: Path, *args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    return subprocess.run(
        [sys.executable, "-m", "nem.cli.nem_opt", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_entry_point_passes_are_listed_and_run(tmp_path):
    _install(tmp_path, "nemhello", "nemhello", UNIVERSE, "nemhello:UNIVERSE")
    r = _nem_opt(tmp_path, "--help")
    assert r.returncode == 0, r.stderr
    assert "passes of the installed xdsl.universe entry point 'nemhello':\n  ep-hello" in r.stdout
    assert "Say hello (a remark)." in r.stdout
    r = _nem_opt(tmp_path, str(SCALE), "-p", "nem-fold-consts,ep-hello", "-o", os.devnull)
    assert r.returncode == 0 and r.stderr.strip() == "nem-opt: remark: hello from an entry point", (
        r.stderr
    )


def test_broken_entry_point_is_a_one_line_error_naming_it(tmp_path):
    _install(
        tmp_path, "nembroken", "nembroken", "raise RuntimeError('no luck')\n", "nembroken:UNIVERSE"
    )
    r = _nem_opt(tmp_path, str(SCALE))
    assert r.returncode == 1
    assert r.stderr == (
        "nem-opt: error: cannot load xdsl.universe entry point 'nembroken' "
        "(nembroken:UNIVERSE): RuntimeError: no luck\n"
    )


def test_plugin_api_and_run_pipeline():
    passes = load_pass_plugin(PLUGIN)
    assert [p.name for p in passes] == ["count-tasks"]
    assert load_pass_plugin(PLUGIN) == passes  # loading twice is a no-op
    assert pass_summary(passes[0]).startswith("Report the number of task statements")
    assert [(o.name, o.type, o.doc) for o in pass_options(passes[0])] == [
        ("opcode", "str", "count only the tasks of this opcode")
    ]
    module = parse_nem(SCALE.read_text(), str(SCALE))
    diags = run_pipeline(
        module,
        "builtin.module(nem-verify{device=npm_lite},count-tasks{opcode=relu},nem-fold-consts)",
        file=str(SCALE),
    )
    assert [d.message for d in diags] == ["1 task statements"]
    assert "buffer X : DDR (size=256)" in print_nem(module)


def test_run_pipeline_errors_carry_earlier_warnings():
    text = (
        "buffer D : L2 (size=256)\nbuffer L : L1[0] (size=256)\n"
        "tX = transfer.async(dst=region(L, 0, 64), src=region(D, 0, 64))\n"
    )
    module = parse_nem(text, "w.nem")
    diags = run_pipeline(module, "nem-check-tokens")
    assert [d.rule for d in diags] == ["TASK-01"]
    with pytest.raises(NemDiagnosticError) as e:
        run_pipeline(module, "nem-check-tokens,nem-verify-device{device=no_such_device}")
    assert [d.severity for d in e.value.diagnostics][:1] == ["warning"]
    assert any(d.severity == "error" for d in e.value.diagnostics)


def test_plugin_errors(tmp_path):
    bad = tmp_path / "bad_plugin.py"
    bad.write_text("x = 1\n\n\ndef f():\n    return 1 / 0\n\n\nf()\n")
    with pytest.raises(PluginError, match=r"bad_plugin.py:5: ZeroDivisionError: division by zero"):
        load_pass_plugin(bad)


def test_every_nem_pass_is_documented():
    """--help shows each pass's one-line doc and its options' docs."""
    from nem.passes import PASSES

    for name, cls in PASSES.items():
        assert pass_summary(cls), name
        for o in pass_options(cls):
            assert o.doc, (name, o.name)
