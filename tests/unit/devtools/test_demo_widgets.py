"""The demo site's widget variants (``?widget=``, ``&callback=1``) over real HTTP, and
that the plain challenge page stays what it was."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import requests

from captcha_tasks.session.pages import find_challenge
from captcha_tasks_sandbox import DEV_API_KEY, SandboxServer
from captcha_tasks_sandbox.demo_widgets import (
    CALLBACK_NAME,
    DEMO_HCAPTCHA_SITEKEY,
    DEMO_TURNSTILE_SITEKEY,
    page_widget,
    posted_token,
    widget_markup,
    widgets,
)

SCALE = 0.01


@pytest.fixture
def demo(sandbox_factory: Callable[..., SandboxServer]) -> Iterator[tuple[SandboxServer, str]]:
    server = sandbox_factory(time_scale=SCALE, demo_port=0)
    assert server.demo_url is not None
    yield server, server.demo_url


def _solve(server: SandboxServer, method: str, key_name: str, sitekey: str, pageurl: str) -> str:
    submit = {
        "key": DEV_API_KEY,
        "method": method,
        key_name: sitekey,
        "pageurl": pageurl,
        "json": "1",
    }
    with requests.Session() as api:
        reply = api.post(f"{server.url}/in.php", data=submit, timeout=5).json()
        assert reply["status"] == 1, reply
        poll = {"key": DEV_API_KEY, "action": "get", "id": reply["request"], "json": "1"}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            answer = api.get(f"{server.url}/res.php", params=poll, timeout=5).json()
            if answer["request"] != "CAPCHA_NOT_READY":
                assert answer["status"] == 1, answer
                return str(answer["request"])
            time.sleep(0.005)
    raise AssertionError("the sandbox did not solve the captcha")


def test_the_default_markup_is_unchanged() -> None:
    recaptcha = page_widget("", "6LdSandboxDemoSiteKey0000000000000000000")[0]
    assert widget_markup(recaptcha) == (
        '<div class="g-recaptcha" data-sitekey="6LdSandboxDemoSiteKey0000000000000000000">'
        "</div>\n"
        '<textarea name="g-recaptcha-response" id="g-recaptcha-response" '
        'style="display:none"></textarea>\n'
    )
    unknown = page_widget("widget=nope&callback=0", "k" * 20)
    assert unknown == (widgets("k" * 20)["recaptcha"], False)


@pytest.mark.parametrize(
    "name,kind,sitekey",
    [
        ("turnstile", "turnstile", DEMO_TURNSTILE_SITEKEY),
        ("hcaptcha", "hcaptcha", DEMO_HCAPTCHA_SITEKEY),
    ],
)
def test_a_widget_variant_is_what_find_challenge_reads(
    demo: tuple[SandboxServer, str], name: str, kind: str, sitekey: str
) -> None:
    _, url = demo
    page = requests.get(f"{url}/page/3?widget={name}&callback=1", timeout=5)
    assert page.status_code == 200
    challenge = find_challenge(page.text, page.url)
    assert challenge is not None
    assert (challenge.type, challenge.sitekey) == (kind, sitekey)
    assert challenge.fields["next"] == f"/page/3?widget={name}&callback=1"
    assert f'data-callback="{CALLBACK_NAME}"' in page.text
    assert f"function {CALLBACK_NAME}(token)" in page.text


@pytest.mark.parametrize(
    "name,method,key_name",
    [("turnstile", "turnstile", "sitekey"), ("hcaptcha", "hcaptcha", "sitekey")],
)
def test_a_variant_token_in_its_own_field_opens_pages(
    demo: tuple[SandboxServer, str], name: str, method: str, key_name: str
) -> None:
    server, url = demo
    widget = widgets(server.config.demo_sitekey)[name]
    token = _solve(server, method, key_name, widget.sitekey, f"{url}/page/1")
    with requests.Session() as browser:
        form = find_challenge(browser.get(f"{url}/page/1?widget={name}", timeout=5).text, url)
        assert form is not None
        passed = browser.post(
            f"{url}/verify",
            data={**form.fields, widget.field: token, "next": f"/page/1?widget={name}"},
            timeout=5,
            allow_redirects=False,
        )
        assert passed.status_code == 302, passed.text
        assert passed.headers["Location"] == f"/page/1?widget={name}"
        assert "<h1>page 1</h1>" in browser.get(f"{url}/page/1?widget={name}", timeout=5).text


def test_a_token_for_another_widgets_sitekey_is_refused(demo: tuple[SandboxServer, str]) -> None:
    server, url = demo
    recaptcha_token = _solve(
        server, "userrecaptcha", "googlekey", server.config.demo_sitekey, f"{url}/page/1"
    )
    with requests.Session() as browser:
        form = find_challenge(browser.get(f"{url}/page/1", timeout=5).text, url)
        assert form is not None
        refused = browser.post(
            f"{url}/verify",
            data={**form.fields, "cf-turnstile-response": recaptcha_token, "next": "/page/1"},
            timeout=5,
            allow_redirects=False,
        )
    assert refused.status_code == 403
    assert "sitekey-secret-mismatch" in refused.text


def test_posted_token_takes_the_first_filled_field() -> None:
    key = "6LdSandboxDemoSiteKey0000000000000000000"
    assert posted_token({}, key) == ("", key)
    assert posted_token({"g-recaptcha-response": "", "h-captcha-response": "t"}, key) == (
        "t",
        DEMO_HCAPTCHA_SITEKEY,
    )
    assert posted_token({"g-recaptcha-response": "r", "cf-turnstile-response": "t"}, key) == (
        "r",
        key,
    )
