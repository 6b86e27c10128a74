"""Celery remote control for the rollout (:class:`CeleryControlPlane`); the inspect
commands every worker answers are in :mod:`.inspect_commands`."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.utils.nodenames import worker_direct

from ..fleet.health import HealthResult, run_health_check
from ..fleet.rollout import Pending
from .inspect_commands import FLEET_VERSION_COMMAND, SOLVES_COMMAND, fleet_version, solves

__all__ = [
    "FLEET_VERSION_COMMAND",
    "SOLVES_COMMAND",
    "CeleryControlPlane",
    "fleet_version",
    "solves",
]


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
        held = self._broadcast(SOLVES_COMMAND, worker).get(worker)
        calls = held.get("calls", 0) if isinstance(held, dict) else 0
        active, reserved, scheduled = counts
        return Pending(active, reserved, scheduled, solve_calls=int(calls))

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
