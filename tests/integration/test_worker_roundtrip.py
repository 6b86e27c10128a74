"""The Celery app end to end: real redis-server, real `celery worker` processes, the sandbox."""

from __future__ import annotations

import gc
import os
from typing import Any

import pytest
import requests
from celery import Celery

from captcha_tasks import get_balance, ping
from captcha_tasks.errors import InvalidApiKey
from captcha_tasks_dev.procs import stop_process, wait_until
from captcha_tasks_dev.redis_server import RedisServer
from captcha_tasks_sandbox import DEV_API_KEY
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration


def test_ping_round_trip_through_a_real_worker(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker = worker_factory(worker_env(sandbox.url))
    reply = ping.delay().get(timeout=30)
    assert reply["pong"] is True
    assert reply["hostname"] == worker.name
    assert reply["version"]


def test_get_balance_reaches_the_solver_through_the_worker(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(worker_env(sandbox.url))
    before = sandbox.stats()["balance_calls"]
    reply = get_balance.delay().get(timeout=30)
    assert (reply["provider"], reply["protocol"]) == ("default", "captchaai")
    assert float(reply["balance"]) == pytest.approx(sandbox.stats()["balance"])
    assert sandbox.stats()["balance_calls"] == before + 1


def test_transient_provider_errors_are_retried(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(worker_env(sandbox.url))
    admin = f"{sandbox.url}/admin/config"
    requests.post(admin, json={"fail_rate": 1.0}, timeout=5).raise_for_status()
    result = get_balance.delay()
    # The first attempt meets an HTML 502 page; then the provider recovers.
    wait_until(lambda: sandbox.stats()["errors_injected"] >= 1, timeout=20, what="a 502")
    requests.post(admin, json={"fail_rate": 0.0}, timeout=5).raise_for_status()
    assert float(result.get(timeout=30)["balance"]) > 0
    assert sandbox.stats()["errors_injected"] >= 1


def test_a_wrong_key_fails_with_a_typed_error_naming_the_code(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    # The key is refused once the worker runs (revoked): a worker started with a refused
    # key does not start at all (test_worker_startup).
    worker = worker_factory(worker_env(sandbox.url))
    requests.post(f"{sandbox.url}/admin/config", json={"refuse_keys": True}, timeout=10)
    with pytest.raises(InvalidApiKey, match="ERROR_KEY_DOES_NOT_EXIST") as info:
        get_balance.delay().get(timeout=30)
    assert info.value.code == "ERROR_KEY_DOES_NOT_EXIST"
    # An expected error: one line in the worker's log, no traceback. The worker logs it
    # after it stored the failure that .get() returned: wait for the line.
    wait_until(
        lambda: "raised expected: InvalidApiKey" in worker.log(),
        timeout=10,
        what="the worker's line for the refused key",
    )
    assert "Traceback" not in worker.log()
    assert DEV_API_KEY not in worker.log()


def test_password_protected_redis(sandbox: Any, worker_factory: Any) -> None:
    password = "s3cret-Redis-pass"
    with RedisServer(password=password) as server:
        assert server.url.startswith(f"redis://:{password}@")
        worker = worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_REDIS_URL=server.url))
        client = Celery("client", broker=server.url, backend=server.url, set_as_current=False)
        try:
            reply = client.send_task("captcha_tasks.ping").get(timeout=30)
            gc.collect()  # the result unsubscribes while this Redis still answers
        finally:
            client.close()
        assert reply["hostname"] == worker.name
        assert password not in worker.log()
        _stop_before_its_redis(worker)
    assert os.environ["CAPTCHA_TASKS_REDIS_URL"] != server.url


def test_rediss_url_with_a_private_ca(sandbox: Any, worker_factory: Any, tmp_path: Any) -> None:
    import ssl

    import trustme

    from tests.support.tls_proxy import TLSProxy

    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca_path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    with RedisServer(password="tls-pass") as server, TLSProxy(server.port, server_context) as tls:
        url = f"rediss://:tls-pass@127.0.0.1:{tls.port}/0"
        worker = worker_factory(
            worker_env(
                sandbox.url,
                CAPTCHA_TASKS_REDIS_URL=url,
                CAPTCHA_TASKS_REDIS_CA_CERTS=str(ca_path),
            )
        )
        ssl_options = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": str(ca_path)}
        client = Celery("client", broker=url, backend=url, set_as_current=False)
        client.conf.update(broker_use_ssl=ssl_options, redis_backend_use_ssl=ssl_options)
        try:
            reply = client.send_task("captcha_tasks.get_balance").get(timeout=30)
            gc.collect()  # the result unsubscribes while this Redis still answers
        finally:
            client.close()
        assert float(reply["balance"]) > 0
        assert "tls-pass" not in worker.log()
        _stop_before_its_redis(worker)


def _stop_before_its_redis(worker: Any) -> None:
    """Stop a worker while its Redis still answers. Left to the fixture's teardown, it
    was asked to stop after the ``with`` block had stopped its Redis: Celery's warm
    shutdown waited on the lost broker until the SIGKILL 20 s later (seen as a 20 s
    teardown of the TLS test in CI)."""
    assert stop_process(worker.proc, timeout=20, group=True) == 0  # stopped, not SIGKILLed
