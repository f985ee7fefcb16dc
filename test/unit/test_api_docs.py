"""The API reference (`scripts/api_docs.py`, pdoc) builds, its links
resolve, and it documents the accessors a pass reads (issue 34: they were
found only with `dir()`)."""

from __future__ import annotations

import importlib
import inspect
import runpy
import warnings

import pytest
from doc_blocks import ROOT

pdoc = pytest.importorskip("pdoc", reason="pdoc is in the test extra")
API = runpy.run_path(str(ROOT / "scripts/api_docs.py"), run_name="api_docs")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("api")
    API["build"](out)
    return out


def test_every_link_resolves(reference):
    assert API["broken_links"](reference) == []
    pages = {p.relative_to(reference).as_posix() for p in reference.rglob("*.html")}
    assert {m.replace(".", "/") + ".html" for m in API["MODULES"]} <= pages


@pytest.mark.parametrize(
    "page, needles",
    [
        (
            "nem/dialect/ops.html",
            [
                "LoopOp.lower",
                "LoopOp.upper",
                "RegionOp.extent",
                "MoveOp.deps",
                "ComputeOp.ins",
                "TaskOp.set_deps",
            ],
        ),
        (
            "nem/dialect/attributes.html",
            [
                "MemLevelAttr.kind",
                "MemLevelAttr.engine",
                "RegionType.level",
                "RegionType.shape_values",
            ],
        ),
        ("nem/dialect/builder.html", ["ProgramBuilder"]),
        ("nem/frontends/nem_text.html", ["parse_nem", "print_nem"]),
        ("nem/passes/pass_context.html", ["NemPassContext", "report"]),
        ("nem/runtime/api.html", ["NemInterpreter"]),
        ("nem/compile.html", ["compile_onnx", "CompileResult"]),
        ("nem/compile/flops.html", ["FlopShare"]),
    ],
)
def test_the_accessors_are_documented(reference, page, needles):
    html = (reference / page).read_text(encoding="utf-8")
    for needle in needles:
        assert f'id="{needle}"' in html, f"{page} documents no {needle}"


def _fields(cls) -> list[str]:
    """The IRDL fields of an op class (its operand, result, region and
    property accessors), or the parameters of an attribute or type class."""
    from xdsl.irdl import IRDLOperation, ParametrizedAttribute

    if issubclass(cls, IRDLOperation):
        return [
            n
            for n, v in vars(cls).items()
            if not n.startswith("_")
            and (
                type(v).__module__ == "xdsl.irdl.operations"
                or type(v).__name__ in ("SegmentAccessor", "_OperandFieldDef")
            )
        ]
    definition = cls.get_irdl_definition() if issubclass(cls, ParametrizedAttribute) else None
    return [n for n, _ in definition.parameters] if definition is not None else []


def test_every_field_of_the_ops_and_types_has_its_own_docstring():
    """An IRDL operand, result, property or region of an op, or a parameter
    of an attribute or type, documents itself (pdoc would show xDSL's generic
    accessor text, 'Access a non-variadic construct...', or nothing)."""
    import pdoc.doc

    missing, seen = [], 0
    for name in ("nem.dialect.ops", "nem.dialect.attributes"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = pdoc.doc.Module(importlib.import_module(name))
        for cls in module.classes:
            docs = {m.name: m.docstring for m in cls.members.values()}
            for field in _fields(cls.obj):
                seen += 1
                doc = docs.get(field, "")
                generic = inspect.getdoc(type(vars(cls.obj).get(field)))  # the accessor's own
                if not doc or doc == generic or doc.startswith("Access"):
                    missing.append(f"{cls.name}.{field}")
    assert seen > 60 and missing == []
