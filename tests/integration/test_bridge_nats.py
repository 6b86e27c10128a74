"""``captcha-tasks bridge nats`` between a real nats-server, real workers and the sandbox.

The publisher and the results collector are the NATS guide's own code
(../shared/seeds/002), changed only where marked: they take the server URL, and the
collector, which loops forever in the guide, stops after the results it expects.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections import Counter
from typing import Any

import nats
import pytest

from captcha_tasks_sandbox import DEV_API_KEY
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration
pytest_plugins = ["tests.support.nats_fixtures"]

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
JOBS = 100
#: Every wait of these tests ends by then (seconds).
DEADLINE = 60.0


# -- the guide's code ------------------------------------------------------------------


async def publish_captcha_tasks(url: str) -> None:  # the guide's, with url (was localhost)
    nc = await nats.connect(url)

    tasks = [
        {
            "task_id": f"task_{i}",
            "method": "userrecaptcha",
            "sitekey": "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
            "pageurl": f"https://example.com/page/{i}",
        }
        for i in range(100)
    ]

    for task in tasks:
        await nc.publish("captcha.tasks", json.dumps(task).encode())
        print(f"Published: {task['task_id']}")

    await nc.flush()
    await nc.close()


async def collect_results(url: str, expected: int, subscribed: asyncio.Event) -> tuple[int, int]:
    nc = await nats.connect(url)
    sub = await nc.subscribe("captcha.results")
    await nc.flush()  # added: subscribed before the test publishes
    subscribed.set()  # added

    solved = 0
    failed = 0

    async for msg in sub.messages:
        result = json.loads(msg.data.decode())

        if "solution" in result:
            solved += 1
            print(f"[SOLVED] {result['task_id']} — {result['solution'][:30]}...")
        else:
            failed += 1
            print(f"[FAILED] {result['task_id']} — {result['error']}")

        print(f"  Stats: {solved} solved, {failed} failed")
        if solved + failed >= expected:  # added: the guide's collector runs forever
            break

    await nc.close()  # added
    return solved, failed  # added


async def durable_publisher(url: str, tasks: list[dict[str, Any]]) -> None:  # guide's, url
    nc = await nats.connect(url)
    js = nc.jetstream()

    # Create stream (one-time setup)
    await js.add_stream(name="CAPTCHA", subjects=["captcha.>"])

    for task in tasks:  # added: the guide publishes one `task`
        # Publish with acknowledgment
        ack = await js.publish("captcha.tasks", json.dumps(task).encode())
        print(f"Published to stream, seq={ack.seq}")

    await nc.close()  # added


# -- helpers ---------------------------------------------------------------------------


class Results:
    """Every message on captcha.results, by task_id (a second, independent subscriber)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.nc: Any = None

    async def start(self, url: str) -> Results:
        self.nc = await nats.connect(url)

        async def record(msg: Any) -> None:
            self.messages.append(json.loads(msg.data))

        await self.nc.subscribe("captcha.results", cb=record)
        await self.nc.flush()
        return self

    @property
    def by_task(self) -> dict[Any, dict[str, Any]]:
        return {m["task_id"]: m for m in self.messages}

    async def wait_for(self, count: int, timeout: float = DEADLINE) -> None:
        deadline = time.monotonic() + timeout
        while len(self.by_task) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.by_task)} of {count} results in {timeout} s")
            await asyncio.sleep(0.05)

    async def wait_for_messages(self, count: int, timeout: float = 10.0) -> None:
        """Until this subscriber has ``count`` messages (bad jobs all have task_id None, so
        ``by_task`` cannot count them)."""
        deadline = time.monotonic() + timeout
        while len(self.messages) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.messages)} of {count} messages in {timeout} s")
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        if self.nc is not None:
            await self.nc.close()


def _taken(log: str) -> int:
    found = re.search(r"bridge: stopped \(taken (\d+),", log)
    assert found, log
    return int(found.group(1))


def _bridge_env(sandbox_url: str) -> dict[str, str]:
    # The key is in the bridge's environment on purpose: it must never show up.
    return worker_env(sandbox_url)


# -- tests -----------------------------------------------------------------------------


def test_core_nats_100_jobs_two_bridges_share_them_and_the_guide_collector_counts_100(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    nats_server: Any,
    bridge_factory: Any,
) -> None:
    sandbox = sandbox_factory(threads=JOBS)
    env = worker_env(sandbox.url, CAPTCHA_TASKS_THREADS=str(JOBS))
    worker_factory(env)
    url = nats_server.url
    bridges = [bridge_factory("--url", url, env=_bridge_env(sandbox.url)) for _ in range(2)]

    async def scenario() -> tuple[tuple[int, int], Results]:
        results = await Results().start(url)
        subscribed = asyncio.Event()
        collector = asyncio.create_task(collect_results(url, JOBS, subscribed))
        await asyncio.wait_for(subscribed.wait(), 10)
        started = time.monotonic()
        await publish_captcha_tasks(url)
        counts = await asyncio.wait_for(collector, DEADLINE)
        print(f"core NATS: {JOBS} jobs -> results in {time.monotonic() - started:.1f} s")
        await asyncio.sleep(0.5)  # a duplicate result would arrive by now
        await results.close()
        return counts, results

    (solved, failed), results = asyncio.run(scenario())
    assert (solved, failed) == (JOBS, 0)
    assert set(results.by_task) == {f"task_{i}" for i in range(JOBS)}
    assert len(results.messages) == JOBS  # one result per job, not one per bridge
    assert all(isinstance(m["solution"], str) and m["solution"] for m in results.messages)
    stats = sandbox.stats()
    assert stats["submitted"] == JOBS
    assert stats["duplicates"] == 0
    # The queue group shared the jobs out.
    for bridge in bridges:
        os.kill(bridge.proc.pid, signal.SIGTERM)
        assert bridge.proc.wait(timeout=15) == 0
    taken = [_taken(bridge.log()) for bridge in bridges]
    assert sum(taken) == JOBS
    assert min(taken) > 0, taken
    for bridge in bridges:
        assert DEV_API_KEY not in bridge.log()
    assert not any(DEV_API_KEY in json.dumps(m) for m in results.messages)


def test_jetstream_bridge_killed_mid_batch_and_restarted_loses_no_job(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    nats_server: Any,
    bridge_factory: Any,
) -> None:
    sandbox = sandbox_factory(threads=JOBS)
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_THREADS=str(JOBS)))
    url = nats_server.url
    # Few jobs in flight at once, so the kill finds some solving, some still in the stream.
    args = (
        "--url",
        url,
        "--jetstream",
        "CAPTCHA",
        "--max-pending",
        "20",
        "--batch",
        "10",
        "--ack-wait",
        "2",
    )
    tasks = [
        {
            "task_id": f"task_{i}",
            "method": "userrecaptcha",
            "sitekey": SITEKEY,
            "pageurl": f"https://example.com/page/{i}",
        }
        for i in range(JOBS)
    ]

    async def scenario() -> dict[str, Any]:
        results = await Results().start(url)
        await durable_publisher(url, tasks)
        started = time.monotonic()
        first = await asyncio.to_thread(bridge_factory, *args, env=_bridge_env(sandbox.url))
        await results.wait_for(30)
        os.kill(first.proc.pid, signal.SIGKILL)  # mid-batch: no clean-up of any kind
        await asyncio.to_thread(first.proc.wait, 10)
        at_kill = len(results.by_task)
        in_flight = celery_app.backend.client.hlen("ct:bridge:captcha-workers:pending")
        nc = await nats.connect(url)
        info = await nc.jetstream().consumer_info("CAPTCHA", "captcha-workers")
        await nc.close()
        await asyncio.to_thread(bridge_factory, *args, env=_bridge_env(sandbox.url))
        await results.wait_for(JOBS)
        elapsed = time.monotonic() - started
        await asyncio.sleep(0.5)  # a duplicate result would arrive by now
        await results.close()
        return {
            "results": results,
            "at_kill": at_kill,
            "elapsed": elapsed,
            "in_flight": in_flight,
            "unacked": info.num_ack_pending,
            "undelivered": info.num_pending,
        }

    run = asyncio.run(scenario())
    results: Results = run["results"]
    assert run["at_kill"] < JOBS
    # Jobs were still solving, or waiting in the stream, when the bridge died.
    assert run["in_flight"] + run["undelivered"] + run["unacked"] > 0
    by_task = results.by_task
    assert set(by_task) == {f"task_{i}" for i in range(JOBS)}
    assert all("solution" in m for m in by_task.values()), [m for m in by_task.values()]
    repeated = sum(n - 1 for n in Counter(m["task_id"] for m in results.messages).values())
    stats = sandbox.stats()
    print(
        f"JetStream kill/restart: {len(by_task)}/{JOBS} results in {run['elapsed']:.1f} s; "
        f"at the kill: {run['at_kill']} results out, {run['in_flight']} solving, "
        f"{run['undelivered']} undelivered, {run['unacked']} unacknowledged; "
        f"{repeated} repeated result messages; "
        f"sandbox submitted {stats['submitted']}, duplicate submits {stats['duplicates']}"
    )
    assert stats["duplicates"] == 0
    assert stats["submitted"] == JOBS


def test_jetstream_job_redelivered_after_a_crash_between_enqueue_and_ack_is_solved_once(
    celery_app: Any, sandbox: Any, worker_factory: Any, nats_server: Any, bridge_factory: Any
) -> None:
    from nats.js.api import ConsumerConfig

    from captcha_tasks.bridge.jobs import jetstream_task_id, parse_job, task_call
    from captcha_tasks.bridge.nats_bridge import BridgeOptions, NatsBridge
    from captcha_tasks.bridge.pending import Entry
    from captcha_tasks.settings import get_settings
    from captcha_tasks.worker.bridge_queue import CeleryTaskQueue

    worker_factory(worker_env(sandbox.url))
    url = nats_server.url
    count = 5
    tasks = [
        {
            "task_id": f"crash_{i}",
            "method": "userrecaptcha",
            "sitekey": SITEKEY,
            "pageurl": f"https://example.com/crash/{i}",
        }
        for i in range(count)
    ]
    # A bridge that dies between enqueueing and acknowledging: the test takes the jobs
    # with the bridges' durable consumer and enqueues them the bridge's own way, then
    # drops the connection without one acknowledgement.
    options = BridgeOptions(url=url, jetstream="CAPTCHA")
    dead = NatsBridge(options, get_settings(), CeleryTaskQueue(celery_app))

    async def crash() -> None:
        await durable_publisher(url, tasks)
        nc = await nats.connect(url)
        config = ConsumerConfig(
            durable_name="captcha-workers", ack_wait=1.0, filter_subject="captcha.tasks"
        )
        sub = await nc.jetstream().pull_subscribe(
            "captcha.tasks", durable="captcha-workers", stream="CAPTCHA", config=config
        )
        msgs = await sub.fetch(count, timeout=5)
        assert len(msgs) == count
        for msg in msgs:
            meta = msg.metadata
            celery_id = jetstream_task_id(
                meta.stream, meta.sequence.stream, meta.timestamp.isoformat()
            )
            job = parse_job(msg.data)
            entry = Entry(job.task_id, "captcha.results", time.time() + DEADLINE)
            assert dead.enqueue(celery_id, task_call(job), entry, False)
        await nc.close()

    async def recover() -> tuple[Results, Any]:
        results = await Results().start(url)
        args = ("--url", url, "--jetstream", "CAPTCHA", "--ack-wait", "1")
        bridge = await asyncio.to_thread(bridge_factory, *args, env=_bridge_env(sandbox.url))
        await results.wait_for(count)
        await asyncio.sleep(1.5)  # a second solve's result would arrive by now
        await results.close()
        return results, bridge

    asyncio.run(crash())
    results, bridge = asyncio.run(recover())
    os.kill(bridge.proc.pid, signal.SIGTERM)
    assert bridge.proc.wait(timeout=15) == 0
    counters = re.search(r"bridge: stopped \((.*)\)", bridge.log())
    assert counters, bridge.log()
    print(f"redelivered after a crash before the ack: {counters.group(1)}")
    assert _taken(bridge.log()) == count  # every job came again, to the new bridge
    assert sorted(m["task_id"] for m in results.messages) == sorted(t["task_id"] for t in tasks)
    assert all("solution" in m for m in results.messages)
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"]) == (count, 0)


@pytest.mark.parametrize("mode", ["core", "jetstream"])
def test_bad_jobs_become_error_results_and_the_bridge_carries_on(
    celery_app: Any,
    sandbox: Any,
    worker_factory: Any,
    nats_server: Any,
    bridge_factory: Any,
    mode: str,
) -> None:
    worker_factory(worker_env(sandbox.url))
    url = nats_server.url
    extra = ["--jetstream", "JOBS"] if mode == "jetstream" else []
    bridge = bridge_factory("--url", url, *extra, env=_bridge_env(sandbox.url))
    page = "https://example.com/login"
    bad: list[bytes] = [
        b"not json {",
        b"[1, 2, 3]",
        b'{"method": "userrecaptcha"}',
    ]
    jobs: list[dict[str, Any]] = [
        {"task_id": "no-method", "sitekey": SITEKEY, "pageurl": page},
        {"task_id": "unknown-method", "method": "keycaptcha", "sitekey": SITEKEY, "pageurl": page},
        {"task_id": "missing-pageurl", "method": "userrecaptcha", "sitekey": SITEKEY},
        {
            "task_id": "unknown-param",
            "method": "turnstile",
            "sitekey": TURNSTILE_KEY,
            "pageurl": page,
            "colour": "red",
            "key": DEV_API_KEY,
        },
        # Shaped right, refused by the solve task's own validation in the worker:
        {"task_id": "bad-sitekey", "method": "userrecaptcha", "sitekey": "short", "pageurl": page},
        {
            "task_id": "bad-pageurl",
            "method": "userrecaptcha",
            "sitekey": SITEKEY,
            "pageurl": "ftp://example.com/x",
        },
        {
            "task_id": "bad-score",
            "method": "userrecaptcha",
            "version": "v3",
            "sitekey": SITEKEY,
            "pageurl": page,
            "min_score": "7",
        },
        {"task_id": 42, "method": "hcaptcha", "sitekey": "not-a-uuid", "pageurl": page},
    ]
    good = {"task_id": "good", "method": "userrecaptcha", "sitekey": SITEKEY, "pageurl": page}
    expected = len(bad) + len(jobs) + 1

    async def scenario() -> tuple[tuple[int, int], Results]:
        results = await Results().start(url)
        subscribed = asyncio.Event()
        collector = asyncio.create_task(collect_results(url, expected, subscribed))
        await asyncio.wait_for(subscribed.wait(), 10)
        nc = await nats.connect(url)
        payloads = [*bad, *(json.dumps(job).encode() for job in [*jobs, good])]
        for payload in payloads:
            if mode == "jetstream":
                await nc.jetstream().publish("captcha.tasks", payload)
            else:
                await nc.publish("captcha.tasks", payload)
        await nc.flush()
        await nc.close()
        counts = await asyncio.wait_for(collector, DEADLINE)
        # Two subscribers of one subject: the collector having all the results says
        # nothing of this one, which may still be handling the last (seen under load).
        await results.wait_for_messages(expected)
        await results.close()
        return counts, results

    (solved, failed), results = asyncio.run(scenario())
    assert (solved, failed) == (1, expected - 1)
    assert bridge.proc.poll() is None  # still running
    codes = [m["code"] for m in results.messages if m["task_id"] is None]
    assert codes == ["BAD_JOB"] * 3
    by_task = results.by_task
    assert by_task["good"]["solution"]
    assert by_task["no-method"]["code"] == "BAD_JOB"
    assert by_task["unknown-method"]["code"] == "UNKNOWN_METHOD"
    assert "keycaptcha" in by_task["unknown-method"]["error"]
    assert "pageurl" in by_task["missing-pageurl"]["error"]
    assert "colour" in by_task["unknown-param"]["error"]
    for task_id, field in [
        ("bad-sitekey", "sitekey"),
        ("bad-pageurl", "pageurl"),
        ("bad-score", "min_score"),
        (42, "sitekey"),
    ]:
        assert by_task[task_id]["code"] == "INVALID_INPUT", by_task[task_id]
        assert field in by_task[task_id]["error"]
        assert by_task[task_id]["celery_task_id"]  # it went through a solve task
    stats = sandbox.stats()
    assert stats["submitted"] == 1  # nothing bad reached the provider
    assert not any(DEV_API_KEY in json.dumps(m) for m in results.messages)
    assert DEV_API_KEY not in bridge.log()


#: A job per in.php method of FunCaptcha, GeeTest v4, AWS WAF and coordinates, 2Captcha's names.
NEW_KIND_JOBS: list[dict[str, Any]] = [
    {
        "task_id": "funcaptcha",
        "method": "funcaptcha",
        "publickey": "69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC",
        "pageurl": "https://example.com/a",
        "surl": "https://client-api.arkoselabs.com",
        "data[blob]": "b1ob+/==",
    },
    {
        "task_id": "geetest_v4",
        "method": "geetest_v4",
        "captcha_id": "e392e1d7fd421dc63325744d5a2b9c73",
        "pageurl": "https://example.com/b",
    },
    {
        "task_id": "aws_waf",
        "method": "amazon_waf",
        "sitekey": "AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTbNg96AHMDLodoefdvyOnsHMRtEKQ",
        "iv": "CgAHbCe2GgAAAAAj",
        "context": "9BUgmlm48F92WUoqv97a49ZuEJJ50TCk9MVr3C7WMtQ0X6fl",
        "pageurl": "https://example.com/c",
    },
    {
        "task_id": "coordinates",
        "method": "base64",
        "coordinatescaptcha": "1",
        "body": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAQ3RFWHRDb21tZW50AHBhZGRpbmcgcGFk"
        "ZGluZyBwYWRkaW5nIHBhZGRpbmcgcGFkZGluZyBwYWRkaW5nIHBhZGRpbmcgcGFkZGluZ+a6jLUAAAAN"
        "SURBVHicY/j//z8DAAj8Av7ueu+cAAAAAElFTkSuQmCC",
        "textinstructions": "click every cat",
    },
    {
        "task_id": "turnstile_challenge",
        "method": "turnstile",
        "sitekey": TURNSTILE_KEY,
        "pageurl": "https://example.com/d",
        "action": "managed",
        "data": "7d2a1f",
        "pagedata": "3gAFo2l2",
        "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
    },
    {
        "task_id": "recaptcha_enterprise",
        "method": "userrecaptcha",
        "googlekey": SITEKEY,
        "pageurl": "https://example.com/e",
        "enterprise": "1",
        "data-s": "Q9qI-payload_s",
    },
]


def test_the_new_kinds_solve_through_the_bridge_under_their_in_php_names(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    nats_server: Any,
    bridge_factory: Any,
) -> None:
    # Classic 2Captcha offers every new kind (the sandbox speaks it).
    from captcha_tasks_sandbox import dev_api_key

    sandbox = sandbox_factory()
    env = worker_env(
        sandbox.url,
        CAPTCHA_TASKS_PROVIDER="2captcha",
        CAPTCHA_TASKS_API_KEY=dev_api_key("2captcha"),
    )
    worker_factory(env)
    url = nats_server.url
    bridge_factory("--url", url, env=env)

    async def scenario() -> Results:
        results = await Results().start(url)
        nc = await nats.connect(url)
        for job in NEW_KIND_JOBS:
            await nc.publish("captcha.tasks", json.dumps(job).encode())
        await nc.flush()
        await nc.close()
        await results.wait_for(len(NEW_KIND_JOBS))
        await results.close()
        return results

    by_task = asyncio.run(scenario()).by_task
    assert all("solution" in m for m in by_task.values()), by_task
    assert "pk=69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC" in by_task["funcaptcha"]["solution"]
    assert set(by_task["geetest_v4"]["solution"]) == {
        "captcha_id",
        "lot_number",
        "pass_token",
        "gen_time",
        "captcha_output",
    }
    assert set(by_task["aws_waf"]["solution"]) == {"captcha_voucher", "existing_token"}
    points = by_task["coordinates"]["solution"]
    assert points and all(isinstance(p["x"], int) and isinstance(p["y"], int) for p in points)
    challenge = by_task["turnstile_challenge"]
    assert isinstance(challenge["solution"], str) and challenge["user_agent"]
    assert isinstance(by_task["recaptcha_enterprise"]["solution"], str)
    assert "user_agent" not in by_task["recaptcha_enterprise"]
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"]) == (len(NEW_KIND_JOBS), 0)
