"""Every example of the documentation site (docs/examples/*.py, included in its pages) runs
as written against the sandbox and a real worker, and prints what the pages say it does.

Each example runs as its own ``python`` process in the environment ``source .run/env``
would give it: the test Redis, the sandbox's URL and key, the demo site allowed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest

from tests.support.workers import ROOT, worker_env

pytestmark = pytest.mark.integration

EXAMPLES = ROOT / "docs" / "examples"
#: What each example prints, line by line (regular expressions).
EXPECTED: dict[str, list[str]] = {
    "first_solve.py": [r"03AFcWeA[\w-]{16}\.\.\.", r"recaptcha_v2 captchaai \d+ \d+\.\d+"],
    "asyncio_solve.py": [
        r"03AFcWeA[\w-]{8} \d+",
        r"50 tokens",
        r"\{'balance': '100\.0000', 'provider': 'default', 'protocol': 'captchaai'\}",
        r"gave up waiting; the solve itself goes on",
    ],
    "fetch_page.py": [r"200 True api"],
    "mcp_agent.py": [
        r"24 tools",
        r"recaptcha_v2 into g-recaptcha-response 03AFcWeA",
        r"example 0",
    ],
}


def test_every_example_is_checked() -> None:
    assert {path.name for path in EXAMPLES.glob("*.py")} == set(EXPECTED)


def test_every_example_is_included_in_a_page() -> None:
    pages = "\n".join(path.read_text() for path in (ROOT / "docs").rglob("*.md"))
    for name in EXPECTED:
        assert f'--8<-- "{name}"' in pages, f"{name} is in no page"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_example_runs_as_written(
    name: str, celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    host = demo_sandbox.demo_url.split("//")[1]
    env = worker_env(demo_sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=host)
    worker_factory(env, concurrency=2)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(EXPECTED[name]), done.stdout
    for line, pattern in zip(lines, EXPECTED[name], strict=True):
        assert re.fullmatch(pattern, line), f"{name} printed {line!r}, not /{pattern}/"
