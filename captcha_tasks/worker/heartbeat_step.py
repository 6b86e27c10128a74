"""The consumer bootstep that writes the worker's liveness beat.

What a beat is, where it goes and how a probe reads it: :mod:`captcha_tasks.fleet.heartbeat`.
The beat rides the consumer's own timer, so it stops when the event loop hangs or the
broker connection is lost (the consumer restarts its steps on reconnect): what a probe
wants to see. A thread would keep beating next to a wedged worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any, ClassVar

import redis
from celery import bootsteps

from ..fleet.heartbeat import TTL_INTERVALS, Beat, write_beat_file
from ..settings import Settings, get_settings
from ..state import Keys, state_redis
from ..state.clock import clock_of, local_time
from ..state.outage import REDIS_OUTAGE
from ..version import worker_version

__all__ = ["HeartbeatStep"]

log = logging.getLogger(__name__)


class HeartbeatStep(bootsteps.StartStopStep):  # type: ignore[misc]
    """Beats from the consumer's event loop (see :mod:`captcha_tasks.fleet.heartbeat`)."""

    requires: ClassVar[set[str]] = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, consumer: Any, **kwargs: Any) -> None:
        # Read here so a malformed value stops the worker before anything starts.
        settings = get_settings()
        self.interval = settings.heartbeat_interval
        self.path = Path(settings.heartbeat_file) if settings.heartbeat_file else None
        self._tref: Any = None
        self._hostname = ""
        self._settings: Settings | None = None

    def start(self, consumer: Any) -> None:
        self._hostname = consumer.hostname
        self._settings = get_settings()
        self.beat()
        self._tref = consumer.timer.call_repeatedly(self.interval, self.beat)

    def stop(self, consumer: Any) -> None:
        tref, self._tref = self._tref, None
        if tref is not None:
            tref.cancel()

    def shutdown(self, consumer: Any) -> None:
        self.stop(consumer)
        # A worker that stops says so at once instead of letting the beat go stale.
        if self._settings is not None and self._hostname:
            with contextlib.suppress(redis.RedisError, OSError):
                keys = Keys(self._settings.key_prefix)
                state_redis(self._settings).delete(keys.heartbeat(self._hostname))
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def beat(self) -> None:
        # The beat in Redis is stamped by Redis's clock (read from any host); the file's
        # by this host's (read by a probe on this host).
        beat = Beat(self._hostname, worker_version(), os.getpid(), local_time())
        settings = self._settings or get_settings()
        ttl = max(1, int(self.interval * TTL_INTERVALS + 0.999))
        try:
            client = state_redis(settings)
            shared = dataclasses.replace(beat, at=clock_of(client)())
            client.set(Keys(settings.key_prefix).heartbeat(beat.worker), shared.as_json(), ex=ttl)
        except (redis.RedisError, OSError) as exc:
            REDIS_OUTAGE.failed("the liveness heartbeat", exc)
        else:
            REDIS_OUTAGE.ok()
        if self.path is not None:
            try:
                write_beat_file(self.path, beat)
            except OSError as exc:
                log.warning("heartbeat: cannot write %s: %s", self.path, exc)
