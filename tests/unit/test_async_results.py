"""``captcha_tasks.aio``'s waits against the session's real Redis, with results stored by
the real result backend (its script sets the key and publishes it, as in a worker)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from celery import states
from celery.result import AsyncResult

from captcha_tasks import aio
from captcha_tasks.aio import async_results
from captcha_tasks.errors import ChallengeRejected
from captcha_tasks.settings import get_settings


def _id() -> str:
    return str(uuid.uuid4())


def _channel(task_id: str) -> str:
    return f"celery-task-meta-{task_id}"


def _subscribers(client: redis.Redis, task_id: str) -> int:
    ((_, count),) = client.pubsub_numsub(_channel(task_id))
    return int(count)


def _unsubscribed(client: redis.Redis, task_id: str, timeout: float = 2.0) -> bool:
    """Whether ``task_id``'s channel has no subscriber left, once Redis has caught up. After
    the loop ends its pub/sub connection is closed (or its UNSUBSCRIBE sent), but Redis
    may serve this client's PUBSUB NUMSUB, on another connection, before it reads that
    close: on two busy cores the count was seen at 1 right after the loop ended."""
    deadline = time.monotonic() + timeout
    while _subscribers(client, task_id) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _subscribers(client, task_id) == 0


def _pubsub_clients(client: redis.Redis) -> int:
    listed = client.execute_command("CLIENT", "LIST", "TYPE", "pubsub")
    text = listed.decode() if isinstance(listed, bytes) else str(listed)
    return len([line for line in text.splitlines() if line.strip()])


def _waiter_connections(client: redis.Redis) -> int:
    """The waiters' open connections (pub/sub and reads), by their name."""
    return sum(1 for info in client.client_list() if info.get("name") == async_results.CLIENT_NAME)


def _waiter_connections_closed(client: redis.Redis, timeout: float = 2.0) -> bool:
    """Whether no waiter connection is open, once Redis has read the closes."""
    deadline = time.monotonic() + timeout
    while _waiter_connections(client) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _waiter_connections(client) == 0


async def _until(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _subscribed(client: redis.Redis, task_id: str) -> None:
    await _until(lambda: _subscribers(client, task_id) == 1, f"{task_id}'s subscription")


@pytest.fixture
def client(redis_url: str) -> Any:
    with redis.Redis.from_url(redis_url) as conn:
        yield conn


def _run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(coro())  # type: ignore[arg-type]


def test_a_result_stored_before_the_wait_is_returned_at_once(
    celery_app: Any, client: redis.Redis
) -> None:
    task_id = _id()
    celery_app.backend.store_result(task_id, {"solution": "tok"}, states.SUCCESS)

    async def main() -> Any:
        return await aio.result(task_id, timeout=5)

    assert _run(main) == {"solution": "tok"}
    assert _unsubscribed(client, task_id)


def test_a_passing_state_does_not_end_the_wait_a_final_one_does(
    celery_app: Any, client: redis.Redis
) -> None:
    task_id = _id()

    async def main() -> Any:
        waiting = asyncio.ensure_future(aio.result(task_id, timeout=10))
        await _subscribed(client, task_id)
        celery_app.backend.store_result(task_id, None, states.STARTED)
        celery_app.backend.store_result(task_id, None, states.RETRY)
        await asyncio.sleep(0.2)
        assert not waiting.done()
        celery_app.backend.store_result(task_id, {"solution": "late"}, states.SUCCESS)
        return await waiting

    assert _run(main) == {"solution": "late"}
    assert _unsubscribed(client, task_id)


def test_a_failure_raises_what_get_raises(celery_app: Any) -> None:
    task_id = _id()
    error = ChallengeRejected("https://example.com/verify refused the token (HTTP 403)")
    celery_app.backend.store_result(task_id, error, states.FAILURE)
    with pytest.raises(ChallengeRejected) as by_get:
        AsyncResult(task_id, app=celery_app).get(timeout=5)

    async def main() -> Any:
        return await aio.result(task_id, timeout=5)

    with pytest.raises(ChallengeRejected) as by_await:
        _run(main)
    assert str(by_await.value) == str(by_get.value)
    assert by_await.value.code == by_get.value.code


def test_a_timeout_raises_and_leaves_no_subscription(client: redis.Redis) -> None:
    task_id = _id()

    async def main() -> None:
        await aio.result(task_id, timeout=0.3)

    with pytest.raises(asyncio.TimeoutError):
        _run(main)
    assert _unsubscribed(client, task_id)


def test_cancelling_one_wait_unsubscribes_only_when_no_other_needs_the_channel(
    celery_app: Any, client: redis.Redis
) -> None:
    task_id = _id()

    async def main() -> tuple[int, Any]:
        first = asyncio.ensure_future(aio.result(task_id, timeout=10))
        second = asyncio.ensure_future(aio.result(task_id, timeout=10))
        await _subscribed(client, task_id)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.sleep(0.2)
        still = _subscribers(client, task_id)
        celery_app.backend.store_result(task_id, "answer", states.SUCCESS)
        value = await second
        await _until(lambda: _subscribers(client, task_id) == 0, "the answered unsubscribe")
        lone_id = _id()
        lone = asyncio.ensure_future(aio.result(lone_id, timeout=10))
        await _subscribed(client, lone_id)
        lone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await lone
        # The loop goes on; the cancelled wait's channel is given up all the same.
        await _until(lambda: _subscribers(client, lone_id) == 0, "the unsubscribe")
        return still, value

    still, value = _run(main)
    assert still == 1 and value == "answer"


def test_many_waits_share_one_connection(celery_app: Any, client: redis.Redis) -> None:
    ids = [_id() for _ in range(300)]
    for task_id in ids[::2]:  # half are in before the waits start
        celery_app.backend.store_result(task_id, task_id, states.SUCCESS)

    async def main() -> tuple[list[Any], int]:
        waits = asyncio.gather(*(aio.result(i, timeout=10) for i in ids))
        await _until(lambda: _subscribers(client, ids[1]) == 1, "the subscriptions")
        clients = _pubsub_clients(client)
        for task_id in ids[1::2]:
            celery_app.backend.store_result(task_id, task_id, states.SUCCESS)
        return await waits, clients

    values, clients = _run(main)
    assert values == ids
    assert clients == 1


def test_a_result_published_while_the_connection_was_down_is_not_missed(
    celery_app: Any, client: redis.Redis
) -> None:
    task_id = _id()

    async def main() -> Any:
        waiting = asyncio.ensure_future(aio.result(task_id, timeout=20))
        await _subscribed(client, task_id)
        client.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        # Stored (and published to nobody) before the waiter has subscribed again.
        celery_app.backend.store_result(task_id, "while away", states.SUCCESS)
        return await waiting

    assert _run(main) == "while away"
    # Nothing the waiter opened, before or after the loss, outlives the loop.
    assert _waiter_connections_closed(client)


def test_the_connection_closes_when_nothing_is_waited_on(
    celery_app: Any, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(async_results, "IDLE_CLOSE", 0.5)
    monkeypatch.setattr(async_results, "READ_BLOCK", 0.1)
    task_id = _id()
    celery_app.backend.store_result(task_id, 1, states.SUCCESS)

    async def main() -> tuple[int, int]:
        await aio.result(task_id, timeout=5)
        during = _waiter_connections(client)
        await _until(lambda: _waiter_connections(client) == 0, "the idle close", timeout=5)
        # And the next wait opens it again.
        await aio.result(task_id, timeout=5)
        return during, _waiter_connections(client)

    # The pub/sub connection and the one that read the stored state, both times.
    assert _run(main) == (2, 2)
    assert _waiter_connections_closed(client)


def test_a_wait_right_after_another_on_the_same_task_reads_the_stored_result(
    celery_app: Any, client: redis.Redis
) -> None:
    """The first wait's channel is still subscribed when the second starts (its
    UNSUBSCRIBE not yet sent), and the stored result was published long before: the
    second wait reads it instead of waiting for a message that will not come."""
    task_id = _id()
    celery_app.backend.store_result(task_id, "stored", states.SUCCESS)

    async def main() -> list[Any]:
        return [await aio.result(task_id, timeout=5) for _ in range(3)]

    assert _run(main) == ["stored"] * 3


def test_send_keeps_celerys_blocking_consumer_out(celery_app: Any, client: redis.Redis) -> None:
    from captcha_tasks.worker.solve_tasks import ping

    sent_by_delay = ping.delay()
    sent_by_aio = aio.send(ping)
    try:
        assert _subscribers(client, sent_by_delay.id) == 1  # Celery's own consumer
        assert _subscribers(client, sent_by_aio.id) == 0
    finally:
        sent_by_delay.forget()
        celery_app.backend.result_consumer.cancel_for(sent_by_delay.id)


def test_the_awaitables_carry_their_tasks_names_and_docs() -> None:
    assert aio.solve_turnstile.__name__ == "solve_turnstile"
    assert "timeout=" in (aio.fetch_page.__doc__ or "")
    shown = inspect.signature(aio.solve_recaptcha_v2).parameters
    assert list(shown)[:2] == ["sitekey", "pageurl"] and "timeout" in shown


class _AbsorbingPubSub:
    """A pub/sub whose UNSUBSCRIBE absorbs a cancellation that arrives while it is sent,
    as redis-py's asyncio commands can: the flusher's task is cancelled, its await
    returns normally."""

    def __init__(self) -> None:
        self.sending = asyncio.Event()

    async def unsubscribe(self, *channels: str) -> None:
        self.sending.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(5)

    async def aclose(self) -> None:
        pass


def test_a_flush_cancelled_inside_a_command_that_absorbs_it_starts_no_reader(
    celery_app: Any,
) -> None:
    async def main() -> tuple[bool, Any]:
        waiter = async_results.ResultWaiter(celery_app.backend, get_settings())
        pubsub = _AbsorbingPubSub()
        waiter._pubsub, waiter._subscribed = pubsub, {"celery-task-meta-x"}
        waiter._unsubscribe("celery-task-meta-x")  # starts the flusher
        flusher = waiter._flusher
        assert flusher is not None
        await asyncio.wait_for(pubsub.sending.wait(), 5)
        flusher.cancel()  # as asyncio.run does with what is left when its loop ends
        with contextlib.suppress(asyncio.CancelledError):
            await flusher
        return flusher.cancelled(), waiter._reader

    assert _run(main) == (True, None)
