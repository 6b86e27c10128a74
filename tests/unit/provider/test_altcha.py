"""Altcha's proof of work solved in the package, checked against challenges made and
payloads verified by the reference algorithm (tests/support/altcha_reference.py)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from captcha_tasks.errors import CaptchaUnsolvable, InvalidTaskInput
from captcha_tasks.provider.altcha import DEFAULT_MAX_NUMBER, parse_challenge, solve
from tests.support.altcha_reference import create_challenge, verify_solution

KEY = "the site's hmac key"
BOUND = 1_000_000


def _solved(challenge: Any, bound: int = BOUND) -> tuple[str, int]:
    parsed = parse_challenge(challenge, max_number_bound=bound)
    solution = solve(parsed)
    return solution.payload(parsed), solution.number


@pytest.mark.parametrize("algorithm", ["SHA-1", "SHA-256", "SHA-512"])
def test_the_number_is_found_and_the_reference_verifier_accepts_the_payload(
    algorithm: str,
) -> None:
    challenge = create_challenge(KEY, 31_337, algorithm=algorithm)
    payload, number = _solved(challenge)
    assert number == 31_337
    assert verify_solution(payload, KEY)
    fields = json.loads(base64.b64decode(payload))
    assert set(fields) == {"algorithm", "challenge", "number", "salt", "signature", "took"}
    assert (fields["algorithm"], fields["number"], fields["salt"]) == (
        algorithm,
        31_337,
        challenge["salt"],
    )
    assert isinstance(fields["took"], int) and fields["took"] >= 0
    # The verifier is a real check: another key, number or salt is refused.
    assert not verify_solution(payload, "another key")
    tampered = {**fields, "number": 31_336}
    assert not verify_solution(base64.b64encode(json.dumps(tampered).encode()).decode(), KEY)


def test_a_salt_with_parameters_is_hashed_as_given_and_its_expiry_read() -> None:
    expires = int(time.time()) + 600
    challenge = create_challenge(KEY, 777, salt="c0ffee?lang=de", expires=expires)
    assert challenge["salt"] == f"c0ffee?lang=de&expires={expires}&"
    payload, number = _solved(challenge)
    assert number == 777 and verify_solution(payload, KEY)
    assert parse_challenge(challenge, max_number_bound=BOUND).expires == float(expires)
    assert parse_challenge(create_challenge(KEY, 1), max_number_bound=BOUND).expires is None
    # Expired: the site refuses the payload (the solver does not judge it).
    old = create_challenge(KEY, 5, expires=int(time.time()) - 1)
    assert not verify_solution(_solved(old)[0], KEY)


def test_the_json_text_and_both_spellings_of_the_bound_are_taken() -> None:
    text = json.dumps(create_challenge(KEY, 42, field="maxNumber", max_number=50))
    assert parse_challenge(text, max_number_bound=BOUND).max_number == 50
    assert verify_solution(_solved(text)[0], KEY)
    # No bound named: the widget's default.
    unbounded = create_challenge(KEY, 9)
    del unbounded["maxnumber"]
    assert parse_challenge(unbounded, max_number_bound=BOUND).max_number == DEFAULT_MAX_NUMBER


def test_a_maxnumber_over_the_bound_is_refused_before_any_hashing() -> None:
    challenge = create_challenge(KEY, 3, max_number=BOUND + 1)
    with pytest.raises(InvalidTaskInput) as caught:
        parse_challenge(challenge, max_number_bound=BOUND)
    assert caught.value.code == "ALTCHA_TOO_HARD"
    message = str(caught.value)
    assert "1,000,001" in message and "CAPTCHA_TASKS_ALTCHA_MAX_NUMBER" in message
    assert parse_challenge(challenge, max_number_bound=BOUND + 1).max_number == BOUND + 1
    # A challenge that names no bound is taken at the widget's default: refused below it.
    unbounded = create_challenge(KEY, 3)
    del unbounded["maxnumber"]
    with pytest.raises(InvalidTaskInput, match="ALTCHA_TOO_HARD"):
        parse_challenge(unbounded, max_number_bound=DEFAULT_MAX_NUMBER - 1)


def test_a_number_beyond_maxnumber_is_not_found_and_fails_typed() -> None:
    challenge = create_challenge(KEY, 1_001, max_number=1_000)
    with pytest.raises(CaptchaUnsolvable) as caught:
        _solved(challenge)
    assert caught.value.code == "ALTCHA_NO_SOLUTION"
    # maxnumber itself is in range, as in the reference's loop.
    assert _solved(create_challenge(KEY, 1_000, max_number=1_000))[1] == 1_000
    assert _solved(create_challenge(KEY, 0, max_number=1_000))[1] == 0


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ({**create_challenge(KEY, 1), "algorithm": "MD5"}, "algorithm"),
        ({**create_challenge(KEY, 1), "algorithm": ["SHA-1"]}, "algorithm"),
        ({**create_challenge(KEY, 1), "challenge": "xyz"}, "'challenge'"),
        ({**create_challenge(KEY, 1), "challenge": "ab" * 20}, "'challenge'"),  # SHA-1 long
        ({**create_challenge(KEY, 1), "salt": ""}, "'salt'"),
        ({**create_challenge(KEY, 1), "signature": 7}, "'signature'"),
        ({**create_challenge(KEY, 1), "maxnumber": "100"}, "'maxnumber'"),
        ({**create_challenge(KEY, 1), "maxnumber": True}, "'maxnumber'"),
        ({**create_challenge(KEY, 1), "maxnumber": 0}, "'maxnumber'"),
        ("x" * 17_000, "over 16384 bytes"),
    ],
)
def test_what_is_not_a_challenge_is_refused_naming_the_fault(raw: Any, names: str) -> None:
    with pytest.raises(InvalidTaskInput, match=names) as caught:
        parse_challenge(raw, max_number_bound=BOUND)
    assert caught.value.code == "BAD_ALTCHA_CHALLENGE"
