"""Build the NEM toolchain's API reference from its docstrings (pdoc), and
check its links.

    python scripts/api_docs.py -o build/api       # then open build/api/index.html
    python scripts/api_docs.py -o build/api --check

The reference covers what a user's pass, script or tool calls (`MODULES`):
the dialect's ops, attributes and types with their accessors, the builder,
diagnostics and the static verifier, `.nem` text parsing and printing,
the pass driver, the pass context and pipelines, the
runtime API and `nem.compile`.  The compute ops (one class per opcode,
generated from the registry) are described in docs/ops.md; the reference
documents their base class `ComputeOp`.  `test/unit/test_api_docs.py` builds
it and checks that every link resolves (pdoc is in the `test` and `docs`
extras).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlsplit

MODULES = [
    "nem.dialect.ops",
    "nem.dialect.attributes",
    "nem.dialect.builder",
    "nem.dialect.diagnostics",
    "nem.dialect.verifier",
    "nem.frontends.nem_text",
    "nem.passes.driver",
    "nem.passes.pass_context",
    "nem.passes.pipeline_spec",
    "nem.runtime.api",
    "nem.runtime.session",
    "nem.compile",
    "nem.compile.flops",
]
"""The documented modules, in the order of the reference's index."""


def build(out: Path) -> list[Path]:
    """Write the reference's HTML to `out`; returns the pages written."""
    import pdoc
    import pdoc.render

    pdoc.render.configure(
        docformat="markdown", show_source=False, footer_text="NEM toolchain API reference"
    )
    for name in MODULES:
        _materialize(importlib.import_module(name))
    with warnings.catch_warnings():
        # pdoc cannot evaluate xDSL's string-quoted generic aliases in a few
        # inherited signatures (`Sequence[_Group[Attribute]]`); it shows them as written
        warnings.filterwarnings("ignore", message="Error parsing type annotation")
        pdoc.pdoc(*MODULES, output_directory=out)
    return sorted(out.rglob("*.html"))


def _materialize(module: ModuleType) -> None:
    """Bind the names a package exports lazily (PEP 562 `__getattr__`, as
    `nem.frontends.nem_text` does), which pdoc does not see otherwise."""
    for name in getattr(module, "__all__", ()):
        if name not in vars(module):
            setattr(module, name, getattr(module, name))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            elif name in ("href", "src") and value:
                self.hrefs.append(value)


def broken_links(out: Path) -> list[str]:
    """Every link of the pages under `out` to a page or anchor of the
    reference that does not exist, as `page: link` (links to other sites are
    not followed: the check runs offline)."""
    pages = {p.resolve(): _parse(p) for p in out.rglob("*.html")}
    broken = []
    for page, links in pages.items():
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("data:"):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.relative_to(out.resolve())}: {href}")
            elif (
                parts.fragment
                and target.suffix == ".html"
                and parts.fragment not in pages[target].ids
            ):
                broken.append(f"{page.relative_to(out.resolve())}: {href} (no such anchor)")
    return broken


def _parse(page: Path) -> _Links:
    links = _Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("build/api"),
        help="the folder to write (default: build/api)",
    )
    p.add_argument("--check", action="store_true", help="then check every link")
    args = p.parse_args(argv)
    pages = build(args.output)
    print(f"{len(pages)} pages in {args.output}/ (open index.html)")
    if args.check:
        broken = broken_links(args.output)
        for line in broken:
            print(f"broken link: {line}", file=sys.stderr)
        if broken:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
