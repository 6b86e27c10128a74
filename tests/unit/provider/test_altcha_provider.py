"""Altcha through a provider: the ``CAPTCHA_TASKS_ALTCHA_SOLVER`` setting, the
:class:`Altcha` kind's wire format at each provider that offers it (in.php's
``method=altcha``, 2Captcha's and Anti-Captcha's ``AltchaTask``, CapMonster's CustomTask
of class ``altcha``), the catalogue's cells with their sources, the sandbox's real
payloads, and which way ``solve_altcha``'s body goes in each mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks import solve_altcha
from captcha_tasks.errors import ConfigurationError, InvalidTaskInput
from captcha_tasks.provider import Altcha
from captcha_tasks.provider.classic_params import submit_params
from captcha_tasks.provider.json_dialects import dialect_for
from captcha_tasks.provider.json_tasks import task_for
from captcha_tasks.provider.offers import (
    NEVER_SOLVED,
    SOURCES,
    catalogue,
    check_offered,
    offered_by,
    refusal,
)
from captcha_tasks.settings import Settings, get_settings
from captcha_tasks.worker.solve_tasks import SolveTask
from captcha_tasks.worker.task_bases import SolverTask
from captcha_tasks_sandbox.answers import altcha_answer
from captcha_tasks_sandbox.json_protocol import JsonError, parse_task, solution
from captcha_tasks_sandbox.protocol import ApiError, parse_submission
from tests.support.altcha_reference import create_challenge, verify_solution

PAGE = "https://example.com/contact"
KEY = "site hmac key"
CHALLENGE = create_challenge(KEY, 321, max_number=50_000)
TEXT = json.dumps(CHALLENGE)
ALTCHA = Altcha(PAGE, TEXT)


# The setting.


def test_the_setting_defaults_to_the_worker_and_reads_each_mode() -> None:
    assert Settings.from_env({}).altcha_solver == "worker"
    for mode in ("worker", "provider", "auto"):
        settings = Settings.from_env({"CAPTCHA_TASKS_ALTCHA_SOLVER": mode})
        assert settings.altcha_solver == mode


@pytest.mark.parametrize("value", ["gpu", "workers", "1"])
def test_a_bad_mode_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigurationError, match="CAPTCHA_TASKS_ALTCHA_SOLVER must be worker"):
        Settings.from_env({"CAPTCHA_TASKS_ALTCHA_SOLVER": value})


# The kind and its encodings.


def test_the_kind_checks_its_challenge_whatever_its_bound() -> None:
    hard = Altcha(PAGE, json.dumps(create_challenge(KEY, 1, max_number=10**12)))
    assert hard.validate() is hard and hard.challenge().max_number == 10**12
    with pytest.raises(InvalidTaskInput, match="BAD_ALTCHA_CHALLENGE"):
        Altcha(PAGE, '{"challenge": "zz"}')
    with pytest.raises(InvalidTaskInput, match=r"Altcha\.pageurl"):
        Altcha("example.com/contact", TEXT)


def test_in_php_params_are_2captcha_pythons() -> None:
    # 2captcha-python 2.1.2 altcha(pageurl, challenge_json=...): method=altcha.
    expected = {"method": "altcha", "pageurl": PAGE, "challenge_json": TEXT}
    assert submit_params(ALTCHA) == expected


@pytest.mark.parametrize("provider", ["2captcha-v2", "anticaptcha"])
def test_json_task_sends_the_challenge_json(provider: str) -> None:
    task = task_for(dialect_for(provider), ALTCHA)  # type: ignore[arg-type]
    assert task == {"type": "AltchaTaskProxyless", "websiteURL": PAGE, "challengeJSON": TEXT}


def test_capmonster_task_is_its_custom_task_with_the_challenges_fields_as_strings() -> None:
    task = task_for(dialect_for("capmonster"), ALTCHA)
    assert task == {
        "type": "CustomTask",
        "class": "altcha",
        "websiteURL": PAGE,
        "websiteKey": "",
        "metadata": {
            "challenge": CHALLENGE["challenge"],
            "iterations": "50000",
            "salt": CHALLENGE["salt"],
            "signature": CHALLENGE["signature"],
        },
    }


def test_capmonster_refuses_what_its_metadata_cannot_say() -> None:
    sha1 = Altcha(PAGE, json.dumps(create_challenge(KEY, 3, algorithm="SHA-1")))
    with pytest.raises(InvalidTaskInput, match="SHA-256 challenges only") as info:
        check_offered("capmonster", sha1)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert offered_by(sha1) == ["2captcha", "2captcha-v2", "anticaptcha"]


def test_who_offers_it_and_every_cell_has_its_own_source() -> None:
    assert offered_by(ALTCHA) == ["2captcha", "2captcha-v2", "anticaptcha", "capmonster"]
    for provider in ("captchaai", "capsolver"):
        with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
            check_offered(provider, ALTCHA)  # type: ignore[arg-type]
        assert info.value.code == "TYPE_NOT_OFFERED"
    for provider, row in catalogue().items():
        cell = row["altcha"]
        assert (cell.state == "offered") == ("altcha" not in NEVER_SOLVED[provider]), provider
        assert cell.source != SOURCES[provider]["*"], provider  # a cell of its own
    assert refusal("anticaptcha", ALTCHA, proxied=True) is None  # AltchaTask exists


# The sandbox answers with payloads a site accepts.


def test_sandbox_in_php_solves_the_challenge_it_is_sent() -> None:
    sub = parse_submission(submit_params(ALTCHA), {}, 100, 10_000)
    assert (sub.kind, sub.hostname) == ("altcha", "example.com")
    payload = altcha_answer(sub.challenge)
    assert payload is not None and verify_solution(payload, KEY)
    unsolvable = json.dumps(create_challenge(KEY, 5_000, max_number=4_999))
    assert altcha_answer(unsolvable) is None  # answered ERROR_CAPTCHA_UNSOLVABLE
    for params in (
        {"method": "altcha", "pageurl": PAGE},  # no challenge
        {"method": "altcha", "pageurl": PAGE, "challenge_url": "/c"},  # nothing fetched
        {"method": "altcha", "pageurl": PAGE, "challenge_json": '{"salt": 1}'},
    ):
        with pytest.raises(ApiError) as info:
            parse_submission(params, {}, 100, 10_000)
        assert info.value.code == "ERROR_BAD_PARAMETERS", params


@pytest.mark.parametrize("dialect", ["2captcha-v2", "anticaptcha", "capmonster"])
def test_sandbox_json_reads_each_dialects_task_back_into_the_challenge(dialect: str) -> None:
    task = task_for(dialect_for(dialect), ALTCHA)  # type: ignore[arg-type]
    sub, _ = parse_task(dialect, task, 100, 10_000)
    assert sub.kind == "altcha"
    payload = altcha_answer(sub.challenge)
    assert payload is not None and verify_solution(payload, KEY)
    assert solution(dialect, "altcha", payload) == {"token": payload}


@pytest.mark.parametrize("dialect", ["capsolver"])
def test_sandbox_json_refuses_it_where_the_provider_lacks_it(dialect: str) -> None:
    task = {"type": "AltchaTaskProxyless", "websiteURL": PAGE, "challengeJSON": TEXT}
    with pytest.raises(JsonError) as info:
        parse_task(dialect, task, 100, 10_000)
    assert info.value.code == "ERROR_TASK_NOT_SUPPORTED"


def test_sandbox_capmonster_needs_every_metadata_field_as_a_string() -> None:
    task = task_for(dialect_for("capmonster"), ALTCHA)
    for broken in ({"iterations": 50_000}, {"signature": None}, {"iterations": "many"}):
        metadata = {**task["metadata"], **broken}
        with pytest.raises(JsonError):
            parse_task("capmonster", {**task, "metadata": metadata}, 100, 10_000)


# Which way solve_altcha's body goes.


@pytest.fixture
def admitted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Altcha]]:
    """The captchas ``solve_altcha``'s body hands to the engine's admission (recorded,
    not queued); nothing reaches a broker, Redis or a provider."""
    for name in ("CAPTCHA_TASKS_ALTCHA_SOLVER", "CAPTCHA_TASKS_ALTCHA_MAX_NUMBER"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    captchas: list[Altcha] = []

    def admit(self: SolveTask, build: Any, **options: Any) -> dict[str, str]:
        assert options == {}  # no proxy, no route: the challenge is all a provider needs
        captchas.append(build())
        return {"admitted": "yes"}

    monkeypatch.setattr(SolveTask, "admit", admit)
    monkeypatch.setattr(SolverTask, "apply_async", lambda *a, **k: None)
    yield captchas
    get_settings.cache_clear()


def _mode(monkeypatch: pytest.MonkeyPatch, mode: str, bound: int = 100_000) -> None:
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_SOLVER", mode)
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_MAX_NUMBER", str(bound))
    get_settings.cache_clear()


EASY = create_challenge(KEY, 17, max_number=1_000)
HARD = create_challenge(KEY, 17, max_number=200_000)


def test_worker_mode_solves_an_easy_one_and_refuses_a_hard_one(
    admitted: list[Altcha], monkeypatch: pytest.MonkeyPatch
) -> None:
    _mode(monkeypatch, "worker")
    result = solve_altcha(PAGE, challenge_json=EASY)
    assert verify_solution(result["solution"], KEY) and result["cost"] == "0"
    with pytest.raises(InvalidTaskInput, match="ALTCHA_TOO_HARD"):
        solve_altcha(PAGE, challenge_json=HARD)
    assert admitted == []


def test_provider_mode_admits_every_challenge_as_json(
    admitted: list[Altcha], monkeypatch: pytest.MonkeyPatch
) -> None:
    _mode(monkeypatch, "provider")
    assert solve_altcha(PAGE, challenge_json=EASY) == {"admitted": "yes"}
    assert solve_altcha(PAGE, challenge_json=json.dumps(HARD)) == {"admitted": "yes"}
    assert [json.loads(c.challenge_json) for c in admitted] == [EASY, HARD]
    assert {c.pageurl for c in admitted} == {PAGE}


def test_auto_mode_solves_within_the_bound_and_admits_over_it(
    admitted: list[Altcha], monkeypatch: pytest.MonkeyPatch
) -> None:
    _mode(monkeypatch, "auto")
    result = solve_altcha(PAGE, challenge_json=EASY)
    assert verify_solution(result["solution"], KEY) and result["provider"] is None
    assert admitted == []
    assert solve_altcha(PAGE, challenge_json=HARD) == {"admitted": "yes"}
    assert [c.challenge().max_number for c in admitted] == [200_000]


def test_outside_worker_mode_the_caller_does_not_refuse_a_hard_one(
    admitted: list[Altcha], monkeypatch: pytest.MonkeyPatch
) -> None:
    _mode(monkeypatch, "auto")
    solve_altcha.delay(PAGE, challenge_json=HARD)  # the caller's check passes
    assert admitted == []  # the caller checks; admitting is the worker's
    _mode(monkeypatch, "worker")
    with pytest.raises(InvalidTaskInput, match="ALTCHA_TOO_HARD"):
        solve_altcha.delay(PAGE, challenge_json=HARD)
