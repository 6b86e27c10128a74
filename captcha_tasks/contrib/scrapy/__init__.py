"""Scrapy downloader middlewares that make a crawl one visitor with the Celery cluster
(``pip install 'captcha_tasks[scrapy]'``; docs/SCRAPY.md).

In the Scrapy project's ``settings.py``::

    DOWNLOADER_MIDDLEWARES = {
        "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
        "captcha_tasks.contrib.scrapy.CaptchaTasksCookiesMiddleware": 700,
        "captcha_tasks.contrib.scrapy.CaptchaTasksChallengeMiddleware": 585,
    }

- :class:`CaptchaTasksCookiesMiddleware`: allowlisted hosts' cookies come from and go to
  the cluster's shared jar (:mod:`.cookies`).
- :class:`CaptchaTasksChallengeMiddleware`: a challenged response has the cluster run
  ``fetch_page`` (token pool, session lock, shared jar), then its request is re-issued
  (:mod:`.challenge`).

Scrapy settings ``CAPTCHA_TASKS_ENABLED``, ``CAPTCHA_TASKS_SOLVE_TIMEOUT``,
``CAPTCHA_TASKS_MAX_REISSUES`` (:mod:`.options`); the cluster itself (Redis, allowlist)
is configured by the environment, as every worker is. Scrapy must run on asyncio's
reactor (its default since 2.13).
"""

import importlib.util

if importlib.util.find_spec("scrapy") is None:  # one clear line, not a traceback into Scrapy
    raise ModuleNotFoundError(
        "captcha_tasks.contrib.scrapy needs Scrapy: pip install 'captcha_tasks[scrapy]'",
        name="scrapy",
    )

from .challenge import DONT_SOLVE, REISSUES, CaptchaTasksChallengeMiddleware, ChallengeNotSolved
from .cookies import CaptchaTasksCookiesMiddleware
from .options import SETTING_NAMES, Options

__all__ = [
    "DONT_SOLVE",
    "REISSUES",
    "SETTING_NAMES",
    "CaptchaTasksChallengeMiddleware",
    "CaptchaTasksCookiesMiddleware",
    "ChallengeNotSolved",
    "Options",
]
