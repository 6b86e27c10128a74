"""Bad input through a real ``celery worker``: refused with a typed error, nothing lost.

Hypothesis sends a bounded number of calls that are bad by construction (each breaks
one argument of a public task, or the task's signature) through the broker to one
worker, by name (past the checks ``.delay()`` runs in the caller, which must refuse
the same calls with the same error). Each must fail at once with
:class:`~captcha_tasks.errors.InvalidTaskInput` (rebuilt from the result backend)
naming what was wrong; then the sandbox must have seen no provider request at all,
and the worker must still answer ``ping`` and solve a valid captcha.
"""

from __future__ import annotations

import base64
import gc
import math
import time
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from captcha_tasks import (
    fill_token_pool,
    ping,
    report_solution,
    solve_geetest,
    solve_hcaptcha,
    solve_image,
    solve_recaptcha_v2,
    solve_recaptcha_v3,
    solve_turnstile,
)
from captcha_tasks.errors import InvalidTaskInput, TargetNotAllowed
from captcha_tasks.worker.page_tasks import fetch_page
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

#: Few examples (each is a broker round trip), the same ones on every run.
BAD_CALLS = settings(derandomize=True, database=None, max_examples=25, deadline=None)
#: A refused call comes back well within this.
FAILS_WITHIN = 15.0

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
HCAPTCHA_KEY = "a5f74b19-9e45-40e0-b45d-47ff91b7a6c2"
GT = "f1ab2cdefa3456789012345678901234"
CHALLENGE = "12345678abc90123d45678ef90123a456b"
PAGE = "https://example.com/login"
PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()

# -- values that are bad by construction, whatever else is valid ---------------------

#: JSON-encodable values that are never a string.
NOT_TEXT = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([math.nan, math.inf, -math.inf, 10**400, 0.5]),
    st.lists(st.integers() | st.text(max_size=4), max_size=3),
    st.dictionaries(
        st.text(max_size=4), st.none() | st.integers() | st.text(max_size=4), max_size=3
    ),
)
#: Strings no text field accepts: empty, blank, control characters, lone surrogates
#: (JSON carries them, HTTP cannot), far too long.
BAD_TEXT = st.one_of(
    st.sampled_from(["", "   ", "\t\n", "\ud800", "a\udfffb"]),
    st.builds(
        lambda a, c: a + c, st.text("abc_-", max_size=30), st.sampled_from("\x00\x07\n\x7f\x9b")
    ),
    st.sampled_from(["x" * 5000, "é" * 3000]),
)
#: Never a sitekey, gt or challenge of any kind.
BAD_KEYS = st.one_of(NOT_TEXT, BAD_TEXT, st.sampled_from(["short", "has spaces in it 0123456789"]))
BAD_URLS = st.one_of(
    NOT_TEXT,
    BAD_TEXT,
    st.sampled_from(
        ["ftp://example.com/", "javascript:alert(1)", "example.com/login", "http://", "http://[::1"]
    ),
    st.sampled_from(["https://example.com:99999/", "https://example.com/" + "a" * 3000]),
)
#: Neither a bool nor 0/1.
BAD_FLAGS = st.one_of(
    st.none(),
    st.sampled_from([2, -1, 0.5, math.nan, "true", "false", "", [], {}]),
    st.integers(min_value=2),
)
BAD_SCORES = st.one_of(
    st.sampled_from([0, -0.1, 1.5, 7, math.nan, math.inf, -math.inf, 10**400, "0.5", None, []]),
    st.floats(min_value=1.0, exclude_min=True, allow_infinity=False),
)
BAD_HINT_INTS = st.sampled_from([-1, 21, 10**400, math.nan, "3", 1.5, True, []])  # None: unset
#: Option names no task takes.
UNKNOWN_OPTIONS = st.dictionaries(
    st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10).map(lambda n: f"x_{n}"),
    st.none() | st.integers() | st.text(max_size=5),
    min_size=1,
    max_size=2,
)


def _call(task: Any, args: list[Any], kwargs: dict[str, Any], names: str) -> dict[str, Any]:
    return {"task": task, "args": args, "kwargs": kwargs, "names": names}


#: A valid call of each solve task.
VALID_ARGS: dict[Any, list[Any]] = {
    solve_recaptcha_v2: [V2_KEY, PAGE],
    solve_recaptcha_v3: [V2_KEY, PAGE],
    solve_turnstile: [TURNSTILE_KEY, PAGE],
    solve_image: [PNG_B64],
    solve_geetest: [GT, CHALLENGE, PAGE],
    solve_hcaptcha: [HCAPTCHA_KEY, PAGE],
}
OPTIONAL_TEXT = st.one_of(BAD_TEXT, NOT_TEXT.filter(lambda v: v is not None))  # None: unset


def bad_positional(task: Any, index: int, name: str, values: Any) -> Any:
    """Calls of ``task`` whose positional argument ``index`` is one of ``values``."""
    valid = VALID_ARGS[task]
    return values.map(
        lambda v: _call(task, [v if i == index else a for i, a in enumerate(valid)], {}, name)
    )


def bad_option(task: Any, names: list[str], values: Any, args: list[Any] | None = None) -> Any:
    """Calls of ``task`` with one of the options ``names`` set to one of ``values``."""
    valid = VALID_ARGS[task] if args is None else args
    return st.builds(
        lambda name, v: _call(task, valid, {name: v}, name), st.sampled_from(names), values
    )


def unknown_options(task: Any) -> Any:
    return UNKNOWN_OPTIONS.map(
        lambda extra: _call(task, VALID_ARGS[task], extra, next(iter(extra)))
    )


NOT_AN_IMAGE = st.sampled_from(["@@@", "R0lGODlh", base64.b64encode(b"text" * 40).decode()])
POOL_ARGS = ["recaptcha_v2", V2_KEY, PAGE]

#: Each: one bad call, and the word its refusal must name.
BAD_CALLS_STRATEGY = st.one_of(
    bad_positional(solve_recaptcha_v2, 0, "sitekey", BAD_KEYS),
    bad_positional(solve_recaptcha_v2, 1, "pageurl", BAD_URLS),
    bad_option(solve_recaptcha_v2, ["invisible", "enterprise"], BAD_FLAGS),
    bad_option(solve_recaptcha_v2, ["data_s", "cookies", "user_agent"], OPTIONAL_TEXT),
    bad_option(solve_recaptcha_v3, ["min_score"], BAD_SCORES),
    bad_option(solve_recaptcha_v3, ["action"], st.one_of(BAD_TEXT, NOT_TEXT)),
    bad_positional(solve_turnstile, 0, "sitekey", BAD_KEYS),
    bad_option(solve_turnstile, ["action", "cdata"], OPTIONAL_TEXT),
    bad_positional(solve_geetest, 0, "gt", BAD_KEYS),
    bad_positional(solve_geetest, 1, "challenge", BAD_KEYS),
    bad_positional(solve_geetest, 2, "pageurl", BAD_URLS),
    bad_positional(solve_hcaptcha, 0, "sitekey", BAD_KEYS),
    bad_option(solve_hcaptcha, ["proxy_id"], NOT_TEXT.filter(lambda v: v is not None)),
    bad_positional(solve_image, 0, "image", st.one_of(NOT_TEXT, BAD_TEXT, NOT_AN_IMAGE)),
    bad_option(solve_image, ["numeric", "min_len", "max_len"], BAD_HINT_INTS),
    st.sampled_from(sorted(VALID_ARGS, key=lambda t: t.name)).flatmap(unknown_options),
    NOT_TEXT.map(lambda v: _call(report_solution, [v], {}, "task_id")),
    bad_option(report_solution, ["correct"], BAD_FLAGS, args=["a-task-id"]),
    st.one_of(NOT_TEXT, BAD_TEXT, st.sampled_from(["image", "geetest", "RECAPTCHA_V2"])).map(
        lambda v: _call(fill_token_pool, [v, V2_KEY, PAGE], {"target": 1}, "captcha_type")
    ),
    bad_option(
        fill_token_pool,
        ["target"],
        st.sampled_from([-1, 10_001, 1.5, math.nan, "3", []]),
        POOL_ARGS,
    ),
    BAD_URLS.map(lambda v: _call(fill_token_pool, ["hcaptcha", HCAPTCHA_KEY, v], {}, "pageurl")),
    # No CAPTCHA_TASKS_ALLOWED_DOMAINS on the worker: every page, however well formed.
    st.one_of(BAD_URLS, st.just("https://example.com/")).map(
        lambda v: _call(fetch_page, [v], {}, "")
    ),
)

#: How many positional arguments each task takes.
ARITY = {
    solve_recaptcha_v2: {2},
    solve_turnstile: {2},
    solve_image: {1},
    solve_geetest: {3},
    solve_hcaptcha: {2},
    report_solution: {1, 2},
    fill_token_pool: {3},
    fetch_page: {1},
}
#: Messages that do not fit a task's signature: what another client's send_task can
#: deliver (``delay`` checks the signature on the caller's side).
MISFITS = st.builds(
    lambda task, args: (task, args),
    st.sampled_from(sorted(ARITY, key=lambda t: t.name)),
    st.lists(st.none() | st.integers() | st.text("abc", max_size=3), max_size=5),
).filter(lambda pair: len(pair[1]) not in ARITY[pair[0]])


def _outcome(result: Any) -> tuple[str, type[BaseException] | None, tuple[Any, ...], float]:
    """How a call ended, as plain values: the exception ``get()`` raises holds frames
    that hold the AsyncResult, whose __del__ unsubscribes from the result backend (which
    must still be up then, not at the end of the session)."""
    started = time.monotonic()
    try:
        result.get(timeout=FAILS_WITHIN)
    except Exception as exc:
        kind, args = type(exc), exc.args
    else:
        kind, args = None, ()
    return result.state, kind, args, time.monotonic() - started


def _refused(result: Any) -> InvalidTaskInput:
    """The typed error a call failed with (rebuilt from the result backend)."""
    state, kind, args, elapsed = _outcome(result)
    del result
    assert kind is not None and issubclass(kind, InvalidTaskInput), f"{state}: {kind} {args!r:.300}"
    assert state == "FAILURE" and elapsed < FAILS_WITHIN
    error = kind(*args)
    assert error.code in ("INVALID_INPUT", "TARGET_NOT_ALLOWED"), repr(error)
    return error


def test_bad_calls_fail_typed_reach_nothing_and_the_worker_keeps_serving(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(worker_env(sandbox.url))
    seen: list[str] = []

    @BAD_CALLS
    @given(call=BAD_CALLS_STRATEGY)
    # Found by the unit properties; each hung a solve in the engine (UnicodeEncodeError
    # when the surrogate reached the HTTP layer) or failed it with an untyped error.
    @example(call=_call(solve_recaptcha_v2, [V2_KEY, PAGE], {"data_s": "\ud800"}, "data_s"))
    @example(call=_call(solve_recaptcha_v3, [V2_KEY, PAGE], {"min_score": 10**400}, "min_score"))
    @example(call=_call(fill_token_pool, [[], V2_KEY, PAGE], {"target": 1}, "captcha_type"))
    @example(call=_call(report_solution, ["a-task-id"], {"correct": "false"}, "correct"))
    def bad_calls_are_refused(call: dict[str, Any]) -> None:
        task = call["task"]
        # Sent past the caller's checks (as by another client): the worker refuses it.
        error = _refused(celery_app.send_task(task.name, args=call["args"], kwargs=call["kwargs"]))
        if task is fetch_page:
            assert isinstance(error, TargetNotAllowed), repr(error)
        else:
            assert call["names"].lower() in str(error).lower(), (call["names"], str(error))
        seen.append(type(error).__name__)
        if not getattr(task, "check_in_caller", False):
            return
        # .delay() runs the same checks in the caller: the same refusal, nothing sent.
        try:
            sent = task.delay(*call["args"], **call["kwargs"])
        except InvalidTaskInput as at_call:
            assert (type(at_call), str(at_call)) == (type(error), str(error))
        else:
            # Only a well-formed page URL passes a caller that has no allowlist: the
            # worker's allowlist refuses it.
            assert task is fetch_page and type(_refused(sent)) is TargetNotAllowed

    @BAD_CALLS
    @given(misfit=MISFITS)
    @example(misfit=(solve_hcaptcha, [1, 2, 3]))  # TypeError in the worker
    def misfits_are_refused(misfit: tuple[Any, list[Any]]) -> None:
        task, args = misfit
        error = _refused(celery_app.send_task(task.name, args=args))
        assert task.name.rsplit(".", 1)[-1] in str(error), str(error)
        seen.append(type(error).__name__)

    try:
        bad_calls_are_refused()
        misfits_are_refused()
        assert len(seen) >= 30 and set(seen) <= {
            "InvalidTaskInput",
            "ArgumentsMismatch",
            "TargetNotAllowed",
        }

        # Nothing reached the provider: no in.php (and no res.php) request at all but the
        # worker's balance calls at start.
        stats = sandbox.stats()
        assert stats["requests"] == stats["balance_calls"], stats
        assert stats.get("submitted", 0) == 0, stats

        # The worker keeps serving.
        assert ping.delay().get(timeout=30)["pong"] is True
        solved = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/after").get(timeout=60)
        assert solved["solution"] and solved["source"] == "api"
        assert sandbox.stats()["submitted"] == 1
    finally:
        # AsyncResults sit in reference cycles; their __del__ unsubscribes from the
        # result backend, which must be up then (not at the end of the session).
        gc.collect()
