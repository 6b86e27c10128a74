"""The DIY column of ``captcha-tasks-dev bench solve``: what a user writes instead of the engine.

The official 2Captcha client (``2captcha-python``, module ``twocaptcha``) called inside a
plain Celery task, on workers run with ``-P threads`` whose concurrencies add up to the
plan's threads T, with ``task_acks_late=True`` and ``worker_prefetch_multiplier=1``::

    solver = TwoCaptcha(API_KEY)

    @app.task
    def solve_recaptcha_v2(sitekey, pageurl):
        return solver.recaptcha(sitekey=sitekey, url=pageurl)["code"]

The client submits, reads ``res.php`` at once, then every ``pollingInterval`` seconds
(its default: 10) until the answer is ready or its timeout (``recaptchaTimeout``: 600 s
for reCAPTCHA, ``defaultTimeout``: 120 s for the rest) has passed; each request opens a
new HTTPS connection (``requests.get``, no session). The thread holds the task for the
whole solve. Its waits scale with ``CAPTCHA_TASKS_TIME_SCALE`` like the engine's; the
client truncates its polling interval to whole seconds (``int()``), and so at most scales
it down to 1 s (0 would read without pause).

Two differences, neither of which changes the design: the client points at the run's
sandbox (``server=host:port``; the client always speaks https), and the result carries
the captcha id beside the token so the benchmark can match it with the sandbox's
per-captcha times.

Run it with ``celery -A captcha_tasks_dev.bench.diy_design worker -P threads -c N``;
it uses ``CAPTCHA_TASKS_REDIS_URL``'s server on db :data:`DIY_DB`.
"""

from __future__ import annotations

import functools
import math
from typing import Any
from urllib.parse import urlsplit

from celery import Celery

from captcha_tasks.settings import Settings, get_settings

from .seed_design import baseline_config, seed_redis_url

__all__ = [
    "DIY_DB",
    "SDK_DEFAULT_TIMEOUT",
    "SDK_POLLING_INTERVAL",
    "SDK_RECAPTCHA_TIMEOUT",
    "app",
    "configure",
    "diy_redis_url",
    "sdk_timings",
    "solve_recaptcha_v2",
    "split_concurrency",
]

#: Redis database of the DIY column's broker and results.
DIY_DB = 2
#: The client's defaults (``TwoCaptcha.__init__``), unscaled seconds.
SDK_POLLING_INTERVAL = 10
SDK_DEFAULT_TIMEOUT = 120
SDK_RECAPTCHA_TIMEOUT = 600


def diy_redis_url(url: str) -> str:
    """``url`` pointed at database :data:`DIY_DB`."""
    return seed_redis_url(url, DIY_DB)


def sdk_timings(time_scale: float) -> dict[str, int | float]:
    """The client's constructor arguments for its waits, its defaults scaled by
    ``time_scale``: the polling interval in whole seconds as the client uses it, at
    least 1."""
    return {
        "pollingInterval": max(1, math.floor(SDK_POLLING_INTERVAL * time_scale)),
        "defaultTimeout": SDK_DEFAULT_TIMEOUT * time_scale,
        "recaptchaTimeout": SDK_RECAPTCHA_TIMEOUT * time_scale,
    }


def split_concurrency(threads: int, workers: int) -> list[int]:
    """Each worker's thread pool size: ``threads`` shared out, the first ones taking the
    remainder (every worker at least 1)."""
    base, extra = divmod(threads, workers)
    return [max(1, base + (1 if i < extra else 0)) for i in range(workers)]


app = Celery("diy_design", set_as_current=False)


def configure(settings: Settings) -> None:
    """Point the DIY app at ``settings``' Redis (db :data:`DIY_DB`) before it is first
    used. Otherwise it reads the environment when it is first configured."""
    app.conf.update(baseline_config(settings, DIY_DB))


# Lazy: importing this module reads no settings.
app.add_defaults(lambda: baseline_config(get_settings(), DIY_DB))


@functools.cache
def _solver() -> Any:
    from twocaptcha import TwoCaptcha  # the dev extra

    settings = get_settings()
    server = urlsplit(settings.provider_config().url).netloc
    return TwoCaptcha(settings.require_api_key(), server=server, **sdk_timings(settings.time_scale))


def _solve(sitekey: str, pageurl: str) -> dict[str, Any]:
    result = _solver().recaptcha(sitekey=sitekey, url=pageurl)
    return {"solution": result["code"], "captcha_id": str(result["captchaId"])}


solve_recaptcha_v2 = app.task(name="diy_design.solve_recaptcha_v2")(_solve)
