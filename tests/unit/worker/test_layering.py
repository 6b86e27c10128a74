"""Celery stays under worker/ (and cli/): the plain modules import without it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.workers import ROOT

PACKAGE = ROOT / "captcha_tasks"

#: Every module outside worker/ and cli/ (and the package root, which defines
#: the app, and aio/, caller/, contrib/ and mcp/, which are ways in to its tasks, as the
#: root is):
#: read from the tree, so a new module is checked without being listed.
PLAIN = sorted(
    ".".join(("captcha_tasks", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
        ".__init__"
    )
    for path in PACKAGE.rglob("*.py")
    if path.relative_to(PACKAGE).parts[0]
    not in (
        "worker",
        "cli",
        "__init__.py",
        "celeryconfig.py",
        "aio",
        "caller",
        "contrib",
        "mcp",
    )
)


def test_the_plain_modules_import_without_celery() -> None:
    code = (
        "import importlib, importlib.util, sys, types\n"
        "sys.modules['celery'] = None  # any import of Celery fails\n"
        # The package without its __init__ (which defines the app, the worker's business).
        "package = types.ModuleType('captcha_tasks')\n"
        "package.__path__ = importlib.util.find_spec('captcha_tasks').submodule_search_locations\n"
        "sys.modules['captcha_tasks'] = package\n"
        f"for name in {PLAIN!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('captcha_tasks.worker')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # and nothing of the worker came along
