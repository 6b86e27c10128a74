"""What a rollout drives: the fleet's control plane (Celery remote control in
:mod:`captcha_tasks.worker.control`, a fake in tests) and the operator's restart command."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

from .health import HealthResult

__all__ = ["ControlPlane", "Pending", "RestartOutcome", "Restarter", "shell_restarter"]


@dataclass(frozen=True)
class Pending:
    """Work a worker still holds: its active, reserved and scheduled tasks, and the
    provider calls its solve engines are making (``inspect solves``; the solves
    themselves are the cluster's, and other workers' engines go on with them)."""

    active: int = 0
    reserved: int = 0
    scheduled: int = 0
    solve_calls: int = 0

    @property
    def total(self) -> int:
        return self.active + self.reserved + self.scheduled + self.solve_calls

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class ControlPlane(Protocol):
    """What the rollout needs from the fleet (Celery remote control, or a fake)."""

    def versions(self) -> dict[str, str]:
        """Every worker that answers, with the version it reports."""

    def version(self, worker: str) -> str | None:
        """The version ``worker`` reports, ``None`` when it does not answer."""

    def consuming(self, worker: str) -> list[str] | None:
        """The queues ``worker`` consumes (its direct queue excluded); ``None``: no answer."""

    def cancel_consumer(self, worker: str, queue: str) -> None: ...

    def add_consumer(self, worker: str, queue: str) -> None: ...

    def pending(self, worker: str) -> Pending | None:
        """Its active, reserved and scheduled tasks; ``None`` when it does not answer."""

    def health(self, worker: str, check: str, expected_version: str) -> HealthResult: ...


@dataclass(frozen=True)
class RestartOutcome:
    ok: bool
    detail: str
    seconds: float


#: ``restart(worker, version)``: replace the worker's process with ``version``.
Restarter = Callable[[str, str], RestartOutcome]


def shell_restarter(template: str, *, timeout: float = 300.0) -> Restarter:
    """Run ``template`` in a shell, with ``{worker}`` and ``{version}`` (shell-quoted)."""

    def restart(worker: str, version: str) -> RestartOutcome:
        command = template.format(worker=shlex.quote(worker), version=shlex.quote(version))
        started = time.monotonic()
        try:
            done = subprocess.run(  # noqa: S602 - the operator's own command line
                command,
                shell=True,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return RestartOutcome(
                False, f"restart command timed out after {timeout:g} s", time.monotonic() - started
            )
        elapsed = time.monotonic() - started
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return RestartOutcome(
                False, f"restart command exited {done.returncode}: " + " | ".join(tail), elapsed
            )
        return RestartOutcome(True, "ok", elapsed)

    return restart
