"""The callback receiver in front of a real engine (real Redis, a fake provider that
never answers a poll): pushed answers end jobs like a poll, once, for the job, attempt
and captcha their URL's mac proves only; refusals are rate-limited by the job they name,
never delaying a proven callback; nothing secret is logged."""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import requests

from captcha_tasks.engine import Engine
from captcha_tasks.engine.callback_http import (
    MAX_BUCKETS,
    REFUSED_BURST,
    REFUSED_RATE,
    CallbackServer,
    RateLimit,
)
from captcha_tasks.engine.callbacks import MAC_LENGTH, Claim, Receiver, callback_mac, fallback_wait
from captcha_tasks.engine.placement import ReadyTimes
from captcha_tasks.engine.timing import LEARN_MIN_SAMPLES
from captcha_tasks.errors import CaptchaUnsolvable
from captcha_tasks.provider import Answer, Captcha, Proxy
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from captcha_tasks_dev.procs import wait_until

from .conftest import FakeProvider, Outcomes

TOKEN = "t" * 24 + "0123456789abcdef"
ANSWER = "03AGdBq2-the-secret-answer-token"


class PushedProvider(FakeProvider):
    """Never ready on a poll; records the callback URL of each submit."""

    def __init__(self) -> None:
        super().__init__(lambda captcha_id, poll: None)
        self.urls: dict[str, str] = {}

    def submit(  # type: ignore[override]
        self, captcha: Captcha, *, proxy: Proxy | None = None, callback_url: str | None = None
    ) -> str:
        captcha_id = super().submit(captcha, proxy=proxy)
        assert callback_url is not None
        self.urls[captcha_id] = callback_url
        return captcha_id


@dataclasses.dataclass
class Rig:
    engine: Engine
    outcomes: Outcomes
    provider: PushedProvider
    server: CallbackServer
    base: str

    def url(self, captcha_id: str) -> str:
        return self.provider.urls[captcha_id].replace("https://cb.example.com/hook", self.base)

    def one(self) -> tuple[str, str]:
        wait_until(lambda: len(self.provider.urls) >= 1, timeout=10, what="a submit")
        captcha_id = next(iter(self.provider.urls))
        return captcha_id, self.url(captcha_id)


@pytest.fixture
def cb_settings(settings: Settings) -> Settings:
    return dataclasses.replace(
        settings, callback_url="https://cb.example.com/hook", callback_token=TOKEN, callback_port=0
    )


@pytest.fixture
def rig(cb_settings: Settings, client: redis.Redis) -> Iterator[Rig]:
    provider = PushedProvider()
    outcomes = Outcomes()
    engine = Engine(
        cb_settings, client, provider, outcomes, live_workers=lambda: ["w"], name="unit"
    ).start()
    receiver = Receiver(cb_settings, client, {engine.provider_name: engine.poller})
    server = CallbackServer(receiver, "127.0.0.1", 0).start()
    yield Rig(engine, outcomes, provider, server, f"http://127.0.0.1:{server.port}/hook")
    server.stop()
    engine.stop(timeout=10)


def test_the_submit_carries_task_attempt_and_their_mac_never_the_token(
    rig: Rig, admit_jobs: Callable[..., list[str]], cb_settings: Settings
) -> None:
    (task_id,) = admit_jobs(1)
    captcha_id, _ = rig.one()
    mac = callback_mac(TOKEN, task_id, 1, "default")
    expected = f"https://cb.example.com/hook/{task_id}/1/default/{mac}"
    assert rig.provider.urls[captcha_id] == expected
    assert TOKEN not in rig.provider.urls[captcha_id]
    assert len(mac) == MAC_LENGTH and mac != callback_mac(TOKEN, task_id, 2, "default")
    assert mac != callback_mac(TOKEN[:-1] + "x", task_id, 1, "default")
    assert mac != callback_mac(TOKEN, task_id, 1, "backup")
    # reCAPTCHA v2: a quarter of its 180 s deadline, scaled.
    assert fallback_wait(cb_settings, "recaptcha_v2", 0.1) == pytest.approx(180 * 0.05 / 4)


def test_a_pingback_ends_the_job_like_a_poll_without_any_poll(
    rig: Rig, admit_jobs: Callable[..., list[str]]
) -> None:
    (task_id,) = admit_jobs(1)
    captcha_id, url = rig.one()
    reply = requests.post(url, data={"id": captcha_id, "code": ANSWER}, timeout=5)
    assert (reply.status_code, reply.text) == (200, "solved")
    result = rig.outcomes.results[task_id]
    assert (result["solution"], result["captcha_id"], result["polls"]) == (ANSWER, captcha_id, 0)
    assert rig.provider.count("get") + rig.provider.count("get_many") == 0
    # A duplicate (or a poll that races it) ends nothing more: Outcomes fails on a 2nd end.
    again = requests.get(url, params={"id": captcha_id, "code": ANSWER}, timeout=5)
    assert (again.status_code, again.text) == (200, "already ended")
    assert rig.outcomes.ended() == 1
    # Its ready time is learned exactly: one sample.
    engine = rig.engine
    key = Keys(engine.settings.key_prefix).timing("recaptcha_v2", engine.provider_name)
    assert engine.redis.llen(key) == 1


def test_a_json_callback_without_task_id_ends_the_job(
    rig: Rig, admit_jobs: Callable[..., list[str]]
) -> None:
    (task_id,) = admit_jobs(1)
    _, url = rig.one()
    body = {"errorId": 0, "status": "ready", "solution": {"gRecaptchaResponse": ANSWER}}
    assert requests.post(url, json=body, timeout=5).text == "solved"
    assert rig.outcomes.results[task_id]["solution"] == ANSWER


def _with_mac(url: str, mac: str) -> str:
    return f"{url.rsplit('/', 1)[0]}/{mac}"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda url, task_id: _with_mac(url, "0" * MAC_LENGTH),  # wrong mac
        lambda url, task_id: _with_mac(url, callback_mac(TOKEN, "0" * 36, 1, "default")),
        lambda url, task_id: _with_mac(url, callback_mac(TOKEN, task_id, 2, "default")),
        lambda url, task_id: url.replace("/default/", "/backup/"),  # another provider's
        lambda url, task_id: url.replace(f"/{task_id}/", f"/{'0' * 36}/"),  # mac of another job
        lambda url, task_id: url.rsplit("/", 1)[0],  # no mac
        lambda url, task_id: _with_mac(url, url.rsplit("/", 1)[1][:-1]),  # mac cut short
        lambda url, task_id: url.split("/hook/")[0] + f"/hook/{TOKEN}/{task_id}/1",  # token path
        lambda url, task_id: url.replace("/default/", "/"),  # the shape without a provider
        lambda url, task_id: url.replace("/hook/", "/other/"),  # not under the base path
    ],
    ids=[
        "wrong-mac",
        "other-job-mac",
        "other-attempt-mac",
        "other-provider",
        "other-job",
        "no-mac",
        "short-mac",
        "token-path",
        "no-provider",
        "path",
    ],
)
def test_refused_paths_end_nothing(
    rig: Rig, admit_jobs: Callable[..., list[str]], mangle: Callable[[str, str], str]
) -> None:
    (task_id,) = admit_jobs(1)
    captcha_id, url = rig.one()
    reply = requests.post(mangle(url, task_id), data={"id": captcha_id, "code": ANSWER}, timeout=5)
    assert (reply.status_code, reply.text) == (404, "not found")
    assert rig.outcomes.ended() == 0
    # The job's own URL still ends it.
    assert requests.post(url, data={"id": captcha_id, "code": ANSWER}, timeout=5).text == "solved"


def test_a_claim_is_proven_by_its_own_job_and_attempt_s_mac_only(
    cb_settings: Settings, client: redis.Redis
) -> None:
    receiver = Receiver(cb_settings, client, {})
    mac = callback_mac(TOKEN, "a b/c", 2, "main one")
    claim = receiver.claim(f"/hook/a%20b%2Fc/2/main%20one/{mac}")
    assert claim == Claim("a b/c", 2, "main one", proven=True)
    assert receiver.claim(f"/hook/a%20b%2Fc/1/main%20one/{mac}") == Claim(
        "a b/c", 1, "main one", proven=False
    )
    assert receiver.claim(f"/hook/a%20b%2Fc/2/backup/{mac}") == Claim(
        "a b/c", 2, "backup", proven=False
    )
    assert receiver.claim(f"/hook/other/2/main/{mac}") == Claim("other", 2, "main", False)
    assert receiver.claim("/hook/x/1/p/\u00e9\u00e9") == Claim("x", 1, "p", proven=False)
    for path in (
        f"/hook/{TOKEN}/x/1",
        f"/hook/x/2/{mac}",
        "/hook/x/\u00b2/p/m",
        "/hook//1/p/m",
        "/hook/x/1//m",
        f"/other/x/2/p/{mac}",
    ):
        assert receiver.claim(path) is None, path
    # Refused before any Redis read: no job named, known or not, is looked up.
    refused = receiver.handle(f"/hook/x/1/p/{'0' * MAC_LENGTH}", {"code": ANSWER}, None)
    assert refused.status == 404


def test_another_captcha_id_is_refused(rig: Rig, admit_jobs: Callable[..., list[str]]) -> None:
    admit_jobs(1)
    _, url = rig.one()
    reply = requests.post(url, data={"id": "999", "code": ANSWER}, timeout=5)
    assert reply.status_code == 404
    assert rig.outcomes.ended() == 0


def test_unsolvable_resubmits_once_and_a_stale_attempt_is_ignored(
    rig: Rig, admit_jobs: Callable[..., list[str]]
) -> None:
    (task_id,) = admit_jobs(1)
    first, url = rig.one()
    reply = requests.post(url, data={"id": first, "code": "ERROR_CAPTCHA_UNSOLVABLE"}, timeout=5)
    assert reply.text == "resubmitting"
    wait_until(lambda: len(rig.provider.urls) == 2, timeout=10, what="the resubmit")
    second = next(c for c in rig.provider.urls if c != first)
    mac = callback_mac(TOKEN, task_id, 2, "default")
    assert rig.provider.urls[second].endswith(f"/{task_id}/2/default/{mac}")
    stale = requests.post(url, data={"code": "ERROR_CAPTCHA_UNSOLVABLE"}, timeout=5)
    assert stale.status_code == 409
    unsolvable = {"id": second, "code": "ERROR_CAPTCHA_UNSOLVABLE"}
    assert requests.post(rig.url(second), data=unsolvable, timeout=5).status_code == 200
    assert isinstance(rig.outcomes.errors[task_id], CaptchaUnsolvable)


def test_a_flood_of_wrong_macs_is_rate_limited_and_delays_no_proven_callback(
    rig: Rig, admit_jobs: Callable[..., list[str]]
) -> None:
    """From one address, as every caller behind a reverse proxy is: wrong macs run out
    the refusals' buckets of the job they name, and nothing a proven callback needs."""
    (task_id,) = admit_jobs(1)
    captcha_id, url = rig.one()
    wrong = _with_mac(url, "0" * MAC_LENGTH)
    flood = int(REFUSED_BURST) + 30
    started = time.monotonic()
    with requests.Session() as session:
        codes = [session.get(wrong, timeout=5).status_code for _ in range(flood)]
    refilled = REFUSED_RATE * (time.monotonic() - started)
    assert codes[0] == 404 and codes[-1] == 429
    assert codes.count(404) <= REFUSED_BURST + refilled + 1
    # Another job's bucket is its own.
    other = url.replace(f"/{task_id}/", f"/{'0' * 36}/")
    assert requests.get(other, timeout=5).status_code == 404
    # A proven callback is read and ends the job, whatever was refused before it.
    reply = requests.post(url, data={"id": captcha_id, "code": ANSWER}, timeout=5)
    assert (reply.status_code, reply.text) == (200, "solved")
    assert rig.outcomes.results[task_id]["solution"] == ANSWER
    counts = rig.server.counts
    assert counts["callbacks_rate_limited"] == codes.count(429) and counts["callbacks_200"] == 1


def test_refusal_buckets_stay_bounded_under_a_scan_of_job_ids() -> None:
    now = [0.0]
    limit = RateLimit(REFUSED_RATE, REFUSED_BURST, clock=lambda: now[0])
    for i in range(3 * MAX_BUCKETS):
        assert limit.take(f"job-{i}")
        now[0] += 0.01  # 100 new ids a second, each bucket full again after 10 s
    assert len(limit) <= MAX_BUCKETS + 1
    # A bucket still emptied is kept through the pruning.
    for _ in range(int(REFUSED_BURST)):
        limit.take("guessed")
    for i in range(MAX_BUCKETS + 1):
        limit.take(f"more-{i}")
    assert not limit.take("guessed")


def test_no_token_no_mac_and_no_answer_in_any_log_line(
    rig: Rig,
    admit_jobs: Callable[..., list[str]],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    admit_jobs(1)
    captcha_id, url = rig.one()
    requests.post(url, data={"id": captcha_id, "code": ANSWER}, timeout=5)
    requests.post(url + "x", data={"id": captcha_id, "code": ANSWER}, timeout=5)
    requests.post(url, data=b"\xff\xfe", timeout=5)
    wait_until(lambda: rig.outcomes.ended() == 1, timeout=5, what="the solve")
    # Ours only: the test's own HTTP client (urllib3) logs the URLs it calls.
    ours = [r for r in caplog.records if r.name.startswith("captcha_tasks")]
    text = "\n".join(r.getMessage() for r in ours)
    # http.server's access log goes to stderr, request line (token, query) and all.
    text += capsys.readouterr().err
    mac = url.rsplit("/", 1)[1]
    assert ANSWER not in text and TOKEN not in text and mac not in text


def test_a_callback_arriving_while_the_job_is_still_sending_waits_for_it(
    cb_settings: Settings, client: redis.Redis, admit_jobs: Callable[..., list[str]]
) -> None:
    (task_id,) = admit_jobs(1)
    keys = Keys(cb_settings.key_prefix)
    client.hset(keys.job(task_id), mapping={"state": "sending", "submits": 0})
    lane: Any = type("L", (), {})()  # never reached: the job is not polling in time
    slept: list[float] = []
    receiver = Receiver(cb_settings, client, {"default": lane}, sleep=slept.append)
    path = f"/hook/{task_id}/1/default/{callback_mac(TOKEN, task_id, 1, 'default')}"
    timer = threading.Timer(0.05, lambda: client.hset(keys.job(task_id), "state", "failed"))
    timer.start()
    outcome = receiver.handle(path, {"id": "c1", "code": ANSWER}, None)
    timer.join()
    assert outcome.reason == "already ended" and slept


def test_workers_of_one_host_share_the_port(cb_settings: Settings, client: redis.Redis) -> None:
    receiver = Receiver(cb_settings, client, {})
    one = CallbackServer(receiver, "127.0.0.1", 0).start()
    try:
        if not hasattr(socket, "SO_REUSEPORT"):
            pytest.skip("no SO_REUSEPORT here")
        two = CallbackServer(receiver, "127.0.0.1", one.port).start()
        two.stop()
    finally:
        one.stop()


def test_an_answer_given_with_the_submit_is_read_at_the_usual_first_poll(
    cb_settings: Settings,
) -> None:
    class Holding:
        def holds_answer(self, captcha_id: str) -> bool:
            return captcha_id == "held"

    late = fallback_wait(cb_settings, "image", 0.1, provider=Holding(), captcha_id="other")
    assert late == pytest.approx(90 * 0.05 / 4)
    assert fallback_wait(cb_settings, "image", 0.1, provider=Holding(), captcha_id="held") == 0.1


def test_once_ready_times_are_learned_the_fallback_poll_comes_soon_after_nearly_all(
    cb_settings: Settings,
) -> None:
    ready = ReadyTimes.of([0.5 + i / 200 for i in range(100)])
    wait = fallback_wait(cb_settings, "recaptcha_v2", 0.1, ready=ready)
    # After the 97 % quantile and a tail step, far sooner than a quarter of the deadline.
    assert ready.targets[-1] < wait == pytest.approx(ready.nearly_all)
    assert wait < fallback_wait(cb_settings, "recaptcha_v2", 0.1)
    # Never past half the deadline, whatever was learned.
    slow = ReadyTimes.of([100.0] * 10)
    assert fallback_wait(cb_settings, "recaptcha_v2", 0.1, ready=slow) == pytest.approx(
        180 * 0.05 / 2
    )


def test_a_lost_callback_s_fallback_read_teaches_nothing_a_callback_its_exact_time(
    cb_settings: Settings, client: redis.Redis, admit_jobs: Callable[..., list[str]]
) -> None:
    """Stored as samples, fallback reads (made late on purpose) moved the learned ready
    times later, the next fallbacks later still: a loop that ended 3-6 s after submit
    for 2 s solves in the bench with a fifth of the callbacks dropped."""
    answers_at_once = PushedProvider()  # whose callbacks are all lost; a read answers
    answers_at_once.outcome = lambda captcha_id, poll: Answer(captcha_id, ANSWER)
    outcomes = Outcomes()
    engine = Engine(
        cb_settings, client, answers_at_once, outcomes, live_workers=lambda: ["w"], name="unit"
    )
    key = Keys(cb_settings.key_prefix).timing("recaptcha_v2", engine.provider_name)
    for _ in range(LEARN_MIN_SAMPLES):  # callbacks taught them: 0.1 s from submit
        engine.learner.observe("recaptcha_v2", not_ready_at=None, ready_at=0.1, exact=True)
    engine.learner.flush()
    learned = client.lrange(key, 0, -1)
    engine.start()
    try:
        admit_jobs(3)  # no callback comes: the fallback reads collect them
        wait_until(lambda: outcomes.ended() == 3, timeout=10, what="the fallback reads")
    finally:
        engine.stop(timeout=10)
    reads = answers_at_once.count("get_many") + answers_at_once.count("get")
    assert len(outcomes.results) == 3 and reads >= 1
    assert client.lrange(key, 0, -1) == learned


def test_a_body_nested_too_deep_is_a_400_and_the_job_still_ends(
    rig: Rig, admit_jobs: Callable[..., list[str]]
) -> None:
    (task_id,) = admit_jobs(1)
    captcha_id, url = rig.one()
    deep = b'{"a":' * 10_000 + b"1" + b"}" * 10_000  # 60 kB, under the body limit
    headers = {"Content-Type": "application/json"}
    reply = requests.post(url, data=deep, headers=headers, timeout=5)
    assert (reply.status_code, reply.text) == (400, "bad request body")
    reply = requests.post(url, data={"id": captcha_id, "code": ANSWER}, timeout=5)
    assert (reply.status_code, reply.text) == (200, "solved")
    assert rig.outcomes.results[task_id]["solution"] == ANSWER


def test_a_submit_handed_on_to_the_next_provider_is_not_answered_by_the_first(
    cb_settings: Settings, client: redis.Redis, admit_jobs: Callable[..., list[str]]
) -> None:
    (task_id,) = admit_jobs(1)
    keys = Keys(cb_settings.key_prefix)
    # The first provider refused submit 1 (it saw its URL); the next one took it.
    fields = {"state": "polling", "submits": 1, "provider": "backup", "captcha_id": "b1"}
    client.hset(keys.job(task_id), mapping=fields)
    lane: Any = type("L", (), {})()  # never reached: the claim is not the job's
    receiver = Receiver(cb_settings, client, {"default": lane, "backup": lane})
    first = f"/hook/{task_id}/1/default/{callback_mac(TOKEN, task_id, 1, 'default')}"
    outcome = receiver.handle(first, {"code": ANSWER}, None)  # no id: the path must prove it
    assert (outcome.status, outcome.reason) == (
        409,
        "job not waiting for this captcha (at another provider)",
    )
    assert client.hget(keys.job(task_id), "state") == "polling"
