"""The public solve tasks through real `celery worker` processes and the sandbox."""

from __future__ import annotations

import base64
import os
import signal
import time
from typing import Any

import pytest
import requests
from celery.exceptions import TimeoutError as CeleryTimeoutError

from captcha_tasks import (
    report_solution,
    solve_geetest,
    solve_hcaptcha,
    solve_image,
    solve_recaptcha_v2,
    solve_recaptcha_v3,
    solve_turnstile,
)
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks_dev.procs import wait_until
from captcha_tasks_sandbox import image_answer
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
HCAPTCHA_KEY = "a5f74b19-9e45-40e0-b45d-47ff91b7a6c2"
GT = "f1ab2cdefa3456789012345678901234"
CHALLENGE = "12345678abc90123d45678ef90123a456b"
# A real 1x1 PNG, padded past the providers' 100-byte minimum with a text chunk.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAQ3RFWHRDb21tZW50AHBhZGRpbmcgcGFk"
    "ZGluZyBwYWRkaW5nIHBhZGRpbmcgcGFkZGluZyBwYWRkaW5nIHBhZGRpbmcgcGFkZGluZ+a6jLUAAAAN"
    "SURBVHicY/j//z8DAAj8Av7ueu+cAAAAAElFTkSuQmCC"
)


def _evidence(results: dict[str, Any], sandbox: Any) -> str:
    """What Redis and the sandbox hold for results that did not come: for a flake."""
    import redis

    from captcha_tasks.settings import get_settings
    from captcha_tasks.state import Keys

    settings = get_settings()
    keys = Keys(settings.key_prefix)
    lines = [f"sandbox stats: {sandbox.stats()}"]
    with redis.Redis.from_url(settings.redis_url) as raw:
        for kind, result in results.items():
            fields = raw.hgetall(keys.job(result.id))
            job = {
                k.decode(): v.decode(errors="replace")[:80]
                for k, v in fields.items()
                if k != b"captcha"
            }
            meta = (raw.get(f"celery-task-meta-{result.id}") or b"").decode()[:300]
            lines.append(f"{kind} {result.id}: backend {meta!r}; job {job}")
        lines.append(f"waiting {raw.zrange(keys.waiting, 0, -1, withscores=True)}")
        lines.append(f"due {raw.zrange(keys.due, 0, -1, withscores=True)}")
        lines.append(f"budget {raw.zrange(keys.budget, 0, -1, withscores=True)}")
    return "\n".join(lines)


def _verify(sandbox: Any, token: str) -> dict[str, Any]:
    reply = requests.post(f"{sandbox.url}/siteverify", data={"response": token}, timeout=5)
    return dict(reply.json())


def test_every_type_solves_with_the_documented_result(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(worker_env(sandbox.url))
    page = "https://example.com/login"
    results = {
        "recaptcha_v2": solve_recaptcha_v2.delay(V2_KEY, page, invisible=True),
        "recaptcha_v3": solve_recaptcha_v3.delay(V2_KEY, page, action="login", min_score=0.7),
        "turnstile": solve_turnstile.delay(TURNSTILE_KEY, page, action="x", cdata="y"),
        "image": solve_image.delay(base64.b64encode(PNG).decode(), numeric=0),
        "geetest": solve_geetest.delay(GT, CHALLENGE, page),
        "hcaptcha": solve_hcaptcha.delay(HCAPTCHA_KEY, page),
    }
    try:
        got = {kind: result.get(timeout=60) for kind, result in results.items()}
    except CeleryTimeoutError:
        raise AssertionError(_evidence(results, sandbox)) from None
    for kind, result in got.items():
        assert result["type"] == kind
        assert result["source"] == "api"
        assert result["captcha_id"].isdigit()
        assert (result["protocol"], result["cost"]) == ("captchaai", None)
        assert result["solve_seconds"] > 0
    for kind in ("recaptcha_v2", "recaptcha_v3", "turnstile", "hcaptcha"):
        assert got[kind]["expires_at"] > time.time()
        assert _verify(sandbox, got[kind]["solution"])["success"] is True
    assert got["image"]["solution"] == image_answer(PNG, {"numeric": "0"})
    assert got["image"]["expires_at"] is None
    assert set(got["geetest"]["solution"]) == {
        "geetest_challenge",
        "geetest_validate",
        "geetest_seccode",
    }
    # Tokens are single use: the same token is refused the second time.
    assert _verify(sandbox, got["recaptcha_v2"]["solution"])["success"] is False
    assert sandbox.stats()["duplicates"] == 0


@pytest.mark.parametrize(
    ("task", "args", "kwargs", "fragment"),
    [
        (solve_recaptcha_v2, ("short", "https://example.com"), {}, "sitekey"),
        (solve_recaptcha_v2, (V2_KEY, "ftp://example.com/x"), {}, "pageurl"),
        (solve_recaptcha_v2, (V2_KEY, "https://e.com/" + "a" * 3000), {}, "pageurl"),
        (solve_recaptcha_v2, (V2_KEY, "https://e.com"), {"colour": "red"}, "colour"),
        (solve_recaptcha_v3, (V2_KEY, "https://e.com"), {"min_score": 7}, "min_score"),
        (solve_image, ("",), {}, "image"),
        (solve_image, (base64.b64encode(b"GIF89a" * 40_000).decode(),), {}, "image"),
        (solve_image, (base64.b64encode(b"not an image" * 20).decode(),), {}, "image"),
        (solve_image, ("@@@not base64@@@",), {}, "image"),
        (solve_turnstile, ("", "https://e.com"), {}, "sitekey"),
        (solve_geetest, ("nothex", CHALLENGE, "https://e.com"), {}, "gt"),
    ],
)
def test_bad_input_fails_at_once_and_reaches_nothing(
    celery_app: Any,
    sandbox: Any,
    worker_factory: Any,
    task: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    fragment: str,
) -> None:
    worker_factory(worker_env(sandbox.url))
    # In the caller: .delay() raises, and sends nothing.
    with pytest.raises(InvalidTaskInput) as at_call:
        task.delay(*args, **kwargs)
    assert fragment.lower() in str(at_call.value).lower()
    # Sent by name, past the caller's checks: the worker refuses it the same way.
    result = celery_app.send_task(task.name, args=args, kwargs=kwargs)
    started = time.monotonic()
    with pytest.raises(InvalidTaskInput) as info:
        result.get(timeout=30)
    assert time.monotonic() - started < 10
    assert str(info.value) == str(at_call.value)
    assert result.state == "FAILURE"
    stats = sandbox.stats()  # the worker's one balance call at start, nothing else
    assert (stats["requests"], stats["balance_calls"]) == (1, 1)
    # The worker keeps serving.
    ok = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/after").get(timeout=60)
    assert ok["solution"]


def test_one_worker_process_holds_fifty_solves_in_flight(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(threads=60, latency={"recaptcha_v2": 60.0})  # 3 s at 0.05
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="60"), concurrency=1)
    results = [solve_recaptcha_v2.delay(V2_KEY, f"https://e.com/{i}") for i in range(60)]
    wait_until(lambda: sandbox.stats()["in_flight"] >= 50, timeout=30, what="50 in flight")
    assert all(r.get(timeout=60)["solution"] for r in results)
    assert sandbox.stats()["max_in_flight"] >= 50


def test_a_worker_killed_mid_solve_loses_nothing_and_submits_nothing_twice(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(threads=20, latency={"recaptcha_v2": 60.0})  # 3 s at 0.05
    env = worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="20")
    victim = worker_factory(env, name="victim@127.0.0.1")
    results = [solve_recaptcha_v2.delay(V2_KEY, f"https://e.com/k/{i}") for i in range(30)]
    wait_until(lambda: sandbox.stats()["in_flight"] >= 15, timeout=30, what="solves in flight")
    # Every request admitted (acknowledged): what is tested is resuming solves in flight.
    # A message the killed worker had reserved but not yet run would come back only
    # after the broker's visibility timeout (docs/RELIABILITY.md).
    state = celery_app.backend.client
    wait_until(lambda: len(state.keys("ct:job:*")) == 30, timeout=30, what="30 admissions")

    def submitted() -> int:
        return sum(1 for key in state.keys("ct:job:*") if state.hget(key, "captcha_id"))

    # The whole budget submitted and recorded: a kill during an in.php call would be
    # SubmitUncertain by design (never resent), which is not what this test is about.
    wait_until(lambda: submitted() >= 20, timeout=30, what="20 captchas submitted")
    os.killpg(victim.proc.pid, signal.SIGKILL)  # the worker and its pool, mid-solve
    victim.proc.wait(timeout=10)
    worker_factory(env, name="survivor@127.0.0.1")
    tokens = [r.get(timeout=120)["solution"] for r in results]
    assert len(set(tokens)) == 30
    stats = sandbox.stats()
    assert stats["duplicates"] == 0
    assert stats["submitted"] == 30


@pytest.mark.long
def test_a_deployed_stop_lets_the_engine_finish_its_calls(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    # As deployed: SIGTERM with REMAP_SIGTERM=SIGQUIT, a soft then cold shutdown. The
    # engine must stop cleanly (its calls finished, no claim left far ahead), not die
    # with the process; another worker then finishes every solve, none sent twice.
    sandbox = sandbox_factory(threads=20, latency={"recaptcha_v2": 60.0})  # 3 s at 0.05
    env = worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="20", REMAP_SIGTERM="SIGQUIT")
    stopping = worker_factory(env, name="stopping@127.0.0.1")
    results = [solve_recaptcha_v2.delay(V2_KEY, f"https://e.com/stop/{i}") for i in range(10)]
    state = celery_app.backend.client
    wait_until(lambda: sandbox.stats()["submitted"] == 10, timeout=30, what="10 submits")
    os.killpg(stopping.proc.pid, signal.SIGTERM)
    stopping.proc.wait(timeout=60)
    assert "solve engine stopped" in stopping.log()
    # Polls are due within a poll interval or so, not claimed for a dead engine's calls.
    due = state.zrange("ct:solve:due", 0, -1, withscores=True)
    assert all(score < time.time() + 5 for _, score in due), due
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="20"), name="next@127.0.0.1")
    assert all(r.get(timeout=60)["solution"] for r in results)
    assert sandbox.stats()["submitted"] == 10 and sandbox.stats()["duplicates"] == 0


def test_report_solution_reports_the_captcha_behind_a_task(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(worker_env(sandbox.url))
    solved = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/report")
    solved.get(timeout=60)
    reply = report_solution.delay(solved.id, correct=False).get(timeout=30)
    assert reply == {"task_id": solved.id, "captcha_id": reply["captcha_id"], "reported": "bad"}
    assert sandbox.stats()["reports_bad"] == 1
