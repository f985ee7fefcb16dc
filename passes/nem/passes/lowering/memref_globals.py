"""Globals (D-LOW-GLOBAL): `memref.global` + `memref.get_global`, what
`-one-shot-bufferize` makes of tensor constants (weights kept as constants).

    memref.global "private" constant @w : memref<3x2xf32> = dense<...>
    %w = memref.get_global @w : memref<3x2xf32>
    -> %w = "nem_lowering.buffer"() <{buffer = "w", global = @w}>   (nem-declare-buffers)
    -> buffer w : DDR (size=24, align=64)          (one per global, at program scope)

Every `get_global` of one global is the same buffer, named after the symbol
by `nem-declare-buffers` (D-LOW-DECLARE), which the driver declares after
the arguments (`declare`): no handler.  Initial contents cannot live in `.nem` text (D-BC-DATA), so
they go to the sidecar archive of the `weights=FILE.npz` option, one array
per buffer (the global's shape and element type), which `nem-run --input
FILE.npz` writes into memory before running: the route nem-compile's
`STEM.weights.npz` already takes (D-COMPILE-WEIGHTS).  Which buffers have
contents is read from the IR at the end (`initial_contents`: the buffers
name their globals), not kept by the conversion (D-LOW-WALK).  Used globals with
contents and no `weights=` are an error at the global (a program without
its constants would compute silently wrong results); `uninitialized`
globals are plain buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, MemRefType, ModuleOp
from xdsl.traits import SymbolTable

from nem.dialect.attributes import MemLevelAttr
from nem.dialect.buffer_op import BufferOp
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.elements import ELEM_DTYPES
from nem.frontends.upstream_dialects.memref_global import GlobalOp
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.declare_buffers import declared_buffers
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.views import View, buffer_bytes, check_elem, memref_strides

if TYPE_CHECKING:
    from nem.passes.lowering.context import LoweringContext


def declare(ctx: LoweringContext, op: BufferOp) -> None:
    """The view of `op`'s global's buffer, named as `nem-declare-buffers`
    named it (D-LOW-DECLARE)."""
    ctx.views[op.result] = global_view(ctx, global_of(op), op.buffer_name)


def global_of(op: BufferOp) -> GlobalOp:
    """The global whose buffer `op` is (`nem-declare-buffers` checked it)."""
    assert op.global_ is not None
    glob = SymbolTable.lookup_symbol(op, op.global_)
    assert isinstance(glob, GlobalOp)
    return glob


def global_view(ctx: LoweringContext, glob: GlobalOp, name: str) -> View:
    """The program buffer `name` of `glob` (checked: element type, identity
    layout, level); `finish` writes its contents."""
    t = glob.type
    assert isinstance(t, MemRefType)
    elem = t.element_type
    check_elem(glob, elem)
    strides, off = memref_strides(glob, t)
    if off or strides != memref_strides(None, MemRefType(elem, t.get_shape()))[0]:
        raise reject(glob, f"a global with a non-identity layout ({t}) is not supported")
    level = ctx.level(glob, t)
    buf = ctx.declare_buffer(name, level, buffer_bytes(t.get_shape(), elem), glob.location)
    return View(buf, MemLevelAttr(level), elem, tuple(t.get_shape()), strides, Aff.c(0), name)


def contents(glob: GlobalOp, init: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The initial contents of a global as an array of its shape and element type."""
    t = glob.type
    assert isinstance(t, MemRefType)
    dtype = ELEM_DTYPES[check_elem(glob, t.element_type)]
    if dtype.kind not in "iuf":
        raise reject(
            glob,
            f"initial contents of element type {t.element_type} cannot be stored in a .npz archive",
            "use f32/f16 or an integer type",
        )
    values = np.array(init.get_values(), dtype=np.float64 if dtype.kind == "f" else np.int64)
    shape = tuple(t.get_shape())
    return (np.full(shape, values[0]) if values.size == 1 else values.reshape(shape)).astype(dtype)


def initial_contents(fn: func.FuncOp) -> dict[str, tuple[GlobalOp, DenseIntOrFPElementsAttr]]:
    """Buffer name -> (global, initial contents) of each global `fn` reads
    that has contents, in the order of their buffers: the
    `nem_lowering.buffer`s `nem-declare-buffers` put at the start of `fn`
    name their globals (`declared_buffers`), which the conversion leaves in
    place."""
    out: dict[str, tuple[GlobalOp, DenseIntOrFPElementsAttr]] = {}
    for op in declared_buffers(fn):
        glob = global_of(op)
        if isinstance(init := glob.initial_value, DenseIntOrFPElementsAttr):
            out[op.buffer_name] = (glob, init)
    return out


def finish(ctx: LoweringContext, module: ModuleOp, fn: func.FuncOp) -> None:
    """Write the initial contents of the globals entry `fn` reads
    (`weights=`), or reject them, then drop every global: the program's
    buffers replace them."""
    initial = initial_contents(fn)
    if initial:
        path = ctx.options.weights
        if not path:
            glob = next(iter(initial.values()))[0]
            raise reject(
                glob,
                f"memref.global @{glob.sym_name.data} has initial contents, "
                "which a .nem program cannot hold (D-LOW-GLOBAL)",
                "pass weights=FILE.npz to lower-to-nem and run with nem-run --input FILE.npz",
            )
        arrays = {name: contents(g, init) for name, (g, init) in initial.items()}
        try:
            np.savez(path, **arrays)  # type: ignore[arg-type]
        except OSError as e:
            raise NemDiagnosticError(
                [
                    Diagnostic(
                        "error",
                        f"weights={path}: cannot write the initial contents: {e.strerror}",
                        SourceLoc.of(module),
                    )
                ]
            ) from None
        ctx.summary.notes.append(f"initial contents of {', '.join(arrays)} written to {path}")
    for op in list(module.ops):
        if isinstance(op, GlobalOp):
            op.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
            op.erase()
