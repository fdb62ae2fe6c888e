"""The repository's own shape: the benchmarks stand without the tests, and the documents the
README and the code point to are in the repository, with the sections they name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from devservers.servers import REPO

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+\.md)?(?:#([^)\s]+))?\)")
CITED = re.compile(r"docs/(\w+\.md)(?:, \"([^\"]+)\"| \(\"([^\"]+)\"\))?")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


@pytest.mark.parametrize("folder", ["bench", "devservers"])
def test_folder_imports_nothing_from_the_tests(folder: str) -> None:
    for path in (REPO / folder).rglob("*.py"):
        assert not {n for n in _imports(path) if n.split(".")[0] == "tests"}, path


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(path: Path) -> list[str]:
    return re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), flags=re.M)


def test_anchor_is_github_s() -> None:
    assert _anchor("End to end (`SECTION=e2e`, `SECTION=pg`)") == "end-to-end-sectione2e-sectionpg"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_links_between_the_documents_resolve(document: Path) -> None:
    for target, anchor in LINK.findall(document.read_text(encoding="utf-8")):
        if target.startswith("http"):
            continue
        linked = (document.parent / target).resolve() if target else document
        assert linked.is_file(), f"{document.name} links to {target}"
        if anchor:
            assert anchor in {_anchor(h) for h in _headings(linked)}, f"{target}#{anchor}"


def test_the_code_cites_sections_that_exist() -> None:
    sources = [p for d in ("app", "tests", "bench", "client") for p in (REPO / d).rglob("*.py")]
    for path in sources:
        for name, section, other in CITED.findall(path.read_text(encoding="utf-8")):
            cited = REPO / "docs" / name
            assert cited.is_file(), f"{path} cites docs/{name}"
            if section or other:
                assert any((section or other) in h for h in _headings(cited)), (path, section)
