"""The captchas in a page's HTML, as the arguments of the solve tool for each: the widget
table ``fetch_page`` and the Playwright helper read (:data:`~captcha_tasks.session.pages.WIDGETS`),
every widget rather than the first, DataDome's challenge page and Cloudflare's."""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

from ..session.pages import SITEKEY_RE, Page, cloudflare_markers, find_datadome, find_widgets

__all__ = ["find_captchas"]

#: Widget attributes that become solve arguments, by captcha type.
_ARGUMENTS = {
    "recaptcha_v2": {"data-s": "data_s"},
    "turnstile": {"data-action": "action", "data-cdata": "cdata"},
    "hcaptcha": {},
}


def find_captchas(html: str, page_url: str, status: int = 200) -> list[dict[str, Any]]:
    """Each captcha in ``html`` (served at ``page_url`` with ``status``), in document order:
    ``tool`` (the solve tool to call), ``arguments`` (what to call it with: sitekey,
    pageurl and what the widget's attributes say), ``token_field`` (the form field its
    token goes in) and ``form`` (the widget's form: absolute ``action`` and hidden
    ``fields``) where it has one. DataDome's captcha page (HTTP 403) gives
    ``solve_datadome``'s ``captcha_url`` and ``pageurl``, Cloudflare's challenge page (HTTP
    403 or 503 with its challenge platform's script) ``solve_cloudflare_challenge``'s
    ``pageurl``: the user agent and proxy to add are the browser's that loaded the page
    (and for Cloudflare's, the page's HTML, which CapMonster Cloud needs)."""
    found: list[dict[str, Any]] = []
    if cloudflare_markers(status, html):
        found.append(
            {
                "type": "cloudflare_challenge",
                "tool": "solve_cloudflare_challenge",
                "arguments": {"pageurl": page_url},
                "needs": ["user_agent", "proxy_id", "html"],
            }
        )
    datadome = find_datadome(Page(status, page_url, html))
    if datadome is not None:
        found.append(
            {
                "type": "datadome",
                "tool": "solve_datadome",
                "arguments": {"captcha_url": datadome.captcha_url, "pageurl": page_url},
                "needs": ["user_agent", "proxy_id"],
            }
        )
    for widget in find_widgets(html):
        if not SITEKEY_RE.fullmatch(widget.sitekey):
            continue
        arguments: dict[str, Any] = {"sitekey": widget.sitekey, "pageurl": page_url}
        for attribute, argument in _ARGUMENTS[widget.type].items():
            if widget.attributes.get(attribute):
                arguments[argument] = widget.attributes[attribute]
        if widget.type == "recaptcha_v2" and widget.attributes.get("data-size") == "invisible":
            arguments["invisible"] = True
        entry: dict[str, Any] = {
            "type": widget.type,
            "tool": f"solve_{widget.type}",
            "arguments": arguments,
            "token_field": widget.token_field,
        }
        if widget.form is not None:
            action, fields = widget.form
            entry["form"] = {"action": urljoin(page_url, action), "fields": dict(fields)}
        found.append(entry)
    return found
