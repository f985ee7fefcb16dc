"""`nem-opt --version` and `nem-run --version` answer without loading the
toolchain's heavy parts (issue 34, item 6: at most 0.3 s CPU; 0.76 s when
the issue was filed, about 0.17 s now): no numpy, ONNX, MLIR bindings,
runtime, passes or `.nem` parser."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "onnx", "mlir", "nem.runtime", "nem.passes", "nem.frontends.nem_text")

PROBE = """
import contextlib, importlib, io, sys
module, function = sys.argv[1].split(":")
sys.argv = [sys.argv[2], "--version"]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        getattr(importlib.import_module(module), function)()
    except SystemExit:
        pass
print(out.getvalue().splitlines()[0])
print(" ".join(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize(
    "tool, entry", [("nem-opt", "nem.cli.nem_opt:main"), ("nem-run", "nem.cli.launch:nem_run")]
)
def test_version_loads_nothing_heavy(tool, entry):
    r = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), entry, tool],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    first, loaded = r.stdout.split("\n")[:2]
    assert first.startswith(f"{tool} (nem-toolchain) ")
    assert loaded == ""
