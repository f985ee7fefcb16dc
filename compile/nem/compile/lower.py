"""The `lower` stage: tiled MLIR -> verified `.nem` (xDSL).

The tiled program (upstream's printed MLIR) is parsed with xDSL plus the
upstream ops it lacks (`nem.frontends.upstream_dialects`), the entry
function's arguments get the interface's names (upstream prints `%argN`;
the lowering names DDR buffers after the arguments, D-LOW-BUF), and
`lower-to-nem` runs with the device and the memory-space map of the
compile, then `nem-share-buffers{level=L1 over-capacity-only=true}` lets the
tiles of nests that run one after the other share an L1 that all of them
would overflow (D-LOW-SHARE).  The printed `.nem` is then parsed back and checked with every
stage of `nem-verify` on the target, exactly as `nem-opt prog.nem -p
nem-verify` would: an error or a warning fails the compile.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

import numpy as np
from xdsl.context import Context

from nem.compile.errors import AVOIDING_OPTIONS

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from nem.analysis.buffer_lifetimes import Plan as PackingPlan
    from nem.analysis.race_memos import ShapeMemos
    from nem.compile.options import CompileOptions
    from nem.dialect.diagnostics import Diagnostic, SourceLoc
    from nem.dialect.ops import ProgramOp
    from nem.passes.pass_context import NemPassContext
    from nem.passes.share_buffers import ShareBuffersPass

T = TypeVar("T")


def xdsl_context() -> Context:
    """The dialects `nem-opt` registers: xDSL's, NEM, and the upstream ops xDSL lacks."""
    from xdsl.universe import Universe

    from nem.frontends.upstream_dialects import register_mlir_dialects

    ctx = Context(allow_unregistered=False)
    register_mlir_dialects(ctx)  # first: affine/memref with the upstream ops
    # xDSL's dialects and NEM's (the `nem` xdsl.universe entry point)
    for name, factory in Universe.get_multiverse().all_dialects.items():
        if name not in ctx.registered_dialect_names:
            ctx.register_dialect(name, factory)
    return ctx


class Steps(Protocol):
    """Runs one step of the stage (its name, the work) and returns its result:
    the driver times it and reports it as it ends (`nem-compile -v`)."""

    def __call__(self, name: str, work: Callable[[], T], /) -> T: ...


class Verified(NamedTuple):
    """The `.nem` program as `nem-verify` read it back and accepted: what
    `nem-compile -o FILE.nemb` encodes (`nemb_bytes`) rather than parse the
    text a third time (DenseNet-121: 4.6 s of a 110 s compile, session 50)."""

    module: ModuleOp
    file: str
    """The file name its locations carry."""


def _untimed(name: str, work: Callable[[], T]) -> T:
    return work()


def lower_and_verify(
    text: str,
    func_name: str,
    arg_names: Sequence[str],
    device: str,
    memory_spaces: str,
    file: str,
    options: CompileOptions,
    step: Steps = _untimed,
    progress: Callable[[str, int, int], None] | None = None,
    statements: list[tuple[int, int] | None] | None = None,
) -> tuple[str, list[str], dict[tuple[int, int], str], dict[str, np.ndarray], Verified | None]:
    """(the `.nem` program, the lowering's remarks, the (line, col) in `text`
    of each nest the lowering did not raise with why, the initial contents of the
    buffers made from `memref.global`s: constant tensors the program keeps,
    D-COMPILE-CONSTS; the program as nem-verify read it back, None without
    verification); raises CompileError.  The escaped nests are read from
    the lowering's `EscapeRemark`s by type and location, not from their
    wording.  Each pass runs through `step`; long ones tell `progress` how
    far they are.  `statements`, when given, receives the (line, col) in
    `text` of the op each statement of the `.nem` was lowered from, in
    `printed_statements` order (None: no position), which names its ONNX
    node in the `.nemb` (D-BC-NODES)."""
    from xdsl.dialects.func import FuncOp

    from nem.compile.errors import CompileError
    from nem.dialect.diagnostics import register_source
    from nem.frontends.nem_text.printer import print_nem
    from nem.frontends.upstream_dialects import parse_mlir
    from nem.passes.lowering.driver import EscapeRemark
    from nem.passes.pass_context import pass_context, shape_memos

    ctx = xdsl_context()
    # diagnostics quote the text lowered, not a file of that name on disk
    # (written by an earlier --save-temps run, or none)
    register_source(file, text)
    try:
        module = step("parse", lambda: parse_mlir(ctx, text, file))
    except Exception as e:  # xDSL ParseError and friends: the op xDSL cannot take
        lines = str(e).strip().splitlines()
        raise CompileError(
            "lower",
            f"{lines[0]}: error: not supported: the tiled program does "
            "not parse in xDSL 0.74 (docs/compile.md lists the known cases): "
            + " ".join(ln.strip() for ln in lines[-1:])
            + "\n"
            + "\n".join(lines[1:-1]),
        ) from e
    for op in module.walk():
        if isinstance(op, FuncOp) and op.sym_name.data == func_name:
            for arg, name in zip(op.body.block.args, arg_names):
                arg.name_hint = name
    remarks: list[str] = []
    run_ctx = pass_context(ctx, file, options.include_dirs, device)
    run_ctx.progress = progress
    with tempfile.TemporaryDirectory() as scratch:
        consts = os.path.join(scratch, "constants.npz")
        _lower(module, run_ctx, device, memory_spaces, func_name, options, consts, step)
        constants: dict[str, np.ndarray] = {}
        if os.path.exists(consts):
            with np.load(consts) as npz:
                constants = {k: npz[k] for k in npz.files}
    remarks += [d.render().replace(consts, "the weights sidecar") for d in run_ctx.diagnostics]
    escaped = {
        (d.loc.line, d.loc.col): escape_reason(d.message)
        for d in run_ctx.diagnostics
        if isinstance(d, EscapeRemark) and d.loc is not None
    }
    nem = step("print", partial(print_nem, module))
    printed = _printed(module)
    if statements is not None:
        statements[:] = [
            (at.line, at.col) if at is not None and at.file == file else None for _, at in printed
        ]
    # the lowered module is not needed past this point (its statements' names
    # and origins are): freed before the verification parses the text back,
    # the two are never alive at once (issue 30: a 10,000-node chain)
    memos = shape_memos(run_ctx)  # the lowering's answers by shape (D-HAZ-SYMBOLIC)
    del module, run_ctx
    _collect()
    verified = None
    if options.verify:
        verified = step(
            "nem-verify",
            lambda: verify_nem(
                nem,
                file.removesuffix(".tile.mlir") + ".nem",
                device,
                options.include_dirs,
                printed,
                memos,
            ),
        )
    return nem, remarks, escaped, constants, verified


def _collect() -> None:
    """Free the IR dropped so far: the stages run with the cyclic collector
    paused (`Driver.timed`, D-RT-GC) and an IR is all reference cycles, so
    without a collection the lowered module (and every op the rewrites of
    the parsed tiled program replaced) stays allocated until the stage
    ends, or, in `nem-compile`, until the process exits.  Collected once,
    before the verification parses the text back: linear in the program,
    about 3% of the compile; the verification's peak holds one module, not
    two (D-RT-GC; docs/compile.md, "Memory and graph size").  The module
    parsed back is the compile's result (`Verified`, which the `.nemb`
    encodes), and nothing else the verification makes is a cycle worth a
    collection: the parser's tokens die with it (`AttributeParser._float_expr`)."""
    import gc

    gc.collect()


def _printed(module: ModuleOp) -> list[tuple[str, SourceLoc | None]]:
    """The name and location of each printed statement's op, in order
    (`printed_statements`): what the verification's diagnostics are
    located by (D-COMPILE-VERIFY-LOC) and the `.nemb` names nodes by
    (D-BC-NODES), kept without the module."""
    from nem.dialect.diagnostics import SourceLoc
    from nem.frontends.nem_text.printer import printed_statements

    return [(op.name, SourceLoc.of(op)) for op in printed_statements(module)]


def _lower(
    module: ModuleOp,
    run_ctx: NemPassContext,
    device: str,
    memory_spaces: str,
    func_name: str,
    options: CompileOptions,
    consts: str,
    step: Steps,
) -> None:
    """`lower-to-nem` (pass by pass) then `nem-share-buffers` on `module`;
    the initial contents of its globals go to `consts` (an .npz)."""
    from nem.compile.errors import CompileError
    from nem.dialect.diagnostics import NemDiagnosticError
    from nem.passes.dce import OnePassDeadCodeElimination
    from nem.passes.lowering.passes import CheckLoweredPass, LowerToNemPass
    from nem.passes.share_buffers import ShareBuffersPass
    from nem.passes.split_transfers import SplitTransfersPass
    from nem.passes.synthesize_deps import SynthesizeDepsPass

    try:
        # the summary remark is opt-in (D-OPT-REMARKS); nem-compile -v shows it
        # the transform route's tiles are staged in buffers allocated in the tile
        # loops' bodies: double-buffered by the lowering (D-LOW-PIPE-BODY)
        lower = LowerToNemPass(
            device=device,
            memory_spaces=(memory_spaces,),
            entry=func_name,
            remarks=True,
            include_dirs=tuple(options.include_dirs),
            weights=consts,
            pipeline_tiles=options.pipeline and options.route == "transform",
            split_transfers=options.split_transfers,
            jam_engine_loops=options.jam,
        )
        # every nest's tiles fit L1 (D-COMPILE-TILES), all nests' together need not:
        # then tiles of nests that run one after the other share L1 (D-LOW-SHARE)
        share = ShareBuffersPass(
            level="L1",
            over_capacity_only=True,
            device=device,
            remarks=True,
            include_dirs=tuple(options.include_dirs),
        )
        plans = None  # the packing computed for the L1 estimate, reused by the pack
        split = None
        for p in lower.pipeline():
            if isinstance(p, SplitTransfersPass):
                split = p  # on the program in its final order, after the packing's
                continue
            if options.verify and isinstance(p, CheckLoweredPass) and not p.declarations_only:
                # the printed program's nem-verify checks every rule this pass
                # would, and more, each at its origin (D-COMPILE-ONE-FINAL-CHECK)
                continue
            if isinstance(p, SynthesizeDepsPass):
                # the ordering adds deps and waits, never a use of a buffer: whether
                # L1 fits once packed is known now, and a program that will not fit
                # is tiled again without being ordered first (D-COMPILE-L1)
                step("dce", partial(OnePassDeadCodeElimination().apply, run_ctx, module))
                plans = step(
                    "L1 estimate",
                    lambda: _check_packed_l1(module, share, device, options.include_dirs),
                )
            step(p.name, partial(p.apply, run_ctx, module))
        # the same packing unless a buffer's uses moved since (`replan` checks)
        packed = step(share.name, lambda: share.pack(run_ctx, module, plans))
        # a program that still overflows L1 is tiled again: checked before ordering
        _check_l1(module, device, options.include_dirs)
        for pack in packed:
            step(f"{share.name} (ordering)", pack.order)
        if split is not None:  # D-NEM-SPLIT-TRANSFERS
            step(split.name, partial(split.apply, run_ctx, module))
    except NemDiagnosticError as e:
        if options.route == "affine":
            for d in e.diagnostics:  # a partial tile the affine route cannot lower
                if d.fix and d.fix.endswith("tile sizes that divide the iteration space"):
                    d.fix += (
                        " (--tile-sizes), or use --route transform, which peels "
                        "partial tiles before staging them"
                    )
        raise CompileError.of("lower", e.diagnostics) from e


class OverCapacity(Exception):
    """The lowered program's L1 buffers do not fit (DEV-16) although each
    op's tiles were sized to fit (D-COMPILE-L1): the driver tiles again with
    smaller budgets.  `ratio` is the worst footprint over capacity."""

    def __init__(self, ratio: float, message: str):
        super().__init__(message)
        self.ratio = ratio


def _check_l1(module: ModuleOp, device: str, include_dirs: Sequence[str]) -> None:
    """DEV-16 on the lowered program's L1 levels, the checker's own rule
    (`nem.analysis.capacity`), before the program is printed and verified."""
    from nem.analysis.capacity import capacity, check_capacity, memory_maps
    from nem.devices.device_lookup import find_device
    from nem.dialect.ops import ProgramOp
    from nem.dialect.semantics.layout import footprint

    dev = find_device(device, tuple(include_dirs))
    for prog in (op for op in module.walk() if isinstance(op, ProgramOp)):
        errors = [d for d in check_capacity(prog, dev) if "L1" in d.message]
        if not errors:
            continue
        ratio = max(
            footprint(placed) / (capacity(dev, key) or 1)
            for key, placed in memory_maps(prog).items()
            if key.startswith("L1")
        )
        raise OverCapacity(ratio, "\n".join(d.render() for d in errors))


def _check_packed_l1(
    module: ModuleOp, share: ShareBuffersPass, device: str, include_dirs: Sequence[str]
) -> dict[ProgramOp, PackingPlan]:
    """DEV-16 on the L1 levels as `share` will pack them (D-LOW-SHARE), asked
    of the unordered program (`ShareBuffersPass.estimate`).  Returns each
    program's packing plan, for `share.pack` to reuse (issue 30)."""
    from nem.analysis.capacity import capacity
    from nem.devices.device_lookup import find_device
    from nem.dialect.ops import ProgramOp

    dev = find_device(device, tuple(include_dirs))
    plans: dict[ProgramOp, PackingPlan] = {}
    for prog in (op for op in module.walk() if isinstance(op, ProgramOp)):
        plans[prog], needs = share.estimate(prog, dev)
        over = [
            (need / cap, key, need, cap)
            for key, need in needs.items()
            if key.startswith("L1") and (cap := capacity(dev, key)) and need > cap
        ]
        if over:
            ratio = max(o[0] for o in over)
            raise OverCapacity(
                ratio,
                "\n".join(
                    f"error: buffers at {key} span {need} bytes once packed (D-LOW-SHARE) but "
                    f"device '{dev.name}' has l1_size_bytes = {cap} [DEV-16]"
                    for _, key, need, cap in over
                ),
            )
    return plans


def escape_reason(message: str) -> str:
    """Why a nest was not raised, from its `EscapeRemark`'s message: the text
    after `...escape-hatch task (compute op="mlir.kernel"): `, else the whole
    message (a warning quotes it; the FLOP count reads only the location)."""
    head, sep, why = message.partition('"mlir.kernel"): ')
    return why if sep else message


def verify_nem(
    nem: str,
    file: str,
    device: str,
    include_dirs: Sequence[str] = (),
    lowered: Sequence[tuple[str, SourceLoc | None]] | None = None,
    memos: ShapeMemos | None = None,
) -> Verified:
    """`nem-opt FILE -p nem-verify` on the text: any error or warning raises;
    returns the program read back (`Verified`).
    `lowered`: the name and location of each statement's op in the module
    `nem` was printed from (`_printed`); each diagnostic is then located
    where its statement's op was lowered from (D-COMPILE-VERIFY-LOC), its
    `.nem` line kept as a note: FILE is written only when the compile
    succeeds.  `memos`: the lowering's race answers by shape
    (`shape_memos`), which the verification looks up instead of deciding
    again."""
    from nem.compile.errors import CompileError
    from nem.dialect.diagnostics import NemDiagnosticError, register_source
    from nem.dialect.limits import own_source
    from nem.frontends.nem_text.parser import parse_nem_facts
    from nem.passes import PASSES
    from nem.passes.pass_context import BUILT_FACTS, SHAPE_MEMOS, pass_context

    register_source(file, nem)
    ctx = pass_context(xdsl_context(), file, include_dirs, device)
    if memos is not None:  # every pair is still checked; decided shapes are looked up
        ctx.cache[SHAPE_MEMOS] = memos
    module = None
    try:
        with own_source(nem):
            module, facts = parse_nem_facts(nem, file)
        # the static rules take what the parser established (D-BC-SEED)
        ctx.cache[BUILT_FACTS] = (module.ops.first, facts)
        PASSES["nem-verify"]().apply(ctx, module)
        diags, what = ctx.diagnostics, "fails nem-verify (a warning fails the compile)"
    except NemDiagnosticError as e:
        diags, what = e.diagnostics, "fails nem-verify"
    if not diags:
        assert module is not None
        return Verified(module, file)
    at = _statement_origins(module, lowered, file) if module is not None and lowered else {}
    raise CompileError.of(
        "lower", [_relocated(d, f"lowered NEM program {what}", at) for d in diags]
    )


def _statement_origins(
    parsed: ModuleOp, lowered: Sequence[tuple[str, SourceLoc | None]], file: str
) -> dict[int, SourceLoc]:
    """Line of the printed `.nem` -> the location of the lowered op printed
    there (the tiled program's op it was lowered from), matching the
    statements of the text read back with those of `lowered` (`_printed`)
    one by one (`printed_statements`); {} should they differ (not a round
    trip)."""
    from nem.dialect.diagnostics import SourceLoc
    from nem.frontends.nem_text.printer import printed_statements

    read = list(printed_statements(parsed))
    if [o.name for o in read] != [name for name, _ in lowered]:
        return {}
    at: dict[int, SourceLoc] = {}
    for back, (_, origin) in zip(read, lowered):
        line = SourceLoc.of(back)
        if line is not None and line.file == file and origin is not None:
            at.setdefault(line.line, origin)
    return at


def _relocated(d: Diagnostic, what: str, at: dict[int, SourceLoc]) -> Diagnostic:
    """`d` (about the printed `.nem`) at the origin of its statement, the
    `.nem` position a note; as it was, said of the lowered program, when
    its line has no origin."""
    from nem.dialect.diagnostics import Diagnostic

    origin = at.get(d.loc.line) if d.loc is not None else None
    notes = list(d.notes)
    if d.fix:
        notes.append(Diagnostic("note", f"the rule's advice to NEM written by hand: {d.fix}"))
    if origin is None:
        return Diagnostic(d.severity, f"{what}: {d.message}", d.loc, d.rule, OWN_OUTPUT_FIX, notes)
    note = Diagnostic(
        "note", "in the lowered NEM program (written only when the compile succeeds)", d.loc
    )
    return Diagnostic(
        d.severity, f"{what}: {d.message}", origin, d.rule, OWN_OUTPUT_FIX, [*notes, note]
    )


OWN_OUTPUT_FIX = (
    "nem-compile made this program, and its final check rejects it: unless the source itself "
    "does what the rule forbids, this is a defect of nem-compile, not of the source; report it "
    f"with the source. Options that lower differently may avoid it: {AVOIDING_OPTIONS}"
)
"""The fix line of a diagnostic of the compile's final `nem-verify`
(D-COMPILE-VERIFY-LOC): the rule's own fix speaks to someone writing NEM by
hand ("add @memmove or use disjoint regions"), which the user of
nem-compile is not; it follows as a note (an outside user, session 60)."""
