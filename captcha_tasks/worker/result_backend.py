"""The result backend: Celery's Redis backend, where a final state stays final.

A solve's result is written by the solve engine, not by the execution that admitted
it. If a worker is SIGKILLed after admitting a task but before acknowledging its
message, Redis hands the message out again after the visibility timeout, and with
``task_track_started`` the new execution stores ``STARTED`` before it runs. Celery
refuses to overwrite ``SUCCESS`` (with a read, then a write), but not ``FAILURE`` or
``REVOKED``: a solve that had failed (``SubmitUncertain`` after that very kill) would
go back to ``STARTED`` and never end for its caller. Here every state that is not
final is stored by one Lua script that leaves a final state alone.

``celeryconfig.py`` installs it for ``redis://`` and ``rediss://`` URLs through
Celery's ``override_backends`` setting; the URL itself stays as configured.
"""

from __future__ import annotations

from typing import Any

from celery import states
from celery.backends.redis import RedisBackend
from celery.exceptions import BackendStoreError

from ..state.scripts import run

__all__ = ["ResultBackend"]


class ResultBackend(RedisBackend):  # type: ignore[misc]
    """Redis result backend that never replaces a final state with a passing one."""

    def _set_with_state(self, key: Any, value: Any, state: str) -> Any:
        if state in states.READY_STATES:
            return super()._set_with_state(key, value, state)
        if isinstance(value, str) and len(value) > self._MAX_STR_VALUE_SIZE:
            raise BackendStoreError("value too large for Redis backend")
        return self.ensure(self._set_unless_final, (key, value))

    def _set_unless_final(self, key: Any, value: Any) -> bool:
        return bool(run(self.client, "store_result", [key], [value, int(self.expires or 0)]))
