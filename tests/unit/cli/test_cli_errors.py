"""Every command fails the same way: one ``Error:`` line from cli/errors.py, the Redis
URL's password masked, no traceback."""

from __future__ import annotations

import sys
from unittest import mock

import pytest
from click.testing import CliRunner, Result

from captcha_tasks.cli.main import run
from captcha_tasks.settings import get_settings
from captcha_tasks_dev.procs import free_port

PASSWORD = "s3cret-Pw-81"


class EntryPoint:
    """``captcha-tasks`` as installed (``run()`` reading ``sys.argv``), for CliRunner."""

    name = "captcha-tasks"

    def main(self, args: list[str], prog_name: str = "captcha-tasks", **extra: object) -> None:
        get_settings.cache_clear()  # the environment CliRunner set for this call
        try:
            with mock.patch.object(sys, "argv", [prog_name, *args]):
                run()
        finally:
            get_settings.cache_clear()


@pytest.fixture(scope="module")
def closed_redis() -> tuple[dict[str, str], str]:
    """An environment whose Redis (with a password) is a port nothing listens on."""
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"
    return {"CAPTCHA_TASKS_REDIS_URL": url}, url.replace(PASSWORD, "***")


def one_line(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and PASSWORD not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


def invoke(args: list[str], env: dict[str, str]) -> Result:
    return CliRunner().invoke(EntryPoint(), args, env=env)  # type: ignore[arg-type]


def test_status_without_redis(closed_redis: tuple[dict[str, str], str]) -> None:
    env, masked = closed_redis
    line = one_line(invoke(["status", "--workers-timeout", "0"], env))
    assert line.startswith(f"Error: shared state at {masked}: "), line


def test_rollout_drain_auto_without_redis_says_what_to_do(
    closed_redis: tuple[dict[str, str], str],
) -> None:
    env, masked = closed_redis
    args = ["rollout", "--to", "v2", "--restart", "true", "--drain-timeout", "auto"]
    line = one_line(invoke(args, env))
    assert line.startswith(f"Error: --drain-timeout auto: shared state at {masked}: "), line
    assert line.endswith("; give the seconds instead"), line
