"""The README's and the install page's lists of extras name every extra pyproject.toml
declares (the README's, in brackets, no other)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> set[str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


def _paragraph(path: Path, opening: str) -> str:
    """The paragraph of ``path`` that starts with ``opening``."""
    text = path.read_text()
    at = text.index(opening)
    end = text.find("\n\n", at)
    return text[at : end if end != -1 else None]


@pytest.mark.parametrize(
    ("page", "pattern"),
    [("README.md", r"`\[([a-z]+)\]`"), ("docs/get-started/install.md", r"`([a-z]+)`")],
)
def test_every_extra_is_listed(page: str, pattern: str) -> None:
    listed = set(re.findall(pattern, _paragraph(ROOT / page, "Extras:")))
    declared = _declared()
    assert declared <= listed, f"{page} leaves out {sorted(declared - listed)}"
    if page == "README.md":  # names in brackets are extras only
        assert listed == declared, f"{page} names {sorted(listed - declared)}"
