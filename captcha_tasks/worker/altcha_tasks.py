"""``solve_altcha``: ALTCHA's proof of work, v1 and v2, solved by the worker itself
unless a setting says otherwise.

``CAPTCHA_TASKS_ALTCHA_SOLVER`` decides who solves it. ``worker`` (the default): the
task runs in the worker's pool like any Celery task, fetches the challenge when given
its URL, solves it (:mod:`captcha_tasks.provider.altcha`: v1's number, v2's key
derivation through the official ``altcha`` library) and returns the payload; no provider
is called, no thread of the plan is taken, nothing is spent. ``provider``: a v1
challenge becomes an ordinary solve (:class:`~captcha_tasks.provider.Altcha`), admitted
to the solve engine as every solve task is (route, budget, cost). ``auto``: the worker
solves a v1 challenge within the bounds below, a provider the ones past them.

No provider takes a v2 challenge: 2Captcha's ``AltchaTask`` and in.php ``method=altcha``
(2captcha.com/api-docs/altcha) and Anti-Captcha's ``AltchaTaskProxyless``
(anti-captcha.com/apidoc/task-types/AltchaTaskProxyless) document the v1 challenge JSON
(``algorithm``, ``challenge``, ``salt``, ``signature``), CapMonster Cloud's
``CustomTask`` of class ``altcha`` takes v1's four fields and nothing else
(capmonstercloudclient 4.3.1 ``AltchaCustomTaskRequest``: ``challenge``,
``iterations``, ``salt``, ``signature``), and none documents v2's ``parameters``. So
``provider`` refuses a v2 challenge (``ALTCHA_V2_NOT_OFFERED``) and ``auto`` solves it
in the worker, within the bounds.

The bounds (``CAPTCHA_TASKS_ALTCHA_MAX_NUMBER``, ``_MAX_SECONDS``, ``_MAX_MEMORY_MIB``:
:func:`~captcha_tasks.provider.altcha.check_bounds`) are checked before any work from
the challenge's own fields, in the caller for a challenge given as JSON and in the worker
for every one; the search stops at ``_MAX_SECONDS``.

A provider is always sent the challenge itself, never its URL: the worker fetches it
(from allowlisted hosts, through pool proxy ``proxy_id`` when given), which ``auto``
needs to read the challenge and CapMonster Cloud needs for its fields, and which keeps
every provider of a route able to take the same task. With nothing for the provider to
load, its task is the proxyless one. The consumer admits a challenge given as JSON
without the pool; a fetch or a proof of work goes to the pool
(:class:`~.celery_internals.admit_inline.NotInline`). The caller's ``delay()`` runs the
same checks first: a bad challenge, both or neither challenge arguments, a challenge past
the bounds the worker would refuse raise :class:`InvalidTaskInput` there, nothing sent.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urljoin

import requests

from ..errors import InvalidTaskInput
from ..provider import Altcha
from ..provider.altcha import (
    AltchaBounds,
    AltchaChallengeV2,
    Challenge,
    check_bounds,
    check_page_url,
    read_challenge,
    solve_payload,
)
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
    redirects checked hop by hop, the body and the time bounded), through pool proxy
    ``proxy_id`` when given; one that cannot be read raises
    :class:`~captcha_tasks.errors.PageFetchFailed`."""
    session = requests.Session()
    try:
        if proxy_id:
            address = proxy_url(ProxyPool(state_redis(settings), settings).get(proxy_id))
            session.proxies = {"http": address, "https": address}
        page = fetch(session, url, settings)
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


def _to_provider(settings: Settings, challenge: Challenge) -> bool:
    """Whether ``CAPTCHA_TASKS_ALTCHA_SOLVER`` sends ``challenge`` to a provider; a v2
    challenge it would send is refused, as no provider takes one (see above)."""
    mode = settings.altcha_solver
    if isinstance(challenge, AltchaChallengeV2):
        if mode == "provider":
            raise InvalidTaskInput(
                "solve_altcha: an ALTCHA v2 challenge (key derivation) and "
                "CAPTCHA_TASKS_ALTCHA_SOLVER=provider, but no provider takes v2 (their "
                "ALTCHA tasks take v1's challenge, salt and signature): set it to auto or "
                "worker to solve v2 in the worker; nothing was sent",
                "ALTCHA_V2_NOT_OFFERED",
            )
        return False
    if mode == "provider":
        return True
    if mode == "auto":
        try:
            check_bounds(challenge, AltchaBounds.of(settings))
        except InvalidTaskInput:
            return True
    return False


def _check_shape(
    pageurl: object, challenge_json: object, challenge_url: object, proxy_id: object
) -> None:
    """What the caller and the worker both refuse before anything else."""
    check_page_url(pageurl)
    if (challenge_json is None) == (challenge_url is None):
        raise InvalidTaskInput(
            "solve_altcha: give exactly one of challenge_json and challenge_url",
            "BAD_ALTCHA_CHALLENGE",
        )
    if proxy_id is not None and (not isinstance(proxy_id, str) or not 0 < len(proxy_id) <= 64):
        raise InvalidTaskInput("solve_altcha: proxy_id must be a proxy pool id")


class AltchaTask(SolveTask):
    """``solve_altcha``'s base: the caller's check of a challenge it can read without a
    fetch (its bounds, or the provider's offer where it goes to one), else of the
    challenge URL's form and the caller's allowlist if it has one (no DNS here, as
    ``fetch_page``'s caller check)."""

    abstract = True

    def check_arguments(self, values: dict[str, Any]) -> None:
        pageurl, challenge_json = values["pageurl"], values["challenge_json"]
        _check_shape(pageurl, challenge_json, values["challenge_url"], values["proxy_id"])
        settings = self.settings
        if challenge_json is None:
            url = _challenge_url(pageurl, values["challenge_url"])
            check_url(url, settings, resolve=False, allowlist=bool(settings.allowed_domains))
            return
        text = _json_text(challenge_json)
        challenge = read_challenge(text)
        if _to_provider(settings, challenge):
            self.check_solve(lambda: Altcha(pageurl, text), {})
        else:
            check_bounds(challenge, AltchaBounds.of(settings))


@task("captcha_tasks.solve_altcha", base=AltchaTask)
def solve_altcha(
    self: AltchaTask,
    pageurl: str,
    *,
    challenge_json: str | dict[str, Any] | None = None,
    challenge_url: str | None = None,
    proxy_id: str | None = None,
) -> TokenResult:
    """Solve an ALTCHA proof of work, v1 or v2: the payload the widget posts in
    ``solution``.

    Exactly one of ``challenge_json``, the JSON the widget's challenge endpoint returns
    (as text or decoded: v1's ``algorithm``, ``challenge``, ``maxnumber`` or
    ``maxNumber``, ``salt``, ``signature``; v2's ``parameters`` and ``signature``, as the
    official library's ``Challenge.to_dict()``), and ``challenge_url``, that endpoint
    (absolute, or a path resolved against ``pageurl`` as the widget does), which the
    worker fetches: from ``CAPTCHA_TASKS_ALLOWED_DOMAINS`` hosts only, through pool proxy
    ``proxy_id`` when given.

    By default (``CAPTCHA_TASKS_ALTCHA_SOLVER=worker``) the worker solves it: no provider
    is used and nothing is spent (``cost`` is ``"0"``, ``provider`` and ``protocol`` are
    ``None``). The payload is what the official library's ``verify_solution_v1`` (v1) or
    ``verify_solution`` (v2) accepts. Before any work, a challenge past the bounds is
    refused with :class:`InvalidTaskInput`: ``ALTCHA_TOO_HARD`` for a v1 ``maxnumber``
    over ``CAPTCHA_TASKS_ALTCHA_MAX_NUMBER`` or a search expected to take longer than
    ``CAPTCHA_TASKS_ALTCHA_MAX_SECONDS``, ``ALTCHA_TOO_MUCH_MEMORY`` for a v2 derivation
    over ``CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB``. A search still running after
    ``CAPTCHA_TASKS_ALTCHA_MAX_SECONDS`` fails with ``SolveTimeout``
    (``ALTCHA_DEADLINE``), a v1 challenge with no solution in range with
    ``CaptchaUnsolvable`` (``ALTCHA_NO_SOLUTION``). ``expires_at``: v1's salt's
    ``expires``, v2's ``expiresAt``, where the site sets one; ``captcha_id``: v1's
    ``challenge``, v2's ``nonce`` (or ``data.challengeId``).

    With ``provider``, or ``auto`` and a v1 challenge past the bounds, it is solved at a
    configured provider that offers ALTCHA like any solve task (``TYPE_NOT_OFFERED``
    where none does), with that solve's ``provider``, ``protocol`` and ``cost``; a v2
    challenge with ``provider`` is refused (``ALTCHA_V2_NOT_OFFERED``)."""
    started = time.monotonic()
    _check_shape(pageurl, challenge_json, challenge_url, proxy_id)
    settings = self.settings
    bounds = AltchaBounds.of(settings)
    challenge: Challenge | None = None
    text = url = ""
    if challenge_json is not None:
        text = _json_text(challenge_json)
        challenge = read_challenge(text)
        if _to_provider(settings, challenge):
            return self.admit(lambda: Altcha(pageurl, text))
    else:
        url = _challenge_url(pageurl, challenge_url)
        check_url(url, settings, resolve=False, allowlist=bool(settings.allowed_domains))
    if admitting_inline():
        raise NotInline  # a fetch or a proof of work: the pool's to run
    if challenge is None:
        text = _fetch_challenge(settings, url, proxy_id)
        challenge = read_challenge(text)
        if _to_provider(settings, challenge):
            return self.admit(lambda: Altcha(pageurl, text))
    payload = solve_payload(challenge, bounds)
    return {
        "solution": payload,
        "source": "api",
        "type": "altcha",
        # No provider's id exists: v1's hash, v2's nonce (or data.challengeId) names it.
        "captcha_id": challenge.captcha_id,
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
