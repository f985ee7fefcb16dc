"""The `.nem` programs of the repository, for the bytecode round-trip tests:
examples/, every chunk of test/lit/**/*.nem that parses and verifies, the
benchmark programs (small sizes), and generated random programs; the split
lit inputs (erroneous ones too) and the fuzzing mutation of the bytecode tests."""

from __future__ import annotations

import io
import random
import struct
import sys
from functools import cache
from pathlib import Path

from source_files import sources
from xdsl.printer import Printer

from nem.cli.split_input import split_input
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.verifier import verify_program
from nem.frontends.bytecode.container import HEADER_SIZE, seal
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
    files = sorted({*ROOT.glob("examples/*.nem"), *sources("*.nem", "test/lit")})
    out = []
    for f in files:
        rel = str(f.relative_to(ROOT))
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a hostile-input test (not UTF-8 on purpose)
            continue
        for k, chunk in enumerate(c.text for c in split_input(text, rel, "# -----")[0]):
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


def lit_chunks() -> list[tuple[str, str]]:
    """(name, text) of every split input of the lit tests, erroneous ones too."""
    out = []
    lit = ROOT / "test" / "lit"
    for path in sorted(lit.rglob("*.nem")):
        for k, text in enumerate(path.read_text().split("\n# -----\n")):
            out.append((f"{path.relative_to(lit)}#{k}", text))
    return out


def reseal(data: bytes, major: int | None = None, minor: int | None = None) -> bytes:
    """`data` with its header rewritten (version, size, CRC-32) over its payload."""
    _, ma, mi, _, _ = struct.unpack_from("<4sHHII", data)
    return seal(
        bytes(data[HEADER_SIZE:]), ma if major is None else major, mi if minor is None else minor
    )


def mutate(rng: random.Random, data: bytes) -> bytes:
    """A fuzzing mutation of a `.nemb` file: bit flips, bytes, words, cuts, insertions."""
    d = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        what = rng.random()
        pos = rng.randrange(HEADER_SIZE, len(d)) if len(d) > HEADER_SIZE else 0
        if what < 0.5:
            d[pos] ^= 1 << rng.randrange(8)
        elif what < 0.7:
            d[pos] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif what < 0.8:
            struct.pack_into(
                "<I",
                d,
                min(pos, len(d) - 4) & ~3,
                rng.choice((0, 1, 0xFFFFFFFF, 1 << 31, rng.randrange(1 << 32))),
            )
        elif what < 0.9:
            del d[pos : pos + rng.randrange(1, 64)]
        else:
            d[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 32)))
    return bytes(d)
