"""Snapshots of the tile stage's steps, for the stage bisector.

The tile stage is several steps on one module (the affine route: linalg to
affine loops, the engine split, then each nest tiled, staged in L1 and
pipelined; the transform route: partial-sum privatization, then the
transform script).  A step that wants to be observable calls
`checkpoint(name, module, where)` after it; nothing happens unless a caller
is `observing(hook)` (the bisector, `nem.compile.bisect`), in which case the
hook gets the step's name, the module (valid only during the call: print or
copy it) and what the step worked on (a nest's location, its engine).  A
context variable, so that compiles in other threads or after the `with`
block are not observed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

Hook = Callable[[str, Any, str], None]
"""(step name, the `mlir.ir.Module`, what the step worked on)."""

_HOOK: ContextVar[Hook | None] = ContextVar("nem_compile_checkpoint", default=None)


def checkpoint(name: str, module: Any, where: str = "") -> None:
    """Report the module after step `name` to the observing hook, if any."""
    hook = _HOOK.get()
    if hook is not None:
        hook(name, module, where)


@contextmanager
def observing(hook: Hook) -> Iterator[None]:
    """Call `hook` at every checkpoint of the compiles run in this block."""
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)
