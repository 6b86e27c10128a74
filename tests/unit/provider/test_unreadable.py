"""Answers that are not the protocol, on both protocols (``provider/unreadable.py``).

Every garbage kind the sandbox serves (truncated, huge, wrong content type, HTML under
200, empty, noise, wrong-shaped JSON) against the classic client and each JSON dialect,
for a submit and for a read; then the cases one by one with scripted answers, and
properties over any answer: a read's garbage is transient and says what came; a
submit's (under 2xx) is ``SubmitUncertain``, never an error that would have it resent;
nothing but a :class:`SolverError` escapes; no secret is quoted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from hypothesis import example, given, settings
from hypothesis import strategies as st

from captcha_tasks.errors import (
    ClientError,
    ProviderUnavailable,
    SolverError,
    SubmitUncertain,
    TransientSolverError,
)
from captcha_tasks.provider import JsonTaskClient, Proxy, RecaptchaV2, SolverClient
from captcha_tasks.provider.transport import MAX_RESPONSE_BYTES
from captcha_tasks.provider.unreadable import UNREADABLE_CODES, is_unreadable
from captcha_tasks_sandbox import (
    DEV_API_KEY,
    SandboxServer,
    dev_api_key,
)
from captcha_tasks_sandbox.garbage import GARBAGE_KINDS, HUGE_BYTES
from tests.support.canned_http import CannedResponse

SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
V2 = RecaptchaV2(SITEKEY, "https://a.example.com/login")
KEY = "Kq7ReallySecretKey0123456789Zx9W"
PASSWORD = "pr0xyPassw0rdSecret"
PROXY = Proxy("203.0.113.5", 8080, "HTTP", "user", PASSWORD)
JSON_DIALECTS = ("2captcha-v2", "anticaptcha", "capsolver", "capmonster")
PROTOCOLS = ("classic", *JSON_DIALECTS)

Client = SolverClient | JsonTaskClient


def _client(url: str, protocol: str, key: str | None = None, **options: Any) -> Client:
    if protocol == "classic":
        return SolverClient(url, key or DEV_API_KEY, timeout=5, **options)
    key = key or dev_api_key(protocol)
    return JsonTaskClient(url, key, provider=protocol, timeout=5, **options)  # type: ignore[arg-type]


def _sandbox(
    make: Callable[..., SandboxServer], protocol: str, time_scale: float = 0.01, **config: Any
) -> SandboxServer:
    if protocol == "classic":
        return make(time_scale=time_scale, **config)
    return make(time_scale=time_scale, protocol="json", dialect=protocol, **config)


def _configure(server: SandboxServer, **changes: Any) -> None:
    requests.post(f"{server.url}/admin/config", json=changes, timeout=5).raise_for_status()


def _assert_says_what_came(error: SolverError, kind: str) -> None:
    text = str(error)
    assert error.code and DEV_API_KEY not in text
    if kind == "huge":
        assert f"over {MAX_RESPONSE_BYTES} bytes" in text
    elif kind == "wrong_shape":  # well-formed JSON: quoted as parsed (a 2xx, or it would say)
        assert "banana" in text or "None" in text or "3397637370" in text, text
    else:
        assert "HTTP 200" in text, text
    if kind == "html":
        assert "Just a moment..." in text or "Guest Wi-Fi" in text, text  # the page's title
    if kind == "noise":
        assert "not text: b'" in text or 'not text: b"' in text, text


# -- every kind, both protocols, through the sandbox -----------------------------------


@pytest.mark.parametrize("kind", GARBAGE_KINDS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_garbled_submit_is_uncertain_and_sent_once(
    sandbox_factory: Callable[..., SandboxServer], protocol: str, kind: str
) -> None:
    server = _sandbox(
        sandbox_factory, protocol, garbage_rate=1.0, garbage_kinds=(kind,), fault_paths=("in.php",)
    )
    client = _client(server.url, protocol)
    if kind == "content_type":  # a sound answer under a wrong label is the answer
        assert client.submit(V2)
        return
    with pytest.raises(SubmitUncertain) as info:
        client.submit(V2)
    error = info.value
    assert error.code == "SUBMIT_OUTCOME_UNKNOWN" and not isinstance(error, TransientSolverError)
    assert "cannot be read" in str(error)
    _assert_says_what_came(error, kind)
    # The sandbox had accepted it: exactly one captcha there, and one request sent.
    assert server.stats()["submitted"] == 1 and server.stats()["requests"] == 1


@pytest.mark.parametrize("kind", GARBAGE_KINDS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_garbled_read_is_transient_and_the_next_one_answers(
    sandbox_factory: Callable[..., SandboxServer], protocol: str, kind: str
) -> None:
    # Anti-Captcha forgets a task 60 s after it is ready: 0.6 s at 0.01, less than five
    # reads of a huge garbage answer took on a loaded machine (the last read then found
    # no such task). At 0.05 it keeps it 3 s.
    scale = 0.05 if protocol == "anticaptcha" else 0.01
    server = _sandbox(sandbox_factory, protocol, scale, fault_paths=("res.php",))
    client = _client(server.url, protocol)
    captcha_id = client.submit(V2)
    time.sleep(20 * scale)  # recaptcha_v2 is ready after 15 s, scaled
    _configure(server, garbage_rate=1.0, garbage_kinds=[kind])
    for _ in range(4):  # several draws: the wrong shapes differ
        time.sleep(5 * scale)  # CapMonster's 2 s between reads, scaled
        if kind == "content_type":
            answer = client.get(captcha_id)
            assert answer is not None and isinstance(answer.solution, str)
            continue
        with pytest.raises(ProviderUnavailable) as info:
            client.get(captcha_id)
        error = info.value
        assert error.code in UNREADABLE_CODES and error.retry_after and error.retry_after >= 5
        _assert_says_what_came(error, kind)
    _configure(server, garbage_rate=0.0)
    time.sleep(5 * scale)
    answer = client.get(captcha_id)
    assert answer is not None and isinstance(answer.solution, str) and len(answer.solution) > 20


@pytest.mark.parametrize("protocol", ["classic", "capsolver"])
def test_a_huge_answer_is_not_read_to_its_end(
    sandbox_factory: Callable[..., SandboxServer], protocol: str
) -> None:
    server = _sandbox(
        sandbox_factory,
        protocol,
        garbage_rate=1.0,
        garbage_kinds=("huge",),
        fault_paths=("res.php",),
    )
    client = _client(server.url, protocol)
    started = time.monotonic()
    for _ in range(5):
        with pytest.raises(ProviderUnavailable, match="ANSWER_TOO_BIG"):
            client.balance()
    # About 1 MiB read of each 3 MiB, the rest left unread (the connection closed).
    assert time.monotonic() - started < 5.0
    assert HUGE_BYTES > 2 * MAX_RESPONSE_BYTES


# -- one by one, scripted --------------------------------------------------------------


class Scripted(requests.Session):
    """Answers each POST with ``answer(what was sent)``: (status, content type, body)."""

    def __init__(self, answer: Callable[[dict[str, Any]], tuple[int, str, bytes]]) -> None:
        super().__init__()
        self.answer = answer
        self.sent: list[dict[str, Any]] = []

    def post(self, url: Any, data: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
        sent = {"url": url, "data": dict(data or {}), "json": kwargs.get("json")}
        self.sent.append(sent)
        return CannedResponse(*self.answer(sent))


def _canned(status: int, content_type: str, body: bytes | str) -> Scripted:
    raw = body.encode() if isinstance(body, str) else body
    return Scripted(lambda sent: (status, content_type, raw))


def _classic(session: requests.Session) -> SolverClient:
    return SolverClient("http://solver.test", KEY, session=session)


def _json(session: requests.Session, dialect: str = "2captcha-v2") -> JsonTaskClient:
    return JsonTaskClient("http://solver.test", KEY, provider=dialect, session=session)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "body",
    [
        '{"status":1,"request":{"geetest_challenge":null,"geetest_validate":null}}',
        '{"status":1,"request":{"geetest_challenge":"a","geetest_validate":{"x":1}}}',
        '{"status":1,"request":{"geetest_challenge":""}}',
    ],
)
def test_a_classic_read_with_null_fields_is_no_solve(body: str) -> None:
    with pytest.raises(ProviderUnavailable) as info:
        _classic(_canned(200, "application/json", body)).get("3397637370")
    assert info.value.code == "UNRECOGNISED_ANSWER"


@pytest.mark.parametrize(
    "solution",
    [
        {"gRecaptchaResponse": None, "token": None, "text": None},
        {"gRecaptchaResponse": ""},
        {"challenge": None, "validate": None},
        {"token": {"nested": "x"}},
    ],
)
def test_a_json_read_with_null_fields_is_no_solve(solution: dict[str, Any]) -> None:
    body = json.dumps({"errorId": 0, "status": "ready", "solution": solution})
    with pytest.raises(ProviderUnavailable) as info:
        _json(_canned(200, "application/json", body)).get("74372499131")
    assert info.value.code == "UNRECOGNISED_ANSWER"


@pytest.mark.parametrize(
    "body",
    [
        '{"status":1,"request":"not an id!"}',
        "CAPCHA_NOT_READY",
        '{"status":1,"request":{"a":"b"}}',
        '{"status":1,"request":12.5}',
        "OK|" + "9" * 80,
    ],
)
def test_a_classic_submit_answered_without_a_captcha_id_is_uncertain(body: str) -> None:
    session = _canned(200, "text/html", body)
    with pytest.raises(SubmitUncertain, match="no captcha id"):
        _classic(session).submit(V2)
    assert len(session.sent) == 1


@pytest.mark.parametrize(
    "body", ['{"errorId":"banana"}', '{"errorId":1.5,"status":"processing?"}', '{"errorId":[]}']
)
def test_an_error_id_that_is_no_number_is_garbage_not_an_error(body: str) -> None:
    session = _canned(200, "application/json", body)
    with pytest.raises(ProviderUnavailable) as info:
        _json(session).get("74372499131")
    assert info.value.code == "UNRECOGNISED_ANSWER"  # transient: asked again, not failed
    with pytest.raises(SubmitUncertain):
        _json(session).submit(V2)
    real = _canned(200, "application/json", '{"errorId":"12"}')
    with pytest.raises(ClientError, match="ERROR_ID_12"):  # digits are an error id
        _json(real).get("74372499131")


@pytest.mark.parametrize("protocol", ["classic", "json"])
def test_a_valid_answer_padded_past_the_cap_is_refused(protocol: str) -> None:
    document = (
        {"status": 1, "request": "3397637370"}
        if protocol == "classic"
        else {
            "errorId": 0,
            "taskId": 3397637370,
            "status": "ready",
            "solution": {"gRecaptchaResponse": "token-x" * 10},
        }
    )
    padded = json.dumps(document).encode() + b" " * (MAX_RESPONSE_BYTES + 10)
    session = _canned(200, "application/json", padded)
    client = _classic(session) if protocol == "classic" else _json(session)
    with pytest.raises(ProviderUnavailable) as read:
        client.get("3397637370")
    assert read.value.code == "ANSWER_TOO_BIG" and read.value.retry_after == 10.0
    assert f"over {MAX_RESPONSE_BYTES} bytes" in str(read.value) and "HTTP 200" in str(read.value)
    with pytest.raises(SubmitUncertain, match="ANSWER_TOO_BIG"):
        client.submit(V2)
    # Exactly at the cap it is read (and the padding is whitespace).
    session.answer = lambda sent: (200, "", padded[:MAX_RESPONSE_BYTES])
    assert client.get("3397637370") is not None


@pytest.mark.parametrize("protocol", ["classic", "json"])
@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_refusing_status_wins_over_garbage(protocol: str, status: int) -> None:
    for body in (b"\xff\xfe" + bytes(range(200)), b"<html>" + b"x" * (MAX_RESPONSE_BYTES + 5)):
        session = _canned(status, "text/html", body)
        client = _classic(session) if protocol == "classic" else _json(session)
        with pytest.raises(ProviderUnavailable) as info:
            client.submit(V2)  # never reached the provider: transient, resent later
        assert info.value.code == f"HTTP_{status}"


@pytest.mark.parametrize("protocol", ["classic", "json"])
def test_a_portal_echoing_the_request_shows_no_secret(protocol: str) -> None:
    def echo(sent: dict[str, Any]) -> tuple[int, str, bytes]:
        request = json.dumps(sent["json"]) if sent["json"] else repr(sent["data"])
        page = f"<html><title>Login {request[:40]}</title><body>{request}</body></html>"
        return 200, "text/html", page.encode()

    session = Scripted(echo)
    client = _classic(session) if protocol == "classic" else _json(session)
    for call in (lambda: client.submit(V2, proxy=PROXY), lambda: client.get("3397637370")):
        with pytest.raises(SolverError) as info:
            call()
        for text in (str(info.value), repr(info.value.args)):
            assert KEY not in text and PASSWORD not in text, text
    assert PASSWORD in repr(session.sent[0])  # the needle was there to be found


# -- properties --------------------------------------------------------------------------

PROPS = settings(derandomize=True, database=None, max_examples=150, deadline=None)

BODIES = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "status",
                        "request",
                        "errorId",
                        "errorCode",
                        "taskId",
                        "solution",
                        "gRecaptchaResponse",
                        "token",
                        "x",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=12,
    ).map(lambda value: json.dumps(value).encode()),
)
CONTENT_TYPES = st.sampled_from(
    ["", "application/json", "text/html", "application/octet-stream", "image/png", "text/plain"]
)


@PROPS
@given(
    protocol=st.sampled_from(["classic", "json"]),
    status=st.sampled_from([200, 201, 204]),
    content_type=CONTENT_TYPES,
    body=BODIES,
)
def test_a_submit_answered_under_2xx_is_never_resent(
    protocol: str, status: int, content_type: str, body: bytes
) -> None:
    """Whatever a 2xx answer to a submit is: an id, a provider's own error, or
    SubmitUncertain; never an error saying "the answer was garbage" that is transient
    (the engine would send it again: a second captcha billed)."""
    session = _canned(status, content_type, body)
    client = _classic(session) if protocol == "classic" else _json(session)
    try:
        captcha_id = client.submit(V2)
    except SubmitUncertain as exc:
        assert KEY not in str(exc)
    except SolverError as exc:
        assert not is_unreadable(exc), exc
        assert exc.code and exc.code not in UNREADABLE_CODES
    else:
        assert captcha_id and captcha_id.isascii()


@PROPS
@given(
    protocol=st.sampled_from(["classic", "json"]),
    status=st.integers(100, 599),
    content_type=CONTENT_TYPES,
    body=BODIES,
    call=st.sampled_from(["get", "many", "balance"]),
)
# A status that is not a word (unhashable, so no set of statuses can hold it).
@example(protocol="json", status=200, content_type="", body=b'{"status":[]}', call="get")
@example(protocol="json", status=200, content_type="", body=b'{"errorCode":{}}', call="get")
def test_any_read_answer_is_a_value_or_a_typed_error(
    protocol: str, status: int, content_type: str, body: bytes, call: str
) -> None:
    session = _canned(status, content_type, body.replace(b"x", KEY.encode()))
    client = _classic(session) if protocol == "classic" else _json(session)
    calls = {
        "get": lambda: client.get("3397637370"),
        "balance": client.balance,
        "many": lambda: client.get_many(["3397637370", "3397637371"]),
    }
    try:
        calls[call]()
    except SolverError as exc:
        assert exc.code and KEY not in str(exc) and KEY not in repr(exc.args)
        if is_unreadable(exc):
            assert isinstance(exc, TransientSolverError) and exc.retry_after
            assert "HTTP" in str(exc) or "answer" in str(exc) or "body" in str(exc), exc
