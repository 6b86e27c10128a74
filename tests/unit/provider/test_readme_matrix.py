"""The README's type x provider matrix is the code's (provider/offers.py), not a copy
that drifts: it is rendered from :func:`offer_matrix` and compared."""

from __future__ import annotations

import re
from pathlib import Path

from captcha_tasks.provider.offers import TURNSTILE_CHALLENGE, offer_matrix
from captcha_tasks.settings import PROTOCOLS, PROVIDERS

README = Path(__file__).resolve().parents[3] / "README.md"

LABELS = {
    "recaptcha_v2": "reCAPTCHA v2 (and Enterprise with `s`)",
    "recaptcha_v3": "reCAPTCHA v3",
    "turnstile": "Turnstile",
    TURNSTILE_CHALLENGE: "Turnstile challenge mode",
    "hcaptcha": "hCaptcha",
    "image": "image to text",
    "coordinates": "image to coordinates",
    "geetest": "GeeTest v3",
    "geetest_v4": "GeeTest v4",
    "funcaptcha": "FunCaptcha / Arkose",
    "aws_waf": "AWS WAF",
}
#: Read from their bytes: whether a proxy exists for them means nothing.
_NO_PROXY = {"image", "coordinates"}


def _cell(feature: str, value: str) -> str:
    if value == "not offered":
        return "—"
    if value == "offered" or feature in _NO_PROXY:
        return "yes"
    proxyless, proxy = (part.strip() for part in value.split("/"))
    if proxy == "-":
        return "yes, no proxy"
    if proxyless == "-":
        return "proxy only"
    return "yes"


def render() -> str:
    matrix = offer_matrix()
    lines = [
        "| captcha | " + " | ".join(f"`{p}`" for p in PROVIDERS) + " |",
        "|---|" + "---|" * len(PROVIDERS),
        "| protocol | " + " | ".join(PROTOCOLS[p] for p in PROVIDERS) + " |",
    ]
    for feature, label in LABELS.items():
        cells = [_cell(feature, matrix[p][feature]) for p in PROVIDERS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_every_kind_of_the_code_has_a_row() -> None:
    kinds = {kind for row in offer_matrix().values() for kind in row}
    assert kinds == set(LABELS)


def test_the_readme_matrix_is_the_codes() -> None:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- offers:start -->\n(.*?)\n<!-- offers:end -->", text, re.S)
    assert found, "README.md lacks the <!-- offers:start/end --> block"
    expected = render()
    assert found.group(1).strip() == expected, f"README matrix out of date; write:\n{expected}"


def test_a_cell_says_what_the_dialect_says() -> None:
    assert _cell("turnstile", "AntiTurnstileTaskProxyLess / -") == "yes, no proxy"
    assert _cell("image", "ImageToTextTask / -") == "yes"
    assert _cell("hcaptcha", "not offered") == "—"
    assert _cell("recaptcha_v2", "RecaptchaV2Task / RecaptchaV2Task") == "yes"
