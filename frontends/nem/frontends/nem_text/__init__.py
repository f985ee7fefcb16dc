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

from nem.frontends.nem_text.config_parser import parse_config_document
from nem.frontends.nem_text.config_printer import print_config_document
from nem.frontends.nem_text.document import detect_format, is_config_document
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem

__all__ = [
           "detect_format",
           "is_config_document",
           "parse_config_document",
           "parse_nem",
           "print_config_document",
           "print_nem",
]
