"""Every answer shape the providers send, parsed into a value or the right error."""

from __future__ import annotations

import json

import pytest

from captcha_tasks.errors import (
    BadImage,
    BadRequest,
    CaptchaUnsolvable,
    ClientError,
    InsufficientFunds,
    InvalidApiKey,
    NoSlotAvailable,
    ProviderUnavailable,
    ProxyRejected,
    RateLimited,
    SolverError,
    TransientSolverError,
)
from captcha_tasks.provider.protocol import (
    NOT_READY,
    error_for,
    parse_many,
    parse_response,
)

KEY = "0123456789abcdef0123456789abcdef"

# The classic API's documented errors (2captcha.com/2captcha-api, "Error handling"), row by
# row: (code, class, transient, retry_after).
# Written out here rather than read from the implementation's table.
ERROR_ROWS: list[tuple[str, type[SolverError], bool, float | None]] = [
    ("ERROR_NO_SLOT_AVAILABLE", NoSlotAvailable, True, 5.0),
    ("ERROR_WRONG_USER_KEY", InvalidApiKey, False, None),
    ("ERROR_KEY_DOES_NOT_EXIST", InvalidApiKey, False, None),
    ("ERROR_PAGEURL", BadRequest, False, None),
    ("ERROR_GOOGLEKEY", BadRequest, False, None),
    ("ERROR_WRONG_GOOGLEKEY", BadRequest, False, None),
    ("ERROR_BAD_TOKEN_OR_PAGEURL", BadRequest, False, None),
    ("ERROR_BAD_PARAMETERS", BadRequest, False, None),
    ("ERROR_ZERO_CAPTCHA_FILESIZE", BadImage, False, None),
    ("ERROR_TOO_BIG_CAPTCHA_FILESIZE", BadImage, False, None),
    ("ERROR_WRONG_FILE_EXTENSION", BadImage, False, None),
    ("ERROR_IMAGE_TYPE_NOT_SUPPORTED", BadImage, False, None),
    ("ERROR_UPLOAD", BadImage, False, None),
    ("ERROR_BAD_PROXY", ProxyRejected, True, 5.0),
    ("ERROR_PROXY_CONNECTION_FAILED", ProxyRejected, True, 5.0),
    ("IP_BANNED", RateLimited, True, 300.0),
    ("ERROR_SERVER_ERROR", ProviderUnavailable, True, 10.0),
    ("ERROR_INTERNAL_SERVER_ERROR", ProviderUnavailable, True, 10.0),
    ("ERROR_CAPTCHA_UNSOLVABLE", CaptchaUnsolvable, False, None),
    ("ERROR_WRONG_CAPTCHA_ID", ClientError, False, None),
    ("ERROR_WRONG_ID_FORMAT", ClientError, False, None),
    ("ERROR_EMPTY_ACTION", ClientError, False, None),
    ("MAX_USER_TURN", RateLimited, True, 10.0),
    ("ERROR: 1001", RateLimited, True, 600.0),
    ("ERROR: 1002", RateLimited, True, 300.0),
    ("ERROR: 1003", RateLimited, True, 30.0),
    ("ERROR: 1004", RateLimited, True, 600.0),
    ("ERROR: 1005", RateLimited, True, 300.0),
]
DIALECT_ROWS = [
    ("captchaai", NoSlotAvailable, True, 5.0),
    ("2captcha", InsufficientFunds, False, 60.0),
]


def json_body(code: str, error_text: str | None = None) -> str:
    payload: dict[str, object] = {"status": 0, "request": code}
    if error_text is not None:
        payload["error_text"] = error_text
    return json.dumps(payload)


def raised(body: bytes | str, status: int = 200, **kwargs: object) -> SolverError:
    with pytest.raises(SolverError) as info:
        parse_response(status, "text/html", body, **kwargs)  # type: ignore[arg-type]
    return info.value


@pytest.mark.parametrize("mode", ["json", "plain"])
@pytest.mark.parametrize(("code", "cls", "transient", "retry_after"), ERROR_ROWS)
def test_every_documented_error_code(
    mode: str, code: str, cls: type[SolverError], transient: bool, retry_after: float | None
) -> None:
    body = json_body(code) if mode == "json" else code
    exc = raised(body)
    assert type(exc) is cls
    assert exc.code == code
    assert isinstance(exc, TransientSolverError) is transient
    assert exc.retry_after == retry_after
    if transient:
        assert exc.retry_after is not None and exc.retry_after >= 5
    assert code in str(exc)


@pytest.mark.parametrize("mode", ["json", "plain"])
@pytest.mark.parametrize(("provider", "cls", "transient", "retry_after"), DIALECT_ROWS)
def test_zero_balance_depends_on_the_dialect(
    mode: str, provider: str, cls: type[SolverError], transient: bool, retry_after: float
) -> None:
    body = json_body("ERROR_ZERO_BALANCE") if mode == "json" else "ERROR_ZERO_BALANCE"
    exc = raised(body, provider=provider)
    assert type(exc) is cls
    assert (exc.code, isinstance(exc, TransientSolverError), exc.retry_after) == (
        "ERROR_ZERO_BALANCE",
        transient,
        retry_after,
    )


def test_zero_balance_defaults_to_captchaai() -> None:
    assert type(raised("ERROR_ZERO_BALANCE")) is NoSlotAvailable


@pytest.mark.parametrize(
    "body", ['{"status":0,"request":"CAPCHA_NOT_READY"}', "CAPCHA_NOT_READY", "CAPTCHA_NOT_READY"]
)
def test_not_ready(body: str) -> None:
    assert parse_response(200, "text/html", body) is NOT_READY


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_html_5xx_pages_are_transient(status: int) -> None:
    page = f"<html><head><title>{status} Bad Gateway</title></head><body>nginx</body></html>"
    exc = raised(page, status=status)
    assert type(exc) is ProviderUnavailable
    assert (exc.code, isinstance(exc, TransientSolverError), exc.retry_after) == (
        f"HTTP_{status}",
        True,
        10.0,
    )
    assert "Bad Gateway" in str(exc)


def test_html_page_with_200_is_unrecognised_and_transient() -> None:
    exc = raised("<!DOCTYPE html><html><title>Just a moment...</title></html>")
    assert type(exc) is ProviderUnavailable
    assert (exc.code, isinstance(exc, TransientSolverError), exc.retry_after) == (
        "UNRECOGNISED_ANSWER",
        True,
        10.0,
    )


@pytest.mark.parametrize(
    "body",
    [
        "hello",
        "OK",
        "OK|",
        "ok|123",
        '{"status":',
        '{"foo": 1}',
        '{"status": 1}',
        '{"status": 1, "request": true}',
        '{"status": 1, "request": [1, 2]}',
        '{"status": 1, "request": ""}',
        '{"status": 0, "request": "SOMETHING"}',
        '{"status": "x", "request": "token"}',
    ],
)
def test_garbage_is_unrecognised_and_transient(body: str) -> None:
    exc = raised(body)
    assert type(exc) is ProviderUnavailable
    assert exc.code == "UNRECOGNISED_ANSWER"
    assert isinstance(exc, TransientSolverError) and exc.retry_after == 5.0


@pytest.mark.parametrize("body", ["", b"", "   \n", b"\xef\xbb\xbf"])
def test_empty_bodies(body: str | bytes) -> None:
    exc = raised(body)
    assert type(exc) is ProviderUnavailable
    assert exc.code == "EMPTY_ANSWER" and isinstance(exc, TransientSolverError)


def test_non_2xx_statuses() -> None:
    assert raised("Too Many Requests", status=429).code == "HTTP_429"
    assert type(raised("Too Many Requests", status=429)) is RateLimited
    for status in (301, 302, 404, 405):
        exc = raised("<html>moved</html>", status=status)
        assert (
            type(exc) is ClientError
            and exc.code == f"HTTP_{status}"
            and not isinstance(exc, TransientSolverError)
        )
    # Unusual 4xx (a WAF's 403): treat like any unrecognised answer.
    assert type(raised("blocked", status=403)) is ProviderUnavailable
    # An explicit error code wins over the status; a success under a 5xx is not trusted.
    assert type(raised(json_body("ERROR_NO_SLOT_AVAILABLE"), status=503)) is NoSlotAvailable
    assert raised("OK|123", status=500).code == "HTTP_500"


# -- values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"status":1,"request":3397637370}', "3397637370"),  # live CaptchaAI: an integer
        ('{"status":1,"request":"3397637370"}', "3397637370"),
        ('{"status":"1","request":"7"}', "7"),
        ("OK|3397637370", "3397637370"),
        ("OK|3397637370\n", "3397637370"),
        (b"\xef\xbb\xbfOK|42", "42"),
        ('{"status":1,"request":123456789012345678901234567890}', "123456789012345678901234567890"),
    ],
)
def test_captcha_ids_are_strings(body: str | bytes, expected: str) -> None:
    assert parse_response(200, "text/html", body) == expected


def test_tokens_and_text_answers() -> None:
    token = "03AGdBq24PBCbwiDRkh3FOcMZ1Xi5sEKH-" + "x" * 400
    assert (
        parse_response(200, "application/json", json.dumps({"status": 1, "request": token}))
        == token
    )
    assert parse_response(200, "text/html", f"OK|{token}") == token
    # Everything after the first "OK|" is the answer, pipes included.
    assert parse_response(200, "text/html", "OK|a|b|c") == "a|b|c"
    assert parse_response(200, "text/html", "OK|two words") == "two words"


def test_geetest_answers_are_dicts() -> None:
    answer = {
        "geetest_challenge": "c" * 34,
        "geetest_validate": "v" * 32,
        "geetest_seccode": "s|jordan",
    }
    body = json.dumps({"status": 1, "request": answer})
    assert parse_response(200, "application/json", body) == answer
    assert parse_response(200, "text/html", "OK|" + json.dumps(answer)) == answer
    # Not JSON after all: kept as text.
    assert parse_response(200, "text/html", "OK|{not json") == "{not json"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("12.3400", "12.3400"),
        ("0", "0"),
        ("-0.5", "-0.5"),
        ('{"status":1,"request":"12.3400"}', "12.3400"),
        ('{"status":1,"request":12.3400}', "12.3400"),  # a JSON number keeps its digits
        ('{"status":1,"request":5}', "5"),
    ],
)
def test_balances(body: str, expected: str) -> None:
    assert parse_response(200, "text/html", body) == expected


def test_report_recorded() -> None:
    assert parse_response(200, "", "OK_REPORT_RECORDED") == "OK_REPORT_RECORDED"
    assert (
        parse_response(200, "", '{"status":1,"request":"OK_REPORT_RECORDED"}')
        == "OK_REPORT_RECORDED"
    )


# -- error details -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["json", "plain"])
def test_unknown_error_codes_are_permanent_client_errors(mode: str) -> None:
    body = json_body("ERROR_SOMETHING_NEW") if mode == "json" else "ERROR_SOMETHING_NEW"
    exc = raised(body)
    assert type(exc) is ClientError
    assert (
        exc.code == "ERROR_SOMETHING_NEW"
        and not isinstance(exc, TransientSolverError)
        and exc.retry_after is None
    )
    assert type(raised("ERROR: 9999")) is ClientError
    assert raised("ERROR: 9999").code == "ERROR: 9999"


def test_numbered_codes_are_normalised() -> None:
    assert raised("ERROR:1001").code == "ERROR: 1001"
    assert raised("ERROR: 1005 too many requests").code == "ERROR: 1005"


def test_messages_carry_code_and_error_text() -> None:
    exc = raised(json_body("ERROR_PAGEURL", "pageurl parameter is missing"))
    assert "ERROR_PAGEURL" in str(exc)
    assert "pageurl parameter is missing" in str(exc)
    exc = raised("ERROR_WRONG_USER_KEY something extra")
    assert exc.code == "ERROR_WRONG_USER_KEY" and "something extra" in str(exc)


def test_the_api_key_is_never_echoed() -> None:
    exc = raised(json_body("ERROR_KEY_DOES_NOT_EXIST", f"key {KEY} not found"), redact=[KEY])
    assert KEY not in str(exc) and KEY not in repr(exc) and KEY not in repr(exc.args)
    exc = raised(f"<html><title>bad key={KEY}</title></html>", status=502, redact=[KEY])
    assert KEY not in str(exc)
    exc = raised(f"weird {KEY}", redact=[KEY])
    assert KEY not in str(exc)


def test_errors_rebuild_from_args_like_celery_does() -> None:
    exc = raised("ERROR_NO_SLOT_AVAILABLE")
    again = type(exc)(*exc.args)
    assert (again.code, again.retry_after, str(again)) == (exc.code, exc.retry_after, str(exc))


def test_error_for_uses_the_dialect() -> None:
    assert type(error_for("ERROR_ZERO_BALANCE", "2captcha")) is InsufficientFunds
    assert type(error_for("ERROR_ZERO_BALANCE", "captchaai")) is NoSlotAvailable


# -- several ids at once -------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "tok1|CAPCHA_NOT_READY|ERROR_CAPTCHA_UNSOLVABLE",
        "OK|tok1|CAPCHA_NOT_READY|ERROR_CAPTCHA_UNSOLVABLE",
        '{"status":1,"request":"tok1|CAPCHA_NOT_READY|ERROR_CAPTCHA_UNSOLVABLE"}',
    ],
)
def test_parse_many_gives_one_slot_per_id(body: str) -> None:
    first, second, third = parse_many(200, "text/html", body, 3)
    assert first == "tok1"
    assert second is NOT_READY
    assert isinstance(third, CaptchaUnsolvable)


def test_parse_many_raises_errors_for_the_whole_request() -> None:
    with pytest.raises(InvalidApiKey):
        parse_many(200, "text/html", "ERROR_WRONG_USER_KEY", 3)
    with pytest.raises(ProviderUnavailable) as info:
        parse_many(200, "text/html", "a|b", 3)
    assert info.value.code == "UNRECOGNISED_ANSWER"
    with pytest.raises(ProviderUnavailable):
        parse_many(502, "text/html", "<html>502</html>", 2)
    assert parse_many(200, "", '{"status":0,"request":"CAPCHA_NOT_READY"}', 2) == [NOT_READY] * 2
