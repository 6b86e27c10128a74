"""Image grids: checked when built, each provider's wire format (in.php's ``recaptcha=1``,
2Captcha's GridTask, CapSolver's ReCaptchaV2Classification, CapMonster's ComplexImageTask),
each provider's answer normalised to one numbering (tiles from 0), the catalogue's cells
with their sources, and the sandbox's checks and answers per dialect."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from captcha_tasks.engine.jobs import captcha_from_json, captcha_to_json
from captcha_tasks.errors import InvalidTaskInput, ProviderUnavailable
from captcha_tasks.provider import Grid, Proxy
from captcha_tasks.provider.answers import classic_solution, json_solution
from captcha_tasks.provider.captchas import for_type
from captcha_tasks.provider.classic_params import submit_files, submit_params
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
from captcha_tasks_sandbox.answers import grid_answer
from captcha_tasks_sandbox.json_protocol import (
    JsonError,
    dialect_code,
    parse_task,
    solution,
)
from captcha_tasks_sandbox.protocol import ApiError, Reply, parse_submission

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
B64 = base64.b64encode(PNG).decode("ascii")
BUSES = "/m/01bjv"  # CapSolver's question list: bus
TEXT = "Select all images with buses"
PROXY = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")

GRID = Grid(PNG, BUSES)
FOUR = Grid(PNG, TEXT, rows=4, cols=4)


def test_good_values_build_validate_and_survive_the_job_hash() -> None:
    assert GRID.validate() is GRID and (GRID.rows, GRID.cols, GRID.tiles) == (3, 3, 9)
    assert GRID.is_object_id and not FOUR.is_object_id
    assert Grid.from_base64(f"data:image/png;base64,{B64}", TEXT, rows=2, cols=3).tiles == 6
    assert captcha_from_json(captcha_to_json(FOUR)) == FOUR
    assert "bytes" in repr(GRID) and "4x4" in repr(FOUR)


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("Grid.instruction", lambda: Grid(PNG, "")),
        ("Grid.instruction", lambda: Grid(PNG, "   ")),
        ("Grid.instruction", lambda: Grid(PNG, "x" * 141)),
        ("Grid.instruction", lambda: Grid(PNG, 3)),
        ("Grid.rows", lambda: Grid(PNG, TEXT, rows=0)),
        ("Grid.cols", lambda: Grid(PNG, TEXT, cols=11)),
        ("Grid.rows", lambda: Grid(PNG, TEXT, rows=True)),
        ("Grid.cols", lambda: Grid(PNG, TEXT, cols="3")),
        ("Grid.body", lambda: Grid(b"GIF89a", TEXT)),
        ("Grid.body", lambda: Grid(b"x" * 200, TEXT)),
        ("Grid.body", lambda: Grid.from_base64("not base64!", TEXT)),
    ],
)
def test_bad_values_are_refused_by_field(field: str, build: Any) -> None:
    with pytest.raises(InvalidTaskInput, match=field):
        build()


def test_an_image_over_the_limit_is_refused_naming_the_setting() -> None:
    with pytest.raises(InvalidTaskInput, match="CAPTCHA_TASKS_MAX_IMAGE_BYTES=200"):
        Grid.from_base64(B64, TEXT, max_image_bytes=200)
    with pytest.raises(InvalidTaskInput, match=r"Grid\.body.*CAPTCHA_TASKS_MAX_IMAGE_BYTES=100"):
        GRID.validate(max_image_bytes=100)


def test_in_php_params_are_2captchas_documented_ones() -> None:
    # 2captcha-python 2.1.2 grid(): recaptcha=1; rows, cols and hintText renamed to
    # recaptcharows, recaptchacols and textinstructions.
    assert submit_params(FOUR) == {
        "method": "base64",
        "body": B64,
        "recaptcha": "1",
        "recaptcharows": "4",
        "recaptchacols": "4",
        "textinstructions": TEXT,
    }
    assert submit_files(FOUR) is None


@pytest.mark.parametrize(
    ("provider", "captcha", "expected"),
    [
        (
            "2captcha-v2",
            FOUR,
            {"type": "GridTask", "body": B64, "rows": 4, "columns": 4, "comment": TEXT},
        ),
        ("capsolver", GRID, {"type": "ReCaptchaV2Classification", "image": B64, "question": BUSES}),
        (
            "capmonster",
            FOUR,
            {
                "type": "ComplexImageTask",
                "class": "recaptcha",
                "imagesBase64": [B64],
                "metadata": {"Grid": "4x4", "Task": TEXT},
            },
        ),
        (
            "capmonster",
            GRID,
            {
                "type": "ComplexImageTask",
                "class": "recaptcha",
                "imagesBase64": [B64],
                "metadata": {"Grid": "3x3", "TaskDefinition": BUSES},
            },
        ),
    ],
)
def test_json_task_per_dialect(provider: str, captcha: Grid, expected: dict[str, Any]) -> None:
    assert task_for(dialect_for(provider), captcha) == expected  # type: ignore[arg-type]
    # An image is read from its bytes: a proxy is dropped, never sent.
    assert task_for(dialect_for(provider), captcha, PROXY) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("provider", "captcha", "why"),
    [
        ("anticaptcha", GRID, "does not solve Grid"),
        ("capsolver", FOUR, "only with reCAPTCHA's object id"),
        ("capsolver", Grid(PNG, BUSES, rows=2, cols=3), "3x3, 4x4 or 1x1 tiles only, not 2x3"),
        ("capmonster", Grid(PNG, TEXT, rows=3, cols=4), "3x3, 4x4 or 1x1 tiles only, not 3x4"),
    ],
)
def test_refused_before_anything_is_sent(provider: str, captcha: Grid, why: str) -> None:
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        check_offered(provider, captcha)  # type: ignore[arg-type]
    assert info.value.code == "TYPE_NOT_OFFERED" and why in str(info.value)


def test_who_offers_it_and_every_cell_has_its_own_source() -> None:
    assert offered_by(GRID) == ["captchaai", "2captcha", "2captcha-v2", "capsolver", "capmonster"]
    assert offered_by(FOUR) == ["captchaai", "2captcha", "2captcha-v2", "capmonster"]
    assert refusal("2captcha", Grid(PNG, TEXT, rows=2, cols=5)) is None  # any grid there
    for provider, row in catalogue().items():
        cell = row["grid"]
        offered = "grid" not in NEVER_SOLVED[provider]
        assert (cell.state == "offered") == offered, provider
        assert cell.source != SOURCES[provider]["*"], provider  # a cell of its own
    assert catalogue()["anticaptcha"]["grid"].state == "not offered"


# Each provider's answer, in the one numbering a result has.


@pytest.mark.parametrize(
    "answer",
    [
        "click:1/4/7",  # 2Captcha / CaptchaAI in.php: from 1
        "click:7/1/4/1",  # out of order, once more: the same set
    ],
)
def test_in_php_clicks_count_from_one(answer: str) -> None:
    assert for_type("grid", classic_solution(answer), (3, 3)) == {
        "tiles": [0, 3, 6],
        "rows": 3,
        "cols": 3,
    }


@pytest.mark.parametrize(
    "fields",
    [
        {"click": [1, 4, 7]},  # 2Captcha GridTask: from 1
        {"type": "multi", "objects": [6, 0, 3]},  # CapSolver: from 0
        {"answer": [True, False, False, True, False, False, True, False, False]},  # CapMonster
    ],
)
def test_json_answers_are_one_tile_set(fields: dict[str, Any]) -> None:
    solved = for_type("grid", json_solution(fields) or "", (3, 3))
    assert solved == {"tiles": [0, 3, 6], "rows": 3, "cols": 3}


@pytest.mark.parametrize(
    ("answer", "grid"),
    [
        ("click:0/4", (3, 3)),  # in.php counts from 1
        ("click:1/x", (3, 3)),
        ("click:", (3, 3)),
        ("click:1/10", (3, 3)),  # past the last tile
        ({"objects": [0, 9]}, (3, 3)),
        ({"objects": [-1]}, (3, 3)),
        ({"objects": ["1"]}, (3, 3)),
        ({"click": [True]}, (3, 3)),
        ({"answer": [True] * 16}, (3, 3)),  # more tiles than the grid has
    ],
)
def test_malformed_answers_are_refused(answer: Any, grid: tuple[int, int]) -> None:
    with pytest.raises(ProviderUnavailable) as info:
        parsed = classic_solution(answer) if isinstance(answer, str) else json_solution(answer)
        for_type("grid", parsed or "", grid)
    assert info.value.code == "UNRECOGNISED_ANSWER"


# The sandbox: each provider's code for a bad field, its answer in each dialect's form.


def test_sandbox_in_php_checks_each_field_with_2captchas_codes() -> None:
    params = {"method": "base64", "recaptcha": "1", "body": B64, "textinstructions": TEXT}
    sub = parse_submission(params, {}, 100, 10_000)
    assert (sub.kind, sub.hints["tiles"]) == ("grid", "9")  # 3x3 when the submit names none
    sub = parse_submission({**params, "recaptcharows": "4", "recaptchacols": "4"}, {}, 100, 10_000)
    assert sub.hints["tiles"] == "16"
    for broken in (
        {"textinstructions": ""},
        {"textinstructions": "x" * 141},
        {"recaptcharows": "0"},
        {"recaptchacols": "11"},
        {"recaptcharows": "three"},
    ):
        with pytest.raises(ApiError) as info:
            parse_submission({**params, **broken}, {}, 100, 10_000)
        assert info.value.code == "ERROR_BAD_PARAMETERS", broken


def test_sandbox_answers_in_php_with_clicks_from_one() -> None:
    answer = grid_answer(PNG, 9)
    assert answer == grid_answer(PNG, 16)  # one image, one answer as 3x3 or 4x4
    assert grid_answer(PNG, 1) == "click:1"
    reply = Reply.answer(answer)
    assert reply.plain == f"OK|{answer}" and reply.request == answer


@pytest.mark.parametrize(
    ("dialect", "task"),
    [
        ("2captcha-v2", {"type": "GridTask", "body": B64, "comment": TEXT, "rows": 3}),
        ("capsolver", {"type": "ReCaptchaV2Classification", "image": B64, "question": BUSES}),
        (
            "capmonster",
            {
                "type": "ComplexImageTask",
                "class": "recaptcha",
                "imagesBase64": [B64],
                "metadata": {"Grid": "3x3", "Task": TEXT},
            },
        ),
    ],
)
def test_sandbox_json_checks_each_field_with_the_dialects_code(
    dialect: str, task: dict[str, Any]
) -> None:
    sub, name = parse_task(dialect, task, 100, 10_000)
    assert (name, sub.kind, sub.image, sub.hints["tiles"]) == (task["type"], "grid", PNG, "9")
    expected = dialect_code(dialect, "ERROR_INCORRECT_SESSION_DATA")
    broken: list[dict[str, Any]] = {
        "2captcha-v2": [{"comment": ""}, {"rows": 0}, {"columns": "many"}],
        "capsolver": [{"question": TEXT}, {"question": None}],
        "capmonster": [
            {"imagesBase64": [B64, B64]},
            {"imagesBase64": B64},
            {"metadata": {"Grid": "2x3", "Task": TEXT}},
            {"metadata": {"Grid": "3x3"}},
        ],
    }[dialect]
    for change in broken:
        with pytest.raises(JsonError) as info:
            parse_task(dialect, {**task, **change}, 100, 10_000)
        assert dialect_code(dialect, info.value.code) == expected, change


@pytest.mark.parametrize(
    ("dialect", "task"),
    [
        ("anticaptcha", {"type": "GridTask"}),
        ("capmonster", {"type": "ComplexImageTask", "class": "hcaptcha"}),
        ("capsolver", {"type": "GridTask"}),
        ("2captcha-v2", {"type": "ReCaptchaV2Classification"}),
    ],
)
def test_sandbox_json_refuses_a_type_the_dialect_lacks(dialect: str, task: dict[str, Any]) -> None:
    full = {**task, "body": B64, "image": B64, "comment": TEXT, "question": BUSES}
    with pytest.raises(JsonError) as info:
        parse_task(dialect, full, 100, 10_000)
    assert info.value.code == "ERROR_TASK_NOT_SUPPORTED"


def test_sandbox_solutions_take_each_dialects_numbering() -> None:
    assert solution("2captcha-v2", "grid", "click:1/4/7", tiles=9) == {"click": [1, 4, 7]}
    assert solution("capsolver", "grid", "click:1/4/7", tiles=9) == {
        "type": "multi",
        "objects": [0, 3, 6],
    }
    flags = solution("capmonster", "grid", "click:1/4/7", tiles=9)["answer"]
    assert flags == [True, False, False, True, False, False, True, False, False]
    # And the product reads each one back as the same tiles.
    for dialect in ("2captcha-v2", "capsolver", "capmonster"):
        fields = solution(dialect, "grid", "click:1/4/7", tiles=9)
        assert for_type("grid", json_solution(fields) or "", (3, 3))["tiles"] == [0, 3, 6]  # type: ignore[index]
