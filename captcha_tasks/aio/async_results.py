"""Waiting for Celery results from asyncio: the result backend's own pub/sub, no threads.

The Redis result backend stores every state with one script that also ``PUBLISH``-es
it on the result key's own channel (``celery-task-meta-<id>``: see
``state/lua/store_result.lua``). A :class:`ResultWaiter` belongs to one event loop and
holds one pub/sub connection (``redis.asyncio``) for all the waits on that loop:

- A wait subscribes its task's channel (subscriptions are batched: a thousand
  concurrent waits cost a few ``SUBSCRIBE`` commands), and once Redis *confirms* the
  subscription it reads the stored state (one ``MGET`` for all the channels confirmed
  together). A result stored before the subscription is found by that read, one stored
  after it by the message: none falls between the two.
- A passing state (``STARTED``, ``RETRY``) is not an answer; a final one (``SUCCESS``,
  ``FAILURE``, ``REVOKED``) ends every wait on that task.
- A wait that ends (answered, timed out or cancelled) unsubscribes its channel once no
  other wait needs it.
- A lost connection is reopened with a bounded backoff; every channel is subscribed
  again, and the confirmations read the states again, so a result published while the
  connection was down is not missed.
- With no wait for :data:`IDLE_CLOSE` seconds the connection closes; the next wait
  opens it again. When the loop ends (``asyncio.run`` cancels what is left) it closes too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import redis
import redis.asyncio as aioredis
from celery import states
from celery.result import AsyncResult

from ..redaction import mask_url
from ..settings import Settings
from ..state.redis import CONNECT_TIMEOUT, async_redis_client
from ..worker.celery_internals.results import outcome

__all__ = ["CLIENT_NAME", "IDLE_CLOSE", "AsyncResult", "ResultWaiter", "await_result", "waiter_for"]

logger = logging.getLogger(__name__)

#: Seconds without any wait after which the pub/sub connection is closed.
IDLE_CLOSE = 30.0
#: How long a read of the pub/sub connection blocks before the idle check runs.
READ_BLOCK = 1.0
#: Reconnect backoff: first and longest pause, in seconds.
RECONNECT_FIRST, RECONNECT_MAX = 0.2, 5.0
#: Result keys read per ``MGET``.
READ_BATCH = 500
#: Seconds between PINGs on a quiet pub/sub connection.
HEALTH_CHECK = 30
#: Connections of the waiter's pool: the pub/sub one and two for reads.
POOL_SIZE = 3
#: Tries of each step of a close that a cancellation cuts short.
CLOSE_ATTEMPTS = 3
#: The waiter's connections' name in Redis's ``CLIENT LIST``.
CLIENT_NAME = "captcha_tasks-aio-results"

_waiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ResultWaiter] = (
    weakref.WeakKeyDictionary()
)


def waiter_for(app: Any, settings: Settings) -> ResultWaiter:
    """The running loop's waiter (made on first use)."""
    loop = asyncio.get_running_loop()
    waiter = _waiters.get(loop)
    if waiter is None:
        waiter = _waiters[loop] = ResultWaiter(app.backend, settings)
    return waiter


async def await_result(
    app: Any, settings: Settings, async_result: AsyncResult | str, timeout: float | None
) -> Any:
    """What ``async_result.get()`` returns or raises, awaited on the running loop."""
    if isinstance(async_result, str):
        async_result = AsyncResult(async_result, app=app)
    meta = await waiter_for(app, settings).wait(async_result.id, timeout)
    # Celery's own path from a stored meta to get()'s answer: the same value, the same
    # exception (rebuilt from its module and name).
    return outcome(async_result, meta)


class ResultWaiter:
    """One event loop's waits for results, over one pub/sub connection."""

    def __init__(self, backend: Any, settings: Settings) -> None:
        self._backend = backend
        self._url = str(backend.url or settings.result_backend)
        self._settings = settings
        self._client: aioredis.Redis | None = None
        self._pubsub: Any = None
        #: channel -> the futures waiting on it
        self._futures: dict[str, set[asyncio.Future[dict[str, Any]]]] = {}
        #: channels to (un)subscribe on the next flush; channels subscribed (sent)
        self._to_subscribe: set[str] = set()
        self._to_unsubscribe: set[str] = set()
        self._subscribed: set[str] = set()
        self._to_read: set[str] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._readers_of_state: asyncio.Task[None] | None = None

    # -- the public side ---------------------------------------------------------------

    async def wait(self, task_id: str, timeout: float | None) -> dict[str, Any]:
        """The final meta of ``task_id`` (Celery's decoded form), or TimeoutError."""
        channel = self._channel(task_id)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        waiting = self._futures.setdefault(channel, set())
        waiting.add(future)
        if len(waiting) == 1:
            self._subscribe(channel)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            waiting.discard(future)
            if not waiting and self._futures.get(channel) is waiting:
                del self._futures[channel]
                self._unsubscribe(channel)

    def waiting(self) -> int:
        """How many channels have a wait on them."""
        return len(self._futures)

    async def aclose(self) -> None:
        """Close the connection now (waits still pending end with ``CancelledError``)."""
        for task in (self._flusher, self._readers_of_state, self._reader):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._close()

    # -- subscriptions -----------------------------------------------------------------

    def _channel(self, task_id: str) -> str:
        key = self._backend.get_key_for_task(task_id)
        return key.decode() if isinstance(key, bytes) else str(key)

    def _subscribe(self, channel: str) -> None:
        self._to_unsubscribe.discard(channel)
        if channel not in self._subscribed:
            self._to_subscribe.add(channel)
            self._kick_flusher()
        else:
            # Still subscribed for an earlier wait, whose confirmation (and the read of
            # the stored state it triggers) is past: a result stored before this wait
            # would never be published again, so it is read now.
            self._read_state_of(channel)

    def _unsubscribe(self, channel: str) -> None:
        self._to_subscribe.discard(channel)
        self._to_read.discard(channel)
        if channel in self._subscribed:
            self._to_unsubscribe.add(channel)
            self._kick_flusher()

    def _kick_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        """Send the pending (un)subscriptions, batched, then make sure a reader runs."""
        await asyncio.sleep(0)  # let the waits started in the same tick join the batch
        while self._to_subscribe or self._to_unsubscribe:
            if self._pubsub is None:
                # A closed connection holds no subscription: only new ones reopen it.
                self._to_unsubscribe = set()
                if not self._to_subscribe:
                    break
                self._open()
            pubsub = self._pubsub
            subscribe, self._to_subscribe = self._to_subscribe, set()
            unsubscribe, self._to_unsubscribe = self._to_unsubscribe, set()
            try:
                if subscribe:
                    await pubsub.subscribe(*subscribe)
                    self._subscribed |= subscribe
                if unsubscribe:
                    await pubsub.unsubscribe(*unsubscribe)
                    self._subscribed -= unsubscribe
            except Exception as exc:  # the connection failed, or the reader closed it
                # The reader sees the same connection fail and reconnects; what was not
                # sent goes again with everything else that is still waited on.
                self._to_subscribe |= subscribe & self._futures.keys()
                logger.warning("result waits: subscribing failed (%s); retrying", exc)
                await self._lost()
                return
            if _cancelling():
                # Cancelled while (un)subscribing, and redis-py's pub/sub command absorbed
                # the CancelledError: asyncio.run cancels what is left when its loop ends,
                # and a reader started now would outlive that loop (destroyed pending).
                raise asyncio.CancelledError
            if self._reader is None or self._reader.done():
                self._reader = asyncio.get_running_loop().create_task(self._read())

    def _open(self) -> None:
        # rediss:// verified, sentinel:// followed to the master (state.redis).
        self._client = async_redis_client(
            self._settings,
            self._url,
            max_connections=POOL_SIZE,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_keepalive=True,
            # A PING now and then on the pub/sub connection: a peer that went away
            # without a word fails a write instead of leaving the reads silent.
            health_check_interval=HEALTH_CHECK,
            client_name=CLIENT_NAME,
        )
        self._pubsub = self._client.pubsub()
        self._subscribed = set()
        self._to_subscribe |= set(self._futures)

    async def _close(self) -> None:
        pubsub, client = self._pubsub, self._client
        self._pubsub = self._client = None
        self._subscribed = set()
        self._to_unsubscribe = set()
        # A (un)subscription or a state read still running on this connection would
        # take a fresh socket from the pool once the pool is closed, and nothing would
        # close that one: they end first. What they carried is done again on the next
        # connection (every wait subscribes again, and its confirmation reads the state).
        others = [
            task
            for task in (self._flusher, self._readers_of_state)
            if task is not None and not task.done() and task is not asyncio.current_task()
        ]
        for task in others:
            task.cancel()
        steps: list[Callable[[], Awaitable[Any]]] = []
        if others:
            steps.append(lambda: asyncio.wait(others))
        if pubsub is not None:
            steps.append(pubsub.aclose)
        if client is not None:
            steps.append(lambda: client.aclose(close_connection_pool=True))
        # The references are dropped already: a step cut short by a cancellation (the
        # loop ending cancels this task while it closes) would leave a socket open that
        # nothing closes. Each step runs again to its end, and the cancellation is
        # raised once they are done.
        cancelled = False
        for step in steps:
            for _attempt in range(CLOSE_ATTEMPTS):
                try:
                    await step()
                except asyncio.CancelledError:
                    cancelled = True
                    continue
                except (redis.RedisError, OSError):
                    pass
                break
        if cancelled:
            raise asyncio.CancelledError

    async def _lost(self) -> None:
        """The connection failed: close it; the flusher reopens it after a pause."""
        await self._close()
        self._to_subscribe |= set(self._futures)

    # -- reading -----------------------------------------------------------------------

    async def _read(self) -> None:
        """Read the pub/sub connection until nothing has been waited on for a while."""
        idle_for = 0.0
        backoff = RECONNECT_FIRST
        try:
            while True:
                pubsub = self._pubsub
                if pubsub is None or not self._subscribed:
                    if not self._futures and not self._to_subscribe:
                        idle_for += READ_BLOCK
                        if idle_for >= IDLE_CLOSE:
                            return
                    await asyncio.sleep(READ_BLOCK if pubsub is not None else backoff)
                    if self._pubsub is None and self._futures:
                        backoff = min(backoff * 2, RECONNECT_MAX)
                        self._kick_flusher()
                    continue
                idle_for = 0.0
                try:
                    message = await pubsub.get_message(timeout=READ_BLOCK)
                except (redis.RedisError, OSError) as exc:
                    logger.warning(
                        "result waits: lost %s (%s); reconnecting", mask_url(self._url), exc
                    )
                    await self._lost()
                    continue
                backoff = RECONNECT_FIRST
                if message is not None:
                    self._on_message(message)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("result waits: the reader failed")
            raise
        finally:
            # Idle, or the loop is ending (asyncio.run cancels what is left), or a bug
            # (logged): the connection goes with the reader; the next wait reopens it.
            if self._reader is asyncio.current_task():
                self._reader = None
            await self._close()

    def _on_message(self, message: dict[str, Any]) -> None:
        kind, channel = message.get("type"), message.get("channel")
        if isinstance(channel, bytes):
            channel = channel.decode()
        if not isinstance(channel, str) or channel not in self._futures:
            return
        if kind == "subscribe":
            # Confirmed: anything stored from now on will be published to us, so one
            # read of what is stored already closes the window.
            self._read_state_of(channel)
        elif kind == "message":
            self._answer(channel, message.get("data"))

    def _read_state_of(self, channel: str) -> None:
        self._to_read.add(channel)
        if self._readers_of_state is None or self._readers_of_state.done():
            loop = asyncio.get_running_loop()
            self._readers_of_state = loop.create_task(self._read_states())

    async def _read_states(self) -> None:
        await asyncio.sleep(0)  # confirmations that arrived together: one MGET
        while self._to_read and self._client is not None:
            channels = [self._to_read.pop() for _ in range(min(READ_BATCH, len(self._to_read)))]
            try:
                values = await self._client.mget(channels)
            except (redis.RedisError, OSError) as exc:
                # The subscriptions are renewed with the connection, and their
                # confirmations read the states again.
                logger.warning("result waits: reading stored states failed (%s)", exc)
                return
            for channel, value in zip(channels, values, strict=True):
                if value is not None:
                    self._answer(channel, value)

    def _answer(self, channel: str, data: Any) -> None:
        try:
            meta = self._backend.decode(data)
        except Exception:  # a message that is not a result: not ours to judge
            return
        if not isinstance(meta, dict) or meta.get("status") not in states.READY_STATES:
            return
        _settle(self._futures.get(channel, ()), meta)


def _cancelling() -> bool:
    """Whether the running task has been asked to stop (``Task.cancelling``, Python 3.11+)."""
    cancelling = getattr(asyncio.current_task(), "cancelling", None)
    return bool(cancelling is not None and cancelling())


def _settle(futures: Iterable[asyncio.Future[dict[str, Any]]], meta: dict[str, Any]) -> None:
    for future in list(futures):
        if not future.done():
            future.set_result(meta)
