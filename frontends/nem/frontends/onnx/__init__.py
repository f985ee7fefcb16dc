"""ONNX importer: an ONNX model -> linalg on tensors (upstream MLIR bindings).

`import_onnx(path_or_model)` returns an `ImportedModel` (the MLIR module, its
inputs, weights and outputs).  Needs the `onnx` package and the `mlir`
extra; see docs/compile.md.
"""

from nem.frontends.onnx.graph import ImportedModel, OnnxImportError, Port, import_onnx

__all__ = ["ImportedModel", "OnnxImportError", "Port", "import_onnx"]
