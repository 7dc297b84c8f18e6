"""The README and the documentation pages: every relative link and image resolves to a file of
the repository (Sphinx checks the pages' own cross references when it builds with -W; the
README is read on GitHub, where nothing checks it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md",
         *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    missing = []
    for target in LINK.findall(text):
        if re.match(r"^(https?:|mailto:|#)", target):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            missing.append(target)
    assert not missing, f"{page.relative_to(ROOT)}: links to nothing: {missing}"


def test_the_readme_stays_a_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)
    # ... and points to the documentation (the links the test above checks)
    assert len([t for t in LINK.findall("\n".join(lines)) if t.startswith("docs/")]) >= 10
