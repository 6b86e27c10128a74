"""A solve request as stored in Redis (``{prefix}job:{task_id}``), and its result."""

from __future__ import annotations

import base64
import dataclasses
import decimal
import json
from typing import Any

from ..errors import InvalidTaskInput
from ..provider import CAPTCHA_CLASSES, Captcha, Coordinates, Grid, Image

__all__ = ["CAPTCHA_CLASSES", "Job", "captcha_from_json", "captcha_to_json", "solve_result"]


def captcha_to_json(captcha: Captcha) -> str:
    fields = {f.name: getattr(captcha, f.name) for f in dataclasses.fields(captcha)}  # type: ignore[arg-type]
    if isinstance(captcha, Image | Coordinates | Grid):
        fields["body"] = base64.b64encode(captcha.body).decode("ascii")
    return json.dumps({"type": captcha.type, "fields": fields}, separators=(",", ":"))


def captcha_from_json(raw: str) -> Captcha:
    data = json.loads(raw)
    cls = CAPTCHA_CLASSES.get(data.get("type"))
    if cls is None:
        raise InvalidTaskInput(f"unknown captcha type in stored job: {data.get('type')!r}")
    fields = dict(data["fields"])
    if cls in (Image, Coordinates, Grid):
        fields["body"] = base64.b64decode(fields["body"])
    return cls(**fields)


def _float(fields: dict[str, str], name: str) -> float | None:
    value = fields.get(name)
    return float(value) if value not in (None, "") else None


@dataclasses.dataclass
class Job:
    """One job's fields, as read from its hash.

    ``state``, with the Lua script that sets it:

    - ``waiting`` (admit, requeue): queued for a thread of the budget;
    - ``submitting`` (acquire): holds a thread, not sent yet; if its engine dies
      now, another one submits it (nothing reached the provider);
    - ``sending`` (sending): its in.php call has started; if its engine dies now,
      the provider may have it, so it fails with ``SubmitUncertain``, never resent;
    - ``polling`` (submitted): at the provider under ``captcha_id``;
    - ``done`` / ``failed`` (finish): ended, kept for ``report_solution``.
    """

    task_id: str
    type: str
    captcha_json: str
    state: str
    enqueued_at: float
    queue_deadline: float
    deadline_s: float
    captcha_id: str = ""
    submitted_at: float | None = None
    last_poll_at: float | None = None
    submits: int = 0
    resubmits: int = 0
    #: Times an engine's key was refused submitting this job (it moves to another).
    key_refusals: int = 0
    #: Reads of the current captcha (the provider's per-task cap counts them).
    polls: int = 0
    #: Reads of the captchas before a resubmit: the result counts every read of a solve.
    earlier_polls: int = 0
    #: Of ``polls``, those its reader made while keeping it (:mod:`.reader`), not in its
    #: hash yet: a resubmit, its end or its reader's stop writes them there.
    unsaved_polls: int = 0
    #: The score its reader last gave its schedule entry (None: not held by a reader).
    entry_score: float | None = None
    #: Scaled token lifetime; None for answers that do not expire (image text, GeeTest).
    token_ttl_s: float | None = None
    #: A fill job's pool id: its token goes to that pool, never to a caller.
    pool: str = ""
    #: The admitting Celery request's routing (chain, callbacks, errbacks, chord, ...)
    #: as JSON, so the engine ends the task the way a worker would.
    request_json: str = ""
    #: Id of a proxy in the pool the provider must solve through (never credentials).
    proxy_id: str = ""
    #: When the last in.php call for it started, and the engine that made it.
    sending_at: float | None = None
    sender: str = ""
    #: The providers that may take it, by name, most preferred first ("" for every
    #: configured one: a job admitted without a route, e.g. a token pool's fill), and
    #: the one holding it now.
    route: str = ""
    provider: str = ""
    #: The fencing token of the claim this copy was read under (``claim.lua``: one up
    #: per claim), and the engine that took it: a step made for a claim that is no
    #: longer the job's is refused (another engine took the job over).
    claim: str = ""
    claimed_by: str = ""
    #: The solve's trace context (``captcha_tasks.tracing.carrier``: the admission
    #: span's), "" when it was admitted with no trace recording.
    trace: str = ""

    @classmethod
    def from_fields(cls, task_id: str, fields: dict[str, str]) -> Job:
        return cls(
            task_id=task_id,
            type=fields.get("type", ""),
            captcha_json=fields.get("captcha", "{}"),
            state=fields.get("state", ""),
            enqueued_at=_float(fields, "enqueued_at") or 0.0,
            queue_deadline=_float(fields, "queue_deadline") or 0.0,
            deadline_s=_float(fields, "deadline_s") or 0.0,
            captcha_id=fields.get("captcha_id", ""),
            submitted_at=_float(fields, "submitted_at"),
            last_poll_at=_float(fields, "last_poll_at"),
            submits=int(fields.get("submits", 0) or 0),
            resubmits=int(fields.get("resubmits", 0) or 0),
            key_refusals=int(fields.get("key_refusals", 0) or 0),
            polls=int(fields.get("polls", 0) or 0),
            earlier_polls=int(fields.get("earlier_polls", 0) or 0),
            token_ttl_s=_float(fields, "token_ttl_s"),
            pool=fields.get("pool", ""),
            request_json=fields.get("request", ""),
            proxy_id=fields.get("proxy_id", ""),
            sending_at=_float(fields, "sending_at"),
            sender=fields.get("sender", ""),
            route=fields.get("route", ""),
            provider=fields.get("provider", ""),
            claim=fields.get("claim", ""),
            claimed_by=fields.get("claimed_by", ""),
            trace=fields.get("trace", ""),
        )

    def captcha(self) -> Captcha:
        return captcha_from_json(self.captcha_json)

    def solve_deadline(self) -> float:
        """Epoch seconds after which the current captcha is given up."""
        return (self.submitted_at or self.enqueued_at) + self.deadline_s


def solve_result(
    job: Job,
    solution: str | dict[str, Any] | list[Any],
    *,
    collected_at: float,
    provider: str,
    protocol: str,
    cost: decimal.Decimal | None = None,
    user_agent: str | None = None,
    cost_source: str | None = None,
    proxy_id: str | None = None,
) -> dict[str, Any]:
    """What ``AsyncResult.get()`` returns for a solved job (a ``results.SolveResult``):
    ``provider`` names who solved it (its configured name) and ``protocol`` the protocol
    it speaks, ``cost`` what it cost (None: unknown) and ``cost_source`` whose figure
    that is (``provider``: its own, ``configured``: ``CAPTCHA_TASKS_PRICES``; engine.spend), and
    ``user_agent`` the browser identity the token is bound to, where the provider says,
    and ``proxy_id`` the pool proxy it is bound to (DataDome's cookie)."""
    submitted_at = job.submitted_at or collected_at
    # The token was issued after the last poll that found none: count its life from then.
    issued_after = job.last_poll_at or submitted_at
    return {
        "solution": solution,
        "source": "api",
        "task_id": job.task_id,
        "type": job.type,
        "captcha_id": job.captcha_id,
        "solve_seconds": round(collected_at - submitted_at, 3),
        "queued_seconds": round(submitted_at - job.enqueued_at, 3),
        "expires_at": round(issued_after + job.token_ttl_s, 3) if job.token_ttl_s else None,
        "submits": job.submits,
        # Every read of the solve: earlier captchas' and this one's, the answering one too.
        "polls": job.earlier_polls + job.polls + 1,
        "provider": provider,
        "protocol": protocol,
        "cost": None if cost is None else str(cost),
        "cost_source": None if cost is None else cost_source,
        **({"user_agent": user_agent} if user_agent else {}),
        **({"proxy_id": proxy_id} if proxy_id else {}),
    }
