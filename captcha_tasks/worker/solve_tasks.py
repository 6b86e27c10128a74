"""Thin Celery tasks: arguments, retries and serialization here; logic in plain modules.

A solve task validates its arguments, records the request in Redis and returns
without holding the worker (the caller's ``delay()`` runs the same validation first,
:meth:`SolveTask.check_arguments`, and raises without sending): the worker's solve engine
(:mod:`.engine_step`) submits it when the thread budget allows, polls it, and stores the
result under the same task id, so ``AsyncResult.get()`` works as for any task.

:class:`SolveTask` is every solve task's base; each captcha kind's own task is generated
from its declaration into :mod:`.kind_tasks`. Here too: the tasks that solve nothing
(``get_balance``, ``ping``, ``report_solution``) and ``fill_token_pool``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from celery.exceptions import Ignore

from .. import tracing
from ..caller.checks import refuse_unoffered
from ..errors import ClientError, InvalidApiKey, InvalidTaskInput, TransientSolverError
from ..provider import (
    CAPTCHA_CLASSES,
    Captcha,
    CaptchaType,
    HCaptcha,
    RecaptchaV2,
    RecaptchaV3,
    Turnstile,
)
from ..provider.kind import build
from ..provider.routing import route
from ..results import (
    BalanceResult,
    FillResult,
    PingResult,
    ReportResult,
    SolveResult,
)
from ..state import Keys, state_redis
from ..version import worker_version
from .celery_internals.admit_inline import NotInline, admitting_inline
from .celery_internals.request import RedactedRequest
from .redacted import RedactedTask
from .task_bases import CheckedTask
from .tracing_hooks import admission_span
from .typed import task

__all__ = [
    "SolveTask",
    "fill_token_pool",
    "get_balance",
    "ping",
    "report_solution",
]

log = logging.getLogger(__name__)

#: A stored job's ``type`` field, back to the captcha type it names.
_CAPTCHA_TYPES: dict[str, CaptchaType] = {kind: kind for kind in CAPTCHA_CLASSES}


class SolveTask(CheckedTask):
    """Base of the solve tasks: validation at the edge, then admission.

    Every solve task takes ``provider="main"`` (solve at that configured provider
    only) and ``exclude=["main", ...]`` (never at those): they narrow the request's
    route, ``CAPTCHA_TASKS_PROVIDERS``'s order filtered by each provider's ``_TYPES``
    and protocol (:func:`~captcha_tasks.provider.routing.route`), and with
    ``CAPTCHA_TASKS_ROUTING=cost`` reordered by cost per accepted token
    (:mod:`captcha_tasks.engine.cost_routing`). A routed request skips the token pool:
    its token must come from the providers it names.
    """

    abstract = True
    #: Invalid input is final: never retried.
    max_retries = 0
    # The admitting execution lasts a few milliseconds and ends the task for no one:
    # a STARTED state (a read and a script per solve) would only say "admitted", and
    # the solve stays PENDING until the engine stores its outcome.
    track_started = False
    #: The admission logs itself and the engine the outcome: Celery's "ignored" line for
    #: the admitting execution goes to DEBUG (:mod:`.celery_internals.tracer`).
    logs_its_ignore = True
    Request = "captcha_tasks.worker.solve_tasks:SolveRequest"
    #: Admitted by the worker's consumer, without the pool (:mod:`.celery_internals.admit_inline`).
    Strategy = "captcha_tasks.worker.celery_internals.admit_inline:solve_strategy"

    #: The caller checks a call before sending it (``delay`` raises, sends nothing).
    check_in_caller = True
    #: The captcha kind whose declared task this is (None: a task of its own, that
    #: builds its captcha itself and hands it to :meth:`admit`).
    kind: type[Captcha] | None = None

    def check_arguments(self, values: dict[str, Any]) -> None:
        """The caller's check of a kind's task: the captcha the arguments make passes its
        kind's checks, ``proxy_id`` and the route are well formed, and a provider the
        caller's settings name offers the kind."""
        self.check_solve(lambda: self._kind_captcha(values), values)

    def check_solve(self, make: Callable[[], Captcha], values: Mapping[str, Any]) -> None:
        """The caller's check of a solve of ``make()``'s captcha with these arguments
        (``proxy_id``, ``provider``, ``exclude`` among them): what :meth:`admit` checks,
        and a kind no provider the caller's settings name (or the one ``provider=``
        pins) offers refused (:func:`~captcha_tasks.caller.checks.refuse_unoffered`).
        Reads the caller's settings, nothing in Redis, and needs no key; the rest of
        what is configured (``_TYPES``, names it does not know) is the worker's to check."""
        captcha = self._captcha(make)
        proxy_id, provider = values.get("proxy_id"), values.get("provider")
        self._check_proxy(proxy_id)
        self._check_route(provider, values.get("exclude", ()))
        refuse_unoffered(self.settings.providers(), captcha, bool(proxy_id), provider)

    def solve(self, **values: Any) -> SolveResult[Any]:
        """The body of a kind's task (:mod:`.kind_tasks`): its captcha from ``values``
        (the task's arguments by name), then :meth:`admit`."""
        return self.admit(
            lambda: self._kind_captcha(values),
            proxy_id=values.get("proxy_id"),
            provider=values.get("provider"),
            exclude=values.get("exclude", ()),
        )

    def _kind_captcha(self, values: dict[str, Any]) -> Captcha:
        """The captcha of :attr:`kind` that a call's ``values`` make (a kind that requires
        a proxy refused without ``proxy_id``: ``PROXY_REQUIRED``)."""
        kind = self.kind
        if kind is None or kind.solve_call is None:
            raise TypeError(f"{self.name} is no kind's task")
        captcha = build(kind, values, max_image_bytes=self._limit)
        call = kind.solve_call
        if call.proxy == "required" and values.get("proxy_id") is None:
            raise InvalidTaskInput(
                f"{self.name}: {kind.__name__} needs proxy_id ({call.proxy_why}); nothing was sent",
                "PROXY_REQUIRED",
            )
        return captcha

    @property
    def _limit(self) -> int:
        return self.settings.max_image_bytes

    def _captcha(self, make: Callable[[], Captcha]) -> Captcha:
        """``make()``'s captcha, checked against this worker's image limit; a wrong
        argument type (Python's ``TypeError``) as :class:`InvalidTaskInput`."""
        try:
            return make().validate(max_image_bytes=self._limit)
        except TypeError as exc:  # wrong argument types or names reaching a constructor
            raise InvalidTaskInput(f"{self.name}: {exc}") from None

    def _check_proxy(self, proxy_id: object) -> None:
        if proxy_id is not None and (not isinstance(proxy_id, str) or len(proxy_id) > 64):
            raise InvalidTaskInput(f"{self.name}: proxy_id must be a proxy pool id")

    def _check_route(self, provider: object, exclude: object) -> list[str]:
        """``provider=`` and ``exclude=`` as the message carries them, checked: the
        excluded names as a list."""
        if provider is not None and not isinstance(provider, str):
            raise InvalidTaskInput(f"{self.name}: provider must be a provider's name", "BAD_ROUTE")
        if isinstance(exclude, str) or not (
            isinstance(exclude, list | tuple) and all(isinstance(n, str) for n in exclude)
        ):
            raise InvalidTaskInput(
                f"{self.name}: exclude must be a list of provider names", "BAD_ROUTE"
            )
        return list(exclude)

    def admit(
        self,
        build: Callable[[], Captcha],
        *,
        proxy_id: str | None = None,
        provider: str | None = None,
        exclude: Sequence[str] = (),
    ) -> SolveResult[Any]:
        """A pooled token at once if the pool has one, else queue a solve (the engine
        ends this task later: this execution records nothing). ``build()``'s captcha,
        ``proxy_id`` and the route are checked first, as the caller checked them
        (:meth:`check_solve`)."""
        # A worker without a key runs no engine: fail now rather than queue forever.
        self.settings.require_api_key()
        captcha = self._captcha(build)
        self._check_proxy(proxy_id)
        excluded = self._check_route(provider, exclude)
        # The worker's side from here: imported here, so that code that only enqueues
        # never loads the engine's modules.
        from ..engine.admission import ADMITTED, POOLED, admit_unless_pooled
        from ..engine.cost_routing import ordered
        from ..engine.observer import solve_observer
        from ..engine.pool import TokenPool, pool_id_for

        # Before anything is queued: the configured providers that may take it (_TYPES,
        # what each protocol solves, the task's provider= / exclude=), stored with it.
        names = route(
            self.settings.providers(),
            captcha,
            proxied=bool(proxy_id),
            provider=provider,
            exclude=excluded,
        )
        routed = provider is not None or bool(excluded)
        client = state_redis(self.settings)
        # CAPTCHA_TASKS_ROUTING=cost: the same providers, cheapest per accepted token first.
        names = ordered(
            client, self.settings, names, captcha.type, getattr(captcha, "pageurl", None)
        )
        with admission_span(self, captcha.type, names) as span:
            queue = functools.partial(
                admit_unless_pooled,
                client,
                self.settings,
                self.request.id,
                captcha,
                request=_routing(self.request),
                proxy_id=proxy_id or "",
                route=names,
                trace=tracing.carrier(),
            )
            # One round trip unless a token pool may serve it (a redelivered message's
            # job is queued, in flight or done: SEEN, and no token is taken for it).
            outcome = queue(pool_id=("" if routed else pool_id_for(captcha) or ""))
            if outcome == POOLED:
                if admitting_inline():
                    raise NotInline  # a token is the pool's to take (this queued nothing)
                pooled = TokenPool(client, self.settings).take(captcha)
                if pooled is not None:
                    solve_observer().solved(captcha.type, "pool")
                    if span is not None:
                        span.set_attribute("captcha_tasks.outcome", "pooled")
                    return cast("SolveResult[Any]", pooled)
                outcome = queue()
            if span is not None:
                span.set_attribute(
                    "captcha_tasks.outcome", "admitted" if outcome == ADMITTED else "seen"
                )
            # The engine stores this task's result and logs its outcome; this run records
            # no state of its own (Celery's "ignored" line for it is not logged at INFO:
            # worker.celery_internals.tracer).
            log.info(
                "Task %s[%s] %s",
                self.request.shadow or self.name,
                self.request.id,
                "admitted" if outcome == ADMITTED else "admitted before: not queued again",
            )
        raise Ignore()


class SolveRequest(RedactedRequest):
    """A solve's message in the worker: its ``task-received`` event (name, arguments) is
    sent, its ``task-started`` is not (the admitting execution starts nothing the caller
    waits for; the engine sends ``task-succeeded`` / ``task-failed`` when it ends)."""

    def send_event(self, type: str, **fields: Any) -> None:
        if type != "task-started":
            super().send_event(type, **fields)


#: Request fields the engine needs to end a task as a worker would (and name it).
_ROUTING = (
    "task",
    "shadow",
    "chain",
    "callbacks",
    "errbacks",
    "chord",
    "group",
    "group_index",
    "root_id",
    "parent_id",
    "reply_to",
    "correlation_id",
    "ignore_result",
)


def _routing(request: Any) -> dict[str, object]:
    return {name: value for name in _ROUTING if (value := getattr(request, name, None))}


@task("captcha_tasks.fill_token_pool", base=CheckedTask)
def fill_token_pool(
    self: CheckedTask,
    captcha_type: str,
    sitekey: str,
    pageurl: str,
    *,
    action: str = "verify",
    min_score: float = 0.3,
    target: int | None = None,
    adaptive: bool = False,
) -> FillResult:
    """Keep the pool of (type, sitekey, page or action) at ``target`` tokens, or size it
    from recent demand (``adaptive``). Queues the missing solves and returns at once;
    run it periodically (celery beat) to refill pools nobody takes from."""
    builders: dict[str, Callable[[], Captcha]] = {
        "recaptcha_v2": lambda: RecaptchaV2(sitekey, pageurl),
        "recaptcha_v3": lambda: RecaptchaV3(sitekey, pageurl, action=action, min_score=min_score),
        "turnstile": lambda: Turnstile(sitekey, pageurl),
        "hcaptcha": lambda: HCaptcha(sitekey, pageurl),
    }
    if not isinstance(captcha_type, str) or captcha_type not in builders:
        raise InvalidTaskInput(
            f"fill_token_pool: captcha_type must be one of {', '.join(builders)}, "
            f"got {captcha_type!r:.40}"
        )
    if target is not None and (isinstance(target, bool) or not isinstance(target, int)):
        raise InvalidTaskInput(f"fill_token_pool: target must be an integer, got {target!r:.40}")
    if adaptive not in (True, False):
        raise InvalidTaskInput("fill_token_pool: adaptive must be true or false")
    self.settings.require_api_key()
    try:
        captcha = builders[captcha_type]()
    except TypeError as exc:
        raise InvalidTaskInput(f"fill_token_pool: {exc}") from None
    from ..engine.pool import TokenPool

    pool = TokenPool(state_redis(self.settings), self.settings)
    fill = pool.fill(captcha, target=target, adaptive=bool(adaptive))
    return cast(FillResult, fill.as_dict())


@task("captcha_tasks.report_solution", base=CheckedTask, max_retries=3)
def report_solution(self: CheckedTask, task_id: str, correct: bool = False) -> ReportResult:
    """Tell the provider whether the answer of solve task ``task_id`` worked
    (``reportbad`` refunds wrong answers; reports older than ~15 min are refused).

    The verdict also counts towards the provider's acceptance figures (the first
    verdict on a solve, from here or anywhere else, is the one counted), and the
    provider is told about a solve once: a second report (or one after ``fetch_page``
    or :func:`captcha_tasks.feedback` reported a refused token) returns what it was
    told (``"reported"``) and ``"already": True`` without calling the provider."""
    if not isinstance(task_id, str) or not task_id or len(task_id) > 64:
        raise InvalidTaskInput("report_solution: task_id must be a solve task's id")
    if correct not in (True, False):  # "false" would be truthy: a reportgood by mistake
        raise InvalidTaskInput("report_solution: correct must be true or false")
    client = state_redis(self.settings)
    captcha_id, kind, provider = client.hmget(
        Keys(self.settings.key_prefix).job(task_id), "captcha_id", "type", "provider"
    )
    if not captcha_id:
        raise ClientError(
            f"report_solution: no captcha is known for task {task_id} (unknown, not "
            "submitted yet, or older than the report window)",
            "UNKNOWN_TASK",
        )
    from ..engine.acceptance import AcceptanceBook
    from ..errors import UnknownSolve

    book = AcceptanceBook(client, self.settings)
    with contextlib.suppress(UnknownSolve):  # submitted, not solved (yet): nothing to count
        book.record(task_id, accepted=bool(correct))
    reported: Literal["good", "bad"] = "good" if correct else "bad"
    found: ReportResult = {"task_id": task_id, "captcha_id": str(captcha_id), "reported": reported}
    told = book.claim_report(task_id, reported)
    if told is not None:
        return {**found, "reported": "good" if told == "good" else "bad", "already": True}
    try:
        # The type picks the report method at providers that have one per type.
        captcha_type = _CAPTCHA_TYPES.get(str(kind))
        # At the provider that solved it (several providers: the job names it).
        solver = self.solver_for(str(provider or ""))
        solver.report(str(captcha_id), correct=reported == "good", captcha_type=captcha_type)
    except BaseException as exc:
        book.release_report(task_id)  # not told: a retry (or a later report) tells it
        if isinstance(exc, TransientSolverError):
            raise self.retry_transient(exc) from exc
        raise
    return found


@task("captcha_tasks.ping", base=RedactedTask)
def ping(self: Any) -> PingResult:
    """Round trip through the broker, a worker and the result backend."""
    return {
        "pong": True,
        "hostname": self.request.hostname or socket.gethostname(),
        "version": worker_version(),
    }


@task(
    "captcha_tasks.get_balance",
    base=CheckedTask,
    max_retries=3,
    # A refused key is an answer, not a crash: one line in the worker's log.
    throws=(*CheckedTask.throws, InvalidApiKey),
)
def get_balance(self: CheckedTask, provider: str | None = None) -> BalanceResult:
    """A provider account's balance, as a string to keep its decimals exact.

    ``provider``: which configured provider's (default: the preferred one). The result
    names it (``provider``, its configured name) and the protocol it speaks
    (``protocol``: ``"2captcha"``, ``"capsolver"``...)."""
    if provider is not None and not isinstance(provider, str):
        raise InvalidTaskInput("get_balance: provider must be a provider's name")
    provider = provider or ""
    solver = self.solver_for(provider)  # refuses a name not configured
    configs = self.settings.providers()
    config = next((c for c in configs if c.name == provider), configs[0])
    try:
        balance = solver.balance()
    except TransientSolverError as exc:
        raise self.retry_transient(exc) from exc
    return {"balance": str(balance), "provider": config.name, "protocol": config.protocol}
