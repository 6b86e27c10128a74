"""The worker's view of a message of a redacted task (``RedactedTask.Request``).

Celery's worker ``Request`` takes ``argsrepr``/``kwargsrepr`` from the message, as its
sender wrote them; a client that is not ours (``send_task``) may have written the real
arguments there. This request computes them again from the real arguments, and
``inspect`` and the task's events show only those. Celery has no setter for them and
no hook for how a worker shows arguments (celery/celery#6595 proposes a
``task_args_repr_function`` setting): this relies on the assumption
``celery-request-reprs`` (:mod:`.contracts`), that the request keeps them in
``_argsrepr``/``_kwargsrepr`` and its fields in ``_request_dict``. Where that does not
hold, the request is Celery's own and shows the reprs its sender computed (redacted for
every call made through captcha_tasks), which the worker says once.
"""

from __future__ import annotations

from typing import Any

from celery.worker.request import Request

from ...redaction import known_secrets, scrub_result_repr, scrub_text
from ..redacted import task_reprs
from .contracts import holds

__all__ = ["RedactedRequest"]


class RedactedRequest(Request):  # type: ignore[misc]  # celery ships no type hints
    """A worker's view of a message of a :class:`RedactedTask`: reprs computed again
    from the real arguments (whoever sent it), and shown by ``inspect`` in any mode."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not holds("celery-request-reprs"):
            return
        argsrepr, kwargsrepr = task_reprs(self._task, self._args, self._kwargs)
        self._argsrepr = argsrepr
        self._kwargsrepr = kwargsrepr
        # What the execution's own logs read (trace.py: request.get("argsrepr")).
        self._request_dict["argsrepr"] = argsrepr
        self._request_dict["kwargsrepr"] = kwargsrepr

    def info(self, safe: bool = False) -> dict[str, Any]:
        """``inspect reserved/scheduled/active`` and ``query_task``: the reprs, never the
        real arguments (Celery shows them unless ``active(safe=True)``)."""
        shown: dict[str, Any] = super().info(safe=True)
        return shown

    def send_event(self, type: str, **fields: Any) -> None:
        secrets = known_secrets()
        for name in ("exception", "traceback"):
            if isinstance(fields.get(name), str):
                fields[name] = scrub_text(fields[name], secrets)
        result = fields.get("result")
        if isinstance(result, str):
            fields["result"] = scrub_result_repr(result, secrets)
        super().send_event(type, **fields)
