"""What the Scrapy middlewares' unit tests share: a crawler without a crawl (settings,
stats, signals; no reactor is installed), the cluster's settings with an allowlist, and
page bodies."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from scrapy.settings import Settings as ScrapySettings

from captcha_tasks.settings import Settings, get_settings

ALLOWED = "shop.example"
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
CHALLENGE = (
    "<html><head><title>Just a moment...</title></head><body>"
    '<form method="post" action="/verify"><input type="hidden" name="next" value="/p">'
    f'<div class="g-recaptcha" data-sitekey="{SITEKEY}"></div></form></body></html>'
)
CONTENT = "<html><head><title>page 1</title></head><body><h1>page 1</h1></body></html>"


class Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count


class Signals:
    def __init__(self) -> None:
        self.connected: list[tuple[Callable[..., Any], object]] = []

    def connect(self, receiver: Callable[..., Any], signal: object) -> None:
        self.connected.append((receiver, signal))


@dataclasses.dataclass
class FakeCrawler:
    settings: ScrapySettings
    stats: Stats = dataclasses.field(default_factory=Stats)
    signals: Signals = dataclasses.field(default_factory=Signals)
    spider: Any = None


@pytest.fixture
def make_crawler() -> Callable[..., FakeCrawler]:
    def make(**settings: Any) -> FakeCrawler:
        return FakeCrawler(ScrapySettings(settings))

    return make


@pytest.fixture
def cluster() -> Settings:
    """The cluster's settings (the test Redis) with ``shop.example`` allowlisted."""
    return dataclasses.replace(get_settings(), allowed_domains=(ALLOWED,))
