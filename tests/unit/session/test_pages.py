"""The page guard (allowlist, schemes, private addresses) and challenge parsing."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from captcha_tasks.errors import InvalidTaskInput, TargetNotAllowed
from captcha_tasks.session.pages import check_url, fetch, find_challenge
from captcha_tasks.settings import Settings


def _settings(allowed: str) -> Settings:
    return Settings.from_env({"CAPTCHA_TASKS_ALLOWED_DOMAINS": allowed})


@pytest.fixture
def public_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Name resolution without a network: a table of host -> address."""
    table = {
        "example.com": "93.184.215.14",
        "www.example.com": "93.184.215.14",
        "internal.example.com": "10.0.0.7",
        "rebind.example.com": "127.0.0.1",
    }

    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "unknown")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (table[host], port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return table


def test_allowed_domains_and_their_subdomains(public_dns: Any) -> None:
    settings = _settings("example.com")
    assert check_url("https://example.com/a", settings)
    assert check_url("http://www.example.com:8080/b?q=1", settings)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("https://evil.com/", "not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS"),
        ("https://notexample.com/", "not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS"),
        ("https://example.com.evil.com/", "not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS"),
        ("ftp://example.com/", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("https://user:pw@example.com/", "credentials"),
        ("https://internal.example.com/", "non-public address"),
        ("https://rebind.example.com/", "non-public address"),
        ("http://127.0.0.1/", "not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS"),
        ("http://169.254.169.254/latest/meta-data", "not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS"),
        ("https://example.com/" + "a" * 3000, "characters"),
    ],
)
def test_refused_targets(public_dns: Any, url: str, fragment: str) -> None:
    with pytest.raises(TargetNotAllowed) as info:
        check_url(url, _settings("example.com"))
    assert fragment in str(info.value)
    assert isinstance(info.value, InvalidTaskInput)  # a permanent, input-side error


def test_an_address_is_allowed_only_as_written() -> None:
    settings = _settings("127.0.0.1:8766")
    assert check_url("http://127.0.0.1:8766/page/1", settings)
    for url in ("http://127.0.0.1:8765/", "http://127.0.0.2:8766/", "http://localhost:8766/"):
        with pytest.raises(TargetNotAllowed):
            check_url(url, settings)


@pytest.fixture
def local_site() -> Iterator[tuple[int, list[str]]]:
    """An HTTP server on 127.0.0.1 (its port, and the paths it was asked for)."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = b"internal"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_dns_answer_that_changes_after_the_check_is_caught_at_connect(
    monkeypatch: pytest.MonkeyPatch, local_site: tuple[int, list[str]]
) -> None:
    # DNS rebinding: public for the allowlist check, loopback for the connection.
    port, asked = local_site
    answers = iter(["93.184.215.14", "127.0.0.1", "127.0.0.1", "127.0.0.1"])

    def rebinding(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        assert host == "rebind.example.com"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    url = f"http://rebind.example.com:{port}/secret"
    with requests.Session() as session, pytest.raises(TargetNotAllowed) as info:
        fetch(session, url, _settings("example.com"))
    assert "connected to 127.0.0.1" in str(info.value)
    assert asked == []  # nothing was sent to the internal address


def test_an_address_listed_as_written_is_fetched_through_the_checked_adapter(
    local_site: tuple[int, list[str]],
) -> None:
    port, asked = local_site
    with requests.Session() as session:
        page = fetch(session, f"http://127.0.0.1:{port}/page", _settings(f"127.0.0.1:{port}"))
    assert page.status == 200 and page.text == "internal" and asked == ["/page"]


def test_nothing_is_allowed_when_nothing_is_configured() -> None:
    with pytest.raises(TargetNotAllowed, match="it is empty: no host is"):
        check_url("https://example.com/", _settings(""))


PAGE = """<html><body>
<form method="post" action="/verify">
  <input type="hidden" name="next" value="/page/7">
  <div class="g-recaptcha" data-sitekey="6LdSandboxDemoSiteKey0000000000000000000"></div>
  <input type="hidden" name="csrf" value="abc">
  <textarea name="g-recaptcha-response"></textarea>
</form></body></html>"""


def test_a_recaptcha_challenge_and_its_form_are_found() -> None:
    challenge = find_challenge(PAGE, "http://127.0.0.1:8766/page/7")
    assert challenge is not None
    assert challenge.type == "recaptcha_v2"
    assert challenge.sitekey == "6LdSandboxDemoSiteKey0000000000000000000"
    assert challenge.token_field == "g-recaptcha-response"
    assert challenge.action == "http://127.0.0.1:8766/verify"
    assert challenge.fields == {"next": "/page/7", "csrf": "abc"}


def test_turnstile_and_plain_pages() -> None:
    turnstile = '<div class="cf-turnstile" data-sitekey="0x4AAAAAAABkMYinukE8nzY"></div>'
    found = find_challenge(turnstile, "https://example.com/")
    assert found is not None and found.type == "turnstile"
    assert found.action == "https://example.com/"
    assert find_challenge("<h1>page 7</h1>", "https://example.com/") is None
    assert find_challenge('<div data-sitekey="x"></div>', "https://example.com/") is None


@pytest.mark.parametrize(
    "widget,url,inline",
    [
        (
            '<altcha-widget challenge="/altcha/c"></altcha-widget>',
            "https://shop.example/altcha/c",
            "",
        ),
        (
            '<altcha-widget challengeurl="c?v=1"></altcha-widget>',
            "https://shop.example/p/c?v=1",
            "",
        ),
        (
            '<altcha-widget challenge="{&quot;signature&quot;: &quot;s&quot;}"></altcha-widget>',
            "",
            '{"signature": "s"}',
        ),
        (
            '<altcha-widget challengejson=\'{"salt": "x"}\'></altcha-widget>',
            "",
            '{"salt": "x"}',
        ),
    ],
)
def test_an_altcha_widget_says_where_its_challenge_is(widget: str, url: str, inline: str) -> None:
    page = (
        '<form method="post" action="/verify"><input type="hidden" name="csrf_token" '
        f'value="t1">{widget}</form>'
    )
    challenge = find_challenge(page, "https://shop.example/p/1")
    assert challenge is not None
    assert (challenge.type, challenge.sitekey, challenge.token_field) == ("altcha", "", "altcha")
    assert (challenge.captcha_url, challenge.challenge_json) == (url, inline)
    assert challenge.action == "https://shop.example/verify"
    assert challenge.fields == {"csrf_token": "t1"}


def test_an_altcha_widget_posts_in_the_field_its_name_names_and_a_sitekey_widget_comes_first() -> (
    None
):
    named = '<altcha-widget name="pow" challenge="/c"></altcha-widget>'
    found = find_challenge(named, "https://shop.example/")
    assert found is not None and found.token_field == "pow"
    both = (
        named + '<div class="h-captcha" data-sitekey="5ab0c1d2-e3f4-4a5b-8c6d-7e8f9a0b1c2d"></div>'
    )
    found = find_challenge(both, "https://shop.example/")
    assert found is not None and found.type == "hcaptcha"
    # A widget that says nothing of its challenge is not one to solve.
    assert find_challenge("<altcha-widget></altcha-widget>", "https://shop.example/") is None
