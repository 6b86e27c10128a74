"""Redis Sentinel against real processes: a primary, a replica and three sentinels
(``SentinelDeployment``), passwords on the data nodes and the sentinels.

- the state client, the result backend (its one store script: a final state stays
  final) and the asyncio result waiter reach the master through the sentinels, and
  follow it to the promoted replica after the master is SIGKILLed;
- a submit's ``sending`` mark waits for a replica (``CAPTCHA_TASKS_REDIS_SENTINEL_WAIT``):
  with the replica cut off, the job is not sent but queued again.

The workers under load are the fault suite's (tests/chaos/test_sentinel.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery, states
from kombu import Connection

from captcha_tasks.aio.async_results import ResultWaiter
from captcha_tasks.engine import queue as queue_module
from captcha_tasks.engine.jobs import Job
from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, redis_client
from captcha_tasks.worker.celery_internals.broker import (
    failover_strategy_for,
    sentinel_transport_options,
    transport_for,
)
from captcha_tasks.worker.celery_internals.result_backend import SentinelResultBackend
from captcha_tasks_dev.redis_sentinel import SentinelDeployment

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PASSWORD = "Data-" + uuid.uuid4().hex
SENTINEL_PASSWORD = "Sentinel-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelDeployment]:
    made = SentinelDeployment(
        Path(tmp_path_factory.mktemp("sentinel")),
        password=PASSWORD,
        sentinel_password=SENTINEL_PASSWORD,
    )
    made.start()
    yield made
    made.stop()


def _settings(deployment: SentinelDeployment, **more: str) -> Settings:
    return Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": deployment.url,
            "CAPTCHA_TASKS_REDIS_SENTINEL_MASTER": deployment.master_name,
            "CAPTCHA_TASKS_REDIS_SENTINEL_PASSWORD": SENTINEL_PASSWORD,
            **more,
        }
    )


def _backend_app(settings: Settings) -> Celery:
    app = Celery("sentinel-backend", set_as_current=False)
    app.config_from_object("captcha_tasks.worker.celeryconfig")
    url = settings.result_backend
    options = {
        **app.conf.result_backend_transport_options,
        **sentinel_transport_options(settings, url),
    }
    app.conf.update(
        broker_url=url,
        broker_transport=transport_for(url),
        result_backend=url,
        result_backend_transport_options=options,
    )
    return app


def test_clients_follow_the_master_through_a_failover(deployment: SentinelDeployment) -> None:
    settings = _settings(deployment)
    state = redis_client(settings, settings.state_url)
    state.set("before", "1")
    app = _backend_app(settings)
    backend: Any = app.backend
    assert isinstance(backend, SentinelResultBackend)
    done = str(uuid.uuid4())
    backend.store_result(done, {"token": "t"}, states.SUCCESS)
    backend.store_result(done, None, states.STARTED)  # a redelivered message's
    assert backend.get_task_meta(done)["status"] == states.SUCCESS
    before, after = str(uuid.uuid4()), str(uuid.uuid4())

    async def waits() -> list[Any]:
        waiter = ResultWaiter(backend, settings)
        first = asyncio.ensure_future(waiter.wait(before, timeout=30))
        await asyncio.sleep(0.5)  # subscribed by then
        backend.store_result(before, "first", states.SUCCESS)
        metas = [await first]
        second = asyncio.ensure_future(waiter.wait(after, timeout=60))
        await asyncio.sleep(0.5)
        old = deployment.master()
        old.kill()
        await asyncio.to_thread(deployment.wait_for_failover, old, 60)
        # Stored on the promoted replica (the backend's retries ride out the switch),
        # read by a waiter that reconnected to it through the sentinels.
        await asyncio.to_thread(backend.store_result, after, "second", states.SUCCESS)
        metas.append(await second)
        await waiter.aclose()
        old.start()  # back, and made a replica by the sentinels in a while
        return metas

    first, second = asyncio.run(waits())
    assert (first["result"], second["result"]) == ("first", "second")
    assert state.get("before") == "1"  # replicated before the kill, read on the new master
    assert state.connection_pool.get_master_address() != (
        deployment.nodes[0].host,
        deployment.nodes[0].port,
    )
    state.close()


def test_a_submit_waits_until_a_replica_has_its_mark(deployment: SentinelDeployment) -> None:
    settings = _settings(deployment, CAPTCHA_TASKS_REDIS_SENTINEL_WAIT="0.3")
    client = redis_client(settings, settings.state_url)
    keys = Keys(settings.key_prefix)
    queue = SolveQueue(client, settings, claim_s=30.0)
    assert queue.replica_wait_ms == 300
    master = deployment.master()
    replica = next(n for n in deployment.nodes if n is not master)
    deadline = time.monotonic() + 60
    while deployment.replication(master).get("connected_slaves", 0) < 1:  # the old master,
        assert time.monotonic() < deadline, "no replica"  # back after the last test
        time.sleep(0.2)

    def job() -> Job:
        now = time.time()
        made = Job(
            task_id=str(uuid.uuid4()),
            type="recaptcha_v2",
            captcha_json="{}",
            state="submitting",
            enqueued_at=now,
            queue_deadline=now + 600,
            deadline_s=180.0,
        )
        client.hset(keys.job(made.task_id), mapping={"state": "submitting"})
        return made

    replicated = job()
    assert queue.sending(replicated, time.time(), "unit")
    assert client.hget(keys.job(replicated.task_id), "state") == "sending"
    # The replica stops receiving: the mark is on the master alone, so it is not sent.
    with replica.client() as conn:
        conn.config_set("masterauth", "wrong")
    with master.client() as conn:
        conn.client_kill_filter(_type="replica")
    try:
        held = job()
        started = time.monotonic()
        assert not queue.sending(held, time.time(), "unit")
        assert time.monotonic() - started >= 0.3
        assert client.hget(keys.job(held.task_id), "state") == "waiting"
        assert client.zscore(keys.waiting, held.task_id) is not None
    finally:
        with replica.client() as conn:
            conn.config_set("masterauth", PASSWORD)
    # Without the wait (CAPTCHA_TASKS_REDIS_SENTINEL_WAIT=0), or off Sentinel: no WAIT.
    assert (
        SolveQueue(
            client, _settings(deployment, CAPTCHA_TASKS_REDIS_SENTINEL_WAIT="0"), claim_s=30.0
        ).replica_wait_ms
        == 0
    )
    plain = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": "redis://127.0.0.1:1/0"})
    assert SolveQueue(client, plain, claim_s=30.0).replica_wait_ms == 0
    client.close()


def test_a_mark_whose_call_failed_is_taken_back(
    deployment: SentinelDeployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The master SIGKILLed during the WAIT: the mark may be on the promoted replica, but
    # nothing was sent, so the job is queued again rather than left to end
    # SubmitUncertain; one the mark never reached stays submitting (sent by the next).
    settings = _settings(deployment)
    client = redis_client(settings, settings.state_url)
    keys = Keys(settings.key_prefix)
    queue = SolveQueue(client, settings, claim_s=30.0)
    real = queue_module.run_replicated
    for marked_first, then in ((True, "waiting"), (False, "submitting")):

        def failing(*args: Any, marked: bool = marked_first, **kwargs: Any) -> Any:
            if marked:
                real(*args, **kwargs)
            raise redis.ConnectionError("Connection closed by server.")

        monkeypatch.setattr(queue_module, "run_replicated", failing)
        now = time.time()
        job = Job(
            task_id=str(uuid.uuid4()),
            type="recaptcha_v2",
            captcha_json="{}",
            state="submitting",
            enqueued_at=now,
            queue_deadline=now + 600,
            deadline_s=180.0,
        )
        client.hset(keys.job(job.task_id), mapping={"state": "submitting"})
        assert not queue.sending(job, now, "unit")
        assert client.hget(keys.job(job.task_id), "state") == then
    client.close()


def test_the_broker_stays_ours_with_its_password_after_a_failed_connection(
    deployment: SentinelDeployment,
) -> None:
    # After a failed connection kombu "fails over" to the next URL of the list, and
    # read as a URL of its own it would be kombu's transport, without a password.
    settings = _settings(deployment)
    url = settings.broker_url
    options = sentinel_transport_options(settings, url)
    with Connection(
        url,
        transport=transport_for(url),
        transport_options=options,
        failover_strategy=failover_strategy_for(url),
    ) as conn:
        conn.maybe_switch_next()
        assert (
            conn.transport_cls == "captcha_tasks.worker.celery_internals.broker:SentinelTransport"
        )
        assert (conn.password, conn.virtual_host) == (PASSWORD, "0")
        channel = conn.channel()  # pings the master: refused without the password
        assert type(channel).__module__ == "captcha_tasks.worker.celery_internals.broker"
        channel.close()
