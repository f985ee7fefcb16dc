"""`nem-opt`: the NEM modular optimizer driver, built on xDSL's `xDSLOptMain`.

Reads `.nem` (by extension or `-f nem`) and MLIR; writes `.nem` (`-t nem`) or
MLIR (`-t mlir`, `--print-op-generic`).  Every input is verified with the
device-independent static rules before the pipeline runs.  Diagnostics are
`file:line:col: error: ... [RULE]` with the source line, a caret and a fix;
`--verify-diagnostics` checks them against `expected-*` comments exactly as
upstream `mlir-opt` does (comment marker `#` in `.nem`, `//` in MLIR).
Config documents (type families, devices) are validated and printed back in
canonical form; `--print-device NAME` prints a resolved device.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    VerifyException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from nem.dialect.diagnostics import (
    Diagnostic,
    NemDiagnosticError,
    register_source,
)
from nem.dialect.dialect import NEM
from nem.cli import nemb_tool
from nem.cli import verify_diagnostics as vd
from nem.cli.inputs import print_diagnostics, read_program


class NemOptMain(xDSLOptMain):
    version_format = "nem-opt (xdsl {xdsl_version})"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        self.ctx.register_dialect("nem", lambda: NEM)
        # upstream MLIR ops xDSL lacks (async.*, affine/memref DMA): frontends/nem/frontends/upstream_dialects
        from nem.frontends.upstream_dialects import register_mlir_dialects

        register_mlir_dialects(self.ctx)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        # parsing is done chunk by chunk in run(); these entries make
        # `-f nem` / `.nem` valid choices for the argument parser.
        self.available_frontends["nem"] = lambda io: None  # type: ignore[assignment]

    def register_all_passes(self) -> None:
        super().register_all_passes()
        from nem.passes import PASSES

        for name, cls in PASSES.items():
            self.register_pass(name, lambda cls=cls: cls)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        from nem.frontends.nem_text.printer import print_nem

        self.available_targets["nem"] = lambda module, out: out.write(print_nem(module))
        # `-t` omitted: .nem in -> .nem out, MLIR in -> MLIR out (decision D-OPT-TARGET)
        self.available_targets["same-as-input"] = self._same_as_input
        nemb_tool.register(self)  # -t nemb, -f nemb (cli/nem/cli/nemb_tool.py)

    def _same_as_input(self, module: ModuleOp, out: IO[str]) -> None:
        from nem.frontends.nem_text.printer import print_nem

        if self._input_ext == "nem":
            out.write(print_nem(module))
        else:
            from xdsl.printer import Printer

            Printer(stream=out, print_generic_format=self.args.print_op_generic).print_op(module)
            out.write("\n")

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument("-I", dest="include_dirs", action="append", default=[],
                                help="add a directory to the include / device search path")
        arg_parser.add_argument("--device", default=None,
                                help="target device name (a shipped device or one found via -I)")
        arg_parser.add_argument("--print-device", default=None, metavar="NAME",
                                help="print the resolved device NAME and exit")
        nemb_tool.add_arguments(arg_parser)
        arg_parser.set_defaults(target="same-as-input")

    def setup_pipeline(self) -> None:
        """xDSL's pipeline parser, after `quote_memory_spaces` (so that
        `memory-spaces=0:DDR,1:L2` needs no quotes, D-LOW-OPT-SPACES); a bad pipeline
        or option is a one-line error, not a traceback."""
        try:
            self.args.passes = quote_memory_spaces(self.args.passes or "")
            super().setup_pipeline()
        except NemDiagnosticError as e:
            print_diagnostics("nem-opt", e.diagnostics)
            sys.exit(1)
        except (ArgSpecParseError, ValueError) as e:
            print(f"nem-opt: error: -p: bad pass pipeline: {str(e).strip()}", file=sys.stderr)
            sys.exit(1)

    # ------------------------------------------------------------------
    def run(self) -> None:  # noqa: C901 - a driver loop
        if self.args.print_device:
            sys.exit(self._print_device(self.args.print_device))
        if nemb_tool.handles(self):  # bytecode in or out: cli/nem/cli/nemb_tool.py
            sys.exit(nemb_tool.run_opt(self))
        file, raw = read_program(self.args.input_file, "input")
        register_source(file, raw)
        ext = self.args.frontend or Path(file).suffix.lstrip(".") or "mlir"
        self._input_ext = ext
        marker = "#" if ext == "nem" else "//"
        chunks = vd.split_chunks(raw, marker) if self.args.split_input_file else [(raw, 0)]
        # the separator between output chunks is written in the output's
        # comment syntax, so that .nem output splits again
        nem_out = self.args.target == "nem" or (self.args.target == "same-as-input"
                                               and ext == "nem")
        out_marker = "#" if nem_out else "//"
        out = sys.stdout if self.args.output_file is None else open(self.args.output_file, "w")
        failures: list[str] = []
        failed = False
        try:
            for i, (chunk, offset) in enumerate(chunks):
                if i > 0:
                    out.write(f"{out_marker} -----\n")
                diags, text = self._process(vd.padded_chunk(chunk, offset), file, ext)
                if self.args.verify_diagnostics:
                    exps = vd.parse_expectations(chunk, file, marker, line_offset=offset)
                    failures += vd.check(exps, diags, file)
                else:
                    for d in diags:
                        print(d.render(), file=sys.stderr)
                    failed |= any(d.severity == "error" for d in diags)
                if text is not None and not (self.args.verify_diagnostics and diags):
                    out.write(text)
        finally:
            if out is not sys.stdout:
                out.close()
        if failures:
            for f in failures:
                print(f, file=sys.stderr)
            sys.exit(1)
        if failed:
            sys.exit(1)

    def _process(self, text: str, file: str, ext: str) -> tuple[list[Diagnostic], str | None]:
        """Parse, verify, run the pipeline and print one chunk."""
        diags: list[Diagnostic] = []
        try:
            if ext == "nem" and _is_config_document(text, file):
                return diags, self._config_document(text, file, diags)
            module = self._parse(text, file, ext)
            names = [p.name for p in self.pipeline.passes]
            # `-p nem-verify` runs the default checks itself (its first stage);
            # a device pass in the pipeline replaces the default device check.
            if not names or names[0] != "nem-verify":
                diags += self._verify(module, file)
                if not any(d.severity == "error" for d in diags) and not \
                        {"nem-verify", "nem-verify-device"} & set(names):
                    diags += self._verify_device(module, file)
            if any(d.severity == "error" for d in diags):
                return diags, None
            from nem.passes.pass_env import pass_env

            with pass_env(file, self.args.include_dirs, self.args.device) as env:
                try:
                    self.pipeline.apply(self.ctx, module)
                finally:
                    diags += env.diagnostics
            return diags, self.output_resulting_program(module)
        except NemDiagnosticError as e:
            return diags + e.diagnostics, None
        except ParseError as e:
            from nem.frontends.upstream_dialects.mlir_input import diagnostic_from_parse_error

            return diags + [diagnostic_from_parse_error(e, file)], None
        except (VerifyException, DiagnosticException) as e:
            return diags + [Diagnostic("error", str(e).splitlines()[0] if str(e) else type(e).__name__)], None

    def _parse(self, text: str, file: str, ext: str) -> ModuleOp:
        if ext == "nem":
            from nem.frontends.nem_text.parser import parse_nem

            return parse_nem(text, file)
        # located diagnostics for every failure, bounded work (D-LIMITS)
        from nem.frontends.upstream_dialects.mlir_input import parse_mlir_checked

        return parse_mlir_checked(self.ctx, text, file, not self.args.no_implicit_module)

    def _verify(self, module: ModuleOp, file: str) -> list[Diagnostic]:
        from nem.dialect.ops import ProgramOp
        from nem.dialect.verifier import verify_program

        return [d for p in module.walk() if isinstance(p, ProgramOp) for d in verify_program(p)]

    def _verify_device(self, module: ModuleOp, file: str) -> list[Diagnostic]:
        """Device legality against the program's target (directive or --device)."""
        from nem.dialect.ops import ProgramOp
        from nem.devices.program_device import check_device_validity, program_device

        diags: list[Diagnostic] = []
        for prog in module.walk():
            if isinstance(prog, ProgramOp):
                device = program_device(prog, file, self.args.include_dirs, self.args.device)
                if device is not None:
                    diags += [*device.warnings, *check_device_validity(prog, device)]
        return diags

    def _config_document(self, text: str, file: str, diags: list[Diagnostic]) -> str:
        from nem.devices.device_resolver import resolve_device, scope_for_document
        from nem.frontends.nem_text.config_parser import parse_config_document
        from nem.frontends.nem_text.config_printer import print_config_document

        doc = parse_config_document(text, file)
        scope = scope_for_document(doc, self.args.include_dirs)
        for dev in doc.devices:
            if dev.topology is not None or dev.parent is not None:
                try:
                    resolved = resolve_device(scope, dev.name, dev.loc)
                except NemDiagnosticError as e:
                    # abstract devices (no topology anywhere in the chain) are fine
                    # unless used as a target (docs/conformance.md Gaps B)
                    if not any(d.rule == "DEV-07" for d in e.diagnostics):
                        raise
                    continue
                diags += resolved.warnings
        return print_config_document(doc)

    def _print_device(self, name: str) -> int:
        from nem.devices.device_lookup import find_device
        from nem.frontends.nem_text.config_printer import print_device

        try:
            device = find_device(name, self.args.include_dirs, self.args.input_file)
        except NemDiagnosticError as e:
            print_diagnostics("nem-opt", e.diagnostics)
            return 1
        sys.stdout.write(print_device(device))
        return 0


_PASS_OPTIONS = re.compile(r'(?P<name>[\w.-]*)\{(?P<opts>(?:"[^"]*"|[^}"])*)\}')
_SPACES_OPTION = re.compile(r'(?<!\S)(?P<key>memory[-_]spaces=)(?P<value>"[^"]*"|[^\s"]*)')


def quote_memory_spaces(spec: str) -> str:
    """Quote every `memory-spaces=VALUE` option inside a pass's `{...}` of
    the pipeline `spec` and check every such value with `parse_spaces`
    (D-LOW-OPT-SPACES).

    xDSL's pipeline lexer has no `:` (nor `[`), so MLIR's spelling
    `lower-to-nem{memory-spaces=0:DDR,1:L2,2:L1[0] device=X}` would not parse;
    the value (up to the next blank or `}`) becomes `"0:DDR,1:L2,2:L1[0]"`,
    the quoted form xDSL already accepts.  A bad value raises a
    `NemDiagnosticError` naming the pass, the option and the item, before
    any input is read."""
    from nem.passes.convert_affine_to_nem import parse_spaces

    def in_pass(m: re.Match) -> str:
        def quoted(o: re.Match) -> str:
            value = o["value"].strip('"')
            try:
                parse_spaces(value)
            except NemDiagnosticError as e:
                for d in e.diagnostics:
                    d.message = f"{m['name'] or 'pass'}: {d.message}"
                raise
            return f'{o["key"]}"{value}"'

        return f"{m['name']}{{{_SPACES_OPTION.sub(quoted, m['opts'])}}}"

    return _PASS_OPTIONS.sub(in_pass, spec)


def _is_config_document(text: str, file: str) -> bool:
    """A file is a config document when, after its includes, it holds only
    `type_family` / `device NAME [extends P] {...}` declarations and no program
    statement or header (docs/conformance.md Gaps E, decision D-DOC-KIND)."""
    from nem.frontends.nem_text.document import is_config_document

    return is_config_document(text, file)


def main(argv: Sequence[str] | None = None) -> None:
    try:
        NemOptMain(args=argv).run()
    except BrokenPipeError:
        pass
    except KeyboardInterrupt:
        print("nem-opt: interrupted", file=sys.stderr)
        sys.exit(130)
    except ArgSpecParseError as e:  # xDSL 0.74: a BaseException (docs/upstream-reports.md)
        detail = " ".join(line.strip() for line in str(e).strip().splitlines()[-3:])
        print(f"nem-opt: error: -t/-p: bad target or pass specification: {detail}",
              file=sys.stderr)
        sys.exit(1)
    except NemDiagnosticError as e:  # an input that cannot be read (D-LIMITS)
        print_diagnostics("nem-opt", e.diagnostics)
        sys.exit(1)
    except OSError as e:  # an input or output file that cannot be opened
        print(f"nem-opt: error: cannot open {e.filename}: {e.strerror}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # a bug, never a user error: say so without a traceback
        print(f"nem-opt: internal error: {type(e).__name__}: {e}\n"
              "This is a bug in nem-opt; rerun with NEM_TRACEBACK=1 for the traceback.",
              file=sys.stderr)
        if os.environ.get("NEM_TRACEBACK"):
            raise
        sys.exit(2)


if __name__ == "__main__":
    main()
