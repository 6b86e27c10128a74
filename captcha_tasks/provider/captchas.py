"""One frozen dataclass per captcha type: what to solve, in no provider's protocol, and
the registry of every type by its ``type`` string (:data:`CAPTCHA_CLASSES`).

Each checks its fields when built and again in :meth:`Captcha.validate` (which the
client calls before every submit), raising :class:`~captcha_tasks.errors.InvalidTaskInput`
that names the field, so garbage never reaches the provider (which bans accounts that
send too many bad requests). Each provider maps them to its own wire format (in.php's
is :mod:`captcha_tasks.provider.classic_params`), so a new protocol touches no type here.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeVar
from urllib.parse import parse_qs, urlsplit

from ..errors import InvalidTaskInput
from ..settings.parsing import Provider
from ._checks import (
    _AWS_CONTEXT,
    _AWS_IV,
    _AWS_KEY,
    _CHALLENGE,
    _FRIENDLY_KEY,
    _GT,
    _HCAPTCHA_KEY,
    _LANG,
    _MTCAPTCHA_KEY,
    _PROSOPO_KEY,
    _RECAPTCHA_KEY,
    _TURNSTILE_KEY,
    _UUID,
    _brief,
    _fail,
    _flag,
    _host_of,
    _hostname,
    _int,
    _matching,
    _optional_text,
    _optional_url,
    _page_url,
    _set,
    _shown,
    _text,
)
from ._images import (
    DEFAULT_MAX_IMAGE_BYTES,
    MAX_IMAGE_BYTES_CEILING,
    MIN_IMAGE_BYTES,
    check_body,
    decode_base64,
    image_kind,
    read_image,
)
from .kind import Offers, TaskNames, Timing, classic, not_offered, task, withdrawn
from .proxy import Proxy, ProxyType

#: reCAPTCHA's object ids (``/m/015qff``: traffic lights), CapSolver's question list.
_OBJECT_ID = re.compile(r"^/m/[0-9a-z_]{2,16}$")
if TYPE_CHECKING:
    from .altcha import AltchaChallenge

__all__ = [
    "CAPTCHA_CLASSES",
    "DEFAULT_MAX_IMAGE_BYTES",
    "GRID_SIDES",
    "MAX_IMAGE_BYTES_CEILING",
    "MIN_IMAGE_BYTES",
    "Altcha",
    "AwsWaf",
    "Captcha",
    "CaptchaType",
    "Coordinates",
    "DataDome",
    "FriendlyCaptcha",
    "FunCaptcha",
    "GeeTest",
    "GeeTestV4",
    "Grid",
    "HCaptcha",
    "Image",
    "MtCaptcha",
    "Prosopo",
    "Proxy",
    "ProxyType",
    "RecaptchaV2",
    "RecaptchaV3",
    "Turnstile",
]

#: Every kind (the ``type`` of each class here).
CaptchaType = Literal[
    "recaptcha_v2",
    "recaptcha_v3",
    "turnstile",
    "image",
    "geetest",
    "hcaptcha",
    "funcaptcha",
    "geetest_v4",
    "aws_waf",
    "coordinates",
    "mtcaptcha",
    "prosopo",
    "friendly_captcha",
    "grid",
    "altcha",
    "datadome",
]

_C = TypeVar("_C", bound="Captcha")

#: A submit's form parameters as a kind gives them; None: an option left out.
Params = dict[str, str | None]
#: A createTask ``task``'s fields as a kind gives them; None: an option left out.
Task = dict[str, Any]
#: Image hints in.php takes as integers (booleans as 0 / 1), in the order they are sent.
_IMAGE_HINTS = ("numeric", "min_len", "max_len", "phrase", "regsense", "calc")


def _cookie_list(cookies: str | None) -> list[dict[str, str]] | None:
    """``name=value; ...`` cookies (browsers' form, or in.php's ``name:value``) as a list
    of ``{name, value}``."""
    if cookies is None:
        return None
    out: list[dict[str, str]] = []
    for part in cookies.split(";"):
        separator = "=" if "=" in part else ":"
        name, _, value = part.strip().partition(separator)
        if name:
            out.append({"name": name, "value": value})
    return out


def _upload(body: bytes, multipart: bool) -> Params:
    """An image's in.php upload: inline as base64, or (``method=post``) a multipart file
    that :func:`~.classic_params.submit_files` adds."""
    if multipart:
        return {"method": "post"}
    return {"method": "base64", "body": base64.b64encode(body).decode("ascii")}


class Captcha:
    """Base of the captcha kinds: ``type``, its :class:`~.kind.Timing`, its
    :class:`~.kind.Offer` at each provider (``offers``), and ``validate()``."""

    __slots__ = ()
    type: ClassVar[CaptchaType]
    timing: ClassVar[Timing]
    offers: ClassVar[Offers]

    def __post_init__(self) -> None:
        self._check(MAX_IMAGE_BYTES_CEILING)

    def validate(self: _C, *, max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> _C:
        """Check every field again (images against ``max_image_bytes``); returns ``self``."""
        if isinstance(max_image_bytes, bool) or not isinstance(max_image_bytes, int):
            raise TypeError("max_image_bytes must be an int")
        self._check(max_image_bytes)
        return self

    def _check(self, max_image_bytes: int) -> None:
        raise NotImplementedError

    def classic_params(self) -> Params:
        """in.php's parameters for this captcha: ``method`` and its fields (None: an unset
        option, left out). ``key``, ``json`` and the proxy are the client's to add."""
        raise InvalidTaskInput(f"in.php has no method for {type(self).__name__}")

    def json_fields(self, provider: Provider) -> Task:
        """The fields of a createTask's ``task`` for this captcha at JSON ``provider``
        (None: an unset option, left out), beside ``type`` and the proxy's, which
        :func:`~.json_tasks.task_for` adds (docs/PROVIDERS.md §3, §4)."""
        raise InvalidTaskInput(f"provider {provider}: no task for {type(self).__name__}")


@dataclasses.dataclass(frozen=True, slots=True)
class RecaptchaV2(Captcha):
    """reCAPTCHA v2 (checkbox or invisible), optionally Enterprise."""

    type: ClassVar[Literal["recaptcha_v2"]] = "recaptcha_v2"
    timing: ClassVar[Timing] = Timing(
        first_poll=15.0, deadline=180.0, token_ttl=120.0, drain_ceiling=60.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("RecaptchaV2TaskProxyless", "RecaptchaV2Task"),
        "anticaptcha": task("RecaptchaV2TaskProxyless", "RecaptchaV2Task"),
        "capsolver": task("ReCaptchaV2TaskProxyLess", "ReCaptchaV2Task"),
        "capmonster": task("RecaptchaV2Task", "RecaptchaV2Task"),
    }
    sitekey: str
    pageurl: str
    invisible: bool = False
    enterprise: bool = False
    data_s: str | None = None
    cookies: str | None = dataclasses.field(default=None, repr=False)  # session secrets
    user_agent: str | None = None

    def _check(self, max_image_bytes: int) -> None:
        _matching("RecaptchaV2.sitekey", self.sitekey, _RECAPTCHA_KEY, "a reCAPTCHA sitekey")
        _page_url("RecaptchaV2.pageurl", self.pageurl)
        _set(self, "invisible", _flag("RecaptchaV2.invisible", self.invisible))
        _set(self, "enterprise", _flag("RecaptchaV2.enterprise", self.enterprise))
        _optional_text("RecaptchaV2.data_s", self.data_s, max_len=4096)
        _optional_text("RecaptchaV2.cookies", self.cookies, max_len=4096, spaces=True)
        _optional_text("RecaptchaV2.user_agent", self.user_agent, max_len=512, spaces=True)

    def classic_params(self) -> Params:
        return {
            "method": "userrecaptcha",
            "googlekey": self.sitekey,
            "pageurl": self.pageurl,
            "invisible": "1" if self.invisible else None,
            "enterprise": "1" if self.enterprise else None,
            "data-s": self.data_s,
            "cookies": self.cookies,
            "userAgent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "isInvisible": True if self.invisible else None,
            "userAgent": self.user_agent,
            "cookies": self.cookies,
        }
        if self.data_s is not None and self.enterprise:
            task["enterprisePayload"] = {"s": self.data_s}
        elif self.data_s is not None:
            task["recaptchaDataSValue"] = self.data_s
        if provider == "capsolver":
            # CapSolver takes cookies as a list of {name, value} and documents no userAgent.
            task["cookies"] = _cookie_list(self.cookies)
            task["userAgent"] = None
        return task


@dataclasses.dataclass(frozen=True, slots=True)
class RecaptchaV3(Captcha):
    """reCAPTCHA v3: a score-based token for ``action``."""

    type: ClassVar[Literal["recaptcha_v3"]] = "recaptcha_v3"
    timing: ClassVar[Timing] = Timing(
        first_poll=5.0, deadline=90.0, token_ttl=120.0, drain_ceiling=4.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("RecaptchaV3TaskProxyless", None),
        "anticaptcha": task("RecaptchaV3TaskProxyless", None),
        "capsolver": task("ReCaptchaV3TaskProxyLess", "ReCaptchaV3Task"),
        "capmonster": task("RecaptchaV3TaskProxyless", None),
    }
    sitekey: str
    pageurl: str
    action: str = "verify"
    min_score: float = 0.3
    enterprise: bool = False

    def _check(self, max_image_bytes: int) -> None:
        _matching("RecaptchaV3.sitekey", self.sitekey, _RECAPTCHA_KEY, "a reCAPTCHA sitekey")
        _page_url("RecaptchaV3.pageurl", self.pageurl)
        _text("RecaptchaV3.action", self.action)
        score = self.min_score
        if isinstance(score, bool) or not isinstance(score, int | float):
            _fail("RecaptchaV3.min_score", f"must be a number, got {type(score).__name__}")
        # Range first: math.isfinite() overflows on integers too big for a float.
        if not (0 < score <= 1 and math.isfinite(score)):
            _fail(
                "RecaptchaV3.min_score",
                f"must be in (0, 1] (typically 0.1-0.9), got {_brief(score)}",
            )
        _set(self, "min_score", float(score))
        _set(self, "enterprise", _flag("RecaptchaV3.enterprise", self.enterprise))

    def classic_params(self) -> Params:
        return {
            "method": "userrecaptcha",
            "version": "v3",
            "googlekey": self.sitekey,
            "pageurl": self.pageurl,
            "action": self.action,
            "min_score": f"{self.min_score:g}",
            "enterprise": "1" if self.enterprise else None,
        }

    def json_fields(self, provider: Provider) -> Task:
        if provider == "capsolver":
            # Enterprise is its own type there; minScore is not a documented field.
            return {
                "websiteURL": self.pageurl,
                "websiteKey": self.sitekey,
                "pageAction": self.action,
            }
        return {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "minScore": self.min_score,
            "pageAction": self.action,
            "isEnterprise": True if self.enterprise else None,  # same type, flagged
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Turnstile(Captcha):
    """Cloudflare Turnstile; ``action`` and ``cdata`` when the widget sets them.

    Challenge mode (the widget on a Cloudflare challenge page) is ``pagedata`` set, and
    then ``action`` and ``cdata`` are required; its token is bound to ``user_agent``
    (or to the one the provider answers with).
    """

    type: ClassVar[Literal["turnstile"]] = "turnstile"
    timing: ClassVar[Timing] = Timing(
        first_poll=8.0, deadline=120.0, token_ttl=300.0, drain_ceiling=10.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("TurnstileTaskProxyless", "TurnstileTask"),
        "anticaptcha": task("TurnstileTaskProxyless", "TurnstileTask"),
        "capsolver": task("AntiTurnstileTaskProxyLess", None),
        "capmonster": task("TurnstileTask", "TurnstileTask"),
    }
    sitekey: str
    pageurl: str
    action: str | None = None
    cdata: str | None = None
    pagedata: str | None = dataclasses.field(default=None, repr=False)  # one page load's
    user_agent: str | None = None

    @property
    def challenge(self) -> bool:
        """Whether this is challenge mode (``pagedata`` set)."""
        return self.pagedata is not None

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "Turnstile.sitekey", self.sitekey, _TURNSTILE_KEY, "a Turnstile sitekey (0x4AAA...)"
        )
        _page_url("Turnstile.pageurl", self.pageurl)
        _optional_text("Turnstile.action", self.action)
        _optional_text("Turnstile.cdata", self.cdata, max_len=255)
        _optional_text("Turnstile.pagedata", self.pagedata, max_len=4096)
        _optional_text("Turnstile.user_agent", self.user_agent, max_len=512, spaces=True)
        if self.pagedata is not None:
            for name in ("action", "cdata"):
                if getattr(self, name) is None:
                    _fail(f"Turnstile.{name}", "is required in challenge mode (pagedata set)")

    def classic_params(self) -> Params:
        return {
            "method": "turnstile",
            "sitekey": self.sitekey,
            "pageurl": self.pageurl,
            "action": self.action,
            "data": self.cdata,
            "pagedata": self.pagedata,
            "userAgent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {"websiteURL": self.pageurl, "websiteKey": self.sitekey}
        # The same widget values under four spellings (PROVIDERS.md D7); userAgent only
        # where documented. CapSolver takes no challenge mode (refused before this).
        if provider == "capsolver":
            metadata = {"action": self.action, "cdata": self.cdata}
            metadata = {name: value for name, value in metadata.items() if value is not None}
            task["metadata"] = metadata or None
        elif provider == "anticaptcha":
            task.update(action=self.action, cData=self.cdata, chlPageData=self.pagedata)
        elif provider == "capmonster":
            task.update(
                pageAction=self.action,
                data=self.cdata,
                pageData=self.pagedata,
                userAgent=self.user_agent,
            )
            if self.challenge:
                task["cloudflareTaskType"] = "token"
        else:
            task.update(
                action=self.action,
                data=self.cdata,
                pagedata=self.pagedata,
                userAgent=self.user_agent,
            )
        return task


@dataclasses.dataclass(frozen=True, slots=True)
class GeeTest(Captcha):
    """GeeTest v3: ``gt`` is fixed per site, ``challenge`` is fresh for every page load."""

    type: ClassVar[Literal["geetest"]] = "geetest"
    timing: ClassVar[Timing] = Timing(first_poll=10.0, deadline=120.0, drain_ceiling=12.0)
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("GeeTestTaskProxyless", "GeeTestTask"),
        "anticaptcha": task("GeeTestTaskProxyless", "GeeTestTask"),
        "capsolver": task("GeeTestTaskProxyLess", None),
        "capmonster": task("GeeTestTask", "GeeTestTask"),
    }
    gt: str
    challenge: str
    pageurl: str
    api_server: str | None = None

    def _check(self, max_image_bytes: int) -> None:
        _matching("GeeTest.gt", self.gt, _GT, "a GeeTest gt (32 hex characters)")
        _matching("GeeTest.challenge", self.challenge, _CHALLENGE, "a GeeTest challenge")
        _page_url("GeeTest.pageurl", self.pageurl)
        if self.api_server is not None:
            _hostname("GeeTest.api_server", self.api_server)

    def classic_params(self) -> Params:
        return {
            "method": "geetest",
            "gt": self.gt,
            "challenge": self.challenge,
            "pageurl": self.pageurl,
            "api_server": self.api_server,
        }

    def json_fields(self, provider: Provider) -> Task:
        return {
            "websiteURL": self.pageurl,
            "gt": self.gt,
            "challenge": self.challenge,
            "geetestApiServerSubdomain": self.api_server,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class HCaptcha(Captcha):
    """hCaptcha (2Captcha; CaptchaAI's support is unclear)."""

    type: ClassVar[Literal["hcaptcha"]] = "hcaptcha"
    timing: ClassVar[Timing] = Timing(
        first_poll=15.0, deadline=180.0, token_ttl=120.0, drain_ceiling=60.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": classic(
            "unverified: not in CaptchaAI's own lists (docs.captchaai.com, pypi captchaai); no "
            "withdrawal found either",
        ),
        "2captcha": withdrawn(
            "2captcha/2captcha-python#128, Furry/2captcha#55 (gone from 2Captcha's docs), "
            "Furry/2captcha#58 (in.php answers ERROR_METHOD_CALL)",
        ),
        "2captcha-v2": withdrawn(
            "2captcha/2captcha-python#128, Furry/2captcha#55 (gone from 2captcha.com/api-docs), "
            "NopeCHALLC/nopecha-python#37",
            names=TaskNames("HCaptchaTaskProxyless", "HCaptchaTask"),
        ),
        "anticaptcha": withdrawn(
            "anti-captcha/anticaptcha-python#6 (createTask answers ERROR_TASK_TYPE_DEPRECATED, "
            "2025-02)",
            names=TaskNames("HCaptchaTaskProxyless", "HCaptchaTask"),
        ),
        "capsolver": withdrawn(
            'capsolver/capsolver-python#15 ("We do not support hcaptcha", 2025-10)',
        ),
        "capmonster": withdrawn(
            "CapMonsterCloud/capmonster-python-captcha-solver#30 (createTask answers "
            "ERROR_TASK_NOT_SUPPORTED; its hCaptcha docs page is gone)",
            names=TaskNames("HCaptchaTask", "HCaptchaTask"),
        ),
    }
    sitekey: str
    pageurl: str

    def _check(self, max_image_bytes: int) -> None:
        _matching("HCaptcha.sitekey", self.sitekey, _HCAPTCHA_KEY, "an hCaptcha sitekey (a UUID)")
        _page_url("HCaptcha.pageurl", self.pageurl)

    def classic_params(self) -> Params:
        return {"method": "hcaptcha", "sitekey": self.sitekey, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        return {"websiteURL": self.pageurl, "websiteKey": self.sitekey}


@dataclasses.dataclass(frozen=True, slots=True)
class Image(Captcha):
    """A JPEG, PNG or GIF image with optional hints for the workers.

    ``multipart`` asks for the image to be uploaded as a file rather than inline as
    base64 text (:meth:`from_file` sets it; in.php's ``method=post`` vs ``method=base64``).
    """

    type: ClassVar[Literal["image"]] = "image"
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=90.0, drain_ceiling=0.5)
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("ImageToTextTask", "ImageToTextTask"),
        "anticaptcha": task("ImageToTextTask", "ImageToTextTask"),
        "capsolver": task("ImageToTextTask", "ImageToTextTask"),
        "capmonster": task("ImageToTextTask", "ImageToTextTask"),
    }
    body: bytes = dataclasses.field(repr=False)
    numeric: int | None = None
    min_len: int | None = None
    max_len: int | None = None
    phrase: bool | None = None
    regsense: bool | None = None
    calc: bool | None = None
    lang: str | None = None
    textinstructions: str | None = None
    multipart: bool = False

    @classmethod
    def from_base64(
        cls, data: str, *, max_image_bytes: int = MAX_IMAGE_BYTES_CEILING, **hints: object
    ) -> Image:
        """From base64 text (line breaks and a ``data:image/...;base64,`` prefix allowed);
        text of an image over ``max_image_bytes`` is refused before it is decoded."""
        body = decode_base64("Image.body", data, max_image_bytes)
        return cls._with_hints(body, False, hints)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **hints: object) -> Image:
        """From an image file, uploaded as multipart (``method=post``)."""
        return cls._with_hints(read_image("Image.from_file", path), True, hints)

    @classmethod
    def _with_hints(cls, body: bytes, multipart: bool, hints: dict[str, object]) -> Image:
        names = {f.name for f in dataclasses.fields(cls)} - {"body", "multipart"}
        unknown = sorted(set(hints) - names)
        if unknown:
            _fail(
                "Image", f"unknown hint(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}"
            )
        return cls(body, multipart=multipart, **hints)  # type: ignore[arg-type]

    @property
    def kind(self) -> tuple[str, str]:
        """``(extension, mime type)`` from the magic bytes."""
        return image_kind("Image.body", self.body)

    def _check(self, max_image_bytes: int) -> None:
        _set(self, "body", check_body("Image.body", self.body, max_image_bytes))
        if self.numeric is not None:
            _int("Image.numeric", self.numeric, 0, 4)
        for name in ("min_len", "max_len"):
            if getattr(self, name) is not None:
                _int(f"Image.{name}", getattr(self, name), 0, 20)
        if self.min_len and self.max_len and self.min_len > self.max_len:
            _fail("Image.min_len", f"{self.min_len} is greater than max_len {self.max_len}")
        for name in ("phrase", "regsense", "calc"):
            if getattr(self, name) is not None:
                _set(self, name, _flag(f"Image.{name}", getattr(self, name)))
        if self.lang is not None:
            lang = _text("Image.lang", self.lang, max_len=2).lower()
            if not _LANG.match(lang):
                _fail("Image.lang", f"must be a 2-letter language code, got {_shown(self.lang)}")
            _set(self, "lang", lang)
        _optional_text("Image.textinstructions", self.textinstructions, max_len=140, spaces=True)
        _set(self, "multipart", _flag("Image.multipart", self.multipart))

    def __repr__(self) -> str:
        hints = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.name != "body" and getattr(self, f.name) not in (None, False)
        )
        return f"Image(<{len(self.body)} bytes>{', ' if hints else ''}{hints})"

    def classic_params(self) -> Params:
        params = _upload(self.body, self.multipart)
        for name in _IMAGE_HINTS:  # integers, booleans as 0 / 1, in this order
            value = getattr(self, name)
            params[name] = None if value is None else str(int(value))
        params.update(lang=self.lang, textinstructions=self.textinstructions)
        return params

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {"body": base64.b64encode(self.body).decode("ascii")}
        if provider in ("2captcha-v2", "anticaptcha"):
            task.update(
                phrase=self.phrase,
                case=self.regsense,
                numeric=self.numeric,
                math=self.calc,
                minLength=self.min_len or None,
                maxLength=self.max_len or None,
                comment=self.textinstructions,
            )
        elif provider == "capmonster":
            task.update(case=self.regsense, math=self.calc)
            task["numeric"] = None if self.numeric is None else self.numeric == 1
        return task


@dataclasses.dataclass(frozen=True, slots=True)
class FunCaptcha(Captcha):
    """Arkose Labs FunCaptcha: the site's ``publickey``; ``surl`` is the Arkose API host
    (``https://host`` or ``host``, kept as given), ``data_blob`` the page's ``data[blob]``."""

    type: ClassVar[Literal["funcaptcha"]] = "funcaptcha"
    # Its drain ceiling: a worker's image puzzle like reCAPTCHA v2 and hCaptcha (their
    # 60 s), 20 s typical, the slowest of the sandbox's kinds.
    timing: ClassVar[Timing] = Timing(
        first_poll=15.0, deadline=180.0, token_ttl=120.0, drain_ceiling=60.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(),
        "2captcha": classic(),
        "2captcha-v2": task("FunCaptchaTaskProxyless", "FunCaptchaTask"),
        "anticaptcha": task("FunCaptchaTaskProxyless", "FunCaptchaTask"),
        "capsolver": withdrawn(
            "docs.capsolver.com/guide/api-support (no FunCaptcha in the list), d60/twikit#234",
        ),
        "capmonster": task("FunCaptchaTask", "FunCaptchaTask"),
    }
    publickey: str
    pageurl: str
    surl: str | None = None
    data_blob: str | None = dataclasses.field(default=None, repr=False)  # one page load's
    user_agent: str | None = None

    @property
    def surl_host(self) -> str | None:
        """``surl`` without its scheme: what the JSON APIs take."""
        return None if self.surl is None else _host_of("FunCaptcha.surl", self.surl)

    def _check(self, max_image_bytes: int) -> None:
        _matching("FunCaptcha.publickey", self.publickey, _UUID, "a FunCaptcha public key (a UUID)")
        _page_url("FunCaptcha.pageurl", self.pageurl)
        if self.surl is not None:
            _host_of("FunCaptcha.surl", self.surl)
        _optional_text("FunCaptcha.data_blob", self.data_blob, max_len=16384)
        _optional_text("FunCaptcha.user_agent", self.user_agent, max_len=512, spaces=True)

    def classic_params(self) -> Params:
        return {
            "method": "funcaptcha",
            "publickey": self.publickey,
            "pageurl": self.pageurl,
            "surl": None if self.surl_host is None else f"https://{self.surl_host}",
            "data[blob]": self.data_blob,
            "userAgent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        blob = self.data_blob
        return {
            "websiteURL": self.pageurl,
            "websitePublicKey": self.publickey,
            "funcaptchaApiJSSubdomain": self.surl_host,
            # A JSON string, not an object (PROVIDERS.md D10).
            "data": None if blob is None else json.dumps({"blob": blob}, separators=(",", ":")),
            "userAgent": self.user_agent if provider == "capmonster" else None,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class GeeTestV4(Captcha):
    """GeeTest v4: only the site's ``captcha_id`` (no per-load challenge, unlike v3)."""

    type: ClassVar[Literal["geetest_v4"]] = "geetest_v4"
    # Its drain ceiling: v3's (same 10 s typical solve, same deadline).
    timing: ClassVar[Timing] = Timing(first_poll=10.0, deadline=120.0, drain_ceiling=12.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "blog.captchaai.com/captchaai-api-quick-reference-card (method=geetest&version=4: "
            "another encoding, not built)",
        ),
        "2captcha": classic(),
        "2captcha-v2": task("GeeTestTaskProxyless", "GeeTestTask"),
        "anticaptcha": task("GeeTestTaskProxyless", "GeeTestTask"),
        "capsolver": task("GeeTestTaskProxyLess", None),
        "capmonster": task("GeeTestTask", "GeeTestTask"),
    }
    captcha_id: str
    pageurl: str
    api_server: str | None = None

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "GeeTestV4.captcha_id",
            self.captcha_id,
            _GT,
            "a GeeTest v4 captcha_id (32 hex characters)",
        )
        _page_url("GeeTestV4.pageurl", self.pageurl)
        if self.api_server is not None:
            _hostname("GeeTestV4.api_server", self.api_server)

    def classic_params(self) -> Params:
        return {
            "method": "geetest_v4",
            "captcha_id": self.captcha_id,
            "pageurl": self.pageurl,
            "api_server": self.api_server,
        }

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {"websiteURL": self.pageurl, "geetestApiServerSubdomain": self.api_server}
        # The v4 id is CapSolver's captchaId, the others' gt with version 4 (PROVIDERS.md D8).
        if provider == "capsolver":
            task["captchaId"] = self.captcha_id
            return task
        task.update(gt=self.captcha_id, version=4)
        if provider == "2captcha-v2":
            task["initParameters"] = {"captcha_id": self.captcha_id}
        return task


@dataclasses.dataclass(frozen=True, slots=True)
class AwsWaf(Captcha):
    """An AWS WAF CAPTCHA: ``sitekey`` (the page's key), ``iv`` and ``context`` (fresh per
    page load), and the challenge / captcha script URLs where the page has them."""

    type: ClassVar[Literal["aws_waf"]] = "aws_waf"
    # Its token lifetime: AWS WAF's default immunity time, how long the aws-waf-token
    # cookie is honoured. Its drain ceiling: a puzzle of GeeTest's sort, 12 s typical,
    # GeeTest's 1.2 times.
    timing: ClassVar[Timing] = Timing(
        first_poll=10.0, deadline=120.0, token_ttl=300.0, drain_ceiling=15.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(),
        "2captcha": classic(),
        "2captcha-v2": task("AmazonTaskProxyless", "AmazonTask"),
        "anticaptcha": task("AmazonTaskProxyless", "AmazonTask"),
        "capsolver": task("AntiAwsWafTaskProxyLess", "AntiAwsWafTask"),
        "capmonster": task("AmazonTask", "AmazonTask"),
    }
    sitekey: str
    iv: str
    context: str = dataclasses.field(repr=False)  # long, and one page load's
    pageurl: str
    challenge_script: str | None = None
    captcha_script: str | None = None

    def _check(self, max_image_bytes: int) -> None:
        _matching("AwsWaf.sitekey", self.sitekey, _AWS_KEY, "an AWS WAF key", max_len=2048)
        _matching("AwsWaf.iv", self.iv, _AWS_IV, "an AWS WAF iv", max_len=256)
        _matching("AwsWaf.context", self.context, _AWS_CONTEXT, "an AWS WAF context", max_len=8192)
        _page_url("AwsWaf.pageurl", self.pageurl)
        _optional_url("AwsWaf.challenge_script", self.challenge_script)
        _optional_url("AwsWaf.captcha_script", self.captcha_script)

    def classic_params(self) -> Params:
        return {
            "method": "amazon_waf",
            "sitekey": self.sitekey,
            "iv": self.iv,
            "context": self.context,
            "pageurl": self.pageurl,
            "challenge_script": self.challenge_script,
            "captcha_script": self.captcha_script,
        }

    def json_fields(self, provider: Provider) -> Task:
        if provider == "capsolver":  # its own names (PROVIDERS.md D9)
            return {
                "websiteURL": self.pageurl,
                "awsKey": self.sitekey,
                "awsIv": self.iv,
                "awsContext": self.context,
                "awsChallengeJS": self.challenge_script,
                "awsApiJs": self.captcha_script,
            }
        return {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "iv": self.iv,
            "context": self.context,
            "challengeScript": self.challenge_script,
            "captchaScript": self.captcha_script,
            # CapMonster answers the voucher pair unless asked for the cookie itself.
            "cookieSolution": True if provider == "capmonster" else None,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Coordinates(Captcha):
    """An image whose answer is the points to click (``textinstructions`` says which).

    The image is checked as :class:`~.captchas.Image`'s is; ``multipart`` as there.
    """

    type: ClassVar[Literal["coordinates"]] = "coordinates"
    # Its drain ceiling: points clicked by a worker, not OCR's 0.5 s: twice the 5 s
    # typical solve.
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=90.0, drain_ceiling=10.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(),
        "2captcha": classic(),
        "2captcha-v2": task("CoordinatesTask", None),
        "anticaptcha": task("ImageToCoordinatesTask", None),
        "capsolver": not_offered(),
        "capmonster": not_offered(),
    }
    body: bytes = dataclasses.field(repr=False)
    textinstructions: str | None = None
    multipart: bool = False

    @classmethod
    def from_base64(
        cls,
        data: str,
        *,
        textinstructions: str | None = None,
        max_image_bytes: int = MAX_IMAGE_BYTES_CEILING,
    ) -> Coordinates:
        """From base64 text (line breaks and a ``data:image/...;base64,`` prefix allowed);
        text of an image over ``max_image_bytes`` is refused before it is decoded."""
        body = decode_base64("Coordinates.body", data, max_image_bytes)
        return cls(body, textinstructions)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, textinstructions: str | None = None
    ) -> Coordinates:
        """From an image file, uploaded as multipart (``method=post``)."""
        body = read_image("Coordinates.from_file", path)
        return cls(body, textinstructions, multipart=True)

    @property
    def kind(self) -> tuple[str, str]:
        """``(extension, mime type)`` from the magic bytes."""
        return image_kind("Coordinates.body", self.body)

    def _check(self, max_image_bytes: int) -> None:
        _set(self, "body", check_body("Coordinates.body", self.body, max_image_bytes))
        _optional_text(
            "Coordinates.textinstructions", self.textinstructions, max_len=140, spaces=True
        )
        _set(self, "multipart", _flag("Coordinates.multipart", self.multipart))

    def __repr__(self) -> str:
        hint = "" if self.textinstructions is None else f", {self.textinstructions!r}"
        return f"Coordinates(<{len(self.body)} bytes>{hint})"

    def classic_params(self) -> Params:
        return {
            **_upload(self.body, self.multipart),
            "coordinatescaptcha": "1",
            "textinstructions": self.textinstructions,
        }

    def json_fields(self, provider: Provider) -> Task:
        return {
            "body": base64.b64encode(self.body).decode("ascii"),
            "comment": self.textinstructions,
            "mode": "points" if provider == "anticaptcha" else None,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class MtCaptcha(Captcha):
    """MTCaptcha: the site's ``sitekey`` (``MTPublic-...``); ``action`` and ``invisible``
    as the page's ``mtcaptchaConfig`` sets them (sent where the provider takes them:
    CapMonster Cloud's ``pageAction`` and ``isInvisible``)."""

    type: ClassVar[Literal["mtcaptcha"]] = "mtcaptcha"
    # capmonstercloudclient 4.3.1's first read (GetResultTimeouts: 10 s), and it gives up
    # after 180 s; CapSolver's MtCaptcha page: "results in 5s to 30s" (the upper end: its
    # drain ceiling). Its token lifetime is in no source found: none.
    timing: ClassVar[Timing] = Timing(first_poll=10.0, deadline=180.0, drain_ceiling=30.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 mtcaptcha() (method=mt_captcha: sitekey, pageurl)",
        ),
        "2captcha-v2": task(
            "MtCaptchaTaskProxyless",
            "MtCaptchaTask",
            source="2captcha.com/api-docs/mtcaptcha (MtCaptchaTaskProxyless, MtCaptchaTask)",
        ),
        "anticaptcha": not_offered(
            "not in anti-captcha.com/apidoc/task-types nor anticaptchaofficial 1.0.72",
        ),
        "capsolver": task(
            "MtCaptchaTaskProxyLess",
            "MtCaptchaTask",
            source=(
                "docs.capsolver.com/guide/captcha/MtCaptcha (MtCaptchaTaskProxyLess, "
                "MtCaptchaTask), capsolver 1.0.7 SUPPORT_TASK_TYPE"
            ),
        ),
        "capmonster": task(
            "MTCaptchaTask",
            "MTCaptchaTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/mtcaptcha-task (MTCaptchaTask, "
                "pageAction, isInvisible), capmonstercloudclient 4.3.1 MTCaptchaRequest"
            ),
        ),
    }
    sitekey: str
    pageurl: str
    action: str | None = None
    invisible: bool = False

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "MtCaptcha.sitekey", self.sitekey, _MTCAPTCHA_KEY, "an MTCaptcha sitekey (MTPublic-...)"
        )
        _page_url("MtCaptcha.pageurl", self.pageurl)
        _optional_text("MtCaptcha.action", self.action)
        _set(self, "invisible", _flag("MtCaptcha.invisible", self.invisible))

    def classic_params(self) -> Params:
        # 2Captcha's in.php takes the key and the page only (2captcha-python's
        # mtcaptcha()): action and invisible are CapMonster's.
        return {"method": "mt_captcha", "sitekey": self.sitekey, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        # pageAction and isInvisible: CapMonster Cloud's MTCaptchaTask only; the other
        # dialects document the key and the page alone.
        mine = provider == "capmonster"
        return {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "pageAction": self.action if mine else None,
            "isInvisible": True if mine and self.invisible else None,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Prosopo(Captcha):
    """Prosopo Procaptcha: the site's ``sitekey`` (an SS58 address, ``5...``)."""

    type: ClassVar[Literal["prosopo"]] = "prosopo"
    # capmonstercloudclient 4.3.1's first read (GetResultTimeouts: 10 s), and it gives up
    # after 180 s. Its token lifetime: @prosopo/server's verification refuses a token
    # older than maxVerifiedTime (60 000 ms by default). Its drain ceiling: CapSolver's
    # MtCaptcha page's upper end (5 s to 30 s), as MTCaptcha's.
    timing: ClassVar[Timing] = Timing(
        first_poll=10.0, deadline=180.0, token_ttl=60.0, drain_ceiling=30.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 prosopo() (method=prosopo: sitekey, pageurl)",
        ),
        "2captcha-v2": task(
            "ProsopoTaskProxyless",
            "ProsopoTask",
            source="2captcha.com/api-docs/prosopo-procaptcha (ProsopoTaskProxyless, ProsopoTask)",
        ),
        "anticaptcha": task(
            "ProsopoTaskProxyless",
            "ProsopoTask",
            source=(
                "anti-captcha.com/apidoc/task-types/ProsopoTaskProxyless and /ProsopoTask, "
                "anticaptchaofficial 1.0.72 prosopoproxyless / prosopoproxyon"
            ),
        ),
        "capsolver": not_offered(
            "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 SUPPORT_TASK_TYPE",
        ),
        "capmonster": task(
            "ProsopoTask",
            "ProsopoTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/prosopo-task (ProsopoTask), "
                "capmonstercloudclient 4.3.1 ProsopoTaskRequest"
            ),
        ),
    }
    sitekey: str
    pageurl: str

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "Prosopo.sitekey", self.sitekey, _PROSOPO_KEY, "a Prosopo sitekey (an address, 5...)"
        )
        _page_url("Prosopo.pageurl", self.pageurl)

    def classic_params(self) -> Params:
        return {"method": "prosopo", "sitekey": self.sitekey, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        return {"websiteURL": self.pageurl, "websiteKey": self.sitekey}


@dataclasses.dataclass(frozen=True, slots=True)
class FriendlyCaptcha(Captcha):
    """Friendly Captcha: the widget's ``sitekey`` and, where the provider needs it to tell
    v1 from v2 (CapMonster Cloud's ``metadata.apiGetLib``), ``module_script_url``: the
    widget script the page loads (v1 ``friendly-challenge@X.Y.Z/widget.module.min.js``,
    v2 ``@friendlycaptcha/sdk@X.Y.Z/site.min.js``)."""

    type: ClassVar[Literal["friendly_captcha"]] = "friendly_captcha"
    # capmonstercloudclient 4.3.1's getFriendlyTimeouts: first read after 1 s, then every
    # 3 s, given up after 180 s; a proof of work solved in seconds, not by a person. No
    # provider states a solve time: MTCaptcha's and Prosopo's drain ceiling.
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=180.0, drain_ceiling=30.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 friendly_captcha() (method=friendly_captcha: sitekey, "
            "pageurl)",
        ),
        "2captcha-v2": task(
            "FriendlyCaptchaTaskProxyless",
            "FriendlyCaptchaTask",
            source=(
                "2captcha.com/api-docs/friendly-captcha (FriendlyCaptchaTaskProxyless, "
                "FriendlyCaptchaTask; 2captcha/2captcha-javascript)"
            ),
        ),
        "anticaptcha": task(
            "FriendlyCaptchaTaskProxyless",
            "FriendlyCaptchaTask",
            source=(
                "anti-captcha.com/apidoc/task-types/FriendlyCaptchaTaskProxyless and "
                "/FriendlyCaptchaTask (websiteURL, websiteKey), anticaptchaofficial 1.0.72 "
                "friendlycaptchaproxyless / friendlycaptchaproxyon"
            ),
        ),
        "capsolver": task(
            "FriendlyCaptchaTaskProxyless",
            None,
            source=(
                "docs.capsolver.com/guide/captcha/FriendlyCaptcha "
                "(FriendlyCaptchaTaskProxyless only; not yet in capsolver 1.0.7 "
                "SUPPORT_TASK_TYPE)"
            ),
        ),
        "capmonster": task(
            "CustomTask",
            "CustomTask",
            source=(
                "capmonstercloudclient 4.3.1 FriendlyCustomTaskRequest (CustomTask, class "
                "friendly, metadata.apiGetLib: the widget script's URL, required)"
            ),
        ),
    }
    sitekey: str
    pageurl: str
    module_script_url: str | None = None

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "FriendlyCaptcha.sitekey",
            self.sitekey,
            _FRIENDLY_KEY,
            "a Friendly Captcha sitekey (letters and digits)",
        )
        _page_url("FriendlyCaptcha.pageurl", self.pageurl)
        _optional_url("FriendlyCaptcha.module_script_url", self.module_script_url)

    def classic_params(self) -> Params:
        # 2captcha-python's friendly_captcha(): the key and the page; the script URL is
        # CapMonster's.
        return {"method": "friendly_captcha", "sitekey": self.sitekey, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {"websiteURL": self.pageurl, "websiteKey": self.sitekey}
        if provider != "capmonster":
            return task
        # CapMonster Cloud: CustomTask of class ``friendly``, which tells v1 from v2 by the
        # widget script's URL in ``metadata.apiGetLib`` (required: capmonstercloudclient's
        # FriendlyCustomTaskRequest refuses a task without it).
        if self.module_script_url is None:
            raise InvalidTaskInput(
                "provider capmonster: Friendly Captcha needs module_script_url (the widget "
                "script the page loads: widget.module.min.js for v1, site.min.js for v2)"
            )
        task.update({"class": "friendly", "metadata": {"apiGetLib": self.module_script_url}})
        return task


#: Rows and columns of a grid: reCAPTCHA's 3x3 and 4x4 (and the 1x1 of a replaced
#: tile), FunCaptcha's 2x3; no provider states a larger one.
GRID_SIDES: Final = (1, 10)


@dataclasses.dataclass(frozen=True, slots=True)
class Grid(Captcha):
    """An image of a grid of tiles and the instruction saying which to click (reCAPTCHA's
    "Select all images with ..."): one image of the whole grid, ``rows`` by ``cols``.

    ``instruction`` is the text the page shows (``"Select all images with buses"``) or
    reCAPTCHA's object id (``"/m/01bjv"``), which CapSolver's question needs. The image is
    checked as :class:`~.captchas.Image`'s is.
    """

    type: ClassVar[Literal["grid"]] = "grid"
    # Solved by a person at 2Captcha, as its images are (CapSolver answers at createTask):
    # the coordinates' deadline and drain ceiling.
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=90.0, drain_ceiling=10.0)
    offers: ClassVar[Offers] = {
        "captchaai": classic(
            "pypi captchaai v1.0.1 (Grid/BLS in its list of types), "
            "blog.captchaai.com/how-grid-image-captchas-work (tiles numbered from 1); in.php as "
            "2Captcha's",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 grid() (recaptcha=1, recaptcharows, recaptchacols, "
            "textinstructions; answer click:1/4/7)",
        ),
        "2captcha-v2": task(
            "GridTask",
            None,
            source=(
                '2captcha.com/api-docs/grid (GridTask: body, rows, columns, comment; "1 is top '
                'left tile"; its recaptcha-grid page says 0: tiles read as 1-based)'
            ),
        ),
        "anticaptcha": not_offered(
            "not in anti-captcha.com/apidoc/task-types, anticaptchaofficial 1.0.72 nor "
            "python-anticaptcha 2.0.0 tasks (only a legacy get_cells_numbers reader)",
        ),
        "capsolver": task(
            "ReCaptchaV2Classification",
            None,
            source=(
                "docs.capsolver.com/guide/recognition/ReCaptchaClassification "
                "(ReCaptchaV2Classification: image, question as a /m/ id; answered at "
                "createTask; objects from 0), capsolver 1.0.7 check.py"
            ),
        ),
        "capmonster": task(
            "ComplexImageTask",
            None,
            source=(
                "capmonstercloudclient 4.3.1 RecaptchaComplexImageTaskRequest "
                "(ComplexImageTask, class recaptcha, imagesBase64 of one image, metadata Grid "
                "and Task or TaskDefinition); answer as one boolean per tile "
                "(docs.capmonster.cloud recaptcha-click, not re-read here)"
            ),
        ),
    }
    body: bytes = dataclasses.field(repr=False)
    instruction: str
    rows: int = 3
    cols: int = 3

    @classmethod
    def from_base64(
        cls,
        data: str,
        instruction: str,
        *,
        rows: int = 3,
        cols: int = 3,
        max_image_bytes: int = MAX_IMAGE_BYTES_CEILING,
    ) -> Grid:
        """From base64 text (line breaks and a ``data:image/...;base64,`` prefix allowed);
        text of an image over ``max_image_bytes`` is refused before it is decoded."""
        body = decode_base64("Grid.body", data, max_image_bytes)
        return cls(body, instruction, rows, cols)

    @property
    def kind(self) -> tuple[str, str]:
        """``(extension, mime type)`` from the magic bytes."""
        return image_kind("Grid.body", self.body)

    @property
    def tiles(self) -> int:
        """How many tiles the grid has."""
        return self.rows * self.cols

    @property
    def is_object_id(self) -> bool:
        """Whether ``instruction`` is reCAPTCHA's object id (``/m/...``), not its text."""
        return _OBJECT_ID.match(self.instruction) is not None

    def _check(self, max_image_bytes: int) -> None:
        _set(self, "body", check_body("Grid.body", self.body, max_image_bytes))
        # 2Captcha's textinstructions / comment: 140 characters at most.
        _text("Grid.instruction", self.instruction, max_len=140, spaces=True)
        for name in ("rows", "cols"):
            _int(f"Grid.{name}", getattr(self, name), *GRID_SIDES)

    def __repr__(self) -> str:
        shape = f"{self.rows}x{self.cols}"
        return f"Grid(<{len(self.body)} bytes>, {self.instruction!r}, {shape})"

    def classic_params(self) -> Params:
        # 2Captcha's grid method (2captcha-python 2.1.2 grid(): recaptcha=1, rows and cols
        # as recaptcharows / recaptchacols, the text as textinstructions).
        return {
            **_upload(self.body, False),
            "recaptcha": "1",
            "recaptcharows": str(self.rows),
            "recaptchacols": str(self.cols),
            "textinstructions": self.instruction,
        }

    def json_fields(self, provider: Provider) -> Task:
        body = base64.b64encode(self.body).decode("ascii")
        if provider == "capsolver":
            # ReCaptchaV2Classification: the image and reCAPTCHA's object id as ``question``
            # (its list of /m/ ids); the grid it reads from the image.
            return {"image": body, "question": self.instruction}
        if provider == "capmonster":
            # ComplexImageTask of class recaptcha (capmonstercloudclient's
            # RecaptchaComplexImageTaskRequest): one image, metadata.Grid "3x3" and the
            # instruction as Task (its text) or TaskDefinition (the object id).
            label = "TaskDefinition" if self.is_object_id else "Task"
            metadata = {"Grid": f"{self.rows}x{self.cols}", label: self.instruction}
            return {"class": "recaptcha", "imagesBase64": [body], "metadata": metadata}
        # 2Captcha's GridTask (2captcha.com/api-docs/grid).
        return {"body": body, "rows": self.rows, "columns": self.cols, "comment": self.instruction}


@dataclasses.dataclass(frozen=True, slots=True)
class Altcha(Captcha):
    """An Altcha proof of work for a provider to solve: the page and the ALTCHA v1
    challenge JSON its widget fetched (``{"algorithm", "challenge", "maxnumber", "salt",
    "signature"}``, as text); no provider takes v2's. The worker fetches a
    ``challenge_url`` itself before a provider sees it
    (:mod:`captcha_tasks.worker.altcha_tasks`), so every provider gets the same task."""

    type: ClassVar[Literal["altcha"]] = "altcha"
    # capmonstercloudclient 4.3.1's getAltchaTimeouts: first read after 1 s, then every
    # second, given up after 50 s (its drain ceiling); anticaptchaofficial's
    # altchaProxyless waits up to 300 s: the deadline is the shorter, doubled.
    timing: ClassVar[Timing] = Timing(first_poll=3.0, deadline=100.0, drain_ceiling=50.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 altcha() (method=altcha: pageurl, challenge_url or "
            "challenge_json; the answer is the token)",
        ),
        "2captcha-v2": task(
            "AltchaTaskProxyless",
            "AltchaTask",
            source=(
                "2captcha.com/api-docs/altcha (AltchaTaskProxyless, AltchaTask: websiteURL, "
                "challengeURL or challengeJSON; the page shows no solution example: "
                "solution.token assumed, as at Anti-Captcha)"
            ),
        ),
        "anticaptcha": task(
            "AltchaTaskProxyless",
            "AltchaTask",
            source=(
                "anti-captcha.com/apidoc/task-types/AltchaTaskProxyless and /AltchaTask "
                "(websiteURL, challengeURL or challengeJSON; solution token), "
                "anticaptchaofficial 1.0.72 altchaproxyless / altchaproxyon"
            ),
        ),
        "capsolver": not_offered(
            "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 SUPPORT_TASK_TYPE",
        ),
        "capmonster": task(
            "CustomTask",
            "CustomTask",
            source=(
                "capmonstercloudclient 4.3.1 AltchaCustomTaskRequest (CustomTask, class "
                "altcha, websiteKey may be empty, metadata: challenge, iterations, salt, "
                "signature, all strings; no algorithm field, so SHA-256 only)"
            ),
        ),
    }
    pageurl: str
    challenge_json: str

    def _check(self, max_image_bytes: int) -> None:
        _page_url("Altcha.pageurl", self.pageurl)
        self.challenge()

    def challenge(self) -> AltchaChallenge:
        """``challenge_json`` parsed and checked (whatever its ``maxnumber``: the bound is
        the worker's own, a provider's is its business); a v2 challenge is refused
        (``ALTCHA_V2_NOT_OFFERED``)."""
        from .altcha import parse_challenge  # the proof of work's module: Altcha's alone

        return parse_challenge(self.challenge_json, max_number_bound=sys.maxsize)

    def classic_params(self) -> Params:
        # 2captcha-python's altcha(): the page and the challenge (its JSON, which the
        # worker fetched when it was given the URL).
        return {"method": "altcha", "pageurl": self.pageurl, "challenge_json": self.challenge_json}

    def json_fields(self, provider: Provider) -> Task:
        if provider != "capmonster":
            # 2Captcha's and Anti-Captcha's AltchaTask: the challenge JSON as a string.
            return {"websiteURL": self.pageurl, "challengeJSON": self.challenge_json}
        # CapMonster Cloud: CustomTask of class ``altcha`` with the challenge's fields, all
        # strings (capmonstercloudclient's AltchaCustomTaskRequest); ``iterations`` is the
        # search bound, the challenge's ``maxnumber``. Its site key may be empty.
        challenge = self.challenge()
        return {
            "websiteURL": self.pageurl,
            "websiteKey": "",
            "class": "altcha",
            "metadata": {
                "challenge": challenge.challenge,
                "iterations": str(challenge.max_number),
                "salt": challenge.salt,
                "signature": challenge.signature,
            },
        }


#: DataDome's captcha host: ``geo.captcha-delivery.com`` and its sister hosts.
_DATADOME_HOST = "captcha-delivery.com"
#: ``t=`` of a captcha URL: ``fe`` a captcha to solve, ``bv`` a banned IP (CapSolver's
#: DataDome page: "If t=bv means that your ip is directly banned").
DATADOME_SOLVABLE = "fe"
DATADOME_BANNED = "bv"


def _datadome_url(where: str, value: object) -> None:
    url = _page_url(where, value)
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if (
        parts.scheme.lower() != "https"
        or not (host == _DATADOME_HOST or host.endswith("." + _DATADOME_HOST))
        or not parts.path.startswith("/captcha")
    ):
        _fail(
            where,
            "must be DataDome's captcha URL (https://geo.captcha-delivery.com/captcha/?...), "
            f"got {_shown(url)}",
        )
    kind = parse_qs(parts.query).get("t", [""])[-1]
    if kind == DATADOME_BANNED:
        raise InvalidTaskInput(
            f"{where}: t=bv: DataDome banned this IP (no captcha to solve); change the "
            "proxy and load the page again. Nothing was sent",
            "DATADOME_IP_BANNED",
        )
    if kind != DATADOME_SOLVABLE:
        _fail(where, f"t must be fe (a captcha to solve), got t={kind or '(none)'}")


@dataclasses.dataclass(frozen=True, slots=True)
class DataDome(Captcha):
    """DataDome's slider captcha: ``captcha_url`` (the captcha iframe's address,
    ``https://geo.captcha-delivery.com/captcha/?...&t=fe...``), the ``pageurl`` that
    answered with it, the browser's ``user_agent`` and, where the provider needs it
    (CapMonster Cloud's ``metadata.datadomeCookie``), ``datadome_cookie``: the
    ``datadome`` cookie the challenge set. Its cookie is bound to the user agent and the
    IP (the proxy) that solved it, so a proxy is required wherever it is offered."""

    type: ClassVar[Literal["datadome"]] = "datadome"
    # capmonstercloudclient 4.3.1's getDatadomeTimeouts: first read after 1 s, then every
    # 3 s, given up after 180 s; CapSolver's DataDome page: "within 1s to 20s" (the upper
    # end: its drain ceiling).
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=180.0, drain_ceiling=20.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 datadome() (method=datadome: captcha_url, pageurl, "
            "userAgent, proxy: all required), 2captcha/2captcha-php examples/datadome.php",
        ),
        "2captcha-v2": task(
            None,
            "DataDomeSliderTask",
            source=(
                "2captcha.com/api-docs/datadome-slider-captcha (DataDomeSliderTask: "
                "websiteURL, captchaUrl, userAgent, proxy fields; no proxyless variant), "
                "2captcha/2captcha-javascript"
            ),
        ),
        "anticaptcha": not_offered(
            "not in anticaptchaofficial 1.0.72 nor python-anticaptcha 2.0.0 (no DataDome task in "
            "either official SDK)",
        ),
        # capsolver 1.0.7's SUPPORT_TASK_TYPE spells it DataDomeSliderTask (its docs'
        # examples DatadomeSliderTask).
        "capsolver": task(
            None,
            "DataDomeSliderTask",
            source=(
                "docs.capsolver.com/guide/captcha/datadome (DatadomeSliderTask: captchaUrl "
                "with t=fe, userAgent, proxy: all required; t=bv: the IP is banned), capsolver "
                "1.0.7 SUPPORT_TASK_TYPE DataDomeSliderTask"
            ),
        ),
        "capmonster": task(
            None,
            "CustomTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/datadome (CustomTask, class DataDome, "
                "metadata.captchaUrl, metadata.datadomeCookie), capmonstercloudclient 4.3.1 "
                "DataDomeCustomTaskRequest (own proxy and datadomeCookie required)"
            ),
        ),
    }
    captcha_url: str
    pageurl: str
    user_agent: str
    datadome_cookie: str | None = dataclasses.field(default=None, repr=False)

    def _check(self, max_image_bytes: int) -> None:
        _datadome_url("DataDome.captcha_url", self.captcha_url)
        _page_url("DataDome.pageurl", self.pageurl)
        _text("DataDome.user_agent", self.user_agent, max_len=512, spaces=True)
        if self.datadome_cookie is not None:
            cookie = _text("DataDome.datadome_cookie", self.datadome_cookie, max_len=4096)
            if not cookie.startswith("datadome="):
                _set(self, "datadome_cookie", f"datadome={cookie}")

    def classic_params(self) -> Params:
        # 2captcha-python's datadome(): captcha_url, pageurl, userAgent and the proxy
        # (proxy_params, which the client adds).
        return {
            "method": "datadome",
            "captcha_url": self.captcha_url,
            "pageurl": self.pageurl,
            "userAgent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        if provider != "capmonster":
            # 2Captcha's DataDomeSliderTask and CapSolver's: the page, the captcha's URL and
            # the user agent the cookie will be used with (all required, with the proxy).
            return {
                "websiteURL": self.pageurl,
                "captchaUrl": self.captcha_url,
                "userAgent": self.user_agent,
            }
        # CapMonster Cloud: CustomTask of class DataDome, the captcha's URL and the cookie
        # the challenge set in ``metadata`` (capmonstercloudclient's
        # DataDomeCustomTaskRequest refuses a task without either).
        if self.datadome_cookie is None:
            raise InvalidTaskInput(
                "provider capmonster: DataDome needs datadome_cookie (the datadome cookie the "
                "challenged page set)"
            )
        return {
            "class": "DataDome",
            "websiteURL": self.pageurl,
            "userAgent": self.user_agent,
            "metadata": {
                "captchaUrl": self.captcha_url,
                "datadomeCookie": self.datadome_cookie,
            },
        }


#: Every captcha class by its ``type`` (stored jobs name their type by it).
CAPTCHA_CLASSES: Final[Mapping[CaptchaType, type[Captcha]]] = {
    cls.type: cls
    for cls in (
        RecaptchaV2,
        RecaptchaV3,
        Turnstile,
        Image,
        GeeTest,
        HCaptcha,
        FunCaptcha,
        GeeTestV4,
        AwsWaf,
        Coordinates,
        MtCaptcha,
        Prosopo,
        FriendlyCaptcha,
        Grid,
        Altcha,
        DataDome,
    )
}
