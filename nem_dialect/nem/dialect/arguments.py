"""Argument checks of the public Python API (issue 33, docs/python-api.md):
a wrong type is a `TypeError` and a wrong value a `ValueError`, each one
line naming the function and the parameter, before any work (an
`AttributeError` deep inside said neither)."""

from __future__ import annotations

from typing import Any


def check_type(
    func: str, param: str, value: Any, types: type | tuple[type, ...], what: str
) -> None:
    """`value` is an instance of `types` (a bool is not an int), else a
    TypeError `func: param must be WHAT, not TYPE`."""
    ok = isinstance(value, types) and not (
        isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,))
    )
    if not ok:
        raise TypeError(
            f"{func}: {param} must be {what}, not {type(value).__name__}"
            + (f" ({value!r})" if isinstance(value, int | float) else "")
        )


def check_text(func: str, param: str, value: Any, limit: int | None = None) -> None:
    """`value` is a str of at most `limit` UTF-8 bytes (the CLIs' source
    limit, D-LIMITS: a ValueError naming it)."""
    check_type(func, param, value, str, "a str")
    if limit is not None and len(value) > limit // 4 and len(value.encode("utf-8")) > limit:
        raise ValueError(
            f"{func}: {param} has more than {limit} bytes, above the source limit "
            "(D-LIMITS; raise it with nem.dialect.limits.source_limit(N))"
        )


__all__ = ["check_type", "check_text"]
