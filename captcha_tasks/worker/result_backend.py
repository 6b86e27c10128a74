"""The result backend: Celery's Redis backend, where a final state stays final.

A solve's result is written by the solve engine, not by the execution that admitted
it. If a worker is SIGKILLed after admitting a task but before acknowledging its
message, Redis hands the message out again after the visibility timeout, and with
``task_track_started`` the new execution stores ``STARTED`` before it runs. Celery
refuses to overwrite ``SUCCESS`` (with a read, then a write), but not ``FAILURE`` or
``REVOKED``: a solve that had failed (``SubmitUncertain`` after that very kill) would
go back to ``STARTED`` and never end for its caller. Here every state is stored by
one Lua script: a passing state leaves a final one alone, a final one leaves a
``SUCCESS`` alone (Celery's rule, without its extra read).

``celeryconfig.py`` installs it for ``redis://`` and ``rediss://`` URLs through
Celery's ``override_backends`` setting; the URL itself stays as configured.
"""

from __future__ import annotations

from typing import Any

from celery import states
from celery.backends.redis import RedisBackend
from celery.exceptions import BackendStoreError
from kombu.utils.encoding import bytes_to_str

from ..state.scripts import run

__all__ = ["ResultBackend"]


class ResultBackend(RedisBackend):  # type: ignore[misc]
    """Redis result backend that never replaces a final state with a passing one."""

    def _store_result(
        self,
        task_id: Any,
        result: Any,
        state: str,
        traceback: Any = None,
        request: Any = None,
        **kwargs: Any,
    ) -> Any:
        # Celery's own reads the stored state first (to leave a SUCCESS alone), then
        # writes in a transaction: two round trips per result. The script does both.
        meta = self._get_result_meta(result=result, state=state, traceback=traceback,
                                     request=request)  # fmt: skip
        meta["task_id"] = bytes_to_str(task_id)  # type: ignore[no-untyped-call]
        try:
            self._set_with_state(self.get_key_for_task(task_id), self.encode(meta), state)
        except BackendStoreError as exc:
            raise BackendStoreError(str(exc), state=state, task_id=task_id) from exc
        return result

    def _set_with_state(self, key: Any, value: Any, state: str) -> Any:
        if isinstance(value, str) and len(value) > self._MAX_STR_VALUE_SIZE:
            raise BackendStoreError("value too large for Redis backend")
        final = "final" if state in states.READY_STATES else "passing"
        return self.ensure(self._set_unless_final, (key, value, final))

    def _set_unless_final(self, key: Any, value: Any, final: str = "passing") -> bool:
        args = [value, int(self.expires or 0), final]
        return bool(run(self.client, "store_result", [key], args))
