"""ONNX importer: an ONNX model -> linalg on tensors (upstream MLIR bindings).

`import_onnx(path_or_model)` returns an `ImportedModel` (the MLIR module, its
inputs, weights and outputs).  Needs the `onnx` package and the `mlir`
extra; see docs/compile.md.  `ImportedModel` and `Port` load the MLIR
bindings when first named (a model reported before conversion never does,
D-COMPILE-EARLY-UNSUPPORTED).
"""

from typing import Any

from nem.frontends.onnx.diagnostics import OnnxImportError, OnnxImportErrors
from nem.frontends.onnx.entry import import_onnx

__all__ = ["ImportedModel", "OnnxImportError", "OnnxImportErrors", "Port", "import_onnx"]


def __getattr__(name: str) -> Any:
    if name in ("ImportedModel", "Port"):
        from nem.frontends.onnx import graph

        return getattr(graph, name)
    raise AttributeError(f"module 'nem.frontends.onnx' has no attribute '{name}'")
