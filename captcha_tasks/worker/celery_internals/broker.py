"""The broker transport: kombu's Redis transport, where a task message is never lost
between the queue and the worker.

kombu's Redis transport takes a message off its queue with ``BRPOP`` and only then
records it as unacknowledged (``unacked`` hash, ``unacked_index`` zset), from which it
is restored after the visibility timeout if the worker dies. A worker SIGKILLed in
between (``BRPOP`` served, the record not written yet: a few milliseconds, more on a
loaded machine) loses the message for good: it is in no queue and in no record. The
fault suite's SIGKILL row can lose a solve that way on kombu's transport (the task then
appears in no worker's log; celery/kombu#305, celery/celery#7950).

Here a task message is recorded as unacknowledged *when it is published*, in the same
``MULTI`` as the ``LPUSH`` that queues it, under the delivery tag the worker will
acknowledge it by. The worker's own record (written when it takes the message)
replaces it with a fresh time; its acknowledgement deletes it. If the worker dies
before that, the message is restored after the visibility timeout as any unacked
one is. The price: one round trip still, two more commands in it, and a task message
stored twice while it waits in its queue. A message that waits longer than the
visibility timeout (``CAPTCHA_TASKS_VISIBILITY_TIMEOUT``, an hour by default) is
queued a second time: our tasks are idempotent (a solve's admission ignores a task
id it has seen, a page task fetches again), so that is a duplicate, never a loss.

Only task messages (those with a ``task`` header) are recorded: replies and events
are not acknowledged by anyone. Messages published by another application's own
kombu connection (``send_task`` from an app that is not ours) take the plain path.

The unacknowledged index is stamped and swept by Redis's clock
(:class:`~captcha_tasks.state.clock.RedisClock`), not each host's: it is written by the
publisher and by the worker that takes a message, and swept by every worker, which puts
back what is older than the visibility timeout. By its own clock a worker 30 s ahead
would put back every message the others hold once the timeout is under 30 s, and a
worker behind would hold back a dead worker's messages as long (no upstream issue: kombu
would need the sweep's ceiling taken from Redis's ``TIME``).

What this relies on is the assumption ``kombu-redis-publish``
(:mod:`.contracts`): kombu's ``Channel._put``, ``_q_for_pri``, the ``unacked`` records
and ``Message._raw``. Where it does not hold, :func:`transport_for` names kombu's own
Redis transport instead and says so once: the publish-time record is lost, the
documented window comes back, nothing else changes (both write the same ``unacked``
records, so callers and workers on either transport ack each other's messages).
Per-queue expiry (``x-expires``), publish batches and the sweep's cadence options
(``unacked_restore_interval``, ``unacked_restore_throttle``) exist from kombu 5.7 and
are used where the channel has them; on older kombu the sweep keeps the same cadence
by time (:meth:`QoS.restore_visible`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from kombu import connection as kombu_connection
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.json import dumps

from ...redaction import mask_url
from ...settings import Settings
from ...settings.redis_urls import is_sentinel
from ...state.clock import clock_of
from ...state.redis import sentinel_kwargs
from .contracts import holds

log = logging.getLogger(__name__)

__all__ = [
    "KOMBU_TRANSPORTS",
    "SENTINEL_FAILOVER",
    "TRANSPORTS",
    "Channel",
    "QoS",
    "SentinelChannel",
    "SentinelTransport",
    "SslTransport",
    "Transport",
    "failover_strategy_for",
    "scrub_broker_info",
    "scrub_broker_stats",
    "sentinel_transport_options",
    "transport_for",
]

#: ``broker_transport`` for each URL scheme we serve.
TRANSPORTS = {
    "redis": f"{__name__}:Transport",
    "rediss": f"{__name__}:SslTransport",
    "sentinel": f"{__name__}:SentinelTransport",
}
#: kombu's own transports for the same schemes (its aliases).
KOMBU_TRANSPORTS = {"redis": "redis", "rediss": "rediss", "sentinel": "sentinel"}


class QoS(kombu_redis.QoS):
    """kombu's ack emulation, its unacknowledged index by Redis's clock."""

    def append(self, message: Any, delivery_tag: str) -> None:
        delivery = message.delivery_info
        record = dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        with self.pipe_or_acquire() as pipe:
            pipe.zadd(self.unacked_index_key, {delivery_tag: self.channel.now()})
            pipe.hset(self.unacked_key, delivery_tag, record)
            pipe.execute()
        virtual.QoS.append(self, message, delivery_tag)  # kombu's own bookkeeping

    def restore_visible(self, start: int = 0, num: int = 10, interval: int = 10) -> None:
        if not hasattr(self.channel, "unacked_restore_throttle"):
            # kombu before 5.7 scans only every 10th call (every ~100 s on a worker's
            # 10 s timer) and has no option for it: here it scans at most once per
            # ``unacked_restore_interval`` seconds of the transport options.
            options = self.channel.connection.client.transport_options
            every = float(options.get("unacked_restore_interval", 10))
            now = time.monotonic()
            if now - self.__dict__.get("_last_scan", -math.inf) < every:
                return
            self.__dict__["_last_scan"] = now
            interval = 1
        # kombu puts back what its index has older than time() - visibility_timeout, by
        # this host's clock: move the timeout by how far this host is from Redis.
        timeout = self.channel.visibility_timeout
        lag = kombu_redis.time() - self.channel.now()  # type: ignore[attr-defined]
        self.__dict__["visibility_timeout"] = timeout + lag
        try:
            super().restore_visible(start, num, interval)
        finally:
            self.__dict__["visibility_timeout"] = timeout


class Channel(kombu_redis.Channel):
    QoS = QoS

    def now(self) -> float:
        """Redis's time (the unacknowledged index's clock)."""
        with self.conn_or_acquire() as client:
            return clock_of(client)()

    @contextlib.contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        """kombu builds a new ``redis.Redis`` (hundreds of response callbacks copied)
        for every publish, event and ack that passes no client, to use its channel's
        connection pool for one command: here one client per pool is built once and
        reused (a client is thread-safe; each command checks a connection out). No
        upstream issue found; kombu would need to cache the client it builds."""
        if client:
            yield client
            return
        pool = self.pool
        cached = self.__dict__.get("_pool_client")
        if cached is None or cached.connection_pool is not pool:
            cached = self.__dict__["_pool_client"] = self._create_client()
        yield cached

    def _purge(self, queue: str) -> int:
        """kombu's purge of ``queue`` (``celery purge``, ``app.control.purge()``), and,
        when solve tasks are sent to it, the solves waiting for a provider's thread
        (:func:`captcha_tasks.worker.purge.purge_waiting_solves`): admitted as soon as a
        worker received them, they are in no queue of the broker, and a purge that
        found none of them would say the queue is empty while they run on. Relies on
        kombu's ``queue_purge`` calling ``_purge`` (``kombu-redis-purge``); where it does
        not, the broker's queue alone is purged and ``captcha-tasks purge`` ends the
        waiting solves. No upstream issue: kombu has no hook around a purge."""
        purged = int(super()._purge(queue))
        if not holds("kombu-redis-purge"):
            return purged
        from celery import current_app

        from ..purge import purge_waiting_solves, solve_queues

        app = current_app._get_current_object()
        if queue not in solve_queues(app):
            return purged
        try:
            return purged + purge_waiting_solves(app)
        except Exception as exc:  # the broker's queue is purged all the same
            log.warning("could not purge the waiting solves: %s", exc)
            return purged

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        headers = message.get("headers") or {}
        properties = message.get("properties") or {}
        tag = properties.get("delivery_tag")
        if "task" not in headers or tag is None or not self.ack_emulation:
            super()._put(queue, message, **kwargs)
            return
        info = properties.get("delivery_info") or {}
        record = dumps([message, info.get("exchange", ""), info.get("routing_key", queue)])
        key = self._q_for_pri(queue, self._get_message_priority(message, reverse=False))
        # Queue expiry (``x-expires``): kombu 5.7 keeps it per queue in ``_expires``.
        expires = getattr(self, "_expires", None) or {}
        expire = (
            [self._q_for_pri(queue, p) for p in self.priority_steps] if queue in expires else []
        )
        batch = kwargs.pop("_publish_batch", None)
        if batch is not None:
            # Batched publishes (kombu 5.7): the batch's pipeline sends these together.
            batch.add("zadd", self.unacked_index_key, {tag: self.now()})
            batch.add("hset", self.unacked_key, tag, record)
            batch.add("lpush", key, dumps(message))
            for name in expire:
                batch.add("pexpire", name, expires[queue])
            return
        with self.conn_or_acquire() as client, client.pipeline(transaction=True) as pipe:
            pipe.zadd(self.unacked_index_key, {tag: self.now()})
            pipe.hset(self.unacked_key, tag, record)
            pipe.lpush(key, dumps(message))
            for name in expire:
                pipe.pexpire(name, expires[queue])
            pipe.execute()


class Transport(kombu_redis.Transport):
    """``broker_transport`` of captcha_tasks' app for ``redis://`` URLs."""

    Channel = Channel


class SslTransport(Transport):
    """The same for ``rediss://`` URLs (a class of its own so it is shown as rediss)."""


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """The same channel over Redis Sentinel: kombu's sentinel channel asks every
    sentinel of the list where the master (``broker_transport_options["master_name"]``)
    is, for every new connection."""


class SentinelTransport(kombu_redis.SentinelTransport):
    """``broker_transport`` of captcha_tasks' app for ``sentinel://`` URLs."""

    Channel = SentinelChannel


def _stay_on_the_first(alternates: Iterable[str]) -> Iterator[str]:
    """kombu's failover strategy for a ``sentinel://`` list (``broker_failover_strategy``;
    closest upstream issue: celery/kombu#357, failover across alternates).

    After a failed connection kombu moves to the next URL of a list and reads it as a
    new broker: kombu's own sentinel transport instead of ours (the scheme names it),
    and no password or database (only the first URL has them: captcha_tasks.settings.redis_urls).
    A list of sentinels is one deployment, which every channel asks in full where the
    master is: there is nothing to move to. This yields the first URL's host name, which
    kombu takes as a host alone, keeping the transport, credentials and database."""
    first = next(iter(alternates))
    return itertools.repeat(urlsplit(first).hostname or "")


#: ``broker_failover_strategy`` of ``sentinel://`` URLs (a name, so that ``inspect
#: stats``, which lists it, stays JSON).
SENTINEL_FAILOVER = "captcha-tasks-sentinel"


def _register() -> bool:
    """Name our transports and failover strategy in kombu's registries (once): kombu
    shows a connection's URL (the worker's banner, Flower's broker page, ``inspect``)
    under its transport's alias, and finds a failover strategy by name."""
    if not holds("kombu-registries"):
        return False
    for scheme, path in TRANSPORTS.items():
        kombu_connection.resolve_aliases.setdefault(path, scheme)
    kombu_connection.failover_strategies.setdefault(SENTINEL_FAILOVER, _stay_on_the_first)  # type: ignore[arg-type]
    return True


def failover_strategy_for(url: str) -> str | None:
    """``broker_failover_strategy`` for a broker URL (None: kombu's round robin)."""
    return SENTINEL_FAILOVER if is_sentinel(url) and _register() else None


def transport_for(url: str) -> str:
    """The ``broker_transport`` for a broker URL (``unix://`` takes the plain one):
    ours while kombu's channel is as it assumes, else kombu's own (logged once)."""
    scheme = url.split("://", 1)[0].lower()
    if not holds("kombu-redis-publish"):
        return KOMBU_TRANSPORTS.get(scheme, "redis")
    _register()
    return TRANSPORTS.get(scheme, TRANSPORTS["redis"])


def sentinel_transport_options(settings: Settings, url: str) -> dict[str, Any]:
    """What kombu's sentinel transport and Celery's sentinel backend need beside a
    ``sentinel://`` URL (``{}`` for any other): the master's service name and how to
    talk to the sentinels (the same as every other client of ours, state.redis)."""
    if not is_sentinel(url):
        return {}
    return {
        "master_name": settings.redis_sentinel_master,
        "sentinel_kwargs": sentinel_kwargs(settings),
    }


def scrub_broker_info(info: dict[str, Any]) -> dict[str, Any]:
    """A worker's ``broker`` entry of ``inspect stats`` (kombu's ``Connection.info()``,
    its ``password`` already dropped by Celery) without secrets: the URLs of a sentinel
    list (``alternates``) masked, and the transport options' passwords (the sentinels'
    own, in ``sentinel_kwargs``) hidden as ``inspect conf`` hides settings. Flower shows
    these stats on its worker pages."""
    from celery.app.utils import filter_hidden_settings

    info["alternates"] = [mask_url(url) for url in info.get("alternates") or ()]
    info["transport_options"] = filter_hidden_settings(info.get("transport_options") or {})
    return info


def scrub_broker_stats() -> None:
    """``inspect stats`` (and Flower's worker pages) show the broker connection through
    the consumer's Connection step: Celery drops its password, but a sentinel:// list
    keeps the master's password in the URLs kombu lists as ``alternates`` (masked by
    Celery after 5.6.3: celery/celery#10485), and the sentinels' own in the transport
    options (not masked upstream). Relies on ``celery-connection-info``
    (:mod:`.contracts`); where it does not hold, the stats are Celery's own."""
    if not holds("celery-connection-info"):
        return
    from celery.worker.consumer.connection import Connection

    if getattr(Connection.info, "scrubbed", False):
        return
    celery_info = Connection.info

    def info(self: Any, c: Any) -> dict[str, Any]:
        found: dict[str, Any] = celery_info(self, c)
        if isinstance(found.get("broker"), dict):
            found["broker"] = scrub_broker_info(found["broker"])
        return found

    info.scrubbed = True  # type: ignore[attr-defined]
    Connection.info = info
