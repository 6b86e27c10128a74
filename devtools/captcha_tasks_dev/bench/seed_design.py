"""The baseline of ``captcha-tasks-dev bench solve``: the seeds' design as a Celery task.

What the seeds' code does (``CaptchaWorker.solve_captcha`` in seeds 000 and 001,
and ``workerSolve`` in their Node.js halves): POST ``in.php``; if its status is
not 1, give the error back (no retry, so ``ERROR_NO_SLOT_AVAILABLE`` ends the
solve); then up to 60 times: sleep 5 s, GET ``res.php?action=get``; the token
when it is ready, the error for anything but ``CAPCHA_NOT_READY``, ``TIMEOUT``
after the 60th poll. The worker process is held for the whole solve, nothing but
the worker's concurrency bounds the captchas in flight, and every request opens
a new connection (``requests.post``/``requests.get``, no session).

Note: the seeds' code sleeps 5 s before the *first* poll too; it does not wait the
15-20 s that 2Captcha's API documentation advises for reCAPTCHA v2. ``first_wait`` (unscaled
seconds) lets a run model that advice instead.

Three differences, none of which changes the design: an HTTP timeout on each
call (the seeds have none), errors raise :class:`SeedSolveError` so the task
fails visibly (the seeds return ``{"error": code}`` to their caller), and the
result carries the captcha id so the benchmark can match it with the sandbox's
per-captcha times. Waits scale with ``CAPTCHA_TASKS_TIME_SCALE`` like ours.

Run it with ``celery -A captcha_tasks_dev.bench.seed_design worker -P prefork -c 4``;
it uses ``CAPTCHA_TASKS_REDIS_URL``'s server on db :data:`SEED_DB`.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests
from celery import Celery

from captcha_tasks.settings import Settings, get_settings

__all__ = [
    "SEED_DB",
    "SEED_MAX_POLLS",
    "SEED_POLL_WAIT",
    "SeedSolveError",
    "app",
    "baseline_config",
    "configure",
    "seed_redis_url",
    "solve_recaptcha_v2",
]

#: Redis database of the baseline's broker and results (ours use the URL's own).
SEED_DB = 1
#: The seeds' ``time.sleep(5)`` before each poll (unscaled seconds).
SEED_POLL_WAIT = 5.0
#: The seeds' ``for _ in range(60)``.
SEED_MAX_POLLS = 60


class SeedSolveError(Exception):
    """What the seeds hand back as ``{"error": code}``: the provider's code or TIMEOUT."""


def seed_redis_url(url: str, db: int = SEED_DB) -> str:
    """``url`` pointed at database ``db`` (``redis://h:p/0`` -> ``redis://h:p/1``)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "db"] + [("db", str(db))]
        return urlunsplit(parts._replace(query=urlencode(query)))
    return urlunsplit(parts._replace(path=f"/{db}"))


app = Celery("seed_design", set_as_current=False)


def baseline_config(settings: Settings, db: int = SEED_DB) -> dict[str, Any]:
    """A baseline's Celery configuration: ``settings``' Redis at database ``db`` for its
    broker and results, JSON, acks late, prefetch 1 (what a careful user sets)."""
    url = seed_redis_url(settings.redis_url, db)
    return {
        "broker_url": url,
        "result_backend": url,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_acks_late": True,
        "worker_prefetch_multiplier": 1,
        "broker_connection_retry_on_startup": True,
        "result_expires": settings.result_expires,
    }


def configure(settings: Settings) -> None:
    """Point the baseline's app at ``settings``' Redis (db :data:`SEED_DB`) before it is
    first used. Otherwise it reads the environment when it is first configured."""
    app.conf.update(baseline_config(settings))


# Lazy: importing this module reads no settings.
app.add_defaults(lambda: baseline_config(get_settings()))


def _solve(sitekey: str, pageurl: str, first_wait: float = SEED_POLL_WAIT) -> dict[str, Any]:
    settings = get_settings()
    key = settings.require_api_key()
    base = settings.provider_config().url
    submit = requests.post(
        f"{base}/in.php",
        data={
            "key": key,
            "method": "userrecaptcha",
            "googlekey": sitekey,
            "pageurl": pageurl,
            "json": 1,
        },
        timeout=settings.http_timeout,
    ).json()
    if submit.get("status") != 1:
        raise SeedSolveError(str(submit.get("request")))
    captcha_id = str(submit["request"])
    wait = first_wait
    for _ in range(SEED_MAX_POLLS):
        time.sleep(settings.scaled(wait))
        wait = SEED_POLL_WAIT
        result = requests.get(
            f"{base}/res.php",
            params={"key": key, "action": "get", "id": captcha_id, "json": "1"},
            timeout=settings.http_timeout,
        ).json()
        if result.get("status") == 1:
            return {"solution": result["request"], "source": "api", "captcha_id": captcha_id}
        if result.get("request") != "CAPCHA_NOT_READY":
            raise SeedSolveError(str(result.get("request")))
    raise SeedSolveError("TIMEOUT")


solve_recaptcha_v2 = app.task(name="seed_design.solve_recaptcha_v2")(_solve)
