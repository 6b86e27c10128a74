"""Redis Sentinel settings: ``sentinel://`` URLs, the master's name, the sentinels'
password, and what every client, the broker and the result backend make of them.
Nothing here connects: clients are built and inspected."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from celery import Celery
from kombu import Connection
from redis.sentinel import SentinelConnectionPool

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.redaction import known_secrets, mask_url, mask_urls_in
from captcha_tasks.settings import Settings
from captcha_tasks.settings.redis_urls import SentinelURL, parse_sentinel_url
from captcha_tasks.state.redis import async_redis_client, redis_client
from captcha_tasks.worker.celery_internals.broker import (
    scrub_broker_info,
    sentinel_transport_options,
    transport_for,
)
from captcha_tasks.worker.celery_internals.result_backend import SentinelResultBackend

DATA_PASSWORD = "Data-Pass-1234"
SENTINEL_PASSWORD = "Sentinel-Pass-5678"
URL = (
    f"sentinel://:{DATA_PASSWORD}@10.0.0.1:26379/2;sentinel://10.0.0.2;sentinel://10.0.0.3:26380/2"
)
ENV = {
    "CAPTCHA_TASKS_REDIS_URL": URL,
    "CAPTCHA_TASKS_REDIS_SENTINEL_MASTER": "mymaster",
    "CAPTCHA_TASKS_REDIS_SENTINEL_PASSWORD": SENTINEL_PASSWORD,
}


def test_a_sentinel_url_names_the_sentinels_the_database_and_the_masters_password() -> None:
    assert parse_sentinel_url(URL) == SentinelURL(
        sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 26380)),
        db=2,
        password=DATA_PASSWORD,
    )
    parsed = parse_sentinel_url("sentinel://app:p%40ss@[::1]:5000")
    assert (parsed.sentinels, parsed.db, parsed.username) == ((("::1", 5000),), 0, "app")
    assert parsed.master_options() == {"db": 0, "username": "app", "password": "p@ss"}
    assert DATA_PASSWORD not in repr(parse_sentinel_url(URL))


def test_every_redis_url_may_be_a_sentinel_one() -> None:
    s = Settings.from_env(ENV)
    assert s.redis_url == s.broker_url == s.result_backend == s.state_url == URL
    assert (s.redis_sentinel_master, s.redis_sentinel_password) == ("mymaster", SENTINEL_PASSWORD)
    assert (s.redis_sentinel_timeout, s.redis_sentinel_wait) == (1.0, 1.0)
    assert s.redis_ssl_options(URL) is None
    mixed = Settings.from_env({**ENV, "CAPTCHA_TASKS_BROKER_URL": "redis://b:6379/1"})
    assert (mixed.broker_url, mixed.state_url) == ("redis://b:6379/1", URL)


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        (
            {"CAPTCHA_TASKS_REDIS_URL": "sentinel://h:26379"},
            "CAPTCHA_TASKS_REDIS_URL is a sentinel:// URL: set CAPTCHA_TASKS_REDIS_SENTINEL_MASTER",
        ),
        (
            {"CAPTCHA_TASKS_STATE_URL": "sentinel://h:26379"},
            "CAPTCHA_TASKS_STATE_URL is a sentinel:// URL: set CAPTCHA_TASKS_REDIS_SENTINEL_MASTER",
        ),
        (
            {"CAPTCHA_TASKS_RESULT_BACKEND": "sentinel://h;sentinel://i"},
            "CAPTCHA_TASKS_RESULT_BACKEND is a sentinel:// URL",
        ),
        (
            {**ENV, "CAPTCHA_TASKS_REDIS_SENTINEL_MASTER": "my master"},
            "CAPTCHA_TASKS_REDIS_SENTINEL_MASTER must be a Sentinel service name",
        ),
        (
            {**ENV, "CAPTCHA_TASKS_REDIS_URL": "sentinel://h:1;redis://i:2"},
            "CAPTCHA_TASKS_REDIS_URL: 'redis://i:2' is not a sentinel:// URL (all or none)",
        ),
        (
            {**ENV, "CAPTCHA_TASKS_REDIS_URL": "redis://h:1;redis://i:2"},
            "only sentinel:// URLs can be a ;-separated list",
        ),
        (
            {**ENV, "CAPTCHA_TASKS_REDIS_URL": "sentinel://h:1;sentinel://:pw2@i:2"},
            "only the first sentinel:// URL may carry the Redis password",
        ),
        (
            {**ENV, "CAPTCHA_TASKS_REDIS_URL": "sentinel://h:1/1;sentinel://i:2/3"},
            "names another database than the first",
        ),
        ({**ENV, "CAPTCHA_TASKS_REDIS_URL": "sentinel://h:1/db"}, "the database must be a number"),
        ({**ENV, "CAPTCHA_TASKS_REDIS_URL": "sentinel://:26379"}, "names no host"),
        ({**ENV, "CAPTCHA_TASKS_REDIS_URL": "sentinel://h:99999"}, "is not a valid URL"),
        (
            {**ENV, "CAPTCHA_TASKS_REDIS_URL": "http://h"},
            "must be a redis://, rediss://, unix:// or sentinel:// URL",
        ),
        ({**ENV, "CAPTCHA_TASKS_REDIS_SENTINEL_WAIT": "6"}, "REDIS_SENTINEL_WAIT must be 0-5"),
        ({**ENV, "CAPTCHA_TASKS_REDIS_SENTINEL_TIMEOUT": "0"}, "REDIS_SENTINEL_TIMEOUT must be"),
    ],
)
def test_bad_sentinel_settings_name_the_variable(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env(env)
    assert fragment in str(info.value)
    for secret in ("pw2", DATA_PASSWORD):
        assert secret not in str(info.value)


def test_passwords_of_sentinel_urls_are_masked_and_known(
    settings_env: Callable[..., None],
) -> None:
    masked = "sentinel://:***@10.0.0.1:26379/2;sentinel://10.0.0.2;sentinel://10.0.0.3:26380/2"
    assert mask_url(URL) == masked
    assert mask_urls_in(f"cannot reach {URL} now") == f"cannot reach {masked} now"
    shown = Settings.from_env(ENV).describe()
    assert shown["state_url"] == masked and shown["redis_sentinel_password"] == "***"
    assert SENTINEL_PASSWORD not in repr(Settings.from_env(ENV))
    settings_env(**ENV)
    assert {DATA_PASSWORD, SENTINEL_PASSWORD} <= set(known_secrets())


def test_clients_of_a_sentinel_url_ask_the_sentinels_for_the_master() -> None:
    s = Settings.from_env(ENV)
    client = redis_client(s, URL, timeout=3)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "mymaster" and pool.is_master
    assert pool.connection_kwargs["password"] == DATA_PASSWORD
    assert pool.connection_kwargs["db"] == 2
    assert pool.connection_kwargs["socket_timeout"] == 3
    sentinels = pool.sentinel_manager.sentinels
    assert len(sentinels) == 3
    kwargs = sentinels[0].connection_pool.connection_kwargs
    assert kwargs["password"] == SENTINEL_PASSWORD
    assert kwargs["socket_timeout"] == kwargs["socket_connect_timeout"] == 1.0
    # A sentinel that does not answer is passed over at once (redis-py: ten retries).
    assert sentinels[0].connection_pool.make_connection().retry._retries == 0
    client.close()


def test_async_clients_of_a_sentinel_url_too() -> None:
    s = Settings.from_env(ENV)

    async def main() -> None:
        client = async_redis_client(s, URL, max_connections=3, decode_responses=True)
        pool = client.connection_pool
        assert pool.service_name == "mymaster" and pool.max_connections == 3
        assert pool.connection_kwargs["password"] == DATA_PASSWORD
        sentinel = pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs
        assert sentinel["password"] == SENTINEL_PASSWORD
        await client.aclose()

    asyncio.run(main())


def test_broker_and_backend_of_a_sentinel_url() -> None:
    s = Settings.from_env(ENV)
    assert transport_for(URL) == "captcha_tasks.worker.celery_internals.broker:SentinelTransport"
    assert (
        transport_for("rediss://h/0") == "captcha_tasks.worker.celery_internals.broker:SslTransport"
    )
    assert (
        transport_for("unix:///r.sock") == "captcha_tasks.worker.celery_internals.broker:Transport"
    )
    options = sentinel_transport_options(s, URL)
    assert options["master_name"] == "mymaster"
    assert options["sentinel_kwargs"]["password"] == SENTINEL_PASSWORD
    assert sentinel_transport_options(s, "redis://h/0") == {}

    app = Celery("sentinel-unit", set_as_current=False)
    app.config_from_object("captcha_tasks.worker.celeryconfig")
    app.conf.update(
        broker_url=URL,
        result_backend=URL,
        broker_transport=transport_for(URL),
        result_backend_transport_options={"master_name": "mymaster"},
    )
    backend = app.backend
    assert isinstance(backend, SentinelResultBackend)
    assert DATA_PASSWORD not in backend.as_uri()
    connection = app.connection_for_write()
    assert type(connection.transport).__name__ == "SentinelTransport"
    assert connection.transport.Channel.__module__ == "captcha_tasks.worker.celery_internals.broker"
    assert DATA_PASSWORD not in connection.as_uri()
    connection.release()


def test_inspect_stats_show_no_secret_of_a_sentinel_broker() -> None:
    s = Settings.from_env(ENV)
    info = Connection(
        URL,
        transport=transport_for(URL),
        transport_options={"visibility_timeout": 20, **sentinel_transport_options(s, URL)},
    ).info()
    info.pop("password")  # as Celery's consumer does
    scrubbed = scrub_broker_info(info)
    assert scrubbed["alternates"][0] == "sentinel://:***@10.0.0.1:26379/2"
    assert scrubbed["transport_options"]["sentinel_kwargs"]["password"] == "********"
    assert scrubbed["transport_options"]["visibility_timeout"] == 20
    text = json.dumps(scrubbed)  # what the control reply carries
    assert DATA_PASSWORD not in text and SENTINEL_PASSWORD not in text
