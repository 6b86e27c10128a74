"""Flower behind basic auth, showing redacted task arguments; a secret scan of everything
Flower, Redis, the broker, the result backend and the worker's log hold.

Real processes on loopback: a redis-server, ``celery worker`` and ``celery flower``.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis

from captcha_tasks import get_balance, report_solution, solve_image, solve_recaptcha_v2
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.session.locks import SessionLock
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks.worker.session_bases import release_and_wake
from captcha_tasks_dev.procs import stop_process, wait_until
from captcha_tasks_dev.redis_server import RedisServer
from tests.support.flower import AUTH, FlowerProcess, flower_tasks, wait_for_events
from tests.support.secret_scan import redis_dump
from tests.support.workers import worker_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
FORM_PASSWORD = "hunter2"
COOKIE_VALUE = "C00kieSessionValue"
QUERY_SECRET = "Qu3rySecretValue"
#: A key the scan's sandbox accepts besides the dev key (32 letters and digits).
SCAN_API_KEY = "ScanKey0123456789abcdefABCDEF987"
PROXY_PASSWORD = "S3cretProxyPw"
REDIS_PASSWORD = "R3disPassw0rdScan"


def png(padding: int) -> bytes:
    """A valid 1x1 PNG made ``padding`` bytes larger by a text chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", header),
            chunk(b"tEXt", b"Comment\x00" + b"p" * padding),
            chunk(b"IDAT", zlib.compress(b"\x00\x00\x00\x00\x00")),
            chunk(b"IEND", b""),
        ]
    )


class SlowSite:
    """A loopback page that answers only when released: keeps a ``fetch_page`` active."""

    def __init__(self) -> None:
        self.release = threading.Event()
        release = self.release

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                release.wait(30)
                body = b"<h1>slow page</h1>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slow_site() -> Iterator[SlowSite]:
    site = SlowSite()
    yield site
    site.close()


def _host(url: str) -> str:
    return url.split("//")[1].split("/")[0]


def test_flower_requires_a_login_and_shows_named_tasks_with_redacted_arguments(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any, flower_factory: Any, slow_site: Any
) -> None:
    demo = demo_sandbox.demo_url
    env = worker_env(
        demo_sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=f"{_host(demo)},{slow_site.host}"
    )
    # -c 1 with room for more prefetched messages: one task active, others reserved.
    worker = worker_factory(env, concurrency=1, extra_args=["--prefetch-multiplier=4"])
    flower = flower_factory(env)
    wait_for_events(flower)

    # Basic auth on the API and the pages; /healthcheck and /metrics are open (documented).
    for path in ("/api/workers", "/api/tasks", "/api/queues/length", "/workers", "/tasks"):
        assert flower.get(path, auth=None).status_code == 401, path
        assert flower.get(path, auth=(AUTH[0], "wrong")).status_code == 401, path
    assert flower.get("/api/workers").status_code == 200
    assert flower.get("/healthcheck", auth=None).status_code == 200
    assert flower.get("/metrics", auth=None).status_code == 200

    image = base64.b64encode(png(6000)).decode()
    page = f"https://example.com/login?session={QUERY_SECRET}&lang=en"
    v2 = solve_recaptcha_v2.delay(V2_KEY, page, cookies=f"sid={COOKIE_VALUE}; lang=en")
    img = solve_image.delay(image, numeric=1)
    login = fetch_page.delay(f"{demo}/login", form={"username": "alice", "password": FORM_PASSWORD})
    assert v2.get(timeout=60)["type"] == "recaptcha_v2"
    assert img.get(timeout=60)["type"] == "image"
    assert login.get(timeout=60)["status"] == 200

    tasks = flower_tasks(flower, [v2.id, img.id, login.id], states={"SUCCESS"})
    assert tasks[v2.id]["name"] == "captcha_tasks.solve_recaptcha_v2"
    assert tasks[v2.id]["worker"] == worker.name
    # The provider that solved it shows, its token does not.
    assert "'provider': 'default'" in tasks[v2.id]["result"]
    assert "'solution'" not in tasks[v2.id]["result"]
    assert tasks[v2.id]["args"] == f"('{V2_KEY}', 'https://example.com/login?session=***&lang=***')"
    assert "'cookies': 'sid=***; lang=***'" in tasks[v2.id]["kwargs"]
    assert tasks[img.id]["name"] == "captcha_tasks.solve_image"
    assert tasks[img.id]["args"] == f"(<image {len(png(6000))} B base64>,)"
    assert tasks[img.id]["kwargs"] == "{'numeric': 1}"
    # fetch_page replaced itself with solve | submit_challenge under its own id, the last
    # step under fetch_page's name: Flower shows the page as a page, the solve its child.
    assert tasks[login.id]["name"] == "captcha_tasks.fetch_page"
    assert "'form': {'username': '***', 'password': '***'}" in tasks[login.id]["kwargs"]
    assert "'lock_token': '***'" in tasks[login.id]["kwargs"]
    assert tasks[login.id]["args"].startswith("({'solution': '***', 'source': 'api'")
    (child,) = tasks[login.id]["children"]
    assert tasks[child]["name"] == "captcha_tasks.solve_recaptcha_v2"
    info = flower.json(f"/api/task/info/{img.id}")
    assert info["args"] == tasks[img.id]["args"] and info["state"] == "SUCCESS"

    workers = flower.json("/api/workers", refresh=1)
    assert worker.name in workers
    assert "captcha_tasks.solve_image" in workers[worker.name]["registered"]

    # Reserved, active and scheduled lists (Celery shows real arguments there by default).
    slow = f"http://{slow_site.host}/account?token={QUERY_SECRET}"
    busy = [fetch_page.delay(slow, form={"password": FORM_PASSWORD}) for _ in range(3)]
    later = solve_image.apply_async((image,), countdown=300)
    inspect = celery_app.control.inspect(timeout=2, destination=[worker.name])
    seen: dict[str, Any] = {}

    def lists_filled() -> bool:
        seen.update(
            active=inspect.active(), reserved=inspect.reserved(), scheduled=inspect.scheduled()
        )
        counts = [len((seen[k] or {}).get(worker.name, [])) for k in seen]
        return counts == [1, 2, 1]

    wait_until(lists_filled, timeout=30, interval=0.3, what="1 active, 2 reserved, 1 scheduled")
    queried = inspect.query_task(*[r.id for r in busy])
    flower_worker = flower.json("/api/workers", refresh=1, workername=worker.name)[worker.name]
    page_html = html.unescape(flower.get(f"/worker/{worker.name}").text)
    slow_site.release.set()
    shown = [seen["active"][worker.name][0], *seen["reserved"][worker.name]]
    assert {t["id"] for t in shown} == {r.id for r in busy}
    for task in shown:
        assert task["args"] == f"('http://{slow_site.host}/account?token=***',)"
        assert task["kwargs"] == "{'form': {'password': '***'}}"
    scheduled = seen["scheduled"][worker.name][0]["request"]
    assert scheduled["id"] == later.id and scheduled["args"] == tasks[img.id]["args"]
    for listing in (queried, flower_worker["active"], flower_worker["reserved"]):
        assert "'password': '***'" in json.dumps(listing)
    assert "'password': '***'" in page_html
    assert f"<image {len(png(6000))} B base64>" in page_html
    everything = json.dumps([seen, queried, flower_worker, tasks]) + page_html + worker.log()
    for secret in (FORM_PASSWORD, COOKIE_VALUE, QUERY_SECRET, image[:64]):
        assert secret not in everything
    assert all(r.get(timeout=60)["status"] == 200 for r in busy)
    celery_app.control.revoke(later.id)


def _broker_messages(raw: list[bytes]) -> str:
    """Queued messages as stored, plus their bodies decoded (kombu base64-encodes them)."""
    out = []
    for message in raw:
        out.append(message.decode(errors="replace"))
        envelope = json.loads(message)
        if envelope.get("properties", {}).get("body_encoding") == "base64":
            out.append(base64.b64decode(envelope["body"]).decode(errors="replace"))
    return "\n".join(out)


def test_secret_scan_api_key_and_proxy_password_appear_nowhere(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    flower_factory: Any,
) -> None:
    sandbox = sandbox_factory(api_keys=(SCAN_API_KEY,), demo_port=0)
    demo = sandbox.demo_url
    settings = get_settings()
    keys = Keys(settings.key_prefix)
    client = state_redis(settings)
    # The worker leases this proxy: its solves go to the provider with it (by pool id in
    # the messages and job records), its page fetches go through it (and fail: nothing
    # listens on port 9, so the error path is scanned too).
    proxy_id = ProxyPool(client, settings).add(f"http://user:{PROXY_PASSWORD}@127.0.0.1:9")
    # Priced, and a floor above the balance: spend buckets, the balance record and its
    # warning are written, and scanned with the rest.
    env = worker_env(
        sandbox.url,
        CAPTCHAAI_API_KEY=SCAN_API_KEY,
        CAPTCHA_TASKS_ALLOWED_DOMAINS=_host(demo),
        CAPTCHA_TASKS_PRICES="recaptcha_v2=2.99,image=0.7",
        CAPTCHA_TASKS_BALANCE_FLOOR="1000",
    )
    flower = flower_factory(env)

    # Enqueued while no worker consumes: the raw messages are read from the queue.
    image = base64.b64encode(png(2000)).decode()
    v2 = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/login", proxy_id=proxy_id)
    img = solve_image.delay(image)
    balance = get_balance.delay()
    page = fetch_page.delay(f"{demo}/page/scan", form={"password": FORM_PASSWORD})
    raw = redis.Redis.from_url(settings.redis_url)  # bytes, as stored
    queued = raw.lrange("celery", 0, -1)
    assert len(queued) == 4
    broker = _broker_messages(queued)

    worker = worker_factory(env)
    wait_until(
        lambda: client.get(keys.worker_proxy(worker.name)) is not None,
        timeout=10,
        what="the worker's proxy lease",
    )
    assert v2.get(timeout=60)["type"] == "recaptcha_v2"
    assert "is gone" not in worker.log()  # the engine submitted it with the proxy
    assert img.get(timeout=60)["type"] == "image"
    assert balance.get(timeout=60)["balance"]
    assert report_solution.delay(v2.id, correct=True).get(timeout=60)["reported"] == "good"
    with pytest.raises(Exception, match="proxy"):
        page.get(timeout=60)
    # A page task that waits for a held session lock: parked (its message kept in
    # Redis), re-sent when the lock's holder releases it, then it fetches through the
    # dead proxy and fails.
    lock = SessionLock(client, settings, _host(demo), owner="secret-scan")
    assert lock.acquire()
    waiting = fetch_page.delay(f"{demo}/page/waiting", form={"password": FORM_PASSWORD})
    wait_until(
        lambda: "parked until the session lock" in worker.log(), timeout=30, what="the page parked"
    )
    parked = redis_dump(raw, exclude={keys.proxies})[0]  # scanned while it is parked
    assert release_and_wake(celery_app, lock)
    with pytest.raises(Exception, match="proxy"):
        waiting.get(timeout=60)
    ids = [v2.id, img.id, balance.id, page.id, waiting.id]
    tasks = flower_tasks(flower, ids, states={"SUCCESS", "FAILURE"})

    workers = flower.json("/api/workers", refresh=1)
    assert worker.name in workers and workers[worker.name]["conf"]
    pages = [flower.get(p).text for p in ("/workers", f"/worker/{worker.name}", "/tasks")]
    assert all(worker.name in page for page in pages[:2])
    shown = [
        json.dumps(tasks),
        json.dumps(workers),
        *pages,
        json.dumps(flower.json("/api/queues/length")),
        *(json.dumps(flower.json(f"/api/task/info/{i}")) for i in ids),
    ]
    inspect = celery_app.control.inspect(timeout=2, destination=[worker.name])
    methods = ("stats", "conf", "registered", "active_queues", "active", "reserved", "scheduled")
    inspected = {method: getattr(inspect, method)() for method in methods}
    assert inspected["conf"][worker.name]["broker_url"].startswith("redis://")
    redis_text, n_keys = redis_dump(raw, exclude={keys.proxies})
    results = [raw.get(f"celery-task-meta-{i}") for i in ids]
    assert all(results) and n_keys > 10
    assert client.exists(keys.balance("default"))
    assert list(client.scan_iter(match=f"{keys.prefix}spend:default:*"))
    assert "below the floor" in worker.log()
    sources = {
        "flower": "\n".join(shown),
        "inspect": json.dumps(inspected),
        "flower log": flower.log(),
        "redis": redis_text,
        "redis, a page parked": parked,
        "broker messages": broker,
        "results": repr(results),
        "worker log": worker.log(),
    }
    for where, text in sources.items():
        assert SCAN_API_KEY not in text, f"the API key is in the {where}"
        assert PROXY_PASSWORD not in text, f"the proxy password is in the {where}"
    # The needles can be found: the pool (left out of the scan) holds the password.
    assert PROXY_PASSWORD in repr(client.hgetall(keys.proxies))
    for where in ("flower", "flower log", "worker log"):
        assert FORM_PASSWORD not in sources[where], f"the form password is in the {where}"


def test_flower_masks_the_redis_password_of_the_broker_url(
    sandbox: Any, worker_factory: Any, flower_factory: Any
) -> None:
    with RedisServer(password=REDIS_PASSWORD) as server:
        env = worker_env(sandbox.url, CAPTCHA_TASKS_REDIS_URL=server.url)
        worker = worker_factory(env)
        flower = flower_factory(env)
        workers = flower.json("/api/workers", refresh=1)
        conf = workers[worker.name]["conf"]
        assert conf["broker_url"] == f"redis://:********@127.0.0.1:{server.port}/0"
        assert REDIS_PASSWORD not in conf["result_backend"]
        assert "password" not in workers[worker.name]["stats"]["broker"]
        page = flower.get(f"/worker/{worker.name}").text
        assert "broker_url" in page
        with server.client() as conn:
            dump, _ = redis_dump(conn, exclude=set())
        # Stopped (by PID) before their Redis is.
        stop_process(flower.proc, timeout=10, group=True)
        stop_process(worker.proc, timeout=20, group=True)
        for text in (json.dumps(workers), page, flower.log(), worker.log(), dump):
            assert REDIS_PASSWORD not in text


def _worker_counters(flower: FlowerProcess, name: str) -> dict[str, int]:
    """The Workers page's figures for ``name`` (Flower counts events by hostname and type)."""
    rows = flower.json("/workers", json=1)["data"]
    (row,) = [r for r in rows if r.get("hostname") == name]
    kinds = ("task-received", "task-succeeded", "task-failed", "task-retried", "active")
    return {kind: int(row.get(kind) or 0) for kind in kinds}


def _result_field(shown: str, field: str) -> float:
    found = re.search(rf"'{field}': ([0-9.]+)", shown)
    assert found, (field, shown)
    return float(found.group(1))


def test_flower_tells_what_happened_to_solves_pages_and_bad_input(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any, flower_factory: Any
) -> None:
    """A mixed run (solves, images, a challenged page, one bad input), then Flower's API:
    each task under its own name, ended, started when it reached the provider, its
    runtime the solve's; the worker's counters add up; the log says the same."""
    demo = demo_sandbox.demo_url
    # Two threads for nine solves: most wait for one, and that wait must show.
    env = worker_env(
        demo_sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=_host(demo), CAPTCHA_TASKS_THREADS="2"
    )
    worker = worker_factory(env, concurrency=2)
    flower = flower_factory(env)
    wait_for_events(flower)
    # The pings that waited for Flower's receiver count too, and the first may have been
    # seen without its task-received: count from here.
    before = _worker_counters(flower, worker.name)

    image = base64.b64encode(png(100)).decode()
    solves = [solve_recaptcha_v2.delay(V2_KEY, f"https://example.com/mixed/{i}") for i in range(5)]
    solves += [solve_image.delay(image, numeric=1) for _ in range(2)]
    page = fetch_page.delay(f"{demo}/page/mixed")
    # By name, as another language's client would send it: nothing checks it on the way.
    bad = celery_app.send_task("captcha_tasks.solve_recaptcha_v2", args=("", "https://e.com"))
    results = {r.id: r.get(timeout=60) for r in solves}
    assert page.get(timeout=60)["solved"] is True
    with pytest.raises(InvalidTaskInput):
        bad.get(timeout=60)

    ids = [*results, page.id, bad.id]
    tasks = flower_tasks(flower, ids, states={"SUCCESS", "FAILURE"})
    for task_id, result in results.items():
        shown = tasks[task_id]
        assert shown["name"] in ("captcha_tasks.solve_recaptcha_v2", "captcha_tasks.solve_image")
        assert shown["state"] == "SUCCESS" and shown["worker"] == worker.name
        # Runtime: submit to answer, as the result says; started: when the provider got it,
        # so received -> started is the wait for a thread, as the result says too.
        assert shown["runtime"] == result["solve_seconds"]
        assert _result_field(shown["result"], "queued_seconds") == result["queued_seconds"]
        assert shown["started"] is not None
        waited = shown["started"] - shown["received"]
        assert waited == pytest.approx(result["queued_seconds"], abs=0.5), shown
        ran = shown["succeeded"] - shown["started"]
        assert ran == pytest.approx(result["solve_seconds"], abs=0.5), shown
    assert max(r["queued_seconds"] for r in results.values()) > 1.0  # some did wait
    # The page: under its own name to its end (its last step carries its id), its
    # solve a child of its own name.
    shown = tasks[page.id]
    assert (shown["name"], shown["state"]) == ("captcha_tasks.fetch_page", "SUCCESS")
    assert shown["started"] is not None and "'status': 200" in shown["result"]
    (child,) = shown["children"]
    assert flower.json(f"/api/task/info/{child}")["name"] == "captcha_tasks.solve_recaptcha_v2"
    # Bad input: failed at admission, under the solve's name.
    shown = tasks[bad.id]
    assert (shown["name"], shown["state"]) == ("captcha_tasks.solve_recaptcha_v2", "FAILURE")
    assert "INVALID_INPUT" in shown["exception"]

    # Once quiet, every message the worker received ended: succeeded, failed, or went on
    # under the same id (the page's, replaced by its solve and submit).
    def since() -> dict[str, int]:
        # Counts since the run began; "active" is the worker's own figure (its last
        # heartbeat's, every 2 s), not a count: taken as it is.
        now = _worker_counters(flower, worker.name)
        return {kind: now[kind] - (before[kind] if kind != "active" else 0) for kind in now}

    def add_up() -> bool:
        c = since()
        done = c["task-succeeded"] + c["task-failed"] + c["task-retried"]
        return c["active"] == 0 and c["task-received"] == done

    try:
        wait_until(add_up, timeout=15, interval=0.3, what="Flower's counters to add up")
    except TimeoutError:
        raise AssertionError(f"counters since the mixed run began: {since()}") from None
    counters = since()
    # 7 solves, the page's first run, its solve and its last step, the bad input.
    assert counters["task-received"] == 11, counters
    assert counters["task-failed"] == 1 and counters["task-retried"] == 1

    log = worker.log()
    assert "] ignored" not in log
    for task_id, result in results.items():
        (line,) = [x for x in log.splitlines() if f"[{task_id}] succeeded in " in x]
        assert f"(queued {result['queued_seconds']:.1f} s, " in line
        assert line.endswith(f"solved in {result['solve_seconds']:.1f} s)")
        assert log.count(f"[{task_id}] admitted") == 1
    assert f"captcha_tasks.fetch_page[{page.id}] challenged: solving with" in log
    assert f"captcha_tasks.fetch_page[{page.id}] succeeded in " in log

    shots = os.environ.get("CAPTCHA_TASKS_FLOWER_SCREENSHOTS")
    if shots:  # docs/flower-tasks.png and docs/flower-task.png (needs Debian's chromium)
        from captcha_tasks_dev.screenshot import shoot_flower

        waited_most = max(results, key=lambda i: results[i]["queued_seconds"])
        shoot_flower(flower.url, f"{AUTH[0]}:{AUTH[1]}", Path(shots), task_id=waited_most)
