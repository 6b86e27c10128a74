"""Thin Celery tasks: arguments, retries and serialization here; logic in plain modules.

A solve task validates its arguments, records the request in Redis and returns
without holding the worker (the caller's ``delay()`` runs the same validation first,
:class:`~.task_bases.CheckedTask`, and raises without sending): the worker's solve
engine (:mod:`.engine_step`) submits it when the thread budget allows, polls it, and
stores the result under the same task id, so ``AsyncResult.get()`` works as for any task.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

from celery.exceptions import Ignore

from ..errors import ClientError, InvalidApiKey, InvalidTaskInput, TransientSolverError
from ..provider import (
    CAPTCHA_CLASSES,
    AwsWaf,
    Captcha,
    CaptchaType,
    Coordinates,
    DataDome,
    FriendlyCaptcha,
    FunCaptcha,
    GeeTest,
    GeeTestV4,
    Grid,
    HCaptcha,
    Image,
    MtCaptcha,
    Prosopo,
    RecaptchaV2,
    RecaptchaV3,
    Turnstile,
)
from ..provider.offers import refusal, withdrawal
from ..provider.routing import route
from ..results import (
    AwsWafResult,
    BalanceResult,
    CoordinatesResult,
    DataDomeResult,
    FillResult,
    GeeTestResult,
    GeeTestV4Result,
    GridResult,
    PingResult,
    ReportResult,
    SolveResult,
    TokenResult,
)
from ..settings.providers import ProviderConfig
from ..state import Keys, state_redis
from ..version import worker_version
from .celery_internals.admit_inline import NotInline, admitting_inline
from .celery_internals.request import RedactedRequest
from .redacted import RedactedTask
from .task_bases import CheckedTask
from .typed import task

__all__ = [
    "SolveTask",
    "fill_token_pool",
    "get_balance",
    "ping",
    "report_solution",
    "solve_aws_waf",
    "solve_coordinates",
    "solve_datadome",
    "solve_friendly_captcha",
    "solve_funcaptcha",
    "solve_geetest",
    "solve_geetest_v4",
    "solve_grid",
    "solve_hcaptcha",
    "solve_image",
    "solve_mtcaptcha",
    "solve_prosopo",
    "solve_recaptcha_v2",
    "solve_recaptcha_v3",
    "solve_turnstile",
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

    #: A solve's body runs in the caller too, as a check (``delay`` raises, sends nothing).
    check_in_caller = True

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
        ends this task later: this execution records nothing).

        As the caller's check (:meth:`~.task_bases.CheckedTask.check_call`) it stops once
        the captcha, ``proxy_id`` and the shapes of ``provider=`` / ``exclude=`` are
        checked, and a kind that no provider the caller's settings name (or the one
        ``provider=`` pins) offers is refused (:func:`_refuse_unoffered`): the caller
        needs no key, and the rest of what is configured (``_TYPES``, names it does not
        know) is the worker's to check."""
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
        excluded = self._check_route(provider, exclude)
        if checking:
            _refuse_unoffered(self.settings.providers(), captcha, bool(proxy_id), provider)
            self.stop_if_checking()
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
                return cast("SolveResult[Any]", pooled)
            outcome = queue()
        # The engine stores this task's result and logs its outcome; this run records no
        # state of its own (Celery's "ignored" line for it is not logged at INFO:
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


def _refuse_unoffered(
    configs: Sequence[ProviderConfig], captcha: Captcha, proxied: bool, provider: str | None
) -> None:
    """The caller's check of the catalogue: :class:`InvalidTaskInput` (code
    ``TYPE_NOT_OFFERED``, as admission says it) when no candidate among ``configs``
    offers ``captcha``'s kind (proxied or not). A caller whose settings describe no
    provider (the bare default: no key, no names, the default protocol) enqueues for
    workers it knows nothing of, so only a withdrawal refuses its call there. A
    ``provider=`` the caller does not know is the worker's to refuse."""
    candidates = [config for config in configs if provider in (None, config.name)]
    described = tuple(configs) != (ProviderConfig(),)

    def refuses(config: ProviderConfig) -> bool:
        if withdrawal(config.protocol, captcha):
            return True
        return described and refusal(config.protocol, captcha, proxied=proxied) is not None

    if candidates and all(refuses(config) for config in candidates):
        route(configs, captcha, proxied=proxied, provider=provider)


def _routing(request: Any) -> dict[str, object]:
    return {name: value for name in _ROUTING if (value := getattr(request, name, None))}


@task("captcha_tasks.solve_recaptcha_v2", base=SolveTask)
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
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Solve a reCAPTCHA v2: its token in ``solution``.

    ``invisible``: the invisible widget; ``enterprise``: reCAPTCHA Enterprise, with the
    page's ``data-s`` value in ``data_s`` where it has one; ``cookies`` and
    ``user_agent``: the browser's, for the provider to solve as. ``proxy_id``: a proxy
    of the pool (``captcha-tasks proxies``) the provider solves through. ``provider``:
    solve at that configured provider only; ``exclude``: never at these."""
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
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_recaptcha_v3", base=SolveTask)
def solve_recaptcha_v3(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    action: str = "verify",
    min_score: float = 0.3,
    enterprise: bool = False,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Solve a reCAPTCHA v3 for ``action`` with at least ``min_score`` (``enterprise``:
    reCAPTCHA Enterprise). ``proxy_id``, ``provider``, ``exclude``: as for
    :func:`solve_recaptcha_v2`."""
    return self.admit(
        lambda: RecaptchaV3(
            sitekey, pageurl, action=action, min_score=min_score, enterprise=enterprise
        ),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_turnstile", base=SolveTask)
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
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Solve a Cloudflare Turnstile: its token in ``solution``.

    ``action`` and ``cdata``: the widget's, where it sets them. On a Cloudflare
    challenge page, ``pagedata`` too (challenge mode: ``action``, ``cdata`` and
    ``pagedata`` from its ``turnstile.render`` call, all three needed); the result then
    names the browser to use the token with in ``user_agent``. ``proxy_id``,
    ``provider``, ``exclude``: as for :func:`solve_recaptcha_v2`."""
    return self.admit(
        lambda: Turnstile(
            sitekey, pageurl, action=action, cdata=cdata, pagedata=pagedata, user_agent=user_agent
        ),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_hcaptcha", base=SolveTask)
def solve_hcaptcha(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Solve an hCaptcha (where the provider supports it): its token in ``solution``."""
    return self.admit(
        lambda: HCaptcha(sitekey, pageurl), proxy_id=proxy_id, provider=provider, exclude=exclude
    )


@task("captcha_tasks.solve_funcaptcha", base=SolveTask)
def solve_funcaptcha(
    self: SolveTask,
    publickey: str,
    pageurl: str,
    *,
    surl: str | None = None,
    data_blob: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Solve an Arkose Labs FunCaptcha (``surl``: the Arkose API host; ``data_blob``:
    the page's ``data[blob]``): its token in ``solution``."""
    return self.admit(
        lambda: FunCaptcha(
            publickey, pageurl, surl=surl, data_blob=data_blob, user_agent=user_agent
        ),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_geetest", base=SolveTask)
def solve_geetest(
    self: SolveTask,
    gt: str,
    challenge: str,
    pageurl: str,
    *,
    api_server: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> GeeTestResult:
    """Solve a GeeTest v3. ``solution`` is a dict: geetest_challenge, geetest_validate,
    geetest_seccode."""
    return self.admit(
        lambda: GeeTest(gt, challenge, pageurl, api_server=api_server),
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_geetest_v4", base=SolveTask)
def solve_geetest_v4(
    self: SolveTask,
    captcha_id: str,
    pageurl: str,
    *,
    api_server: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> GeeTestV4Result:
    """Solve a GeeTest v4. ``solution`` is a dict: captcha_id, lot_number, pass_token,
    gen_time, captcha_output."""
    return self.admit(
        lambda: GeeTestV4(captcha_id, pageurl, api_server=api_server),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_aws_waf", base=SolveTask)
def solve_aws_waf(
    self: SolveTask,
    sitekey: str,
    iv: str,
    context: str,
    pageurl: str,
    *,
    challenge_script: str | None = None,
    captcha_script: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> AwsWafResult:
    """Solve an AWS WAF CAPTCHA. ``solution``: ``{"aws_waf_token": ...}`` where the
    provider gives the cookie, else ``{"captcha_voucher": ..., "existing_token": ...}``."""
    return self.admit(
        lambda: AwsWaf(
            sitekey,
            iv,
            context,
            pageurl,
            challenge_script=challenge_script,
            captcha_script=captcha_script,
        ),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_mtcaptcha", base=SolveTask)
def solve_mtcaptcha(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    action: str | None = None,
    invisible: bool = False,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Solve an MTCaptcha (``sitekey``: ``MTPublic-...``; ``action`` and ``invisible`` as
    the page's ``mtcaptchaConfig`` sets them, sent where the provider takes them): its
    token (the ``mtcaptcha-verifiedtoken`` field's value) in ``solution``."""
    return self.admit(
        lambda: MtCaptcha(sitekey, pageurl, action=action, invisible=invisible),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_prosopo", base=SolveTask)
def solve_prosopo(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Solve a Prosopo Procaptcha (``sitekey``: the site's address, ``5...``): its token
    in ``solution``."""
    return self.admit(
        lambda: Prosopo(sitekey, pageurl),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_friendly_captcha", base=SolveTask)
def solve_friendly_captcha(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    module_script_url: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Solve a Friendly Captcha (``sitekey``: the widget's ``data-sitekey``;
    ``module_script_url``: the widget script the page loads, which CapMonster Cloud needs
    to tell v1 from v2 and the others ignore): its token (the ``frc-captcha-solution``
    field's value) in ``solution``."""
    return self.admit(
        lambda: FriendlyCaptcha(sitekey, pageurl, module_script_url=module_script_url),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_datadome", base=SolveTask)
def solve_datadome(
    self: SolveTask,
    captcha_url: str,
    pageurl: str,
    user_agent: str,
    *,
    proxy_id: str | None = None,
    datadome_cookie: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> DataDomeResult:
    """Solve DataDome's slider captcha: ``captcha_url`` (the captcha iframe's address,
    ``t=fe``), the ``pageurl`` that answered with it, the browser's ``user_agent``;
    ``proxy_id``: the pool proxy the page was loaded through, required (the cookie is
    bound to that IP and that user agent); ``datadome_cookie``: the ``datadome`` cookie
    the challenge set, which CapMonster Cloud needs. A ``t=bv`` URL (DataDome banned the
    IP) is refused with code ``DATADOME_IP_BANNED``, nothing sent.

    ``solution``: the cookie to set (``name``, ``value``, ``set_cookie``, ``domain``);
    ``user_agent`` and ``proxy_id`` in the result name the identity to send it with."""

    def build() -> DataDome:
        captcha = DataDome(captcha_url, pageurl, user_agent, datadome_cookie=datadome_cookie)
        if proxy_id is None:
            raise InvalidTaskInput(
                f"{self.name}: DataDome needs proxy_id (every provider that solves it "
                "requires a proxy, and its cookie is bound to that IP); nothing was sent",
                "PROXY_REQUIRED",
            )
        return captcha

    return self.admit(build, proxy_id=proxy_id, provider=provider, exclude=exclude)


@task("captcha_tasks.solve_image", base=SolveTask)
def solve_image(
    self: SolveTask,
    image_b64: str,
    *,
    numeric: int | None = None,
    min_len: int | None = None,
    max_len: int | None = None,
    phrase: bool | None = None,
    regsense: bool | None = None,
    calc: bool | None = None,
    lang: str | None = None,
    textinstructions: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Read the text of an image (base64; jpg, png or gif): the text in ``solution``.

    Hints for the solver, each as in 2Captcha's API: ``numeric`` (1 digits only, 2
    letters only, 3 either, 4 both), ``min_len``, ``max_len``, ``phrase`` (several
    words), ``regsense`` (case matters), ``calc`` (an arithmetic sum to compute),
    ``lang`` (a language code), ``textinstructions`` (shown to the worker)."""
    if not isinstance(image_b64, str):
        raise InvalidTaskInput(f"{self.name}: image_b64 must be a base64 string")
    hints = {
        "numeric": numeric,
        "min_len": min_len,
        "max_len": max_len,
        "phrase": phrase,
        "regsense": regsense,
        "calc": calc,
        "lang": lang,
        "textinstructions": textinstructions,
    }
    given = {name: value for name, value in hints.items() if value is not None}
    limit = self.settings.max_image_bytes
    return self.admit(
        lambda: Image.from_base64(image_b64, max_image_bytes=limit, **given),
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_coordinates", base=SolveTask)
def solve_coordinates(
    self: SolveTask,
    image_b64: str,
    *,
    textinstructions: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> CoordinatesResult:
    """The points to click on an image (base64; jpg, png or gif), as
    ``[{"x": int, "y": int}, ...]`` in ``solution``."""
    if not isinstance(image_b64, str):
        raise InvalidTaskInput(f"{self.name}: image_b64 must be a base64 string")
    limit = self.settings.max_image_bytes
    return self.admit(
        lambda: Coordinates.from_base64(
            image_b64, textinstructions=textinstructions, max_image_bytes=limit
        ),
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_grid", base=SolveTask)
def solve_grid(
    self: SolveTask,
    image_b64: str,
    instruction: str,
    *,
    rows: int = 3,
    cols: int = 3,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> GridResult:
    """The tiles to click on one image of a ``rows`` x ``cols`` grid (base64; jpg, png or
    gif), which ``instruction`` names (the page's text, or reCAPTCHA's object id
    ``/m/...``, which CapSolver needs): ``{"tiles": [...], "rows": ..., "cols": ...}`` in
    ``solution``, tiles numbered from 0 left to right then top to bottom, sorted."""
    if not isinstance(image_b64, str):
        raise InvalidTaskInput(f"{self.name}: image_b64 must be a base64 string")
    limit = self.settings.max_image_bytes
    return self.admit(
        lambda: Grid.from_base64(
            image_b64, instruction, rows=rows, cols=cols, max_image_bytes=limit
        ),
        provider=provider,
        exclude=exclude,
    )


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
