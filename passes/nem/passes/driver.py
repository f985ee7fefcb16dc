"""Running passes: the pass registry, pass plugins, pipeline specs and
`run_pipeline`, shared by `nem-opt` and Python code.

    from nem.passes.driver import run_pipeline
    diags = run_pipeline(module, "nem-verify,nem-fold-consts", device="npm_lite")

Where passes come from, in the order `nem-opt --help` lists them:

* NEM's own passes (`nem.passes.PASSES`);
* pass plugins: `load_pass_plugin("my_pass.py")` (`nem-opt --load-pass-plugin
  my_pass.py`) registers every `ModulePass` subclass the file defines under
  its `name` (decision D-OPT-PLUGIN);
* installed packages with an `xdsl.universe` entry point (xDSL's plugin
  mechanism; `xdsl` itself is one), loaded one by one so that a broken one
  is reported by name (`universe_passes`).

A plugin that cannot be loaded, or whose pass raises an exception that is
not a `NemDiagnosticError`, is a `PluginError` naming the file (and line)
and the exception: a problem of the plugin, never of `nem-opt`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType
from xdsl.universe import Universe

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError
from nem.passes.pass_context import pass_context
from nem.passes.pipeline_spec import check_pipeline

PassFactory = Callable[[], type[ModulePass]]


class PluginError(Exception):
    """A pass plugin (file or entry point) that cannot be loaded or that failed."""


# ---------------------------------------------------------------------------
# Pass plugins (files)
# ---------------------------------------------------------------------------

PLUGIN_PASSES: dict[str, tuple[type[ModulePass], str]] = {}
"""Passes of the loaded plugin files: name -> (class, plugin file)."""
_LOADED: dict[str, list[type[ModulePass]]] = {}


def load_pass_plugin(path: str | Path) -> list[type[ModulePass]]:
    """Import the Python file `path` and register every `ModulePass` subclass
    it defines (not the ones it imports) under its `name`.  Loading a file
    twice is a no-op.  Raises `PluginError` when the file is missing, raises
    on import, defines no pass, or defines a pass whose name is taken."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_pass_plugin: path must be a str or Path, not {type(path).__name__}")
    file = Path(path)
    key = str(file.resolve())
    if key in _LOADED:
        return _LOADED[key]
    if not file.is_file():  # a directory or /dev/null was "no such file" too
        from nem.dialect.source_files import FileRefused, regular_file

        why = "no such file"
        if file.exists():
            try:
                regular_file(file, "")
            except FileRefused as e:
                why = str(e).split(": ", 1)[-1]
        raise PluginError(f"cannot load pass plugin {path}: {why}")
    module_name = (
        "nem_pass_plugin_"
        + re.sub(r"\W", "_", file.stem)
        + "_"
        + hashlib.sha1(key.encode()).hexdigest()[:8]
    )
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot load pass plugin {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        del sys.modules[module_name]
        if isinstance(e, KeyboardInterrupt):
            raise
        raise PluginError(
            f"cannot load pass plugin {_where(e, file, path)}: {_exception_text(e)}"
        ) from None
    passes = [
        v
        for v in vars(module).values()
        if isinstance(v, type)
        and issubclass(v, ModulePass)
        and v is not ModulePass
        and v.__module__ == module_name
        and not inspect.isabstract(v)
    ]
    if not passes:
        raise PluginError(
            f"pass plugin {path} defines no ModulePass subclass (a pass is a class "
            "deriving from xdsl.passes.ModulePass with a `name`)"
        )
    for cls in passes:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(f"pass plugin {path}: pass class {cls.__name__} has no `name`")
        owner = _owner(name)
        if owner is not None:
            raise PluginError(
                f"pass plugin {path}: pass '{name}' ({cls.__name__}) is already defined by {owner}"
            )
        PLUGIN_PASSES[name] = (cls, str(path))
    _LOADED[key] = passes
    return passes


def _owner(name: str) -> str | None:
    from nem.passes import PASSES

    if name in PASSES:
        return "NEM"
    if name in PLUGIN_PASSES:
        return f"plugin {PLUGIN_PASSES[name][1]}"
    for uname, passes in universe_passes().items():
        if name in passes:
            return f"the xdsl.universe entry point '{uname}'"
    return None


def _exception_text(e: BaseException) -> str:
    if isinstance(e, SyntaxError):
        return f"SyntaxError: {e.msg}"
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _where(e: BaseException, file: Path, shown: str | Path) -> str:
    """`FILE:LINE` of the innermost frame of the exception in `file`."""
    if isinstance(e, SyntaxError) and e.lineno is not None:
        return f"{shown}:{e.lineno}"
    target = str(file.resolve())
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if str(Path(frame.filename).resolve()) == target:
            line = frame.lineno
    return f"{shown}:{line}" if line is not None else str(shown)


def plugin_failure(p: ModulePass, e: Exception) -> PluginError | None:
    """A `PluginError` for exception `e` raised by pass `p` when `p` comes
    from a plugin (file or entry point), else None (a NEM or xDSL bug)."""
    cls = type(p)
    if p.name in PLUGIN_PASSES and PLUGIN_PASSES[p.name][0] is cls:
        where = _where(e, Path(PLUGIN_PASSES[p.name][1]), PLUGIN_PASSES[p.name][1])
        return PluginError(f"pass '{p.name}' (plugin {where}) failed: {_exception_text(e)}")
    module = cls.__module__.split(".")[0]
    if module not in ("nem", "xdsl"):
        return PluginError(
            f"pass '{p.name}' ({cls.__module__}.{cls.__qualname__}) failed: {_exception_text(e)}"
        )
    return None


# ---------------------------------------------------------------------------
# xdsl.universe entry points
# ---------------------------------------------------------------------------


@lru_cache(maxsize=1)
def universes() -> dict[str, Universe]:
    """Every `xdsl.universe` entry point by name (`xdsl` is xDSL's own),
    each loaded separately: a broken one is a `PluginError` naming it.
    Loaded once per process: the installed entry points are the process's
    (no pass context or interpreter outlives them), and one entry."""
    from importlib.metadata import entry_points

    found: dict[str, Universe] = {}
    for ep in sorted(entry_points(group="xdsl.universe"), key=lambda e: e.name):
        try:
            universe = ep.load()
        except Exception as e:  # noqa: BLE001 - the plugin's failure, reported by name
            raise PluginError(
                f"cannot load xdsl.universe entry point '{ep.name}' "
                f"({ep.value}): {_exception_text(e)}"
            ) from None
        if not isinstance(universe, Universe):
            raise PluginError(
                f"xdsl.universe entry point '{ep.name}' ({ep.value}) is "
                f"not an xdsl.universe.Universe"
            )
        found[ep.name] = universe
    return found


def universe_passes() -> dict[str, dict[str, PassFactory]]:
    """Passes of each `xdsl.universe` entry point, by entry-point name."""
    return {name: dict(u.all_passes) for name, u in universes().items()}


# ---------------------------------------------------------------------------
# The registry and pipelines
# ---------------------------------------------------------------------------


def _factory(cls: type[ModulePass]) -> PassFactory:
    return lambda: cls


def available_passes() -> dict[str, PassFactory]:
    """Every pass by name: xDSL's and entry points', then NEM's and the
    loaded plugins' (which win a name clash with an entry point)."""
    out: dict[str, PassFactory] = {}
    for passes in universe_passes().values():
        out.update(passes)
    from nem.passes import PASSES

    out.update({name: _factory(cls) for name, cls in PASSES.items()})
    out.update({name: _factory(cls) for name, (cls, _) in PLUGIN_PASSES.items()})
    return out


def parse_pipeline(spec: str, callback: PassPipelineCallbackType | None = None) -> PassPipeline:
    """The `PassPipeline` of a spec (`-p` text or `builtin.module(...)`);
    `PipelineError` (a `ValueError`) for a syntax error, an unknown pass or
    a bad option, `NemDiagnosticError` for a bad `memory-spaces` value."""
    available = available_passes()
    return PassPipeline.parse_spec(available, check_pipeline(spec, available), callback)


def with_include_dirs(pipeline: PassPipeline, include_dirs: Iterable[str]) -> PassPipeline:
    """`pipeline` with the driver's `-I` directories added after the
    `include-dirs` option of each pass that declares one, so that a pass
    finds `device=NAME` where the driver does (DEV-20) through its own
    options."""
    dirs = tuple(include_dirs)
    if not dirs:
        return pipeline

    def bound(p: ModulePass) -> ModulePass:
        # the passes that declare the option have a `include_dirs` field, the
        # others not: looked up by name, as the option is
        own = getattr(p, "include_dirs", None)
        if own is None or not any(f.name == "include_dirs" for f in dataclasses.fields(p)):
            return p
        merged: tuple[str, ...] = tuple(dict.fromkeys((*own, *dirs)))
        return dataclasses.replace(p, **{"include_dirs": merged})

    return PassPipeline(tuple(bound(p) for p in pipeline.passes), pipeline.callback)


def apply_pipeline(pipeline: PassPipeline, ctx: Context, module: ModuleOp) -> None:
    """`pipeline.apply(ctx, module)` (with its callback between passes),
    where an exception of a plugin's pass becomes a `PluginError` naming
    the plugin."""
    callback = pipeline.callback or (lambda *_: None)
    prev = None
    for p in pipeline.passes:
        callback(prev, module, p)
        try:
            p.apply(ctx, module)
        except NemDiagnosticError:
            raise
        except Exception as e:
            err = plugin_failure(p, e)
            if err is None:
                raise
            raise err from e
        prev = p
    callback(prev, module, None)


def run_pipeline(
    module: ModuleOp,
    pipeline: str | PassPipeline,
    *,
    file: str | None = None,
    include_dirs: Iterable[str] = (),
    device: str | None = None,
    ctx: Context | None = None,
) -> list[Diagnostic]:
    """Run `pipeline` on `module` as `nem-opt -p` does (without its default
    verification) and return the passes' warnings and remarks.  Errors raise
    `NemDiagnosticError`; a failing plugin pass raises `PluginError`.
    `device` and `include_dirs` are `nem-opt --device` and `-I`."""
    from nem.dialect.arguments import check_type

    check_type("run_pipeline", "module", module, ModuleOp, "a ModuleOp")
    check_type(
        "run_pipeline",
        "pipeline",
        pipeline,
        (str, PassPipeline),
        "a pipeline string or a PassPipeline",
    )
    for name, value in (("file", file), ("device", device)):
        if value is not None:
            check_type("run_pipeline", name, value, str, "a str or None")
    if isinstance(pipeline, str):
        pipeline = parse_pipeline(pipeline)
    if ctx is None:
        from nem.frontends.upstream_dialects import lowering_context

        ctx = lowering_context()
    run_ctx = pass_context(ctx, file, include_dirs, device)
    try:
        apply_pipeline(with_include_dirs(pipeline, include_dirs), run_ctx, module)
    except NemDiagnosticError as e:
        e.diagnostics[:0] = run_ctx.diagnostics  # the earlier passes' warnings, in order
        raise
    return list(run_ctx.diagnostics)


# ---------------------------------------------------------------------------
# Help text
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PassOption:
    name: str  # as written in a pipeline (dashes)
    type: str
    default: str
    doc: str


def pass_summary(cls: type[ModulePass]) -> str:
    """The first line of the pass class's docstring ("" when it has none;
    dataclasses invent `Name(field=...)` docstrings, which do not count)."""
    doc = cls.__dict__.get("__doc__") or ""
    if not doc or doc.startswith(cls.__name__ + "("):
        return ""
    return inspect.cleandoc(doc).splitlines()[0]


def pass_options(cls: type[ModulePass]) -> list[PassOption]:
    """The options of a pass (its dataclass fields), documented by the
    `Options:` block of its docstring (`  name: what it does`)."""
    doc = cls.__dict__.get("__doc__") or ""
    docs: dict[str, str] = {}
    block = re.search(r"^Options:\n((?:[ \t]+\S.*\n?)+)", inspect.cleandoc(doc), re.MULTILINE)
    if block:
        for line in block.group(1).splitlines():
            key, _, text = line.strip().partition(":")
            docs[key.strip().replace("_", "-")] = text.strip()
    out = []
    if not dataclasses.is_dataclass(cls):
        return out
    for f in dataclasses.fields(cls):
        name = f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, tuple):
            default = ",".join(str(x) for x in default)
        out.append(
            PassOption(
                name,
                _type_text(f.type),
                ""
                if default is None
                else str(default).lower()
                if isinstance(default, bool)
                else str(default),
                docs.get(name, ""),
            )
        )
    return out


def _type_text(t: object) -> str:
    text = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    text = text.replace(" | None", "").replace("tuple[str, ...]", "str list")
    return text.replace("tuple[int, ...]", "int list")
