"""JsonTaskClient against an in-process JSON task API double, per dialect: what a
createTask sends, how answers and errors are read, reports, balance, and the factory."""

from __future__ import annotations

import base64
import decimal
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks.errors import (
    BadImage,
    BadRequest,
    CaptchaUnsolvable,
    ClientError,
    ConfigurationError,
    InsufficientFunds,
    InvalidApiKey,
    InvalidTaskInput,
    NoSlotAvailable,
    PermanentSolverError,
    ProviderUnavailable,
    ProxyRejected,
    RateLimited,
    SolverError,
    SolverNetworkError,
    SubmitUncertain,
    TransientSolverError,
)
from captcha_tasks.provider import (
    Answer,
    Captcha,
    GeeTest,
    HCaptcha,
    Image,
    JsonTaskClient,
    Proxy,
    RecaptchaV2,
    RecaptchaV3,
    SolverClient,
    Turnstile,
    make_provider,
)
from captcha_tasks.provider.offers import WITHDRAWN
from captcha_tasks.settings import Settings
from tests.support.json_double import JsonDouble, JsonReply

SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
PAGE = "https://example.com/login?next=/"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
HCAPTCHA_KEY = "10000000-ffff-ffff-ffff-000000000001"
GT = "022397c99c9f646f6477822485f30404"
CHALLENGE = "a66f31a53a1a39f8ff1b3b7d3ab82d09"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2
PNG_B64 = base64.b64encode(PNG).decode()
KEY = "0123456789abcdef0123456789abcdef"
CAPSOLVER_KEY = "CAP-0123456789ABCDEF0123456789ABCDEF"
UUID = "5f1b8c3a-2d4e-4f60-9a7b-0c1d2e3f4a5b"
DIALECTS = ("2captcha-v2", "anticaptcha", "capsolver", "capmonster")

V2 = RecaptchaV2(SITEKEY, PAGE)
V3 = RecaptchaV3(SITEKEY, PAGE, action="login", min_score=0.7)
TS = Turnstile(TURNSTILE_KEY, PAGE, action="act", cdata="cd")
HC = HCaptcha(HCAPTCHA_KEY, PAGE)
IMG = Image(PNG, numeric=1, phrase=True)
GEE = GeeTest(GT, CHALLENGE, PAGE, api_server="api.geetest.com")
PROXY = Proxy("203.0.113.5", 8080, "HTTP", "user", "s3cret-pw")

SITE = {"websiteURL": PAGE, "websiteKey": SITEKEY}
TS_SITE = {"websiteURL": PAGE, "websiteKey": TURNSTILE_KEY}
GEE_FIELDS = {
    "websiteURL": PAGE,
    "gt": GT,
    "challenge": CHALLENGE,
    "geetestApiServerSubdomain": "api.geetest.com",
}
V3_FIELDS = {**SITE, "minScore": 0.7, "pageAction": "login"}

#: The exact ``task`` each dialect must receive (None: not offered, nothing sent).
EXPECTED_TASKS: dict[str, dict[str, dict[str, Any] | None]] = {
    "2captcha-v2": {
        "v2": {"type": "RecaptchaV2TaskProxyless", **SITE},
        "v3": {"type": "RecaptchaV3TaskProxyless", **V3_FIELDS},
        "turnstile": {"type": "TurnstileTaskProxyless", **TS_SITE, "action": "act", "data": "cd"},
        "hcaptcha": {
            "type": "HCaptchaTaskProxyless",
            "websiteURL": PAGE,
            "websiteKey": HCAPTCHA_KEY,
        },
        "image": {"type": "ImageToTextTask", "body": PNG_B64, "numeric": 1, "phrase": True},
        "geetest": {"type": "GeeTestTaskProxyless", **GEE_FIELDS},
    },
    "anticaptcha": {
        "v2": {"type": "RecaptchaV2TaskProxyless", **SITE},
        "v3": {"type": "RecaptchaV3TaskProxyless", **V3_FIELDS},
        "turnstile": {"type": "TurnstileTaskProxyless", **TS_SITE, "action": "act", "cData": "cd"},
        "hcaptcha": {
            "type": "HCaptchaTaskProxyless",
            "websiteURL": PAGE,
            "websiteKey": HCAPTCHA_KEY,
        },
        "image": {"type": "ImageToTextTask", "body": PNG_B64, "numeric": 1, "phrase": True},
        "geetest": {"type": "GeeTestTaskProxyless", **GEE_FIELDS},
    },
    "capsolver": {
        "v2": {"type": "ReCaptchaV2TaskProxyLess", **SITE},
        "v3": {"type": "ReCaptchaV3TaskProxyLess", **SITE, "pageAction": "login"},
        "turnstile": {
            "type": "AntiTurnstileTaskProxyLess",
            **TS_SITE,
            "metadata": {"action": "act", "cdata": "cd"},
        },
        "hcaptcha": None,
        "image": {"type": "ImageToTextTask", "body": PNG_B64},
        "geetest": {"type": "GeeTestTaskProxyLess", **GEE_FIELDS},
    },
    "capmonster": {
        "v2": {"type": "RecaptchaV2Task", **SITE},
        "v3": {"type": "RecaptchaV3TaskProxyless", **V3_FIELDS},
        "turnstile": {"type": "TurnstileTask", **TS_SITE, "pageAction": "act", "data": "cd"},
        "hcaptcha": {"type": "HCaptchaTask", "websiteURL": PAGE, "websiteKey": HCAPTCHA_KEY},
        "image": {"type": "ImageToTextTask", "body": PNG_B64, "numeric": True},
        "geetest": {"type": "GeeTestTask", **GEE_FIELDS},
    },
}
CAPTCHAS: dict[str, Captcha] = {
    "v2": V2,
    "v3": V3,
    "turnstile": TS,
    "hcaptcha": HC,
    "image": IMG,
    "geetest": GEE,
}


@pytest.fixture
def double() -> Iterator[JsonDouble]:
    with JsonDouble() as server:
        yield server


def client_for(double: JsonDouble, provider: str, **options: Any) -> JsonTaskClient:
    key = CAPSOLVER_KEY if provider == "capsolver" else KEY
    return JsonTaskClient(double.base_url, key, provider=provider, **options)  # type: ignore[arg-type]


# -- createTask ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(CAPTCHAS))
@pytest.mark.parametrize("provider", DIALECTS)
def test_create_task_body(double: JsonDouble, provider: str, kind: str) -> None:
    client = client_for(double, provider)
    expected = EXPECTED_TASKS[provider][kind]
    if expected is None or kind in WITHDRAWN.get(provider, {}):  # type: ignore[call-overload]
        with pytest.raises(InvalidTaskInput, match=provider):
            client.submit(CAPTCHAS[kind])
        assert double.requests == []
        return
    task_id = client.submit(CAPTCHAS[kind])
    assert task_id == "74372499131"  # an int beyond 2^31, handed out as a string
    (body,) = double.sent("/createTask")
    assert body == {"clientKey": client._api_key, "task": expected}
    assert double.requests[0].content_type.startswith("application/json")


@pytest.mark.parametrize(
    ("provider", "task_type", "proxy_fields"),
    [
        ("2captcha-v2", "RecaptchaV2Task", None),
        ("anticaptcha", "RecaptchaV2Task", None),
        ("capmonster", "RecaptchaV2Task", None),
        ("capsolver", "ReCaptchaV2Task", {"proxy": "http:203.0.113.5:8080:user:s3cret-pw"}),
    ],
)
def test_proxy_encoding(
    double: JsonDouble, provider: str, task_type: str, proxy_fields: dict[str, Any] | None
) -> None:
    fields = proxy_fields or {
        "proxyType": "http",
        "proxyAddress": "203.0.113.5",
        "proxyPort": 8080,
        "proxyLogin": "user",
        "proxyPassword": "s3cret-pw",
    }
    client_for(double, provider).submit(V2, proxy=PROXY)
    assert double.sent("/createTask")[0]["task"] == {"type": task_type, **SITE, **fields}


def test_recaptcha_v2_options(double: JsonDouble) -> None:
    full = RecaptchaV2(
        SITEKEY, PAGE, invisible=True, data_s="abc", cookies="a=1; b:2", user_agent="UA"
    )
    client_for(double, "anticaptcha").submit(full)
    client_for(double, "capsolver").submit(full)
    client_for(double, "2captcha-v2").submit(
        RecaptchaV2(SITEKEY, PAGE, enterprise=True, data_s="s1")
    )
    anti, capsolver, enterprise = (body["task"] for body in double.sent("/createTask"))
    assert anti == {
        "type": "RecaptchaV2TaskProxyless",
        **SITE,
        "isInvisible": True,
        "recaptchaDataSValue": "abc",
        "cookies": "a=1; b:2",
        "userAgent": "UA",
    }
    assert capsolver["cookies"] == [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}]
    assert "userAgent" not in capsolver
    assert enterprise == {
        "type": "RecaptchaV2EnterpriseTaskProxyless",
        **SITE,
        "enterprisePayload": {"s": "s1"},
    }


def test_recaptcha_v3_enterprise(double: JsonDouble) -> None:
    v3e = RecaptchaV3(SITEKEY, PAGE, enterprise=True)
    client_for(double, "anticaptcha").submit(v3e)
    client_for(double, "capsolver").submit(v3e)
    anti, capsolver = (body["task"] for body in double.sent("/createTask"))
    assert anti["type"] == "RecaptchaV3TaskProxyless" and anti["isEnterprise"] is True
    assert capsolver["type"] == "ReCaptchaV3EnterpriseTaskProxyLess"
    assert "isEnterprise" not in capsolver


@pytest.mark.parametrize(
    ("provider", "captcha", "proxy"),
    [
        ("capsolver", HC, None),
        ("capsolver", HC, PROXY),
        ("capsolver", TS, PROXY),
        ("capsolver", GEE, PROXY),
        ("2captcha-v2", V3, PROXY),
        ("anticaptcha", V3, PROXY),
        ("capmonster", V3, PROXY),
    ],
)
def test_type_not_offered_sends_nothing(
    double: JsonDouble, provider: str, captcha: Captcha, proxy: Proxy | None
) -> None:
    refused = f"provider {provider} (does not solve|withdrew)"
    with pytest.raises(InvalidTaskInput, match=refused) as info:
        client_for(double, provider).submit(captcha, proxy=proxy)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert double.requests == []


def test_image_ignores_the_proxy(double: JsonDouble) -> None:
    client_for(double, "2captcha-v2").submit(IMG, proxy=PROXY)
    assert "proxyAddress" not in double.sent("/createTask")[0]["task"]


def test_uuid_task_id(double: JsonDouble) -> None:
    double.script("/createTask", {"errorId": 0, "taskId": UUID, "status": "idle"})
    double.script("/getTaskResult", {"errorId": 0, "taskId": UUID, "status": "idle"})
    client = client_for(double, "capsolver")
    assert client.submit(V2) == UUID
    assert client.get(UUID) is None
    assert double.sent("/getTaskResult")[0] == {"clientKey": CAPSOLVER_KEY, "taskId": UUID}


def test_integer_ids_are_read_back_as_integers(double: JsonDouble) -> None:
    client = client_for(double, "2captcha-v2")
    answer = client.get(client.submit(V2))
    assert answer == Answer("74372499131", "token-74372499131")
    assert double.sent("/getTaskResult")[0]["taskId"] == 74372499131


@pytest.mark.parametrize("task_id", [None, 0, "", "not an id!", True])
def test_accepted_without_usable_id_is_uncertain(double: JsonDouble, task_id: object) -> None:
    double.script("/createTask", {"errorId": 0, "taskId": task_id})
    with pytest.raises(SubmitUncertain):
        client_for(double, "anticaptcha").submit(V2)


# -- getTaskResult ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", DIALECTS)
def test_processing_then_ready(double: JsonDouble, provider: str) -> None:
    double.script(
        "/getTaskResult",
        {"errorId": 0, "status": "processing", "errorCode": None, "errorDescription": None},
        {
            "errorId": 0,
            "status": "ready",
            "cost": "0.00299",
            "solution": {"gRecaptchaResponse": "03AGdBq2", "token": "other", "userAgent": "UA/1"},
        },
    )
    client = client_for(double, provider)
    assert client.get("42") is None
    answer = client.get("42")
    assert answer == Answer("42", "03AGdBq2", cost=decimal.Decimal("0.00299"), user_agent="UA/1")


@pytest.mark.parametrize(("provider", "working"), [("capsolver", True), ("anticaptcha", False)])
def test_idle_is_processing_at_capsolver(double: JsonDouble, provider: str, working: bool) -> None:
    double.script("/getTaskResult", {"errorId": 0, "status": "idle"})
    client = client_for(double, provider)
    if working:
        assert client.get("42") is None
    else:
        with pytest.raises(ProviderUnavailable, match="unexpected answer"):
            client.get("42")


def test_capmonster_not_ready_code_is_processing(double: JsonDouble) -> None:
    double.script("/getTaskResult", {"errorId": 1, "errorCode": "CAPTCHA_NOT_READY"})
    assert client_for(double, "capmonster").get("42") is None


@pytest.mark.parametrize(
    ("solution", "cost", "expected"),
    [
        ({"token": "0.turnstile", "userAgent": "UA"}, 0.0012, "0.turnstile"),
        ({"text": "w93bx"}, "0.000700", "w93bx"),
        (
            {"challenge": CHALLENGE, "validate": "v", "seccode": "v|jordan"},
            None,
            {
                "geetest_challenge": CHALLENGE,
                "geetest_validate": "v",
                "geetest_seccode": "v|jordan",
            },
        ),
        (  # CapSolver sends no seccode
            {"challenge": CHALLENGE, "validate": "w"},
            None,
            {
                "geetest_challenge": CHALLENGE,
                "geetest_validate": "w",
                "geetest_seccode": "w|jordan",
            },
        ),
    ],
)
def test_solution_parsing(
    double: JsonDouble, solution: dict[str, Any], cost: Any, expected: Any
) -> None:
    double.script(
        "/getTaskResult", {"errorId": 0, "status": "ready", "solution": solution, "cost": cost}
    )
    answer = client_for(double, "anticaptcha").get("7")
    assert answer is not None
    assert answer.solution == expected
    assert answer.cost == (None if cost is None else decimal.Decimal(str(cost)))
    assert answer.user_agent == solution.get("userAgent")


def test_capsolver_ready_at_create_is_handed_out_at_first_get(double: JsonDouble) -> None:
    double.script(
        "/createTask",
        {"errorId": 0, "taskId": UUID, "status": "ready", "solution": {"text": "44"}},
    )
    client = client_for(double, "capsolver")
    task_id = client.submit(IMG)
    assert client.get(task_id) == Answer(UUID, "44")
    assert double.sent("/getTaskResult") == []
    client.get(task_id)  # the second read asks the provider
    assert len(double.sent("/getTaskResult")) == 1


@pytest.mark.parametrize("code", [None, "ERROR_CAPTCHA_UNSOLVABLE"])
def test_failed_status_is_unsolvable(double: JsonDouble, code: str | None) -> None:
    double.script("/getTaskResult", {"errorId": 0, "status": "failed", "errorCode": code})
    with pytest.raises(CaptchaUnsolvable):
        client_for(double, "capsolver").get(UUID)


def test_failed_at_create_is_raised_at_first_get(double: JsonDouble) -> None:
    double.script("/createTask", {"errorId": 0, "taskId": UUID, "status": "failed"})
    client = client_for(double, "capsolver")
    assert client.submit(IMG) == UUID
    with pytest.raises(CaptchaUnsolvable):
        client.get(UUID)


@pytest.mark.parametrize("provider", DIALECTS)
def test_http_500_on_a_poll_is_transient(double: JsonDouble, provider: str) -> None:
    double.script(
        "/getTaskResult", JsonReply("Internal Server Error", 500, content_type="text/html")
    )
    with pytest.raises(ProviderUnavailable) as info:
        client_for(double, provider).get("42")
    assert isinstance(info.value, TransientSolverError)
    assert info.value.code == "HTTP_500"


def test_get_many_values_and_raises(double: JsonDouble) -> None:
    double.script(
        "/getTaskResult",
        {"errorId": 0, "status": "processing"},
        {"errorId": 12, "errorCode": "ERROR_CAPTCHA_UNSOLVABLE"},
        {"errorId": 16, "errorCode": "ERROR_NO_SUCH_CAPCHA_ID"},
        {"errorId": 0, "status": "ready", "solution": {"gRecaptchaResponse": "t"}},
    )
    client = client_for(double, "anticaptcha")
    assert client.batch_reads is False
    got = client.get_many(["1", "2", "3", "4"])
    assert got["1"] is None
    assert isinstance(got["2"], CaptchaUnsolvable)
    assert isinstance(got["3"], ClientError)
    assert got["4"] == Answer("4", "t")
    double.script("/getTaskResult", JsonReply("", 503, content_type="text/plain"))
    with pytest.raises(ProviderUnavailable):
        client.get_many(["5"])


# -- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "error", "transient"),
    [
        ("ERROR_NO_SLOT_AVAILABLE", NoSlotAvailable, True),
        ("ERROR_SERVICE_UNAVALIABLE", NoSlotAvailable, True),
        ("ERROR_ZERO_BALANCE", InsufficientFunds, False),
        ("ERROR_KEY_DOES_NOT_EXIST", InvalidApiKey, False),
        ("ERROR_KEY_DENIED_ACCESS", InvalidApiKey, False),
        ("ERROR_CAPTCHA_UNSOLVABLE", CaptchaUnsolvable, False),
        ("ERROR_TOO_MUCH_REQUESTS", RateLimited, True),
        ("ERROR_RATE_LIMIT", RateLimited, True),
        ("ERROR_IP_BLOCKED", RateLimited, True),
        ("ERROR_NO_SUCH_CAPCHA_ID", ClientError, False),
        ("ERROR_TASKID_INVALID", ClientError, False),
        ("ERROR_TASK_NOT_SUPPORTED", BadRequest, False),
        ("ERROR_TOO_BIG_CAPTCHA_FILESIZE", BadImage, False),
        ("ERROR_PROXY_BANNED", ProxyRejected, True),
        ("ERROR_SOMETHING_NEW", ClientError, False),
    ],
)
@pytest.mark.parametrize("provider", DIALECTS)
def test_error_codes(
    double: JsonDouble, provider: str, code: str, error: type[SolverError], transient: bool
) -> None:
    # errorId 1 for everything, as CapMonster and CapSolver send: the code decides.
    answer = {"errorId": 1, "errorCode": code, "errorDescription": "described"}
    double.script("/createTask", answer)
    double.script("/getTaskResult", answer)
    client = client_for(double, provider)
    for call in (lambda: client.submit(V2), lambda: client.get("42")):
        with pytest.raises(error) as info:
            call()
        assert type(info.value) is error
        assert info.value.code == code
        assert isinstance(info.value, TransientSolverError) is transient
        assert "described" in str(info.value)


def test_capsolver_401_is_a_bad_key(double: JsonDouble) -> None:
    double.script(
        "/getBalance",
        JsonReply({"errorId": 1, "errorCode": "ERROR_KEY_DENIED_ACCESS"}, 401),
        JsonReply("", 401, content_type="text/plain"),
    )
    client = client_for(double, "capsolver")
    with pytest.raises(InvalidApiKey) as info:
        client.balance()
    assert info.value.code == "ERROR_KEY_DENIED_ACCESS"
    with pytest.raises(InvalidApiKey) as info:
        client.balance()
    assert info.value.code == "HTTP_401"


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, RateLimited),
        (503, ProviderUnavailable),
        (404, ClientError),
        (502, ProviderUnavailable),
    ],
)
def test_http_status_without_code(
    double: JsonDouble, status: int, error: type[SolverError]
) -> None:
    double.script("/createTask", JsonReply("<html>nope</html>", status, content_type="text/html"))
    with pytest.raises(error) as info:
        client_for(double, "capsolver").submit(V2)
    assert info.value.code == f"HTTP_{status}"


def test_garbage_with_200_is_transient(double: JsonDouble) -> None:
    double.script("/getTaskResult", JsonReply("<html>proxy</html>", content_type="text/html"))
    with pytest.raises(ProviderUnavailable) as info:
        client_for(double, "capmonster").get("1")
    assert info.value.code == "UNRECOGNISED_ANSWER"


def test_timeout_after_sending_a_create_is_uncertain(double: JsonDouble) -> None:
    double.script("/createTask", JsonReply({"errorId": 0, "taskId": 1}, delay=3.0))
    with pytest.raises(SubmitUncertain) as info:
        client_for(double, "capmonster", timeout=0.3).submit(V2)
    assert isinstance(info.value, PermanentSolverError)
    assert len(double.sent("/createTask")) == 1


def test_dropped_create_is_uncertain_and_504_too(double: JsonDouble) -> None:
    double.script("/createTask", JsonReply(drop=True), JsonReply("Gateway Timeout", 504))
    client = client_for(double, "anticaptcha")
    for _ in range(2):
        with pytest.raises(SubmitUncertain):
            client.submit(V2)


def test_timeout_on_a_poll_is_transient(double: JsonDouble) -> None:
    double.script("/getTaskResult", JsonReply({"errorId": 0, "status": "processing"}, delay=3.0))
    with pytest.raises(SolverNetworkError):
        client_for(double, "capmonster", timeout=0.3).get("1")


def test_refused_connection_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = JsonTaskClient(f"http://127.0.0.1:{port}", KEY, provider="anticaptcha", timeout=1)
    with pytest.raises(SolverNetworkError):
        client.submit(V2)


def test_key_never_in_messages_or_repr(double: JsonDouble) -> None:
    echo = {"errorId": 1, "errorCode": "ERROR_KEY_DOES_NOT_EXIST", "errorDescription": f"bad {KEY}"}
    double.script(
        "/createTask", echo, JsonReply(f"<html>{KEY}</html>", 500, content_type="text/html")
    )
    double.script("/getTaskResult", {"errorId": 0, "status": f"weird {KEY}"})
    client = client_for(double, "2captcha-v2")
    errors: list[SolverError] = []
    for call in (lambda: client.submit(V2), lambda: client.submit(V2), lambda: client.get("1")):
        with pytest.raises(SolverError) as info:
            call()
        errors.append(info.value)
    for shown in [repr(client), *(text for e in errors for text in (str(e), repr(e), str(e.args)))]:
        assert KEY not in shown
    assert all(r.key == KEY for r in double.requests)  # only in the JSON bodies


# -- reports and balance ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "captcha_type", "correct", "method"),
    [
        ("2captcha-v2", "recaptcha_v2", False, "reportIncorrect"),
        ("2captcha-v2", "image", True, "reportCorrect"),
        ("anticaptcha", "recaptcha_v2", False, "reportIncorrectRecaptcha"),
        ("anticaptcha", "recaptcha_v3", True, "reportCorrectRecaptcha"),
        ("anticaptcha", "image", False, "reportIncorrectImageCaptcha"),
        ("anticaptcha", "hcaptcha", False, "reportIncorrectHcaptcha"),
        ("anticaptcha", "image", True, None),
        ("anticaptcha", "turnstile", False, None),
        ("capmonster", "turnstile", False, "reportIncorrectTokenCaptcha"),
        ("capmonster", "image", False, "reportIncorrectImageCaptcha"),
        ("capmonster", "recaptcha_v2", True, None),
        ("capmonster", "hcaptcha", False, None),
        ("capmonster", None, False, "reportIncorrectTokenCaptcha"),
    ],
)
def test_report_methods(
    double: JsonDouble, provider: str, captcha_type: Any, correct: bool, method: str | None
) -> None:
    client_for(double, provider).report("74372499131", correct=correct, captcha_type=captcha_type)
    if method is None:
        assert double.requests == []
        return
    (request,) = double.requests
    assert request.path == f"/{method}"
    assert request.body == {"clientKey": KEY, "taskId": 74372499131}


@pytest.mark.parametrize("correct", [False, True])
def test_capsolver_feedback(double: JsonDouble, correct: bool) -> None:
    client_for(double, "capsolver").report(UUID, correct=correct, captcha_type="turnstile")
    assert double.sent("/feedbackTask") == [
        {"clientKey": CAPSOLVER_KEY, "taskId": UUID, "result": {"invalid": not correct}}
    ]


def test_report_error_is_raised(double: JsonDouble) -> None:
    double.script(
        "/reportIncorrectImageCaptcha", {"errorId": 16, "errorCode": "ERROR_NO_SUCH_CAPCHA_ID"}
    )
    with pytest.raises(ClientError):
        client_for(double, "anticaptcha").report("5", correct=False, captcha_type="image")


@pytest.mark.parametrize("balance", [12.3400, "12.3400", 0, {"bad": 1}])
def test_balance(double: JsonDouble, balance: Any) -> None:
    double.script("/getBalance", {"errorId": 0, "balance": balance, "packages": []})
    client = client_for(double, "capsolver")
    if isinstance(balance, dict):
        with pytest.raises(ProviderUnavailable):
            client.balance()
        return
    assert client.balance() == decimal.Decimal(str(balance))
    assert double.sent("/getBalance") == [{"clientKey": CAPSOLVER_KEY}]


# -- construction and the factory ------------------------------------------------------


def test_refuses_classic_provider_and_bad_config() -> None:
    with pytest.raises(ConfigurationError):
        JsonTaskClient("http://127.0.0.1:1", KEY, provider="captchaai")
    with pytest.raises(ConfigurationError):
        JsonTaskClient("ftp://host", KEY, provider="capmonster")
    with pytest.raises(ConfigurationError):
        JsonTaskClient("http://host", "has space", provider="capmonster")


@pytest.mark.parametrize(
    ("provider", "key", "expected"),
    [
        ("captchaai", KEY, SolverClient),
        ("2captcha", KEY, SolverClient),
        ("2captcha-v2", KEY, JsonTaskClient),
        ("anticaptcha", KEY, JsonTaskClient),
        ("capsolver", CAPSOLVER_KEY, JsonTaskClient),
        ("capmonster", KEY, JsonTaskClient),
    ],
)
def test_make_provider(provider: str, key: str, expected: type) -> None:
    settings = Settings.from_env(
        {
            "CAPTCHA_TASKS_PROVIDER": provider,
            "CAPTCHA_TASKS_API_KEY": key,
            "CAPTCHA_TASKS_HTTP_TIMEOUT": "7",
        }
    )
    made = make_provider(settings)
    assert type(made) is expected
    assert made.timeout == 7.0  # type: ignore[attr-defined]
    assert made.provider == provider  # type: ignore[attr-defined]
    assert make_provider(settings, timeout=2.5).timeout == 2.5  # type: ignore[attr-defined]
    assert key not in repr(made)
