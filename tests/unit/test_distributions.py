"""The checkout's three distributions are released together: the sandbox and the
developer tools carry the runtime's version and require exactly that release, and the
runtime's wheel takes neither package."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def _project(path: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
    return project


def _pins(project: dict[str, object]) -> dict[str, str]:
    found = {}
    for line in project["dependencies"]:  # type: ignore[attr-defined]
        requirement = Requirement(line)
        found[requirement.name.replace("_", "-")] = str(requirement.specifier)
    return found


def test_the_sandbox_and_the_dev_tools_require_the_runtime_of_their_release() -> None:
    version = _project(ROOT / "pyproject.toml")["version"]
    sandbox = _project(ROOT / "sandbox" / "pyproject.toml")
    dev = _project(ROOT / "devtools" / "pyproject.toml")
    assert sandbox["name"] == "captcha-tasks-sandbox" and sandbox["version"] == version
    assert dev["name"] == "captcha-tasks-dev" and dev["version"] == version
    assert _pins(sandbox)["captcha-tasks"] == f"=={version}"
    assert _pins(dev)["captcha-tasks"] == f"=={version}"
    assert _pins(dev)["captcha-tasks-sandbox"] == f"=={version}"
    assert "Private :: Do Not Upload" in dev["classifiers"]  # type: ignore[operator]


def test_each_distribution_finds_only_its_own_package() -> None:
    finds = {
        ROOT / "pyproject.toml": ["captcha_tasks", "captcha_tasks.*"],
        ROOT / "sandbox" / "pyproject.toml": ["captcha_tasks_sandbox*"],
        ROOT / "devtools" / "pyproject.toml": ["captcha_tasks_dev*"],
    }
    for path, include in finds.items():
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        assert data["tool"]["setuptools"]["packages"]["find"]["include"] == include, path
