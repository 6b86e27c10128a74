"""What a bridge needs of the task system, and nothing more: plain types, no Celery.

:class:`TaskQueue` sends a job's solve task under a task id the bridge chose, tells
whether a task has started, and reads the outcomes of tasks that ended. The worker
side implements it over Celery (:class:`captcha_tasks.worker.bridge_queue.CeleryTaskQueue`);
whoever starts a bridge passes one in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from .jobs import TaskCall

__all__ = ["Outcome", "TaskQueue"]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a task ended: its ``result`` (a solve's dict) when it succeeded, else its
    ``error`` (the exception rebuilt, or a text starting with a code)."""

    result: Mapping[str, Any] | None = None
    error: BaseException | str | None = None


class TaskQueue(Protocol):
    def send(self, task_id: str, call: TaskCall) -> None:
        """Queue ``call`` as task ``task_id`` (blocking; retried a few times, then raises)."""

    def started(self, task_id: str) -> bool:
        """Whether the task has any state yet (a worker took it)."""

    def ended(self, task_ids: list[str]) -> dict[str, Outcome]:
        """The outcomes of those of ``task_ids`` that ended (one read, no waiting)."""
