"""The JSON task API's dialects: task types, proxy fields, solutions and error answers.

Facts from docs/PROVIDERS.md. A JSON task is checked by translating it into the
in.php parameters it means and handing those to :func:`.protocol.parse_submission`,
so both wire formats validate a captcha the same way; only the names differ.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from .json_params import JsonError, classic_params
from .json_solutions import solution
from .protocol import ApiError, Submission, parse_submission

__all__ = [
    "TASK_TYPES",
    "WITHDRAWN",
    "JsonError",
    "error_answer",
    "parse_task",
    "solution",
]

#: ``type`` -> (captcha kind, proxy: ``none``, ``required`` or ``optional``), per dialect.
TaskTypes = Mapping[str, tuple[str, str]]


def _pair(base: str, kind: str, suffix: str = "Proxyless") -> dict[str, tuple[str, str]]:
    """A proxyless type and its proxy twin (``RecaptchaV2TaskProxyless`` / ``RecaptchaV2Task``)."""
    return {base + suffix: (kind, "none"), base: (kind, "required")}


_COMMON = {
    **_pair("RecaptchaV2Task", "recaptcha_v2"),
    **_pair("RecaptchaV2EnterpriseTask", "recaptcha_v2"),
    "RecaptchaV3TaskProxyless": ("recaptcha_v3", "none"),
    **_pair("TurnstileTask", "turnstile"),
    **_pair("HCaptchaTask", "hcaptcha"),
    **_pair("GeeTestTask", "geetest"),  # v3, or v4 with ``version: 4``
    "ImageToTextTask": ("image", "none"),
    **_pair("FunCaptchaTask", "funcaptcha"),
    **_pair("AmazonTask", "aws_waf"),
}
#: MTCaptcha at 2Captcha (its api-docs' MtCaptchaTaskProxyless / MtCaptchaTask) and
#: Prosopo at 2Captcha and Anti-Captcha (ProsopoTaskProxyless / ProsopoTask).
_TWOCAPTCHA_MT = _pair("MtCaptchaTask", "mtcaptcha")
_PROSOPO = _pair("ProsopoTask", "prosopo")
#: Yidun at 2Captcha (YidunTaskProxyless / YidunTask, python-rucaptcha's names).
_TWOCAPTCHA_YIDUN = _pair("YidunTask", "yidun")
#: Binance at 2Captcha (BinanceTaskProxyless / BinanceTask, python-rucaptcha's names).
_TWOCAPTCHA_BINANCE = _pair("BinanceTask", "binance")
#: Tencent at 2Captcha (TencentTaskProxyless / TencentTask, python-rucaptcha's names).
_TWOCAPTCHA_TENCENT = _pair("TencentTask", "tencent")
#: Friendly Captcha at 2Captcha and Anti-Captcha (FriendlyCaptchaTaskProxyless / ...Task).
_FRIENDLY = _pair("FriendlyCaptchaTask", "friendly_captcha")
#: Altcha at 2Captcha and Anti-Captcha (AltchaTaskProxyless / AltchaTask).
_ALTCHA = _pair("AltchaTask", "altcha")
#: DataDome: through the task's own proxy only. 2Captcha's DataDomeSliderTask; CapSolver's
#: under both its spellings (capsolver 1.0.7's DataDomeSliderTask, its docs'
#: DatadomeSliderTask); CapMonster's CustomTask class DataDome. Anti-Captcha: none.
_DATADOME = {"DataDomeSliderTask": ("datadome", "required")}
#: CapMonster's ``cloudflareTaskType`` that makes a TurnstileTask Cloudflare's challenge page.
CF_CLEARANCE_MODE = "cf_clearance"
_CAPMONSTER = {
    name: (kind, "none" if kind in ("image", "grid") else "optional")
    for name, (kind, _) in {
        **_COMMON,
        **_pair("NoCaptchaTask", "recaptcha_v2"),
        "RecaptchaV3EnterpriseTask": ("recaptcha_v3", "none"),
        # One type each, proxy optional (docs.capmonster.cloud's mtcaptcha / prosopo pages).
        "MTCaptchaTask": ("mtcaptcha", "optional"),
        "ProsopoTask": ("prosopo", "optional"),
        # One type, proxy optional (docs.capmonster.cloud's yidun-task page).
        "YidunTask": ("yidun", "optional"),
        # One type, proxy optional (docs.capmonster.cloud's binance page).
        "BinanceTask": ("binance", "optional"),
        # CustomTask by its class (capmonstercloudclient's FriendlyCustomTaskRequest).
        "CustomTask/friendly": ("friendly_captcha", "optional"),
        # ComplexImageTask by its class (capmonstercloudclient's
        # RecaptchaComplexImageTaskRequest).
        "ComplexImageTask/recaptcha": ("grid", "none"),
        # capmonstercloudclient's AltchaCustomTaskRequest.
        "CustomTask/altcha": ("altcha", "optional"),
        # capmonstercloudclient's TenDiCustomTaskRequest (docs.capmonster.cloud's tendi page).
        "CustomTask/TenDI": ("tencent", "optional"),
    }.items()
}
TASK_TYPES: Mapping[str, TaskTypes] = {
    "2captcha-v2": {
        **_COMMON,
        "RecaptchaV3EnterpriseTaskProxyless": ("recaptcha_v3", "none"),
        "CoordinatesTask": ("coordinates", "none"),
        **_TWOCAPTCHA_MT,
        **_PROSOPO,
        **_FRIENDLY,
        "GridTask": ("grid", "none"),
        **_ALTCHA,
        **_DATADOME,
        **_TWOCAPTCHA_YIDUN,
        **_TWOCAPTCHA_BINANCE,
        **_TWOCAPTCHA_TENCENT,
    },
    "anticaptcha": {
        **_COMMON,
        **_pair("NoCaptchaTask", "recaptcha_v2"),
        "ImageToCoordinatesTask": ("coordinates", "none"),
        **_PROSOPO,
        **_FRIENDLY,
        **_ALTCHA,
    },
    # No hCaptcha, FunCaptcha or coordinates at CapSolver; its own GeeTest example spells
    # the type GeetestTaskProxyless (``captchaId`` makes either one GeeTest v4).
    "capsolver": {
        **_pair("ReCaptchaV2Task", "recaptcha_v2", "ProxyLess"),
        **_pair("ReCaptchaV2EnterpriseTask", "recaptcha_v2", "ProxyLess"),
        **_pair("ReCaptchaV3Task", "recaptcha_v3", "ProxyLess"),
        **_pair("ReCaptchaV3EnterpriseTask", "recaptcha_v3", "ProxyLess"),
        "AntiTurnstileTaskProxyLess": ("turnstile", "none"),
        "GeeTestTaskProxyLess": ("geetest", "none"),
        "GeetestTaskProxyless": ("geetest", "none"),
        "ImageToTextTask": ("image", "none"),
        **_pair("AntiAwsWafTask", "aws_waf", "ProxyLess"),
        **_pair("MtCaptchaTask", "mtcaptcha", "ProxyLess"),  # no Prosopo at CapSolver
        "FriendlyCaptchaTaskProxyless": ("friendly_captcha", "none"),  # its spelling
        "ReCaptchaV2Classification": ("grid", "none"),
        **_DATADOME,
        "DatadomeSliderTask": ("datadome", "required"),
        # Cloudflare's challenge page: through the task's own proxy only.
        "AntiCloudflareTask": ("cloudflare_challenge", "required"),
    },
    "capmonster": {
        **_CAPMONSTER,
        "CustomTask/DataDome": ("datadome", "required"),
        # TurnstileTask in its cf_clearance mode (its turnstile-challenge-task page).
        f"TurnstileTask/{CF_CLEARANCE_MODE}": ("cloudflare_challenge", "required"),
    },
}

#: Kinds a dialect still names a task type for but no longer solves, and the errorCode
#: its createTask answers: Anti-Captcha's own (anti-captcha/anticaptcha-python#6),
#: CapMonster's (CapMonsterCloud/capmonster-python-captcha-solver#30); 2Captcha's sources
#: give no code for its JSON API, so it answers its documented ERROR_TASK_NOT_SUPPORTED.
WITHDRAWN: Mapping[str, Mapping[str, str]] = {
    "2captcha-v2": {"hcaptcha": "ERROR_TASK_NOT_SUPPORTED"},
    "anticaptcha": {"hcaptcha": "ERROR_TASK_TYPE_DEPRECATED"},
    "capmonster": {"hcaptcha": "ERROR_TASK_NOT_SUPPORTED"},
}

#: errorId per code at 2Captcha and Anti-Captcha (CapMonster and CapSolver: always 1).
ERROR_IDS = {
    "ERROR_KEY_DOES_NOT_EXIST": 1,
    "ERROR_NO_SLOT_AVAILABLE": 2,
    "ERROR_ZERO_CAPTCHA_FILESIZE": 3,
    "ERROR_TOO_BIG_CAPTCHA_FILESIZE": 4,
    "ERROR_ZERO_BALANCE": 10,
    "ERROR_CAPTCHA_UNSOLVABLE": 12,
    "ERROR_NO_SUCH_METHOD": 14,
    "ERROR_IMAGE_TYPE_NOT_SUPPORTED": 15,
    "ERROR_NO_SUCH_CAPCHA_ID": 16,
    "ERROR_TASK_ABSENT": 22,
    "ERROR_TASK_NOT_SUPPORTED": 23,
    "ERROR_INCORRECT_SESSION_DATA": 24,
    "ERROR_RECAPTCHA_INVALID_SITEKEY": 31,
}
_DESCRIPTIONS = {
    "ERROR_KEY_DOES_NOT_EXIST": "Account authorization key not found in the system",
    "ERROR_KEY_DENIED_ACCESS": "Invalid clientKey",
    "ERROR_NO_SLOT_AVAILABLE": "No idle workers are available at the moment",
    "ERROR_SERVICE_UNAVALIABLE": "The service is currently unavailable",
    "ERROR_ZERO_BALANCE": "Account has zero or negative balance",
    "ERROR_CAPTCHA_UNSOLVABLE": "Workers could not solve the captcha",
    "ERROR_NO_SUCH_CAPCHA_ID": "The task does not exist or has expired",
    "ERROR_TASKID_INVALID": "Task ID does not exist or is invalid",
    "ERROR_TASK_NOT_SUPPORTED": "The task type is not supported",
    "ERROR_TASK_TYPE_DEPRECATED": "This task type is not supported any more",
    "ERROR_TASK_ABSENT": "The task property is missing",
    "ERROR_TOO_MUCH_REQUESTS": "Too many requests for this task: wait 2 seconds",
}

#: A classic code (from :func:`parse_submission` or the state) -> the JSON dialects' code.
_FROM_CLASSIC = {
    "ERROR_PAGEURL": "ERROR_INCORRECT_SESSION_DATA",
    "ERROR_BAD_PARAMETERS": "ERROR_INCORRECT_SESSION_DATA",
    "ERROR_BAD_PROXY": "ERROR_INCORRECT_SESSION_DATA",
    "ERROR_GOOGLEKEY": "ERROR_RECAPTCHA_INVALID_SITEKEY",
    "ERROR_WRONG_GOOGLEKEY": "ERROR_RECAPTCHA_INVALID_SITEKEY",
    "ERROR_UPLOAD": "ERROR_IMAGE_TYPE_NOT_SUPPORTED",
    "ERROR_WRONG_CAPTCHA_ID": "ERROR_NO_SUCH_CAPCHA_ID",
    "ERROR_WRONG_ID_FORMAT": "ERROR_NO_SUCH_CAPCHA_ID",
    "ERROR_DUPLICATE_REPORT": "ERROR_NO_SUCH_CAPCHA_ID",
    "ERROR_REPORT_NOT_RECORDED": "ERROR_NO_SUCH_CAPCHA_ID",
}
#: CapSolver's own names for the same situations.
_CAPSOLVER = {
    "ERROR_KEY_DOES_NOT_EXIST": "ERROR_KEY_DENIED_ACCESS",
    "ERROR_NO_SLOT_AVAILABLE": "ERROR_SERVICE_UNAVALIABLE",  # sic
    "ERROR_NO_SUCH_CAPCHA_ID": "ERROR_TASKID_INVALID",
    "ERROR_INCORRECT_SESSION_DATA": "ERROR_INVALID_TASK_DATA",
    "ERROR_RECAPTCHA_INVALID_SITEKEY": "ERROR_INVALID_TASK_DATA",
    "ERROR_TASK_ABSENT": "ERROR_INVALID_TASK_DATA",
    "ERROR_NO_SUCH_METHOD": "ERROR_BAD_REQUEST",
    "ERROR_ZERO_CAPTCHA_FILESIZE": "ERROR_INVALID_IMAGE",
    "ERROR_TOO_BIG_CAPTCHA_FILESIZE": "ERROR_INVALID_IMAGE",
    "ERROR_IMAGE_TYPE_NOT_SUPPORTED": "ERROR_INVALID_IMAGE",
}

_PROXY_TYPES = frozenset({"http", "https", "socks4", "socks5"})
_HOST_RE = re.compile(r"^[A-Za-z0-9.\-]{1,253}$|^\[?[0-9A-Fa-f:]{2,39}\]?$")
_PROXY_FIELDS = ("proxyType", "proxyAddress", "proxyPort", "proxyLogin", "proxyPassword")
#: CapSolver's ``proxy``: ``[scheme://]host:port[:user:pass]`` or ``[scheme://]user:pass@host:port``.
_CAPSOLVER_PROXY_RE = re.compile(
    r"^(?:(?:https?|socks[45])(?::|://))?"
    r"(?:(?P<user>[^:@/\s]+):(?P<password>[^@/\s]*)@)?"
    r"(?P<host>[^:@/\s]+):(?P<port>\d{1,5})(?::[^:@/\s]+:[^@/\s]*)?$"
)


def dialect_code(dialect: str, code: str) -> str:
    """A classic or generic code as ``dialect`` names it."""
    code = _FROM_CLASSIC.get(code, code)
    return _CAPSOLVER.get(code, code) if dialect == "capsolver" else code


def error_answer(dialect: str, code: str) -> tuple[int, dict[str, object]]:
    """HTTP status and body of an error in ``dialect``: numbered errorIds at 2Captcha and
    Anti-Captcha, 1 elsewhere; CapSolver answers HTTP 401 for a bad key, 400 otherwise."""
    code = dialect_code(dialect, code)
    error_id = ERROR_IDS.get(code, 1) if dialect in ("2captcha-v2", "anticaptcha") else 1
    document: dict[str, object] = {
        "errorId": error_id,
        "errorCode": code,
        "errorDescription": _DESCRIPTIONS.get(code, code.removeprefix("ERROR_").lower()),
    }
    if dialect != "capsolver":
        return 200, document
    return (401 if code == "ERROR_KEY_DENIED_ACCESS" else 400), document


def parse_task(
    dialect: str, task: object, min_image_bytes: int, max_image_bytes: int
) -> tuple[Submission, str]:
    """Check a createTask ``task`` in ``dialect``: its Submission and its type, or JsonError."""
    if not isinstance(task, dict) or not task:
        raise JsonError("ERROR_TASK_ABSENT")
    name = str(task.get("type", ""))
    if name in ("CustomTask", "ComplexImageTask"):
        name = f"{name}/{task.get('class', '')}"  # CapMonster: one type, many classes
    elif dialect == "capmonster" and task.get("cloudflareTaskType") == CF_CLEARANCE_MODE:
        name = f"{name}/{CF_CLEARANCE_MODE}"  # Turnstile's type, Cloudflare's challenge page
    entry = TASK_TYPES[dialect].get(name)
    if entry is None:
        raise JsonError("ERROR_TASK_NOT_SUPPORTED")
    kind, proxy = entry
    withdrawn = WITHDRAWN.get(dialect, {}).get(kind)
    if withdrawn is not None:
        raise JsonError(withdrawn)
    _check_proxy(dialect, task, proxy)
    try:
        params = classic_params(dialect, kind, task)
        return parse_submission(params, {}, min_image_bytes, max_image_bytes), str(task["type"])
    except ApiError as exc:
        raise JsonError(exc.code) from None


def _check_proxy(dialect: str, task: Mapping[str, object], mode: str) -> None:
    """Proxy fields as the dialect takes them (checked, never echoed)."""
    if dialect == "capsolver":
        if any(name in task for name in _PROXY_FIELDS):
            raise JsonError("ERROR_INVALID_TASK_DATA")  # CapSolver takes one ``proxy`` string
        proxy = task.get("proxy")
        if proxy is None and mode != "required":
            return
        match = _CAPSOLVER_PROXY_RE.match(proxy) if isinstance(proxy, str) else None
        if match is None or not 0 < int(match["port"]) < 65536:
            raise JsonError("ERROR_INVALID_TASK_DATA")
        return
    if not any(name in task for name in _PROXY_FIELDS) and mode != "required":
        return
    kind = task.get("proxyType")
    kinds = _PROXY_TYPES - {"https"} if dialect == "anticaptcha" else _PROXY_TYPES
    address, port = task.get("proxyAddress"), task.get("proxyPort")
    if not isinstance(kind, str) or kind.lower() not in kinds or not isinstance(address, str):
        raise JsonError("ERROR_INCORRECT_SESSION_DATA")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise JsonError("ERROR_INCORRECT_SESSION_DATA")
    if not _HOST_RE.match(address) or (dialect == "anticaptcha" and not _is_ip(address)):
        raise JsonError("ERROR_INCORRECT_SESSION_DATA")  # Anti-Captcha takes IP addresses only
    for name in ("proxyLogin", "proxyPassword"):
        if not isinstance(task.get(name, ""), str):
            raise JsonError("ERROR_INCORRECT_SESSION_DATA")


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False
    return True
