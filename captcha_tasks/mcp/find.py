"""The captchas in a page's HTML, as the arguments of the solve tool for each: the widget
table ``fetch_page`` and the Playwright helper read (:data:`~captcha_tasks.session.pages.WIDGETS`),
every widget rather than the first, and DataDome's challenge page."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

from ..session.pages import SITEKEY_RE, WIDGETS, Page, find_datadome

__all__ = ["find_captchas"]

#: Widget attributes that become solve arguments, by captcha type.
_ARGUMENTS = {
    "recaptcha_v2": {"data-s": "data_s"},
    "turnstile": {"data-action": "action", "data-cdata": "cdata"},
    "hcaptcha": {},
}


class _Widgets(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[dict[str, Any]] = []
        self._form: tuple[str, dict[str, str]] | None = None
        self._open: list[tuple[dict[str, Any], tuple[str, dict[str, str]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "form":
            self._form = (attributes.get("action", ""), {})
        elif tag == "input" and self._form is not None:
            name = attributes.get("name")
            if name and attributes.get("type", "text").lower() == "hidden":
                self._form[1][name] = attributes.get("value", "")
        sitekey = attributes.get("data-sitekey", "")
        if not SITEKEY_RE.fullmatch(sitekey):
            return
        for widget, (kind, token_field) in WIDGETS.items():
            if widget in attributes.get("class", "").split():
                found: dict[str, Any] = {"type": kind, "sitekey": sitekey}
                for attribute, argument in _ARGUMENTS[kind].items():
                    if attributes.get(attribute):
                        found[argument] = attributes[attribute]
                if kind == "recaptcha_v2" and attributes.get("data-size") == "invisible":
                    found["invisible"] = True
                found["token_field"] = token_field
                self.found.append(found)
                if self._form is not None:
                    self._open.append((found, self._form))
                break

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None


def find_captchas(html: str, page_url: str, status: int = 200) -> list[dict[str, Any]]:
    """Each captcha in ``html`` (served at ``page_url`` with ``status``), in document order:
    ``tool`` (the solve tool to call), ``arguments`` (what to call it with: sitekey,
    pageurl and what the widget's attributes say), ``token_field`` (the form field its
    token goes in) and ``form`` (the widget's form: absolute ``action`` and hidden
    ``fields``) where it has one. DataDome's captcha page (HTTP 403) gives
    ``solve_datadome``'s ``captcha_url`` and ``pageurl``: the user agent and proxy to add
    are the browser's that loaded the page."""
    found: list[dict[str, Any]] = []
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
    if "data-sitekey" not in html:
        return found
    parser = _Widgets()
    parser.feed(html)
    parser.close()
    forms = {id(widget): form for widget, form in parser._open}
    for widget in parser.found:
        kind = widget.pop("type")
        token_field = widget.pop("token_field")
        entry: dict[str, Any] = {
            "type": kind,
            "tool": f"solve_{kind}",
            "arguments": {"sitekey": widget.pop("sitekey"), "pageurl": page_url, **widget},
            "token_field": token_field,
        }
        form = forms.get(id(widget))
        if form is not None:
            entry["form"] = {"action": urljoin(page_url, form[0]), "fields": dict(form[1])}
        found.append(entry)
    return found
