"""`nem.compile`: ONNX or linalg-on-tensors MLIR -> verified NEM, in one call.

    from nem.compile import compile_onnx
    result = compile_onnx("model.onnx", device="npm_pro_x1")
    open("model.nem", "w").write(result.nem)
    result.save_weights("model.weights.npz")

The stages (`STAGES`: import, bufferize, tile, lower) and their options are
those of `nem-compile` (docs/compile.md).  Needs the `mlir` extra (upstream
MLIR Python bindings) and, for ONNX input, the `onnx` package.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import onnx
    from mlir import ir

    from nem.compile.pipeline import Driver
    from nem.dialect.device_model import Device
    from nem.frontends.onnx.graph import ImportedModel

from nem.compile.errors import CompileError
from nem.compile.pipeline import (
    STAGE_NAMES,
    STAGES,
    CompileOptions,
    CompileResult,
    Interface,
    Progress,
    Stage,
    StageResult,
)

__all__ = [
    "STAGES",
    "STAGE_NAMES",
    "CompileError",
    "CompileOptions",
    "CompileResult",
    "Interface",
    "Stage",
    "StageResult",
    "compile_mlir",
    "compile_onnx",
    "missing_extra",
]


def missing_extra() -> str | None:
    """Why nem-compile cannot run here (a missing optional dependency), or None."""
    import importlib.util

    if importlib.util.find_spec("mlir") is None or importlib.util.find_spec("mlir.ir") is None:
        return (
            "nem-compile needs the upstream MLIR Python bindings (the 'mlir' extra): "
            "pip install 'nem-toolchain[mlir]' (in a checkout: pip install -e '.[mlir]')"
        )
    return None


def _options(options: CompileOptions | None, kw: dict[str, Any]) -> CompileOptions:
    """`options` with `kw` applied, each value checked (a TypeError or
    ValueError naming the option, docs/python-api.md): `kw` is typed `Any`
    (`compile_onnx(**kw)`), its values are checked here at run time."""
    from dataclasses import replace

    from nem.dialect.arguments import check_type

    if options is not None:
        check_type("compile", "options", options, CompileOptions, "a CompileOptions or None")
    if isinstance(kw.get("bind"), Mapping):
        kw["bind"] = tuple(kw["bind"].items())
    opts = replace(options or CompileOptions(), **kw)
    check_type("compile", "bind", opts.bind, tuple, "a mapping of input names to arrays")
    if not all(isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) for e in opts.bind):
        raise ValueError(f"compile: bind must map input names to arrays, not {opts.bind!r}")
    if opts.tile_sizes is not None:
        check_type(
            "compile",
            "tile_sizes",
            opts.tile_sizes,
            (tuple, list),
            "a tuple of positive ints or None",
        )
        if not opts.tile_sizes or any(
            isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in opts.tile_sizes
        ):
            raise ValueError(
                f"compile: tile_sizes must be positive ints, not {tuple(opts.tile_sizes)!r}"
            )
    check_type("compile", "origins", opts.origins, bool, "a bool")
    check_type("compile", "located_temps", opts.located_temps, bool, "a bool")
    check_type(
        "compile",
        "op_tile_sizes",
        opts.op_tile_sizes,
        tuple,
        "a tuple of (op key, tile sizes) pairs",
    )
    for entry in opts.op_tile_sizes:
        if not (
            isinstance(entry, tuple)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], tuple)
            and entry[1]
            and all(type(t) is int and t >= 1 for t in entry[1])
        ):
            raise ValueError(
                f"compile: op_tile_sizes entries must be (op key, positive ints), not {entry!r}"
            )
    check_type(
        "compile", "op_l1_scales", opts.op_l1_scales, tuple, "a tuple of (op key, share) pairs"
    )
    for share in opts.op_l1_scales:
        if not (
            isinstance(share, tuple)
            and len(share) == 2
            and isinstance(share[0], str)
            and type(share[1]) is float
            and 0 < share[1] <= 1
        ):
            raise ValueError(
                f"compile: op_l1_scales entries must be (op key, share in (0, 1]), not {share!r}"
            )
    for name in ("engines", "max_nodes", "max_model_bytes"):
        value = getattr(opts, name)
        if value is not None:
            check_type("compile", name, value, int, "a positive int")
            if value < 1:
                raise ValueError(f"compile: {name} must be a positive int, not {value}")
    return opts


def _stem(path: str, stem: str | None) -> str:
    return stem or (path.rsplit(".", 1)[0] if "." in Path(path).name else path)


def compile_onnx(
    model: str | Path | onnx.ModelProto,
    options: CompileOptions | None = None,
    progress: Progress | None = None,
    stem: str | None = None,
    **kw: Any,
) -> CompileResult:
    """Compile an ONNX model (path or `onnx.ModelProto`); keyword arguments
    override `options` fields (`device=`, `tile_sizes=`, `pipeline=`, ...).
    Diagnostics of the lowering name `<stem>.tile.mlir` (the tile stage's
    text, which `nem-compile --save-temps` writes); `stem` defaults to the
    model's path without its suffix."""
    import importlib.util

    from nem.compile.pipeline import Driver

    opts = _options(options, kw)
    if importlib.util.find_spec("onnx") is None:
        raise CompileError("import", "ONNX input needs the 'onnx' package: pip install onnx")
    import onnx

    from nem.dialect.arguments import check_type
    from nem.frontends.onnx.locations import with_fused

    check_type(
        "compile_onnx",
        "model",
        model,
        (str, Path, onnx.ModelProto),
        "a path (str or Path) or an onnx.ModelProto",
    )
    file = str(model) if isinstance(model, (str, Path)) else "<model>"
    driver = Driver(opts, progress)
    holder = {}

    def do_import() -> str:
        holder["m"] = import_model(model, opts, driver.device)
        return str(holder["m"].module)

    driver.timed("import", do_import, lambda: holder["m"].module)
    im = holder["m"]
    iface = Interface(
        [(p.name, p.shape, p.dtype) for p in im.inputs],
        im.weights,
        [(p.name, p.shape, p.dtype) for p in im.outputs],
        {p.name: p.onnx_name for p in [*im.inputs, *im.outputs]},
        {p.name: p.onnx_dtype for p in [*im.inputs, *im.outputs] if p.onnx_dtype is not None},
    )
    tile_file = _stem(file, stem) + ".tile.mlir"
    with im.context:
        driver.upstream(im.module, im.func_name)
        try:
            nem, remarks = driver.lower(im.func_name, iface.arg_names, tile_file)
        except CompileError as e:
            raise _at_origin(e, tile_file, driver, model=file) from e
    iface.weights.update(driver.constants)
    notes = [f"{file}: remark: {n}" for n in im.notes]  # what preparing the model did
    return CompileResult(
        nem,
        iface,
        im.func_name,
        driver.results,
        notes + remarks,
        driver.memory_spaces(),
        driver.flops,
        with_fused(driver.origins, im.fused),
        im.warnings + _warnings(file, driver),
        _located(tile_file, driver, model=file),
        driver.verified,
    )


def import_model(
    model: str | Path | onnx.ModelProto, opts: CompileOptions, device: Device
) -> ImportedModel:
    """The `import` stage on an ONNX model for `device` (an `ImportedModel`)."""
    from nem.compile.target import softmax_types
    from nem.frontends.onnx import OnnxImportError, import_onnx

    try:
        return import_onnx(
            model,
            softmax_types=softmax_types(device),
            simplify=opts.simplify,
            demote_f64=opts.demote_f64,
            demote_i64=opts.demote_i64,
            max_nodes=opts.max_nodes,
            max_model_bytes=opts.max_model_bytes,
            bind=dict(opts.bind),
        )
    except OnnxImportError as e:
        raise CompileError("import", e.render()) from e


def _at_origin(
    e: CompileError,
    tile_file: str,
    driver: Driver,
    source: str | None = None,
    model: str | None = None,
) -> CompileError:
    """A lower-stage error led by the ONNX node(s) of the tiled ops it is
    located at (D-COMPILE-LOC), or, for `.mlir` input, by their position in
    `source`, the user's file (D-COMPILE-MLIR-LOC); one at an op of no node
    by `model`: the tiled program is written only with --save-temps, the
    model is what its author has."""
    if e.stage != "lower":
        return e
    return CompileError("lower", _located(tile_file, driver, source, model)(str(e)))


def _located(
    tile_file: str, driver: Driver, source: str | None = None, model: str | None = None
) -> Callable[[str], str]:
    """`name_nodes` on lines of the lower stage located in `tile_file`
    (the identity when the compile never tiled); the tiled module is printed
    with its locations when called, not before (D-COMPILE-LOC)."""
    from nem.frontends.onnx.locations import name_nodes

    plain = driver.stage_text("tile")
    if plain is None or driver.tiled is None:
        return lambda text: text

    def locate(text: str) -> str:
        return name_nodes(text, tile_file, plain, driver.tiled_located(), source, model)

    return locate


def compile_mlir(
    source: str | Path,
    options: CompileOptions | None = None,
    progress: Progress | None = None,
    func_name: str | None = None,
    stem: str | None = None,
    **kw: Any,
) -> CompileResult:
    """Compile linalg on tensors (a `.mlir` path or its text): the entry is
    `func_name` or the first public `func.func`; its argument names as
    written name the buffers, results become `result0`, `result1`, ..."""
    from mlir import ir

    from nem.compile.linalg_ir import spell_window_defaults
    from nem.compile.pipeline import Driver, mlir_arg_names

    opts = _options(options, kw)
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.endswith(".mlir")
    ):
        file = str(source)
        from nem.dialect.diagnostics import NemDiagnosticError
        from nem.dialect.source_files import read_source

        try:  # a regular file, at most max_source_bytes(), UTF-8 (D-FILE-PATHS)
            text = read_source(source, "input")
        except NemDiagnosticError as e:
            raise CompileError.of("import", e.diagnostics) from e
    else:
        file, text = "<mlir>", str(source)
    _check_parse_isolated(text, file)
    from nem.dialect.diagnostics import register_source

    register_source(file, text)  # diagnostics of later stages quote it (D-COMPILE-MLIR-LOC)
    driver = Driver(opts, progress)
    with ir.Context(), ir.Location.unknown():
        holder = {}

        def parse() -> str:
            try:
                holder["m"] = ir.Module.parse(text)
            except ir.MLIRError as e:
                raise _upstream_error("import", e, file, "fix the MLIR at this position") from None
            return text

        driver.timed("import", parse)
        module = holder["m"]
        spell_window_defaults(module)
        funcs = [
            op
            for op in module.body.operations
            if op.operation.name == "func.func"
            and "sym_visibility" not in op.attributes
            and op.regions[0].blocks
        ]
        if func_name:
            funcs = [f for f in funcs if ir.StringAttr(f.attributes["sym_name"]).value == func_name]
        if not funcs:
            raise CompileError(
                "import",
                f"{file}: error: no public func.func"
                + (f" @{func_name}" if func_name else "")
                + " to compile",
            )
        fn = funcs[0]
        name = ir.StringAttr(fn.attributes["sym_name"]).value
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        for t in [*ftype.inputs, *ftype.results]:
            if not ir.ShapedType(t).has_static_shape:  # was reported at STEM.tile.mlir
                from nem.frontends.upstream_dialects.upstream_ops import upstream_diagnostic

                raise CompileError(
                    "import",
                    upstream_diagnostic(
                        str(fn.location),
                        f"not supported: dynamic shape {t} in the signature of "
                        f"@{name}: NEM buffers have static sizes",
                        file,
                        "give every dimension of the arguments and results a size",
                    ).render(),
                )
        if opts.route == "transform" and (loop := _first_loop(fn)) is not None:
            from nem.frontends.upstream_dialects.upstream_ops import upstream_diagnostic

            raise CompileError(
                "import",
                upstream_diagnostic(  # was unlocated, stage 'tile'
                    str(loop.location),
                    f"not supported: @{name} already has loops ({loop.name}): "
                    "--route transform tiles linalg ops, one loop nest each",
                    file,
                    "give linalg on tensors (linalg.generic, named ops), or compile loops with "
                    "--route affine",
                ).render(),
            )
        from nem.compile.mlir_zero_weights import zero_weight_warning

        zeros = zero_weight_warning(fn, file)  # before the passes fold the products away
        ins = [_port(t) for t in ftype.inputs]
        outs = [_port(t) for t in ftype.results]
        names = mlir_arg_names(text, name) or [f"arg{i}" for i in range(len(ins))]
        iface = Interface(
            [(n, s, d) for n, (s, d) in zip(names, ins)],
            {},
            [(f"result{i}", s, d) for i, (s, d) in enumerate(outs)],
        )
        try:
            driver.upstream(module, name)
        except ir.MLIRError as e:  # valid MLIR upstream's passes refuse: "op was not bufferized"
            raise _upstream_error(
                driver.stage,
                e,
                file,
                "rewrite the op into linalg on tensors "
                "(linalg.generic, linalg named ops) that upstream bufferizes "
                "and tiles",
            ) from None
        tile_file = _stem(file, stem) + ".tile.mlir"
        try:
            nem, remarks = driver.lower(name, iface.arg_names, tile_file)
        except CompileError as e:
            raise _at_origin(e, tile_file, driver, file) from e
    iface.weights.update(driver.constants)  # constant tensors (D-COMPILE-CONSTS)
    return CompileResult(
        nem,
        iface,
        name,
        driver.results,
        remarks,
        driver.memory_spaces(),
        driver.flops,
        driver.origins,
        ([zeros] if zeros else []) + _warnings(file, driver),
        _located(tile_file, driver, file),
        driver.verified,
    )


_LOOPS = frozenset({"affine.for", "affine.parallel", "scf.for", "scf.forall", "scf.parallel"})


def _first_loop(fn: ir.OpView) -> ir.OpView | None:
    """The first loop at the top of `fn`'s body (None: none), which the
    transform route, counting one loop nest per linalg op, cannot place."""
    return next(
        (op for op in fn.regions[0].blocks[0].operations if op.operation.name in _LOOPS), None
    )


def _warnings(file: str, driver: Driver) -> list[str]:
    """What a compile says without -v: less than half of the FLOPs raised to
    NEM opcodes (D-COMPILE-LOW-SHARE), located at the model's file (the
    front ends add their own: D-COMPILE-ZERO-WEIGHTS)."""
    low = driver.flops.warning() if driver.flops is not None else None
    return [f"{file}: warning: {low}"] if low else []


def _upstream_error(stage: str, e: ir.MLIRError, file: str, fix: str) -> CompileError:
    """An upstream `MLIRError` on the user's `.mlir` text, located in that file
    (upstream calls the parsed text "-"), with its notes."""
    from nem.frontends.upstream_dialects.upstream_ops import upstream_diagnostic, upstream_loc

    lines = []
    for d in e.error_diagnostics or []:
        if upstream_loc(str(d.location), file) is None:  # (an op upstream built: a named op's body)
            lines.append(
                f"{file}: error: {d.message}\nfix: upstream gives this error no position "
                "(it was at 1:1, an outside user, session 66): the note shows the op it names"
            )
            continue
        lines.append(upstream_diagnostic(str(d.location), d.message, file, fix).render())
        for n in d.notes:  # (located as mlir-opt locates them: an outside user, session 66)
            where = upstream_loc(str(n.location), file)
            lines.append(f"{where}: note: {n.message}" if where else f"note: {n.message}")
    return CompileError(stage, "\n".join(lines) or f"{file}: error: {e}")


def _parse_and_verify(text: str) -> str:
    from mlir import ir

    with ir.Context():
        try:
            ir.Module.parse(text)
        except ir.MLIRError:
            pass  # reported by the parse in the parent, with its diagnostics
    return ""


def _check_parse_isolated(text: str, file: str) -> None:
    """Upstream's parser aborts the process on some invalid input (an op of
    an unregistered dialect in a `linalg.map` body: `LLVM ERROR`), so the
    text is first parsed in a forked child (D-LOW-UPSTREAM); a child that
    dies is an `import` error carrying upstream's message."""
    from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc
    from nem.frontends.upstream_dialects.isolation import run_isolated

    try:
        run_isolated(
            _parse_and_verify,
            text,
            where=SourceLoc(file, 1, 1),
            what="parsing the module",
            fix="fix the MLIR (mlir-opt shows the same failure)",
        )
    except NemDiagnosticError as e:
        raise CompileError.of("import", e.diagnostics) from None


def _port(t: ir.Type) -> tuple[tuple[int, ...], np.dtype]:
    import numpy as np
    from mlir import ir

    from nem.dialect.elements import ELEM_TYPES

    shaped = ir.ShapedType(t)
    # the spec's types by their MLIR names (bf16 was bytes, uint8, though a
    # buffer of bf16 elements: an outside user, session 66), and f64, i64
    dtypes = {e.mlir: e.dtype for e in ELEM_TYPES.values() if e.name != "i4"}
    dtypes.update(f64=np.dtype(np.float64), i64=np.dtype(np.int64))
    return tuple(shaped.shape), dtypes.get(str(shaped.element_type), np.dtype(np.uint8))
