"""Stable opcode numbers of NEM bytecode (docs/bytecode.md, "Opcode numbers").

The registry (`opcodes.yaml`, field `code`) assigns them; `opcode_codes.lock`
lists every (opcode, number) pair ever assigned and may only grow.  A number
that changes, is reused, or disappears would make old `.nemb` files decode
into different programs, so each of those fails here.
"""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from nem.dialect import registry
from nem.dialect.registry import RegistryError, opcodes, retired_codes

LOCK = "registry/opcode_codes.lock"


def lock_pairs(text: str | None = None) -> list[tuple[str, int]]:
    text = text if text is not None else resources.files("nem.dialect").joinpath(LOCK).read_text()
    pairs = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, code = line.split()
            pairs.append((name, int(code)))
    return pairs


def check_lock(
    specs: dict[str, int], retired: dict[str, int], pairs: list[tuple[str, int]]
) -> list[str]:
    """Problems of a registry (name -> code) against the lock list."""
    problems = []
    seen_codes: dict[int, str] = {}
    for name, code in pairs:
        if code in seen_codes:
            problems.append(f"lock gives {code} to both {seen_codes[code]} and {name}")
        seen_codes[code] = name
        now = specs.get(name, retired.get(name))
        if now is None:
            problems.append(f"{name} ({code}) vanished: keep it or move it to retired_codes")
        elif now != code:
            problems.append(f"{name} changed its number from {code} to {now}")
    locked = dict(pairs)
    for name, code in specs.items():
        if name not in locked:
            owner = seen_codes.get(code)
            problems.append(
                f"{name} ({code}) reuses {owner}'s number"
                if owner
                else f"{name} ({code}) is not in opcode_codes.lock: append it"
            )
    return problems


def test_registry_matches_lock():
    specs = {s.name: s.code for s in opcodes().values()}
    assert check_lock(specs, retired_codes(), lock_pairs()) == []


def test_lock_detects_changed_reused_and_vanished_numbers():
    pairs = [("relu", 1), ("add", 2)]
    assert check_lock({"relu": 1, "add": 2}, {}, pairs) == []
    assert check_lock({"relu": 3, "add": 2}, {}, pairs) == ["relu changed its number from 1 to 3"]
    assert check_lock({"relu": 1}, {}, pairs) == [
        "add (2) vanished: keep it or move it to retired_codes"
    ]
    assert check_lock({"relu": 1}, {"add": 2}, pairs) == []  # retired properly
    assert check_lock({"relu": 1, "gelu": 2}, {"add": 2}, pairs) == ["gelu (2) reuses add's number"]
    assert check_lock({"relu": 1, "add": 2, "gelu": 9}, {}, pairs) == [
        "gelu (9) is not in opcode_codes.lock: append it"
    ]


def _load_with(monkeypatch, text: str):
    """opcodes() over a modified registry text."""
    real = resources.files

    class Files:
        def __init__(self, pkg):
            self.root = real(pkg)

        def joinpath(self, p):
            if p == "registry/opcodes.yaml":

                class T:
                    def read_text(self_inner):
                        return text

                return T()
            return self.root.joinpath(p)

    monkeypatch.setattr(registry.resources, "files", Files)
    registry.opcodes.cache_clear()
    try:
        return registry.opcodes()
    finally:
        registry.opcodes.cache_clear()


def test_registry_rejects_duplicate_missing_and_retired_codes(monkeypatch):
    text = resources.files("nem.dialect").joinpath("registry/opcodes.yaml").read_text()
    dup = text.replace(
        "add: {<<: *eltwise_binary, code: 12}", "add: {<<: *eltwise_binary, code: 1}"
    )
    with pytest.raises(RegistryError, match="code 1 is also relu's"):
        _load_with(monkeypatch, dup)
    missing = text.replace("add: {<<: *eltwise_binary, code: 12}", "add: *eltwise_binary")
    with pytest.raises(RegistryError, match="needs a bytecode number"):
        _load_with(monkeypatch, missing)
    retired = text.replace("retired_codes: {}", "retired_codes: {old_op: 12}")
    with pytest.raises(RegistryError, match="retired"):
        _load_with(monkeypatch, retired)


def test_codes_are_in_the_registry_file_itself():
    raw = yaml.safe_load(
        resources.files("nem.dialect").joinpath("registry/opcodes.yaml").read_text()
    )
    assert all("code" in entry for entry in raw["opcodes"].values())
