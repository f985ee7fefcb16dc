"""The `.nemb` container: versioning, compatibility, and untrusted input
(docs/bytecode.md, "Compatibility" and "Untrusted input").

* a newer minor with an unknown optional section loads; an unknown
  required section, a newer (or older) major, a bad magic are rejected with
  one diagnostic naming both versions / the byte offset;
* malformed files (truncated, bit flips, lying size fields) are rejected
  cleanly;
* the fuzz test feeds seeded random mutations (with and without a re-sealed
  checksum, so mutations also reach the decoder) to the loader: each input
  gives a valid program or exactly one error diagnostic with a byte offset,
  never another exception, in bounded time.  NEM_FUZZ=N runs N mutations
  (default 300; docs/bytecode.md gives the figures of a long run).
"""

from __future__ import annotations

import os
import random
import struct
import time
import zlib
from pathlib import Path

import pytest
from bytecode_corpus import mutate, reseal

from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.bytecode import nem_bytecode_generated as fb
from nem.frontends.bytecode.container import HEADER_SIZE, MAGIC
from nem.frontends.bytecode.loader import ByteLoc, load_nemb
from nem.frontends.bytecode.reader import read_nemb
from nem.frontends.bytecode.writer import Embedded, WriteOptions, write_nemb
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem

GEMM = (Path(__file__).resolve().parents[2] / "examples/gemm_bias_relu.nem").read_text()


def nemb(options: WriteOptions | None = None) -> bytes:
    return write_nemb(parse_nem(GEMM, "examples/gemm_bias_relu.nem"), options)


def error_of(data: bytes) -> str:
    with pytest.raises(NemDiagnosticError) as info:
        load_nemb(data, "p.nemb")
    diags = info.value.diagnostics
    assert len(diags) == 1 and isinstance(diags[0].loc, ByteLoc), diags
    head, *rest = diags[0].render().split("\n")  # (a binary file is never quoted)
    assert [r.split(": ", 1)[0] for r in rest] == ["fix"], rest
    return head


def test_newer_minor_with_an_unknown_optional_section_loads():
    data = nemb(WriteOptions(foreign=[(200, False, b"from the future")]))
    data = reseal(data, minor=7)
    loaded = load_nemb(data, "p.nemb")
    assert loaded.header.minor == 7
    assert loaded.unknown_sections == [(200, False)]
    assert print_nem(loaded.module) == print_nem(parse_nem(GEMM, "x"))


def test_unknown_required_section_is_rejected():
    data = nemb(WriteOptions(foreign=[(201, True, b"needed")]))
    assert "section kind 201 is required but unknown to this reader" in error_of(data)


def test_newer_major_is_rejected_naming_both_versions():
    line = error_of(reseal(nemb(), major=2, minor=3))
    assert (
        "p.nemb: byte 4: error: file format version 2.3 has a newer major version than "
        "this reader's 1.2" in line
    )


def test_older_major_is_rejected():
    assert "file format version 0.0 has an older major version" in error_of(reseal(nemb(), major=0))


@pytest.mark.parametrize(
    "mutate,expect",
    [
        (lambda d: d[:10], "shorter than the 16-byte header"),
        (lambda d: d[:-5], "header says the payload is"),
        (lambda d: d + b"\0", "header says the payload is"),
        (lambda d: b"NEMX" + d[4:], "bad magic"),
        (lambda d: d[:40] + bytes([d[40] ^ 0x10]) + d[41:], "checksum mismatch"),
        (lambda d: d[:8] + struct.pack("<I", 1 << 31) + d[12:], "header says the payload is"),
        (lambda d: reseal(d[:16] + d[16:20] + b"XXXX" + d[24:]), "file identifier"),
        (lambda d: reseal(d[:16] + struct.pack("<I", 1 << 30) + d[20:]), "outside the payload"),
    ],
)
def test_malformed_files_are_rejected_with_the_byte(mutate, expect):
    assert expect in error_of(mutate(nemb()))


def test_lying_vector_length_is_rejected():
    data = bytearray(nemb())
    # the Strings blob: find the vector holding the first name and inflate its length
    pos = data.find(b"gemm_bias_relu")
    assert pos > 0
    data[pos - 4 : pos] = struct.pack("<I", 10**9)
    assert "outside the payload" in error_of(reseal(bytes(data)))


def test_embedded_data_roundtrips_and_is_checked():
    raw = bytes(range(256)) * 2
    data = nemb(WriteOptions(embed=[Embedded("C_L2", raw[:256])]))
    loaded = load_nemb(data, "p.nemb")
    assert loaded.data == [(2, 0, raw[:256])]
    with pytest.raises(ValueError, match="do not fit"):
        nemb(WriteOptions(embed=[Embedded("C_L2", raw)]))
    with pytest.raises(ValueError, match="no buffer of that name"):
        nemb(WriteOptions(embed=[Embedded("nope", raw)]))


def test_initial_contents_are_not_counted_as_program_text(tmp_path):
    """A `.nemb`'s Data section (a model's weights) is bounded as input files
    are, the rest of the file by the source limit (D-LIMITS): nem-run refused
    nem-compile's own ResNet-50 `.nemb` (102 MB of weights, 0.5 MB of
    program) at the default 8 MiB limit."""
    import io

    from nem.dialect.limits import source_limit
    from nem.dialect.source_files import read_source_bytes, read_stream_bytes
    from nem.runtime.api import NemInterpreter

    bare = len(nemb())
    data = nemb(WriteOptions(embed=[Embedded("C_L2", b"\x5a" * 256)]))
    assert len(data) > bare + 256
    path = tmp_path / "p.nemb"
    path.write_bytes(data)
    interp = NemInterpreter(device="npm_lite")
    interp.load(path)  # the device files are read under the default limit
    with source_limit(bare + 128):  # the program fits, the file does not
        assert read_source_bytes(path, bytecode_magic=MAGIC) == data
        assert read_stream_bytes(io.BytesIO(data), bytecode_magic=MAGIC) == data
        interp.load(path)
        with pytest.raises(NemDiagnosticError, match="above the limit"):
            read_source_bytes(path)  # not read as bytecode: no allowance
        text = b"#" * len(data)  # text gets no allowance either
        assert read_stream_bytes(io.BytesIO(text), bytecode_magic=MAGIC) is None
    with source_limit(bare - 128):  # the program itself is over the limit
        with pytest.raises(NemDiagnosticError) as info:
            interp.load(path)
        message = info.value.diagnostics[0].render()
        assert "the program (the file without its" in message and "(D-LIMITS)" in message


def test_data_sections_are_64_byte_aligned():
    data = nemb(WriteOptions(embed=[Embedded("C_L2", b"\x5a" * 256)]))
    at = data.find(b"\x5a" * 256)
    assert at > HEADER_SIZE and (at - HEADER_SIZE) % 64 == 0, at


def test_magic_and_crc():
    data = nemb()
    assert data[:4] == MAGIC
    # CRC-32 as zlib computes it (docs/bytecode.md), not the writer's own function
    assert struct.unpack_from("<I", data, 12)[0] == zlib.crc32(data[HEADER_SIZE:]) & 0xFFFFFFFF


def test_section_numbers_are_stable():
    # never renumber: files in the field carry these
    assert (
        fb.SectionBody.BuildInfo,
        fb.SectionBody.Strings,
        fb.SectionBody.ProgramInfo,
        fb.SectionBody.Code,
        fb.SectionBody.Requirements,
        fb.SectionBody.Relocations,
        fb.SectionBody.Data,
        fb.SectionBody.Debug,
    ) == (1, 2, 3, 4, 5, 6, 7, 8)
    assert (fb.Inst.Int, fb.Inst.Compute) == (1, 15)


# ---------------------------------------------------------------------------
# Fuzzing
# ---------------------------------------------------------------------------


def fuzz(count: int, seed: int) -> dict[str, int]:
    """Mutate, load, classify; raise AssertionError on anything but a clean
    result.  Returns counts (loaded / rejected), the slowest load and the
    slowest decode alone (`read_nemb`, without the static rules) in ms."""
    rng = random.Random(seed)
    bases = [
        nemb(),
        nemb(WriteOptions(strip_names=True)),
        nemb(WriteOptions(embed=[Embedded("C_L2", b"\x01" * 64)])),
    ]
    stats = {"loaded": 0, "rejected": 0, "byte_located": 0, "slowest_ms": 0, "slowest_decode_ms": 0}
    for k in range(count):
        base = rng.choice(bases)
        data = mutate(rng, base)
        if rng.random() < 0.85 and len(data) >= HEADER_SIZE and data[:4] == MAGIC:
            data = reseal(data)  # get past the checksum: exercise the decoder
        t0 = time.perf_counter()
        try:
            read_nemb(data, "fuzz.nemb")
        except Exception:  # noqa: BLE001, S110 - timing the decoder alone; load_nemb judges
            pass
        stats["slowest_decode_ms"] = max(
            stats["slowest_decode_ms"], int((time.perf_counter() - t0) * 1000)
        )
        t0 = time.perf_counter()
        try:
            loaded = load_nemb(data, "fuzz.nemb", check_sections=True)
        except NemDiagnosticError as e:
            # a malformed file: one line naming the byte, and its fix; a
            # program that decodes but breaks a static rule: the verifier's
            assert e.diagnostics, k
            if isinstance(e.diagnostics[0].loc, ByteLoc):
                rendered = e.diagnostics[0].render().split("\n")
                assert len(e.diagnostics) == 1 and len(rendered) == 2, k
                assert rendered[1].startswith("fix: "), (k, rendered)
                assert "unchecked case" not in e.diagnostics[0].message, (k, e.diagnostics[0])
                stats["byte_located"] += 1
            stats["rejected"] += 1
        else:
            text = print_nem(loaded.module)  # a valid program prints and re-parses
            try:
                again = print_nem(parse_nem(text, "again.nem"))
            except Exception as e:
                raise AssertionError(f"mutation {k}: {e}\n{text}") from e
            assert again == text, (k, text)
            stats["loaded"] += 1
        stats["slowest_ms"] = max(stats["slowest_ms"], int((time.perf_counter() - t0) * 1000))
    return stats


def test_fuzz_fixed_seed():
    count = int(os.environ.get("NEM_FUZZ", "300"))
    stats = fuzz(count, seed=20261126)
    # both outcomes occur: mutants the loader rejects (each with one located
    # line, checked in `fuzz`) and mutants that still decode to a valid program
    # (which must print and re-parse to the same text)
    assert stats["rejected"] > 0 and stats["loaded"] > 0, stats
    assert stats["byte_located"] > 0, stats  # the one-line byte checks above ran
    assert stats["slowest_ms"] < 10_000 and stats["slowest_decode_ms"] < 10_000, stats


def test_deep_nesting_is_refused_not_a_recursion_error():
    from contextlib import ExitStack

    from nem.dialect.builder import ProgramBuilder
    from nem.dialect.limits import MAX_NESTING_DEPTH

    # the text refuses this nest (D-LIMITS); IR built in Python does not
    b = ProgramBuilder("deep")
    with ExitStack() as nest:
        for k in range(MAX_NESTING_DEPTH + 20):
            nest.enter_context(b.loop(f"i{k}", 0, 0))
    module = b.finish(verify=False)
    with pytest.raises(ValueError, match=f"loops nested deeper than {MAX_NESTING_DEPTH}"):
        write_nemb(module)
    # a file that holds them anyway (made by another writer) is refused on load
    from nem.frontends.bytecode import writer

    saved, writer.MAX_LOOP_DEPTH = writer.MAX_LOOP_DEPTH, 1000
    try:
        data = write_nemb(module)
    finally:
        writer.MAX_LOOP_DEPTH = saved
    assert f"loops nested deeper than {MAX_NESTING_DEPTH}" in error_of(data)
