"""The results collector behind `captcha-tasks watch`, fed plain event dicts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from captcha_tasks.errors import CaptchaUnsolvable, InvalidTaskInput, SolveTimeout
from captcha_tasks.monitor.watch import ResultsCollector, error_code, render, task_type
from tests.support.clock import ManualClock

TOKEN = "03AFcWeA-secret-token-never-shown"


def received(task_id: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "task-received",
        "uuid": task_id,
        "name": name,
        "hostname": "w1@h",
        "args": f"('{TOKEN}',)",
        "kwargs": "{}",
        "timestamp": 999.0,
        **extra,
    }


def succeeded(task_id: str, result: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    shown = (
        {"source": "api", "type": "recaptcha_v2", "solve_seconds": 1.5}
        if result is None
        else result
    )
    return {
        "type": "task-succeeded",
        "uuid": task_id,
        "result": repr(shown),
        "runtime": 1.5,
        "hostname": "w1@h",
        "timestamp": 1_000.25,
        **extra,
    }


def failed(task_id: str, exc: BaseException | str, **extra: Any) -> dict[str, Any]:
    text = exc if isinstance(exc, str) else repr(exc)
    return {
        "type": "task-failed",
        "uuid": task_id,
        "exception": text,
        "traceback": "",
        "hostname": "w1@h",
        "timestamp": 1_000.5,
        **extra,
    }


def test_task_types_come_from_task_names() -> None:
    assert task_type("captcha_tasks.solve_recaptcha_v2") == "recaptcha_v2"
    assert task_type("captcha_tasks.solve_image") == "image"
    assert task_type("captcha_tasks.fetch_page") == "fetch_page"
    assert task_type("myapp.orders") == "orders"
    assert task_type("solve_") == "solve_"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (repr(CaptchaUnsolvable("ERROR_CAPTCHA_UNSOLVABLE: gave up")), "ERROR_CAPTCHA_UNSOLVABLE"),
        (repr(InvalidTaskInput("solve_image: image is empty")), "INVALID_INPUT"),
        (repr(SolveTimeout("no answer within 180 s")), "TIMEOUT"),
        ("RuntimeError('ERROR_ZERO_BALANCE: no funds')", "ERROR_ZERO_BALANCE"),
        ("Exception('ERROR_WRONG_USER_KEY')", "ERROR_WRONG_USER_KEY"),
        ("WorkerLostError('Worker exited prematurely: signal 9 (SIGKILL)')", "WorkerLostError"),
        ("celery.exceptions.TimeLimitExceeded(60.0)", "TimeLimitExceeded"),
        ("ValueError('URL is bad')", "ValueError"),
        ("", "UNKNOWN"),
    ],
)
def test_error_codes_are_read_from_exception_reprs(text: str, code: str) -> None:
    assert error_code(text) == code


def test_counts_by_type_code_and_source() -> None:
    clock = ManualClock(1_000.0)
    c = ResultsCollector(clock=clock)
    c.feed(received("a", "captcha_tasks.solve_recaptcha_v2"))
    c.feed(received("b", "captcha_tasks.solve_recaptcha_v2"))
    c.feed(received("c", "captcha_tasks.solve_image"))
    c.feed(received("d", "captcha_tasks.fetch_page"))
    c.feed(received("e", "captcha_tasks.solve_turnstile"))
    assert c.in_progress == 5
    c.feed(succeeded("a"))
    c.feed(succeeded("b", {"solution": TOKEN, "source": "pool", "type": "recaptcha_v2"}))
    c.feed(failed("c", InvalidTaskInput("solve_image: image is empty")))
    c.feed(succeeded("d", {"status": 200, "url": "https://e.com", "solved": False, "source": None}))
    c.feed(failed("e", CaptchaUnsolvable("ERROR_CAPTCHA_UNSOLVABLE: x")))
    assert (c.solved, c.failed, c.in_progress) == (3, 2, 0)
    snap = c.snapshot()
    assert snap["by_type"] == {
        "fetch_page": {"solved": 1, "failed": 0, "avg_runtime_s": 1.5},
        "image": {"solved": 0, "failed": 1, "avg_runtime_s": None},
        "recaptcha_v2": {"solved": 2, "failed": 0, "avg_runtime_s": 1.5},
        "turnstile": {"solved": 0, "failed": 1, "avg_runtime_s": None},
    }
    assert snap["by_code"] == {"INVALID_INPUT": 1, "ERROR_CAPTCHA_UNSOLVABLE": 1}
    assert snap["by_source"] == {"api": 1, "pool": 1, "-": 1}
    assert snap["workers"] == ["w1@h"]


def test_json_line_shape_and_no_secret_in_it() -> None:
    c = ResultsCollector(clock=ManualClock(1_000.0))
    c.feed(
        {
            "type": "task-sent",
            "uuid": "t1",
            "name": "captcha_tasks.solve_recaptcha_v2",
            "args": f"('{TOKEN}',)",
            "hostname": "client@h",
        }
    )
    c.feed({"type": "task-started", "uuid": "t1", "hostname": "w1@h"})
    result = c.feed(succeeded("t1", {"solution": TOKEN, "source": "pool", "type": "recaptcha_v2"}))
    assert result is not None
    line = result.to_json()
    assert "\n" not in line
    assert json.loads(line) == {
        "task_id": "t1",
        "name": "captcha_tasks.solve_recaptcha_v2",
        "type": "recaptcha_v2",
        "state": "SUCCESS",
        "code": None,
        "runtime": 1.5,
        "timestamp": 1_000.25,
        "source": "pool",
        "provider_name": None,
    }
    assert TOKEN not in line
    assert TOKEN not in render(c, title="t")
    assert "client@h" not in c.workers()  # the sender of a task is not a worker

    bad = c.feed(failed("t2", CaptchaUnsolvable(f"ERROR_CAPTCHA_UNSOLVABLE: {TOKEN}")))
    assert bad is not None
    assert json.loads(bad.to_json()) == {
        "task_id": "t2",
        "name": None,
        "type": "unknown",
        "state": "FAILURE",
        "code": "ERROR_CAPTCHA_UNSOLVABLE",
        "runtime": None,
        "timestamp": 1_000.5,
        "source": None,
        "provider_name": None,
    }
    assert TOKEN not in render(c, title="t")


def test_type_without_a_name_from_the_result_or_the_lookup() -> None:
    looked: list[str] = []

    def lookup(task_id: str) -> str | None:
        looked.append(task_id)
        return {"f1": "hcaptcha", "f2": "Not A Type!"}.get(task_id)

    c = ResultsCollector(clock=ManualClock(1_000.0), type_lookup=lookup)
    # The engine's own event for a solve received before the watch started.
    ok = c.feed(succeeded("s1", {"source": "api", "type": "turnstile", "solve_seconds": 2.0}))
    assert ok is not None and ok.type == "turnstile" and ok.name is None
    assert looked == []
    one = c.feed(failed("f1", SolveTimeout("late")))
    other = c.feed(failed("f2", SolveTimeout("late")))
    assert one is not None and one.type == "hcaptcha"
    assert other is not None and other.type == "unknown"  # never trusts odd values
    assert looked == ["f1", "f2"]


def test_a_task_counts_once_and_retries_are_counted_apart() -> None:
    c = ResultsCollector(clock=ManualClock(1_000.0))
    c.feed(received("r", "captcha_tasks.get_balance"))
    c.feed({"type": "task-retried", "uuid": "r", "exception": "RateLimited('x')"})
    c.feed(received("r", "captcha_tasks.get_balance"))
    assert c.feed(succeeded("r", {"balance": "1.0"})) is not None
    assert c.feed(succeeded("r", {"balance": "1.0"})) is None
    assert (c.solved, c.failed, c.retried, c.in_progress) == (1, 0, 1, 0)
    assert c.snapshot()["by_type"]["get_balance"]["solved"] == 1
    revoked = c.feed({"type": "task-revoked", "uuid": "x", "terminated": False})
    assert revoked is not None and revoked.state == "REVOKED" and revoked.code == "REVOKED"


def test_rate_is_per_minute_over_a_sliding_window() -> None:
    clock = ManualClock(0.0)
    c = ResultsCollector(clock=clock, window=60)
    for second in range(30):  # one result per second for 30 s: 60/min
        clock.now = float(second)
        c.feed(succeeded(f"ok{second}"))
    clock.now = 30.0
    assert c.rate_per_minute() == pytest.approx(60.0)
    # Shorter than the window so far: measured over the time watched.
    assert c.rate_per_minute(ok=False) == 0.0
    for n in range(10):
        c.feed(failed(f"bad{n}", "Exception('ERROR_X')"))
    assert c.rate_per_minute() == pytest.approx(40 * 60 / 30)
    assert c.rate_per_minute(ok=False) == pytest.approx(20.0)
    clock.now = 75.0  # results at t <= 15 left the window: 14 ok + 10 failed remain
    assert c.rate_per_minute() == pytest.approx(24.0)
    assert c.rate_per_minute(ok=True) == pytest.approx(14.0)
    clock.now = 200.0
    assert c.rate_per_minute() == 0.0
    assert c.snapshot()["per_minute"] == 0.0
    assert (c.solved, c.failed) == (30, 10)  # the totals do not slide


def test_workers_alive_from_heartbeats_and_gone_when_offline() -> None:
    clock = ManualClock(0.0)
    c = ResultsCollector(clock=clock)
    c.feed({"type": "worker-heartbeat", "hostname": "w1@h"})
    c.feed({"type": "worker-online", "hostname": "w2@h"})
    assert c.workers() == ["w1@h", "w2@h"]
    c.feed({"type": "worker-offline", "hostname": "w2@h"})
    assert c.workers() == ["w1@h"]
    clock.now = 60.0
    assert c.workers() == []


def test_render_shows_the_counts() -> None:
    clock = ManualClock(0.0)
    c = ResultsCollector(clock=clock)
    c.feed(received("a", "captcha_tasks.solve_recaptcha_v2"))
    c.feed(succeeded("a"))
    c.feed(failed("b", CaptchaUnsolvable("ERROR_CAPTCHA_UNSOLVABLE: x")))
    screen = render(c, title="captcha-tasks watch", now=10.0)
    assert "solved       1" in screen and "failed      1" in screen
    assert "recaptcha_v2" in screen and "ERROR_CAPTCHA_UNSOLVABLE" in screen
    assert "success  50.0 %" in screen


def test_the_provider_that_solved_it_is_shown_by_its_configured_name() -> None:
    c = ResultsCollector(clock=ManualClock(1_000.0))
    c.feed(received("m1", "captcha_tasks.solve_recaptcha_v2"))

    # What the engine's task-succeeded carries: the protocol and the configured name.
    def by(name: str, protocol: str, kind: str = "turnstile") -> dict[str, Any]:
        return {"source": "api", "type": kind, "provider": name, "protocol": protocol}

    main = c.feed(succeeded("m1", by("main", "captchaai", "recaptcha_v2")))
    backup = c.feed(succeeded("b1", by("backup", "capsolver")))
    backup_2 = c.feed(succeeded("b2", by("backup", "capsolver")))
    before = c.feed(succeeded("o1", {"source": "api", "provider": "captchaai"}))  # older worker
    # A 0.2 worker's: ``provider`` the protocol, ``provider_name`` the configured name.
    v02 = {"source": "api", "provider": "capsolver", "provider_name": "backup"}
    backup_3 = c.feed(succeeded("b3", v02))
    assert main is not None and backup is not None and backup_2 is not None and before is not None
    assert backup_3 is not None and backup_3.provider_name == "backup"
    assert json.loads(main.to_json())["provider_name"] == "main"
    assert backup.provider_name == "backup" and before.provider_name is None
    assert c.snapshot()["by_provider"] == {"backup": 3, "main": 1}
    screen = render(c, title="t")
    assert "solved by backup 3   main 1" in screen
    assert f"{main.task_id} api via main 1.50 s" in screen
    assert "o1 api 1.50 s" in screen


def test_no_provider_line_before_any_result_names_one() -> None:
    c = ResultsCollector(clock=ManualClock(1_000.0))
    c.feed(succeeded("p1", {"solution": TOKEN, "source": "pool", "type": "recaptcha_v2"}))
    assert c.snapshot()["by_provider"] == {}
    assert "solved by" not in render(c, title="t")
