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
`STEM.weights.npz` already takes (D-COMPILE-WEIGHTS).  Used globals with
contents and no `weights=` are an error at the global (a program without
its constants would compute silently wrong results); `uninitialized`
globals are plain buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, MemRefType, ModuleOp
from xdsl.traits import SymbolTable

from nem.dialect.attributes import MemLevelAttr
from nem.dialect.buffer_op import BufferOp
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.elements import ELEM_DTYPES
from nem.frontends.upstream_dialects.memref_global import GlobalOp
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.views import View, buffer_bytes, check_elem, memref_strides

if TYPE_CHECKING:
    from nem.passes.lowering.context import LoweringContext


def declare(ctx: LoweringContext, op: BufferOp) -> None:
    """The view of `op`'s global's buffer, named as `nem-declare-buffers`
    named it (D-LOW-DECLARE)."""
    assert op.global_ is not None
    glob = SymbolTable.lookup_symbol(op, op.global_)
    assert isinstance(glob, GlobalOp)  # nem-declare-buffers checked it
    ctx.views[op.result] = global_view(ctx, glob, op.buffer_name)


def global_view(ctx: LoweringContext, glob: GlobalOp, name: str) -> View:
    """The program buffer `name` of `glob` (checked: element type, identity
    layout, level), its contents kept for `finish`."""
    t = glob.type
    assert isinstance(t, MemRefType)
    elem = t.element_type
    check_elem(glob, elem)
    strides, off = memref_strides(glob, t)
    if off or strides != memref_strides(None, MemRefType(elem, t.get_shape()))[0]:
        raise reject(glob, f"a global with a non-identity layout ({t}) is not supported")
    level = ctx.level(glob, t)
    buf = ctx.declare_buffer(name, level, buffer_bytes(t.get_shape(), elem), glob.location)
    init = glob.initial_value
    if isinstance(init, DenseIntOrFPElementsAttr):
        ctx.initial[name] = (glob, init)
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


def finish(ctx: LoweringContext, module: ModuleOp) -> None:
    """Write the initial contents of the used globals (`weights=`), or reject
    them, then drop every global: the program's buffers replace them."""
    if ctx.initial:
        path = ctx.options.weights
        if not path:
            glob = next(iter(ctx.initial.values()))[0]
            raise reject(
                glob,
                f"memref.global @{glob.sym_name.data} has initial contents, "
                "which a .nem program cannot hold (D-LOW-GLOBAL)",
                "pass weights=FILE.npz to lower-to-nem and run with nem-run --input FILE.npz",
            )
        arrays = {name: contents(g, init) for name, (g, init) in ctx.initial.items()}
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
