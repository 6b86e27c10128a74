"""Answers pushed by the provider (its ``pingback`` / ``callbackUrl``), ending jobs as a
poll would.

With ``CAPTCHA_TASKS_CALLBACK_URL`` set, every submit carries
``{CALLBACK_URL}/{task_id}/{attempt}/{provider}/{mac}`` (:func:`callback_url_for`):
the task id names the job, the attempt (its submit number) tells a resubmitted job's
captchas apart, the provider (its name in ``CAPTCHA_TASKS_PROVIDERS``) is the one the
submit went to, and the mac (:func:`callback_mac`) proves all three: an HMAC of them
under the deployment's secret (``CAPTCHA_TASKS_CALLBACK_TOKEN``), which itself never
leaves the worker. A URL one provider saw proves nothing about any other job, attempt
or provider: not even about the same submit handed on to the next provider after this
one refused it. The :class:`Receiver` reads a path as a :class:`Claim` and accepts only
proven ones, for jobs it knows (the job's hash exists, it is ``polling`` at that attempt
and that provider, and the captcha id the provider sends, where it sends one, is the
job's), then hands the answer to the :class:`Lane` of the job's provider (its engine's
:class:`~.poll.Poller`), which ends the job exactly like a poll: ``finish.lua`` ends a
job once, so a callback racing a poll (or a duplicate callback) ends it once.

Polls stay as the fallback: the first poll of a captcha sent with a callback URL comes
late (:func:`fallback_wait`), so a lost or refused callback costs a delay, never a
solve.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, unquote, urlsplit

from ..provider import Polled
from ..provider.pushed import pushed_id, read_pushed
from ..settings import Provider as Dialect
from ..settings import Settings
from ..state.clock import clock_of
from ..state.keys import Keys
from .jobs import Job
from .placement import ReadyTimes
from .timing import DEADLINE

if TYPE_CHECKING:
    import redis

__all__ = [
    "CALLBACK_FALLBACK_FRACTION",
    "EARLY_WAIT",
    "MAC_LENGTH",
    "Claim",
    "Lane",
    "Outcome",
    "Receiver",
    "callback_mac",
    "callback_url_for",
    "fallback_wait",
]

log = logging.getLogger(__name__)

#: With a callback URL, the first poll comes after this fraction of the captcha type's
#: deadline (at least twice the learned first poll): late enough that a callback
#: nearly always comes first, early enough that a lost one still leaves time to solve.
CALLBACK_FALLBACK_FRACTION = 0.25
#: Seconds a callback that beat its own submit's bookkeeping (the job still
#: ``sending``) waits for the captcha id to be stored before it is left to the polls.
EARLY_WAIT = 1.0
#: Hex digits of a callback URL's mac (:func:`callback_mac`): 128 bits.
MAC_LENGTH = 32


def callback_mac(token: str, task_id: str, attempt: int, provider: str) -> str:
    """The proof in the callback URL of ``task_id``'s submit ``attempt`` to ``provider``:
    HMAC-SHA256 of ``{task_id}/{attempt}/{provider}`` under the deployment's ``token``, in
    hex, cut to :data:`MAC_LENGTH` digits."""
    message = f"{task_id}/{attempt}/{provider}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()[:MAC_LENGTH]


def callback_url_for(settings: Settings, job: Job, provider: str) -> str | None:
    """The URL ``provider`` (a name of ``CAPTCHA_TASKS_PROVIDERS``) is to call for
    ``job``'s next submit (None: callbacks off):
    ``{CALLBACK_URL}/{task_id}/{attempt}/{provider}/{mac}``, the token in no part of it."""
    if not settings.callback_url:
        return None
    attempt = job.submits + 1
    mac = callback_mac(settings.callback_token, job.task_id, attempt, provider)
    task_id, name = quote(job.task_id, safe=""), quote(provider, safe="")
    return f"{settings.callback_url}/{task_id}/{attempt}/{name}/{mac}"


def fallback_wait(
    settings: Settings,
    captcha_type: str,
    learned_first_poll: float,
    *,
    provider: object = None,
    captcha_id: str = "",
    ready: ReadyTimes | None = None,
) -> float:
    """Seconds after submit of the first (fallback) poll of a captcha sent with a callback.
    Once the provider's ready times of the type are learned (``ready``; callbacks teach
    them exactly), it comes when nearly every answer has been ready a while, so a lost
    callback costs a little more than a slow solve; before that, after a fraction of
    the deadline. An answer the provider gave with the submit itself (CapSolver's
    images) sends no callback: it is read at the learned first poll, as without them."""
    holds = getattr(provider, "holds_answer", None)
    if callable(holds) and holds(captcha_id):
        return learned_first_poll
    deadline = settings.scaled(DEADLINE.get(captcha_type, 120.0))
    if ready is not None:
        return min(max(ready.nearly_all, learned_first_poll), deadline / 2)
    return min(max(deadline * CALLBACK_FALLBACK_FRACTION, 2 * learned_first_poll), deadline / 2)


@dataclasses.dataclass(frozen=True)
class Claim:
    """What a callback's path says: the job (its task id), submit ``attempt`` and
    ``provider`` it is for, and whether its mac is theirs (``proven``). Only the holder
    of that submit's URL, the provider it was sent to, can make a proven claim."""

    task_id: str
    attempt: int
    provider: str
    proven: bool


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the receiver answers: an HTTP status and a short reason (no answer in it)."""

    status: int
    reason: str


class Lane(Protocol):
    """What the receiver asks of one provider's engine: its :class:`~.poll.Poller`."""

    @property
    def protocol(self) -> Dialect:
        """The protocol the provider speaks, its pushed answers too."""
        ...

    def pushed(self, job: Job, answer: Polled, at: float) -> str:
        """Act on what the provider pushed for ``job`` at ``at`` as on what a poll found;
        what followed, in a few words."""
        ...


class Receiver:
    """Ends jobs from pushed answers. ``lanes``: this worker's engines' (each one's
    :class:`Lane`), by provider name."""

    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        lanes: Mapping[str, Lane],
        *,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not settings.callback_token:
            raise ValueError("a callback receiver needs a token")
        self.redis = client
        self.keys = Keys(settings.key_prefix)
        self.lanes = dict(lanes)
        self.clock = clock or clock_of(client)
        self.sleep = sleep
        base = urlsplit(settings.callback_url or "http://x").path.rstrip("/")
        self._prefix = f"{base}/"
        self._token = settings.callback_token

    def handle(
        self, path: str, fields: Mapping[str, str], document: Mapping[str, Any] | None
    ) -> Outcome:
        """One callback: ``path`` as requested, the form or query ``fields`` and the JSON
        ``document`` (None: none was sent). A path whose mac is not its job's is
        ``not found``, whatever job it names; Redis is read for proven claims only."""
        claim = self.claim(path)
        if claim is None or not claim.proven:
            return Outcome(404, "not found")
        job = self._job(claim.task_id)
        if job is None:
            return Outcome(404, "unknown job")
        if job.state in ("done", "failed"):
            return Outcome(200, "already ended")  # a duplicate, or a poll came first
        if job.state != "polling" or job.submits != claim.attempt:
            return Outcome(409, f"job not waiting for this captcha ({job.state})")
        if job.provider != claim.provider:  # sent on after that provider refused it
            return Outcome(409, "job not waiting for this captcha (at another provider)")
        sent = pushed_id(fields, document)
        if sent is not None and sent != job.captcha_id:
            return Outcome(404, "unknown captcha")
        lane = self.lanes.get(job.provider) or self.lanes.get("default")
        if lane is None:
            return Outcome(503, "no engine for this job's provider")
        try:
            pushed = read_pushed(lane.protocol, job.captcha_id, fields, document)
        except ValueError as exc:
            return Outcome(400, f"unreadable callback ({exc})")
        # The callback is no read: the result counts the reads made (polls + 1 each).
        job = dataclasses.replace(job, polls=job.polls - 1)
        return Outcome(200, lane.pushed(job, pushed, self.clock()))

    def claim(self, path: str) -> Claim | None:
        """What ``path`` (as requested: percent-encoded) claims, its mac checked in
        constant time; None for a path not of :func:`callback_url_for`'s shape."""
        if not path.startswith(self._prefix):
            return None
        pieces = path[len(self._prefix) :].split("/")
        if len(pieces) != 4 or not pieces[0] or not pieces[2]:
            return None
        quoted_id, attempt, quoted_provider, mac = pieces
        if not (attempt.isascii() and attempt.isdigit() and len(attempt) <= 6):
            return None
        task_id, provider = unquote(quoted_id), unquote(quoted_provider)
        expected = callback_mac(self._token, task_id, int(attempt), provider)
        proven = hmac.compare_digest(mac.encode("utf-8", "replace"), expected.encode())
        return Claim(task_id, int(attempt), provider, proven)

    def _job(self, task_id: str) -> Job | None:
        """The job, waiting briefly when its callback beat the storing of its captcha id."""
        give_up = time.monotonic() + EARLY_WAIT
        while True:
            fields: dict[str, str] = self.redis.hgetall(self.keys.job(task_id))  # type: ignore[assignment]
            if not fields:
                return None
            job = Job.from_fields(task_id, fields)
            if job.state not in ("sending", "submitting") or time.monotonic() >= give_up:
                return job
            self.sleep(0.01)
