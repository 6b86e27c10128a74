"""Answers of the new kinds in the one shape the product returns, whatever the wire
(res.php json=1 objects and lists, plain ``coordinates:``, the ``useragent`` field;
getTaskResult solutions per dialect), and malformed ones refused with a typed error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks.errors import ProviderUnavailable
from captcha_tasks.provider import Answer, JsonTaskClient, SolverClient
from captcha_tasks.provider.captchas import for_type
from tests.support.json_double import JsonDouble, JsonReply
from tests.support.provider_double import ProviderDouble, Scripted

KEY = "0123456789abcdef0123456789abcdef"
CAPSOLVER_KEY = "CAP-0123456789ABCDEF0123456789ABCDEF"
V4 = {
    "captcha_id": "e392e1d7fd421dc63325744d5a2b9c73",
    "lot_number": "7c5a0d0e7d9f4d0c",
    "pass_token": "a7c2f6c1e0b1",
    "gen_time": "1718000000",
    "captcha_output": "WsP8Xy==",
}
UA = "Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0 Safari/537.36"
POINTS = [{"x": 38, "y": 90}, {"x": 120, "y": 44}]


@pytest.fixture
def classic() -> Iterator[tuple[ProviderDouble, SolverClient]]:
    with ProviderDouble(api_key=KEY) as double:
        yield double, SolverClient(double.base_url, KEY, provider="2captcha")


@pytest.fixture
def double() -> Iterator[JsonDouble]:
    with JsonDouble() as server:
        yield server


def classic_get(classic: tuple[ProviderDouble, SolverClient], body: Any) -> Answer:
    double, client = classic
    text = body if isinstance(body, str) else json.dumps(body)
    double.script(Scripted(body=text))
    answer = client.get("12345")
    assert answer is not None
    return answer


def json_get(double: JsonDouble, provider: str, solution: dict[str, Any]) -> Answer:
    double.script(
        "/getTaskResult", JsonReply({"errorId": 0, "status": "ready", "solution": solution})
    )
    key = CAPSOLVER_KEY if provider == "capsolver" else KEY
    client = JsonTaskClient(double.base_url, key, provider=provider)  # type: ignore[arg-type]
    answer = client.get("74372499131")
    assert answer is not None
    return answer


# -- res.php -------------------------------------------------------------------------------


def test_classic_geetest_v4_and_aws_objects_pass_as_dicts(classic: Any) -> None:
    assert classic_get(classic, {"status": 1, "request": V4}).solution == V4
    aws = {"captcha_voucher": "eyJ0eXAi", "existing_token": "f5a9c3d1:AAAB"}
    assert classic_get(classic, {"status": 1, "request": aws}).solution == aws


def test_classic_funcaptcha_token_passes_as_is(classic: Any) -> None:
    token = "5d2c7e9a1b3f4e6d8.1234567890|r=eu-west-1|meta=3|pk=X|at=40|ag=101"
    assert classic_get(classic, {"status": 1, "request": token}).solution == token


@pytest.mark.parametrize(
    "body",
    [
        {"status": 1, "request": [{"x": "38", "y": "90"}, {"x": "120", "y": "44"}]},
        {"status": 1, "request": [{"x": 38, "y": 90}, {"x": 120, "y": 44}]},
        "OK|coordinates:x=38,y=90;x=120,y=44",
    ],
)
def test_classic_coordinates_become_integer_points(classic: Any, body: Any) -> None:
    assert classic_get(classic, body).solution == POINTS


def test_classic_useragent_field_is_the_answers_user_agent(classic: Any) -> None:
    answer = classic_get(classic, {"status": 1, "request": "0.tokentoken", "useragent": UA})
    assert answer.solution == "0.tokentoken" and answer.user_agent == UA
    assert classic_get(classic, {"status": 1, "request": "0.tok"}).user_agent is None


@pytest.mark.parametrize(
    "body",
    [
        {"status": 1, "request": [{"x": "38"}]},
        {"status": 1, "request": [{"x": "-3", "y": "9"}]},
        {"status": 1, "request": [{"x": "a", "y": "9"}]},
        {"status": 1, "request": [{"x": True, "y": 9}]},
        "OK|coordinates:x=38;y=90",
        "OK|coordinates:",
        {"status": 1, "request": {**V4, "pass_token": None}},
        {"status": 1, "request": {"captcha_voucher": "v"}},
    ],
)
def test_classic_malformed_answers_are_refused_typed(classic: Any, body: Any) -> None:
    with pytest.raises(ProviderUnavailable) as info:
        classic_get(classic, body)
    assert info.value.code == "UNRECOGNISED_ANSWER"
    assert classic[1].stats["errors:UNRECOGNISED_ANSWER"] == 1


def test_classic_batch_reads_normalize_each_slot(classic: Any) -> None:
    double, client = classic
    double.script(
        Scripted(body="OK|coordinates:x=38,y=90;x=120,y=44|" + json.dumps(V4) + "|coordinates:x=1")
    )
    got = client.get_many(["1", "2", "3"])
    assert isinstance(got["1"], Answer) and got["1"].solution == POINTS
    assert isinstance(got["2"], Answer) and got["2"].solution == V4
    assert isinstance(got["3"], ProviderUnavailable)


# -- getTaskResult -------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["2captcha-v2", "anticaptcha", "capsolver", "capmonster"])
def test_json_geetest_v4_is_the_five_strings(double: JsonDouble, provider: str) -> None:
    assert json_get(double, provider, dict(V4)).solution == V4
    # A number for gen_time is the same digits.
    assert json_get(double, provider, {**V4, "gen_time": 1718000000}).solution == V4


@pytest.mark.parametrize(
    ("provider", "solution", "expected"),
    [
        (
            "2captcha-v2",
            {"captcha_voucher": "v1", "existing_token": "t1"},
            {"captcha_voucher": "v1", "existing_token": "t1"},
        ),
        (
            "capmonster",
            {"captcha_voucher": "v1", "existing_token": "t1"},
            {"captcha_voucher": "v1", "existing_token": "t1"},
        ),
        ("capsolver", {"cookie": "aws-tok"}, {"aws_waf_token": "aws-tok"}),
        (
            "capmonster",
            {"cookies": {"aws-waf-token": "aws-tok"}, "userAgent": UA},
            {"aws_waf_token": "aws-tok"},
        ),
    ],
)
def test_json_aws_waf_in_the_spec_shapes(
    double: JsonDouble, provider: str, solution: dict[str, Any], expected: dict[str, str]
) -> None:
    assert json_get(double, provider, solution).solution == expected


@pytest.mark.parametrize(
    ("provider", "points"),
    [
        ("2captcha-v2", [{"x": 38, "y": 90}, {"x": 120, "y": 44}]),
        ("anticaptcha", [[38, 90], [120, 44]]),
        ("anticaptcha", [[38.0, 90.0], [120, 44]]),
    ],
)
def test_json_coordinates_become_integer_points(
    double: JsonDouble, provider: str, points: list[Any]
) -> None:
    assert json_get(double, provider, {"coordinates": points}).solution == POINTS


def test_json_funcaptcha_and_challenge_tokens_carry_the_user_agent(double: JsonDouble) -> None:
    answer = json_get(double, "capmonster", {"token": "fc-token", "userAgent": UA})
    assert answer.solution == "fc-token" and answer.user_agent == UA
    answer = json_get(double, "anticaptcha", {"token": "cf-token", "userAgent": UA})
    assert answer.solution == "cf-token" and answer.user_agent == UA


@pytest.mark.parametrize(
    "solution",
    [
        {"coordinates": [[38, 90, 1]]},
        {"coordinates": [[38.5, 90]]},
        {"coordinates": []},
        {"coordinates": [{"x": 1}]},
        {"cookie": 5},
        {"cookies": {"aws-waf-token": ""}},
        {**V4, "captcha_output": ["x"]},
    ],
)
def test_json_malformed_answers_are_refused_typed(
    double: JsonDouble, solution: dict[str, Any]
) -> None:
    with pytest.raises(ProviderUnavailable) as info:
        json_get(double, "anticaptcha", solution)
    assert info.value.code == "UNRECOGNISED_ANSWER"


def test_an_aws_waf_cookie_sent_as_a_bare_token_becomes_the_cookie() -> None:
    # Anti-Captcha's {"token": ...} reads as any token until the type is known.
    assert for_type("aws_waf", "a1b2:c3d4:e5") == {"aws_waf_token": "a1b2:c3d4:e5"}
    assert for_type("funcaptcha", "tok|r=eu") == "tok|r=eu"
    pair = {"captcha_voucher": "v", "existing_token": "t"}
    assert for_type("aws_waf", pair) == pair
