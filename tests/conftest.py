"""Shared fixtures: real redis-server processes, real celery workers, the sandbox.

Every process a fixture starts is stopped by PID when the fixture ends.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from captcha_tasks.settings import get_settings
from captcha_tasks.worker.celery_internals.result_backend import stop_result_consumers
from captcha_tasks_dev.procs import stop_process
from captcha_tasks_dev.redis_server import RedisServer
from tests.support.processes import SpawnPython, python_processes
from tests.support.workers import TEST_TIME_SCALE, WorkerProcess, start_worker, wait_for_worker

pytest_plugins = ["tests.support.sandbox_fixtures", "tests.support.flower"]


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
    # Celery reads the app's configuration once, on first use: read it now, so that a test
    # that runs a command under another environment (CliRunner's env=) cannot be first.
    from captcha_tasks import app

    assert app.conf.broker_url == _SESSION_REDIS.url


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # AsyncResults left by tests unsubscribe from Redis when collected: close the result
    # consumers first, so that they have nothing to send to servers the tests stopped.
    stop_result_consumers()
    if _SESSION_REDIS is not None:
        _SESSION_REDIS.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` first (in their order), then the rest (in theirs): with the
    tier's tests side by side (pytest-xdist), a long test started last would be the tier's
    tail, the others' processes idle while it runs."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


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


@pytest.fixture
def spawn() -> Iterator[SpawnPython]:
    """Starts ``python -c CODE ARGS...`` children (:mod:`tests.support.processes`), all
    stopped by PID when the test ends."""
    with python_processes() as start:
        yield start


@pytest.fixture
def worker_factory(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real ``celery -A captcha_tasks worker`` processes with the given environment
    (see :func:`tests.support.workers.start_worker`); killed by PID at teardown."""
    started: list[WorkerProcess] = []

    def start(env: dict[str, str], *, name: str | None = None, **options: Any) -> WorkerProcess:
        name = name or f"test{len(started) + 1}-{os.getpid()}@127.0.0.1"
        wait = options.pop("wait", True)
        worker = start_worker(env, tmp_path, name, wait=False, **options)
        started.append(worker)
        if wait:
            wait_for_worker(worker)
        return worker

    yield start
    # The test is over: its workers are killed, not given the warm shutdown that costs an
    # idle worker 1.7 s (about 3.5 minutes of the integration tier). Tests about shutdown
    # stop their workers themselves, and the next test starts on a flushed Redis.
    for worker in reversed(started):
        stop_process(worker.proc, sig=signal.SIGKILL, group=True)


@pytest.fixture
def no_provider() -> Iterator[str]:
    """A provider URL nothing answers at: a loopback port bound, never listening (a
    connection to it is refused), held for the test so no one else takes it."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


@pytest.fixture
def celery_app(redis_url: str) -> Any:
    """The real ``captcha_tasks.app``, a client of the session's Redis (flushed)."""
    from captcha_tasks import app

    assert app.conf.broker_url == redis_url
    return app
