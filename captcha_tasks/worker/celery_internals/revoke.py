"""Celery's ``revoke`` reaches the solves the engine holds.

A solve is admitted (recorded in Redis and acknowledged) as soon as its worker receives
it, and ended later by whichever worker's engine takes it: Celery's own ``revoke``
marks the id revoked in every worker, which drops the message if it has not arrived
yet, but an admitted solve is no message any more, so it would run on and be billed.

This wraps the ``revoke`` remote-control handler every worker runs (``Panel.data``,
the handlers each worker's Pidbox answers with): Celery's handler runs first, then the
ids go to :func:`install`'s callback, which hands them to the worker's engines.

Celery 5.7's handler also stores ``REVOKED`` at once for an id whose result is still
pending, which an admitted solve's is: its caller's ``get()`` would raise while the
engine still reads it at the provider, and an answer collected meanwhile would turn a
``REVOKED`` into a ``SUCCESS``. So the ids that are admitted solves (``held``) are only
flagged revoked in the worker, as Celery flags every id, and their engine stores the
outcome once nothing more of them is on its way to the provider; the other ids go
through Celery's handler unchanged.

Relies on ``celery-revoke-command`` (:mod:`.contracts`); where it does not hold,
nothing is wrapped and ``revoke()`` reaches only what Celery holds. No public hook
exists: Celery sends no signal when a worker receives a revoke (``task_revoked`` is
sent only for a request the worker itself drops).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from .contracts import holds

__all__ = ["install"]

log = logging.getLogger(__name__)

#: What the wrapped handler is marked with, so that it is wrapped once per process.
_MARK = "__captcha_tasks_revoke__"


def install(
    on_revoke: Callable[[list[str], bool], None],
    held: Callable[[list[str]], set[str]] | None = None,
) -> bool:
    """Call ``on_revoke(task_ids, terminate)`` after Celery's own ``revoke`` handler, in
    this worker; False (and nothing changed) where the assumption does not hold.
    ``held(task_ids)``: which of them are solves an engine holds, kept from Celery's
    handler (see the module's text). A second call replaces both callbacks."""
    if not holds("celery-revoke-command"):
        return False
    from celery.utils.functional import maybe_list
    from celery.worker import state as worker_state
    from celery.worker.control import Panel

    original = Panel.data["revoke"]
    original = getattr(original, _MARK, original)

    @functools.wraps(original)
    def revoke(
        state: Any, task_id: Any, terminate: bool = False, signal: Any = None, **kwargs: Any
    ) -> Any:
        ids = [str(one) for one in maybe_list(task_id) or [] if one]
        solves = _held(held, ids)
        if solves:
            worker_state.revoked.update(solves)
            log.info("Solves flagged as revoked: %s", ", ".join(sorted(solves)))
        rest = [one for one in ids if one not in solves]
        if rest or not ids:
            reply = original(state, rest or task_id, terminate=terminate, signal=signal, **kwargs)
        else:
            reply = {"ok": f"tasks {', '.join(ids)} flagged as revoked"}  # Celery's reply
        if ids:
            try:
                on_revoke(ids, bool(terminate))
            except Exception:  # Celery's answer stands; the solves run on
                log.exception("could not revoke solves %s", ids)
        return reply

    setattr(revoke, _MARK, original)
    Panel.data["revoke"] = revoke
    return True


def _held(held: Callable[[list[str]], set[str]] | None, ids: list[str]) -> set[str]:
    if held is None or not ids:
        return set()
    try:
        return held(ids) & set(ids)
    except Exception:  # Redis unanswered: Celery's handler takes them all
        log.warning("could not tell which of %s are solves; Celery revokes them all", ids)
        return set()
