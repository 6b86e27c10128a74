"""Shared fixtures: real redis-server processes, real celery workers, the sandbox.

Every process a fixture starts is stopped by PID when the fixture ends.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from captcha_tasks.devtools.procs import stop_process, wait_until
from captcha_tasks.devtools.redis_server import RedisServer
from captcha_tasks.settings import get_settings

pytest_plugins = ["tests.support.sandbox_fixtures"]

ROOT = Path(__file__).resolve().parent.parent
#: Solver timings in tests run this much faster than in production.
TEST_TIME_SCALE = 0.05


_SESSION_REDIS: RedisServer | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Start the session's redis-server before any test module is imported, and point
    the whole process (``captcha_tasks.app`` included) at it through the environment."""
    global _SESSION_REDIS
    _SESSION_REDIS = RedisServer().start()
    os.environ["CAPTCHA_TASKS_REDIS_URL"] = _SESSION_REDIS.url
    for name in (
        "CAPTCHA_TASKS_BROKER_URL",
        "CAPTCHA_TASKS_RESULT_BACKEND",
        "CAPTCHA_TASKS_STATE_URL",
        "CAPTCHAAI_API_KEY",
        "CAPTCHA_TASKS_SOLVER_URL",
    ):
        os.environ.pop(name, None)
    os.environ["CAPTCHA_TASKS_TIME_SCALE"] = str(TEST_TIME_SCALE)
    get_settings.cache_clear()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # AsyncResults left by tests unsubscribe from Redis when collected: let them do it
    # while the server still answers, not in a warning after it stopped.
    gc.collect()
    if _SESSION_REDIS is not None:
        _SESSION_REDIS.stop()


@pytest.fixture(scope="session")
def redis_server() -> RedisServer:
    """The session's real redis-server (each test gets a flushed db via ``redis_url``)."""
    assert _SESSION_REDIS is not None
    return _SESSION_REDIS


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    with redis_server.client() as conn:
        conn.flushall()
    yield redis_server.url


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Set environment variables for this test and re-read the settings."""

    def apply(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()

    yield apply
    get_settings.cache_clear()


@dataclass
class WorkerProcess:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def worker_factory(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real ``celery -A captcha_tasks worker`` processes with the given environment."""
    started: list[WorkerProcess] = []

    def start(
        env: dict[str, str],
        *,
        name: str | None = None,
        concurrency: int = 1,
        pool: str = "prefork",
        extra_args: list[str] | None = None,
        wait: bool = True,
    ) -> WorkerProcess:
        name = name or f"test{len(started) + 1}-{os.getpid()}@127.0.0.1"
        log_path = tmp_path / f"{name.split('@')[0]}.log"
        full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        argv = [sys.executable, "-m", "celery", "-A", "captcha_tasks", "worker",
                "-n", name, "-c", str(concurrency), "-P", pool, "-l", "INFO",
                "--without-gossip", "--without-mingle"]  # fmt: skip
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                argv + (extra_args or []),
                cwd=ROOT,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = WorkerProcess(name, proc, log_path)
        started.append(worker)
        if wait:
            wait_for_worker(worker)
        return worker

    yield start
    for worker in reversed(started):
        stop_process(worker.proc, timeout=20, group=True)


def wait_for_worker(worker: WorkerProcess, timeout: float = 60.0) -> None:
    """Until the worker logs that it is ready (it consumes from then on)."""

    def ready() -> bool:
        if worker.proc.poll() is not None:
            raise AssertionError(f"worker exited with {worker.proc.returncode}:\n{worker.log()}")
        return " ready." in worker.log()

    try:
        wait_until(ready, timeout=timeout, interval=0.1, what=f"worker {worker.name}")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{worker.log()}") from None


@pytest.fixture
def celery_app(redis_url: str) -> Any:
    """The real ``captcha_tasks.app``, a client of the session's Redis (flushed)."""
    from captcha_tasks import app

    assert app.conf.broker_url == redis_url
    return app


def worker_env(sandbox_url: str, **extra: str) -> dict[str, str]:
    """Environment for a worker process that talks to the test Redis and ``sandbox_url``."""
    from captcha_tasks.devtools.sandbox import DEV_API_KEY

    env = {
        "CAPTCHA_TASKS_REDIS_URL": os.environ["CAPTCHA_TASKS_REDIS_URL"],
        "CAPTCHA_TASKS_SOLVER_URL": sandbox_url,
        "CAPTCHAAI_API_KEY": DEV_API_KEY,
        "CAPTCHA_TASKS_TIME_SCALE": str(TEST_TIME_SCALE),
        "CAPTCHA_TASKS_HTTP_TIMEOUT": "5",
    }
    env.update(extra)
    return env
