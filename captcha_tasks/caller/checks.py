"""The caller's checks of a call, before anything is sent: a call that does not fit a
task's signature (:func:`misfit`, raised by
:meth:`~captcha_tasks.worker.task_bases.CheckedTask.check_fits`), and a captcha kind that
no provider the caller's settings name offers (:func:`refuse_unoffered`, from
:meth:`~captcha_tasks.worker.solve_tasks.SolveTask.check_solve`, which validates the
kind's declared fields). :func:`unchecked_sends` turns the caller's checks off for the
senders that want the worker to refuse a bad call under its own task id."""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import inspect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import ArgumentsMismatch
from ..provider import Captcha
from ..provider.offers import refusal, withdrawal
from ..provider.routing import route
from ..settings.providers import ProviderConfig

__all__ = ["misfit", "refuse_unoffered", "sending_unchecked", "unchecked_sends"]

#: Set while :func:`unchecked_sends` holds: no caller's check.
_unchecked: contextvars.ContextVar[bool] = contextvars.ContextVar("unchecked", default=False)


@contextlib.contextmanager
def unchecked_sends() -> Iterator[None]:
    """Send without the caller's check
    (:attr:`~captcha_tasks.worker.task_bases.CheckedTask.check_in_caller`): for senders
    that want a bad call refused by the worker, under its task id, as ``send_task``'s
    are (a page task's replacement, the NATS bridge, which reads every outcome there)."""
    token = _unchecked.set(True)
    try:
        yield
    finally:
        _unchecked.reset(token)


def sending_unchecked() -> bool:
    """Whether :func:`unchecked_sends` holds here."""
    return _unchecked.get()


def misfit(
    task: Any, exc: TypeError, kwargs: Mapping[str, Any], args: Sequence[Any] = ()
) -> ArgumentsMismatch:
    """The refusal of a call that does not fit ``task``'s signature: too many positional
    ``args`` counted as the caller passed them (a bound task's ``self`` is not theirs),
    each keyword it does not take with the nearest one it does (a misspelling), else
    Python's own words."""
    params = inspect.signature(task.run).parameters
    too_many = _too_many_positional(task, params, len(args))
    if too_many:
        return ArgumentsMismatch(f"{task.name}: {too_many}")
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return ArgumentsMismatch(f"{task.name}: {exc}")
    known = [n for n, p in params.items() if p.kind is not p.VAR_POSITIONAL]
    unknown = sorted(str(name) for name in kwargs if name not in params)
    if not unknown:
        return ArgumentsMismatch(f"{task.name}: {exc}")
    shown = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        shown.append(f"{name} (did you mean {close[0]!r}?)" if close else name)
    return ArgumentsMismatch(
        f"{task.name}: unknown option(s) {', '.join(shown)}; allowed: {', '.join(known)}"
    )


def _too_many_positional(task: Any, params: Mapping[str, inspect.Parameter], given: int) -> str:
    """Python's words for ``given`` positional arguments past what ``task.run`` takes
    (``params``: its signature's, without a bound task's ``self``); empty if they fit."""
    kinds = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if given <= len(kinds) or any(p.kind is p.VAR_POSITIONAL for p in params.values()):
        return ""
    least = sum(1 for p in kinds if p.default is p.empty)
    takes = f"{len(kinds)}" if least == len(kinds) else f"from {least} to {len(kinds)}"
    plural = "" if takes == "1" else "s"
    were = "was" if given == 1 else "were"
    name = getattr(task.run, "__name__", task.name)
    return f"{name}() takes {takes} positional argument{plural} but {given} {were} given"


def refuse_unoffered(
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
