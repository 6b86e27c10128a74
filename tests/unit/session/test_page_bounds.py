"""Every fetch from a target site is bounded: its body by ``CAPTCHA_TASKS_MAX_PAGE_BYTES``
(read as it arrives, decoded size counted), its time by ``CAPTCHA_TASKS_PAGE_DEADLINE``
(redirects and body included), and what fails says so in a typed error of a few words."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import requests

from captcha_tasks.errors import PageFetchFailed, PageTooLarge, PageTooSlow
from captcha_tasks.session.pages import fetch
from captcha_tasks.settings import Settings
from tests.support.heavy_site import MB, HeavySite


@pytest.fixture
def site() -> Iterator[HeavySite]:
    with HeavySite(drip_every=0.1, drip_for=20.0) as heavy:
        yield heavy


def _settings(site: HeavySite, **env: str) -> Settings:
    return Settings.from_env({"CAPTCHA_TASKS_ALLOWED_DOMAINS": site.host, **env})


def _fetch(site: HeavySite, path: str, **env: str) -> str:
    with requests.Session() as session:
        return fetch(session, f"{site.url}{path}", _settings(site, **env)).text


def test_a_page_under_the_bound_is_read_whole(site: HeavySite) -> None:
    text = _fetch(site, "/huge/2", CAPTCHA_TASKS_MAX_PAGE_BYTES=str(3 * MB))
    assert len(text) == 2 * MB and text.startswith("<p>xxx")


def test_a_page_announced_over_the_bound_is_refused_before_its_body(site: HeavySite) -> None:
    with pytest.raises(PageTooLarge, match=r"CAPTCHA_TASKS_MAX_PAGE_BYTES \(1,048,576 bytes\)"):
        _fetch(site, "/huge/150", CAPTCHA_TASKS_MAX_PAGE_BYTES=str(MB))
    # What the kernel's buffers took before the reader hung up, not 150 MB.
    assert site.sent["huge"] < 20 * MB


def test_a_chunked_page_is_refused_once_it_passes_the_bound(site: HeavySite) -> None:
    with pytest.raises(PageTooLarge) as raised:
        _fetch(site, "/chunked/150", CAPTCHA_TASKS_MAX_PAGE_BYTES=str(2 * MB))
    assert raised.value.code == "PAGE_TOO_LARGE"
    assert site.sent["chunked"] < 20 * MB


def test_the_decoded_size_is_bounded_not_the_compressed_one(site: HeavySite) -> None:
    with pytest.raises(PageTooLarge):
        _fetch(site, "/bomb/200", CAPTCHA_TASKS_MAX_PAGE_BYTES=str(MB))
    assert site.sent["bomb"] < MB  # a few hundred kB on the wire


def test_a_page_dripping_bytes_is_given_up_at_the_deadline(site: HeavySite) -> None:
    started = time.monotonic()
    with pytest.raises(PageTooSlow, match=r"CAPTCHA_TASKS_PAGE_DEADLINE \(2 s\)") as raised:
        _fetch(site, "/drip", CAPTCHA_TASKS_PAGE_DEADLINE="2")
    took = time.monotonic() - started
    assert 2.0 <= took < 4.0, took
    assert raised.value.code == "PAGE_TOO_SLOW"
    assert site.sent["drip"] >= 10  # it was sending all along: each read was in time


def test_a_silent_page_is_given_up_at_the_deadline_not_a_read_timeout_after(
    site: HeavySite,
) -> None:
    started = time.monotonic()
    with pytest.raises(PageTooSlow):
        _fetch(site, "/silent", CAPTCHA_TASKS_PAGE_DEADLINE="2")
    assert time.monotonic() - started < 4.0  # the read timeout is 30 s


def test_an_unreachable_site_is_a_typed_error_without_the_http_stacks_text() -> None:
    with socket.socket() as held:  # bound, never listening: connections are refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        settings = Settings.from_env({"CAPTCHA_TASKS_ALLOWED_DOMAINS": f"127.0.0.1:{port}"})
        with requests.Session() as session, pytest.raises(PageFetchFailed) as raised:
            fetch(session, f"http://127.0.0.1:{port}/secret-path?q=1", settings)
    error = raised.value
    assert type(error) is PageFetchFailed and error.code == "PAGE_UNREACHABLE"
    assert str(error) == f"PAGE_UNREACHABLE: cannot connect to 127.0.0.1:{port}: Connection refused"
    assert error.__cause__ is None and error.__suppress_context__


@pytest.mark.parametrize(
    ("name", "value"),
    [("CAPTCHA_TASKS_MAX_PAGE_BYTES", "12"), ("CAPTCHA_TASKS_PAGE_DEADLINE", "0")],
)
def test_a_bound_out_of_range_is_refused_at_start(name: str, value: str) -> None:
    from captcha_tasks.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=name):
        Settings.from_env({name: value})
