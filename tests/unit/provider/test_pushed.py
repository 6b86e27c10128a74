"""Pushed answers read as a poll would read them, in both shapes."""

from __future__ import annotations

import pytest

from captcha_tasks.errors import CaptchaUnsolvable, InvalidApiKey
from captcha_tasks.provider import Answer
from captcha_tasks.provider.pushed import pushed_id, read_pushed


def test_a_pingback_answer_and_its_errors() -> None:
    answer = read_pushed("2captcha", "77", {"id": "77", "code": "03AG-token"}, None)
    assert answer == Answer("77", "03AG-token")
    unsolvable = read_pushed("captchaai", "77", {"code": "ERROR_CAPTCHA_UNSOLVABLE"}, None)
    assert isinstance(unsolvable, CaptchaUnsolvable)
    geetest = read_pushed(
        "2captcha",
        "7",
        {"code": '{"geetest_challenge":"c","geetest_validate":"v","geetest_seccode":"s"}'},
        None,
    )
    assert isinstance(geetest, Answer) and isinstance(geetest.solution, dict)
    with pytest.raises(ValueError):
        read_pushed("2captcha", "77", {"id": "77"}, None)


def test_a_json_callback_body_is_a_get_task_result_answer() -> None:
    ready = {
        "errorId": 0,
        "status": "ready",
        "solution": {"gRecaptchaResponse": "tok"},
        "cost": "0.00299",
    }
    answer = read_pushed("anticaptcha", "5", {}, ready)
    assert isinstance(answer, Answer) and answer.solution == "tok" and answer.cost is not None
    assert read_pushed("capmonster", "5", {}, {"errorId": 0, "status": "processing"}) is None
    failed = read_pushed(
        "capsolver", "5", {}, {"errorId": 1, "errorCode": "ERROR_CAPTCHA_UNSOLVABLE"}
    )
    assert isinstance(failed, CaptchaUnsolvable)
    assert isinstance(
        read_pushed(
            "2captcha-v2", "5", {}, {"errorId": 1, "errorCode": "ERROR_KEY_DOES_NOT_EXIST"}
        ),
        InvalidApiKey,
    )
    with pytest.raises(ValueError):
        read_pushed("capmonster", "5", {}, {"hello": "world"})


def test_the_id_a_callback_names() -> None:
    assert pushed_id({"id": "12"}, None) == "12"
    assert pushed_id({}, {"taskId": 34}) == "34"
    assert pushed_id({}, {"status": "ready"}) is None
