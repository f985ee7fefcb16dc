"""ONNX importer: an ONNX model -> linalg on tensors (upstream MLIR bindings).

`import_onnx(path_or_model)` returns an `ImportedModel` (the MLIR module, its
inputs, weights and outputs).  Needs the `onnx` package and the `mlir`
extra; see docs/compile.md.
"""

from nem.frontends.onnx.diagnostics import OnnxImportError, OnnxImportErrors
from nem.frontends.onnx.driver import import_onnx
from nem.frontends.onnx.graph import ImportedModel, Port

__all__ = ["ImportedModel", "OnnxImportError", "OnnxImportErrors", "Port", "import_onnx"]
