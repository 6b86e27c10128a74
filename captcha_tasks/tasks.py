"""Thin Celery tasks: arguments, retries and serialization here; logic in plain modules."""

from __future__ import annotations

import socket
from typing import Any

from .app import app
from .base import SolverTask
from .errors import TransientSolverError
from .version import worker_version

__all__ = ["get_balance", "ping"]


@app.task(name="captcha_tasks.ping", bind=True)
def ping(self: Any) -> dict[str, Any]:
    """Round trip through the broker, a worker and the result backend."""
    return {
        "pong": True,
        "hostname": self.request.hostname or socket.gethostname(),
        "version": worker_version(),
    }


@app.task(
    name="captcha_tasks.get_balance",
    base=SolverTask,
    bind=True,
    max_retries=3,
)
def get_balance(self: SolverTask) -> dict[str, Any]:
    """The provider account's balance, as a string to keep its decimals exact."""
    try:
        balance = self.solver.balance()
    except TransientSolverError as exc:
        raise self.retry_transient(exc) from exc
    return {"balance": str(balance), "provider": self.settings.provider}
