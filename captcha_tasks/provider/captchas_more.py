"""More captcha types (FunCaptcha, GeeTest v4, AWS WAF, image to coordinates), and the
registry of every type by its ``type`` string.

Same rules as :mod:`.captchas`: plain frozen dataclasses, every field checked when built
and again in :meth:`~.captchas.Captcha.validate`, refusals naming the field.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import ClassVar, Final, Literal

from ._checks import (
    _AWS_CONTEXT,
    _AWS_IV,
    _AWS_KEY,
    _GT,
    _UUID,
    _flag,
    _host_of,
    _hostname,
    _matching,
    _optional_text,
    _optional_url,
    _page_url,
    _set,
)
from ._images import (
    MAX_IMAGE_BYTES_CEILING,
    check_body,
    decode_base64,
    image_kind,
    read_image,
)
from .captchas import (
    Captcha,
    CaptchaType,
    GeeTest,
    HCaptcha,
    Image,
    RecaptchaV2,
    RecaptchaV3,
    Turnstile,
)

__all__ = [
    "CAPTCHA_CLASSES",
    "AwsWaf",
    "Coordinates",
    "FunCaptcha",
    "GeeTestV4",
]


@dataclasses.dataclass(frozen=True, slots=True)
class FunCaptcha(Captcha):
    """Arkose Labs FunCaptcha: the site's ``publickey``; ``surl`` is the Arkose API host
    (``https://host`` or ``host``, kept as given), ``data_blob`` the page's ``data[blob]``."""

    type: ClassVar[Literal["funcaptcha"]] = "funcaptcha"
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


@dataclasses.dataclass(frozen=True, slots=True)
class GeeTestV4(Captcha):
    """GeeTest v4: only the site's ``captcha_id`` (no per-load challenge, unlike v3)."""

    type: ClassVar[Literal["geetest_v4"]] = "geetest_v4"
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


@dataclasses.dataclass(frozen=True, slots=True)
class AwsWaf(Captcha):
    """An AWS WAF CAPTCHA: ``sitekey`` (the page's key), ``iv`` and ``context`` (fresh per
    page load), and the challenge / captcha script URLs where the page has them."""

    type: ClassVar[Literal["aws_waf"]] = "aws_waf"
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


@dataclasses.dataclass(frozen=True, slots=True)
class Coordinates(Captcha):
    """An image whose answer is the points to click (``textinstructions`` says which).

    The image is checked as :class:`~.captchas.Image`'s is; ``multipart`` as there.
    """

    type: ClassVar[Literal["coordinates"]] = "coordinates"
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
    )
}
