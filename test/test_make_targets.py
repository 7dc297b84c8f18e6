"""Every ``make`` target the README and the documentation pages name exists and expands (a dry
run, ``make -n``), and the optional set-ups' pins agree with each distribution's lock (a pin
that differs from ``scripts/constraints-<distro>.txt`` makes pip's resolution impossible on a
fresh machine: ``make bench-peers-setup`` once failed so)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(
    p for p in [*(ROOT / "docs").rglob("*.md"), *(ROOT / "bench").rglob("*.md")]
    if "_build" not in p.parts)]


def _named_targets() -> dict:
    """{target: [pages]}: ``make X`` in inline code or at the start of a code block's line."""
    out: dict = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        found = set(re.findall(r"`make ([a-z][a-z0-9-]*)[^`]*`", text))
        for block in re.findall(r"```.*?```", text, flags=re.S):
            found |= set(re.findall(r"^\s*(?:\$ )?make ([a-z][a-z0-9-]*)", block, flags=re.M))
        for t in found:
            out.setdefault(t, []).append(str(page.relative_to(ROOT)))
    return out


def _makefile_targets() -> set:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][a-z0-9-]*)\s*:(?!=)", text, flags=re.M))


NAMED = _named_targets()


def test_the_pages_name_targets():
    assert {"setup", "test", "demo", "docs", "bench-peers-setup"} <= set(NAMED), sorted(NAMED)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("target", sorted(NAMED))
def test_every_named_target_exists_and_expands(target):
    assert target in _makefile_targets(), (target, NAMED[target])
    p = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, (target, NAMED[target], p.stderr)


def _pins(path: Path) -> dict:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==", 1)
            out[re.sub(r"[-_.]+", "-", name.split("[")[0]).strip().lower()] = version.strip()
    return out


@pytest.mark.parametrize("lock", sorted((ROOT / "scripts").glob("constraints-*.txt")),
                         ids=lambda p: p.name)
def test_the_optional_requirements_agree_with_every_distributions_lock(lock):
    c = _pins(lock)
    assert c, lock
    for req in sorted((ROOT / "bench").glob("requirements*.txt")):
        clash = {k: (v, c[k]) for k, v in _pins(req).items() if k in c and c[k] != v}
        assert not clash, f"{req.name} pins {clash} against {lock.name}: leave them to the lock"
