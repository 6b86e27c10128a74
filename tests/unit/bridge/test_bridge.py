"""The NATS bridge's pure parts: job -> solve task mapping, result messages, task ids;
and its Redis bookkeeping of pending results (against the session's redis-server)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import time
from typing import Any

import pytest

from captcha_tasks.bridge.jobs import (
    METHODS,
    Job,
    TaskCall,
    failed,
    jetstream_task_id,
    parse_job,
    solved,
    task_call,
)
from captcha_tasks.bridge.pending import Entry, PendingResults
from captcha_tasks.errors import CaptchaUnsolvable, ConfigurationError, InvalidTaskInput
from tests.support.workers import ROOT

V2 = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PAGE = "https://example.com/page/0"
FUNCAPTCHA_KEY = "69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC"
GEETEST_V4_ID = "e392e1d7fd421dc63325744d5a2b9c73"


def call(**fields: Any) -> TaskCall:
    return task_call(parse_job(json.dumps({"task_id": "t", **fields}).encode()))


def rejected(**fields: Any) -> InvalidTaskInput:
    with pytest.raises(InvalidTaskInput) as info:
        call(**fields)
    return info.value


# -- parse_job ---------------------------------------------------------------------


def test_the_guides_job_parses() -> None:
    data = json.dumps(
        {"task_id": "task_7", "method": "userrecaptcha", "sitekey": V2, "pageurl": PAGE}
    ).encode()
    assert parse_job(data) == Job("task_7", "userrecaptcha", {"sitekey": V2, "pageurl": PAGE})


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'"task"',
        b"{}",
        b'{"task_id": null}',
        b'{"task_id": true}',
        b'{"task_id": ""}',
        b'{"task_id": {"a": 1}}',
        json.dumps({"task_id": "x" * 257}).encode(),
        json.dumps({"task_id": "a\nb"}).encode(),
    ],
)
def test_what_is_not_a_job_is_a_bad_job(data: bytes) -> None:
    with pytest.raises(InvalidTaskInput) as info:
        parse_job(data)
    assert info.value.code == "BAD_JOB"


def test_an_integer_task_id_is_kept_as_it_is() -> None:
    assert parse_job(b'{"task_id": 42, "method": "hcaptcha"}').task_id == 42


# -- task_call ---------------------------------------------------------------------


def test_userrecaptcha_is_a_recaptcha_v2_solve() -> None:
    assert call(method="userrecaptcha", sitekey=V2, pageurl=PAGE) == TaskCall(
        "captcha_tasks.solve_recaptcha_v2", (V2, PAGE), {}
    )
    # in.php's own names and text values work too.
    got = call(
        method="userrecaptcha",
        googlekey=V2,
        pageurl=PAGE,
        invisible="1",
        enterprise=0,
        **{"data-s": "abc", "userAgent": "UA/1"},
    )
    assert got.args == (V2, PAGE)
    assert got.kwargs == {
        "invisible": True,
        "enterprise": False,
        "data_s": "abc",
        "user_agent": "UA/1",
    }


def test_userrecaptcha_version_v3_is_a_recaptcha_v3_solve() -> None:
    got = call(
        method="userrecaptcha",
        version="v3",
        googlekey=V2,
        pageurl=PAGE,
        action="login",
        min_score="0.7",
    )
    assert got == TaskCall(
        "captcha_tasks.solve_recaptcha_v3", (V2, PAGE), {"action": "login", "min_score": 0.7}
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {
                "method": "turnstile",
                "sitekey": "0x4AAAAAAABkMYinukE8nzY",
                "pageurl": PAGE,
                "action": "a",
                "data": "c",
            },
            TaskCall(
                "captcha_tasks.solve_turnstile",
                ("0x4AAAAAAABkMYinukE8nzY", PAGE),
                {"action": "a", "cdata": "c"},
            ),
        ),
        (
            {"method": "base64", "body": "R0lGODlh", "numeric": "1", "phrase": "0", "lang": "en"},
            TaskCall(
                "captcha_tasks.solve_image",
                ("R0lGODlh",),
                {"numeric": 1, "phrase": False, "lang": "en"},
            ),
        ),
        (
            {
                "method": "geetest",
                "gt": "g",
                "challenge": "c",
                "pageurl": PAGE,
                "api_server": "api.geetest.com",
            },
            TaskCall(
                "captcha_tasks.solve_geetest", ("g", "c", PAGE), {"api_server": "api.geetest.com"}
            ),
        ),
        (
            {"method": "hcaptcha", "sitekey": "k", "pageurl": PAGE},
            TaskCall("captcha_tasks.solve_hcaptcha", ("k", PAGE), {}),
        ),
        # The second wave of types, under 2Captcha's in.php names.
        (
            {
                "method": "funcaptcha",
                "publickey": FUNCAPTCHA_KEY,
                "pageurl": PAGE,
                "surl": "https://client-api.arkoselabs.com",
                "data[blob]": "b1",
                "userAgent": "UA",
            },
            TaskCall(
                "captcha_tasks.solve_funcaptcha",
                (FUNCAPTCHA_KEY, PAGE),
                {
                    "surl": "https://client-api.arkoselabs.com",
                    "data_blob": "b1",
                    "user_agent": "UA",
                },
            ),
        ),
        (
            {
                "method": "geetest_v4",
                "captcha_id": GEETEST_V4_ID,
                "pageurl": PAGE,
                "api_server": "gcaptcha4.geetest.com",
            },
            TaskCall(
                "captcha_tasks.solve_geetest_v4",
                (GEETEST_V4_ID, PAGE),
                {"api_server": "gcaptcha4.geetest.com"},
            ),
        ),
        (
            {
                "method": "mt_captcha",
                "sitekey": "MTPublic-KzqLY1cKH",
                "pageurl": PAGE,
                "action": "login",
                "invisible": "1",
            },
            TaskCall(
                "captcha_tasks.solve_mtcaptcha",
                ("MTPublic-KzqLY1cKH", PAGE),
                {"action": "login", "invisible": True},
            ),
        ),
        (
            {
                "method": "prosopo",
                "sitekey": "5EZVvsHMrKCFKp5NYNoTyDjTjetoVo1Z4UNNbTwJf1GfN6Xm",
                "pageurl": PAGE,
            },
            TaskCall(
                "captcha_tasks.solve_prosopo",
                ("5EZVvsHMrKCFKp5NYNoTyDjTjetoVo1Z4UNNbTwJf1GfN6Xm", PAGE),
                {},
            ),
        ),
        (
            {"method": "friendly_captcha", "sitekey": "FCMDESUD3M34857N", "pageurl": PAGE},
            TaskCall("captcha_tasks.solve_friendly_captcha", ("FCMDESUD3M34857N", PAGE), {}),
        ),
        (
            {"method": "tencent", "app_id": "189123456", "pageurl": PAGE},
            TaskCall("captcha_tasks.solve_tencent", ("189123456", PAGE), {}),
        ),
        (
            {
                "method": "binance",
                "sitekey": "login",
                "pageurl": PAGE,
                "validate_id": "cb0bfefa598b4d3a8e3f6a40b5a7e9c1",
                "useragent": "UA",
            },
            TaskCall(
                "captcha_tasks.solve_binance",
                ("login", PAGE, "cb0bfefa598b4d3a8e3f6a40b5a7e9c1"),
                {"user_agent": "UA"},
            ),
        ),
        (
            {
                "method": "yidun",
                "sitekey": "07e2387ab53a4d6f930b8d9a9be71bdf",
                "pageurl": PAGE,
                "yidun_get_lib": "https://cstaticdun.126.net/load.min.js",
                "hct": "1733571234567",
                "useragent": "UA",
            },
            TaskCall(
                "captcha_tasks.solve_yidun",
                ("07e2387ab53a4d6f930b8d9a9be71bdf", PAGE),
                {
                    "script_url": "https://cstaticdun.126.net/load.min.js",
                    "hct": 1733571234567,
                    "user_agent": "UA",
                },
            ),
        ),
        (
            {
                "method": "datadome",
                "captcha_url": "https://geo.captcha-delivery.com/captcha/?t=fe",
                "pageurl": PAGE,
                "userAgent": "UA",
                "proxy_id": "p",
            },
            TaskCall(
                "captcha_tasks.solve_datadome",
                ("https://geo.captcha-delivery.com/captcha/?t=fe", PAGE, "UA"),
                {"proxy_id": "p"},
            ),
        ),
        (
            {
                "method": "amazon_waf",
                "sitekey": "k",
                "iv": "i",
                "context": "c",
                "pageurl": PAGE,
                "challenge_script": "https://x.example/challenge.js",
                "captcha_script": "https://x.example/captcha.js",
            },
            TaskCall(
                "captcha_tasks.solve_aws_waf",
                ("k", "i", "c", PAGE),
                {
                    "challenge_script": "https://x.example/challenge.js",
                    "captcha_script": "https://x.example/captcha.js",
                },
            ),
        ),
        (
            {
                "method": "base64",
                "coordinatescaptcha": "1",
                "body": "R0lGODlh",
                "textinstructions": "click the cats",
            },
            TaskCall(
                "captcha_tasks.solve_coordinates",
                ("R0lGODlh",),
                {"textinstructions": "click the cats"},
            ),
        ),
        (
            {"method": "base64", "coordinatescaptcha": 0, "body": "R0lGODlh"},
            TaskCall("captcha_tasks.solve_image", ("R0lGODlh",), {}),
        ),
        (
            {
                "method": "base64",
                "recaptcha": "1",
                "body": "R0lGODlh",
                "textinstructions": "Select all images with buses",
                "recaptcharows": "4",
                "recaptchacols": "4",
            },
            TaskCall(
                "captcha_tasks.solve_grid",
                ("R0lGODlh", "Select all images with buses"),
                {"rows": 4, "cols": 4},
            ),
        ),
        (
            {
                "method": "turnstile",
                "sitekey": "k",
                "pageurl": PAGE,
                "action": "managed",
                "data": "c",
                "pagedata": "p",
                "userAgent": "UA",
            },
            TaskCall(
                "captcha_tasks.solve_turnstile",
                ("k", PAGE),
                {"action": "managed", "cdata": "c", "pagedata": "p", "user_agent": "UA"},
            ),
        ),
        (
            {
                "method": "userrecaptcha",
                "googlekey": V2,
                "pageurl": PAGE,
                "enterprise": "1",
                "data-s": "s1",
            },
            TaskCall(
                "captcha_tasks.solve_recaptcha_v2", (V2, PAGE), {"enterprise": True, "data_s": "s1"}
            ),
        ),
    ],
)
def test_each_method_maps_to_its_task(fields: dict[str, Any], expected: TaskCall) -> None:
    assert call(**fields) == expected


@pytest.mark.parametrize(
    "fields",
    [
        {
            "method": "userrecaptcha",
            "sitekey": V2,
            "pageurl": PAGE,
            "invisible": "1",
            "enterprise": "true",
            "data_s": "x",
            "cookies": "a=b",
            "user_agent": "UA",
            "proxy_id": "p1",
        },
        {
            "method": "userrecaptcha",
            "version": "v3",
            "sitekey": V2,
            "pageurl": PAGE,
            "action": "a",
            "min_score": "0.5",
            "enterprise": 1,
            "proxy_id": "p1",
        },
        {
            "method": "turnstile",
            "sitekey": "k",
            "pageurl": PAGE,
            "action": "a",
            "cdata": "c",
            "proxy_id": "p",
        },
        {
            "method": "base64",
            "image_b64": "x",
            "numeric": 1,
            "min_len": "2",
            "max_len": 5,
            "phrase": 1,
            "regsense": "1",
            "calc": "0",
            "lang": "en",
            "textinstructions": "t",
        },
        {"method": "geetest", "gt": "g", "challenge": "c", "pageurl": PAGE, "api_server": "h"},
        {"method": "hcaptcha", "sitekey": "k", "pageurl": PAGE, "proxy_id": "p"},
        {
            "method": "turnstile",
            "sitekey": "k",
            "pageurl": PAGE,
            "action": "a",
            "data": "c",
            "pagedata": "p",
            "user_agent": "UA",
            "proxy_id": "p",
        },
        {
            "method": "funcaptcha",
            "publickey": FUNCAPTCHA_KEY,
            "pageurl": PAGE,
            "surl": "h",
            "data_blob": "b",
            "user_agent": "UA",
            "proxy_id": "p",
        },
        {
            "method": "geetest_v4",
            "captcha_id": GEETEST_V4_ID,
            "pageurl": PAGE,
            "api_server": "h",
            "proxy_id": "p",
        },
        {
            "method": "amazon_waf",
            "sitekey": "k",
            "iv": "i",
            "context": "c",
            "pageurl": PAGE,
            "challenge_script": "u",
            "captcha_script": "u",
            "proxy_id": "p",
        },
        {"method": "base64", "coordinatescaptcha": 1, "image_b64": "x", "textinstructions": "t"},
        {"method": "base64", "recaptcha": 1, "body": "x", "textinstructions": "t", "rows": 4},
        {
            "method": "mt_captcha",
            "sitekey": "k",
            "pageurl": PAGE,
            "action": "a",
            "invisible": "1",
            "proxy_id": "p",
        },
        {"method": "prosopo", "sitekey": "k", "pageurl": PAGE, "proxy_id": "p"},
        {"method": "friendly_captcha", "sitekey": "k", "pageurl": PAGE, "proxy_id": "p"},
        {
            "method": "datadome",
            "captcha_url": "u",
            "pageurl": PAGE,
            "user_agent": "UA",
            "datadome_cookie": "datadome=x",
            "proxy_id": "p",
        },
    ],
)
def test_every_mapped_call_fits_its_tasks_signature(fields: dict[str, Any]) -> None:
    from captcha_tasks import app

    # Every task module of the app, as a worker (and the bridge's queue) registers them:
    # the package root imports each only when its name is first read.
    app.loader.import_default_modules()
    mapped = call(**fields)
    parameters = inspect.signature(app.tasks[mapped.task].run).parameters.values()
    required = [
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]
    assert len(mapped.args) == len(required)
    known = {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(mapped.kwargs) <= known


def test_in_php_transport_parameters_are_ignored_and_never_echoed() -> None:
    secret = "0123456789abcdef0123456789abcdef"
    got = call(method="hcaptcha", sitekey="k", pageurl=PAGE, key=secret, json=1, soft_id=7)
    assert got.kwargs == {}
    error = rejected(method="hcaptcha", sitekey="k", pageurl=PAGE, key=secret, colour="red")
    assert secret not in str(error)


def test_an_unknown_method_is_named() -> None:
    error = rejected(method="keycaptcha", sitekey=V2, pageurl=PAGE)
    assert error.code == "UNKNOWN_METHOD"
    assert "keycaptcha" in str(error)
    for known in (
        "userrecaptcha",
        "funcaptcha",
        "geetest_v4",
        "amazon_waf",
        "mt_captcha",
        "prosopo",
        "friendly_captcha",
        "datadome",
        "yidun",
        "binance",
        "tencent",
    ):
        assert known in str(error)  # and the known ones listed
    # The spec's kind names are not in.php method names.
    assert rejected(method="aws_waf", sitekey="k", pageurl=PAGE).code == "UNKNOWN_METHOD"
    assert rejected(method="x" * 500).code == "UNKNOWN_METHOD"
    # The unknown name is cut short: the message is the known list and a short echo.
    echoed = str(rejected(method="x" * 500))
    assert "x" * 41 not in echoed
    assert len(echoed) < len(", ".join(METHODS)) + 100


@pytest.mark.parametrize("method", [None, "", 3, ["userrecaptcha"]])
def test_a_missing_method_is_a_bad_job(method: object) -> None:
    fields = {} if method is None else {"method": method}
    assert rejected(**fields, sitekey=V2, pageurl=PAGE).code == "BAD_JOB"


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"method": "userrecaptcha", "pageurl": PAGE}, "missing googlekey or sitekey"),
        ({"method": "userrecaptcha", "sitekey": V2}, "missing pageurl"),
        ({"method": "userrecaptcha", "sitekey": V2, "googlekey": V2, "pageurl": PAGE}, "not both"),
        (
            {
                "method": "userrecaptcha",
                "sitekey": V2,
                "pageurl": PAGE,
                "data_s": "a",
                "data-s": "b",
            },
            "data_s given twice",
        ),
        (
            {"method": "userrecaptcha", "sitekey": V2, "pageurl": PAGE, "colour": "red", "size": 3},
            "unknown parameter(s) colour, size",
        ),
        (
            {
                "method": "userrecaptcha",
                "version": "v3",
                "sitekey": V2,
                "pageurl": PAGE,
                "invisible": 1,
            },
            "invisible",
        ),
        ({"method": "userrecaptcha", "version": "v4", "sitekey": V2, "pageurl": PAGE}, "version"),
        ({"method": "base64"}, "missing body or image_b64"),
        ({"method": "geetest", "gt": "g", "pageurl": PAGE}, "missing challenge"),
        ({"method": "amazon_waf", "sitekey": "k", "context": "c", "pageurl": PAGE}, "missing iv"),
        ({"method": "funcaptcha", "pageurl": PAGE, "sitekey": FUNCAPTCHA_KEY}, "missing publickey"),
        ({"method": "geetest_v4", "gt": GEETEST_V4_ID, "pageurl": PAGE}, "missing captcha_id"),
        ({"method": "mt_captcha", "pageurl": PAGE}, "missing sitekey"),
        ({"method": "prosopo", "sitekey": "k"}, "missing pageurl"),
        ({"method": "friendly_captcha", "pageurl": PAGE}, "missing sitekey"),
        ({"method": "datadome", "captcha_url": "u", "pageurl": PAGE}, "missing userAgent"),
        (
            {"method": "base64", "coordinatescaptcha": "2", "body": "x"},
            "coordinatescaptcha must be 0 or 1",
        ),
        ({"method": "base64", "recaptcha": "1", "body": "x"}, "missing textinstructions"),
        (
            {"method": "base64", "recaptcha": "2", "body": "x", "textinstructions": "t"},
            "recaptcha must be 0 or 1",
        ),
        (
            {"method": "base64", "recaptcha": "1", "coordinatescaptcha": "1", "body": "x"},
            "recaptcha=1 and coordinatescaptcha=1 together",
        ),
        # An image-to-text hint means nothing to a coordinates captcha.
        (
            {"method": "base64", "coordinatescaptcha": "1", "body": "x", "numeric": "1"},
            "unknown parameter(s) numeric",
        ),
        (
            {
                "method": "funcaptcha",
                "publickey": FUNCAPTCHA_KEY,
                "pageurl": PAGE,
                "data[blob]": "a",
                "data_blob": "b",
            },
            "data_blob given twice",
        ),
    ],
)
def test_missing_and_unknown_parameters_are_invalid_input(
    fields: dict[str, Any], fragment: str
) -> None:
    error = rejected(**fields)
    assert error.code == "INVALID_INPUT"
    assert fragment in str(error)


def test_values_that_do_not_convert_are_left_for_the_task_to_refuse() -> None:
    got = call(
        method="userrecaptcha",
        version="v3",
        sitekey=V2,
        pageurl=PAGE,
        min_score="high",
        enterprise="maybe",
    )
    assert got.kwargs == {"min_score": "high", "enterprise": "maybe"}
    got = call(method="base64", body="x", numeric="-1", phrase=2)
    assert got.kwargs == {"numeric": "-1", "phrase": 2}


# -- ids and messages --------------------------------------------------------------


def test_a_jetstream_message_always_gets_the_same_task_id() -> None:
    first = jetstream_task_id("CAPTCHA", 7, "2026-01-01T00:00:00.123456+00:00")
    assert first == jetstream_task_id("CAPTCHA", 7, "2026-01-01T00:00:00.123456+00:00")
    others = {
        jetstream_task_id("CAPTCHA", 8, "2026-01-01T00:00:00.123456+00:00"),
        jetstream_task_id("OTHER", 7, "2026-01-01T00:00:00.123456+00:00"),
        # The same sequence number in a stream created again later.
        jetstream_task_id("CAPTCHA", 7, "2026-02-01T00:00:00+00:00"),
    }
    assert first not in others
    assert len(others) == 3


def test_result_messages() -> None:
    assert solved("task_1", {"solution": "03AF", "type": "recaptcha_v2"}, "cid") == {
        "task_id": "task_1",
        "solution": "03AF",
        "celery_task_id": "cid",
    }
    # A challenge-mode Turnstile's token works only with the browser it names.
    challenge = {"solution": "0.tok", "type": "turnstile", "user_agent": "Mozilla/5.0 X"}
    assert solved(7, challenge, "cid") == {
        "task_id": 7,
        "solution": "0.tok",
        "celery_task_id": "cid",
        "user_agent": "Mozilla/5.0 X",
    }
    # Which configured provider solved it; a pooled token's result names none.
    named = {
        "solution": "03AF",
        "type": "recaptcha_v2",
        "provider": "backup",
        "protocol": "captchaai",
        "cost": "0.003",
    }
    assert solved("task_3", named, "cid") == {
        "task_id": "task_3",
        "solution": "03AF",
        "celery_task_id": "cid",
        "provider_name": "backup",
    }
    assert "provider_name" not in solved(
        9, {"solution": "t", "provider": None, "protocol": None}, "c"
    )
    # A 0.2 worker's result: ``provider`` the protocol, ``provider_name`` the name.
    v02 = {"solution": "t", "provider": "captchaai", "provider_name": "backup"}
    assert solved(9, v02, "c")["provider_name"] == "backup"
    points = [{"x": 38, "y": 90}]
    assert solved(8, {"solution": points, "type": "coordinates"}, "c")["solution"] == points
    message = failed("task_2", CaptchaUnsolvable("the workers gave up"), "cid")
    assert message == {
        "task_id": "task_2",
        "error": "ERROR_CAPTCHA_UNSOLVABLE: the workers gave up",
        "code": "ERROR_CAPTCHA_UNSOLVABLE",
        "celery_task_id": "cid",
    }
    assert failed(None, "REVOKED: gone") == {
        "task_id": None,
        "error": "REVOKED: gone",
        "code": "REVOKED",
    }
    assert failed("t", RuntimeError("boom"))["code"] == "RuntimeError"


def test_error_messages_mask_secrets_and_stay_short(settings_env: Any) -> None:
    secret = "0123456789abcdef0123456789abcdef"
    settings_env(CAPTCHAAI_API_KEY=secret)
    message = failed("t", InvalidTaskInput(f"bad {secret} at https://e.com/?sid=123 " + "x" * 900))
    assert secret not in message["error"]
    assert "sid=123" not in message["error"]
    assert len(message["error"]) <= 500
    assert message["error"].startswith("INVALID_INPUT: bad ***")


# -- the lazy import of nats-py ----------------------------------------------------


def test_the_package_and_the_cli_work_without_the_nats_extra() -> None:
    code = (
        "import sys; sys.modules['nats'] = None\n"  # as if nats-py were not installed
        "import captcha_tasks, captcha_tasks.cli.main, captcha_tasks.bridge.nats_bridge as b\n"
        "from captcha_tasks.errors import ConfigurationError\n"
        "try:\n    b.load_nats()\nexcept ConfigurationError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "pip install 'captcha_tasks[nats]'" in out.stdout
    cli = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['nats'] = None\n"
            "from captcha_tasks.cli.main import run\n"
            "sys.argv = ['captcha-tasks', 'bridge', 'nats', '--url', 'nats://127.0.0.1:1']\n"
            "run()",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 2
    assert "configuration error" in cli.stderr
    assert "captcha_tasks[nats]" in cli.stderr
    assert "Traceback" not in cli.stderr


def test_load_nats_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from captcha_tasks.bridge.nats_bridge import load_nats

    monkeypatch.setitem(sys.modules, "nats", None)
    with pytest.raises(ConfigurationError, match=r"captcha_tasks\[nats\]"):
        load_nats()


# -- pending results in Redis ------------------------------------------------------


@pytest.fixture
def store(redis_url: str) -> PendingResults:
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    return PendingResults(client, "ct:", "captcha-workers", ttl=60)


def test_a_pending_result_is_claimed_by_one_bridge_once(store: PendingResults) -> None:
    entry = Entry("task_1", "captcha.results", time.time() + 30)
    assert store.track("c1", entry)
    assert store.track("c2", Entry(7, "captcha.results", time.time() + 30))
    entries = store.entries()
    assert set(entries) == {"c1", "c2"}
    assert entries["c1"] == entry
    assert entries["c2"].task_id == 7
    assert 0 < store.client.ttl(store.key) <= 60
    assert store.claim(["c1", "unknown"]) == {"c1"}
    assert store.claim(["c1"]) == set()  # another bridge gets nothing
    assert store.is_published("c1")
    assert set(store.entries()) == {"c2"}


def test_a_job_whose_result_went_out_is_not_tracked_again(store: PendingResults) -> None:
    entry = Entry("task_1", "captcha.results", time.time() + 30)
    assert store.track("c1", entry)
    assert store.claim(["c1"]) == {"c1"}
    assert not store.track("c1", entry)  # the redelivered job of a published result
    assert store.entries() == {}


def test_a_released_result_is_pending_again(store: PendingResults) -> None:
    entry = Entry("task_1", "captcha.results", time.time() + 30)
    store.track("c1", entry)
    store.claim(["c1"])
    store.release("c1", entry)
    assert store.entries() == {"c1": entry}
    assert not store.is_published("c1")


def test_unreadable_entries_are_skipped(store: PendingResults) -> None:
    store.client.hset(store.key, mapping={"bad": "{", "worse": '{"task_id": 1}'})
    assert store.entries() == {}


def test_the_queue_reads_ended_tasks_only(celery_app: Any) -> None:
    from captcha_tasks.worker.bridge_queue import CeleryTaskQueue

    queue = CeleryTaskQueue(celery_app)
    backend = celery_app.backend
    backend.mark_as_done("done-1", {"solution": "tok"})
    backend.mark_as_failure("failed-1", InvalidTaskInput("RecaptchaV2.sitekey: bad"))
    backend.mark_as_started("started-1")
    backend.mark_as_revoked("revoked-1")
    got = queue.ended(["done-1", "failed-1", "started-1", "revoked-1", "unknown"])
    assert set(got) == {"done-1", "failed-1", "revoked-1"}
    assert got["done-1"].result == {"solution": "tok"}
    error = got["failed-1"].error
    assert isinstance(error, InvalidTaskInput)
    assert failed("t", error)["code"] == "INVALID_INPUT"
    assert failed("t", got["revoked-1"].error or "")["code"] == "REVOKED"
    assert queue.ended([]) == {}
    assert queue.started("started-1") and not queue.started("unknown")


def _subscribes(celery_app: Any) -> int:
    """SUBSCRIBE commands the result backend's Redis has run so far."""
    import redis

    with redis.Redis.from_url(celery_app.conf.result_backend) as client:
        stats = client.info("commandstats").get("cmdstat_subscribe", {})
    return int(stats.get("calls", 0))


def test_the_queue_sends_without_subscribing_to_results(celery_app: Any) -> None:
    """The bridge reads results with MGET: a result channel subscribed per task sent would
    only pile up replies unread. Celery's own switch (``denied_join_result``) avoids it;
    if Celery changes it, this fails."""
    from captcha_tasks.worker.bridge_queue import CeleryTaskQueue

    before = _subscribes(celery_app)
    call = TaskCall("captcha_tasks.ping", (), {})
    for n in range(3):
        CeleryTaskQueue(celery_app).send(f"bridge-sent-{n}", call)
    assert _subscribes(celery_app) == before
    # What it avoids: a plain send subscribes (so the check above can fail).
    celery_app.tasks["captcha_tasks.ping"].apply_async(task_id="plain-sent-1")
    assert _subscribes(celery_app) > before
