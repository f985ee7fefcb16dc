"""The words the `.nem` grammar reserves, which no generated name may be:
the ONNX front end's buffer names (`nem.frontends.onnx.graph.nem_name`,
D-COMPILE-IFACE) and the lowering's (`nem.passes.lowering.context`).  One
list for both: the front end suffixed only its own list's words, so a model
output named `transfer` got a buffer the lowering renamed `arg0` while the
interface still said `transfer` (an outside user, session 63)."""

from __future__ import annotations

RESERVED = frozenset(
    {
        "align",
        "buffer",
        "const",
        "deps",
        "device",
        "elem",
        "endloop",
        "in",
        "include",
        "layout",
        "let",
        "loop",
        "mod",
        "out",
        "program",
        "quant",
        "region",
        "shape",
        "size",
        "store",
        "strides",
        "transfer",
        "type_family",
        "wait",
    }
)
"""Words never used as generated names."""
