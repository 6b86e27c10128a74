"""The demo site's challenge widgets: reCAPTCHA v2 (the default), Turnstile, hCaptcha;
DataDome's captcha page (:func:`datadome_page`) and Cloudflare's challenge page
(:func:`cloudflare_page`), which are no widgets in a form.

``GET /page/<n>?widget=turnstile`` (or ``hcaptcha``) shows that widget's markup and
token field instead of reCAPTCHA's; ``&callback=1`` adds ``data-callback`` naming a
page function (:data:`CALLBACK_NAME`) that, called with the token as a widget would
call it, keeps the token in ``sessionStorage`` (:data:`CALLBACK_STORAGE_KEY`, so a
browser test can read what it was given) and submits the form. ``POST /verify``
takes the token from whichever widget's field the form carries, checked against that
widget's sitekey. Without a query the page carries reCAPTCHA v2's widget, no callback.
"""

from __future__ import annotations

import html
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

__all__ = [
    "CALLBACK_NAME",
    "CALLBACK_STORAGE_KEY",
    "CLOUDFLARE_WIDGET",
    "DATADOME_WIDGET",
    "DEMO_HCAPTCHA_SITEKEY",
    "DEMO_TURNSTILE_SITEKEY",
    "Widget",
    "cloudflare_page",
    "datadome_page",
    "page_widget",
    "posted_token",
    "widget_markup",
    "widgets",
]

#: The demo site's Turnstile sitekey (Turnstile's format: a digit, ``x``, then more).
DEMO_TURNSTILE_SITEKEY = "0x4AAAAAAASandboxDemoSiteKey"
#: The demo site's hCaptcha sitekey (hCaptcha's format: a UUID).
DEMO_HCAPTCHA_SITEKEY = "5ab0c1d2-e3f4-4a5b-8c6d-7e8f9a0b1c2d"
#: ``?widget=`` of a page behind DataDome (``&dd=bv``: DataDome banned the visitor's IP).
DATADOME_WIDGET = "datadome"
#: What DataDome's 403 page carries: its ``dd`` object, then its captcha script.
_DATADOME_PAGE = (
    '<!doctype html>\n<html lang="en"><head><title>{host}</title></head>\n'
    '<body style="margin:0"><p id="cmsg">Please enable JS and disable any ad blocker</p>\n'
    "<script data-cfasync=\"false\">var dd={{'rt':'c','cid':'{cid}',"
    "'hsh':'{hsh}','t':'{t}','s':{s},'e':'{e}','host':'geo.captcha-delivery.com',"
    "'cookie':'{cookie}'}}</script>\n"
    '<script data-cfasync="false" src="https://ct.captcha-delivery.com/c.js"></script>\n'
    "</body></html>\n"
)
#: The page function ``?callback=1`` names in the widget's ``data-callback``.
CALLBACK_NAME = "demoSolved"
#: Where that function keeps the token it was called with (``sessionStorage``).
CALLBACK_STORAGE_KEY = "demoCallbackToken"


@dataclass(frozen=True)
class Widget:
    """One widget kind: its ``?widget=`` name, CSS class, token field and sitekey."""

    name: str
    css_class: str
    field: str
    sitekey: str


def widgets(recaptcha_sitekey: str) -> dict[str, Widget]:
    """The widget kinds by ``?widget=`` name (reCAPTCHA's sitekey is configurable)."""
    return {
        "recaptcha": Widget("recaptcha", "g-recaptcha", "g-recaptcha-response", recaptcha_sitekey),
        "turnstile": Widget(
            "turnstile", "cf-turnstile", "cf-turnstile-response", DEMO_TURNSTILE_SITEKEY
        ),
        "hcaptcha": Widget("hcaptcha", "h-captcha", "h-captcha-response", DEMO_HCAPTCHA_SITEKEY),
    }


def page_widget(query: str, recaptcha_sitekey: str) -> tuple[Widget, bool]:
    """The widget a page's query asks for (unknown names: reCAPTCHA) and ``callback``."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    kinds = widgets(recaptcha_sitekey)
    return kinds.get(params.get("widget", ""), kinds["recaptcha"]), params.get("callback") == "1"


def widget_markup(widget: Widget, callback: bool = False) -> str:
    """The widget's element, its token field (as each widget's script renders it) and,
    with ``callback``, the page function its ``data-callback`` names."""
    sitekey = html.escape(widget.sitekey)
    extra = f' data-callback="{CALLBACK_NAME}"' if callback else ""
    div = f'<div class="{widget.css_class}" data-sitekey="{sitekey}"{extra}>'
    if widget.name == "turnstile":  # Turnstile renders its hidden input inside the widget
        markup = f'{div}<input type="hidden" name="{widget.field}" value=""></div>\n'
    else:
        textarea = (
            f'<textarea name="{widget.field}" id="{widget.field}" style="display:none"></textarea>'
        )
        markup = f"{div}</div>\n{textarea}\n"
    if callback:
        markup += (
            "<script>\n"
            f"function {CALLBACK_NAME}(token) {{\n"
            f'  sessionStorage.setItem("{CALLBACK_STORAGE_KEY}", token);\n'
            "  var form = document.forms[0];\n"
            f'  form.elements["{widget.field}"].value = token;\n'
            "  form.submit();\n"
            "}\n"
            "</script>\n"
        )
    return markup


def datadome_page(host: str, cookie: str, banned: bool) -> str:
    """DataDome's captcha page (served with HTTP 403) for a visitor whose ``datadome``
    cookie is now ``cookie``: its ``dd`` object (``t: 'fe'``, or ``'bv'`` when
    ``banned``), from which the captcha's URL is built."""
    return _DATADOME_PAGE.format(
        host=html.escape(host),
        cid=secrets.token_urlsafe(24),
        hsh=secrets.token_hex(15).upper(),
        t="bv" if banned else "fe",
        s=40070,
        e=secrets.token_hex(32),
        cookie=cookie,
    )


#: ``?widget=`` of a page behind Cloudflare's challenge page.
CLOUDFLARE_WIDGET = "cloudflare"
#: Cloudflare's challenge page, as its interstitial is served: the "Just a moment..."
#: title, the ``_cf_chl_opt`` options and the challenge platform's script.
_CLOUDFLARE_PAGE = """<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<meta name="robots" content="noindex,nofollow">
</head><body><div class="main-wrapper" role="main"><div class="main-content">
<h1 class="zone-name-title h1">{host}</h1>
<h2 class="h2" id="challenge-running">Verifying you are human. This may take a few seconds.</h2>
<noscript><div class="h2">Enable JavaScript and cookies to continue</div></noscript>
</div></div>
<script>(function(){{window._cf_chl_opt={{cvId: '3',cZone: "{host}",cType: 'managed',
cRay: '{ray}',cH: '{ch}',cUPMDTk: "{path}",cFPWv: 'b'}};
var cpo = document.createElement('script');
cpo.src = '/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1?ray={ray}';
document.getElementsByTagName('head')[0].appendChild(cpo);}}());</script>
</body></html>
"""


def cloudflare_page(host: str, path: str) -> tuple[str, str]:
    """Cloudflare's challenge page (served with HTTP 403) for ``path`` at ``host``, and
    its ray id (Cloudflare's ``CF-RAY`` header names it too)."""
    ray = secrets.token_hex(8)
    page = _CLOUDFLARE_PAGE.format(
        host=html.escape(host),
        ray=ray,
        ch=secrets.token_urlsafe(32),
        path=html.escape(path),
    )
    return page, ray


def posted_token(params: Mapping[str, str], recaptcha_sitekey: str) -> tuple[str, str]:
    """(token, the sitekey it must be for) from a posted form: the first widget field
    with a value, else reCAPTCHA's (empty: a missing token)."""
    for widget in widgets(recaptcha_sitekey).values():
        if params.get(widget.field):
            return params[widget.field], widget.sitekey
    return "", recaptcha_sitekey
