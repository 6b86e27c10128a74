"""When each benchmark task's final state was stored, as the result backend announces it."""

from __future__ import annotations

import collections
import contextlib
import json
import threading
import time
from collections.abc import Sequence

import redis

from captcha_tasks.errors import CaptchaTasksError

from .metrics import Outcome

__all__ = ["ResultWatcher"]

_TERMINAL = ("SUCCESS", "FAILURE", "REVOKED")


class ResultWatcher:
    """When each task's final state was stored: subscribes to the result backend's
    ``celery-task-meta-*`` channels (the Redis backend publishes every state it stores)."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(url, socket_connect_timeout=5)
        self._pubsub = self._client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]
        self._cond = threading.Condition()
        self.outcomes: dict[str, Outcome] = {}
        #: How many times each state was stored, any task (e.g. RETRY: tasks retried).
        self.states: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-results", daemon=True)

    def start(self) -> ResultWatcher:
        self._pubsub.psubscribe("celery-task-meta-*")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the subscription is live once confirmed
            message = self._pubsub.get_message(timeout=1.0)
            if message and message["type"] == "psubscribe":
                break
        else:
            raise CaptchaTasksError("could not subscribe to the result backend's channels")
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                message = self._pubsub.get_message(timeout=0.2)
            except (redis.RedisError, OSError):
                if self._stop.is_set():
                    return
                raise
            if not message or message["type"] != "pmessage":
                continue
            at = time.time()
            try:
                meta = json.loads(message["data"])
            except (TypeError, ValueError):
                continue
            if not isinstance(meta, dict):
                continue
            self.states[str(meta.get("status"))] += 1
            if meta.get("status") not in _TERMINAL or not meta.get("task_id"):
                continue
            with self._cond:
                self.outcomes.setdefault(
                    str(meta["task_id"]), Outcome(at, meta["status"], meta.get("result"))
                )
                self._cond.notify_all()

    def wait(self, task_ids: Sequence[str], deadline: float) -> None:
        """Until every one of ``task_ids`` ended, or ``deadline`` (monotonic) passes."""
        pending = set(task_ids)
        with self._cond:
            while True:
                pending -= self.outcomes.keys()
                left = deadline - time.monotonic()
                if not pending or left <= 0:
                    return
                self._cond.wait(min(left, 0.5))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(Exception):
            self._pubsub.close()
        self._client.close()
