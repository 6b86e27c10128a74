"""What a new user sees when something is wrong: one line that says what, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from captcha_tasks_dev.procs import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("CAPTCHA")}
    full.update(env)
    return subprocess.run(
        argv, cwd=ROOT, env=full, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("command", ["worker", "inspect"])
def test_a_bad_setting_stops_celery_with_one_line_naming_it(command: str) -> None:
    argv = [sys.executable, "-m", "celery", "-A", "captcha_tasks", command]
    done = _run([*argv, "ping"] if command == "inspect" else argv, CAPTCHA_TASKS_THREADS="abc")
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["Error: captcha_tasks: CAPTCHA_TASKS_THREADS must be an integer, got 'abc'"]


def test_delay_against_a_redis_that_does_not_answer_is_one_typed_error() -> None:
    url = f"redis://:pw-Zq81xK@127.0.0.1:{free_port()}/0"  # nothing listens there
    code = (
        "from captcha_tasks import solve_turnstile\n"
        "from captcha_tasks.errors import RedisUnavailable\n"
        "try:\n"
        "    solve_turnstile.delay('0x4AAAAAAABkMYinukE8nzY', 'https://example.com/')\n"
        "except RedisUnavailable as exc:\n"
        "    print(type(exc).__name__, exc.code, exc.__cause__, exc.__suppress_context__)\n"
        "    print(exc)\n"
    )
    done = _run([sys.executable, "-c", code], CAPTCHA_TASKS_REDIS_URL=url)
    assert done.returncode == 0, done.stderr
    kind, message = done.stdout.splitlines()
    assert kind == "RedisUnavailable REDIS_UNAVAILABLE None True"  # no chain of retries
    assert "cannot reach Redis at redis://:***@127.0.0.1" in message
    assert "pw-Zq81xK" not in done.stdout + done.stderr
