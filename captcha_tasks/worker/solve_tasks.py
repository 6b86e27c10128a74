"""Thin Celery tasks: arguments, retries and serialization here; logic in plain modules.

A solve task validates its arguments, records the request in Redis and returns
without holding the worker (the caller's ``delay()`` runs the same validation first,
:class:`~.task_bases.CheckedTask`, and raises without sending): the worker's solve
engine (:mod:`.engine_step`) submits it when the thread budget allows, polls it, and
stores the result under the same task id, so ``AsyncResult.get()`` works as for any task.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import logging
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from celery.exceptions import Ignore

from ..engine.admission import ADMITTED, POOLED, admit_unless_pooled
from ..engine.observer import solve_observer
from ..engine.pool import TokenPool, pool_id_for
from ..errors import ClientError, InvalidApiKey, InvalidTaskInput, TransientSolverError
from ..provider import (
    CAPTCHA_CLASSES,
    Captcha,
    CaptchaType,
    GeeTest,
    HCaptcha,
    Image,
    RecaptchaV2,
    RecaptchaV3,
    Turnstile,
)
from ..provider.routing import route
from ..state import Keys, state_redis
from ..version import worker_version
from .admit_inline import NotInline, admitting_inline
from .app import app
from .redacted import RedactedRequest, RedactedTask
from .task_bases import CheckedTask

__all__ = [
    "fill_token_pool",
    "get_balance",
    "ping",
    "report_solution",
    "solve_geetest",
    "solve_hcaptcha",
    "solve_image",
    "solve_recaptcha_v2",
    "solve_recaptcha_v3",
    "solve_turnstile",
]

log = logging.getLogger(__name__)

#: A stored job's ``type`` field, back to the captcha type it names.
_CAPTCHA_TYPES: dict[str, CaptchaType] = {kind: kind for kind in CAPTCHA_CLASSES}


#: The routing options every solve task takes, read by :class:`SolveTask`.
ROUTE_OPTIONS = ("provider", "exclude")
_route_options: contextvars.ContextVar[tuple[tuple[str, Any], ...]] = contextvars.ContextVar(
    "route_options", default=()
)


@contextlib.contextmanager
def _routing_options(kwargs: dict[str, Any]) -> Iterator[None]:
    """The routing options taken out of ``kwargs`` for the body's ``admit`` to read."""
    options = tuple((name, kwargs.pop(name)) for name in ROUTE_OPTIONS if name in kwargs)
    token = _route_options.set(options)
    try:
        yield
    finally:
        _route_options.reset(token)


class SolveTask(CheckedTask):
    """Base of the solve tasks: validation at the edge, then admission.

    Every solve task also takes ``provider="main"`` (solve at that configured provider
    only) and ``exclude=["main", ...]`` (never at those): they narrow the request's
    route, ``CAPTCHA_TASKS_PROVIDERS``'s order filtered by each provider's ``_TYPES``
    and protocol (:func:`~captcha_tasks.provider.routing.route`). A routed request
    skips the token pool: its token must come from the providers it names.
    """

    abstract = True
    #: Invalid input is final: never retried.
    max_retries = 0
    # The admitting execution lasts a few milliseconds and ends the task for no one:
    # a STARTED state (a read and a script per solve) would only say "admitted", and
    # the solve stays PENDING until the engine stores its outcome.
    track_started = False
    #: The admission logs itself and the engine the outcome: Celery's "ignored" line for
    #: the admitting execution goes to DEBUG (:mod:`.trace_log`).
    logs_its_ignore = True
    Request = "captcha_tasks.worker.solve_tasks:SolveRequest"
    #: Admitted by the worker's consumer, without the pool (:mod:`.admit_inline`).
    Strategy = "captcha_tasks.worker.admit_inline:solve_strategy"

    #: A solve's body runs in the caller too, as a check (``delay`` raises, sends nothing).
    check_in_caller = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with _routing_options(kwargs):
            return super().__call__(*args, **kwargs)

    def run_checked(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with _routing_options(kwargs):
            return super().run_checked(args, kwargs)

    def _route_options(self) -> tuple[str | None, Any, bool]:
        """The task's ``provider=`` and ``exclude=``, checked, and whether either was given."""
        options = dict(_route_options.get())
        provider, exclude = options.get("provider"), options.get("exclude", ())
        if provider is not None and not isinstance(provider, str):
            raise InvalidTaskInput(f"{self.name}: provider must be a provider's name", "BAD_ROUTE")
        if isinstance(exclude, str) or not (
            isinstance(exclude, list | tuple) and all(isinstance(n, str) for n in exclude)
        ):
            raise InvalidTaskInput(
                f"{self.name}: exclude must be a list of provider names", "BAD_ROUTE"
            )
        return provider, exclude, bool(options)

    def _route(self, captcha: Captcha, *, proxied: bool) -> tuple[list[str], bool]:
        """The providers that may take ``captcha``, and whether the task narrowed them."""
        provider, exclude, routed = self._route_options()
        names = route(
            self.settings.providers(), captcha, proxied=proxied, provider=provider, exclude=exclude
        )
        return names, routed

    def admit(self, build: Callable[[], Captcha], *, proxy_id: str | None = None) -> dict[str, Any]:
        """A pooled token at once if the pool has one, else queue a solve (the engine
        ends this task later: this execution records nothing).

        As the caller's check (:meth:`~.task_bases.CheckedTask.check_call`) it stops once
        the captcha, ``proxy_id`` and the shapes of ``provider=`` / ``exclude=`` are
        checked: the caller needs no key, and which providers are configured (names,
        the types each offers) is the worker's to check."""
        checking = self.checking_call()
        if not checking:
            # A worker without a key runs no engine: fail now rather than queue forever.
            self.settings.require_api_key()
        try:
            captcha = build().validate(max_image_bytes=self.settings.max_image_bytes)
        except TypeError as exc:  # wrong argument types or names reaching a constructor
            raise InvalidTaskInput(f"{self.name}: {exc}") from None
        if proxy_id is not None and (not isinstance(proxy_id, str) or len(proxy_id) > 64):
            raise InvalidTaskInput(f"{self.name}: proxy_id must be a proxy pool id")
        if checking:
            self._route_options()
            self.stop_if_checking()
        # Before anything is queued: the configured providers that may take it (_TYPES,
        # what each protocol solves, the task's provider= / exclude=), stored with it.
        names, routed = self._route(captcha, proxied=bool(proxy_id))
        client = state_redis(self.settings)
        queue = functools.partial(
            admit_unless_pooled,
            client,
            self.settings,
            self.request.id,
            captcha,
            request=_routing(self.request),
            proxy_id=proxy_id or "",
            route=names,
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
                return pooled
            outcome = queue()
        # The engine stores this task's result and logs its outcome; this run records no
        # state of its own (Celery's "ignored" line for it is not logged at INFO:
        # worker.trace_log).
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


def refuse_unknown(task: str, unknown: Mapping[str, Any], allowed: str) -> None:
    """Refuse options the task does not take, with the nearest known name of each."""
    if unknown:
        known = [*(n.strip() for n in allowed.split(",") if n.strip()), *ROUTE_OPTIONS]
        shown = []
        for name in sorted(unknown):
            close = difflib.get_close_matches(str(name), known, n=1)
            shown.append(f"{name} (did you mean {close[0]!r}?)" if close else str(name))
        raise InvalidTaskInput(f"{task}: unknown option(s) {', '.join(shown)}; allowed: {allowed}")


@app.task(name="captcha_tasks.solve_recaptcha_v2", base=SolveTask, bind=True)
def solve_recaptcha_v2(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    invisible: bool = False,
    enterprise: bool = False,
    data_s: str | None = None,
    cookies: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve a reCAPTCHA v2 (``invisible``, ``enterprise``, 2Captcha's ``data_s``,
    ``cookies``, ``user_agent``). ``proxy_id``: a proxy of the pool (``captcha-tasks
    proxies``) the provider solves through. Result: the token in ``solution``."""
    refuse_unknown(
        self.name, unknown, "invisible, enterprise, data_s, cookies, user_agent, proxy_id"
    )
    return self.admit(
        lambda: RecaptchaV2(
            sitekey,
            pageurl,
            invisible=invisible,
            enterprise=enterprise,
            data_s=data_s,
            cookies=cookies,
            user_agent=user_agent,
        ),
        proxy_id=proxy_id,
    )


@app.task(name="captcha_tasks.solve_recaptcha_v3", base=SolveTask, bind=True)
def solve_recaptcha_v3(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    action: str = "verify",
    min_score: float = 0.3,
    enterprise: bool = False,
    proxy_id: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve a reCAPTCHA v3 for ``action`` with at least ``min_score``."""
    refuse_unknown(self.name, unknown, "action, min_score, enterprise, proxy_id")
    return self.admit(
        lambda: RecaptchaV3(
            sitekey, pageurl, action=action, min_score=min_score, enterprise=enterprise
        ),
        proxy_id=proxy_id,
    )


@app.task(name="captcha_tasks.solve_turnstile", base=SolveTask, bind=True)
def solve_turnstile(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    action: str | None = None,
    cdata: str | None = None,
    pagedata: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve a Cloudflare Turnstile (optional ``action`` and ``cdata``; ``pagedata`` for
    challenge mode, which needs both, see :func:`solve_turnstile_challenge`)."""
    refuse_unknown(self.name, unknown, "action, cdata, pagedata, user_agent, proxy_id")
    return self.admit(
        lambda: Turnstile(
            sitekey, pageurl, action=action, cdata=cdata, pagedata=pagedata, user_agent=user_agent
        ),
        proxy_id=proxy_id,
    )


@app.task(name="captcha_tasks.solve_image", base=SolveTask, bind=True)
def solve_image(self: SolveTask, image_b64: str, **hints: Any) -> dict[str, Any]:
    """Read the text of an image (base64; jpg, png or gif). Hints: numeric, min_len,
    max_len, phrase, regsense, calc, lang, textinstructions."""
    allowed = {
        "numeric",
        "min_len",
        "max_len",
        "phrase",
        "regsense",
        "calc",
        "lang",
        "textinstructions",
    }
    refuse_unknown(
        self.name, {k: v for k, v in hints.items() if k not in allowed}, ", ".join(sorted(allowed))
    )
    if not isinstance(image_b64, str):
        raise InvalidTaskInput(f"{self.name}: image_b64 must be a base64 string")
    limit = self.settings.max_image_bytes
    return self.admit(lambda: Image.from_base64(image_b64, max_image_bytes=limit, **hints))


@app.task(name="captcha_tasks.solve_geetest", base=SolveTask, bind=True)
def solve_geetest(
    self: SolveTask,
    gt: str,
    challenge: str,
    pageurl: str,
    *,
    api_server: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve a GeeTest v3. ``solution`` is a dict: geetest_challenge, geetest_validate,
    geetest_seccode."""
    refuse_unknown(self.name, unknown, "api_server")
    return self.admit(lambda: GeeTest(gt, challenge, pageurl, api_server=api_server))


@app.task(name="captcha_tasks.solve_hcaptcha", base=SolveTask, bind=True)
def solve_hcaptcha(
    self: SolveTask, sitekey: str, pageurl: str, *, proxy_id: str | None = None, **unknown: Any
) -> dict[str, Any]:
    """Solve an hCaptcha (where the provider supports it)."""
    refuse_unknown(self.name, unknown, "proxy_id")
    return self.admit(lambda: HCaptcha(sitekey, pageurl), proxy_id=proxy_id)


@app.task(name="captcha_tasks.fill_token_pool", base=CheckedTask, bind=True)
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
) -> dict[str, Any]:
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
    pool = TokenPool(state_redis(self.settings), self.settings)
    return pool.fill(captcha, target=target, adaptive=bool(adaptive)).as_dict()


@app.task(name="captcha_tasks.report_solution", base=CheckedTask, bind=True, max_retries=3)
def report_solution(self: CheckedTask, task_id: str, correct: bool = False) -> dict[str, Any]:
    """Tell the provider whether the answer of solve task ``task_id`` worked
    (``reportbad`` refunds wrong answers; reports older than ~15 min are refused)."""
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
    try:
        # The type picks the report method at providers that have one per type.
        captcha_type = _CAPTCHA_TYPES.get(str(kind))
        # At the provider that solved it (several providers: the job names it).
        solver = self.solver_for(str(provider or ""))
        solver.report(str(captcha_id), correct=bool(correct), captcha_type=captcha_type)
    except TransientSolverError as exc:
        raise self.retry_transient(exc) from exc
    return {
        "task_id": task_id,
        "captcha_id": str(captcha_id),
        "reported": "good" if correct else "bad",
    }


@app.task(name="captcha_tasks.ping", base=RedactedTask, bind=True)
def ping(self: Any) -> dict[str, Any]:
    """Round trip through the broker, a worker and the result backend."""
    return {
        "pong": True,
        "hostname": self.request.hostname or socket.gethostname(),
        "version": worker_version(),
    }


@app.task(
    name="captcha_tasks.get_balance",
    base=CheckedTask,
    bind=True,
    max_retries=3,
    # A refused key is an answer, not a crash: one line in the worker's log.
    throws=(*CheckedTask.throws, InvalidApiKey),
)
def get_balance(self: CheckedTask, provider: str = "") -> dict[str, Any]:
    """The provider account's balance, as a string to keep its decimals exact;
    ``provider``: which configured provider's (default: the preferred one)."""
    if not isinstance(provider, str):
        raise InvalidTaskInput("get_balance: provider must be a provider's name")
    solver = self.solver_for(provider)  # refuses a name not configured
    configs = self.settings.providers()
    config = next((c for c in configs if c.name == provider), configs[0])
    try:
        balance = solver.balance()
    except TransientSolverError as exc:
        raise self.retry_transient(exc) from exc
    return {"balance": str(balance), "provider": config.protocol, "provider_name": config.name}
