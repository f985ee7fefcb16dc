"""Every code block of the user documentation runs (see `doc_blocks.py`):
python blocks execute, `console` blocks run their commands and must print
exactly what the document shows."""

from __future__ import annotations

import pytest
from doc_blocks import ROOT, run_document

DOCS = ["docs/builder.md", "docs/writing-passes.md", "docs/testing.md", "docs/python-api.md",
        "docs/design.md"]


@pytest.mark.parametrize("doc", DOCS)
def test_document_blocks_run(doc, tmp_path):
    assert run_document(ROOT / doc, tmp_path) > 0


def test_readme_examples_run(tmp_path):
    """The README's `console` examples, from the repository root."""
    assert run_document(ROOT / "README.md", tmp_path, cwd=ROOT) > 0
