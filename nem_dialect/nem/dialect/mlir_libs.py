"""The runtime libraries the upstream MLIR Python bindings ship in `mlir/lib`.

Two engines JIT MLIR with `ExecutionEngine` and must hand it the same
libraries: the compiler's reference run (`nem.compile.reference`, which needs
the C runner utilities' `memrefCopy`) and the runtime's native kernels
(`nem.runtime.mlir_native`, which needs the float16 utilities' compiler-rt
symbols, D-RT-MLIR-JIT).  The compiler may not import the runtime (the layers
contract in pyproject.toml), so the lookup lives here, below both.  The
bindings are imported only when a path is asked for: this module loads in a
process without them.
"""

from __future__ import annotations

from pathlib import Path

C_RUNNER_UTILS = "libmlir_c_runner_utils.so"
FLOAT16_UTILS = "libmlir_float16_utils.so"


def shipped_libs(*names: str) -> list[str]:
    """The paths of `names` in the bindings' `mlir/lib`, those present (a
    wheel without one leaves it out; the engine then reports the missing
    symbol when a kernel needs it)."""
    import mlir

    lib = Path(next(iter(mlir.__path__))) / "lib"
    return [str(lib / name) for name in names if (lib / name).is_file()]
