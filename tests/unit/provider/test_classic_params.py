"""in.php's encoding of the captcha types and proxies: exactly what a submit sends."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import ClassVar, Literal

import pytest

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider import (
    Captcha,
    GeeTest,
    HCaptcha,
    Image,
    Proxy,
    RecaptchaV2,
    RecaptchaV3,
    Turnstile,
)
from captcha_tasks.provider.classic_params import proxy_params, submit_files, submit_params

SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"  # Google's public test key
PAGE = "https://example.com/login?next=/"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
HCAPTCHA_KEY = "10000000-ffff-ffff-ffff-000000000001"
GT = "022397c99c9f646f6477822485f30404"
CHALLENGE = "a66f31a53a1a39f8ff1b3b7d3ab82d09"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 200
GIF = b"GIF89a" + b"\x01" * 200


def test_recaptcha_v2() -> None:
    captcha = RecaptchaV2(SITEKEY, PAGE)
    assert submit_params(captcha) == {
        "method": "userrecaptcha",
        "googlekey": SITEKEY,
        "pageurl": PAGE,
    }
    full = RecaptchaV2(
        SITEKEY,
        PAGE,
        invisible=True,
        enterprise=True,
        data_s="abc-DEF_123",
        cookies="SID:abc; HSID:def",
        user_agent="Mozilla/5.0 (X11; Linux x86_64)",
    )
    assert submit_params(full) == {
        "method": "userrecaptcha",
        "googlekey": SITEKEY,
        "pageurl": PAGE,
        "invisible": "1",
        "enterprise": "1",
        "data-s": "abc-DEF_123",
        "cookies": "SID:abc; HSID:def",
        "userAgent": "Mozilla/5.0 (X11; Linux x86_64)",
    }
    assert submit_files(full) is None


def test_recaptcha_v3() -> None:
    assert submit_params(RecaptchaV3(SITEKEY, PAGE)) == {
        "method": "userrecaptcha",
        "version": "v3",
        "googlekey": SITEKEY,
        "pageurl": PAGE,
        "action": "verify",
        "min_score": "0.3",
    }
    custom = submit_params(
        RecaptchaV3(SITEKEY, PAGE, action="login/submit", min_score=0.9, enterprise=True)
    )
    assert custom["action"] == "login/submit"
    assert custom["min_score"] == "0.9"
    assert custom["enterprise"] == "1"
    assert submit_params(RecaptchaV3(SITEKEY, PAGE, min_score=1))["min_score"] == "1"


def test_turnstile() -> None:
    assert submit_params(Turnstile(TURNSTILE_KEY, PAGE)) == {
        "method": "turnstile",
        "sitekey": TURNSTILE_KEY,
        "pageurl": PAGE,
    }
    full = submit_params(Turnstile(TURNSTILE_KEY, PAGE, action="login", cdata="session-42"))
    assert full["action"] == "login"
    assert full["data"] == "session-42"


def test_geetest() -> None:
    assert submit_params(GeeTest(GT, CHALLENGE, PAGE, api_server="api-na.geetest.com")) == {
        "method": "geetest",
        "gt": GT,
        "challenge": CHALLENGE,
        "pageurl": PAGE,
        "api_server": "api-na.geetest.com",
    }
    assert "api_server" not in submit_params(GeeTest(GT, CHALLENGE + "ab", PAGE))


def test_hcaptcha() -> None:
    assert submit_params(HCaptcha(HCAPTCHA_KEY, PAGE)) == {
        "method": "hcaptcha",
        "sitekey": HCAPTCHA_KEY,
        "pageurl": PAGE,
    }


@pytest.mark.parametrize("body", [PNG, JPEG, GIF])
def test_image_inline_as_base64(body: bytes) -> None:
    image = Image(body)
    assert submit_params(image) == {"method": "base64", "body": base64.b64encode(body).decode()}
    assert submit_files(image) is None


def test_image_hints() -> None:
    image = Image.from_base64(
        base64.b64encode(PNG).decode(),
        numeric=1,
        min_len=4,
        max_len=6,
        phrase=False,
        regsense=True,
        calc=0,
        lang="EN",
        textinstructions="type the red letters",
    )
    params = submit_params(image)
    assert params.pop("body") == base64.b64encode(PNG).decode()
    assert params == {
        "method": "base64",
        "numeric": "1",
        "min_len": "4",
        "max_len": "6",
        "phrase": "0",
        "regsense": "1",
        "calc": "0",
        "lang": "en",
        "textinstructions": "type the red letters",
    }


def test_image_from_file_is_a_multipart_upload(tmp_path: Path) -> None:
    path = tmp_path / "secret-name.bin"
    path.write_bytes(JPEG)
    image = Image.from_file(path, numeric=2)
    assert submit_params(image) == {"method": "post", "numeric": "2"}
    # The provider checks the extension; the local file name stays local.
    assert submit_files(image) == {"file": ("captcha.jpg", JPEG, "image/jpeg")}


def test_min_and_max_len_zero_are_sent_as_zero() -> None:
    assert submit_params(Image(PNG, min_len=5, max_len=0))["max_len"] == "0"


def test_a_captcha_type_without_an_encoding_is_refused() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Audio(Captcha):
        type: ClassVar[Literal["image"]] = "image"

        def _check(self, max_image_bytes: int) -> None:
            pass

    with pytest.raises(InvalidTaskInput, match="Audio"):
        submit_params(Audio())
    assert submit_files(Audio()) is None


def test_proxy() -> None:
    assert proxy_params(Proxy.parse("alice:s3cret@1.2.3.4:8080")) == {
        "proxy": "alice:s3cret@1.2.3.4:8080",
        "proxytype": "HTTP",
    }
    assert proxy_params(Proxy.parse("proxy.example.net:3128")) == {
        "proxy": "proxy.example.net:3128",
        "proxytype": "HTTP",
    }
    assert proxy_params(Proxy.parse("1.2.3.4:8080:bob:pw"))["proxy"] == "bob:pw@1.2.3.4:8080"
    assert proxy_params(Proxy.parse("[2001:db8::1]:8080"))["proxy"] == "[2001:db8::1]:8080"
    assert proxy_params(Proxy.parse("socks5h://u:p@h.example:1080")) == {
        "proxy": "u:p@h.example:1080",
        "proxytype": "SOCKS5",
    }
