"""Custom Celery Task base classes: ours, and those offered to users' own tasks.

- :class:`SolverTask`, :class:`CheckedTask`: tasks that talk to the solver provider.
  Per-process resources (the solver client and its HTTP session) are built lazily on
  first use in the process that uses them, so prefork children never share a
  connection opened before the fork.
- :class:`SharedCookiesTask`, :class:`SessionLockTask`, :class:`PinnedProxyTask`
  (:mod:`.session_bases`): the cluster's shared session state, combinable with each
  other and with the above (``class SiteTask(SharedCookiesTask, SessionLockTask,
  PinnedProxyTask)``).
- :class:`PageTask`: all of them together, for the page workflow.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any

import kombu.exceptions
import redis

from ..caller.checks import misfit, sending_unchecked, unchecked_sends
from ..errors import (
    ChallengeRejected,
    InvalidTaskInput,
    RedisUnavailable,
    TransientSolverError,
    UnknownProxy,
)
from ..forksafe import PerProcess
from ..provider import Provider
from ..redaction import mask_url
from ..session.cookies import PageJar, normalize_host
from ..settings import Settings, get_settings
from ..state import state_redis
from .redacted import RedactedTask
from .session_bases import PinnedProxyTask, SessionLockTask, SharedCookiesTask
from .tracing_hooks import page_span

__all__ = [
    "CheckedTask",
    "PageTask",
    "PinnedProxyTask",
    "SessionLockTask",
    "SharedCookiesTask",
    "SolverTask",
    "misfit",
    "unchecked_sends",
]

log = logging.getLogger(__name__)

#: The provider client of each process, by settings.
_solvers: PerProcess[Provider] = PerProcess()


class SolverTask(RedactedTask):
    """A task that talks to the solver provider (arguments shown redacted: see
    :mod:`.redacted`)."""

    abstract = True
    #: Refusals at the edge are normal operation: the worker logs them in one line
    #: ("raised expected"), without a traceback; the caller still gets the error.
    throws = (InvalidTaskInput, UnknownProxy, ChallengeRejected)

    def apply_async(self, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any) -> Any:
        """Celery's ``apply_async``; a Redis that does not answer is one typed error
        (:class:`RedisUnavailable`, after a few seconds of retries) instead of a
        ``RuntimeError`` at the end of a hundred-line chain of reconnect attempts."""
        try:
            return super().apply_async(args, kwargs, *rest, **options)
        except (kombu.exceptions.OperationalError, redis.RedisError, RuntimeError) as exc:
            cause = exc if not isinstance(exc, RuntimeError) else exc.__cause__
            if not isinstance(cause, (kombu.exceptions.OperationalError, redis.RedisError)):
                raise
            url = mask_url(self.app.conf.broker_url)
            raise RedisUnavailable(
                f"{self.name}: cannot reach Redis at {url} ({cause}); "
                "the task may not have been queued"
            ) from None

    @property
    def settings(self) -> Settings:
        return get_settings()

    @property
    def solver(self) -> Provider:
        """The provider client of this process and these settings (built on first use,
        so a prefork child never shares a connection its parent opened)."""
        from ..provider import make_provider  # the HTTP clients: for workers, not callers

        settings = self.settings
        return _solvers.get(settings, lambda: make_provider(settings))

    def solver_for(self, name: str) -> Provider:
        """The client of configured provider ``name`` (``""``: the preferred one)."""
        if not name:
            return self.solver
        config = next((c for c in self.settings.providers() if c.name == name), None)
        if config is None:
            known = ", ".join(c.name for c in self.settings.providers())
            raise InvalidTaskInput(
                f"{self.name}: no provider named {name!r} is configured ({known})",
                "UNKNOWN_PROVIDER",
            )
        from ..provider import make_provider

        return _solvers.get((self.settings, name), lambda: make_provider(self.settings, config))

    def retry_transient(self, exc: TransientSolverError) -> Exception:
        """``raise self.retry_transient(exc)``: retry after the error's own back-off
        (scaled by ``CAPTCHA_TASKS_TIME_SCALE``), within the task's ``max_retries``."""
        from .celeryconfig import MAX_COUNTDOWN_SECONDS

        # Capped so a countdown never nears the broker's visibility timeout.
        countdown = min(self.settings.scaled(exc.retry_after or 5.0), MAX_COUNTDOWN_SECONDS)
        result: Exception = self.retry(exc=exc, countdown=countdown)
        return result


class CheckedTask(SolverTask):
    """A solver task whose message must fit its signature: arguments that do not (a
    ``send_task`` from another client; ``delay`` checks on the caller's side) fail
    with :class:`InvalidTaskInput` like any other bad input, not a ``TypeError``.

    With ``check_in_caller``, ``delay()``, ``apply_async()`` and complete signatures
    (``.s()`` / ``.si()`` whose arguments fill the task's parameters) also check the
    arguments' values in the caller (:meth:`check_arguments`, which the worker's run of
    the task checks again), so a bad call raises there and sends nothing.
    """

    abstract = True
    #: Whether the caller checks the arguments' values before sending (see above).
    check_in_caller = False

    def check_arguments(self, values: dict[str, Any]) -> None:
        """The caller's check of a call's arguments (``values``: by parameter name, the
        defaults filled in) beyond their fit to the signature: raise what the worker
        would (:class:`InvalidTaskInput`), reading the caller's settings and nothing in
        Redis. Nothing here: a task with values to check says which."""

    def check_call(self, args: Any, kwargs: Any) -> None:
        """Raise what the worker would for these arguments (:class:`InvalidTaskInput`):
        their fit to the signature, then :meth:`check_arguments`."""
        args = tuple(args) if args else ()
        kwargs = dict(kwargs) if kwargs else {}
        self.check_fits(args, kwargs)
        bound = inspect.signature(self.run).bind(*args, **kwargs)
        bound.apply_defaults()
        self.check_arguments(dict(bound.arguments))

    def check_fits(self, args: Any, kwargs: Any) -> None:
        """Celery's own check of a call against the task's signature (``Task.typing``),
        its ``TypeError`` raised as :class:`~captcha_tasks.errors.ArgumentsMismatch` (an
        ``InvalidTaskInput`` and a ``TypeError``) naming, for a misspelt keyword, the
        parameter it is nearest to."""
        try:
            self.__header__(*(args or ()), **(kwargs or {}))
        except TypeError as exc:
            raise misfit(self, exc, kwargs or {}, args or ()) from None

    def apply_async(self, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any) -> Any:
        # A step sent by a worker when its parent ended (Celery's chain and callbacks,
        # the solve engine's; both pass parent_id) is not checked here: its arguments
        # hold the parent's result, and the worker that receives it refuses it under
        # its own id, where its caller waits, rather than failing the parent's ending.
        if not options.get("parent_id") and not sending_unchecked():
            if self.check_in_caller:
                self.check_call(args, kwargs)
            else:
                self.check_fits(args, kwargs)
        return super().apply_async(args, kwargs, *rest, **options)

    def signature(self, args: Any = None, *starargs: Any, **starkwargs: Any) -> Any:
        """Celery's signature, checked at once when it is complete: immutable (``.si()``),
        or with arguments that fill the task's parameters. A partial ``.s()`` waits for
        a chain's parent's result and is checked when it is sent."""
        sig = super().signature(args, *starargs, **starkwargs)
        if self.check_in_caller and not sending_unchecked():
            if sig.immutable or self._binds(sig.args, sig.kwargs):
                self.check_call(sig.args, sig.kwargs)
            else:
                self._check_partial(sig.args, sig.kwargs)
        return sig

    def _check_partial(self, args: Any, kwargs: Any) -> None:
        """A partial signature's keywords and count of arguments, with a chain parent's
        result to come first: a keyword the task does not take is refused now."""
        try:
            inspect.signature(self.run).bind_partial(None, *(args or ()), **(kwargs or {}))
        except TypeError as exc:
            raise misfit(self, exc, kwargs or {}, args or ()) from None

    def _binds(self, args: Any, kwargs: Any) -> bool:
        try:
            inspect.signature(self.run).bind(*(args or ()), **(kwargs or {}))
        except TypeError:
            return False
        return True

    def before_start(self, task_id: str, args: Any, kwargs: Any) -> None:
        try:
            inspect.signature(self.run).bind(*args, **kwargs)
        except TypeError as exc:
            raise misfit(self, exc, kwargs, args) from None
        super().before_start(task_id, args, kwargs)


class PageTask(SharedCookiesTask, SessionLockTask, PinnedProxyTask, CheckedTask):
    """Shared cookies, the session lock, the pinned proxy and the solver, together.
    Waiting for a host's lock parks the task (no execution until the lock is free)."""

    abstract = True
    lock_wait = "park"
    #: Its ``Ignore`` (replaced by a solve and a submit, or parked) is logged by the
    #: task itself: Celery's "ignored" line goes to DEBUG (:mod:`.celery_internals.tracer`).
    logs_its_ignore = True
    #: Outermost: every step of a page (its fetch, each post of a token) is a span of
    #: the page's trace, the cookies' and the lock's work inside it.
    scopes = ("trace_scope",)

    def trace_scope(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """This step's span (``captcha_tasks.fetch_page``, ``captcha_tasks.submit_challenge``):
        the page's host, the attempt and the challenge's type where the step has them."""
        url = kwargs.get("url", args[0] if args else None)
        return page_span(
            self,
            f"captcha_tasks.{self.name.rpartition('.')[2]}",
            url,
            isolated=kwargs.get("isolated"),
            attempt=kwargs.get("attempt", 1 if "challenge_type" in kwargs else None),
            challenge=kwargs.get("challenge_type"),
        )

    def cookie_host(self, args: tuple[Any, ...], kwargs: Any) -> str | None:
        if kwargs.get("isolated"):
            return None  # an isolated visitor neither reads nor writes shared cookies
        host: str | None = super().cookie_host(args, kwargs)
        return host

    def on_replace(self, sig: Any) -> Any:
        # The replacement (a solve of the challenge found on the page, then its submit)
        # is built from what the worker read: checked by the worker that receives it,
        # which fails it under this task's id and releases the host's lock by errback.
        with unchecked_sends():
            return super().on_replace(sig)

    def page_jar(self) -> PageJar | None:
        """This page's own copy of its cookies (:class:`PageJar`, by the task id every
        step of the page keeps); None outside a task's execution."""
        page_id = self.request.id
        if not isinstance(page_id, str) or not page_id:
            return None
        settings = get_settings()
        return PageJar(state_redis(settings), settings, page_id)

    def hand_on_cookies(self, url: str) -> None:
        """The page goes on in another step (maybe on another worker): the host's shared
        cookies are saved, and this session's own copy of the page's host cookies kept
        for that step (:meth:`carry_page_cookies`). A failure is logged: the step after
        meets the site's verdict on what it has."""
        try:
            self.save_cookies()
            jar = self.page_jar()
            if jar is not None:
                jar.merge(self.http, normalize_host(url))
        except redis.RedisError as exc:
            log.warning("%s: could not keep the page's cookies: %s", self.name, exc)

    def carry_page_cookies(self, url: str) -> None:
        """Load the cookies this page's earlier step left (:meth:`hand_on_cookies`) over
        the session's: the step posts the form as the visitor that loaded it (a site's
        one-time form field is bound to that visitor's session cookie), and what differs
        from the host's shared jar is merged into it when the step ends."""
        jar = self.page_jar()
        if jar is not None:
            jar.apply(self.http, normalize_host(url))

    def end_page(self, url: str) -> None:
        """The page's last step: its own copy of the cookies is deleted."""
        jar = self.page_jar() if isinstance(url, str) else None
        if jar is None:
            return
        try:
            jar.clear(normalize_host(url))
        except InvalidTaskInput:
            pass  # no page's URL: no jar of it was kept
        except redis.RedisError as exc:  # its TTL ends it
            log.warning("%s: could not delete the page's cookies: %s", self.name, exc)

    def browser(self) -> Any:
        """This execution's HTTP session: shared cookies in, the worker's proxy on."""
        session = self.http
        self.use_proxy(session)
        return session
