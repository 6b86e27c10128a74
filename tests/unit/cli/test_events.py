"""``watch``'s event reader: one PSUBSCRIBE of kombu's event channel, Celery's Receiver
decoding each message (batches included), nothing written to Redis."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import redis

from captcha_tasks.cli.events import consume, deliver, events_channel
from captcha_tasks.monitor.watch import ResultsCollector
from captcha_tasks.settings import get_settings


def _envelope(body: Any) -> str:
    """A fanout message as kombu's Redis transport publishes it."""
    raw = base64.b64encode(json.dumps(body).encode()).decode()
    return json.dumps(
        {
            "body": raw,
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {},
            "properties": {
                "body_encoding": "base64",
                "delivery_tag": "t",
                "delivery_info": {"exchange": "celeryev", "routing_key": "task.multi"},
            },
        }
    )


def test_a_batch_of_events_reaches_the_handlers(celery_app: Any) -> None:
    seen: list[dict[str, Any]] = []
    receiver = celery_app.events.Receiver(None, handlers={"*": seen.append})
    events = [
        {
            "type": "task-received",
            "uuid": "a",
            "hostname": "w@h",
            "timestamp": 1.0,
            "utcoffset": 0,
            "clock": 1,
            "pid": 1,
        },
        {
            "type": "task-succeeded",
            "uuid": "a",
            "hostname": "w@h",
            "timestamp": 2.0,
            "utcoffset": 0,
            "clock": 2,
            "pid": 1,
            "runtime": 1.0,
        },
    ]
    deliver(receiver, _envelope(events))
    deliver(receiver, _envelope(events[0]))
    assert [e["type"] for e in seen] == ["task-received", "task-succeeded", "task-received"]
    assert all("local_received" in e for e in seen)


def test_the_channel_is_kombus_for_the_brokers_database(celery_app: Any) -> None:
    receiver = celery_app.events.Receiver(None, handlers={})
    client = redis.Redis.from_url("redis://127.0.0.1:1/5")
    assert events_channel(client, receiver) == "/5.celeryev/*"


def test_consume_reads_events_a_worker_sends_and_writes_nothing(celery_app: Any) -> None:
    settings = get_settings()
    admin = redis.Redis.from_url(settings.broker_url)
    subscribed = threading.Event()
    results: list[Any] = []

    def send() -> None:
        assert subscribed.wait(timeout=30)
        with celery_app.events.default_dispatcher(hostname="w@h") as dispatcher:
            dispatcher.send("task-received", uuid="t1", name="captcha_tasks.solve_image")
            dispatcher.send("task-succeeded", uuid="t1", result="{'source': 'api'}", runtime=0.5)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    reached = consume(
        celery_app,
        ResultsCollector(),
        on_result=results.append,
        on_ready=subscribed.set,
        limit=1,
        timeout=30,
        settings=settings,
    )
    sender.join(timeout=30)
    assert reached is True
    assert [(r.task_id, r.state, r.type) for r in results] == [("t1", "SUCCESS", "image")]
    assert not [k for k in admin.keys("*") if b"kombu" in k or b"celeryev" in k]
