"""The ``solution`` object of a ready JSON task, shaped as each dialect sends it.

The answer comes in its in.php ``json=1`` form (what :meth:`.state.SandboxState.get`
hands out): coordinates as strings, AWS WAF as 2Captcha's voucher pair. AWS WAF
solutions differ most: 2Captcha sends the voucher pair; Anti-Captcha the cookie's value as
``token`` (its AmazonTaskProxyless page and official SDK); CapSolver ``cookie``;
CapMonster the pair unless the task asked ``cookieSolution: true``, then ``cookies``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .answers import DEFAULT_USER_AGENT

__all__ = ["USER_AGENT", "solution"]

#: The user agent solutions carry when the task gave none.
USER_AGENT = DEFAULT_USER_AGENT


def solution(
    dialect: str,
    kind: str,
    answer: object,
    user_agent: str = "",
    challenge: bool = False,
    cookie: bool = False,
    *,
    tiles: int = 0,
) -> dict[str, object]:
    """``answer`` as ``dialect``'s solution for ``kind``. ``user_agent``: the task's own
    (else :data:`USER_AGENT`); ``challenge``: a Turnstile challenge-mode task;
    ``cookie``: an AWS WAF task with ``cookieSolution: true`` (CapMonster); ``tiles``: a
    grid's tile count."""
    agent = user_agent or USER_AGENT
    if kind == "grid":
        return _grid(dialect, str(answer), tiles)
    if isinstance(answer, Mapping):
        return _fields(dialect, kind, answer, agent, cookie)
    if isinstance(answer, list):
        points = [(int(p["x"]), int(p["y"])) for p in answer]
        if dialect == "anticaptcha":
            return {"coordinates": [[x, y] for x, y in points]}
        return {"coordinates": [{"x": x, "y": y} for x, y in points]}
    text = str(answer)
    if kind == "image":
        return {"text": text}
    if kind == "altcha":
        return {"token": text}  # the widget's payload (Anti-Captcha's AltchaTask page)
    if kind == "datadome":
        return _datadome(dialect, text)
    if kind == "cloudflare_challenge":
        # CapMonster's cf_clearance mode: the cookie alone (its turnstile-challenge-task
        # page); CapSolver's AntiCloudflareTask: the cookies, the same value as ``token``
        # and the user agent it was passed as.
        if dialect == "capmonster":
            return {"cf_clearance": text}
        return {"cookies": {"cf_clearance": text}, "token": text, "userAgent": agent}
    if kind == "binance":
        # The token and the user agent it was solved as, at both (CapMonster's binance
        # page, python-rucaptcha's example).
        return {"token": text, "userAgent": agent}
    if kind == "yidun":
        return {"token": text}  # CapMonster's yidun-task page, python-rucaptcha's example
    if kind in ("mtcaptcha", "prosopo", "friendly_captcha"):
        # Anti-Captcha's Prosopo and Friendly Captcha solutions add its worker's userAgent
        # (its ProsopoTask and FriendlyCaptchaTask pages).
        return {"token": text, "userAgent": agent} if dialect == "anticaptcha" else {"token": text}
    if kind == "funcaptcha":
        return {"token": text, "userAgent": agent} if dialect == "capmonster" else {"token": text}
    if kind == "turnstile":
        out: dict[str, object] = {"token": text}
        if dialect == "capsolver":
            out["type"] = "turnstile"
        if dialect != "anticaptcha" or challenge:
            out["userAgent"] = agent
        return out
    out = {"gRecaptchaResponse": text}
    if dialect == "2captcha-v2":
        out["token"] = text
    if dialect == "capsolver" or (kind == "hcaptcha" and dialect == "capmonster"):
        out["userAgent"] = USER_AGENT
    if kind == "hcaptcha" and dialect == "capmonster":
        out["respKey"] = ""
    return out


def _grid(dialect: str, answer: str, tiles: int) -> dict[str, object]:
    """in.php's ``click:1/4/7`` (tiles from 1) as each dialect answers a grid: 2Captcha's
    GridTask ``click`` (from 1), CapSolver's ``objects`` (from 0; ``type`` multi),
    CapMonster's ``answer`` (a boolean per tile)."""
    clicked = [int(part) for part in answer.removeprefix("click:").split("/")]
    if dialect == "capsolver":
        return {"type": "multi", "objects": [tile - 1 for tile in clicked]}
    if dialect == "capmonster":
        return {"answer": [tile + 1 in clicked for tile in range(tiles)]}
    return {"click": clicked}


def _datadome(dialect: str, line: str) -> dict[str, object]:
    """DataDome's cookie: the ``Set-Cookie`` line as ``cookie`` (2Captcha's
    DataDomeSliderTask page, CapSolver's DataDome page); CapMonster's per domain, the
    value and its attributes under ``cookies.datadome`` (its DataDome page)."""
    if dialect != "capmonster":
        return {"cookie": line}
    domain = ""
    for attribute in line.split(";"):
        name, _, found = attribute.strip().partition("=")
        if name == "Domain":
            domain = found.lstrip(".")
    return {"domains": {domain: {"cookies": {"datadome": line.removeprefix("datadome=")}}}}


def _fields(
    dialect: str, kind: str, answer: Mapping[str, str | int], agent: str, cookie: bool
) -> dict[str, object]:
    """GeeTest v3 and v4, AWS WAF, Tencent."""
    if kind == "tencent":
        # 2Captcha's TencentTask: appid, ret, ticket, randstr (python-rucaptcha's example);
        # CapMonster's CustomTask: the ticket and randstr in data, the agent in headers
        # (its tendi page).
        if dialect != "capmonster":
            return dict(answer)
        data = {"randstr": answer["randstr"], "ticket": answer["ticket"]}
        return {"data": data, "headers": {"User-Agent": agent}}
    if kind == "geetest_v4":
        return dict(answer)
    if kind == "aws_waf":
        value = answer["existing_token"]
        if dialect == "anticaptcha":
            return {"token": value}
        if dialect == "capsolver":
            return {"cookie": value}
        if dialect == "capmonster" and cookie:
            return {"cookies": {"aws-waf-token": value}, "userAgent": agent}
        return dict(answer)
    out: dict[str, object] = {
        "challenge": answer["geetest_challenge"],
        "validate": answer["geetest_validate"],
    }
    if dialect != "capsolver":
        out["seccode"] = answer["geetest_seccode"]
    return out
