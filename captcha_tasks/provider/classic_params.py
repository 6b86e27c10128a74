"""in.php's encoding of the captcha types and of the proxy, for the classic provider.

The captcha types are plain data; each provider maps them to its own protocol. This
module is the classic (in.php / res.php) mapping: the form parameters of a submit
(without ``key`` and ``json``, which :class:`~captcha_tasks.provider.classic.SolverClient`
adds), the multipart upload of an image, and the proxy fields.
"""

from __future__ import annotations

import base64

from ..errors import InvalidTaskInput
from .captchas import (
    Altcha,
    AwsWaf,
    Captcha,
    Coordinates,
    DataDome,
    FriendlyCaptcha,
    FunCaptcha,
    GeeTest,
    GeeTestV4,
    Grid,
    HCaptcha,
    Image,
    MtCaptcha,
    Prosopo,
    RecaptchaV2,
    RecaptchaV3,
    Turnstile,
)
from .proxy import Proxy

__all__ = ["Files", "proxy_params", "submit_files", "submit_params"]

#: Multipart uploads as requests takes them: field name -> (file name, content, mime type).
Files = dict[str, tuple[str, bytes, str]]

#: Image hints in.php takes as integers (booleans as 0 / 1), in the order they are sent.
_IMAGE_HINTS = ("numeric", "min_len", "max_len", "phrase", "regsense", "calc")


def submit_params(captcha: Captcha) -> dict[str, str]:
    """in.php's parameters for ``captcha`` (``method`` and its fields; unset options left out)."""
    match captcha:
        case RecaptchaV2():
            return _recaptcha_v2(captcha)
        case RecaptchaV3():
            return _recaptcha_v3(captcha)
        case Turnstile():
            return _compact(
                {
                    "method": "turnstile",
                    "sitekey": captcha.sitekey,
                    "pageurl": captcha.pageurl,
                    "action": captcha.action,
                    "data": captcha.cdata,
                    "pagedata": captcha.pagedata,
                    "userAgent": captcha.user_agent,
                }
            )
        case GeeTest():
            return _compact(
                {
                    "method": "geetest",
                    "gt": captcha.gt,
                    "challenge": captcha.challenge,
                    "pageurl": captcha.pageurl,
                    "api_server": captcha.api_server,
                }
            )
        case HCaptcha():
            return {"method": "hcaptcha", "sitekey": captcha.sitekey, "pageurl": captcha.pageurl}
        case Image():
            return _image(captcha)
        case FunCaptcha():
            return _compact(
                {
                    "method": "funcaptcha",
                    "publickey": captcha.publickey,
                    "pageurl": captcha.pageurl,
                    "surl": None if captcha.surl_host is None else f"https://{captcha.surl_host}",
                    "data[blob]": captcha.data_blob,
                    "userAgent": captcha.user_agent,
                }
            )
        case GeeTestV4():
            return _compact(
                {
                    "method": "geetest_v4",
                    "captcha_id": captcha.captcha_id,
                    "pageurl": captcha.pageurl,
                    "api_server": captcha.api_server,
                }
            )
        case AwsWaf():
            return _compact(
                {
                    "method": "amazon_waf",
                    "sitekey": captcha.sitekey,
                    "iv": captcha.iv,
                    "context": captcha.context,
                    "pageurl": captcha.pageurl,
                    "challenge_script": captcha.challenge_script,
                    "captcha_script": captcha.captcha_script,
                }
            )
        case Coordinates():
            return _compact(
                {
                    **_upload(captcha.body, captcha.multipart),
                    "coordinatescaptcha": "1",
                    "textinstructions": captcha.textinstructions,
                }
            )
        case MtCaptcha():
            # 2Captcha's in.php takes the key and the page only (2captcha-python's
            # mtcaptcha()): action and invisible are CapMonster's.
            return {"method": "mt_captcha", "sitekey": captcha.sitekey, "pageurl": captcha.pageurl}
        case Prosopo():
            return {"method": "prosopo", "sitekey": captcha.sitekey, "pageurl": captcha.pageurl}
        case FriendlyCaptcha():
            # 2captcha-python's friendly_captcha(): the key and the page; the script URL
            # is CapMonster's.
            return {
                "method": "friendly_captcha",
                "sitekey": captcha.sitekey,
                "pageurl": captcha.pageurl,
            }
        case Grid():
            # 2Captcha's grid method (2captcha-python 2.1.2 grid(): recaptcha=1, rows and
            # cols as recaptcharows / recaptchacols, the text as textinstructions).
            return _compact(
                {
                    **_upload(captcha.body, False),
                    "recaptcha": "1",
                    "recaptcharows": str(captcha.rows),
                    "recaptchacols": str(captcha.cols),
                    "textinstructions": captcha.instruction,
                }
            )
        case Altcha():
            # 2captcha-python's altcha(): the page and the challenge (its JSON, which the
            # worker fetched when it was given the URL).
            return {
                "method": "altcha",
                "pageurl": captcha.pageurl,
                "challenge_json": captcha.challenge_json,
            }
        case DataDome():
            # 2captcha-python's datadome(): captcha_url, pageurl, userAgent and the proxy
            # (proxy_params, which the client adds).
            return {
                "method": "datadome",
                "captcha_url": captcha.captcha_url,
                "pageurl": captcha.pageurl,
                "userAgent": captcha.user_agent,
            }
    raise InvalidTaskInput(f"in.php has no method for {type(captcha).__name__}")


def submit_files(captcha: Captcha) -> Files | None:
    """The multipart upload to send with :func:`submit_params`: only an :class:`Image`
    or :class:`Coordinates` with ``multipart`` set (``method=post``) has one."""
    if not isinstance(captcha, Image | Coordinates) or not captcha.multipart:
        return None
    extension, mime = captcha.kind
    # A fixed name with the right extension: the provider checks it, and local
    # file names have no business leaving the machine.
    return {"file": (f"captcha.{extension}", captcha.body, mime)}


def proxy_params(proxy: Proxy) -> dict[str, str]:
    """``proxy`` and ``proxytype`` for in.php (the only place the password goes)."""
    auth = f"{proxy.username}:{proxy.password}@" if proxy.username is not None else ""
    return {"proxy": f"{auth}{proxy.address}", "proxytype": proxy.type}


def _recaptcha_v2(captcha: RecaptchaV2) -> dict[str, str]:
    return _compact(
        {
            "method": "userrecaptcha",
            "googlekey": captcha.sitekey,
            "pageurl": captcha.pageurl,
            "invisible": "1" if captcha.invisible else None,
            "enterprise": "1" if captcha.enterprise else None,
            "data-s": captcha.data_s,
            "cookies": captcha.cookies,
            "userAgent": captcha.user_agent,
        }
    )


def _recaptcha_v3(captcha: RecaptchaV3) -> dict[str, str]:
    return _compact(
        {
            "method": "userrecaptcha",
            "version": "v3",
            "googlekey": captcha.sitekey,
            "pageurl": captcha.pageurl,
            "action": captcha.action,
            "min_score": f"{captcha.min_score:g}",
            "enterprise": "1" if captcha.enterprise else None,
        }
    )


def _image(captcha: Image) -> dict[str, str]:
    params: dict[str, str | None] = _upload(captcha.body, captcha.multipart)
    for name in _IMAGE_HINTS:
        value = getattr(captcha, name)
        params[name] = None if value is None else str(int(value))
    params.update(lang=captcha.lang, textinstructions=captcha.textinstructions)
    return _compact(params)


def _upload(body: bytes, multipart: bool) -> dict[str, str | None]:
    # A multipart image travels in submit_files(); otherwise the body goes inline.
    if multipart:
        return {"method": "post"}
    return {"method": "base64", "body": base64.b64encode(body).decode("ascii")}


def _compact(params: dict[str, str | None]) -> dict[str, str]:
    return {name: value for name, value in params.items() if value is not None}
