"""The official SDKs' tests are the ``sdk`` tier's, in a venv of their own: the test
modules that import an SDK of the ``[sdk]`` extra are exactly those the Makefile's
``SDK_TESTS`` names, and the ``[dev]`` set (the main venv) holds none of those SDKs but
the one ``make bench`` uses."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]

#: The modules of the SDKs that only the ``sdk`` tier installs, by distribution.
SDK_MODULES = {
    "capmonstercloudclient": "capmonstercloudclient",
    "capsolver": "capsolver",
    "python-anticaptcha": "python_anticaptcha",
    "anticaptchaofficial": "anticaptchaofficial",
}


def _extras() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras: dict[str, list[str]] = data["project"]["optional-dependencies"]
    return extras


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(line).name.lower() for line in requirements}


def _sdk_glob() -> str:
    match = re.search(r"^SDK_TESTS := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, "the Makefile names no SDK_TESTS"
    return match[1]


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_the_sdk_extra_holds_every_sdk_and_dev_none_of_them() -> None:
    extras = _extras()
    assert set(SDK_MODULES) <= _names(extras["sdk"])
    assert not set(SDK_MODULES) & _names(extras["dev"])
    # What would hold mcp and pydantic back in the main venv.
    assert "capmonstercloudclient" not in _names(extras["dev"])


def test_the_modules_that_import_an_sdk_are_the_sdk_tiers() -> None:
    pattern = _sdk_glob()
    sdk_modules = set(SDK_MODULES.values())
    importing = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("*.py")
        if _imported(path) & sdk_modules
    }
    in_tier = {path.relative_to(ROOT).as_posix() for path in ROOT.glob(pattern)}
    assert importing, "no test imports an official SDK: is SDK_MODULES right?"
    assert importing <= in_tier, "the integration tier (the main venv) would import these"
