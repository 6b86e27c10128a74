"""Task names of 0.2 that a family's task now covers with an argument, kept for one
release: ``solve_recaptcha_v2_enterprise`` (``solve_recaptcha_v2(..., enterprise=True,
data_s=...)``) and ``solve_turnstile_challenge`` (``solve_turnstile(..., pagedata=...)``).

Each is still registered under its old name, so messages a 0.2 caller queued are solved.
Called from Python (``.delay()``, ``.apply_async()``, a direct call, ``aio``) it warns
once per process with a :class:`FutureWarning` naming the call to make instead, then
sends (or runs) that call: the new task, under its own name. FutureWarning, not
DeprecationWarning: Python hides a DeprecationWarning raised in any module but
``__main__``, so the application code that calls ``.delay()`` would never show it before
the name is gone.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from ..caller.typed import TypedTask
from ..provider import RecaptchaV2, Turnstile
from ..results import TokenResult
from .kind_tasks import solve_recaptcha_v2, solve_turnstile
from .solve_tasks import SolveTask
from .typed import task

__all__ = ["solve_recaptcha_v2_enterprise", "solve_turnstile_challenge"]

log = logging.getLogger(__name__)

#: Modules a call passes through between the caller's line and :func:`warn_once`.
_SENDING = ("celery.", "captcha_tasks.worker.", "captcha_tasks.aio", "asyncio.")

#: The old names this process has warned about.
_warned: set[str] = set()


def warn_once(old: str, instead: str) -> None:
    """Warn once per process that ``old`` is deprecated and ``instead`` replaces it."""
    if old in _warned:
        return
    _warned.add(old)
    # Pointed at the caller's line: the first frame outside Celery and this package's
    # sending code (``.delay()``, a signature's ``.delay()``, ``aio``).
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(_SENDING):
        frame, level = frame.f_back, level + 1
    warnings.warn(
        f"captcha_tasks.{old} is deprecated and will be removed in the next release; "
        f"call {instead} instead",
        FutureWarning,
        stacklevel=level,
    )


class DeprecatedSolveTask(SolveTask):
    """A 0.2 task name: the worker runs queued messages of it; a caller in Python is
    warned and sent to :attr:`successor` with :meth:`translate`'s arguments."""

    abstract = True
    #: The task that replaces this one.
    successor: Any = None
    #: The call to make instead, as the warning shows it.
    instead = ""

    @staticmethod
    def translate(kwargs: dict[str, Any]) -> dict[str, Any]:
        """The successor's keyword arguments for this task's."""
        return kwargs

    def check_arguments(self, values: dict[str, Any]) -> None:
        super().check_arguments(self.translate(dict(values)))

    def _forward(self, args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        warn_once(self.name.rsplit(".", 1)[-1], self.instead)
        args, kwargs = tuple(args or ()), dict(kwargs or {})
        self.check_fits(args, kwargs)  # the old signature first: its own misspellings
        return args, self.translate(kwargs)

    def apply_async(self, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any) -> Any:
        args, kwargs = self._forward(args, kwargs)
        return self.successor.apply_async(args, kwargs, *rest, **options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.request_stack.top is not None:  # a worker runs a queued message
            if self.name not in _warned:
                _warned.add(self.name)
                log.warning("%s is deprecated: its callers should send %s", self.name, self.instead)
            return super().__call__(*args, **kwargs)
        args, kwargs = self._forward(args, kwargs)
        return self.successor(*args, **kwargs)


class _Enterprise(DeprecatedSolveTask):
    abstract = True
    kind = RecaptchaV2
    successor = solve_recaptcha_v2
    instead = "solve_recaptcha_v2(sitekey, pageurl, enterprise=True, data_s=s, ...)"

    @staticmethod
    def translate(kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs["data_s"] = kwargs.pop("s", None)
        return {**kwargs, "enterprise": True}


class _Challenge(DeprecatedSolveTask):
    abstract = True
    kind = Turnstile
    successor = solve_turnstile
    instead = "solve_turnstile(sitekey, pageurl, action=..., cdata=..., pagedata=..., ...)"


@task("captcha_tasks.solve_recaptcha_v2_enterprise", base=_Enterprise)
def solve_recaptcha_v2_enterprise(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    s: str | None = None,
    invisible: bool = False,
    cookies: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Deprecated: ``solve_recaptcha_v2(sitekey, pageurl, enterprise=True, data_s=s)``."""
    return self.admit(
        lambda: RecaptchaV2(
            sitekey,
            pageurl,
            invisible=invisible,
            enterprise=True,
            data_s=s,
            cookies=cookies,
            user_agent=user_agent,
        ),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


@task("captcha_tasks.solve_turnstile_challenge", base=_Challenge)
def solve_turnstile_challenge(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    action: str,
    cdata: str,
    pagedata: str,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
) -> TokenResult:
    """Deprecated: ``solve_turnstile(sitekey, pageurl, action=..., cdata=...,
    pagedata=...)``."""
    return self.admit(
        lambda: Turnstile(
            sitekey, pageurl, action=action, cdata=cdata, pagedata=pagedata, user_agent=user_agent
        ),
        proxy_id=proxy_id,
        provider=provider,
        exclude=exclude,
    )


#: The aliases, for ``aio`` and the package root.
ALIASES: dict[str, TypedTask[..., TokenResult]] = {
    "solve_recaptcha_v2_enterprise": solve_recaptcha_v2_enterprise,
    "solve_turnstile_challenge": solve_turnstile_challenge,
}
