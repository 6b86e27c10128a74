"""A JSON task as the in.php parameters it means, per dialect, so that
:func:`.protocol.parse_submission` validates both wire formats the same way.

Field names from docs/PROVIDERS.md and the NEWTYPES spec; a field of another dialect
is ignored, as the providers ignore unknown fields.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping

from .answers import DEFAULT_USER_AGENT
from .submission import ApiError

__all__ = ["JsonError", "classic_params"]

#: AWS WAF's in.php names and their JSON names: (most dialects, CapSolver).
_AWS_FIELDS = (
    ("sitekey", "websiteKey", "awsKey"),
    ("iv", "iv", "awsIv"),
    ("context", "context", "awsContext"),
    ("challenge_script", "challengeScript", "awsChallengeJS"),
    ("captcha_script", "captchaScript", "awsApiJs"),
)
#: Turnstile challenge mode's page data field per dialect (CapSolver: none).
_PAGEDATA = {"2captcha-v2": "pagedata", "anticaptcha": "chlPageData", "capmonster": "pageData"}
#: Challenge-mode fields CapSolver refuses in a Turnstile task (any dialect's spelling).
_CHALLENGE_FIELDS = ("pagedata", "pageData", "chlPageData", "cloudflareTaskType")


#: A proxy string's scheme, as CapSolver takes it (``socks5:`` or ``socks5://``).
_SCHEME = re.compile(r"^(?:https?|socks[45])(?::|://)")


class JsonError(Exception):
    """An error answer: the generic (2Captcha/Anti-Captcha) code, renamed per dialect on output."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def classic_params(dialect: str, kind: str, task: Mapping[str, object]) -> dict[str, str]:
    """The in.php parameters ``task`` means. Raises ApiError (a bad field, mapped to the
    dialect's code by the caller) or JsonError (the dialect's own refusal)."""
    metadata = task.get("metadata")
    extra: Mapping[str, object] = metadata if isinstance(metadata, dict) else {}

    def value(name: str) -> str:
        return _text(task, name)

    def meta(name: str) -> str:
        return _text(extra, name)

    params = {"pageurl": value("websiteURL")}
    if kind in ("recaptcha_v2", "recaptcha_v3"):
        params.update(method="userrecaptcha", googlekey=value("websiteKey"))
        if kind == "recaptcha_v3":
            params.update(version="v3", action=value("pageAction"), min_score=value("minScore"))
    elif kind in ("turnstile", "hcaptcha"):
        params.update(method=kind, sitekey=value("websiteKey"))
        params["action"] = value("action") or value("pageAction") or meta("action")
        params["data"] = value("cData") or value("data") or meta("cdata")
        if kind == "turnstile":
            params.update(_challenge(dialect, task, extra))
    elif kind == "geetest":
        params.update(_geetest(dialect, task))
    elif kind == "funcaptcha":
        params.update(_funcaptcha(task))
    elif kind == "mtcaptcha":
        # CapMonster's pageAction rides along as in.php's action (its token's record).
        params.update(method="mt_captcha", sitekey=value("websiteKey"))
        params["action"] = value("pageAction")
        if task.get("isInvisible") not in (None, True, False):
            raise ApiError("ERROR_BAD_PARAMETERS")
    elif kind == "prosopo":
        params.update(method="prosopo", sitekey=value("websiteKey"))
    elif kind == "yidun":
        # 2Captcha's and CapMonster's YidunTask: the same names, hct a number.
        hct = task.get("hct")
        if hct is not None and (isinstance(hct, bool) or not isinstance(hct, int)):
            raise ApiError("ERROR_BAD_PARAMETERS")
        params.update(method="yidun", sitekey=value("websiteKey"), useragent=value("userAgent"))
        params.update(yidun_get_lib=value("yidunGetLib"), hct=value("hct"))
        params.update(yidun_api_server_subdomain=value("yidunApiServerSubdomain"))
        params.update(challenge=value("challenge"), hcg=value("hcg"))
    elif kind == "binance":
        # 2Captcha's and CapMonster's BinanceTask: the same names.
        params.update(method="binance", sitekey=value("websiteKey"), useragent=value("userAgent"))
        params["validate_id"] = value("validateId")
    elif kind == "tencent":
        # 2Captcha's TencentTask: appId and captchaScript; CapMonster's CustomTask of class
        # TenDI: the app id as websiteKey, the script in metadata.captchaUrl, a userAgent.
        if dialect == "capmonster":
            params.update(app_id=value("websiteKey"), captcha_script=meta("captchaUrl"))
            params["useragent"] = value("userAgent")
        else:
            params.update(app_id=value("appId"), captcha_script=value("captchaScript"))
        params["method"] = "tencent"
    elif kind == "friendly_captcha":
        params.update(method="friendly_captcha", sitekey=value("websiteKey"))
        if dialect == "capmonster":
            # The widget script's URL tells v1 from v2: required, an http(s) URL.
            script = meta("apiGetLib")
            if not script.startswith(("https://", "http://")) or " " in script:
                raise ApiError("ERROR_BAD_PARAMETERS")
    elif kind == "altcha":
        params.update(method="altcha", **_altcha(dialect, task, extra))
    elif kind == "datadome":
        params.update(_datadome(dialect, task, extra))
    elif kind == "cloudflare_challenge":
        params.update(_cloudflare(dialect, task))
    elif kind == "aws_waf":
        column = 2 if dialect == "capsolver" else 1
        params.update({row[0]: value(row[column]) for row in _AWS_FIELDS}, method="amazon_waf")
    elif kind == "grid":
        params = _grid(dialect, task, extra)
    elif kind == "coordinates":
        if dialect == "anticaptcha" and task.get("mode", "points") != "points":
            raise JsonError("ERROR_TASK_NOT_SUPPORTED")  # rectangles: not emulated
        params = {"method": "base64", "coordinatescaptcha": "1", "body": value("body")}
        params["textinstructions"] = value("comment")
    else:
        params = {"method": "base64", "body": value("body"), "numeric": value("numeric")}
        params.update(min_len=value("minLength"), max_len=value("maxLength"))
        params.update(phrase=value("phrase"), regsense=value("case"), calc=value("math"))
    return params


#: reCAPTCHA's object ids (CapSolver's question list: ``/m/015qff`` traffic lights).
_OBJECT_ID = re.compile(r"^/m/[0-9a-z_]{2,16}$")
#: CapMonster Cloud's metadata.Grid values (capmonstercloudclient: 3x3, 4x4, 1x1).
_CAPMONSTER_GRIDS = {"3x3": ("3", "3"), "4x4": ("4", "4"), "1x1": ("1", "1")}


def _grid(
    dialect: str, task: Mapping[str, object], metadata: Mapping[str, object]
) -> dict[str, str]:
    """A grid task as in.php's ``recaptcha=1``: 2Captcha's GridTask (body, rows, columns,
    comment), CapSolver's ReCaptchaV2Classification (image, question: an object id; the
    grid read from the image, here 3x3), CapMonster's ComplexImageTask of class
    recaptcha (one image in imagesBase64, metadata Grid and Task or TaskDefinition)."""
    if dialect == "capsolver":
        question = _text(task, "question")
        if not _OBJECT_ID.match(question):
            raise ApiError("ERROR_BAD_PARAMETERS")
        body, instruction, rows, cols = _text(task, "image"), question, "3", "3"
    elif dialect == "capmonster":
        images = task.get("imagesBase64")
        if not isinstance(images, list) or len(images) != 1 or not isinstance(images[0], str):
            raise ApiError("ERROR_BAD_PARAMETERS")
        shape = _CAPMONSTER_GRIDS.get(_text(metadata, "Grid"))
        instruction = _text(metadata, "Task") or _text(metadata, "TaskDefinition")
        if shape is None:
            raise ApiError("ERROR_BAD_PARAMETERS")
        body, (rows, cols) = images[0], shape
    else:
        body, instruction = _text(task, "body"), _text(task, "comment")
        rows, cols = _text(task, "rows"), _text(task, "columns")
    return {
        "method": "base64",
        "recaptcha": "1",
        "body": body,
        "textinstructions": instruction,
        "recaptcharows": rows,
        "recaptchacols": cols,
    }


def _datadome(
    dialect: str, task: Mapping[str, object], metadata: Mapping[str, object]
) -> dict[str, str]:
    """DataDome as in.php's ``method=datadome``: the captcha's URL (CapMonster's in
    ``metadata``, with the challenge's ``datadomeCookie``, required), the user agent, and
    the proxy's address (already checked as the dialect takes it)."""
    params = {"method": "datadome", "userAgent": _text(task, "userAgent")}
    if dialect == "capmonster":
        params["captcha_url"] = _text(metadata, "captchaUrl")
        if not _text(metadata, "datadomeCookie").startswith("datadome="):
            raise ApiError("ERROR_BAD_PARAMETERS")
        # CapMonster's userAgent is optional: its workers' own when none is given.
        params["userAgent"] = params["userAgent"] or DEFAULT_USER_AGENT
    else:
        params["captcha_url"] = _text(task, "captchaUrl")
    return {**params, **_proxy(task)}


def _cloudflare(dialect: str, task: Mapping[str, object]) -> dict[str, str]:
    """Cloudflare's challenge page as CaptchaAI's ``method=cloudflare_challenge``: the user
    agent and the challenge page (CapMonster's TurnstileTask in cf_clearance mode: both
    required, the page as ``htmlPageBase64``; CapSolver's AntiCloudflareTask: both
    optional, the page as ``html``), and the proxy's address."""
    params = {"method": "cloudflare_challenge", "userAgent": _text(task, "userAgent")}
    if dialect == "capmonster":
        try:
            page = base64.b64decode(_text(task, "htmlPageBase64"), validate=True).decode()
        except ValueError:
            raise ApiError("ERROR_BAD_PARAMETERS") from None
        if not page or not params["userAgent"] or not _text(task, "websiteKey"):
            raise ApiError("ERROR_BAD_PARAMETERS")
        params["html"] = page
    else:
        params["html"] = _text(task, "html")
    return {**params, **_proxy(task)}


def _proxy(task: Mapping[str, object]) -> dict[str, str]:
    """The task's proxy as in.php's ``proxy`` (its address only: already checked as the
    dialect takes it); {} without one."""
    address, port = task.get("proxyAddress"), task.get("proxyPort")
    proxy = task.get("proxy")
    if isinstance(address, str) and isinstance(port, int):
        return {"proxy": f"{address}:{port}"}
    if isinstance(proxy, str):  # CapSolver: [scheme:]host:port[:user:pass] or user:pass@...
        bare = _SCHEME.sub("", proxy).rpartition("@")[2]
        return {"proxy": ":".join(bare.split(":")[:2])}
    return {}


def _challenge(
    dialect: str, task: Mapping[str, object], metadata: Mapping[str, object]
) -> dict[str, str]:
    """Turnstile challenge mode's ``pagedata`` and ``userAgent`` ({} outside that mode).
    CapSolver has no challenge mode for Turnstile (its AntiCloudflareTask is another
    product): its fields there are invalid task data."""
    if dialect == "capsolver":
        if any(name in task or name in metadata for name in _CHALLENGE_FIELDS):
            raise JsonError("ERROR_INVALID_TASK_DATA")
        return {}
    pagedata = _text(task, _PAGEDATA[dialect])
    if dialect == "capmonster":
        mode = task.get("cloudflareTaskType")
        if mode is not None and mode != "token":
            raise JsonError("ERROR_TASK_NOT_SUPPORTED")  # wait_room: not emulated
        if (mode == "token") != bool(pagedata):
            raise ApiError("ERROR_BAD_PARAMETERS")  # CapMonster wants both or neither
    if not pagedata:
        return {}
    # Anti-Captcha ignores a task's user agent ("won't work at all", its Turnstile page):
    # the solution carries the one its worker used.
    agent = "" if dialect == "anticaptcha" else _text(task, "userAgent")
    return {"pagedata": pagedata, "userAgent": agent}


def _geetest(dialect: str, task: Mapping[str, object]) -> dict[str, str]:
    """GeeTest v3 (``gt``, ``challenge``), or v4: ``version: 4`` with ``gt`` = the captcha
    id (2Captcha also wants ``initParameters.captcha_id``), or CapSolver's ``captchaId``."""
    version = _text(task, "version")
    api_server = _text(task, "geetestApiServerSubdomain")
    if dialect == "capsolver" and "captchaId" in task:
        version = "4"
    if version not in ("", "3", "4"):
        raise ApiError("ERROR_BAD_PARAMETERS")
    if version != "4":
        gt, challenge = _text(task, "gt"), _text(task, "challenge")
        return {"method": "geetest", "gt": gt, "challenge": challenge, "api_server": api_server}
    if dialect == "capsolver":
        captcha_id = _text(task, "captchaId")
    else:
        captcha_id = _text(task, "gt")
        init = task.get("initParameters")
        # Only 2Captcha repeats the id in initParameters; elsewhere they are the widget's
        # own (Anti-Captcha's example: {"riskType": "slide"}; anticaptchaofficial sends {}).
        if dialect == "2captcha-v2" or init is not None:
            if not isinstance(init, dict):
                raise ApiError("ERROR_BAD_PARAMETERS")
            given = _text(init, "captcha_id")
            if given != captcha_id and (given or dialect == "2captcha-v2"):
                raise ApiError("ERROR_BAD_PARAMETERS")
    return {"method": "geetest_v4", "captcha_id": captcha_id, "api_server": api_server}


def _funcaptcha(task: Mapping[str, object]) -> dict[str, str]:
    """``websitePublicKey``, ``funcaptchaApiJSSubdomain`` (a host), ``data`` (a JSON
    string ``{"blob": ...}``), ``userAgent``."""
    params = {"method": "funcaptcha", "publickey": _text(task, "websitePublicKey")}
    subdomain = _text(task, "funcaptchaApiJSSubdomain")
    if subdomain:
        params["surl"] = subdomain if "://" in subdomain else "https://" + subdomain
    raw = task.get("data")
    # anticaptchaofficial sends "data": "" when no blob is set: no blob, not a bad one.
    if raw is not None and raw != "":
        try:
            data = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("blob", ""), str):
            raise ApiError("ERROR_BAD_PARAMETERS")
        params["data[blob]"] = data.get("blob", "")
    params["userAgent"] = _text(task, "userAgent")
    return params


def _altcha(
    dialect: str, task: Mapping[str, object], extra: Mapping[str, object]
) -> dict[str, str]:
    """The challenge as in.php's ``challenge_json``: 2Captcha's and Anti-Captcha's
    ``challengeJSON`` (their ``challengeURL``, which the sandbox cannot fetch, rides
    along as ``challenge_url``), or CapMonster's ``metadata`` fields, all strings, put
    back together (its ``iterations`` is the challenge's ``maxnumber``; no algorithm
    field: SHA-256, the widget's default)."""
    if dialect != "capmonster":
        return {
            "challenge_json": _text(task, "challengeJSON"),
            "challenge_url": _text(task, "challengeURL"),
        }
    fields = {name: extra.get(name) for name in ("challenge", "iterations", "salt", "signature")}
    if not all(isinstance(value, str) for value in fields.values()):
        raise ApiError("ERROR_BAD_PARAMETERS")
    iterations = str(fields.pop("iterations"))
    if not iterations.isdigit():
        raise ApiError("ERROR_BAD_PARAMETERS")
    challenge = {"algorithm": "SHA-256", "maxnumber": int(iterations), **fields}
    return {"challenge_json": json.dumps(challenge)}


def _text(document: Mapping[str, object], name: str) -> str:
    """A task field as in.php would carry it (booleans as 1/0); objects are refused."""
    raw = document.get(name)
    if raw is None:
        return ""
    if isinstance(raw, bool):
        return "1" if raw else "0"
    if isinstance(raw, str | int | float):
        return str(raw)
    raise ApiError("ERROR_BAD_PARAMETERS")
