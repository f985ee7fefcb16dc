"""The `.nem` programs of the repository, for the bytecode round-trip tests:
examples/, every chunk of test/lit/**/*.nem that parses and verifies, the
benchmark programs (small sizes), and generated random programs."""

from __future__ import annotations

import io
import sys
from functools import cache
from pathlib import Path

from xdsl.printer import Printer

from nem.cli.verify_diagnostics import split_chunks
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.verifier import verify_program
from nem.frontends.nem_text.document import is_config_document
from nem.frontends.nem_text.parser import parse_nem

ROOT = Path(__file__).resolve().parents[2]


def same_ir_text(module) -> str:
    """Generic MLIR with locations: equal strings = the same IR."""
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True, print_debuginfo=True).print_op(module)
    return out.getvalue()


@cache
def corpus() -> list[tuple[str, str]]:
    """(name, text) of every program that parses and verifies."""
    files = sorted({*ROOT.glob("examples/*.nem"), *ROOT.glob("test/lit/**/*.nem")}
                   - set(ROOT.glob("test/lit/**/Output/**/*.nem")))  # lit's own output
    out = []
    for f in files:
        rel = str(f.relative_to(ROOT))
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a hostile-input test (not UTF-8 on purpose)
            continue
        for k, (chunk, _) in enumerate(split_chunks(text, "#")):
            name = rel if k == 0 else f"{rel}#{k}"
            if is_config_document(chunk, rel):
                continue
            try:
                module = parse_nem(chunk, rel)
            except NemDiagnosticError:  # negative tests: rejected by the parser
                continue
            if any(d.severity == "error" for d in verify_program(module.ops.first)):
                continue
            out.append((name, chunk))
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_roundtrip
    finally:
        sys.path.pop(0)
    out.append(("bench_roundtrip(200)", bench_roundtrip.generate(200)))
    return out
