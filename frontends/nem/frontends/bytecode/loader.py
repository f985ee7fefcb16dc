"""Loading a `.nemb` file as verified NEM IR, with the usual diagnostics.

`load_nemb` = decode (`read_nemb`) + the static rules (`verify_program`, as
after parsing `.nem` text) + the container's own consistency: the
Requirements and Relocations sections must be what the code implies
(a file may not understate what it needs).  Device checks are the caller's
(`nem-run --device`, `nem-opt --device`): the program binds late.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from xdsl.utils.exceptions import VerifyException

from nem.dialect.device_model import Device
from nem.dialect.diagnostics import (
    Diagnostic,
    NemDiagnosticError,
    SourceLoc,
    register_source,
)
from nem.dialect.gc_pause import gc_paused
from nem.frontends.bytecode.container import REWRITE_FIX, BytecodeError
from nem.frontends.bytecode.reader import LoadedBytecode, read_nemb
from nem.frontends.bytecode.requirements import requirements_of, slots_of


@dataclass(frozen=True)
class ByteLoc(SourceLoc):
    """A position in a binary file: `file: byte N` (line = byte offset)."""

    def __str__(self) -> str:
        return f"{self.file}: byte {self.line}"


def bytecode_diagnostic(e: BytecodeError, file: str) -> Diagnostic:
    return Diagnostic("error", e.message, ByteLoc(file, e.offset, 0), None, e.fix or REWRITE_FIX)


def load_nemb(
    data: bytes,
    file: str = "<nemb>",
    verify: bool = True,
    check_sections: bool = False,
    timings: dict[str, float] | None = None,
) -> LoadedBytecode:
    """Decode and check; `NemDiagnosticError` for a malformed file (one
    diagnostic: the byte offset and what is wrong) or a program that breaks
    a static rule (the usual diagnostics, at the source locations of the
    debug section when it is there).

    `check_sections` also checks that the derived sections (Requirements,
    Relocations) match the code, as `nem-opt` does when it reads a file.  A
    loader that binds the program to a device does not need it for safety:
    the device rules run on the IR after the quick Requirements check
    (D-BC-LOAD).

    With `timings`, the seconds spent decoding, building IR and applying the
    static rules are added to its "decode", "build" and "verify"
    (bench/bench_bytecode.py)."""
    register_source(file, "")  # never quote a binary file as source text
    # the collector stays paused from decoding to the end of the rules, as
    # each pauses it: re-enabled in between, the first allocation of the
    # verifier would collect the whole new IR (all in the young generation).
    # That collection comes once the caller allocates again, as after
    # `parse_nem`.
    with gc_paused():
        loaded = _decode(data, file, timings)
        if not verify:
            return loaded
        from nem.dialect.verifier import verify_program

        t0 = time.perf_counter()
        diags = verify_program(loaded.program, facts=loaded.facts)
        if timings is not None:
            timings["verify"] = timings.get("verify", 0.0) + time.perf_counter() - t0
        failed = any(d.severity == "error" for d in diags)
    if failed:
        raise NemDiagnosticError(diags)
    if check_sections:
        check_consistency(loaded, file)
    return loaded


def _decode(data: bytes, file: str, timings: dict[str, float] | None) -> LoadedBytecode:
    """`read_nemb`, its errors as one diagnostic each."""
    try:
        return read_nemb(data, file, timings)
    except BytecodeError as e:
        raise NemDiagnosticError([bytecode_diagnostic(e, file)]) from None
    except (
        ArithmeticError,
        LookupError,
        TypeError,
        ValueError,
        struct.error,
        RecursionError,
        VerifyException,
    ) as e:  # pragma: no cover - the fuzz test keeps this unreached
        # A check the reader lacks: still one line, never a traceback.
        raise NemDiagnosticError(
            [
                bytecode_diagnostic(
                    BytecodeError(0, f"malformed file (unchecked case: {type(e).__name__}: {e})"),
                    file,
                )
            ]
        ) from None


def check_consistency(loaded: LoadedBytecode, file: str) -> None:
    """The derived sections, when present, must match the code."""
    if loaded.requirements is not None and loaded.requirements != requirements_of(loaded.program):
        raise NemDiagnosticError(
            [
                Diagnostic(
                    "error",
                    "the Requirements section does not match the program's code (the file "
                    "misstates what it needs of a device)",
                    ByteLoc(file, 0, 0),
                    None,
                    REWRITE_FIX,
                )
            ]
        )
    if loaded.slots is not None:
        mine = [
            (s.name, s.level, s.size, s.align, s.copies, s.access) for s in slots_of(loaded.program)
        ]
        theirs = [(s.name, s.level, s.size, s.align, s.copies, s.access) for s in loaded.slots]
        if mine != theirs:
            raise NemDiagnosticError(
                [
                    Diagnostic(
                        "error",
                        "the Relocations section does not match the program's buffers",
                        ByteLoc(file, 0, 0),
                        None,
                        REWRITE_FIX,
                    )
                ]
            )


def check_target(loaded: LoadedBytecode, device: Device | None, file: str) -> None:
    """Late binding: the file's Requirements against the chosen device,
    before any IR-level device check (docs/bytecode.md, "Loading").  The
    errors name what the device lacks (a variant, a unit, an engine, memory)."""
    if device is None:
        return
    from nem.frontends.bytecode.requirements import check_requirements

    reqs = (
        loaded.requirements if loaded.requirements is not None else requirements_of(loaded.program)
    )
    diags = check_requirements(reqs, device, SourceLoc.of(loaded.program), loaded.program)
    if diags:
        raise NemDiagnosticError(diags)
