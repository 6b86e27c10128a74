"""Tasks whose arguments are shown redacted wherever Celery shows a task: the Celery
side of hiding secrets.

:class:`RedactedTask` computes ``argsrepr``/``kwargsrepr`` at send time (``apply_async``
and ``retry``) and its worker-side request
(:class:`~.celery_internals.request.RedactedRequest`) computes them again, so
messages sent by other clients (``send_task``) are shown redacted too. The policy (what
is masked, and how) lives in :mod:`captcha_tasks.redaction` alone; this module only
applies it where Celery builds, retries and shows a task.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Sequence
from typing import Any

from celery import Task
from celery.exceptions import MaxRetriesExceededError
from celery.utils.saferepr import saferepr

from ..redaction import (
    HIDDEN,
    MAX_DEPTH,
    MAX_REPR,
    known_secrets,
    redact_args,
    scrub_text,
)

__all__ = ["RedactedTask", "redact_call", "send_redacted", "task_reprs"]

log = logging.getLogger(__name__)


def redact_call(
    args: Any, kwargs: Any, names: Sequence[str] = (), *, limit: int = MAX_REPR
) -> tuple[str, str]:
    """``(argsrepr, kwargsrepr)`` for a call; ``names`` are the positional parameters'
    names (so ``solve_image``'s first argument is known to be the image)."""
    secrets = known_secrets()
    shown_args, shown_kwargs = redact_args(args, kwargs, names)
    # Celery's own bounded repr, as it would show the real arguments.
    return (
        scrub_text(saferepr(shown_args, maxlen=limit, maxlevels=MAX_DEPTH + 1), secrets),
        scrub_text(saferepr(shown_kwargs, maxlen=limit, maxlevels=MAX_DEPTH + 1), secrets),
    )


def _positional_names(task: Any) -> tuple[str, ...]:
    """Names of ``task.run``'s positional parameters (``self`` excluded for bound tasks)."""
    cached: tuple[str, ...] | None = getattr(task, "_redaction_names", None)
    if cached is None:
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        try:
            params = inspect.signature(task.run).parameters.values()
            cached = tuple(p.name for p in params if p.kind in positional)
        except (AttributeError, TypeError, ValueError):  # not a task of this app: no names
            cached = ()
        with contextlib.suppress(AttributeError):
            task._redaction_names = cached
    return cached


def task_reprs(task: Any, args: Any, kwargs: Any) -> tuple[str, str]:
    """``(argsrepr, kwargsrepr)`` for a call of ``task``; never raises (a failure shows
    nothing rather than losing the message or showing the real arguments)."""
    try:
        return redact_call(
            args if args is not None else (),
            kwargs if kwargs is not None else {},
            _positional_names(task),
        )
    except Exception:
        log.exception("could not redact the arguments of %s", getattr(task, "name", task))
        return HIDDEN, HIDDEN


def send_redacted(app: Any, name: str, args: Any, kwargs: Any, **options: Any) -> Any:
    """``app.send_task`` showing the call redacted. ``send_task`` bypasses
    :meth:`RedactedTask.apply_async`, and without ``argsrepr``/``kwargsrepr`` Celery puts
    the real arguments in the message's headers and so in its ``task-sent`` event. A
    ``task-sent`` that reaches Flower after the worker's ``task-received`` (they come from
    different processes) overwrites the redacted arguments there."""
    options["argsrepr"], options["kwargsrepr"] = task_reprs(app.tasks.get(name), args, kwargs)
    return app.send_task(name, args=args, kwargs=kwargs, **options)


class RedactedTask(Task):  # type: ignore[misc]  # celery ships no type hints
    """A Task mixin: events, logs, ``inspect`` and Flower show redacted arguments.

    Cooperative with the other mixins (no ``__init__``, no hooks). Reprs passed by
    the caller are kept, after known secrets are scrubbed from them.
    """

    abstract = True
    Request = "captcha_tasks.worker.celery_internals.request:RedactedRequest"

    def redacted_reprs(self, args: Any, kwargs: Any) -> tuple[str, str]:
        return task_reprs(self, args, kwargs)

    def _with_reprs(self, args: Any, kwargs: Any, options: dict[str, Any]) -> None:
        if options.get("argsrepr") is None or options.get("kwargsrepr") is None:
            argsrepr, kwargsrepr = self.redacted_reprs(args, kwargs)
            if options.get("argsrepr") is None:
                options["argsrepr"] = argsrepr
            if options.get("kwargsrepr") is None:
                options["kwargsrepr"] = kwargsrepr
        secrets = known_secrets()
        for field in ("argsrepr", "kwargsrepr"):
            options[field] = scrub_text(str(options[field]), secrets)

    def apply_async(self, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any) -> Any:
        self._with_reprs(args, kwargs, options)
        return super().apply_async(args, kwargs, *rest, **options)

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: BaseException | None = None,
        throw: bool = True,
        eta: Any = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        request = self.request
        # With only one of args/kwargs given Celery merges them with the request's;
        # apply_async then shows the merged call (it sees the final arguments).
        if (args is None) == (kwargs is None):
            shown_args = request.args if args is None else args
            shown_kwargs = request.kwargs if kwargs is None else kwargs
            self._with_reprs(shown_args, shown_kwargs, options)
        try:
            return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries, **options)
        except MaxRetriesExceededError as error:
            if exc is not None and error is exc:
                raise
            # Celery's message carries the real arguments; it is stored and logged.
            argsrepr, kwargsrepr = self.redacted_reprs(request.args, request.kwargs)
            raise MaxRetriesExceededError(
                f"Can't retry {self.name}[{request.id}] args:{argsrepr} kwargs:{kwargsrepr}"
            ) from None
