"""The integration's Scrapy settings, its reactor check and its allowlist test."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.settings import Settings as ScrapySettings

from captcha_tasks.contrib.scrapy import CaptchaTasksCookiesMiddleware, options
from captcha_tasks.contrib.scrapy.options import (
    Options,
    allowlisted,
    enabled_middlewares,
    require_asyncio,
)
from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings import Settings


def test_defaults_with_scrapys_own_settings() -> None:
    assert Options.from_settings(ScrapySettings()) == Options(True, 300.0, 2)


def test_values_as_python_or_as_text_from_the_command_line() -> None:
    typed = ScrapySettings(
        {
            "CAPTCHA_TASKS_SOLVE_TIMEOUT": 45,
            "CAPTCHA_TASKS_MAX_REISSUES": 0,
            "CAPTCHA_TASKS_ENABLED": False,
        }
    )
    texts = ScrapySettings(
        {
            "CAPTCHA_TASKS_SOLVE_TIMEOUT": "45",
            "CAPTCHA_TASKS_MAX_REISSUES": "0",
            "CAPTCHA_TASKS_ENABLED": "false",
        }
    )
    assert Options.from_settings(typed) == Options.from_settings(texts) == Options(False, 45.0, 0)


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("CAPTCHA_TASKS_SOLVE_TIMEOUT", 0, "must be seconds in (0, 3600]"),
        ("CAPTCHA_TASKS_SOLVE_TIMEOUT", "5 min", "must be a number of seconds, not '5 min'"),
        ("CAPTCHA_TASKS_SOLVE_TIMEOUT", 30_000, "must be seconds in (0, 3600]"),
        ("CAPTCHA_TASKS_MAX_REISSUES", -1, "must be 0 to 10"),
        ("CAPTCHA_TASKS_MAX_REISSUES", 2.5, "must be a whole number"),
        ("CAPTCHA_TASKS_MAX_REISSUES", True, "must be a whole number"),
        ("CAPTCHA_TASKS_ENABLED", "maybe", "must be true or false"),
    ],
)
def test_a_bad_value_names_its_setting(name: str, value: object, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Options.from_settings(ScrapySettings({name: value}))
    assert info.value.args[0].startswith(name) and message in info.value.args[0]


@pytest.mark.parametrize("name", ["CAPTCHA_TASKS_REDIS_URL", "CAPTCHA_TASKS_MAX_REISUES"])
def test_a_cluster_variable_or_a_typo_in_scrapy_settings_is_refused(name: str) -> None:
    # A cluster variable in settings.py would be silently ignored: the workers read the
    # environment, and so does the crawl.
    with pytest.raises(ConfigurationError) as info:
        Options.from_settings(ScrapySettings({name: "redis://elsewhere:6379/0"}))
    message = info.value.args[0]
    assert message.startswith(f"{name}: not a Scrapy setting") and "environment" in message
    assert "redis://elsewhere" not in message  # the value (a URL, a password) is not shown


def test_every_setting_is_documented() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "SCRAPY.md").read_text()
    for name, (_, default, _) in options.SETTING_NAMES.items():
        assert f"| `{name}` | `{default!r}` |" in text, name


def test_a_reactor_other_than_asyncio_fails_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import scrapy.utils.asyncio

    monkeypatch.setattr(scrapy.utils.asyncio, "is_asyncio_available", lambda: False)
    with pytest.raises(ConfigurationError, match="TWISTED_REACTOR"):
        require_asyncio()

    def no_reactor() -> bool:
        raise RuntimeError("is_asyncio_available() called without an installed reactor")

    monkeypatch.setattr(scrapy.utils.asyncio, "is_asyncio_available", no_reactor)
    with pytest.raises(ConfigurationError, match="TWISTED_REACTOR"):
        require_asyncio()
    monkeypatch.setattr(scrapy.utils.asyncio, "is_asyncio_available", lambda: True)
    require_asyncio()


def test_enabled_middlewares_compose_the_base_and_drop_the_disabled() -> None:
    assert CookiesMiddleware in enabled_middlewares(ScrapySettings())
    ours = enabled_middlewares(
        ScrapySettings(
            {
                "DOWNLOADER_MIDDLEWARES": {
                    "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
                    CaptchaTasksCookiesMiddleware: 700,
                }
            }
        )
    )
    assert CaptchaTasksCookiesMiddleware in ours and CookiesMiddleware not in ours


def test_allowlisted_follows_the_clusters_allowlist_without_dns(cluster: Settings) -> None:
    assert allowlisted("https://shop.example/a", cluster)
    assert allowlisted("http://www.shop.example:8080/a?b=c", cluster)
    assert not allowlisted("https://other.example/", cluster)
    assert not allowlisted("ftp://shop.example/", cluster)
    assert not allowlisted("https://user:secret@shop.example/", cluster)
