"""The page workflow (the seeds' ``process_page``) as Celery tasks.

``fetch_page(url, *, form=None)`` loads the host's shared cookies, requests the page
through the worker's pinned proxy, and if the page is challenged (a reCAPTCHA,
Turnstile or hCaptcha sitekey in it) gets a token (a pooled one first) and submits
it, then saves the cookies for the whole cluster. An ALTCHA widget's proof of work is
solved by ``solve_altcha`` (on a worker, by default) and its payload posted the same
way. A token the site refuses is solved again, up to ``CAPTCHA_TASKS_PAGE_ATTEMPTS``,
for the form and widget the page shows when loaded again in the same session (a
site's form is good once); each page carries its own copy of the site's cookies from
its load to its post (:class:`~captcha_tasks.session.cookies.PageJar`), so the form
goes out as the visitor that loaded it. A DataDome challenge (an HTTP 403
with DataDome's captcha) and Cloudflare's challenge page (an HTTP 403 "Just a
moment..." from Cloudflare) are passed as the visitor that met them: through the
worker's pinned proxy and with its session's user agent (both bind their cookie to
the two), and the last step runs on the same worker (its direct queue), which sets the
cookie and loads the page again with that same identity; the cookie is kept for that
identity only, never in the host's shared jar (``VISITOR_BOUND_COOKIES``).

Spending a solve is serialised per host by the session lock, double-checked: the
task takes the lock only when the page is challenged, and looks again under the
lock with the cookies as they are now (the last holder may have just saved a
validation cookie). Tasks that find the lock held are parked (no worker slot, no
execution) and re-sent with the same task id when the lock is released, after the
holder saved the cookies, or by ``sweep_session_lock`` when a crashed holder's lock
expires (:mod:`captcha_tasks.session.parking`); then they read the fresh cookies.
The solve itself holds no worker either: the task replaces itself with
``solve | submit_challenge`` (same task id, so ``AsyncResult.get()`` returns the
final page), and the lock is handed to ``submit_challenge``, or released by an
errback if the solve fails.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, cast
from urllib.parse import urlsplit

import redis
from celery.exceptions import Ignore
from celery.signals import task_revoked
from celery.utils.nodenames import worker_direct

from .. import tracing
from ..errors import ChallengeRejected, InvalidTaskInput, NoProxyAvailable
from ..provider import Captcha, HCaptcha, RecaptchaV2, Turnstile
from ..results import PageResult
from ..session import parking
from ..session.cookies import CookieStore, PageJar, normalize_host
from ..session.locks import SessionLock
from ..session.pages import (
    Challenge,
    Page,
    check_url,
    detect_challenge,
    fetch,
    find_challenge,
    submit,
)
from ..state import state_redis
from .app import app
from .redacted import RedactedTask
from .session_bases import continues_later, release_and_wake, schedule_sweeper, wake
from .task_bases import PageTask
from .typed import task

__all__ = [
    "PageTask",
    "fetch_page",
    "release_session_lock",
    "submit_challenge",
    "sweep_session_lock",
]

log = logging.getLogger(__name__)

MAX_FORM_FIELDS = 50
MAX_FORM_VALUE = 4096
#: Solve tasks by challenge type.
_SOLVERS = {
    "recaptcha_v2": "captcha_tasks.solve_recaptcha_v2",
    "turnstile": "captcha_tasks.solve_turnstile",
    "hcaptcha": "captcha_tasks.solve_hcaptcha",
    "datadome": "captcha_tasks.solve_datadome",
    "cloudflare_challenge": "captcha_tasks.solve_cloudflare_challenge",
    "altcha": "captcha_tasks.solve_altcha",
}
#: Challenges passed as the visitor that met them (their cookie is bound to its IP and
#: user agent): solved through the worker's proxy, finished on the same worker; by name.
_VISITOR_BOUND = {"datadome": "DataDome", "cloudflare_challenge": "Cloudflare's challenge page"}
#: Challenges a refused page is solved again for, on the form its reload shows.
_RETRIED = frozenset({"recaptcha_v2", "turnstile", "hcaptcha", "altcha"})


def _check_options(form: Any, isolated: Any) -> dict[str, str]:
    """``fetch_page``'s ``form`` and ``isolated``, checked: the form's fields."""
    if isolated not in (True, False):
        raise InvalidTaskInput("isolated must be true or false")
    return _check_form(form)


def _check_form(form: Any) -> dict[str, str]:
    if form is None:
        return {}
    if not isinstance(form, dict) or len(form) > MAX_FORM_FIELDS:
        raise InvalidTaskInput(f"form must be a dict of at most {MAX_FORM_FIELDS} fields")
    for name, value in form.items():
        if not isinstance(name, str) or not isinstance(value, str) or len(value) > MAX_FORM_VALUE:
            raise InvalidTaskInput(f"form fields must be strings (<= {MAX_FORM_VALUE} chars)")
    return dict(form)


def _host(url: str) -> str:
    """``host[:port]`` of a checked URL (``url.split("/")[2]`` would keep ``?q`` of
    ``https://host?q``)."""
    return urlsplit(url).netloc


def _captcha(challenge: Challenge, page_url: str) -> Captcha:
    if challenge.type == "turnstile":
        return Turnstile(challenge.sitekey, page_url)
    if challenge.type == "hcaptcha":
        return HCaptcha(challenge.sitekey, page_url)
    return RecaptchaV2(challenge.sitekey, page_url)


def _solve(task: PageTask, challenge: Challenge, page_url: str, *, isolated: bool = False) -> Any:
    """The solve of ``challenge``: through the proxy this worker fetched the page with
    (DataDome and Cloudflare's challenge page: required, with the session's user agent,
    and DataDome's cookie or Cloudflare's page as loaded; an isolated visitor's other
    solves: no proxy). ALTCHA's: its challenge, given inline or fetched from its URL
    (allowlisted hosts only) by the worker that solves it."""
    proxy = {"proxy_id": task.proxy_id} if task.proxy_id and not isolated else {}
    if challenge.type == "altcha":
        source = (
            {"challenge_json": challenge.challenge_json}
            if challenge.challenge_json
            else {"challenge_url": challenge.captcha_url}
        )
        return app.signature(_SOLVERS["altcha"], args=(page_url,), kwargs={**source, **proxy})
    if challenge.type not in _VISITOR_BOUND:
        return app.signature(
            _SOLVERS[challenge.type], args=(challenge.sitekey, page_url), kwargs=proxy
        )
    if not task.proxy_id:
        raise NoProxyAvailable(
            f"{page_url} is behind {_VISITOR_BOUND[challenge.type]}, whose cookie is bound to "
            "the IP that solved it: this worker holds no pool proxy to solve it through"
        )
    session = task.browser()
    agent = str(session.headers.get("User-Agent", ""))
    if challenge.type == "cloudflare_challenge":
        page = {"html": challenge.page_html} if challenge.page_html else {}
        return app.signature(
            _SOLVERS[challenge.type],
            args=(page_url,),
            kwargs={"proxy_id": task.proxy_id, "user_agent": agent, **page},
        )
    return app.signature(
        _SOLVERS["datadome"],
        args=(challenge.captcha_url, page_url, agent),
        kwargs={"proxy_id": task.proxy_id, "datadome_cookie": _cookie(session, "datadome")},
    )


def _cookie(session: Any, name: str) -> str | None:
    """The value of the session's cookie ``name`` (the first, if several domains set one)."""
    return next((c.value for c in session.cookies if c.name == name and c.value), None)


def _result(page: Page, *, solved: bool, source: str | None, **extra: Any) -> PageResult:
    fields = {"status": page.status, "url": page.url, "solved": solved, "source": source}
    return cast(PageResult, {**fields, **extra})


def _submit_token(task: PageTask, challenge: Challenge, token: str, form: dict[str, str]) -> Page:
    data = {**challenge.fields, **form, challenge.token_field: token}
    page = submit(task.browser(), challenge.action, task.settings, data)
    if page.status >= 400 or find_challenge(page.text, page.url) is not None:
        raise ChallengeRejected(
            f"{challenge.action} refused the {challenge.type} token (HTTP {page.status})"
        )
    return page


class FetchPageTask(PageTask):
    """``fetch_page``'s base: the caller checks the form, ``isolated``, the URL's form
    and the caller's allowlist if it has one (a caller without
    ``CAPTCHA_TASKS_ALLOWED_DOMAINS`` leaves that to the worker). No DNS here: the worker
    resolves the host where it fetches it."""

    abstract = True
    check_in_caller = True

    def check_arguments(self, values: dict[str, Any]) -> None:
        _check_options(values["form"], values["isolated"])
        settings = self.settings
        check_url(values["url"], settings, resolve=False, allowlist=bool(settings.allowed_domains))


@task("captcha_tasks.fetch_page", base=FetchPageTask)
def fetch_page(
    self: FetchPageTask, url: str, *, form: dict[str, str] | None = None, isolated: bool = False
) -> PageResult:
    """Fetch ``url`` (allowlisted hosts only) as the cluster's one coherent visitor.

    ``form``: fields to submit with the challenge's token (or to POST to the page when
    it is not challenged). ``isolated=True``: fetch as a visitor of its own, with no
    shared cookies, pool or session lock (one solve per challenged page).

    Returns ``{"status", "url", "solved", "source"}``: ``solved`` is whether this call
    spent a solve, ``source`` where its token came from (``"api"``, ``"pool"``, or
    ``None`` when the page was not challenged).
    """
    fields = _check_options(form, isolated)
    settings = self.settings
    check_url(url, settings)
    if not isolated:
        # Someone is solving this host's challenge right now: wait for their cookies
        # rather than load (and be challenged by) the page again meanwhile.
        busy = SessionLock(state_redis(settings), settings, _host(url))
        if busy.holder() is not None:
            wait = self._wait_for(busy, settings)  # parked: re-sent when it is free
            if wait is not None:
                raise wait
    page = fetch(self.browser(), url, settings)
    challenge = detect_challenge(page)
    _traced_load(page, challenge)
    if challenge is None:
        if fields:
            page = submit(self.browser(), page.url, settings, fields)
        return _result(page, solved=False, source=None)

    if isolated:
        solve = _solve(self, challenge, page.url, isolated=challenge.type not in _VISITOR_BOUND)
        finish = _finish(self, challenge, page.url, fields, isolated=True)
        raise _replace(self, page.url, solve, finish)
    if challenge.type in _VISITOR_BOUND or challenge.type == "altcha":
        # Never pooled: a cookie bound to one identity; a proof of work for one challenge.
        return _solve_under_lock(self, url, _host(page.url), fields)

    from ..engine.pool import TokenPool  # the worker's side: enqueuing loads no engine

    captcha = _captcha(challenge, page.url)
    pooled = TokenPool(state_redis(settings), settings).take(captcha)
    if pooled is not None:
        try:
            page = _submit_token(self, challenge, pooled["solution"], fields)
        except ChallengeRejected:
            if settings.page_attempts <= 1:
                raise
            # A pooled token names no solve to count or report: the next one is solved.
            log.info(
                "Task %s[%s] the pooled token was refused: solving", self.name, self.request.id
            )
            return _solve_under_lock(self, url, _host(page.url), fields, attempt=2)
        return _result(page, solved=False, source="pool")

    return _solve_under_lock(self, url, _host(page.url), fields)


def _traced_load(page: Page, challenge: Challenge | None) -> None:
    """A page load as an event of the running page span: its status, the challenge found."""
    tracing.event(
        "page loaded",
        {
            "http.response.status_code": page.status,
            "captcha_tasks.challenge": challenge.type if challenge is not None else "none",
        },
    )


def _solve_under_lock(
    task: PageTask, url: str, host: str, fields: dict[str, str], *, attempt: int = 1
) -> PageResult:
    """The host's session lock, a second look under it, and a solve that holds no worker
    (the task replaces itself; the lock goes to ``submit_challenge``)."""
    settings = task.settings
    client = state_redis(settings)
    lock = SessionLock(client, settings, host, owner=task.request.hostname)
    task.acquire_or_wait(lock, settings)  # parked: re-sent when the cookies are fresh
    try:
        # Double check under the lock, with the cookies as they are now.
        CookieStore(client, settings).apply(task.http, host, task.cookie_visitor(task.http))
        page = fetch(task.browser(), url, settings)
        challenge = detect_challenge(page)
        _traced_load(page, challenge)
        if challenge is None:
            release_and_wake(task.app, lock)
            return _result(page, solved=False, source=None)
        from ..engine.timing import DEADLINE

        # The lock must outlive the solve: it is handed to submit_challenge.
        lock.extend(settings.scaled(DEADLINE[challenge.type]) + settings.lock_ttl)
        token = lock.token
        assert token is not None
        # The provider solves through the proxy this worker fetched the page with.
        solve = _solve(task, challenge, page.url).on_error(
            release_session_lock.s(host=host, token=token)
        )
        more = {"attempt": attempt} if attempt > 1 else {}
        finish = _finish(task, challenge, page.url, fields, host=host, lock_token=token, **more)
    except BaseException:
        release_and_wake(task.app, lock)
        raise
    raise _replace(task, page.url, solve, finish)


def _replace(task: PageTask, page_url: str, solve: Any, finish: Any) -> Exception:
    """End ``task``'s execution: it goes on as ``solve | finish``, ``finish`` under its
    id, with ``page_url``'s cookies as this execution leaves them. Logged and told to
    event consumers as that (not as Celery's "ignored")."""
    task.hand_on_cookies(page_url)
    try:
        # Celery sends the chain and raises Ignore (it returns only for an eager task).
        replaced: Exception = task.replace(solve | finish)
    except Ignore as ignore:
        log.info(
            "Task %s[%s] challenged: solving with %s, then %s under the same id",
            task.name,
            task.request.id,
            solve.task,
            finish.task,
        )
        continues_later(task)
        replaced = ignore
    return replaced


def _finish(
    task: PageTask, challenge: Challenge, page_url: str, form: dict[str, str], **extra: Any
) -> Any:
    # The last step of a replaced fetch_page carries its id: under fetch_page's name (a
    # shadow name: what its log lines and events, so Flower, show), the page's task to
    # its end rather than a task the caller never called.
    finish = submit_challenge.s(
        url=page_url,
        sitekey=challenge.sitekey,
        action=challenge.action,
        fields=challenge.fields,
        token_field=challenge.token_field,
        challenge_type=challenge.type,
        form=form,
        **extra,
    ).set(shadow=fetch_page.name)
    if challenge.type in _VISITOR_BOUND and task.request.hostname:
        # The cookie is good only from this worker's proxy: its own queue takes the rest.
        finish.set(queue=worker_direct(task.request.hostname).name)
    return finish


@app.task(name="captcha_tasks.submit_challenge", base=PageTask, bind=True)
def submit_challenge(
    self: PageTask,
    solved: dict[str, Any],
    *,
    url: str,
    action: str,
    fields: dict[str, str],
    token_field: str,
    challenge_type: str,
    form: dict[str, str],
    host: str = "",
    lock_token: str = "",
    isolated: bool = False,
    sitekey: str = "",
    attempt: int = 1,
    refused: list[str] | None = None,
) -> PageResult:
    """The second half of ``fetch_page``: submit the solved token, keep the cookies
    (the mixin saves them for the cluster), release the host's session lock.

    The site's verdict on the token is counted for its solve (the task's parent: the
    engine sends this step with ``parent_id`` the solve's id). A refused token is
    reported to its provider once, and while ``CAPTCHA_TASKS_PAGE_ATTEMPTS`` allows the
    task goes on as a fresh ``solve | submit_challenge`` (same task id, the session
    lock handed on); ``ChallengeRejected`` once the attempts are spent."""
    settings = self.settings
    if not isinstance(host, str) or not isinstance(lock_token, str):
        raise InvalidTaskInput("submit_challenge: host and lock_token must be strings")
    if not isinstance(challenge_type, str):
        raise InvalidTaskInput("submit_challenge: challenge_type must be a challenge's type")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise InvalidTaskInput("submit_challenge: attempt must be a positive integer")
    if refused is not None and not (
        isinstance(refused, list) and all(isinstance(name, str) for name in refused)
    ):
        raise InvalidTaskInput("submit_challenge: refused must be a list of provider names")
    handed_on = False
    try:
        # The page's URL, as this step names its cookies by it: its form only (no DNS on
        # every post); a reload fetches it with every check.
        check_url(url, settings, resolve=False)
        if challenge_type in _VISITOR_BOUND:
            page = _set_bound_cookies(self, solved, action, challenge_type)
            self.save_cookies()
            return _result(
                page,
                solved=solved.get("source") == "api",
                source=solved.get("source"),
                captcha_id=solved.get("captcha_id"),
            )
        if not isinstance(solved, dict) or not isinstance(solved.get("solution"), str):
            raise InvalidTaskInput("submit_challenge needs a solve task's result")
        check_url(action, settings)
        if not isinstance(token_field, str) or not token_field:
            raise InvalidTaskInput("submit_challenge: token_field must be a form field name")
        if not isinstance(fields, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in fields.items()
        ):
            raise InvalidTaskInput("submit_challenge: fields must map names to strings")
        challenge = Challenge(str(challenge_type), str(sitekey), token_field, action, dict(fields))
        solve_id = str(solved.get("task_id") or self.request.parent_id or "")
        self.carry_page_cookies(url)  # as the visitor that loaded the form
        try:
            page = _submit_token(self, challenge, solved["solution"], _check_form(form))
        except ChallengeRejected:
            tracing.event("token refused", {"captcha_tasks.attempt": attempt})
            if attempt >= settings.page_attempts or challenge_type not in _RETRIED:
                _judged(self, solve_id, accepted=False)
                raise
            page, fresh = _reload(self, url, solve_id)
            if fresh is not None:
                log.info(
                    "Task %s[%s] %s refused the token (attempt %d of %d): solving again "
                    "for the form the page shows now",
                    fetch_page.name,
                    self.request.id,
                    _host(action),
                    attempt,
                    settings.page_attempts,
                )
                avoid = [*(refused or []), str(solved.get("provider") or "")]
                again = _again(
                    self, fresh, page.url, form, host, lock_token, isolated, attempt, avoid
                )
                if again is None:  # the host's lock expired meanwhile: another visitor's turn
                    raise
                handed_on = True
                raise again from None
            log.info(
                "Task %s[%s] %s answered the token as refused, but the page loads unchallenged "
                "now: served",
                fetch_page.name,
                self.request.id,
                _host(action),
            )
        else:
            tracing.event("token accepted", {"captcha_tasks.attempt": attempt})
            _judged(self, solve_id, accepted=True)
        # The waiters read the cookies as soon as the lock is free: save them first.
        self.save_cookies()
    finally:
        if not handed_on:
            self.end_page(url)
        if lock_token and not handed_on:
            lock = SessionLock.adopt(state_redis(settings), settings, host, lock_token)
            release_and_wake(self.app, lock)
    return _result(
        page,
        solved=solved.get("source") == "api",
        source=solved.get("source"),
        captcha_id=solved.get("captcha_id"),
        **({"task_id": solve_id} if solve_id and solved.get("source") == "api" else {}),
        attempts=attempt,
    )


def _reload(task: PageTask, url: str, solve_id: str) -> tuple[Page, Challenge | None]:
    """``url`` loaded again in the same session (proxy, cookies, user agent) after the
    site refused the token of solve ``solve_id``, and the challenge it shows now (its
    form, one-time fields and sitekey as of this load), or None when it is no longer
    challenged. The token's verdict is counted by what the reload shows: challenged
    still, it was refused (reported to its provider once); not challenged, the post did
    pass (nothing else changed this visitor's cookies since its load)."""
    try:
        page = fetch(task.browser(), url, task.settings)
    except BaseException:
        _judged(task, solve_id, accepted=False)
        raise
    challenge = detect_challenge(page)
    _judged(task, solve_id, accepted=challenge is None)
    if challenge is not None and challenge.type not in _RETRIED:
        raise ChallengeRejected(
            f"{_host(url)} refused the token and now shows a {challenge.type} challenge: "
            "not solved again within this page's attempts"
        )
    return page, challenge


def _judged(task: PageTask, solve_id: str, *, accepted: bool) -> None:
    """Count the site's verdict on solve ``solve_id``'s token (a rejection is reported to
    its provider once); a token the engine did not solve (a pooled one) is not counted."""
    from ..errors import UnknownSolve
    from .feedback import judge

    if not solve_id:
        return
    try:
        judge(task.settings, solve_id, accepted=accepted)
    except UnknownSolve:
        log.debug("no solve %s to count the verdict for (a pooled token)", solve_id)
    except Exception as exc:  # counting never costs the page
        log.warning("could not count the verdict on solve %s: %s", solve_id, exc)


def _again(
    task: PageTask,
    challenge: Challenge,
    url: str,
    form: dict[str, str],
    host: str,
    lock_token: str,
    isolated: bool,
    attempt: int,
    refused: list[str],
) -> Exception | None:
    """The page's next attempt: a fresh solve of ``challenge`` and its submit, under the
    same task id, holding the same session lock (extended for the solve; None if the
    lock expired meanwhile: no attempt without it). The solve avoids the providers whose
    tokens this page refused while another one is configured (with every provider
    refused, any may solve it again)."""
    settings = task.settings
    names = [config.name for config in settings.providers()]
    refused = sorted({name for name in refused if name in names})
    exclude = refused if len(refused) < len(names) else []
    extra: dict[str, Any] = {"attempt": attempt + 1, "refused": refused}
    solve = _solve(task, challenge, url, isolated=isolated)
    if exclude and challenge.type != "altcha":  # ALTCHA's is solved by the worker
        solve.kwargs["exclude"] = exclude
    if isolated:
        extra["isolated"] = True
    elif lock_token:
        from ..engine.timing import DEADLINE

        lock = SessionLock.adopt(state_redis(settings), settings, host, lock_token)
        if not lock.extend(settings.scaled(DEADLINE[challenge.type]) + settings.lock_ttl):
            return None
        solve = solve.on_error(release_session_lock.s(host=host, token=lock_token))
        extra.update(host=host, lock_token=lock_token)
    finish = _finish(task, challenge, url, form, **extra)
    return _replace(task, url, solve, finish)


def _bound_cookies(solved: Any, challenge_type: str) -> list[tuple[str, str, str]]:
    """The cookies (name, value, domain) a visitor-bound solve's result carries:
    DataDome's one cookie, or every cookie that passed Cloudflare's challenge page (no
    domain: the page's own host)."""
    solution = solved.get("solution") if isinstance(solved, dict) else None
    if challenge_type == "datadome":
        if isinstance(solution, dict) and all(
            isinstance(solution.get(k), str) for k in ("name", "value", "domain")
        ):
            return [(solution["name"], solution["value"], solution["domain"])]
        raise InvalidTaskInput("submit_challenge needs solve_datadome's result")
    cookies = solution.get("cookies") if isinstance(solution, dict) else None
    if (
        not isinstance(cookies, dict)
        or not cookies
        or not all(
            isinstance(name, str) and isinstance(value, str) for name, value in cookies.items()
        )
    ):
        raise InvalidTaskInput("submit_challenge needs solve_cloudflare_challenge's result")
    return [(name, value, "") for name, value in cookies.items()]


def _set_bound_cookies(task: PageTask, solved: Any, url: str, challenge_type: str) -> Page:
    """Set the cookies a DataDome or Cloudflare challenge solve earned and load ``url``
    again, as the identity they are bound to: this worker's proxy and its session's user
    agent (refused if either changed)."""
    cookies = _bound_cookies(solved, challenge_type)
    what = _VISITOR_BOUND[challenge_type]
    check_url(url, task.settings)
    session = task.browser()
    agent = str(session.headers.get("User-Agent", ""))
    if solved.get("proxy_id") != task.proxy_id or solved.get("user_agent") != agent:
        changed = "user agent" if solved.get("proxy_id") == task.proxy_id else "proxy"
        raise ChallengeRejected(
            f"the {what} cookie for {url} is bound to the proxy and user agent it was "
            f"solved with (proxy {solved.get('proxy_id')!r}); this worker's {changed} "
            "changed since: not sent"
        )
    host = urlsplit(url).hostname or ""
    for name, value, domain in cookies:
        if not domain or not (host == domain.lstrip(".") or host.endswith(domain)):
            domain = host  # a domain the page is not in: the page's own host
        for old in [c for c in session.cookies if c.name == name]:
            session.cookies.clear(old.domain, old.path, old.name)
        session.cookies.set(name, value, domain=domain, path="/")
    page = fetch(session, url, task.settings)
    if page.status >= 400 or detect_challenge(page) is not None:
        raise ChallengeRejected(f"{url} refused the {what} cookie (HTTP {page.status})")
    return page


@app.task(name="captcha_tasks.release_session_lock", base=RedactedTask, bind=True)
def release_session_lock(
    self: Any, request: Any, exc: Any, traceback: Any, *, host: str, token: str
) -> None:
    """Errback of a page solve that failed: free the host's session lock at once."""
    from ..settings import get_settings

    settings = get_settings()
    release_and_wake(self.app, SessionLock.adopt(state_redis(settings), settings, host, token))


@task_revoked.connect
def release_revoked_page(sender: Any = None, request: Any = None, **kwargs: Any) -> None:
    """A page revoked while its solve ran: Celery drops its last step (``submit_challenge``,
    under the page's id) unrun, so the host's session lock that step holds is released
    here, and the page's own cookies deleted, instead of waiting for the lock's TTL."""
    if getattr(sender, "name", None) != submit_challenge.name:
        return
    from ..settings import get_settings

    given = getattr(request, "kwargs", None) or {}
    host, token, url = given.get("host"), given.get("lock_token"), given.get("url")
    settings = get_settings()
    client = state_redis(settings)
    if isinstance(host, str) and isinstance(token, str) and host and token:
        release_and_wake(app, SessionLock.adopt(client, settings, host, token))
    page_id = getattr(request, "id", None)
    if isinstance(url, str) and isinstance(page_id, str) and page_id:
        with contextlib.suppress(InvalidTaskInput, redis.RedisError):
            PageJar(client, settings, page_id).clear(normalize_host(url))


@app.task(name="captcha_tasks.sweep_session_lock", base=RedactedTask, bind=True, ignore_result=True)
def sweep_session_lock(self: Any, *, host: str, due: int) -> int:
    """Wake the tasks parked on ``host``'s session lock that must run now: all of them
    once the lock is free (its holder crashed), those past their deadline while it is
    held; and come back while others remain. Returns how many were re-sent."""
    from ..settings import get_settings

    settings = get_settings()
    found = parking.sweep(state_redis(settings), settings, host, int(due))
    woken = wake(self.app, host, found.parked)
    if found.again_in > 0:
        schedule_sweeper(self.app, host, found.due, found.again_in)
    return woken
