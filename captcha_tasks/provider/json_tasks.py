"""The JSON task API's encoding of the captcha types: the ``task`` object of a
``createTask`` per dialect (docs/PROVIDERS.md §3, §4), and of the proxy.

:func:`task_for` refuses, with :class:`~captcha_tasks.errors.InvalidTaskInput` naming
the provider, a captcha type (or a proxied variant) the dialect does not offer, so
nothing is sent for it. Unset options are left out, not sent as ``null``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

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
from .json_dialects import JsonDialect
from .offers import check_offered, json_names
from .proxy import Proxy

__all__ = ["proxy_fields", "task_for"]

Task = dict[str, Any]


def task_for(dialect: JsonDialect, captcha: Captcha, proxy: Proxy | None = None) -> Task:
    """The ``task`` of a createTask for ``captcha`` (through ``proxy`` if given)."""
    # An image is read from its bytes: a proxy has nothing to load, so none is sent.
    if isinstance(captcha, Image | Coordinates | Grid):
        proxy = None
    check_offered(dialect.name, captcha, proxied=proxy is not None)
    names = json_names(dialect, captcha)
    assert names is not None  # check_offered refused it otherwise
    name = names.proxyless if proxy is None else names.proxy
    task: Task = {"type": name}
    task.update(_fields(dialect, captcha))
    if proxy is not None:
        task.update(proxy_fields(dialect, proxy))
    return {name: value for name, value in task.items() if value is not None}


def proxy_fields(dialect: JsonDialect, proxy: Proxy) -> dict[str, Any]:
    """The proxy as ``dialect`` takes it (the only place the password goes)."""
    kind = proxy.type.lower()
    if dialect.proxy_encoding == "string":
        auth = f":{proxy.username}:{proxy.password}" if proxy.username is not None else ""
        return {"proxy": f"{kind}:{proxy.host}:{proxy.port}{auth}"}
    return {
        "proxyType": kind,
        "proxyAddress": proxy.host,
        "proxyPort": proxy.port,
        "proxyLogin": proxy.username,
        "proxyPassword": proxy.password,
    }


def _fields(dialect: JsonDialect, captcha: Captcha) -> Task:
    match captcha:
        case RecaptchaV2():
            return _recaptcha_v2(dialect, captcha)
        case RecaptchaV3():
            return _recaptcha_v3(dialect, captcha)
        case Turnstile():
            return _turnstile(dialect, captcha)
        case HCaptcha():
            return {"websiteURL": captcha.pageurl, "websiteKey": captcha.sitekey}
        case Image():
            return _image(dialect, captcha)
        case GeeTest():
            return {
                "websiteURL": captcha.pageurl,
                "gt": captcha.gt,
                "challenge": captcha.challenge,
                "geetestApiServerSubdomain": captcha.api_server,
            }
        case FunCaptcha():
            return _funcaptcha(dialect, captcha)
        case GeeTestV4():
            return _geetest_v4(dialect, captcha)
        case AwsWaf():
            return _aws_waf(dialect, captcha)
        case Coordinates():
            return {
                "body": base64.b64encode(captcha.body).decode("ascii"),
                "comment": captcha.textinstructions,
                "mode": "points" if dialect.name == "anticaptcha" else None,
            }
        case MtCaptcha():
            # pageAction and isInvisible: CapMonster Cloud's MTCaptchaTask only; the
            # other dialects document the key and the page alone.
            mine = dialect.name == "capmonster"
            return {
                "websiteURL": captcha.pageurl,
                "websiteKey": captcha.sitekey,
                "pageAction": captcha.action if mine else None,
                "isInvisible": True if mine and captcha.invisible else None,
            }
        case Prosopo():
            return {"websiteURL": captcha.pageurl, "websiteKey": captcha.sitekey}
        case FriendlyCaptcha():
            return _friendly_captcha(dialect, captcha)
        case Grid():
            return _grid(dialect, captcha)
        case Altcha():
            return _altcha(dialect, captcha)
        case DataDome():
            return _datadome(dialect, captcha)
    raise InvalidTaskInput(f"provider {dialect.name}: no task for {type(captcha).__name__}")


def _friendly_captcha(dialect: JsonDialect, captcha: FriendlyCaptcha) -> Task:
    task: Task = {"websiteURL": captcha.pageurl, "websiteKey": captcha.sitekey}
    if dialect.name != "capmonster":
        return task
    # CapMonster Cloud: CustomTask of class ``friendly``, which tells v1 from v2 by the
    # widget script's URL in ``metadata.apiGetLib`` (required: capmonstercloudclient's
    # FriendlyCustomTaskRequest refuses a task without it).
    if captcha.module_script_url is None:
        raise InvalidTaskInput(
            "provider capmonster: Friendly Captcha needs module_script_url (the widget "
            "script the page loads: widget.module.min.js for v1, site.min.js for v2)"
        )
    task.update({"class": "friendly", "metadata": {"apiGetLib": captcha.module_script_url}})
    return task


def _grid(dialect: JsonDialect, captcha: Grid) -> Task:
    body = base64.b64encode(captcha.body).decode("ascii")
    if dialect.name == "capsolver":
        # ReCaptchaV2Classification: the image and reCAPTCHA's object id as ``question``
        # (its list of /m/ ids); the grid it reads from the image.
        return {"image": body, "question": captcha.instruction}
    if dialect.name == "capmonster":
        # ComplexImageTask of class recaptcha (capmonstercloudclient's
        # RecaptchaComplexImageTaskRequest): one image, metadata.Grid "3x3" and the
        # instruction as Task (its text) or TaskDefinition (the object id).
        label = "TaskDefinition" if captcha.is_object_id else "Task"
        grid = f"{captcha.rows}x{captcha.cols}"
        metadata = {"Grid": grid, label: captcha.instruction}
        return {"class": "recaptcha", "imagesBase64": [body], "metadata": metadata}
    # 2Captcha's GridTask (2captcha.com/api-docs/grid).
    return {
        "body": body,
        "rows": captcha.rows,
        "columns": captcha.cols,
        "comment": captcha.instruction,
    }


def _altcha(dialect: JsonDialect, captcha: Altcha) -> Task:
    if dialect.name != "capmonster":
        # 2Captcha's and Anti-Captcha's AltchaTask: the challenge JSON as a string.
        return {"websiteURL": captcha.pageurl, "challengeJSON": captcha.challenge_json}
    # CapMonster Cloud: CustomTask of class ``altcha`` with the challenge's fields, all
    # strings (capmonstercloudclient's AltchaCustomTaskRequest); ``iterations`` is the
    # search bound, the challenge's ``maxnumber``. Its site key may be empty.
    challenge = captcha.challenge()
    return {
        "websiteURL": captcha.pageurl,
        "websiteKey": "",
        "class": "altcha",
        "metadata": {
            "challenge": challenge.challenge,
            "iterations": str(challenge.max_number),
            "salt": challenge.salt,
            "signature": challenge.signature,
        },
    }


def _datadome(dialect: JsonDialect, captcha: DataDome) -> Task:
    if dialect.name != "capmonster":
        # 2Captcha's DataDomeSliderTask and CapSolver's: the page, the captcha's URL and
        # the user agent the cookie will be used with (all required, with the proxy).
        return {
            "websiteURL": captcha.pageurl,
            "captchaUrl": captcha.captcha_url,
            "userAgent": captcha.user_agent,
        }
    # CapMonster Cloud: CustomTask of class DataDome, the captcha's URL and the cookie the
    # challenge set in ``metadata`` (capmonstercloudclient's DataDomeCustomTaskRequest
    # refuses a task without either).
    if captcha.datadome_cookie is None:
        raise InvalidTaskInput(
            "provider capmonster: DataDome needs datadome_cookie (the datadome cookie the "
            "challenged page set)"
        )
    return {
        "class": "DataDome",
        "websiteURL": captcha.pageurl,
        "userAgent": captcha.user_agent,
        "metadata": {
            "captchaUrl": captcha.captcha_url,
            "datadomeCookie": captcha.datadome_cookie,
        },
    }


def _recaptcha_v2(dialect: JsonDialect, captcha: RecaptchaV2) -> Task:
    task: Task = {
        "websiteURL": captcha.pageurl,
        "websiteKey": captcha.sitekey,
        "isInvisible": True if captcha.invisible else None,
        "userAgent": captcha.user_agent,
        "cookies": captcha.cookies,
    }
    if captcha.data_s is not None and captcha.enterprise:
        task["enterprisePayload"] = {"s": captcha.data_s}
    elif captcha.data_s is not None:
        task["recaptchaDataSValue"] = captcha.data_s
    if dialect.name == "capsolver":
        # CapSolver takes cookies as a list of {name, value} and documents no userAgent.
        task["cookies"] = _cookie_list(captcha.cookies)
        task["userAgent"] = None
    return task


def _recaptcha_v3(dialect: JsonDialect, captcha: RecaptchaV3) -> Task:
    if dialect.enterprise_v3 is not None:
        # CapSolver: Enterprise is its own type; minScore is not a documented field.
        return {
            "websiteURL": captcha.pageurl,
            "websiteKey": captcha.sitekey,
            "pageAction": captcha.action,
        }
    return {
        "websiteURL": captcha.pageurl,
        "websiteKey": captcha.sitekey,
        "minScore": captcha.min_score,
        "pageAction": captcha.action,
        "isEnterprise": True if captcha.enterprise else None,  # same type, flagged
    }


def _turnstile(dialect: JsonDialect, captcha: Turnstile) -> Task:
    task: Task = {"websiteURL": captcha.pageurl, "websiteKey": captcha.sitekey}
    # The same widget values under four spellings (PROVIDERS.md D7); userAgent only
    # where documented. CapSolver takes no challenge mode (refused before this).
    if dialect.name == "capsolver":
        metadata = {"action": captcha.action, "cdata": captcha.cdata}
        metadata = {name: value for name, value in metadata.items() if value is not None}
        task["metadata"] = metadata or None
    elif dialect.name == "anticaptcha":
        task.update(action=captcha.action, cData=captcha.cdata, chlPageData=captcha.pagedata)
    elif dialect.name == "capmonster":
        task.update(
            pageAction=captcha.action,
            data=captcha.cdata,
            pageData=captcha.pagedata,
            userAgent=captcha.user_agent,
        )
        if captcha.challenge:
            task["cloudflareTaskType"] = "token"
    else:
        task.update(
            action=captcha.action,
            data=captcha.cdata,
            pagedata=captcha.pagedata,
            userAgent=captcha.user_agent,
        )
    return task


def _funcaptcha(dialect: JsonDialect, captcha: FunCaptcha) -> Task:
    blob = captcha.data_blob
    return {
        "websiteURL": captcha.pageurl,
        "websitePublicKey": captcha.publickey,
        "funcaptchaApiJSSubdomain": captcha.surl_host,
        # A JSON string, not an object (PROVIDERS.md D10).
        "data": None if blob is None else json.dumps({"blob": blob}, separators=(",", ":")),
        "userAgent": captcha.user_agent if dialect.name == "capmonster" else None,
    }


def _geetest_v4(dialect: JsonDialect, captcha: GeeTestV4) -> Task:
    task: Task = {"websiteURL": captcha.pageurl, "geetestApiServerSubdomain": captcha.api_server}
    # The v4 id is CapSolver's captchaId, the others' gt with version 4 (PROVIDERS.md D8).
    if dialect.name == "capsolver":
        task["captchaId"] = captcha.captcha_id
        return task
    task.update(gt=captcha.captcha_id, version=4)
    if dialect.name == "2captcha-v2":
        task["initParameters"] = {"captcha_id": captcha.captcha_id}
    return task


def _aws_waf(dialect: JsonDialect, captcha: AwsWaf) -> Task:
    if dialect.name == "capsolver":  # its own names (PROVIDERS.md D9)
        return {
            "websiteURL": captcha.pageurl,
            "awsKey": captcha.sitekey,
            "awsIv": captcha.iv,
            "awsContext": captcha.context,
            "awsChallengeJS": captcha.challenge_script,
            "awsApiJs": captcha.captcha_script,
        }
    return {
        "websiteURL": captcha.pageurl,
        "websiteKey": captcha.sitekey,
        "iv": captcha.iv,
        "context": captcha.context,
        "challengeScript": captcha.challenge_script,
        "captchaScript": captcha.captcha_script,
        # CapMonster answers the voucher pair unless asked for the cookie itself.
        "cookieSolution": True if dialect.name == "capmonster" else None,
    }


def _image(dialect: JsonDialect, captcha: Image) -> Task:
    task: Task = {"body": base64.b64encode(captcha.body).decode("ascii")}
    if dialect.name in ("2captcha-v2", "anticaptcha"):
        task.update(
            phrase=captcha.phrase,
            case=captcha.regsense,
            numeric=captcha.numeric,
            math=captcha.calc,
            minLength=captcha.min_len or None,
            maxLength=captcha.max_len or None,
            comment=captcha.textinstructions,
        )
    elif dialect.name == "capmonster":
        task.update(case=captcha.regsense, math=captcha.calc)
        task["numeric"] = None if captcha.numeric is None else captcha.numeric == 1
    return task


def _cookie_list(cookies: str | None) -> list[dict[str, str]] | None:
    if cookies is None:
        return None
    out: list[dict[str, str]] = []
    for part in cookies.split(";"):
        # "name=value" (browsers) or "name:value" (in.php's documented form).
        separator = "=" if "=" in part else ":"
        name, _, value = part.strip().partition(separator)
        if name:
            out.append({"name": name, "value": value})
    return out
