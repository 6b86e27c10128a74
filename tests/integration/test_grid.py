"""Image grids end to end: ``.delay()`` through a real ``celery worker`` and the sandbox,
on every provider that offers them (2Captcha over both protocols, CaptchaAI, CapSolver's
ReCaptchaV2Classification, CapMonster Cloud's ComplexImageTask), one tile set for one
image whatever the provider's numbering; refused at admission with ``TYPE_NOT_OFFERED``,
nothing sent and nothing queued, at Anti-Captcha, at CapSolver without an object id and at
CapMonster for a grid it does not read."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from captcha_tasks import solve_grid
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks_sandbox.answers import grid_answer
from tests.support.workers import provider_env, provider_sandbox

pytestmark = pytest.mark.integration

#: One image, told apart from any other by its bytes (the sandbox's answer reads them).
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) + b"grid"
#: reCAPTCHA's object id for buses: CapSolver's question, CapMonster's TaskDefinition.
BUSES = "/m/01bjv"
#: Who offers it (provider/offers.py SOURCES: each provider's docs and SDK).
OFFERED = ["2captcha", "2captcha-v2", "captchaai", "capmonster", "capsolver"]


def expected(rows: int, cols: int) -> list[int]:
    """The sandbox's tiles for ``PNG`` (from 1, in.php's form) as the product numbers
    them: from 0."""
    clicked = grid_answer(PNG, rows * cols).removeprefix("click:").split("/")
    return [int(tile) - 1 for tile in clicked]


@pytest.mark.parametrize("provider", OFFERED)
def test_solved_where_offered(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, provider: str
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    worker_factory(provider_env(sandbox, provider))
    image = base64.b64encode(PNG).decode("ascii")
    result = solve_grid.delay(image, BUSES, rows=4, cols=4).get(timeout=90)
    assert (result["type"], result["source"], result["protocol"]) == ("grid", "api", provider)
    assert result["submits"] == 1
    tiles = expected(4, 4)
    assert tiles and tiles == sorted(set(tiles))
    # The same tiles, numbered from 0, whichever numbering the provider answered in.
    assert result["solution"] == {"tiles": tiles, "rows": 4, "cols": 4}
    assert result["expires_at"] is None  # tiles to click do not expire
    stats = sandbox.stats()
    assert (stats["submitted"], stats["param_errors"]) == (1, 0)
    assert stats["by_type"]["grid"] == 1


@pytest.mark.parametrize(
    ("provider", "instruction", "rows", "why"),
    [
        ("anticaptcha", BUSES, 3, "does not solve Grid"),
        ("capsolver", "Select all images with buses", 3, "only with reCAPTCHA's object id"),
        ("capmonster", BUSES, 2, "of 3x3, 4x4 or 1x1 tiles only, not 2x3"),
    ],
)
def test_refused_at_admission_where_not_offered(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    provider: str,
    instruction: str,
    rows: int,
    why: str,
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    worker_factory(provider_env(sandbox, provider))
    image = base64.b64encode(PNG).decode("ascii")
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        solve_grid.delay(image, instruction, rows=rows, cols=3).get(timeout=30)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert why in str(info.value) and "nothing was sent" in str(info.value)
    assert sandbox.stats()["submitted"] == 0
    assert celery_app.backend.client.keys("ct:job:*") == []
