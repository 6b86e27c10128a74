"""The JavaScript :mod:`captcha_tasks.contrib.playwright` runs in a page, and the
checks on what it sends back (pure: no browser, no Redis).

The widget markup is :data:`captcha_tasks.session.pages.WIDGETS`, the same table
``fetch_page``'s HTML parser reads: an element with one of those classes and a
``data-sitekey``, the first in document order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..session.pages import SITEKEY_RE, WIDGETS

__all__ = ["FILL_JS", "FIND_JS", "Filled", "Widget", "widget_table"]

#: A ``data-callback`` we call: a global function's name or dotted path, nothing to eval.
_CALLBACK_RE = re.compile(r"[A-Za-z_$][\w$]{0,99}(?:\.[A-Za-z_$][\w$]{0,99}){0,4}")
#: Fields a token also goes in, beyond the widget's own: hCaptcha fills reCAPTCHA's too.
_ALSO = {"hcaptcha": ("g-recaptcha-response",)}

#: ``(widgets) => description | null``: the first widget element (``widgets`` is
#: :func:`widget_table`).
FIND_JS = """
(widgets) => {
  const selector = widgets.map((w) => "." + CSS.escape(w[0]) + "[data-sitekey]").join(", ");
  const el = document.querySelector(selector);
  if (!el) return null;
  const attr = (name) => el.getAttribute(name);
  return {
    cssClass: widgets.map((w) => w[0]).find((c) => el.classList.contains(c)) || "",
    sitekey: attr("data-sitekey") || "",
    callback: attr("data-callback"),
    size: attr("data-size"),
    action: attr("data-action"),
    cdata: attr("data-cdata"),
  };
}
"""

#: ``(args) => {filled, created, callback}``: the token into every field named
#: ``args.fields`` (the first created in the widget's form if the page has none), then
#: ``args.callback`` scheduled with it as a widget calls it, from a later task.
FILL_JS = """
({cssClass, sitekey, fields, token, callback}) => {
  const widget = Array.from(document.querySelectorAll("[data-sitekey]")).find(
    (el) => el.classList.contains(cssClass) && el.getAttribute("data-sitekey") === sitekey);
  let created = false;
  if (widget && document.getElementsByName(fields[0]).length === 0) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = fields[0];
    (widget.closest("form") || widget).appendChild(input);
    created = true;
  }
  const targets = [];
  for (const name of fields) {
    for (const el of document.getElementsByName(name)) {
      if ("value" in el) targets.push(el);
    }
  }
  for (const el of targets) {
    el.value = token;
    el.dispatchEvent(new Event("input", {bubbles: true}));
    el.dispatchEvent(new Event("change", {bubbles: true}));
  }
  let called = null;
  if (callback && targets.length) {
    let owner = window;
    let fn = window;
    for (const part of callback.split(".")) {
      owner = fn;
      fn = fn == null ? undefined : fn[part];
    }
    if (typeof fn === "function") {
      setTimeout(() => fn.call(owner, token), 0);
      called = "scheduled";
    } else {
      called = "missing";
    }
  }
  return {filled: targets.length, created: created, callback: called};
}
"""


def widget_table() -> list[list[str]]:
    """``[[css class, captcha type, token field], ...]`` for :data:`FIND_JS`."""
    return [[css, kind, field] for css, (kind, field) in WIDGETS.items()]


def _text(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Widget:
    """A captcha widget found on a page."""

    type: str  #: ``recaptcha_v2``, ``turnstile`` or ``hcaptcha`` (as results' ``type``)
    sitekey: str
    css_class: str  #: ``g-recaptcha``, ``cf-turnstile``, ``h-captcha``
    field: str  #: the form field the widget puts its token in
    callback: str | None = None  #: ``data-callback``: the page function given the token
    invisible: bool = False  #: reCAPTCHA's ``data-size="invisible"``
    action: str | None = None  #: Turnstile's ``data-action``
    cdata: str | None = None  #: Turnstile's ``data-cdata``

    @property
    def fields(self) -> list[str]:
        """Every field the token goes in, the widget's own first."""
        return [self.field, *_ALSO.get(self.type, ())]

    @classmethod
    def from_dom(cls, raw: object) -> Widget | None:
        """The widget :data:`FIND_JS` described, or None (none, or not one we solve: an
        unknown class, a sitekey ``fetch_page`` would not take either)."""
        if not isinstance(raw, dict):
            return None
        css, sitekey = raw.get("cssClass"), raw.get("sitekey")
        if css not in WIDGETS or not isinstance(sitekey, str):
            return None
        if not SITEKEY_RE.fullmatch(sitekey):
            return None
        kind, field = WIDGETS[css]
        callback = _text(raw, "callback")
        turnstile = kind == "turnstile"  # the solve task checks action and cdata
        return cls(
            type=kind,
            sitekey=sitekey,
            css_class=css,
            field=field,
            callback=callback if callback and _CALLBACK_RE.fullmatch(callback) else None,
            invisible=kind == "recaptcha_v2" and raw.get("size") == "invisible",
            action=_text(raw, "action") if turnstile else None,
            cdata=_text(raw, "cdata") if turnstile else None,
        )


@dataclass(frozen=True)
class Filled:
    """What :data:`FILL_JS` did."""

    fields: int  #: fields that now hold the token
    created: bool  #: the page had no field of the widget's name: one was added
    callback: str | None  #: ``"scheduled"``, ``"missing"`` (named, not a function) or None

    @classmethod
    def from_dom(cls, raw: object) -> Filled:
        data = raw if isinstance(raw, dict) else {}
        filled = data.get("filled")
        callback = data.get("callback")
        return cls(
            fields=filled if isinstance(filled, int) and not isinstance(filled, bool) else 0,
            created=data.get("created") is True,
            callback=callback if callback in ("scheduled", "missing") else None,
        )
