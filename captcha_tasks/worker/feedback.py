"""Telling the cluster whether a site accepted a token: :func:`feedback`, and the
worker-side :func:`judge` that ``fetch_page`` uses.

A verdict is counted once per solve (:mod:`captcha_tasks.engine.acceptance`); when the
counted verdict is a rejection, the provider is told once (``report_solution``, which
claims the report: a refund where the provider gives one), whoever saw it first.
"""

from __future__ import annotations

from ..errors import InvalidTaskInput
from ..results import FeedbackResult
from ..settings import Settings, get_settings
from ..state import state_redis

__all__ = ["feedback", "judge"]


def judge(
    settings: Settings, task_id: str, *, accepted: bool, host: str | None = None
) -> FeedbackResult:
    """Count the verdict on solve ``task_id``'s token; a rejection counted here is sent to
    its provider (``report_solution``, exactly once). Raises
    :class:`~captcha_tasks.errors.UnknownSolve` for a task id with no finished solve."""
    from ..engine.acceptance import AcceptanceBook

    recorded = AcceptanceBook(state_redis(settings), settings).record(
        task_id, accepted=accepted, host=host
    )
    if recorded.counted and recorded.verdict == "rejected":
        from .solve_tasks import report_solution

        report_solution.delay(task_id, correct=False)
    return {"task_id": task_id, "counted": recorded.counted, "verdict": recorded.verdict}


def feedback(task_id: str, accepted: bool = True) -> FeedbackResult:
    """Tell the cluster whether the site accepted the token of solve ``task_id`` (the id of
    the solve task whose result you submitted: ``result.id``, or a result's ``task_id``).

    For code that submits tokens itself: the verdict counts towards its provider's
    acceptance rate and cost per accepted token (``captcha-tasks status``, the metrics,
    routing). The first verdict on a solve is the one counted; later ones return it
    unchanged. ``accepted=False`` also reports the token to its provider as bad, once
    (as :func:`captcha_tasks.report_solution` does; it refunds where the provider does).

    Raises :class:`~captcha_tasks.errors.UnknownSolve` when no finished solve is known for
    ``task_id`` (unknown, not solved yet, failed, a pooled token, or older than
    ``CAPTCHA_TASKS_REPORT_WINDOW``) and
    :class:`~captcha_tasks.errors.InvalidTaskInput` for an ``accepted`` that is not a bool.
    Needs the shared state's Redis (``CAPTCHA_TASKS_STATE_URL``), as the workers do.
    """
    if not isinstance(accepted, bool):  # "false" would be truthy: a verdict by mistake
        raise InvalidTaskInput("feedback: accepted must be true or false")
    return judge(get_settings(), task_id, accepted=accepted)
