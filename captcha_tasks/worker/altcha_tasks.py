"""``solve_altcha``: Altcha's proof of work, solved by the worker itself unless a
setting says otherwise.

``CAPTCHA_TASKS_ALTCHA_SOLVER`` decides who counts to the number. ``worker`` (the
default): the task runs in the worker's pool like any Celery task, fetches the challenge
when given its URL, counts (:mod:`captcha_tasks.provider.altcha`) and returns the
payload; no provider is called, no thread of the plan is taken, nothing is spent.
``provider``: the challenge becomes an ordinary solve (:class:`~captcha_tasks.provider.
Altcha`), admitted to the solve engine as every solve task is (route, budget, cost).
``auto``: the worker solves a challenge whose ``maxnumber`` is within
``CAPTCHA_TASKS_ALTCHA_MAX_NUMBER``, a provider the harder ones.

A provider is always sent the challenge itself, never its URL: the worker fetches it
(from allowlisted hosts, through pool proxy ``proxy_id`` when given), which ``auto``
needs to read ``maxnumber`` and CapMonster Cloud needs for its fields, and which keeps
every provider of a route able to take the same task. With nothing for the provider to
load, its task is the proxyless one. The consumer admits a challenge given as JSON
without the pool; a fetch or a proof of work goes to the pool
(:class:`~.celery_internals.admit_inline.NotInline`). The caller's ``delay()`` runs the same checks
first: a bad challenge, both or neither challenge arguments, a ``maxnumber`` the worker
would refuse raise :class:`InvalidTaskInput` there, nothing sent.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any
from urllib.parse import urljoin

import requests

from ..errors import InvalidTaskInput
from ..provider import Altcha
from ..provider.altcha import AltchaChallenge, check_page_url, parse_challenge, solve
from ..results import TokenResult
from ..session.pages import check_url, fetch
from ..session.proxies import ProxyPool, proxy_url
from ..settings import Settings
from ..state import state_redis
from .celery_internals.admit_inline import NotInline, admitting_inline
from .solve_tasks import SolveTask
from .typed import task

__all__ = ["solve_altcha"]


def _challenge_url(pageurl: str, challenge_url: object) -> str:
    """``challenge_url`` as the widget resolves its ``challengeurl``: against the page."""
    if not isinstance(challenge_url, str) or not challenge_url or len(challenge_url) > 2048:
        raise InvalidTaskInput("solve_altcha: challenge_url must be a URL (or a path of pageurl)")
    return urljoin(pageurl, challenge_url)


def _fetch_challenge(settings: Settings, url: str, proxy_id: str | None) -> str:
    """The challenge endpoint's body: fetched as page tasks fetch (allowlisted hosts,
    redirects checked hop by hop), through pool proxy ``proxy_id`` when given."""
    session = requests.Session()
    try:
        if proxy_id:
            address = proxy_url(ProxyPool(state_redis(settings), settings).get(proxy_id))
            session.proxies = {"http": address, "https": address}
        try:
            page = fetch(session, url, settings)
        except requests.RequestException as exc:
            raise InvalidTaskInput(
                f"solve_altcha: could not fetch the challenge: {type(exc).__name__}",
                "ALTCHA_CHALLENGE_URL",
            ) from None
    finally:
        session.close()
    if page.status != 200:
        raise InvalidTaskInput(
            f"solve_altcha: the challenge URL answered HTTP {page.status}", "ALTCHA_CHALLENGE_URL"
        )
    return page.text


def _json_text(challenge_json: object) -> str:
    """The challenge as JSON text (the caller may give it decoded): what a provider is
    sent, and what the worker parses."""
    if isinstance(challenge_json, str):
        return challenge_json
    try:
        return json.dumps(challenge_json, separators=(",", ":"))
    except (TypeError, ValueError):
        raise InvalidTaskInput(
            "solve_altcha: challenge_json must be the challenge's JSON (text or decoded)",
            "BAD_ALTCHA_CHALLENGE",
        ) from None


def _to_provider(settings: Settings, challenge: AltchaChallenge) -> bool:
    """Whether ``CAPTCHA_TASKS_ALTCHA_SOLVER`` sends ``challenge`` to a provider."""
    mode = settings.altcha_solver
    return mode == "provider" or (
        mode == "auto" and challenge.max_number > settings.altcha_max_number
    )


@task("captcha_tasks.solve_altcha", base=SolveTask)
def solve_altcha(
    self: SolveTask,
    pageurl: str,
    *,
    challenge_json: str | dict[str, Any] | None = None,
    challenge_url: str | None = None,
    proxy_id: str | None = None,
) -> TokenResult:
    """Solve an Altcha proof of work: the payload the widget posts in ``solution``.

    Exactly one of ``challenge_json``, the JSON the widget's challenge endpoint returns
    (as text or decoded), and ``challenge_url``, that endpoint (absolute, or a path
    resolved against ``pageurl`` as the widget does), which the worker fetches: from
    ``CAPTCHA_TASKS_ALLOWED_DOMAINS`` hosts only, through pool proxy ``proxy_id`` when
    given.

    By default (``CAPTCHA_TASKS_ALTCHA_SOLVER=worker``) the worker solves it: no provider
    is used and nothing is spent (``cost`` is ``"0"``, ``provider`` and ``protocol`` are
    ``None``); a challenge whose ``maxnumber`` is over ``CAPTCHA_TASKS_ALTCHA_MAX_NUMBER``
    is refused (``ALTCHA_TOO_HARD``), one with no solution in range fails with
    ``CaptchaUnsolvable`` (``ALTCHA_NO_SOLUTION``); ``expires_at``: the salt's
    ``expires``, where it sets one. With ``provider``, or ``auto`` and a challenge over
    that bound, it is solved at a configured provider that offers Altcha like any solve
    task (``TYPE_NOT_OFFERED`` where none does), with that solve's ``provider``,
    ``protocol`` and ``cost``."""
    started = time.monotonic()
    check_page_url(pageurl)
    if (challenge_json is None) == (challenge_url is None):
        raise InvalidTaskInput(
            "solve_altcha: give exactly one of challenge_json and challenge_url",
            "BAD_ALTCHA_CHALLENGE",
        )
    if proxy_id is not None and (not isinstance(proxy_id, str) or not 0 < len(proxy_id) <= 64):
        raise InvalidTaskInput("solve_altcha: proxy_id must be a proxy pool id")
    settings = self.settings
    # The worker's bound refuses only what the worker would have to solve.
    bound = settings.altcha_max_number if settings.altcha_solver == "worker" else sys.maxsize
    challenge: AltchaChallenge | None = None
    text = url = ""
    if challenge_json is not None:
        text = _json_text(challenge_json)
        challenge = parse_challenge(text, max_number_bound=bound)
        if _to_provider(settings, challenge):
            return self.admit(lambda: Altcha(pageurl, text))
    else:
        url = _challenge_url(pageurl, challenge_url)
        # The caller checks the URL's form, and its allowlist if it has one; no DNS here
        # (as fetch_page's caller check).
        check_url(url, settings, resolve=False, allowlist=bool(settings.allowed_domains))
    self.stop_if_checking()
    if admitting_inline():
        raise NotInline  # a fetch or a proof of work: the pool's to run
    if challenge is None:
        text = _fetch_challenge(settings, url, proxy_id)
        challenge = parse_challenge(text, max_number_bound=bound)
        if _to_provider(settings, challenge):
            return self.admit(lambda: Altcha(pageurl, text))
    solution = solve(challenge)
    return {
        "solution": solution.payload(challenge),
        "source": "api",
        "type": "altcha",
        # No provider's id exists: the challenge's own hash names what was solved.
        "captcha_id": challenge.challenge,
        "solve_seconds": round(time.monotonic() - started, 3),
        # Not measured: the message carries no time it was sent at.
        "queued_seconds": 0.0,
        "expires_at": challenge.expires,
        "submits": 0,
        "polls": 0,
        "provider": None,
        "protocol": None,
        "cost": "0",
    }
