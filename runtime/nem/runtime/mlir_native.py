"""Native execution of escape-hatch kernels (D-RT-MLIR-JIT).

A `compute op="mlir.kernel"` kernel (D-RT-MLIR-KERNEL) that the native
backend takes is prepared (`mlir_native_prep`: the interpreter's semantics
made explicit: checks that trap, exact narrowing, libm calls, loop sinking),
lowered by upstream MLIR's pass manager to the LLVM dialect and compiled by
its `ExecutionEngine` (LLVM -O2 for the host CPU, `OPT_LEVEL`), once per distinct kernel
text and argument aliasing, and cached for the process.  It then runs on the
runtime's memory: each memref argument is a bare pointer to the numpy array
of the operand (the bare-pointer calling convention: the kernel's memrefs
have static shapes and the identity layout), each `index` argument an
int64.  The lowering:

    convert-linalg-to-affine-loops, lower-affine, convert-scf-to-cf,
    arith-expand (bf16 <-> f32 conversions as integer ops),
    convert-math-to-funcs (ipowi), convert-math-to-llvm,
    finalize-memref-to-llvm, convert-func-to-llvm (bare pointers),
    convert-to-llvm, reconcile-unrealized-casts

LLVM may still call compiler-rt's `__truncsfbf2` where it legalizes a bf16
value (a phi or select of bf16 is promoted to f32 and truncated back): the
engine loads the bindings' `libmlir_float16_utils.so` (`nem.dialect.mlir_libs`), which defines it.
Without it the symbol resolved only when another engine had loaded MLIR's
runner utilities earlier in the process, and a bf16 kernel run first
crashed the process (session 24).

Without the upstream bindings (the `mlir` extra) nothing here is importable
at module level: `unavailable()` says why, and the runtime interprets.
"""

from __future__ import annotations

import ctypes
import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from nem.dialect.mlir_libs import FLOAT16_UTILS, shipped_libs
from nem.runtime.mlir_kernel_scalar import libm
from nem.runtime.mlir_native_prep import LIBM_PREFIX, PAYLOAD, TRAP, JitUnsupported, prepare

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

OPT_LEVEL = 2
"""LLVM's optimization level for each kernel (D-RT-MLIR-JIT).  A program
that runs on a device without the opcodes for its model is all escape-hatch
kernels, hundreds of distinct ones, and their compilation is most of the
run: DenseNet-121 on npm_mid (541 distinct kernels) takes 66.3 s CPU with
-O3 and 32.8 s with -O2, its output bit for bit the same (no fast-math at
any level); the matmul of bench/bench_mlir_kernel.py runs as fast."""

PIPELINE = ",".join(
    [
        "convert-linalg-to-affine-loops",
        "lower-affine",
        "convert-scf-to-cf",
        "arith-expand{include-bf16=true}",
        "convert-math-to-funcs",
        "convert-math-to-llvm",
        "finalize-memref-to-llvm",
        "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1}",
        "convert-to-llvm",
        "reconcile-unrealized-casts",
    ]
)

_TRAP_FN = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * (1 + PAYLOAD)))
_PACKED_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def unavailable() -> str | None:
    """Why kernels cannot run natively in this process, or None."""
    try:
        for name in ("mlir.ir", "mlir.passmanager", "mlir.execution_engine"):
            importlib.import_module(name)
    except ImportError as e:
        return f"the upstream MLIR Python bindings are not installed ({e.name or e})"
    return None


def _first_lines(e: Exception, n: int = 2) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return " ".join(lines[:n]) if lines else type(e).__name__


class NativeKernel:
    """One compiled kernel: call `run` with the operands' arrays (C-contiguous,
    in argument order) and the index arguments."""

    def __init__(self, module: ModuleOp, groups: Sequence[int], n_in: int) -> None:
        from mlir import ir
        from mlir.execution_engine import ExecutionEngine
        from mlir.passmanager import PassManager

        prepared = prepare(module, groups, n_in)
        self.sites = prepared.sites
        self._trapped: list[tuple[int, ...]] = []
        self._ctx = ir.Context()
        try:
            with self._ctx:
                self._module = ir.Module.parse(prepared.text)
                PassManager.parse(f"builtin.module({PIPELINE})").run(self._module.operation)
                self._engine = ExecutionEngine(
                    self._module,
                    opt_level=OPT_LEVEL,
                    shared_libs=shipped_libs(FLOAT16_UTILS),
                )
        except Exception as e:  # noqa: BLE001 - upstream parse/lowering failures
            raise JitUnsupported(f"upstream MLIR cannot compile it: {_first_lines(e)}") from None
        self._trap_cb = _TRAP_FN(self._on_trap)
        self._engine.raw_register_runtime(TRAP, ctypes.cast(self._trap_cb, ctypes.c_void_p))
        for name in prepared.libm:
            self._engine.raw_register_runtime(
                LIBM_PREFIX + name, ctypes.cast(libm(name), ctypes.c_void_p)
            )
        self._fn = _PACKED_FN(self._engine.raw_lookup("kernel"))

    def _on_trap(self, site: int, *payload: int) -> None:
        if not self._trapped:  # the first failing check, as the interpreter stops there
            self._trapped.append((site, *payload))

    def run(self, arrays: Sequence[np.ndarray], index_args: Sequence[int]) -> None:
        """Run the kernel once; a failed check raises the interpreter's
        NumericError (the outs then hold partial results)."""
        self.bind(arrays, index_args)()

    def bind(self, arrays: Sequence[np.ndarray], index_args: Sequence[int]) -> BoundCall:
        """`run` on these arrays (whose memory must stay where it is: the
        pointers are packed once) as a call without arguments."""
        return BoundCall(self, arrays, index_args)


class BoundCall:
    """A native kernel with its arguments packed: calling it runs the kernel."""

    __slots__ = ("kernel", "arrays", "vals", "packed")

    def __init__(
        self, kernel: NativeKernel, arrays: Sequence[np.ndarray], index_args: Sequence[int]
    ):
        self.kernel = kernel
        self.arrays = list(arrays)  # the memory the packed pointers point to
        self.vals: list[ctypes.c_void_p | ctypes.c_int64] = [
            ctypes.c_void_p(a.ctypes.data) for a in arrays
        ]
        self.vals += [ctypes.c_int64(int(v)) for v in index_args]
        self.packed = (ctypes.c_void_p * len(self.vals))(*[ctypes.addressof(v) for v in self.vals])

    def __call__(self) -> None:
        k = self.kernel
        k._trapped.clear()
        k._fn(self.packed)
        if k._trapped:
            site, *payload = k._trapped[0]
            raise k.sites[site - 1](payload)


def native(module: ModuleOp, groups: Sequence[int], n_in: int) -> NativeKernel | str:
    """The kernel `module` compiled with arguments aliased as `groups` and
    `n_in` inputs, or why the native backend does not take it (the caller,
    an interpreter's `EscapeHatch`, keeps it)."""
    why = unavailable()
    if why is not None:
        return why
    try:
        return NativeKernel(module, groups, n_in)
    except JitUnsupported as e:
        return str(e)
