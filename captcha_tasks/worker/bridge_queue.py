"""The bridges' :class:`~captcha_tasks.bridge.queue.TaskQueue` over Celery.

Tasks are sent by name under the bridge's task id; results are read from the
key-value result backend, many at once (``MGET``), never waited for.
"""

from __future__ import annotations

from typing import Any

from celery import Celery, states
from celery.result import denied_join_result

from ..bridge.jobs import TaskCall
from ..bridge.queue import Outcome
from ..caller.checks import unchecked_sends

__all__ = ["ENQUEUE_RETRY", "CeleryTaskQueue"]

#: How the broker publish of a solve task is retried before the job counts as failed.
ENQUEUE_RETRY = {"max_retries": 3, "interval_start": 0, "interval_step": 0.5, "interval_max": 2}


class CeleryTaskQueue:
    """Sends and reads the tasks of ``app`` (``captcha_tasks.app``)."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        # Jobs name any task: register every task module of the app (its ``include``),
        # which the package root imports only when a name is first used.
        app.loader.import_default_modules()

    def send(self, task_id: str, call: TaskCall) -> None:
        task = self.app.tasks[call.task]
        # By default the Redis backend subscribes to each sent task's result channel, for
        # a later ``.get()``; the bridge never calls one (it reads results with MGET), so
        # the subscriptions would only pile up unread. Celery skips them where a join
        # would block, which is what this says. ``denied_join_result`` is Celery's own
        # (public name, undocumented): tests/unit/bridge notices if it stops working.
        # Unchecked here: a bad call is the worker's to refuse, and its failure is
        # collected and published as any job's outcome.
        with denied_join_result(), unchecked_sends():
            task.apply_async(
                call.args, call.kwargs, task_id=task_id, retry=True, retry_policy=ENQUEUE_RETRY
            )

    def started(self, task_id: str) -> bool:
        backend = self.app.backend
        return backend.mget([backend.get_key_for_task(task_id)])[0] is not None

    def ended(self, task_ids: list[str]) -> dict[str, Outcome]:
        return {tid: self._outcome(meta) for tid, meta in self.ready(task_ids).items()}

    def ready(self, task_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The result metadata (``status``, ``result``) of those tasks that ended."""
        if not task_ids:
            return {}
        backend = self.app.backend
        values = backend.mget([backend.get_key_for_task(tid) for tid in task_ids])
        ended: dict[str, dict[str, Any]] = {}
        for tid, value in zip(task_ids, values, strict=True):
            if value is None:
                continue
            meta = backend.decode_result(value)
            if meta.get("status") in states.READY_STATES:
                ended[tid] = meta
        return ended

    def _outcome(self, meta: dict[str, Any]) -> Outcome:
        if meta.get("status") == states.SUCCESS and isinstance(meta.get("result"), dict):
            return Outcome(result=meta["result"])
        if meta.get("status") == states.REVOKED:
            return Outcome(error="REVOKED: the solve task was revoked")
        try:
            error: BaseException | str = self.app.backend.exception_to_python(meta.get("result"))
        except Exception:
            error = f"TASK_FAILED: {str(meta.get('result'))[:200]}"
        return Outcome(error=error)
