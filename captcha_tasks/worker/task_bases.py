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
from typing import Any

import kombu.exceptions
import redis

from ..errors import (
    ChallengeRejected,
    InvalidTaskInput,
    RedisUnavailable,
    TransientSolverError,
    UnknownProxy,
)
from ..forksafe import PerProcess
from ..masking import mask_url
from ..provider import Provider, make_provider
from ..settings import Settings, get_settings
from .redacted import RedactedTask
from .session_bases import PinnedProxyTask, SessionLockTask, SharedCookiesTask

__all__ = [
    "CheckedTask",
    "PageTask",
    "PinnedProxyTask",
    "SessionLockTask",
    "SharedCookiesTask",
    "SolverTask",
]

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
        own = self.settings.for_provider(config)
        return _solvers.get(own, lambda: make_provider(own))

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
    with :class:`InvalidTaskInput` like any other bad input, not a ``TypeError``."""

    abstract = True

    def before_start(self, task_id: str, args: Any, kwargs: Any) -> None:
        try:
            inspect.signature(self.run).bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidTaskInput(f"{self.name}: {exc}") from None
        super().before_start(task_id, args, kwargs)


class PageTask(SharedCookiesTask, SessionLockTask, PinnedProxyTask, CheckedTask):
    """Shared cookies, the session lock, the pinned proxy and the solver, together.
    Waiting for a host's lock parks the task (no execution until the lock is free)."""

    abstract = True
    lock_wait = "park"
    #: Its ``Ignore`` (replaced by a solve and a submit, or parked) is logged by the
    #: task itself: Celery's "ignored" line goes to DEBUG (:mod:`.trace_log`).
    logs_its_ignore = True

    def cookie_host(self, args: tuple[Any, ...], kwargs: Any) -> str | None:
        if kwargs.get("isolated"):
            return None  # an isolated visitor neither reads nor writes shared cookies
        host: str | None = super().cookie_host(args, kwargs)
        return host

    def browser(self) -> Any:
        """This execution's HTTP session: shared cookies in, the worker's proxy on."""
        session = self.http
        self.use_proxy(session)
        return session
