"""Real ``celery -A captcha_tasks worker`` processes for tests, and their environment.

The ``worker_factory`` fixture (tests/conftest.py) starts workers with :func:`start_worker`
and stops them by PID at teardown; tests that start a worker some other way (the
installed wheel's, say) wait for it with :func:`wait_for_worker`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from captcha_tasks_dev.procs import Child, ChildExited, logged, spawn, wait_ready

__all__ = [
    "ROOT",
    "TEST_TIME_SCALE",
    "WorkerProcess",
    "provider_env",
    "provider_sandbox",
    "start_worker",
    "wait_for_worker",
    "worker_env",
]

#: The repository's root (workers run there, as ``make`` runs them).
ROOT = Path(__file__).resolve().parents[2]
#: Solver timings in tests run this much faster than in production.
TEST_TIME_SCALE = 0.05

#: A started worker: its name, process (``.proc``), log file and ``log()``.
WorkerProcess = Child


def worker_env(sandbox_url: str, **extra: str) -> dict[str, str]:
    """Environment for a worker process that talks to the test Redis and ``sandbox_url``."""
    from captcha_tasks_sandbox import DEV_API_KEY

    env = {
        "CAPTCHA_TASKS_REDIS_URL": os.environ["CAPTCHA_TASKS_REDIS_URL"],
        "CAPTCHA_TASKS_SOLVER_URL": sandbox_url,
        "CAPTCHAAI_API_KEY": DEV_API_KEY,
        "CAPTCHA_TASKS_TIME_SCALE": str(TEST_TIME_SCALE),
        "CAPTCHA_TASKS_HTTP_TIMEOUT": "5",
    }
    env.update(extra)
    return env


def provider_sandbox(sandbox_factory: Any, provider: str) -> Any:
    """A started sandbox speaking ``provider``'s protocol and dialect (``sandbox_factory``:
    the fixture of tests/support/sandbox_fixtures.py)."""
    if provider in ("captchaai", "2captcha"):
        return sandbox_factory(dialect=provider)
    return sandbox_factory(protocol="json", dialect=provider)


def provider_env(sandbox: Any, provider: str) -> dict[str, str]:
    """:func:`worker_env` for a worker whose one provider is ``provider`` at ``sandbox``,
    with the sandbox's key for it."""
    from captcha_tasks_sandbox import dev_api_key

    env = {"CAPTCHA_TASKS_PROVIDER": provider, "CAPTCHA_TASKS_API_KEY": dev_api_key(provider)}
    return worker_env(sandbox.url, **env)


def start_worker(
    env: dict[str, str],
    log_dir: Path,
    name: str,
    *,
    concurrency: int = 1,
    pool: str = "prefork",
    extra_args: list[str] | None = None,
    wait: bool = True,
    launcher: Sequence[str] = ("-m", "celery"),
) -> WorkerProcess:
    """A worker named ``name`` with this process's environment and ``env``, logging to
    ``log_dir/<name before the @>.log``; once it is ready, unless ``wait`` is false.
    ``launcher``: what runs Celery's command line (``python -m celery`` by default)."""
    argv = [
        sys.executable,
        *launcher,
        "-A",
        "captcha_tasks",
        "worker",
        "-n",
        name,
        "-c",
        str(concurrency),
        "-P",
        pool,
        "-l",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        *(extra_args or []),
    ]
    log_path = log_dir / f"{name.split('@')[0]}.log"
    full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
    worker = spawn(name, argv, log_path, env=full_env, cwd=ROOT, stop_timeout=20.0)
    if wait:
        wait_for_worker(worker)
    return worker


def wait_for_worker(worker: WorkerProcess, timeout: float = 60.0) -> None:
    """Until the worker logs that it is ready (it consumes from then on)."""
    try:
        wait_ready(worker, logged(worker, " ready."), timeout=timeout, what=f"worker {worker.name}")
    except ChildExited as exc:
        raise AssertionError(str(exc)) from None
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{worker.log()}") from None


def outcomes(
    results: list[Any], timeout: float, *, codes: bool = False
) -> list[dict[str, Any] | str]:
    """Each task's result dict once all are ready (within ``timeout``), else its error's
    type name (``codes``: with its code, ``InvalidApiKey(ERROR_...)``); ``"LOST"`` for a
    task without a final state by then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(r.ready() for r in results):
        time.sleep(0.1)
    out: list[dict[str, Any] | str] = []
    for r in results:
        if not r.ready():
            out.append("LOST")
        elif r.successful():
            out.append(r.result)
        elif codes:
            out.append(f"{type(r.result).__name__}({getattr(r.result, 'code', '')})")
        else:
            out.append(type(r.result).__name__)
    return out
