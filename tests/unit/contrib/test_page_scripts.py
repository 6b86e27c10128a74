"""What solve_on_page makes of the descriptions its page scripts send back (no browser)."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks.contrib._page_scripts import FILL_JS, FIND_JS, Filled, Widget, widget_table
from captcha_tasks.session.pages import WIDGETS

RECAPTCHA_KEY = "6LdSandboxDemoSiteKey0000000000000000000"


def dom(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "cssClass": "g-recaptcha",
        "sitekey": RECAPTCHA_KEY,
        "callback": None,
        "size": None,
        "action": None,
        "cdata": None,
    }
    return {**base, **fields}


def test_the_page_scripts_read_the_same_widget_table_as_fetch_page() -> None:
    assert widget_table() == [[css, kind, field] for css, (kind, field) in WIDGETS.items()]
    assert "data-sitekey" in FIND_JS and "setTimeout" in FILL_JS


def test_a_recaptcha_widget() -> None:
    widget = Widget.from_dom(dom(callback="onSolved", size="invisible", action="ignored"))
    assert widget == Widget(
        type="recaptcha_v2",
        sitekey=RECAPTCHA_KEY,
        css_class="g-recaptcha",
        field="g-recaptcha-response",
        callback="onSolved",
        invisible=True,
    )
    assert widget.fields == ["g-recaptcha-response"]


def test_turnstile_keeps_action_and_cdata_and_hcaptcha_fills_recaptchas_field_too() -> None:
    turnstile = Widget.from_dom(
        dom(cssClass="cf-turnstile", sitekey="0x4AAAAAAAxyz", action="login", cdata="c-1")
    )
    assert turnstile is not None
    assert (turnstile.type, turnstile.field) == ("turnstile", "cf-turnstile-response")
    assert (turnstile.action, turnstile.cdata, turnstile.invisible) == ("login", "c-1", False)
    hcaptcha = Widget.from_dom(dom(cssClass="h-captcha", sitekey="5ab0c1d2-e3f4-4a5b-8c6d-7e8f9"))
    assert hcaptcha is not None and hcaptcha.type == "hcaptcha"
    assert hcaptcha.fields == ["h-captcha-response", "g-recaptcha-response"]


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "g-recaptcha",
        dom(cssClass="geetest"),
        dom(sitekey=""),
        dom(sitekey="short"),
        dom(sitekey="x" * 101),
        dom(sitekey='6Ld"><script>alert(1)</script>'),
        dom(sitekey=12345678901),
    ],
)
def test_what_fetch_page_would_not_take_is_no_widget(raw: object) -> None:
    assert Widget.from_dom(raw) is None


@pytest.mark.parametrize(
    ("callback", "kept"),
    [
        ("onSolved", "onSolved"),
        ("app.captcha.done", "app.captcha.done"),
        ("$cb_1", "$cb_1"),
        ("", None),
        ("alert(1)", None),
        ("a.b.c.d.e.f.g", None),  # deeper than any page names a callback
        ("window['x']", None),
    ],
)
def test_only_a_function_name_or_dotted_path_is_taken_as_the_callback(
    callback: str, kept: str | None
) -> None:
    widget = Widget.from_dom(dom(callback=callback))
    assert widget is not None and widget.callback == kept


def test_filled_reads_the_fill_scripts_answer_defensively() -> None:
    assert Filled.from_dom({"filled": 2, "created": True, "callback": "scheduled"}) == Filled(
        2, True, "scheduled"
    )
    assert Filled.from_dom({"filled": True, "created": 1, "callback": "eval"}) == Filled(
        0, False, None
    )
    assert Filled.from_dom(None) == Filled(0, False, None)
