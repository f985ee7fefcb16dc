"""Every code block of the user documentation runs (see `doc_blocks.py`):
python blocks execute, `console` blocks run their commands and must print
exactly what the document shows."""

from __future__ import annotations

import pytest
from doc_blocks import ROOT, run_document

DOCS = [
    "docs/builder.md",
    "docs/writing-passes.md",
    "docs/testing.md",
    "docs/python-api.md",
    "docs/design.md",
    "docs/graph-lowering.md",
]


@pytest.mark.parametrize("doc", DOCS)
@pytest.mark.slow  # 71 s (6 cases)
def test_document_blocks_run(doc, tmp_path):
    assert run_document(ROOT / doc, tmp_path) > 0


@pytest.mark.slow  # 6 s
def test_readme_examples_run(tmp_path):
    """The README's `console` examples, from the repository root."""
    assert run_document(ROOT / "README.md", tmp_path, cwd=ROOT) > 0


def test_supported_onnx_list_is_the_converter_table():
    """docs/compile.md's coverage table ("Supported ONNX") names exactly the
    op types of `CONVERTERS` (a user once read Slice into the list before it
    was supported)."""
    import re

    from nem.frontends.onnx.converters import CONVERTERS

    text = (ROOT / "docs/compile.md").read_text()
    section = text.split("### Coverage\n", 1)[1].split("\nNot supported, and why", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    named = {t.strip() for row in rows for t in row.split("|")[1].split(",")}
    assert named == set(CONVERTERS)
    assert all(re.fullmatch(r"[A-Z][A-Za-z0-9]+", t) for t in named)  # (ReduceL2)


@pytest.mark.slow  # a compile and a run: 4-7 s
def test_readme_quick_start_runs(tmp_path):
    """The README's quick start, line by line (but the install), in an empty
    folder; its output is an array `np.load` reads (it was raw bytes, y.bin)."""
    import subprocess

    import numpy as np
    from doc_blocks import blocks, tool_env

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start\n", 1)[1]
    block = next(b for b in blocks(quick) if b.lang == "sh")
    for line in block.text.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command.startswith("python3 -m venv"):
            continue
        command = command.replace("examples/", f"{ROOT}/examples/")
        r = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=tool_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert r.returncode == 0, f"{command}\n{r.stdout}{r.stderr}"
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.float32 and y.shape == (4, 10)  # the shape the model gives it


def test_documents_cite_no_path_of_a_developers_machine():
    """The docs cited experiment scripts by their place on the machine that
    ran them (`/work/scratch/...`, `/work/notes/...`), which a reader of the
    checkout cannot open (session 42): a figure's command goes in the text, a
    script worth keeping under `bench/`."""
    cited = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "/work/scratch/" in line or "/work/notes/" in line
    ]
    assert not cited, cited


def test_the_critical_path_kinds_are_the_documented_ones():
    """The python API page and docs/compile.md name each kind of stretch the
    critical path reports (`critical_path.KINDS`): the API page's list
    lacked `loop-end` (an outside review, session 52)."""
    import re

    from nem.runtime.critical_path import KINDS

    api = (ROOT / "docs/python-api.md").read_text()
    listed = re.search(r"its stretches there came after: ([^)]*)\)", api.replace("\n", " "))
    assert listed is not None
    assert re.findall(r"`([a-z-]+)`", listed[1]) == list(KINDS)
    compile_md = (ROOT / "docs/compile.md").read_text()
    assert all(f"`{kind}`" in compile_md for kind in KINDS)
