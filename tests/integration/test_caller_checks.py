"""Bad calls raise in the caller and send nothing: a real Redis, no worker at all.

Every way in (``.delay()``, ``.apply_async()``, a complete ``.si()`` / ``.s()``, ``aio``)
runs the task's own checks before sending: a refused call raises
:class:`~captcha_tasks.errors.InvalidTaskInput` at once, the broker's queue stays empty
and no write reached Redis (a 5 MB image never travels). A good call still sends exactly
one message. The worker's own checks (for ``send_task`` and other clients) are tested
in test_bad_input_properties.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from captcha_tasks import aio, get_balance, solve_image, solve_recaptcha_v2
from captcha_tasks.errors import ArgumentsMismatch, InvalidTaskInput, TargetNotAllowed
from captcha_tasks.settings import get_settings
from captcha_tasks.worker.page_tasks import fetch_page
from tests.support.workers import ROOT

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PAGE = "https://example.com"
#: The queue every task goes to (no routes: Celery's default queue).
QUEUE = "celery"
#: Redis commands that write (a refused call must have run none of them).
WRITES = ("lpush", "rpush", "set", "setex", "hset", "publish", "eval", "evalsha", "zadd")
FIVE_MB_IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 5_000_000).decode()

#: The issue's five bad inputs: (task, args, kwargs, what the refusal names).
BAD_INPUTS: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any], str]] = {
    "empty sitekey": (solve_recaptcha_v2, ("", PAGE), {}, "RecaptchaV2.sitekey: must not be empty"),
    "javascript url": (
        solve_recaptcha_v2,
        (V2_KEY, "javascript:alert(1)"),
        {},
        "RecaptchaV2.pageurl: must be an http:// or https:// URL",
    ),
    "5 MB image": (
        solve_image,
        (FIVE_MB_IMAGE,),
        {},
        "over the 100 kB limit (CAPTCHA_TASKS_MAX_IMAGE_BYTES=100000)",
    ),
    "unknown keyword": (
        solve_recaptcha_v2,
        (V2_KEY, PAGE),
        {"invisble": True},
        "unknown option(s) invisble (did you mean 'invisible'?)",
    ),
    "int sitekey": (
        solve_recaptcha_v2,
        (12345, PAGE),
        {},
        "RecaptchaV2.sitekey: must be a string, got int",
    ),
}


def _aio(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return asyncio.run(getattr(aio, task.__name__)(*args, timeout=5, **kwargs))


#: The ways a call is made: each either raises or returns what was sent.
WAYS: dict[str, Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = {
    "delay": lambda task, args, kwargs: task.delay(*args, **kwargs),
    "apply_async": lambda task, args, kwargs: task.apply_async(args, kwargs),
    "si": lambda task, args, kwargs: task.si(*args, **kwargs),
    "s": lambda task, args, kwargs: task.s(*args, **kwargs),
    "aio": _aio,
}


def _writes(conn: redis.Redis) -> int:
    stats = conn.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in WRITES)


@pytest.fixture
def broker(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    """The session's Redis, flushed, with no worker: a caller without an API key."""
    for name in ("CAPTCHA_TASKS_API_KEY", "CAPTCHAAI_API_KEY", "CAPTCHA_TASKS_PROVIDERS"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    conn = redis.Redis.from_url(redis_url)
    yield conn
    conn.close()
    get_settings.cache_clear()


@pytest.mark.parametrize("way", sorted(WAYS))
@pytest.mark.parametrize("bad", sorted(BAD_INPUTS))
def test_a_bad_call_raises_at_once_and_nothing_reaches_redis(
    broker: redis.Redis, bad: str, way: str
) -> None:
    task, args, kwargs, named = BAD_INPUTS[bad]
    writes = _writes(broker)
    started = time.monotonic()
    with pytest.raises(InvalidTaskInput) as caught:
        WAYS[way](task, args, kwargs)
    assert time.monotonic() - started < 1.0  # at once: no broker round trip, no retries
    assert named in str(caught.value)
    assert broker.llen(QUEUE) == 0
    assert broker.dbsize() == 0
    assert _writes(broker) == writes  # no LPUSH, nothing else written either


def test_with_no_worker_an_empty_sitekey_raises_in_a_fresh_interpreter(
    broker: redis.Redis, redis_url: str
) -> None:
    """The issue's own check, in a process of its own with only the Redis URL set."""
    code = (
        "from captcha_tasks import solve_recaptcha_v2\n"
        "from captcha_tasks.errors import InvalidTaskInput\n"
        "try:\n"
        "    solve_recaptcha_v2.delay('', 'https://example.com')\n"
        "except InvalidTaskInput as exc:\n"
        "    print('raised', exc.code)\n"
        "else:\n"
        "    print('sent')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "CAPTCHA_TASKS_REDIS_URL": redis_url, "HOME": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "raised INVALID_INPUT"
    assert broker.llen(QUEUE) == 0 and broker.dbsize() == 0


@pytest.mark.parametrize("way", ["delay", "apply_async", "si_delay", "aio_send"])
def test_a_good_call_sends_exactly_one_message(broker: redis.Redis, way: str) -> None:
    send = {
        "delay": lambda: solve_recaptcha_v2.delay(V2_KEY, PAGE, invisible=True),
        "apply_async": lambda: solve_recaptcha_v2.apply_async((V2_KEY, PAGE), {"invisible": True}),
        "si_delay": lambda: solve_recaptcha_v2.si(V2_KEY, PAGE, invisible=True).delay(),
        "aio_send": lambda: aio.send(solve_recaptcha_v2, V2_KEY, PAGE, invisible=True),
    }[way]
    pushes = int(broker.info("commandstats").get("cmdstat_lpush", {}).get("calls", 0))
    result = send()
    assert int(broker.info("commandstats")["cmdstat_lpush"]["calls"]) == pushes + 1
    assert broker.llen(QUEUE) == 1
    message = json.loads(broker.lindex(QUEUE, 0) or b"{}")
    assert message["headers"]["task"] == "captcha_tasks.solve_recaptcha_v2"
    assert message["headers"]["id"] == result.id


def test_a_partial_signature_is_checked_when_it_is_sent(broker: redis.Redis) -> None:
    # Waits for a chain parent's image: nothing to check yet, nothing sent.
    partial = solve_image.s(numeric=1)
    assert broker.llen(QUEUE) == 0
    # Sent with a bad image in place of the parent's result: refused, still nothing sent.
    with pytest.raises(InvalidTaskInput, match=r"Image\.body"):
        partial.delay("@@@")
    # A partial one with an unknown option is refused at once, with the hint.
    with pytest.raises(InvalidTaskInput, match="did you mean 'numeric'"):
        solve_image.s(numerc=1).delay(FIVE_MB_IMAGE[:400])
    assert broker.llen(QUEUE) == 0 and broker.dbsize() == 0


def test_a_call_that_does_not_fit_the_signature_is_a_type_error_and_invalid_input(
    broker: redis.Redis,
) -> None:
    for call in (
        lambda: solve_recaptcha_v2.delay(V2_KEY),
        lambda: solve_recaptcha_v2.si(V2_KEY, PAGE, "extra"),
    ):
        with pytest.raises(TypeError) as caught:
            call()
        assert isinstance(caught.value, ArgumentsMismatch)  # an InvalidTaskInput too
    assert broker.llen(QUEUE) == 0 and broker.dbsize() == 0


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (
            lambda: solve_recaptcha_v2.delay(V2_KEY, PAGE, "c", "d"),
            "solve_recaptcha_v2() takes 2 positional arguments but 4 were given",
        ),
        (
            lambda: solve_recaptcha_v2.si(V2_KEY, PAGE, "c"),
            "solve_recaptcha_v2() takes 2 positional arguments but 3 were given",
        ),
        (
            lambda: get_balance.delay("main", "backup"),
            "get_balance() takes from 0 to 1 positional arguments but 2 were given",
        ),
        (
            lambda: asyncio.run(aio.solve_recaptcha_v2(V2_KEY, PAGE, "c", "d")),  # type: ignore[call-arg]
            "solve_recaptcha_v2() takes 2 positional arguments but 4 were given",
        ),
        (
            # The worker's own check of a message another client sent.
            lambda: solve_recaptcha_v2.before_start("id", (V2_KEY, PAGE, "c"), {}),
            "solve_recaptcha_v2() takes 2 positional arguments but 3 were given",
        ),
    ],
    ids=["delay", "si", "optional", "aio", "worker"],
)
def test_too_many_positional_arguments_are_counted_as_the_caller_passed_them(
    broker: redis.Redis, call: Callable[[], Any], words: str
) -> None:
    with pytest.raises(ArgumentsMismatch) as caught:
        call()
    assert str(caught.value).endswith(f": {words}"), caught.value
    assert broker.llen(QUEUE) == 0 and broker.dbsize() == 0


def test_routing_options_are_checked_in_shape_and_names_left_to_the_worker(
    broker: redis.Redis,
) -> None:
    with pytest.raises(InvalidTaskInput, match="exclude must be a list"):
        solve_recaptcha_v2.delay(V2_KEY, PAGE, exclude="main")
    with pytest.raises(InvalidTaskInput, match="proxy_id must be a proxy pool id"):
        solve_recaptcha_v2.delay(V2_KEY, PAGE, proxy_id=7)
    assert broker.llen(QUEUE) == 0
    # Which providers exist is the worker's configuration: the caller sends the name.
    solve_recaptcha_v2.delay(V2_KEY, PAGE, provider="backup")
    assert broker.llen(QUEUE) == 1


def test_fetch_page_checks_form_and_url_and_the_allowlist_only_where_it_is_set(
    broker: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = [
        (("javascript:alert(1)",), {}, "only http and https"),
        (("https://bob:secret@example.com/",), {}, "credentials in the URL: 'https://bob:***@"),
        (("https://example.com/",), {"form": {"a": 1}}, "form fields must be strings"),
        (("https://example.com/",), {"isolated": "yes"}, "isolated must be true or false"),
    ]
    for args, kwargs, named in refused:
        for way in ("delay", "si", "aio"):
            with pytest.raises(InvalidTaskInput) as caught:
                WAYS[way](fetch_page, args, kwargs)
            assert named in str(caught.value), (way, str(caught.value))
            assert "secret" not in str(caught.value)
    assert broker.llen(QUEUE) == 0 and broker.dbsize() == 0

    # No allowlist in the caller: the worker's decides (the caller looks up no name).
    fetch_page.delay("https://unlisted.invalid/page")
    assert broker.llen(QUEUE) == 1
    # An allowlist in the caller: checked there too.
    broker.delete(QUEUE)
    monkeypatch.setenv("CAPTCHA_TASKS_ALLOWED_DOMAINS", "example.com")
    get_settings.cache_clear()
    with pytest.raises(TargetNotAllowed, match="not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS"):
        fetch_page.delay("https://unlisted.invalid/page")
    assert broker.llen(QUEUE) == 0
    fetch_page.delay("https://www.example.com/page")
    assert broker.llen(QUEUE) == 1
