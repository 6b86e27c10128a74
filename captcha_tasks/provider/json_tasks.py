"""The JSON task API's encoding of the captcha types: the ``task`` object of a
``createTask`` per dialect (docs/PROVIDERS.md §3, §4), and of the proxy.

:func:`task_for` refuses, with :class:`~captcha_tasks.errors.InvalidTaskInput` naming
the provider, a captcha type (or a proxied variant) the dialect does not offer, so
nothing is sent for it. Unset options are left out, not sent as ``null``.
"""

from __future__ import annotations

import base64
from typing import Any

from ..errors import InvalidTaskInput
from .captchas import Captcha, GeeTest, HCaptcha, Image, RecaptchaV2, RecaptchaV3, Turnstile
from .json_dialects import JsonDialect, TaskNames
from .proxy import Proxy

__all__ = ["proxy_fields", "task_for"]

Task = dict[str, Any]


def task_for(dialect: JsonDialect, captcha: Captcha, proxy: Proxy | None = None) -> Task:
    """The ``task`` of a createTask for ``captcha`` (through ``proxy`` if given)."""
    names = dialect.task_types.get(captcha.type)
    if names is not None and getattr(captcha, "enterprise", False):
        if isinstance(captcha, RecaptchaV2):
            names = dialect.enterprise_v2
        elif dialect.enterprise_v3 is not None:
            names = dialect.enterprise_v3
    if names is None:
        raise InvalidTaskInput(
            f"provider {dialect.name} does not solve {type(captcha).__name__} captchas "
            "(docs/PROVIDERS.md, type x provider matrix); nothing was sent",
            "TYPE_NOT_OFFERED",
        )
    # An image is read from its bytes: a proxy has nothing to load, so none is sent.
    if isinstance(captcha, Image):
        proxy = None
    task: Task = {"type": _type_name(dialect, captcha, names, proxy)}
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


def _type_name(
    dialect: JsonDialect, captcha: Captcha, names: TaskNames, proxy: Proxy | None
) -> str:
    name = names.proxyless if proxy is None else names.proxy
    if name is None:
        way = "through a proxy" if proxy is not None else "without a proxy"
        raise InvalidTaskInput(
            f"provider {dialect.name} does not solve {type(captcha).__name__} captchas "
            f"{way}; nothing was sent",
            "TYPE_NOT_OFFERED",
        )
    return name


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
    raise InvalidTaskInput(f"provider {dialect.name}: no task for {type(captcha).__name__}")


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
    # The same two widget values under four spellings (PROVIDERS.md D7).
    if dialect.name == "capsolver":
        metadata = {"action": captcha.action, "cdata": captcha.cdata}
        metadata = {name: value for name, value in metadata.items() if value is not None}
        task["metadata"] = metadata or None
    elif dialect.name == "anticaptcha":
        task.update(action=captcha.action, cData=captcha.cdata)
    elif dialect.name == "capmonster":
        task.update(pageAction=captcha.action, data=captcha.cdata)
    else:
        task.update(action=captcha.action, data=captcha.cdata)
    return task


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
