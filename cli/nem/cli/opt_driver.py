"""The `nem-opt` driver (`nem.cli.nem_opt` is its entry point): the NEM
modular optimizer, built on xDSL's `xDSLOptMain`, with mlir-opt's conventions (`-` for stdin/stdout, `--pass-pipeline`,
`--load-pass-plugin`, `--verify-diagnostics` printing the output, no output
file on failure; decisions D-OPT-* in docs/spec-decisions.md).

Reads `.nem` (by extension, `-f nem`, or detected on stdin) and MLIR; writes
`.nem` (`-t nem`) or MLIR (`-t mlir`, `--print-op-generic`).  Every input is verified with the
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
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Dialect
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    VerifyException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from nem.cli import nemb_tool
from nem.cli import verify_diagnostics as vd
from nem.cli.common import is_stdio, output_file, version_text
from nem.cli.entry import keep_until_exit
from nem.cli.error_limit import add_error_limit_argument, error_limit, print_diagnostics
from nem.cli.inputs import read_program
from nem.cli.opt_flags import (
    OptionRecorder,
    accept_mlir_opt_spellings,
    check_split_marker,
    take_split_marker,
)
from nem.cli.split_input import Chunk, split_input
from nem.dialect.diagnostics import (
    Diagnostic,
    NemDiagnosticError,
    RuleVerifyException,
    register_source,
)
from nem.dialect.limits import MAX_SOURCE_BYTES
from nem.passes.driver import (
    PLUGIN_PASSES,
    PluginError,
    apply_pipeline,
    available_passes,
    load_pass_plugin,
    pass_options,
    pass_summary,
    universe_passes,
    universes,
    with_include_dirs,
)
from nem.passes.pipeline_spec import PipelineError, check_pipeline

UPSTREAM_DIALECTS = ("async", "affine", "memref", "linalg")
"""The dialects `nem.frontends.upstream_dialects.mlir_dialect_factories` extends."""


def _upstream_dialect(name: str) -> Callable[[], Dialect]:
    def make() -> Dialect:
        from nem.frontends.upstream_dialects import mlir_dialect_factories

        return mlir_dialect_factories()[name]()

    return make


if TYPE_CHECKING:
    from nem.dialect.expressions import BuildFacts


class NemOptMain(xDSLOptMain):
    version_format = version_text("nem-opt").replace("{", "{{").replace("}", "}}")

    def __init__(self, args: Sequence[str] | None = None, owns_process: bool = False):
        self._parsed_nem = False  # the input at hand was built by the .nem parser
        self._owns_process = owns_process  # run as a program (`keep_until_exit`)
        # the module the .nem parser just built and its facts (`_parse` -> `_verify`)
        self._built: tuple[ModuleOp, BuildFacts] | None = None
        # mlir-opt's --split-input-file=MARKER (D-OPT-SPLIT, cli/nem/cli/opt_flags.py)
        self._argv, self._split_marker = take_split_marker(sys.argv[1:] if args is None else args)
        # Plugins are loaded before xDSL registers passes and builds the
        # argument parser, so their passes are in --help and in pipelines.
        self._plugins = _plugin_files(self._argv)
        for f in self._plugins:
            load_pass_plugin(f)
        super().__init__(description=DESCRIPTION, args=self._argv)

    def register_all_dialects(self) -> None:
        # upstream MLIR ops xDSL lacks (async.*, affine/memref DMA, linalg.softmax):
        # first, so that `affine`/`memref`/`linalg` are the extended ones
        # (frontends/nem/frontends/upstream_dialects), and lazily: a `.nem` run
        # never loads them (their modules are a tenth of nem-opt's start-up)
        for name in UPSTREAM_DIALECTS:
            self.ctx.register_dialect(name, _upstream_dialect(name))
        # xDSL's dialects and NEM's (`nem`, `async`: the `nem` xdsl.universe
        # entry point, frontends/nem/frontends/universe.py)
        for universe in universes().values():
            for name, factory in universe.all_dialects.items():
                if name not in self.ctx.registered_dialect_names:
                    self.ctx.register_dialect(name, factory)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()  # type: ignore[no-untyped-call]  # xDSL 0.74's is unannotated
        # run() parses chunk by chunk itself; this entry makes `-f nem` / `.nem`
        # valid choices for the argument parser
        self.available_frontends["nem"] = self._parse_nem_stream

    def register_all_passes(self) -> None:
        """Nothing yet: the passes are registered when a pipeline or --help
        needs them (`_register_passes`), so that a run with no pass does
        not import them all."""

    def _register_passes(self) -> None:
        if not self.available_passes:
            for name, factory in available_passes().items():
                self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        for universe in universes().values():
            for name, factory in universe.all_targets.items():
                self.available_targets.setdefault(name, factory)
        from nem.frontends.nem_text.printer import print_nem

        self.available_targets["nem"] = lambda module, out: out.write(print_nem(module))
        # `-t` omitted: .nem in -> .nem out, MLIR in -> MLIR out (decision D-OPT-TARGET)
        self.available_targets["same-as-input"] = self._same_as_input
        nemb_tool.register(self)  # -t nemb, -f nemb (cli/nem/cli/nemb_tool.py)

    def _parse_nem_stream(self, stream: IO[bytes]) -> ModuleOp:
        """The `.nem` front end as xDSL's driver calls one (run() does not)."""
        return self._parse(stream.read().decode(), self.args.input_file or "-", "nem")

    def _same_as_input(self, module: ModuleOp, out: IO[str]) -> None:
        """`-t` omitted: .nem in -> .nem out, MLIR in -> MLIR out, the very
        bytes `-t nem` or `-t mlir` prints (D-OPT-TARGET)."""
        self.args.target = "nem" if self._input_ext == "nem" else "mlir"
        try:
            out.write(self.output_resulting_program(module))
        finally:
            self.args.target = "same-as-input"

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        # every argument through `options`, which keeps the actions (D-OPT-FLAGS)
        options = OptionRecorder(arg_parser)
        super().register_all_arguments(options.as_parser())
        options.add_argument(
            "-I",
            dest="include_dirs",
            action="append",
            default=[],
            metavar="DIR",
            help="add a directory to the include / device search path",
        )
        options.add_argument(
            "--device",
            default=None,
            help="target device name (a shipped device or one found via -I)",
        )
        options.add_argument(
            "--print-device",
            default=None,
            metavar="NAME",
            help="print the resolved device NAME and exit",
        )
        options.add_argument(
            "--max-source-bytes",
            type=int,
            default=MAX_SOURCE_BYTES,
            metavar="N",
            help="read an input or include of up to N bytes "
            f"(default {MAX_SOURCE_BYTES}, D-LIMITS)",
        )
        add_error_limit_argument(options.as_parser())
        nemb_tool.add_arguments(options.as_parser())
        options.add_argument(
            "--pass-pipeline",
            default=None,
            metavar="PIPELINE",
            help="the pipeline in mlir-opt's form, "
            "'builtin.module(pass1,pass2{option=value})' (the anchor is required)",
        )
        options.add_argument(
            "--load-pass-plugin",
            action="append",
            default=[],
            metavar="FILE.py",
            help="load the passes a Python file defines "
            "(every xdsl.passes.ModulePass subclass, under its `name`)",
        )
        arg_parser.set_defaults(target="same-as-input")
        _nem_help(arg_parser, options.actions, self._pass_listing)
        accept_mlir_opt_spellings(
            arg_parser, options.actions
        )  # -split-input-file, ... (D-OPT-FLAGS)

    def _pass_listing(self) -> str:
        self._register_passes()
        return pass_listing(self._plugins)

    def setup_pipeline(self) -> None:
        """xDSL's pipeline parser, after `check_pipeline` (`builtin.module(...)`
        unwrapped, D-OPT-PIPELINE, and required by --pass-pipeline,
        D-OPT-PIPELINE-ANCHOR; `memory-spaces=0:DDR,1:L2` needs no quotes,
        D-LOW-OPT-SPACES); a bad pipeline or option is an error located in
        the string the user gave, labelled with its flag (D-OPT-PIPELINE-ERRORS)."""
        if self.args.shrink or self.args.parsing_diagnostics:
            flag = "--shrink" if self.args.shrink else "--parsing-diagnostics"
            print(f"nem-opt: error: not supported: {flag} (an xdsl-opt option)", file=sys.stderr)
            sys.exit(1)
        if self.args.passes and self.args.pass_pipeline is not None:
            print(
                "nem-opt: error: give the pipeline with -p or with --pass-pipeline, not both",
                file=sys.stderr,
            )
            sys.exit(1)
        anchored = self.args.pass_pipeline is not None
        spec = self.args.pass_pipeline if anchored else self.args.passes
        try:
            if spec or anchored:
                self._register_passes()
            self.args.passes = check_pipeline(spec or "", self.available_passes, anchored=anchored)
            super().setup_pipeline()  # type: ignore[no-untyped-call]  # xDSL 0.74's is unannotated
            self.pipeline = PassPipeline(
                self.pipeline.passes, self._input_check_skipped(self.pipeline.callback)
            )
        except NemDiagnosticError as e:
            print_diagnostics("nem-opt", e.diagnostics)
            sys.exit(1)
        except PipelineError as e:
            print(e.render("--pass-pipeline" if anchored else self._passes_flag()), file=sys.stderr)
            sys.exit(1)
        except (ArgSpecParseError, ValueError) as e:  # xDSL's own check, after ours
            flag = "--pass-pipeline" if anchored else self._passes_flag()
            print(f"nem-opt: error: {flag}: bad pass pipeline: {str(e).strip()}", file=sys.stderr)
            sys.exit(1)

    def _input_check_skipped(
        self, callback: PassPipelineCallbackType | None
    ) -> PassPipelineCallbackType:
        """xDSL's callback between passes, except that it does not verify
        IR the `.nem` parser has just built: that IR verifies by
        construction (decision D-IR-BUILD) and the NEM rules are checked on
        it before the pipeline runs; xDSL's generic verifier took a quarter
        of a large program's round trip.  The IR is verified after every
        pass, as before."""

        def check(
            previous: ModulePass | None, module: ModuleOp, following: ModulePass | None
        ) -> None:
            if callback is None:
                return
            if previous is not None or not self._parsed_nem:
                callback(previous, module, following)
                return
            skip, self.args.disable_verify = self.args.disable_verify, True
            try:
                callback(previous, module, following)  # its timer and printing, no verifier
            finally:
                self.args.disable_verify = skip

        return check

    def _passes_flag(self) -> str:
        """`-p` or `--passes`, as the command line spells it."""
        return (
            "--passes"
            if any(a.startswith("--passe") or a.split("=")[0] == "-passes" for a in self._argv)
            else "-p"
        )

    # ------------------------------------------------------------------
    def _read_input(self) -> tuple[str, str]:
        """(file name, text) of the input; `-` or no file is standard input."""
        return read_program(
            None if is_stdio(self.args.input_file) else self.args.input_file, "input"
        )

    def _input_format(self, file: str, raw: str) -> str:
        """`-f`, else the extension (`.nem`; anything else is MLIR), else on
        stdin the text's syntax (D-OPT-STDIN)."""
        if self.args.frontend:
            return str(self.args.frontend)
        if file == "<stdin>":
            from nem.frontends.nem_text.document import detect_format

            return detect_format(raw)
        return Path(file).suffix.lstrip(".") or "mlir"

    def _check_paths(self) -> None:
        """Before any work: the input is a file nem-opt may read (a FIFO
        or a device is refused, never opened), and `-o` is not a file the
        command reads, the input or an `--embed` array (D-FILE-PATHS)."""
        from nem.cli.inputs import InputError, check_output_path

        if not is_stdio(self.args.input_file):
            from nem.dialect.source_files import FileRefused, regular_file

            try:
                regular_file(self.args.input_file, "input")
            except FileRefused as e:
                print(f"nem-opt: error: {e}", file=sys.stderr)
                sys.exit(1)
        if is_stdio(self.args.output_file):
            return
        inputs = [
            self.args.input_file or "-",
            *(e.split("=", 1)[-1] for e in getattr(self.args, "embed", [])),
        ]
        try:
            check_output_path(self.args.output_file, "-o", inputs)
        except InputError as e:
            print(f"nem-opt: error: {e}", file=sys.stderr)
            sys.exit(1)

    def run(self) -> None:
        from nem.dialect.limits import source_limit
        from nem.dialect.source_files import tracking_reads

        if self.args.max_source_bytes < 1:
            print("nem-opt: error: --max-source-bytes needs N >= 1", file=sys.stderr)
            sys.exit(1)
        with (
            source_limit(self.args.max_source_bytes),
            tracking_reads(),
            error_limit("nem-opt", self.args.error_limit),
        ):  # D-CLI-ERROR-LIMIT
            self._run()

    def _run(self) -> None:
        if self.args.print_device:
            sys.exit(self._print_device(self.args.print_device))
        self._check_paths()
        nemb_tool.target_of_output(self.args)  # `-o X.nemb` writes bytecode (D-OPT-TARGET)
        nemb_tool.bytecode_flags_need_nemb(self.args)  # `--embed` with text output
        if nemb_tool.handles(self):  # bytecode in or out: cli/nem/cli/nemb_tool.py
            sys.exit(nemb_tool.run_opt(self))
        file, raw = self._read_input()
        register_source(file, raw)
        ext = self._input_format(file, raw)
        self._input_ext = ext
        marker = "#" if ext == "nem" else "//"
        chunks = [Chunk(raw)]
        if self.args.split_input_file:
            split = self._split_marker
            if split is not None and (why := check_split_marker(split)):
                print(
                    f"nem-opt: error: {why}\nfix: give a marker of 3 characters or more, or "
                    "--split-input-file alone for the default",
                    file=sys.stderr,
                )
                sys.exit(1)
            chunks, near_misses = split_input(
                raw, file, f"{marker} -----" if split is None else split
            )
            print_diagnostics("nem-opt", near_misses)  # as mlir-opt: printed, never checked
        # the separator between output chunks is written in the output's
        # comment syntax, so that .nem output splits again
        nem_out = self.args.target == "nem" or (
            self.args.target == "same-as-input" and ext == "nem"
        )
        out_marker = "#" if nem_out else "//"
        failures: list[str] = []
        failed = False
        with output_file(self.args.output_file) as out:
            for i, chunk in enumerate(chunks):
                if i > 0:
                    out.write(f"{out_marker} -----\n")
                # chunks are parsed where they are, not padded (linear work, D-OPT-SPLIT)
                diags, text = self._process(chunk.text, file, ext, (chunk.line, chunk.col))
                if self.args.verify_diagnostics:
                    exps = vd.parse_expectations(
                        chunk.text, file, marker, line_offset=chunk.line, col_offset=chunk.col
                    )
                    failures += vd.check(exps, diags, file)
                else:
                    print_diagnostics("nem-opt", diags)
                    failed |= any(d.severity == "error" for d in diags)
                # as mlir-opt: the output is printed with --verify-diagnostics too
                # (D-OPT-VERIFY-OUTPUT); a chunk that failed has none
                if text is not None:
                    out.write(text)
            for f in failures:
                print(f, file=sys.stderr)
            if failures or failed:
                sys.exit(1)  # inside the `with`: no output file is left behind

    def _process(
        self, text: str, file: str, ext: str, at: tuple[int, int] = (0, 0)
    ) -> tuple[list[Diagnostic], str | None]:
        """Parse, verify, run the pipeline and print one chunk (`at`: where
        the chunk starts in the file, see `parse_nem`, `parse_mlir_checked`)."""
        diags: list[Diagnostic] = []
        module: ModuleOp | None = None
        try:
            if ext == "nem" and _is_config_document(text, file, at):
                return diags, self._config_document(text, file, diags, at)
            from nem.dialect.gc_pause import gc_paused

            with gc_paused(self._owns_process):  # frozen before the collector resumes
                module = self._parse(text, file, ext, at)
                if self._owns_process:
                    keep_until_exit()  # the IR lives until the process ends
            names = [p.name for p in self.pipeline.passes]
            # `-p nem-verify` runs the default checks itself (its first stage);
            # a device pass in the pipeline replaces the default device check.
            if not names or names[0] != "nem-verify":
                diags += self._verify(module, file)
                if not any(d.severity == "error" for d in diags) and not {
                    "nem-verify",
                    "nem-verify-device",
                } & set(names):
                    diags += self._verify_device(module, file)
            if any(d.severity == "error" for d in diags):
                return diags, None
            from nem.passes.pass_context import pass_context

            self._parsed_nem = ext == "nem"
            run_ctx = pass_context(self.ctx, file, self.args.include_dirs, self.args.device)
            try:
                apply_pipeline(
                    with_include_dirs(self.pipeline, self.args.include_dirs), run_ctx, module
                )
            finally:
                diags += run_ctx.diagnostics
            return diags, self.output_resulting_program(module)
        except NemDiagnosticError as e:
            return diags + e.diagnostics, None
        except ParseError as e:
            from nem.frontends.upstream_dialects.mlir_input import diagnostic_from_parse_error

            return diags + [diagnostic_from_parse_error(e, file, at)], None
        except (VerifyException, DiagnosticException) as e:
            # an op verifier failing after a pass (e.g. LOOP-03 in `nem.loop`):
            # located at the first op that does not verify
            from nem.frontends.upstream_dialects.mlir_input import culprit, location_in

            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            bad = culprit(module, message) if module is not None else None
            if isinstance(e, RuleVerifyException):
                return diags + [e.diagnostic(location_in(bad, file, at))], None
            return diags + [Diagnostic("error", message, location_in(bad, file, at))], None

    def _parse(self, text: str, file: str, ext: str, at: tuple[int, int] = (0, 0)) -> ModuleOp:
        if ext == "nem":
            from nem.frontends.nem_text.parser import parse_nem_facts

            # a chunk may be empty, a file may not (D-DOC-EMPTY)
            chunk = bool(self.args.split_input_file)
            module, facts = parse_nem_facts(text, file, at=at, chunk=chunk)
            self._built = (module, facts)  # for `_verify` of this module as built
            return module
        # located diagnostics for every failure, bounded work (D-LIMITS)
        from nem.frontends.upstream_dialects.mlir_input import parse_mlir_checked

        return parse_mlir_checked(self.ctx, text, file, not self.args.no_implicit_module, at=at)

    def _verify(self, module: ModuleOp, file: str) -> list[Diagnostic]:
        from nem.dialect.ops import programs
        from nem.dialect.verifier import verify_program

        # the `.nem` parser's facts of the module it just built, which `_process`
        # verifies before any pass runs: the verifier skips what the parser
        # established (D-BC-SEED, the same diagnostics)
        built, self._built = self._built, None
        progs = list(programs(module))
        if built is not None and built[0] is module and len(progs) == 1:
            return verify_program(progs[0], facts=built[1])
        return [d for p in progs for d in verify_program(p)]

    def _verify_device(self, module: ModuleOp, file: str) -> list[Diagnostic]:
        """Device legality against the program's target (directive or --device)."""
        from nem.devices.program_device import check_device_validity, program_device
        from nem.dialect.ops import programs

        diags: list[Diagnostic] = []
        for prog in programs(module):
            device = program_device(prog, file, self.args.include_dirs, self.args.device)
            if device is not None:
                diags += [*device.warnings, *check_device_validity(prog, device)]
        return diags

    def _config_document(
        self, text: str, file: str, diags: list[Diagnostic], at: tuple[int, int] = (0, 0)
    ) -> str:
        from nem.devices.device_resolver import resolve_device, scope_for_document
        from nem.frontends.nem_text.config_parser import parse_config_document
        from nem.frontends.nem_text.config_printer import print_config_document

        doc = parse_config_document(text, file, at=at)
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


DESCRIPTION = """\
NEM modular optimizer driver: parse .nem or MLIR, verify it, run a pass
pipeline and print .nem or MLIR (mlir-opt's conventions: '-' is stdin or
stdout, --pass-pipeline, --load-pass-plugin, --verify-diagnostics; long
options take one dash too, -split-input-file).

examples:
  nem-opt prog.nem -p nem-verify                   every check, staged
  nem-opt prog.nem --pass-pipeline='builtin.module(nem-fold-consts)' -o -
  nem-opt tiled.mlir -p 'lower-to-nem{device=npm_lite remarks=true}' -t nem
  cat prog.nem | nem-opt - --load-pass-plugin my_pass.py -p my-pass"""

_HELP = {
    "input_file": "input file; '-' or none reads standard input (.nem or MLIR, "
    "told apart from the text)",
    "frontend": "input format: nem or mlir (default: by extension, .nem or MLIR; "
    "on standard input, from the text)",
    "target": "output format: nem, mlir or nemb (default: the input's format)",
    "output_file": "output file ('-': standard output, the default); written only when "
    "nem-opt succeeds",
    "passes": "pass pipeline: 'pass1,pass2{option=value ...}' (passes listed below)",
    "verify_diagnostics": "check the diagnostics against the input's expected-error, "
    "-warning, -remark and -note comments and their -re forms "
    "('# expected-error@+1 {{...}}' in .nem, '// ...' in MLIR) "
    "instead of printing them; "
    "the output is printed as usual; exit 1 on any mismatch",
    "split_input_file": "split the input at '# -----' (.nem) or '// -----' (MLIR), "
    "wherever it occurs, as mlir-opt does (--split-input-file=MARKER: "
    "at MARKER), and process each chunk separately; the outputs are "
    "separated by '# -----' or '// -----' in the output's syntax",
    "print_op_generic": "print MLIR output in generic form (--mlir-print-op-generic too)",
    "version": "print the version of nem-opt and of what it runs on, and exit",
    "disable_verify": "skip xDSL's IR verifier (the NEM rules are still checked)",
    "allow_unregistered_dialect": "allow ops of unregistered dialects in MLIR input",
}


def _nem_help(
    parser: argparse.ArgumentParser,
    actions: Sequence[argparse.Action],
    listing: Callable[[], str],
) -> None:
    """nem-opt's own --help: its description, correct texts for the options
    it inherits from xdsl-opt (among `actions`, the parser's), and the passes
    by origin (NEM's first), listed when the help is printed (`listing`
    imports every pass)."""
    parser.prog = "nem-opt"
    # a fixed width, so that the help reads the same in a terminal, a pipe and a test
    parser.formatter_class = lambda prog: argparse.RawDescriptionHelpFormatter(
        prog, max_help_position=30, width=100
    )
    parser.description = DESCRIPTION
    format_help = parser.format_help

    def help_with_passes() -> str:
        parser.epilog = listing()
        return format_help()

    # xDSL makes the parser: its help is completed on this instance
    parser.format_help = help_with_passes  # type: ignore[method-assign]
    for action in actions:
        if action.dest in _HELP:
            action.help = _HELP[action.dest].replace("%", "%%")
        elif action.dest in ("shrink", "parsing_diagnostics"):
            action.help = argparse.SUPPRESS  # xdsl-opt's; nem-opt rejects them


def pass_listing(plugins: Sequence[str] = ()) -> str:
    """The passes for --help: NEM's with their one-line docs and options,
    then plugin files', entry points', and xDSL's names."""

    def entry(name: str, cls: type[ModulePass], origin: str = "") -> list[str]:
        head = f"  {name}{origin}"
        summary = pass_summary(cls) or "(no description)"
        lines = [f"{head:<24}{summary}" if len(head) < 24 else f"{head}\n{'':<24}{summary}"]
        for o in pass_options(cls):
            spec = f"      {o.name}=<{o.type}>"
            default = f" (default: {o.default})" if o.default else ""
            lines.append(
                f"{spec:<30}{o.doc}{default}"
                if len(spec) < 30
                else f"{spec}\n{'':<30}{o.doc}{default}"
            )
        return lines

    from nem.passes import PASSES

    out = [
        (
            "NEM passes (-p 'pass1,pass2{option=value ...}' or "
            "--pass-pipeline='builtin.module(...)'):"
        )
    ]
    for name in sorted(PASSES):
        out += entry(name, PASSES[name])
    if PLUGIN_PASSES:
        out += ["", "passes from plugins (--load-pass-plugin):"]
        for name, (cls, file) in sorted(PLUGIN_PASSES.items()):
            out += entry(name, cls, f" ({file})")
    by_universe = universe_passes()
    for uname, passes in sorted(by_universe.items()):
        if uname == "xdsl" or not passes:
            continue
        out += ["", f"passes of the installed xdsl.universe entry point '{uname}':"]
        for name, factory in sorted(passes.items()):
            try:
                out += entry(name, factory())
            except Exception as e:  # noqa: BLE001 - listed, reported when used
                out.append(f"  {name:<22}(cannot be loaded: {type(e).__name__}: {e})")
    xdsl_names = sorted(n for n in by_universe.get("xdsl", {}) if n not in PASSES)
    if xdsl_names:
        out += ["", "xDSL passes (xdsl.transforms, documented at https://xdsl.dev):"]
        line = " "
        for n in xdsl_names:
            if len(line) + len(n) + 2 > 100:
                out.append(line.rstrip(","))
                line = " "
            line += f" {n},"
        out.append(line.rstrip(","))
    return "\n".join(out)


def _plugin_files(argv: Sequence[str]) -> list[str]:
    """The `--load-pass-plugin FILE` / `--load-pass-plugin=FILE` values of
    the command line, one dash or two (read before the argument parser
    exists)."""
    files = []
    it = iter(argv)
    for a in it:
        flag, eq, value = a.partition("=")
        if flag in ("--load-pass-plugin", "-load-pass-plugin"):
            files.append(value if eq else next(it, ""))
    return [f for f in files if f]


def _is_config_document(text: str, file: str, at: tuple[int, int] = (0, 0)) -> bool:
    """A file is a config document when, after its includes, it holds only
    `type_family` / `device NAME [extends P] {...}` declarations and no program
    statement or header (docs/conformance.md Gaps E, decision D-DOC-KIND)."""
    from nem.frontends.nem_text.document import is_config_document

    return is_config_document(text, file, at)


def run(argv: Sequence[str] | None = None, owns_process: bool = False) -> None:
    """nem-opt on `argv` (the command line when None); exits with its
    status.  `owns_process`: run as a program, whose process ends next."""
    from nem.cli.entry import tolerate_closed_pipes

    tolerate_closed_pipes()
    try:
        NemOptMain(args=argv, owns_process=owns_process).run()
    except BrokenPipeError:  # a binary output (-t nemb -o -) cut short: incomplete
        sys.exit(1)
    except KeyboardInterrupt:
        print("nem-opt: interrupted", file=sys.stderr)
        sys.exit(130)
    except MemoryError:
        from nem.cli.entry import out_of_memory

        print(out_of_memory("nem-opt"), file=sys.stderr)
        sys.exit(1)
    except ArgSpecParseError as e:  # xDSL 0.74: a BaseException (docs/upstream-reports.md)
        detail = " ".join(line.strip() for line in str(e).strip().splitlines()[-3:])
        print(f"nem-opt: error: -t/-p: bad target or pass specification: {detail}", file=sys.stderr)
        sys.exit(1)
    except NemDiagnosticError as e:  # an input that cannot be read (D-LIMITS)
        print_diagnostics("nem-opt", e.diagnostics)
        sys.exit(1)
    except PluginError as e:  # the plugin's problem, not nem-opt's
        print(f"nem-opt: error: {e}", file=sys.stderr)
        sys.exit(1)
    except OSError as e:  # an input or output file that cannot be opened
        print(f"nem-opt: error: cannot open {e.filename}: {e.strerror}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # a bug, never a user error: say so without a traceback
        print(
            f"nem-opt: internal error: {type(e).__name__}: {e}\n"
            "This is a bug in nem-opt; rerun with NEM_TRACEBACK=1 for the traceback.",
            file=sys.stderr,
        )
        if os.environ.get("NEM_TRACEBACK"):
            raise
        sys.exit(2)
