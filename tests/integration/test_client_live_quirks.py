"""The solver client over real HTTP against an independent provider double.

Each test reproduces one quirk seen on the live providers (integer ids, plain text,
HTML 502 pages, slow or dropped answers, bare decimals) and checks what the client
sent: POST only, the key in the body and never in a URL.
"""

from __future__ import annotations

import decimal
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from captcha_tasks.errors import (
    ClientError,
    ConfigurationError,
    InsufficientFunds,
    InvalidApiKey,
    InvalidTaskInput,
    NoSlotAvailable,
    PermanentSolverError,
    ProviderUnavailable,
    SolverNetworkError,
    SubmitUncertain,
    TransientSolverError,
)
from captcha_tasks.provider import (
    Answer,
    Image,
    Proxy,
    RecaptchaV2,
    SolverClient,
    Turnstile,
    close_shared_session,
    make_session,
    shared_session,
    transport,
)
from captcha_tasks.settings import Settings
from captcha_tasks.settings.providers import ProviderConfig
from tests.support.provider_double import DEFAULT_KEY as KEY
from tests.support.provider_double import ProviderDouble, Scripted

pytestmark = pytest.mark.integration

SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
PAGE = "https://example.com/login"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
TIMEOUT = 0.5


@pytest.fixture
def double() -> Iterator[ProviderDouble]:
    with ProviderDouble() as provider:
        yield provider


@pytest.fixture
def session() -> Iterator[transport.Connections]:
    s = make_session()
    s.trust_env = False  # loopback only, whatever proxy the environment names
    yield s
    s.close()


@pytest.fixture
def client(double: ProviderDouble, session: transport.Connections) -> SolverClient:
    return SolverClient(double.base_url, KEY, timeout=TIMEOUT, session=session)


def plain(body: str, status: int = 200, content_type: str = "text/html") -> Scripted:
    return Scripted(status, content_type, body)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_integer_json_ids_become_strings(client: SolverClient, double: ProviderDouble) -> None:
    captcha_id = client.submit(RecaptchaV2(SITEKEY, PAGE))
    assert captcha_id == "3397637370"
    assert client.get(captcha_id) == Answer(captcha_id, f"token-{captcha_id}")
    submit, get = double.requests
    assert submit.endpoint == "/in.php" and get.endpoint == "/res.php"
    assert submit.params == {
        "method": "userrecaptcha",
        "googlekey": SITEKEY,
        "pageurl": PAGE,
        "key": KEY,
        "json": "1",
    }
    assert get.params == {"action": "get", "id": captcha_id, "key": KEY, "json": "1"}


def test_the_key_travels_only_in_post_bodies(
    client: SolverClient, double: ProviderDouble, tmp_path: Path
) -> None:
    path = tmp_path / "c.png"
    path.write_bytes(PNG)
    captcha_id = client.submit(RecaptchaV2(SITEKEY, PAGE))
    client.submit(Image.from_file(path))
    client.get(captcha_id)
    client.get_many([captcha_id, "3397637371"])
    client.balance()
    client.report(captcha_id, correct=True)
    assert len(double.requests) == 6
    for request in double.requests:
        assert request.method == "POST"
        assert KEY not in request.path and "?" not in request.path
        assert request.query == {}
        assert request.body_params["key"] == KEY
        assert all(KEY not in value for value in request.headers.values())


def test_plain_text_mode(double: ProviderDouble, session: transport.Connections) -> None:
    client = SolverClient(double.base_url, KEY, timeout=TIMEOUT, session=session, json_mode=False)
    double.script(
        plain("OK|73548291"),
        plain("CAPCHA_NOT_READY"),
        plain("OK|answer|with|pipes"),
        plain('OK|{"geetest_challenge":"c","geetest_validate":"v","geetest_seccode":"s"}'),
    )
    assert client.submit(Turnstile("0x4AAAAAAABkMYinukE8nzY", PAGE)) == "73548291"
    assert client.get("73548291") is None
    assert client.get("73548291") == Answer("73548291", "answer|with|pipes")
    answer = client.get("73548291")
    assert answer is not None and answer.solution == {
        "geetest_challenge": "c",
        "geetest_validate": "v",
        "geetest_seccode": "s",
    }
    assert all("json" not in request.params for request in double.requests)
    # And the default double speaks plain text too when json is not asked for.
    captcha_id = client.submit(RecaptchaV2(SITEKEY, PAGE))
    assert client.get(captcha_id) == Answer(captcha_id, f"token-{captcha_id}")
    assert client.balance() == decimal.Decimal("12.3400")
    client.report(captcha_id, correct=False)


def test_html_502_page_is_transient(client: SolverClient, double: ProviderDouble) -> None:
    double.script(
        plain("<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>", 502)
    )
    with pytest.raises(ProviderUnavailable) as info:
        client.submit(RecaptchaV2(SITEKEY, PAGE))
    assert info.value.code == "HTTP_502"
    assert isinstance(info.value, TransientSolverError) and info.value.retry_after == 10.0
    assert client.stats["errors:HTTP_502"] == 1


def test_slow_answer_times_out_quickly(client: SolverClient, double: ProviderDouble) -> None:
    double.script(Scripted(body="OK|1", delay=5.0))
    started = time.monotonic()
    with pytest.raises(SolverNetworkError) as info:
        client.balance()
    assert time.monotonic() - started < 2.0
    assert isinstance(info.value, TransientSolverError) and info.value.code == "NETWORK"
    assert isinstance(info.value.__cause__, urllib3.exceptions.ReadTimeoutError)
    assert KEY not in str(info.value)


def test_dripping_answer_hits_the_overall_deadline(
    client: SolverClient, double: ProviderDouble
) -> None:
    # Each byte arrives within the read timeout; only the overall deadline stops it.
    double.script(Scripted(body="OK|" + "x" * 100, drip=0.1))
    started = time.monotonic()
    with pytest.raises(SolverNetworkError, match="no complete answer"):
        client.get("123")
    assert time.monotonic() - started < 2.5


def test_connection_refused(session: transport.Connections) -> None:
    client = SolverClient(f"http://127.0.0.1:{free_port()}", KEY, timeout=TIMEOUT, session=session)
    started = time.monotonic()
    with pytest.raises(SolverNetworkError) as info:
        client.submit(RecaptchaV2(SITEKEY, PAGE))
    assert time.monotonic() - started < 2.0
    assert isinstance(info.value.__cause__, urllib3.exceptions.NewConnectionError)
    assert KEY not in str(info.value)
    assert client.stats == {"submit": 1, "errors:NETWORK": 1}


def test_connection_dropped_without_answer(client: SolverClient, double: ProviderDouble) -> None:
    double.script(Scripted(drop=True))
    with pytest.raises(SolverNetworkError):
        client.get("123")


def test_balance_answers(client: SolverClient, double: ProviderDouble) -> None:
    double.script(
        plain("12.3400"),  # a bare decimal even though json=1 was sent
        Scripted(200, "application/json", '{"status":1,"request":"0.5000"}'),
        Scripted(200, "application/json", '{"status":1,"request":7.25}'),
        plain("lots"),
    )
    assert client.balance() == decimal.Decimal("12.3400")
    assert str(client.balance()) == "0.5000"
    assert client.balance() == decimal.Decimal("7.25")
    with pytest.raises(ProviderUnavailable, match="UNRECOGNISED_ANSWER"):
        client.balance()
    assert double.requests[0].params == {"action": "getbalance", "key": KEY, "json": "1"}


def test_reports(client: SolverClient, double: ProviderDouble) -> None:
    client.report("3397637370", correct=True)
    client.report("3397637370", correct=False)
    assert [r.params["action"] for r in double.requests] == ["reportgood", "reportbad"]
    assert double.requests[0].params["id"] == "3397637370"
    double.script(plain("ERROR_REPORT_NOT_RECORDED"), plain("OK|1"))
    with pytest.raises(ClientError) as info:
        client.report("3397637370", correct=False)
    assert info.value.code == "ERROR_REPORT_NOT_RECORDED"
    with pytest.raises(ProviderUnavailable):
        client.report("3397637370", correct=True)


def test_invalid_input_never_produces_a_request(
    client: SolverClient, double: ProviderDouble
) -> None:
    too_big = Image(PNG + b"\0" * 200_000)  # within the 1 MB ceiling, over the 100 kB limit
    with pytest.raises(InvalidTaskInput, match="CAPTCHA_TASKS_MAX_IMAGE_BYTES=100000"):
        client.submit(too_big)
    for bad_id in ("", "12 34", "1;DROP", "x" * 65, None):
        with pytest.raises(InvalidTaskInput):
            client.get(bad_id)  # type: ignore[arg-type]
        with pytest.raises(InvalidTaskInput):
            client.report(bad_id, correct=True)  # type: ignore[arg-type]
    with pytest.raises(InvalidTaskInput):
        client.submit("6Le...")  # type: ignore[arg-type]
    with pytest.raises(InvalidTaskInput):
        client.submit(RecaptchaV2(SITEKEY, PAGE), proxy="1.2.3.4:80")  # type: ignore[arg-type]
    with pytest.raises(InvalidTaskInput):
        client.get_many(["1", "bad id"])
    assert double.requests == []
    assert client.stats == {}


def test_image_uploads(client: SolverClient, double: ProviderDouble, tmp_path: Path) -> None:
    path = tmp_path / "captcha-from-disk.png"
    path.write_bytes(PNG)
    client.submit(Image.from_file(path, numeric=1))
    client.submit(Image(PNG, lang="en"))
    upload, inline = double.requests
    assert upload.content_type.startswith("multipart/form-data")
    assert upload.params == {"method": "post", "numeric": "1", "key": KEY, "json": "1"}
    assert list(upload.files) == ["file"]
    assert upload.files["file"].filename == "captcha.png"
    assert upload.files["file"].data == PNG
    assert inline.content_type == "application/x-www-form-urlencoded"
    assert inline.files == {}
    assert inline.params["method"] == "base64" and inline.params["lang"] == "en"


def test_proxy_travels_with_the_captcha(client: SolverClient, double: ProviderDouble) -> None:
    client.submit(RecaptchaV2(SITEKEY, PAGE), proxy=Proxy.parse("u:pw@10.0.0.1:3128"))
    assert double.requests[0].params["proxy"] == "u:pw@10.0.0.1:3128"
    assert double.requests[0].params["proxytype"] == "HTTP"


def test_zero_balance_dialects(double: ProviderDouble, session: transport.Connections) -> None:
    body = '{"status":0,"request":"ERROR_ZERO_BALANCE"}'
    double.script(plain(body), plain(body))
    captchaai = SolverClient(double.base_url, KEY, timeout=TIMEOUT, session=session)
    with pytest.raises(NoSlotAvailable):
        captchaai.submit(RecaptchaV2(SITEKEY, PAGE))
    twocaptcha = SolverClient(
        double.base_url, KEY, provider="2captcha", timeout=TIMEOUT, session=session
    )
    with pytest.raises(InsufficientFunds) as info:
        twocaptcha.submit(RecaptchaV2(SITEKEY, PAGE))
    assert not isinstance(info.value, TransientSolverError) and info.value.retry_after == 60.0


def test_wrong_key(double: ProviderDouble, session: transport.Connections) -> None:
    wrong = "f" * 32
    client = SolverClient(double.base_url, wrong, timeout=TIMEOUT, session=session)
    with pytest.raises(InvalidApiKey) as info:
        client.balance()
    assert not isinstance(info.value, TransientSolverError) and wrong not in str(info.value)
    assert wrong not in repr(client)


def test_get_many(client: SolverClient, double: ProviderDouble) -> None:
    assert client.get_many(["1", "2"]) == {"1": Answer("1", "token-1"), "2": Answer("2", "token-2")}
    assert double.requests[0].params["ids"] == "1,2"
    double.script(plain('{"status":1,"request":"tok|CAPCHA_NOT_READY|ERROR_CAPTCHA_UNSOLVABLE"}'))
    result = client.get_many(["1", "2", "3"])
    assert result["1"] == Answer("1", "tok") and result["2"] is None
    assert getattr(result["3"], "code", None) == "ERROR_CAPTCHA_UNSOLVABLE"
    assert client.get_many(["5"]) == {"5": Answer("5", "token-5")}  # one id: a plain get
    assert client.get_many([]) == {}


def test_redirects_are_not_followed(client: SolverClient, double: ProviderDouble) -> None:
    double.script(Scripted(302, "text/html", "", headers=(("Location", "https://elsewhere/"),)))
    with pytest.raises(ClientError) as info:
        client.balance()
    assert info.value.code == "HTTP_302"
    assert len(double.requests) == 1


def test_stats_count_requests_per_action(client: SolverClient) -> None:
    captcha_id = client.submit(RecaptchaV2(SITEKEY, PAGE))
    client.get(captcha_id)
    client.get(captcha_id)
    client.balance()
    assert client.stats == {"submit": 1, "get": 2, "getbalance": 1}


def test_from_settings(double: ProviderDouble) -> None:
    settings = Settings(
        provider_configs=(ProviderConfig(protocol="2captcha", url=double.base_url, api_key=KEY),),
        http_timeout=0.5,
        max_image_bytes=1000,
    )
    client = SolverClient.from_settings(settings)
    assert (client.base_url, client.provider, client.timeout) == (double.base_url, "2captcha", 0.5)
    with pytest.raises(InvalidTaskInput, match="CAPTCHA_TASKS_MAX_IMAGE_BYTES=1000"):
        client.submit(Image(PNG + b"\0" * 1000))
    with pytest.raises(ConfigurationError):
        SolverClient.from_settings(
            Settings(provider_configs=(ProviderConfig(url=double.base_url),))
        )
    try:  # the process-wide session, as workers use it
        assert client.balance() == decimal.Decimal("12.3400")
    finally:
        close_shared_session()


@pytest.mark.parametrize(
    ("base_url", "api_key", "options"),
    [
        ("ftp://example.com", KEY, {}),
        ("example.com", KEY, {}),
        ("https://u:p@example.com", KEY, {}),
        ("https://example.com", "", {}),
        ("https://example.com", "two words", {}),
        ("https://example.com", KEY, {"provider": "anticaptcha"}),
        ("https://example.com", KEY, {"timeout": 0}),
        ("https://example.com", KEY, {"timeout": float("nan")}),
    ],
)
def test_bad_configuration(base_url: str, api_key: str, options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        SolverClient(base_url, api_key, **options)  # type: ignore[arg-type]


def test_shared_session_is_per_process() -> None:
    first = shared_session()
    child_session = None
    try:
        assert shared_session() is first
        assert isinstance(first, transport.Connections)
        close_shared_session()  # the next call builds a new one (as a forked child does)
        child_session = shared_session()
        assert child_session is not first
    finally:
        first.close()
        if child_session is not None:
            child_session.close()
        close_shared_session()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork with threads, Python 3.12+
def test_a_forked_child_gets_its_own_session() -> None:
    parent = shared_session()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            fresh = shared_session() is not parent
            os.write(write_end, b"1" if fresh else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 1) == b"1"
        os.waitpid(pid, 0)
    finally:
        os.close(read_end)
        close_shared_session()


# -- a submit is never sent twice: which failures may have reached the provider -------


@pytest.mark.parametrize(
    "answer",
    [
        Scripted(body='{"status":1,"request":3397637370}', delay=5.0),  # read timeout
        Scripted(drop=True),  # the connection closed once the request was in
        Scripted(body='{"status":1,"request":"' + "3" * 60 + '"}', drip=0.05),  # too slow
        plain("<html><title>504 Gateway Time-out</title></html>", 504),
    ],
    ids=["read-timeout", "dropped", "past-the-deadline", "http-504"],
)
def test_a_submit_that_may_have_been_accepted_is_uncertain(
    client: SolverClient, double: ProviderDouble, answer: Scripted
) -> None:
    double.script(answer)
    started = time.monotonic()
    with pytest.raises(SubmitUncertain) as info:
        client.submit(RecaptchaV2(SITEKEY, PAGE))
    assert time.monotonic() - started < 2.5
    error = info.value
    assert error.code == "SUBMIT_OUTCOME_UNKNOWN" and not isinstance(error, TransientSolverError)
    assert isinstance(error, PermanentSolverError) and error.retry_after is None
    assert "may have accepted" in str(error) and "not paid twice" in str(error)
    assert KEY not in str(error)
    assert [r.endpoint for r in double.requests] == ["/in.php"]
    assert client.stats == {"submit": 1, "errors:SUBMIT_OUTCOME_UNKNOWN": 1}
    # Rebuilt from its args (Celery's JSON backend), it is the same error.
    rebuilt = SubmitUncertain(*error.args)
    assert (rebuilt.code, str(rebuilt)) == (error.code, str(error))


@pytest.mark.parametrize(
    "answer",
    [Scripted(body="OK|1", delay=5.0), Scripted(drop=True)],
    ids=["read-timeout", "dropped"],
)
def test_polls_without_an_answer_stay_transient(
    client: SolverClient, double: ProviderDouble, answer: Scripted
) -> None:
    double.script(answer, answer)
    with pytest.raises(SolverNetworkError):
        client.get("3397637370")
    with pytest.raises(SolverNetworkError):
        client.get_many(["3397637370", "3397637371"])


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_5xx_page_on_submit_was_not_processed_and_is_transient(
    client: SolverClient, double: ProviderDouble, status: int
) -> None:
    double.script(plain(f"<html><title>{status}</title><body>nginx</body></html>", status))
    with pytest.raises(ProviderUnavailable) as info:
        client.submit(RecaptchaV2(SITEKEY, PAGE))
    assert isinstance(info.value, TransientSolverError) and info.value.code == f"HTTP_{status}"
    # The double answered and the next try goes through: one captcha at the provider.
    assert client.submit(RecaptchaV2(SITEKEY, PAGE)) == "3397637370"


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (ConnectionRefusedError(111, "Connection refused"), "connection failed"),
        (socket.gaierror(-2, "Name or service not known"), "connection failed"),
        (TimeoutError("timed out"), "connect timeout"),
    ],
    ids=["refused", "dns", "connect-timeout"],
)
def test_a_submit_that_never_connected_is_transient(
    client: SolverClient,
    double: ProviderDouble,
    monkeypatch: pytest.MonkeyPatch,
    raised: OSError,
    kind: str,
) -> None:
    import urllib3.connection

    def fail(*args: object, **kwargs: object) -> socket.socket:
        raise raised

    monkeypatch.setattr(urllib3.connection.connection, "create_connection", fail)
    with pytest.raises(SolverNetworkError) as info:
        client.submit(RecaptchaV2(SITEKEY, PAGE))
    assert isinstance(info.value, TransientSolverError) and kind in str(info.value)
    assert double.requests == []
    assert client.stats == {"submit": 1, "errors:NETWORK": 1}
