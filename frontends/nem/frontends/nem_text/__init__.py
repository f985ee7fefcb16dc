"""`.nem` text: parse a program into NEM IR, print NEM IR as canonical `.nem`.

    from nem.frontends.nem_text import parse_nem, print_nem

    module = parse_nem(text, "prog.nem")   # ModuleOp holding one nem.program;
                                           # raises NemDiagnosticError (file:line:col, rule)
    text = print_nem(module)               # canonical text: print(parse(x)) is a fixpoint

Config documents (type families, devices) have their own parser and printer
(`parse_config_document`, `print_config_document`); `is_config_document`
tells the two kinds apart and `detect_format` tells `.nem` from MLIR text
(what `nem-opt -` does with standard input).  NEM IR in MLIR syntax parses
with an xDSL parser over `nem.dialect.dialect.nem_context()`.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nem.frontends.nem_text.config_parser import parse_config_document
    from nem.frontends.nem_text.config_printer import print_config_document
    from nem.frontends.nem_text.document import detect_format, is_config_document
    from nem.frontends.nem_text.parser import parse_nem
    from nem.frontends.nem_text.printer import print_nem

_HOMES = {
    "detect_format": "document",
    "is_config_document": "document",
    "parse_config_document": "config_parser",
    "parse_nem": "parser",
    "print_config_document": "config_printer",
    "print_nem": "printer",
}
"""Where each name lives: the modules are imported on first use (PEP 562),
so that importing one of them (the config parser, by the device loader)
does not load the program parser, the printer and the NEM ops."""

__all__ = [
    "detect_format",
    "is_config_document",
    "parse_config_document",
    "parse_nem",
    "print_config_document",
    "print_nem",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
