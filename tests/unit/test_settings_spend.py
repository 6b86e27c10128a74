"""CAPTCHA_TASKS_PRICES and CAPTCHA_TASKS_BALANCE_FLOOR: read exactly, refused in one line."""

from __future__ import annotations

import decimal
import json

import pytest
from click.testing import CliRunner

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.provider import CAPTCHA_CLASSES
from captcha_tasks.settings import Settings
from captcha_tasks.settings.parsing import CAPTCHA_TYPES

D = decimal.Decimal


def test_prices_are_read_per_type_as_exact_decimals() -> None:
    settings = Settings.from_env(
        {"CAPTCHA_TASKS_PRICES": " recaptcha_v2=2.99, image=0.7 ,turnstile=1.45,"}
    )
    assert dict(settings.provider_config().prices) == {
        "image": D("0.7"),
        "recaptcha_v2": D("2.99"),
        "turnstile": D("1.45"),
    }
    assert Settings.from_env({}).provider_config().prices == ()


def test_the_balance_floor_is_an_exact_amount_or_none() -> None:
    floor = Settings.from_env({"CAPTCHA_TASKS_BALANCE_FLOOR": "5.10"}).provider_config()
    assert floor.balance_floor == D("5.10")
    assert Settings.from_env({}).provider_config().balance_floor is None


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("CAPTCHA_TASKS_PRICES", "recaptcha=2.99", "'recaptcha' is not a captcha type"),
        ("CAPTCHA_TASKS_PRICES", "image=cheap", "the price of image must be a number of USD"),
        ("CAPTCHA_TASKS_PRICES", "image=-1", "must be a finite number >= 0"),
        ("CAPTCHA_TASKS_PRICES", "image=NaN", "must be a finite number >= 0"),
        ("CAPTCHA_TASKS_PRICES", "image=Infinity", "must be a finite number >= 0"),
        ("CAPTCHA_TASKS_PRICES", "image", "must be type=usd_per_1000"),
        ("CAPTCHA_TASKS_PRICES", "image=", "must be type=usd_per_1000"),
        ("CAPTCHA_TASKS_PRICES", "image=1,image=2", "image is priced twice"),
        ("CAPTCHA_TASKS_BALANCE_FLOOR", "five", "must be a number of USD"),
        ("CAPTCHA_TASKS_BALANCE_FLOOR", "-1", "must be a finite number >= 0"),
    ],
)
def test_bad_values_name_the_variable_in_one_line(name: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env({name: value})
    message = str(info.value)
    assert name in message and fragment in message and "\n" not in message


def test_every_kind_the_settings_name_has_its_declaration() -> None:
    assert sorted(CAPTCHA_CLASSES) == sorted(CAPTCHA_TYPES)


def test_the_settings_command_shows_prices_and_floor_as_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from captcha_tasks.cli.main import main
    from captcha_tasks.settings import get_settings

    monkeypatch.setenv("CAPTCHA_TASKS_PRICES", "image=0.7,recaptcha_v2=2.99")
    monkeypatch.setenv("CAPTCHA_TASKS_BALANCE_FLOOR", "3")
    get_settings.cache_clear()
    try:
        out = CliRunner().invoke(main, ["settings", "--json"])
    finally:
        get_settings.cache_clear()
    assert out.exit_code == 0, out.output
    (shown,) = json.loads(out.output)["providers"]
    assert shown["prices"] == {"image": "0.7", "recaptcha_v2": "2.99"}
    assert shown["balance_floor"] == "3"
