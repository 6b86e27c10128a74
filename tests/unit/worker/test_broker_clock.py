"""The broker's unacknowledged index is stamped and swept by Redis's clock, so a worker
whose clock is off neither puts back messages others still hold nor holds back a dead
worker's."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from unittest import mock

import pytest
import redis
from kombu import Connection

from captcha_tasks.worker.celery_internals.broker import Channel

VISIBILITY = 20


@pytest.fixture
def channel(redis_url: str) -> Iterator[Channel]:
    with Connection(
        redis_url,
        transport="captcha_tasks.worker.celery_internals.broker:Transport",
        transport_options={"visibility_timeout": VISIBILITY},
    ) as conn:
        chan = conn.default_channel
        assert isinstance(chan, Channel)
        yield chan


def _unacked(client: redis.Redis, chan: Channel, tag: str, at: float) -> None:
    message = {
        "body": "{}",
        "headers": {"task": "t"},
        "properties": {"delivery_tag": tag, "delivery_info": {}},
    }
    client.zadd(chan.unacked_index_key, {tag: at})
    client.hset(chan.unacked_key, tag, json.dumps([message, "", "celery"]))


@pytest.mark.parametrize("host_offset", [0.0, 30.0, -30.0])
def test_the_sweep_puts_back_by_redis_clock_whatever_the_hosts(
    channel: Channel, redis_url: str, host_offset: float
) -> None:
    client = redis.Redis.from_url(redis_url)
    now = channel.now()
    assert abs(now - time.time()) < 1.0  # Redis runs on this host
    _unacked(client, channel, "dead-workers", now - VISIBILITY - 5)
    _unacked(client, channel, "held-now", now - 5)
    with mock.patch("kombu.transport.redis.time", lambda: time.time() + host_offset):
        channel.qos.restore_visible(num=10, interval=1)
    assert client.zrange(channel.unacked_index_key, 0, -1) == [b"held-now"]
    assert client.llen("celery") == 1  # the dead worker's message, back on its queue
    assert channel.qos.visibility_timeout == VISIBILITY


def test_taking_a_message_stamps_it_by_redis_clock(channel: Channel, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    message = mock.Mock(delivery_info={"exchange": "", "routing_key": "celery"}, _raw={})
    with mock.patch("kombu.transport.redis.time", lambda: time.time() + 30):
        channel.qos.append(message, "tag-1")
    score = client.zscore(channel.unacked_index_key, "tag-1")
    assert score is not None and abs(score - channel.now()) < 1.0
