"""Remote-control commands every worker answers (imported by ``captcha_tasks.app``).

``fleet_version``: what a worker runs, for ``captcha-tasks rollout`` (and anyone)::

    celery -A captcha_tasks inspect fleet_version
    -> {"celery@w1": {"version": "0.2.0", "pid": 4242, "hostname": "celery@w1"}}

It answers from the worker's main process, so it reports the version the process
was started with (``CAPTCHA_TASKS_VERSION``, else the package's).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.utils.nodenames import worker_direct
from celery.worker.control import inspect_command

from ..fleet.health import HealthResult, run_health_check
from ..fleet.rollout import Pending
from ..version import worker_version

__all__ = ["FLEET_VERSION_COMMAND", "CeleryControlPlane", "fleet_version"]

#: The inspect command's name (``app.control.broadcast(FLEET_VERSION_COMMAND, reply=True)``).
FLEET_VERSION_COMMAND = "fleet_version"


@inspect_command()  # type: ignore[untyped-decorator]
def fleet_version(state: Any, **kwargs: Any) -> dict[str, Any]:
    """The version this worker reports, its pid and node name."""
    return {
        "version": worker_version(),
        "pid": os.getpid(),
        "hostname": state.consumer.hostname,
    }


class CeleryControlPlane:
    """:class:`~captcha_tasks.fleet.rollout.ControlPlane` over Celery remote control."""

    def __init__(self, app: Celery, *, reply_timeout: float = 2.0, health_timeout: float = 60.0):
        self.app = app
        self.reply_timeout = reply_timeout
        self.health_timeout = health_timeout

    def _broadcast(self, command: str, worker: str | None, **arguments: Any) -> dict[str, Any]:
        replies = self.app.control.broadcast(
            command,
            arguments=arguments,
            destination=[worker] if worker else None,
            reply=True,
            timeout=self.reply_timeout,
            limit=1 if worker else None,
        )
        merged: dict[str, Any] = {}
        for reply in replies or ():
            merged.update(reply)
        return merged

    def versions(self) -> dict[str, str]:
        replies = self._broadcast(FLEET_VERSION_COMMAND, None)
        return {
            name: str(info.get("version"))
            for name, info in replies.items()
            if isinstance(info, dict)
        }

    def version(self, worker: str) -> str | None:
        info = self._broadcast(FLEET_VERSION_COMMAND, worker).get(worker)
        return str(info["version"]) if isinstance(info, dict) and "version" in info else None

    def consuming(self, worker: str) -> list[str] | None:
        queues = self._broadcast("active_queues", worker).get(worker)
        if not isinstance(queues, list):
            return None
        direct = worker_direct(worker).name
        return [str(q["name"]) for q in queues if isinstance(q, dict) and q.get("name") != direct]

    def cancel_consumer(self, worker: str, queue: str) -> None:
        self._broadcast("cancel_consumer", worker, queue=queue)

    def add_consumer(self, worker: str, queue: str) -> None:
        self._broadcast("add_consumer", worker, queue=queue)

    def pending(self, worker: str) -> Pending | None:
        counts = []
        for command in ("active", "reserved", "scheduled"):
            reply = self._broadcast(command, worker).get(worker)
            if not isinstance(reply, list):
                return None
            counts.append(len(reply))
        return Pending(*counts)

    def health(self, worker: str, check: str, expected_version: str) -> HealthResult:
        return run_health_check(
            self.run_on,
            worker,
            check,
            expected_version=expected_version,
            timeout=self.health_timeout,
        )

    def run_on(self, name: str, worker: str, timeout: float, *args: Any) -> Any:
        """Run task ``name`` on ``worker`` alone (its direct queue, which a draining
        worker keeps consuming); its return value, or raise what it raised."""
        result = self.app.signature(name, args=args).apply_async(queue=worker_direct(worker))
        try:
            return result.get(timeout=timeout, propagate=True, disable_sync_subtasks=False)
        finally:
            result.forget()
