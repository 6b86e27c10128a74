"""The runtime never imports the developer tools (``captcha_tasks_dev``) or the sandbox
(``captcha_tasks_sandbox``): they are distributions of their own, absent from a
production install, so a worker or the CLI that loaded them would fail there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.workers import ROOT

#: Run in a fresh interpreter: everything a worker, a client or the CLI loads, then the
#: ``captcha_tasks_dev`` and ``captcha_tasks_sandbox`` modules that got imported.
#: ``argv[1]``, when given, is one more module to import first (the check's own check).
RUNTIME = """
import importlib, json, pkgutil, sys
if len(sys.argv) > 1:
    importlib.import_module(sys.argv[1])
import captcha_tasks
import captcha_tasks.cli.main
import captcha_tasks.worker
from captcha_tasks import app
for info in pkgutil.walk_packages(captcha_tasks.worker.__path__, "captcha_tasks.worker."):
    importlib.import_module(info.name)
app.loader.import_default_modules()  # the task modules a worker imports at start
assert app.conf.broker_url
assert "captcha_tasks.solve_recaptcha_v2" in app.tasks
from click.testing import CliRunner
shown = CliRunner().invoke(captcha_tasks.cli.main.main, ["--help"], prog_name="captcha-tasks")
assert shown.exit_code == 0 and "Usage:" in shown.output, shown.output
print(json.dumps(sorted(name for name in sys.modules
                        if name.split(".")[0] in ("captcha_tasks_dev", "captcha_tasks_sandbox"))))
"""


def devtools_imported(*first: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", RUNTIME, *first],
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_runtime_imports_no_devtools_module() -> None:
    assert devtools_imported() == []


@pytest.mark.parametrize("module", ["captcha_tasks_dev.procs", "captcha_tasks_sandbox.config"])
def test_the_check_sees_a_devtools_module_when_one_is_imported(module: str) -> None:
    assert module in devtools_imported(module)
