"""Running `compute op="mlir.kernel"` escape-hatch tasks (D-RT-MLIR-KERNEL,
D-RT-MLIR-JIT): which backend runs a kernel, and what the user is told.

`mlir_kernel` defines a kernel's semantics (xDSL's interpreter, configured
there); `mlir_native` compiles the same semantics to native code with
upstream MLIR.  A task runs natively when the native backend takes its
kernel (backend "auto", the default, or "native"), else interpreted; in
"auto" a small kernel is interpreted until its total work makes compiling
it worthwhile (`COMPILE_AFTER`); a kernel that is exactly a constant fill
runs as a numpy fill in both (`mlir_fill`, D-RT-MLIR-FILL).  The
interpreter is slow (tens of microseconds per scalar operation), so the user
is told once per kernel that falls back and why (`notice`), `nem-run` warns
before running when every kernel will be interpreted (`load_notice`, with
an estimate), and a long interpreted task reports progress (`progress`).

The settings and what the escape hatch remembers (compiled kernels, native
code, interpreted work, notices given) belong to one interpreter
(`NemInterpreter.escape_hatch`, an `EscapeHatch`), in caches of bounded size
(issue 36): two interpreters in one process never see each other's backend,
limit or kernels.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation

from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.limits import DEFAULT_MAX_KERNEL_OPS
from nem.runtime.mlir_fill import FillKernel, fill_kernel, fill_of
from nem.runtime.mlir_kernel import CompiledKernel
from nem.runtime.mlir_kernel_scalar import OPNAME
from nem.runtime.numerics import KernelError, NotSupported

if TYPE_CHECKING:
    from nem.runtime.kernel_support import Attrs, Tensor


class Bindable(Protocol):
    """A kernel that runs natively (`mlir_native.NativeKernel`) or as a numpy
    fill (`mlir_fill.FillKernel`), bound to its operands' arrays once."""

    def bind(
        self, arrays: Sequence[np.ndarray], index_args: Sequence[int]
    ) -> Callable[[], object]: ...


# the interpreter's speed: `bench/bench_mlir_kernel.py --interpreted` measures
# 20-30 us per scalar op (a 16x16x16 matmul nest) on a busy 2-core machine
SECONDS_PER_OP = 20e-6
# "auto" interprets a kernel whose work is known statically while its total
# interpreted work stays within this many scalar ops (about what compiling
# it costs: 30-40 ms per kernel once MLIR is loaded, at ~16 us per
# interpreted op; the rent-or-buy break-even): small kernels run a few times
# never pay for compilation; past it, the kernel is compiled (50_000 made a
# CNN's fills and pools run interpreted for 19 runs, bench_cnn_raised.py)
COMPILE_AFTER = 2_000
# the distinct kernels an interpreter keeps compiled (each holds its parsed
# IR, and natively a JIT engine of a few hundred KB); past it the oldest is
# compiled again when it runs (a program has a few dozen distinct kernels)
KERNEL_CACHE_SIZE = 512
BACKENDS = ("auto", "native", "interpreter")


def describe_cost(ops: int) -> str:
    """`ops` scalar operations as interpreter time."""
    secs = ops * SECONDS_PER_OP
    t = "<0.1 s" if secs < 0.1 else f"{secs:.1f} s" if secs < 120 else f"{secs / 60:.0f} min"
    return f"about {ops:,} scalar operations per run, ~{t} at ~{SECONDS_PER_OP * 1e6:.0f} us each"


def _checked(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> tuple[str, list[int]]:
    """The kernel text and index arguments of a task, its attributes and
    operands checked."""
    text = attrs.get("kernel")
    if not isinstance(text, str):
        raise NotSupported(f"{OPNAME}: missing string attribute 'kernel'")
    extra = sorted(set(attrs) - {"op", "kernel", "index_args"})
    if extra:
        raise NotSupported(f"{OPNAME}: unknown attribute(s) {', '.join(extra)}")
    idx = attrs.get("index_args", [])
    if not isinstance(idx, list) or not all(isinstance(v, int) for v in idx):
        raise NotSupported(f"{OPNAME}: index_args must be a list of integer expressions")
    if any(t.quant is not None for t in (*ins, *outs)):
        raise NotSupported(
            f"{OPNAME}: quantized operands are not supported (the kernel sees raw element values)"
        )
    return text, idx


class EscapeHatch:
    """The `mlir.kernel` tasks of one interpreter: which backend runs them,
    the most work one may do, where notices and progress go, and the kernels
    compiled so far.

    `backend`: "auto" (native when the native backend takes the kernel, else
    interpreted, with a notice), "native" (a kernel it does not take is
    NotSupported) or "interpreter" (always interpreted); default from the
    environment variable NEM_MLIR_KERNEL, read when the interpreter is made.
    `max_kernel_ops`: the most scalar operations one task's kernel may do
    (D-LIMITS; `nem-run --max-kernel-ops N`).  `notice` is called with each
    notice (default: a RuntimeWarning); `progress(done, estimated, seconds)`
    while a kernel has been interpreted for more than a second."""

    def __init__(
        self,
        backend: str | None = None,
        max_kernel_ops: int = DEFAULT_MAX_KERNEL_OPS,
        cache_size: int = KERNEL_CACHE_SIZE,
    ) -> None:
        self.backend = os.environ.get("NEM_MLIR_KERNEL", "auto") if backend is None else backend
        if backend is not None:
            self.set_backend(backend)
        self.max_kernel_ops = max_kernel_ops
        self.compile_after = COMPILE_AFTER
        self.notice: Callable[[str], None] | None = None
        self.progress: Callable[[int, int, float], None] | None = None
        self._noticed: BoundedCache[str, None] = BoundedCache(cache_size)
        self._interpreted: BoundedCache[str, int] = BoundedCache(cache_size)  # ops so far
        self._compiled: BoundedCache[str, CompiledKernel] = BoundedCache(cache_size)
        self._native: BoundedCache[tuple[str, tuple[int, ...], int], Any] = BoundedCache(cache_size)
        self._fills: BoundedCache[tuple[str, tuple[int, ...], int], FillKernel | None] = (
            BoundedCache(cache_size)
        )

    def set_backend(self, name: str) -> None:
        if name not in BACKENDS:
            raise ValueError(f"unknown mlir.kernel backend {name!r} (auto, native, interpreter)")
        self.backend = name

    # ------------------------------------------------------------ the kernels
    def compiled(self, text: str) -> CompiledKernel:
        """The kernel of `text`, parsed and checked once (while it stays in
        the cache)."""
        ck = self._compiled.get(text)
        if ck is None:
            ck = self._compiled[text] = CompiledKernel(text)
        return ck

    def _fill(self, ck: CompiledKernel, group: list[int], n_in: int) -> FillKernel | None:
        key = (ck.text, tuple(group), n_in)
        if key not in self._fills:
            self._fills[key] = fill_kernel(ck.fn, group, n_in)
        return self._fills[key]

    def _native_kernel(self, ck: CompiledKernel, group: list[int], n_in: int) -> Bindable | str:
        """The native kernel of `ck` for this aliasing, or why the native
        backend does not take it (a str)."""
        from nem.runtime import mlir_native

        key = (ck.text, tuple(group), n_in)
        got = self._native.get(key)
        if got is None:
            got = self._native[key] = mlir_native.native(ck.module, group, n_in)
        return got

    # ---------------------------------------------------------------- notices
    def _notice(self, key: str, msg: str) -> None:
        if key in self._noticed:
            return
        self._noticed[key] = None
        if self.notice is not None:
            self.notice(msg)
        else:
            import warnings

            warnings.warn(msg, RuntimeWarning, stacklevel=3)

    def _notice_interpreted(self, ck: CompiledKernel, why: str) -> None:
        every = self.interpreted_reason()
        if every is not None:
            self._notice("all", f"{OPNAME}: kernels run in xDSL's interpreter ({every})")
            return
        self._notice(
            ck.text,
            f"{OPNAME}: a kernel runs in xDSL's interpreter, not natively: "
            f"{why} ({describe_cost(ck.estimate)})",
        )

    def interpreted_reason(self) -> str | None:
        """Why every kernel will be interpreted, or None."""
        if self.backend == "interpreter":
            return "NEM_MLIR_KERNEL=interpreter"
        from nem.runtime.mlir_native import unavailable

        why = unavailable()
        return (
            None
            if why is None
            else f"{why}; install the `mlir` extra "
            "(pip install 'nem-toolchain[mlir]') to compile them natively"
        )

    def load_notice(self, program: Operation) -> str | None:
        """For a loaded program whose escape-hatch kernels will all be
        interpreted: how many there are and how slow the largest is."""
        why = self.interpreted_reason()
        if why is None:
            return None
        texts = []
        for op in program.walk():
            attrs = getattr(op, "attrs", None)
            data = getattr(attrs, "data", None)
            if (
                data is not None
                and data.get("op") == StringAttr("mlir.kernel")
                and isinstance(data.get("kernel"), StringAttr)
            ):
                texts.append(data["kernel"].data)
        if not texts:
            return None
        sizes = []
        fills: set[str] = set()
        for text in dict.fromkeys(texts):
            try:
                ck = self.compiled(text)
            except KernelError:  # reported when the task runs
                continue
            if (
                self.backend != "interpreter"
                and fill_of(ck.fn, len(ck.fn.body.block.args)) is not None
            ):
                fills.add(text)  # a numpy fill, not interpreted (D-RT-MLIR-FILL)
                continue
            sizes.append((ck.estimate, ck.estimate_exact))
        texts = [t for t in texts if t not in fills]
        if not texts:
            return None
        ops, exact = max(sizes) if sizes else (0, True)
        largest = (
            f": the largest does {'' if exact else 'at least '}{describe_cost(ops)}"
            if sizes
            else ""
        )
        self._noticed["all"] = None  # said once: not again when the first kernel runs
        return (
            f"{len(texts)} escape-hatch task(s) ({OPNAME}) will run in xDSL's interpreter "
            f"({why}){largest}"
        )

    # ---------------------------------------------------------------- running
    def _bounded(self, text: str) -> CompiledKernel:
        """The compiled kernel of `text`, refused when its estimated work is
        above `max_kernel_ops` (a lower bound where a trip count depends on
        an index argument): a native kernel cannot be stopped once called."""
        ck = self.compiled(text)
        if ck.estimate > self.max_kernel_ops:
            raise NotSupported(
                f"{OPNAME}: the kernel does "
                f"{'' if ck.estimate_exact else 'at least '}"
                f"{ck.estimate:,} scalar operations, above the limit of "
                f"{self.max_kernel_ops:,} (D-LIMITS)",
                fix=f"raise the limit if that is meant (nem-run --max-kernel-ops "
                f"{ck.estimate}; from Python, NemInterpreter(...)"
                ".escape_hatch.max_kernel_ops), or tile the loop nest before "
                "lowering so that NEM tasks do the work",
            )
        return ck

    def run_task(self, ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        """The `compute` kernel for op="mlir.kernel": ins/outs are `Tensor`s,
        attrs hold `kernel` (text) and `index_args` (ints, evaluated by the
        engine)."""
        text, idx = _checked(ins, outs, attrs)
        return self.run(self._bounded(text), ins, outs, idx)

    def prepare_task(
        self, ins: list[Tensor], outs: list[Tensor], attrs: Attrs
    ) -> Callable[[], list[np.ndarray]]:
        """`run_task` bound to one task instance's operands (whose arrays stay
        where they are; task_effects.prepare_compute): checked once, and once the
        kernel runs natively, a call with its arguments packed (a kernel that
        ran natively keeps doing so unless the backend becomes "interpreter";
        the results are the same either way, D-RT-MLIR-JIT)."""
        text, idx = _checked(ins, outs, attrs)
        ck = self._bounded(text)
        operands, group = ck.bind(ins, outs, idx)
        fast: _NativeRun | None = None

        def call() -> list[np.ndarray]:
            nonlocal fast
            if fast is not None and self.backend != "interpreter":
                return fast()
            nk = self._backend(ck, group, len(ins))
            if nk is None:
                return ck.run_interpreted(operands, group, len(ins), idx, self.progress)
            fast = _NativeRun(nk, operands, group, len(ins), idx)
            return fast()

        return call

    def run(
        self, ck: CompiledKernel, ins: list[Tensor], outs: list[Tensor], index_args: list[int]
    ) -> list[np.ndarray]:
        """Run `ck` once on the task's operands; returns the outs' new contents.
        Natively when the native backend takes its kernel, else interpreted."""
        operands, group = ck.bind(ins, outs, index_args)
        nk = self._backend(ck, group, len(ins))
        if nk is None:
            return ck.run_interpreted(operands, group, len(ins), index_args, self.progress)
        return _NativeRun(nk, operands, group, len(ins), index_args)()

    def _backend(self, ck: CompiledKernel, group: list[int], n_in: int) -> Bindable | None:
        """The native kernel this run of `ck` uses, or None when it is
        interpreted (then counted against `compile_after`, or noticed).  A
        constant fill runs as a numpy fill unless the backend is
        "interpreter" (D-RT-MLIR-FILL)."""
        backend = self.backend
        if backend != "interpreter":
            fill = self._fill(ck, group, n_in)
            if fill is not None:
                return fill
        if backend == "auto" and ck.estimate_exact:
            done = self._interpreted.get(ck.text, 0) + ck.estimate
            if done <= self.compile_after:
                self._interpreted[ck.text] = done
                return None
        if backend != "interpreter":
            nk = self._native_kernel(ck, group, n_in)
            if not isinstance(nk, str):
                return nk
            if backend == "native":
                raise NotSupported(f"{OPNAME}: the native backend does not take this kernel: {nk}")
            self._notice_interpreted(ck, nk)
        return None


class _NativeRun:
    """A compiled kernel on bound operands: inputs in place (the runtime's
    memory, when C-contiguous and aligned), else copied before each call;
    outputs on a read-modify-write copy as in the interpreter
    (D-RT-MLIR-KERNEL), in buffers kept across calls (the engine copies the
    results into the regions)."""

    __slots__ = ("copies", "call", "outs")

    def __init__(
        self,
        nk: Bindable,
        operands: Sequence[Tensor],
        group: list[int],
        n_in: int,
        index_args: list[int],
    ) -> None:
        n_mem = len(operands)
        arrays: dict[int, np.ndarray] = {}
        self.copies: list[tuple[np.ndarray, np.ndarray]] = []  # (buffer, operand array)
        for g in sorted(set(group)):
            a = operands[g].array
            if any(group[k] == g for k in range(n_in, n_mem)) or not (
                a.flags.c_contiguous and a.ctypes.data % a.dtype.itemsize == 0
            ):
                arrays[g] = np.empty(a.shape, a.dtype)
                self.copies.append((arrays[g], a))
            else:
                arrays[g] = a
        self.call = nk.bind([arrays[group[k]] for k in range(n_mem)], index_args)
        self.outs = [arrays[group[k]] for k in range(n_in, n_mem)]

    def __call__(self) -> list[np.ndarray]:
        for buf, a in self.copies:
            np.copyto(buf, a)
        with np.errstate(all="ignore"):
            self.call()
        return self.outs
