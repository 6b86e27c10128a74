"""Answers pushed by the provider, through real ``celery worker`` processes: the sandbox
delivers pingbacks (classic) and callbackUrl bodies (JSON) with 20 % of them dropped
and 20 % sent twice; two workers share one receiver port (SO_REUSEPORT).

Every solve succeeds once: nothing lost (the late fallback poll collects the dropped
ones), nothing ended twice (the sandbox sees one submit per task, the results carry
distinct captcha ids), and only the dropped callbacks cost polls.

A callback URL proves one job's one submit: one built from another job's URL (or from
the deployment's token) ends nothing, and a flood of wrong ones from the address every
caller shares behind a reverse proxy delays no right one.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks_dev.procs import wait_until
from captcha_tasks_sandbox import dev_api_key
from captcha_tasks_sandbox.callbacks import CallbackSender
from tests.support.workers import WorkerProcess, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TOKEN = "integration-callback-token-0123456789"
SOLVES = 60


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(("protocol", "dialect"), [("classic", "2captcha"), ("json", "capmonster")])
def test_no_solve_lost_or_ended_twice_with_dropped_and_duplicated_callbacks(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, protocol: str, dialect: str
) -> None:
    sandbox = sandbox_factory(
        protocol=protocol,
        dialect=dialect,
        threads=20,
        seed=7,
        callback_drop_rate=0.2,
        callback_duplicate_rate=0.2,
    )
    port = _free_port()
    env = worker_env(
        sandbox.url,
        CAPTCHA_TASKS_PROVIDER=dialect,
        CAPTCHA_TASKS_API_KEY=dev_api_key(dialect),
        CAPTCHA_TASKS_THREADS="20",
        CAPTCHA_TASKS_CALLBACK_URL=f"http://127.0.0.1:{port}/cb",
        CAPTCHA_TASKS_CALLBACK_TOKEN=TOKEN,
        CAPTCHA_TASKS_CALLBACK_PORT=str(port),
    )
    env.pop("CAPTCHAAI_API_KEY", None)
    workers = [worker_factory(env), worker_factory(env)]
    results = [
        solve_recaptcha_v2.delay(V2_KEY, f"https://j{i}.example.com/") for i in range(SOLVES)
    ]
    got = [r.get(timeout=120) for r in results]
    stats = sandbox.stats()
    assert all(g["source"] == "api" and g["submits"] == 1 for g in got)
    assert len({g["captcha_id"] for g in got}) == SOLVES
    assert (stats["submitted"], stats["duplicates"]) == (SOLVES, 0)
    dropped = int(stats["callbacks_dropped"])
    assert 0 < dropped < SOLVES and stats["callbacks_duplicated"] > 0
    # Only a dropped callback's captcha is read, once, at its late fallback poll (the
    # sandbox counts requests: a batch read of several is one).
    assert sorted(g["polls"] for g in got) == [0] * (SOLVES - dropped) + [1] * dropped
    assert 0 < stats["polls"] <= dropped
    for worker in workers:
        log = worker.log_path.read_text()
        assert TOKEN not in log
        assert not any(g["solution"] in log for g in got)


FORGED = "03AGdBq2-a-forged-answer"
#: reCAPTCHA v2 solves take 5 s (scaled): time to send callbacks while the job polls.
SLOW = {"recaptcha_v2": 100.0}


@pytest.fixture
def pingbacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[int, str]]:
    """The pingback URL of each captcha the sandboxes of the test take, by captcha id:
    what the provider is handed, whatever its shape."""
    seen: dict[int, str] = {}
    deliver = CallbackSender.pingback

    def record(sender: CallbackSender, captcha_id: int, url: str) -> None:
        seen[captcha_id] = url
        deliver(sender, captcha_id, url)

    monkeypatch.setattr(CallbackSender, "pingback", record)
    yield seen


def _receiving_worker(sandbox_factory: Any, worker_factory: Any) -> tuple[str, WorkerProcess]:
    """A sandbox solving reCAPTCHA v2 slowly and a worker receiving its pingbacks: the
    callback base URL and the worker."""
    sandbox = sandbox_factory(dialect="captchaai", latency=SLOW, seed=3)
    port = _free_port()
    base = f"http://127.0.0.1:{port}/cb"
    env = worker_env(
        sandbox.url,
        CAPTCHA_TASKS_CALLBACK_URL=base,
        CAPTCHA_TASKS_CALLBACK_TOKEN=TOKEN,
        CAPTCHA_TASKS_CALLBACK_PORT=str(port),
    )
    return base, worker_factory(env)


def _polling(pingbacks: dict[int, str], task_id: str) -> tuple[int, str]:
    """Once ``task_id``'s job polls: its captcha id and the pingback URL it was sent with."""
    settings = get_settings()
    client, key = state_redis(settings), Keys(settings.key_prefix).job(task_id)
    wait_until(lambda: client.hget(key, "state") == "polling", timeout=30, what="a polling job")
    return next((c, url) for c, url in pingbacks.items() if f"/{task_id}/" in url)


def test_an_answer_forged_from_another_job_s_callback_url_is_refused(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, pingbacks: dict[int, str]
) -> None:
    base, _ = _receiving_worker(sandbox_factory, worker_factory)
    one, two = (solve_recaptcha_v2.delay(V2_KEY, f"https://f{i}.example.com/") for i in (1, 2))
    _polling(pingbacks, one.id)
    _, seen_by_provider = _polling(pingbacks, two.id)
    forged = [
        seen_by_provider.replace(two.id, one.id),  # the URL one provider saw, another job
        f"{base}/{TOKEN}/{one.id}/1",  # the deployment's token in the path
    ]
    for url in forged:
        reply = requests.get(url, params={"code": FORGED}, timeout=5)
        assert (reply.status_code, reply.text) == (404, "not found"), url
    # Each job ends with the answer the sandbox pushed for it, at its ready time.
    for result in (one, two):
        got = result.get(timeout=60)
        assert got["solution"] != FORGED and got["source"] == "api"


def test_a_flood_of_wrong_macs_from_one_address_delays_no_right_callback(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, pingbacks: dict[int, str]
) -> None:
    _, worker = _receiving_worker(sandbox_factory, worker_factory)
    result = solve_recaptcha_v2.delay(V2_KEY, "https://flood.example.com/")
    captcha_id, url = _polling(pingbacks, result.id)
    wrong = f"{url.rsplit('/', 1)[0]}/{'f' * 32}"
    with requests.Session() as session:
        codes = [
            session.get(wrong, params={"id": captcha_id, "code": FORGED}, timeout=5).status_code
            for _ in range(50)
        ]
    assert codes[0] == 404 and codes[-1] == 429
    right = "03AGdBq2-the-answer-pushed-first"
    reply = requests.get(url, params={"id": captcha_id, "code": right}, timeout=5)
    assert (reply.status_code, reply.text) == (200, "solved")
    assert result.get(timeout=30)["solution"] == right
    log = worker.log_path.read_text()
    assert TOKEN not in log and url.rsplit("/", 1)[1] not in log
