"""`nem-opt` with NEM bytecode: `-t nemb` (write), `.nemb` input (read, by
extension or magic number), `--embed BUF=FILE.npy`, `--strip-names`,
`--strip-debug`, `--dump-nemb` (docs/bytecode.md, "Tools").

Kept apart from `nem_opt.py`: `NemOptMain` calls `add_arguments`,
`register` and, first thing in `run`, `handles` / `run_opt`.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from xdsl.utils.exceptions import ParseError

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError

if TYPE_CHECKING:
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.passes import PassPipeline

    from nem.dialect.device_model import Device


class OptMain(Protocol):
    """What this module uses of `nem-opt`'s driver (`opt_driver.NemOptMain`,
    which imports this module: named by its shape, not its class)."""

    args: argparse.Namespace
    ctx: Context
    pipeline: PassPipeline
    available_targets: dict[str, Any]
    available_frontends: dict[str, Any]

    def output_resulting_program(self, prog: ModuleOp) -> str: ...

    def _parse(self, text: str, file: str, ext: str, at: tuple[int, int] = (0, 0)) -> ModuleOp: ...

    def _verify(self, module: ModuleOp, file: str) -> list[Diagnostic]: ...

    def _verify_device(self, module: ModuleOp, file: str) -> list[Diagnostic]: ...


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("NEM bytecode (.nemb)")
    g.add_argument(
        "--embed",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="with -t nemb: store FILE as initial contents of buffer or top-level "
        "region NAME (.npy: an array of NAME's element type, and a region's shape, "
        "checked as nem-run --input; any other file: its raw bytes at the start of "
        "buffer NAME)",
    )
    g.add_argument(
        "--strip-names",
        action="store_true",
        help="with -t nemb: drop user names (the loader invents _vN names)",
    )
    g.add_argument(
        "--strip-debug", action="store_true", help="with -t nemb: drop the source locations"
    )
    g.add_argument(
        "--dump-nemb",
        action="store_true",
        help="describe a .nemb file: header, sections and sizes, build info, "
        "required capabilities, relocations (resolved with --device), data",
    )


def register(main: OptMain) -> None:
    """Make `-t nemb` and `-f nemb` valid choices (the work is done in `run_opt`)."""
    main.available_targets["nemb"] = lambda module, out: None
    main.available_frontends["nemb"] = lambda io: None


def _input_is_nemb(args: argparse.Namespace) -> bool:
    from nem.frontends.bytecode import MAGIC

    if args.frontend == "nemb":
        return True
    if args.frontend:
        return False
    if args.input_file in (None, "-"):
        peek = getattr(sys.stdin, "buffer", None)
        return bool(peek is not None and hasattr(peek, "peek") and peek.peek(4)[:4] == MAGIC)
    if args.input_file.endswith(".nemb"):
        return True
    try:
        with open(args.input_file, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def target_of_output(args: argparse.Namespace) -> None:
    """`-o FILE.nemb` with `-t` omitted writes NEM bytecode, whatever the
    input (a `.nemb` input's default is `.nem` text, for standard output
    and any other name); with `-t nem` or `-t mlir` it is a usage error
    (an outside user, session 52: `nem-opt X.nemb -p nem-verify -o
    Y.nemb` wrote text into Y.nemb, dropped its weights, and nem-run then
    refused the file by its name) (D-OPT-TARGET)."""
    out = args.output_file
    if out is None or out == "-" or not out.endswith(".nemb"):
        return
    if args.target == "same-as-input":
        args.target = "nemb"
    elif args.target != "nemb":
        print(
            f"nem-opt: error: -o {out} names NEM bytecode, but -t {args.target} writes "
            f"text\nfix: use -t nemb, or an output name not ending in .nemb",
            file=sys.stderr,
        )
        sys.exit(1)


def bytecode_flags_need_nemb(args: argparse.Namespace) -> None:
    """`--embed`, `--strip-names` and `--strip-debug` shape NEM bytecode:
    with text output (`-t nem`, `-t mlir`, or no `-t` for a `.nem` or
    `.mlir` input) they are a usage error, exit 1 and nothing written.
    They were ignored: `nem-opt g.nem --embed W=w.npy -o g2.nem` exited 0
    with the very bytes of the run without `--embed`, the weights dropped
    without a word (an outside user, session 66; D-OPT-TARGET).  Called
    after `target_of_output`, so `-o FILE.nemb` alone is bytecode."""
    given = [
        flag
        for flag, on in (
            ("--embed", args.embed),
            ("--strip-names", args.strip_names),
            ("--strip-debug", args.strip_debug),
        )
        if on
    ]
    if not given or args.target == "nemb" or args.dump_nemb:
        return
    how = (
        f"-t {args.target} writes text"
        if args.target != "same-as-input"
        else "the output is text (no -t)"
    )
    lost = "no array would be written" if args.embed else "nothing would be stripped"
    verb = "takes" if len(given) == 1 else "take"
    print(
        f"nem-opt: error: {' and '.join(given)} {verb} effect only in NEM bytecode, but "
        f"{how}: {lost}\nfix: add -t nemb -o FILE.nemb (or only -o FILE.nemb)",
        file=sys.stderr,
    )
    sys.exit(1)


def handles(main: OptMain) -> bool:
    a = main.args
    return a.target == "nemb" or a.dump_nemb or _input_is_nemb(a)


def _fail(diags: list[Diagnostic]) -> int:
    """Print `diags` as nem-opt does: one without a location (a flag's error,
    e.g. `--embed`) gets the `nem-opt:` prefix."""
    from nem.cli.error_limit import print_diagnostics

    print_diagnostics("nem-opt", diags)
    return 1


def run_opt(main: OptMain) -> int:
    """The whole `nem-opt` run when bytecode is read or written."""
    from nem.frontends.bytecode.loader import load_nemb

    a = main.args
    if a.split_input_file or a.verify_diagnostics:
        return _fail(
            [
                Diagnostic(
                    "error",
                    "not supported: --split-input-file and --verify-diagnostics with NEM bytecode",
                )
            ]
        )
    stdin = a.input_file in (None, "-")
    file = "<stdin>" if stdin else a.input_file
    if stdin:
        from nem.dialect.limits import max_source_bytes
        from nem.dialect.source_files import read_stream_bytes
        from nem.frontends.bytecode import MAGIC

        stdin_raw = read_stream_bytes(sys.stdin.buffer, bytecode_magic=MAGIC)
        if stdin_raw is None:
            return _fail(
                [
                    Diagnostic(
                        "error",
                        f"standard input has more than "
                        f"{max_source_bytes()} bytes (D-LIMITS; "
                        "--max-source-bytes N raises the limit)",
                    )
                ]
            )
        raw = stdin_raw
    else:
        from nem.dialect.source_files import read_source_bytes
        from nem.frontends.bytecode import MAGIC

        try:
            raw = read_source_bytes(a.input_file, "input", bytecode_magic=MAGIC)
        except NemDiagnosticError as e:
            return _fail(e.diagnostics)
    data: list[tuple[str, int, bytes]] = []
    source = Path(file).name  # BuildInfo "source": the text the program came from
    from nem.frontends.bytecode.container import is_nemb

    bytecode_in = a.frontend == "nemb" or (
        not a.frontend and (is_nemb(raw) or file.endswith(".nemb"))
    )
    try:
        if bytecode_in:
            loaded = load_nemb(raw, file, check_sections=True)
            if a.dump_nemb:
                from nem.frontends.bytecode.dump import dump

                sys.stdout.write(dump(loaded, file, _device(main)))
                return 0
            module = loaded.module
            data = [(loaded.buffers[s].buffer_name.data, off, b) for s, off, b in loaded.data]
            source = loaded.build.get("source", source)
        elif a.dump_nemb:
            return _fail(
                [
                    Diagnostic(
                        "error", f"--dump-nemb: {file} is not NEM bytecode (no 'NEMB' magic number)"
                    )
                ]
            )
        else:
            ext = a.frontend or Path(file).suffix.lstrip(".") or "mlir"
            from nem.dialect.source_files import decode_source

            module = main._parse(decode_source(raw, file), file, ext)
        diags = _check_and_run(main, module, file)
    except NemDiagnosticError as e:
        return _fail(e.diagnostics)
    except ParseError as e:  # MLIR text (`-f mlir`) that xDSL's lexer refuses
        from nem.frontends.upstream_dialects.mlir_input import diagnostic_from_parse_error

        return _fail([diagnostic_from_parse_error(e, file)])
    from nem.cli.error_limit import print_diagnostics

    print_diagnostics("nem-opt", diags)
    if any(d.severity == "error" for d in diags):
        return 1
    return _emit(main, module, data, file, source)


def _device(main: OptMain) -> Device | None:
    if not main.args.device:
        return None
    from nem.devices.device_lookup import find_device

    return find_device(main.args.device, main.args.include_dirs, None)


def _check_and_run(main: OptMain, module: ModuleOp, file: str) -> list[Diagnostic]:
    """The static and device checks and the pass pipeline, as for text input."""
    diags = main._verify(module, file)
    names = [p.name for p in main.pipeline.passes]
    if not any(d.severity == "error" for d in diags) and not {
        "nem-verify",
        "nem-verify-device",
    } & set(names):
        diags += main._verify_device(module, file)
    if any(d.severity == "error" for d in diags):
        return diags
    from nem.passes.pass_context import pass_context

    run_ctx = pass_context(main.ctx, file, main.args.include_dirs, main.args.device)
    try:
        main.pipeline.apply(run_ctx, module)
    finally:
        diags += run_ctx.diagnostics
    return diags


def _emit(
    main: OptMain, module: ModuleOp, data: list[tuple[str, int, bytes]], file: str, source: str
) -> int:
    a = main.args
    target = a.target if a.target != "same-as-input" else "nem"
    if target != "nemb":
        # nothing is written to /dev/null (`-p nem-verify -o /dev/null`): no remark
        if data and a.output_file != os.devnull:
            print(
                f"{file}: remark: {len(data)} embedded data segment(s) not written: "
                f"-t {target} has no initial contents (use -t nemb to keep them)",
                file=sys.stderr,
            )
        text = main.output_resulting_program(module) if target != "nem" else None
        if text is None:
            from nem.frontends.nem_text.printer import print_nem

            text = print_nem(module)
        _write(a.output_file, text.encode("utf-8"))
        return 0
    from nem.frontends.bytecode.writer import (
        Embedded,
        NotEncodable,
        WriteOptions,
        write_nemb,
    )

    try:
        embed = [Embedded(b, d, off) for b, off, d in data] + [
            Embedded(b, d, off) for b, off, d in _embed_bytes(main, module, file, _pairs(a.embed))
        ]
        options = WriteOptions(a.strip_names, a.strip_debug, embed, {"source": source})
        out = write_nemb(module, options)
    except (NotEncodable, OSError, ValueError) as e:
        return _fail([Diagnostic("error", str(e))])
    except NemDiagnosticError as e:  # the program does not load for --embed's check
        return _fail(e.diagnostics)
    _write(a.output_file, out)
    return 0


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for it in items:
        if "=" not in it:
            raise ValueError(f"--embed expects BUF=FILE, got {it!r}")
        buf, f = it.split("=", 1)
        out.append((buf, f))
    return out


def _embed_bytes(
    main: OptMain, module: ModuleOp, file: str, pairs: list[tuple[str, str]]
) -> list[tuple[str, int, bytes]]:
    """Each `--embed NAME=FILE`'s (buffer, offset, bytes), read as `nem-run
    --input` reads its files (`nem.cli.inputs.read_input`, D-FILE-PATHS): a
    `.npy` array must have the element type of buffer or top-level region
    NAME (a region's shape its shape) and fit, its header checked before its
    data is read (`nem.runtime.tensor_io`, D-RT-TENSOR-IO); any other file is
    raw bytes filling buffer NAME exactly, the opt-in for bytes of another
    type.  A FIFO or a device is refused before it is opened.  An array
    filling only the start of NAME gets `nem-run --input`'s warning
    (`partial_fill`: one text for both tools)."""
    from nem.cli.inputs import InputError, partial_fill, read_input

    if not pairs:
        return []
    from nem.runtime.api import NemInterpreter

    interp = NemInterpreter(main.args.device, include_dirs=main.args.include_dirs)
    interp.load_module(module, file, check=False)
    out = []
    for buf, path in pairs:
        try:
            size = interp.tensor_size(buf)
            data = read_input(
                path,
                f"--embed {buf}={path}",
                size,
                f"'{buf}'",
                functools.partial(interp.check_tensor, buf),
            )
            if not path.endswith(".npy"):
                out.append((buf, 0, data.tobytes()))
                continue
            segment = interp.encode_tensor(buf, data)
            if why := partial_fill(f"--embed {buf}={path}", buf, len(segment[2]), size):
                print(f"nem-opt: warning: {why}", file=sys.stderr)  # as nem-run --input's
            out.append(segment)
        except (InputError, KeyError, ValueError) as e:
            msg = e.args[0] if isinstance(e, KeyError) else str(e)
            if not isinstance(e, InputError):
                msg = f"--embed {buf}={path}: {msg}"
            raw = f"{Path(path).stem}.bin"
            raise ValueError(
                msg.replace(
                    "(raw=True, nem-run --input-raw)",
                    "(a file not ending in .npy is taken raw: "
                    f"array.tofile('{raw}'); --embed {buf}={raw})",
                )
            ) from None
    return out


def _write(path: str | None, data: bytes) -> None:
    """`-o -` is standard output; a file appears only once written whole
    (D-OPT-OUTPUT, `nem.cli.common.output_file`)."""
    from nem.cli.common import output_file

    with output_file(path, "wb") as f:
        f.write(data)
    if path is None or path == "-":
        sys.stdout.flush()
