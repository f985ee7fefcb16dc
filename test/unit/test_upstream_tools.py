"""`nem-tools`: the upstream tools of the `mlir` extra, which pip leaves off
PATH, run the documented way (docs/testing.md runs the round trip)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nem.cli.upstream_tools import find_tool, package_tool, tool_dirs

needs_tools = pytest.mark.skipif(not tool_dirs(), reason="the mlir extra is not installed")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nem.cli.upstream_tools", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@needs_tools
def test_runs_a_tool_with_its_own_arguments():
    r = _run("FileCheck", "--version")
    assert r.returncode == 0 and "LLVM version" in r.stdout
    assert package_tool("mlir-opt") and os.access(package_tool("mlir-opt") or "", os.X_OK)
    assert find_tool("mlir-opt")


@needs_tools
def test_path_lists_the_folders_for_PATH():
    r = _run("--path")
    folders = r.stdout.strip().split(os.pathsep)
    assert r.returncode == 0 and folders == tool_dirs()
    assert os.path.basename(os.path.dirname(package_tool("mlir-opt") or "")) == "bin"


@needs_tools
def test_an_unknown_tool_is_one_line_naming_the_list():
    r = _run("mlir-nosuch", "-x")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "nem-tools --list" in r.stderr
