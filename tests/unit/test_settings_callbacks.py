"""The callback settings: URL, token (or its file), receiver address and port."""

from __future__ import annotations

from pathlib import Path

import pytest

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings import Settings

TOKEN = "a" * 32


def test_callbacks_are_off_by_default() -> None:
    settings = Settings.from_env({})
    assert (settings.callback_url, settings.callback_port, settings.callback_address) == (
        None,
        None,
        "127.0.0.1",
    )


def test_the_token_comes_from_the_variable_or_its_file(tmp_path: Path) -> None:
    env = {"CAPTCHA_TASKS_CALLBACK_URL": "https://cb.example.com/captcha/"}
    assert Settings.from_env({**env, "CAPTCHA_TASKS_CALLBACK_TOKEN": TOKEN}).callback_token == TOKEN
    secret = tmp_path / "token"
    secret.write_text("b" * 40 + "\n")
    settings = Settings.from_env({**env, "CAPTCHA_TASKS_CALLBACK_TOKEN_FILE": str(secret)})
    assert settings.callback_token == "b" * 40
    assert settings.callback_url == "https://cb.example.com/captcha"


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        (
            {"CAPTCHA_TASKS_CALLBACK_URL": "https://cb.example.com"},
            "need CAPTCHA_TASKS_CALLBACK_TOKEN",
        ),
        ({"CAPTCHA_TASKS_CALLBACK_PORT": "8090"}, "need CAPTCHA_TASKS_CALLBACK_TOKEN"),
        ({"CAPTCHA_TASKS_CALLBACK_TOKEN": "short"}, "32-128"),
        ({"CAPTCHA_TASKS_CALLBACK_TOKEN": "x" * 31 + "/"}, "32-128"),
        ({"CAPTCHA_TASKS_CALLBACK_URL": "ftp://cb.example.com"}, "http(s)"),
        ({"CAPTCHA_TASKS_CALLBACK_URL": "https://u:p@cb.example.com"}, "credentials"),
        ({"CAPTCHA_TASKS_CALLBACK_TOKEN_FILE": "/nonexistent/token"}, "cannot read"),
        ({"CAPTCHA_TASKS_CALLBACK_PORT": "70000"}, "0-65535"),
    ],
)
def test_bad_callback_settings_name_the_problem(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        Settings.from_env(env)


def test_the_token_is_never_shown() -> None:
    settings = Settings.from_env(
        {
            "CAPTCHA_TASKS_CALLBACK_URL": "https://cb.example.com",
            "CAPTCHA_TASKS_CALLBACK_TOKEN": TOKEN,
        }
    )
    assert TOKEN not in repr(settings)
    assert settings.describe()["callback_token"] == "***"
