"""Captcha and proxy validation: what is accepted and what is refused (what in.php is
sent: test_classic_params)."""

from __future__ import annotations

import base64
import dataclasses
import re
from pathlib import Path

import pytest

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider import (
    GeeTest,
    HCaptcha,
    Image,
    Proxy,
    RecaptchaV2,
    RecaptchaV3,
    Turnstile,
)

SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"  # Google's public test key
PAGE = "https://example.com/login?next=/"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
HCAPTCHA_KEY = "10000000-ffff-ffff-ffff-000000000001"
GT = "022397c99c9f646f6477822485f30404"
CHALLENGE = "a66f31a53a1a39f8ff1b3b7d3ab82d09"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 200
GIF = b"GIF89a" + b"\x01" * 200


def refused(factory: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(InvalidTaskInput) as info:
        factory(*args, **kwargs)  # type: ignore[operator]
    return str(info.value)


# -- reCAPTCHA -----------------------------------------------------------------------


def test_recaptcha_v2_fields() -> None:
    captcha = RecaptchaV2(SITEKEY, PAGE)
    assert captcha.type == "recaptcha_v2"
    assert (captcha.invisible, captcha.enterprise, captcha.data_s) == (False, False, None)
    full = RecaptchaV2(
        SITEKEY,
        PAGE,
        invisible=True,
        enterprise=True,
        data_s="abc-DEF_123",
        cookies="SID:abc; HSID:def",
        user_agent="Mozilla/5.0 (X11; Linux x86_64)",
    )
    assert full.cookies == "SID:abc; HSID:def"
    assert "SID:abc" not in repr(full)  # cookies are session secrets


@pytest.mark.parametrize(
    "sitekey",
    [
        "",
        "   ",
        "short",
        SITEKEY[:20] + " " + SITEKEY[21:],
        SITEKEY + "\x00",
        SITEKEY[:-1] + "é",
        "x" * 101,
        None,
        12345,
        f"{SITEKEY}.extra",
    ],
)
def test_recaptcha_sitekeys_refused(sitekey: object) -> None:
    message = refused(RecaptchaV2, sitekey, PAGE)
    assert "RecaptchaV2.sitekey" in message


@pytest.mark.parametrize(
    "pageurl",
    [
        "",
        "example.com/login",
        "ftp://example.com/",
        "javascript:alert(1)",
        "http://",
        "https://exa mple.com/",
        "https://example.com/\n",
        "https://example.com/\x7f",
        "https://example.com:99999/",
        "http://[::1/",
        "https://example.com/" + "a" * 2048,
        None,
    ],
)
def test_page_urls_refused(pageurl: object) -> None:
    assert "RecaptchaV2.pageurl" in refused(RecaptchaV2, SITEKEY, pageurl)


@pytest.mark.parametrize(
    "pageurl",
    [
        "http://example.com",
        "HTTPS://Example.com:8443/a?b=c#d",
        "http://127.0.0.1:8080/x",
        "https://[::1]/",
    ],
)
def test_page_urls_accepted(pageurl: str) -> None:
    assert RecaptchaV2(SITEKEY, pageurl).pageurl == pageurl


def test_recaptcha_flags() -> None:
    assert RecaptchaV2(SITEKEY, PAGE, invisible=1).invisible is True  # type: ignore[arg-type]
    assert "RecaptchaV2.invisible" in refused(RecaptchaV2, SITEKEY, PAGE, invisible="yes")
    assert "RecaptchaV2.user_agent" in refused(RecaptchaV2, SITEKEY, PAGE, user_agent="a\nb")
    assert "RecaptchaV2.data_s" in refused(RecaptchaV2, SITEKEY, PAGE, data_s="")


def test_recaptcha_v3_defaults() -> None:
    captcha = RecaptchaV3(SITEKEY, PAGE)
    assert captcha.type == "recaptcha_v3"
    assert (captcha.action, captcha.min_score, captcha.enterprise) == ("verify", 0.3, False)
    score = RecaptchaV3(SITEKEY, PAGE, min_score=1).min_score
    assert score == 1.0 and isinstance(score, float)


@pytest.mark.parametrize("score", [0, -0.1, 1.5, float("nan"), float("inf"), True, "0.3", None])
def test_recaptcha_v3_scores_refused(score: object) -> None:
    assert "RecaptchaV3.min_score" in refused(RecaptchaV3, SITEKEY, PAGE, min_score=score)


@pytest.mark.parametrize("action", ["", "two words", "a" * 101, "tab\t", None])
def test_recaptcha_v3_actions_refused(action: object) -> None:
    assert "RecaptchaV3.action" in refused(RecaptchaV3, SITEKEY, PAGE, action=action)


# -- Turnstile, GeeTest, hCaptcha ---------------------------------------------------


def test_turnstile() -> None:
    full = Turnstile(TURNSTILE_KEY, PAGE, action="login", cdata="session-42")
    assert (full.action, full.cdata) == ("login", "session-42")
    assert full.type == "turnstile"
    Turnstile("1x00000000000000000000AA", PAGE)  # Cloudflare's test keys
    for bad in ("", SITEKEY, "0x", "0x4AAA AAAA", "0x" + "A" * 120):
        assert "Turnstile.sitekey" in refused(Turnstile, bad, PAGE)
    assert "Turnstile.cdata" in refused(Turnstile, TURNSTILE_KEY, PAGE, cdata="x" * 256)


def test_geetest() -> None:
    captcha = GeeTest(GT, CHALLENGE, PAGE, api_server="api-na.geetest.com")
    assert captcha.type == "geetest"
    assert GeeTest(GT, CHALLENGE + "ab", PAGE).api_server is None
    assert "GeeTest.gt" in refused(GeeTest, GT[:-1], CHALLENGE, PAGE)
    assert "GeeTest.gt" in refused(GeeTest, "z" * 32, CHALLENGE, PAGE)
    assert "GeeTest.challenge" in refused(GeeTest, GT, "abc", PAGE)
    assert "GeeTest.challenge" in refused(GeeTest, GT, CHALLENGE + "!", PAGE)
    for server in ("https://api.geetest.com", "api geetest.com", "-bad-.com", ""):
        assert "GeeTest.api_server" in refused(GeeTest, GT, CHALLENGE, PAGE, api_server=server)


def test_hcaptcha() -> None:
    assert HCaptcha(HCAPTCHA_KEY, PAGE).type == "hcaptcha"
    HCaptcha(HCAPTCHA_KEY.upper(), PAGE)
    HCaptcha(HCAPTCHA_KEY.replace("-", ""), PAGE)
    for bad in ("", "not-a-uuid", SITEKEY, HCAPTCHA_KEY + "0", TURNSTILE_KEY):
        assert "HCaptcha.sitekey" in refused(HCaptcha, bad, PAGE)


def test_captchas_are_frozen() -> None:
    captcha = RecaptchaV2(SITEKEY, PAGE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        captcha.sitekey = "x"  # type: ignore[misc]
    assert captcha == RecaptchaV2(SITEKEY, PAGE)


# -- images --------------------------------------------------------------------------


@pytest.mark.parametrize("body", [PNG, JPEG, GIF])
def test_image_kinds(body: bytes) -> None:
    image = Image(body)
    assert image.type == "image"
    assert image.multipart is False
    assert image.kind[0] in {"png", "jpg", "gif"} and image.kind[1].startswith("image/")


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
    assert image.body == PNG and image.multipart is False
    hints = (image.numeric, image.min_len, image.max_len, image.phrase, image.regsense, image.calc)
    assert hints == (1, 4, 6, False, True, False)
    assert image.calc is False  # 0 and 1 become booleans
    assert (image.lang, image.textinstructions) == ("en", "type the red letters")
    assert "bytes" in repr(image) and "\\x89PNG" not in repr(image)


def test_image_from_base64_accepts_data_urls_and_line_breaks() -> None:
    text = base64.encodebytes(PNG).decode()  # wrapped at 76 characters
    assert Image.from_base64(text).body == PNG
    assert Image.from_base64("data:image/png;base64," + text).body == PNG


@pytest.mark.parametrize(
    "text", ["", "!!!!", "abc", "QUJD" + "=" * 3, "data:image/png;base64,", 42]
)
def test_image_bad_base64(text: object) -> None:
    assert "Image.body" in refused(Image.from_base64, text)


def test_image_from_file_asks_for_a_multipart_upload(tmp_path: Path) -> None:
    path = tmp_path / "secret-name.bin"
    path.write_bytes(JPEG)
    image = Image.from_file(path, numeric=2)
    assert (image.body, image.multipart, image.numeric) == (JPEG, True, 2)
    assert image.kind == ("jpg", "image/jpeg")
    assert "secret-name" not in repr(image)
    assert "Image.from_file" in refused(Image.from_file, tmp_path / "missing.png")


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"", "empty"),
        (PNG[:99], "under 100 bytes"),
        (b"hello world " * 20, "not a JPEG, PNG or GIF"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'>" + b" " * 100 + b"</svg>", "not a JPEG"),
        ("not bytes", "must be bytes"),
        (PNG + b"\0" * 1_048_576, "over the 1.0 MB limit of any image (1048576 bytes;"),
    ],
)
def test_bad_images(body: object, problem: str) -> None:
    message = refused(Image, body)
    assert "Image.body" in message and problem in message


def test_image_size_limit_is_configurable() -> None:
    big = PNG + b"\0" * 150_000
    image = Image(big)  # fits the 1 MB ceiling of the looser documented limit
    with pytest.raises(
        InvalidTaskInput,
        match=re.escape(
            "(150520 bytes) is over the 100 kB limit (CAPTCHA_TASKS_MAX_IMAGE_BYTES=100000)"
        ),
    ):
        image.validate()
    assert image.validate(max_image_bytes=200_000) is image
    with pytest.raises(InvalidTaskInput, match=re.escape("(CAPTCHA_TASKS_MAX_IMAGE_BYTES=1000)")):
        Image(PNG + b"\0" * 1000).validate(max_image_bytes=1000)


def test_too_large_base64_names_the_limit_and_its_setting_before_decoding() -> None:
    text = base64.b64encode(PNG + b"\0" * 5_242_880).decode()  # 6991200 characters
    with pytest.raises(InvalidTaskInput) as caught:
        Image.from_base64(text, max_image_bytes=100_000)
    assert str(caught.value) == (
        "INVALID_INPUT: Image.body: image of 5.2 MB (5243400 bytes) is over the 100 kB "
        "limit (CAPTCHA_TASKS_MAX_IMAGE_BYTES=100000)"
    )
    # No limit given, or one above the ceiling: the ceiling is the limit, and said so.
    for limit in ({}, {"max_image_bytes": 10_000_000}):
        with pytest.raises(InvalidTaskInput, match=re.escape("over the 1.0 MB limit of any image")):
            Image.from_base64(text, **limit)
    # Within the limit passed: decoded and kept.
    small = base64.b64encode(PNG + b"\0" * 400).decode()
    assert len(Image.from_base64(small, max_image_bytes=1000).body) == len(PNG) + 400


@pytest.mark.parametrize(
    ("hints", "field"),
    [
        ({"numeric": 5}, "Image.numeric"),
        ({"numeric": "1"}, "Image.numeric"),
        ({"min_len": -1}, "Image.min_len"),
        ({"max_len": 21}, "Image.max_len"),
        ({"min_len": 6, "max_len": 4}, "Image.min_len"),
        ({"phrase": 2}, "Image.phrase"),
        ({"regsense": "yes"}, "Image.regsense"),
        ({"lang": "eng"}, "Image.lang"),
        ({"lang": "e1"}, "Image.lang"),
        ({"textinstructions": "x" * 141}, "Image.textinstructions"),
        ({"textinstructions": "line\nbreak"}, "Image.textinstructions"),
        ({"colour": "red"}, "unknown hint"),
        ({"multipart": True}, "unknown hint"),
    ],
)
def test_bad_image_hints(hints: dict[str, object], field: str) -> None:
    assert field in refused(Image.from_base64, base64.b64encode(PNG).decode(), **hints)


def test_min_and_max_len_zero_mean_unspecified() -> None:
    assert Image(PNG, min_len=5, max_len=0).max_len == 0  # not refused as min_len > max_len


# -- proxies -------------------------------------------------------------------------


def test_proxy_parse() -> None:
    proxy = Proxy.parse("alice:s3cret@1.2.3.4:8080")
    assert (proxy.host, proxy.port, proxy.type, proxy.username, proxy.password) == (
        "1.2.3.4",
        8080,
        "HTTP",
        "alice",
        "s3cret",
    )
    assert Proxy.parse("proxy.example.net:3128").address == "proxy.example.net:3128"
    assert Proxy.parse("socks5://u:p@h.example:1080").type == "SOCKS5"
    assert Proxy.parse("socks5://u:p@h.example:1080", type="https").type == "HTTPS"
    seller = Proxy.parse("1.2.3.4:8080:bob:pw")
    assert (seller.address, seller.username, seller.password) == ("1.2.3.4:8080", "bob", "pw")
    assert Proxy.parse("[2001:db8::1]:8080").address == "[2001:db8::1]:8080"
    assert Proxy("h.example", 80, "socks4").type == "SOCKS4"  # type: ignore[arg-type]


def test_proxy_password_never_shows() -> None:
    proxy = Proxy.parse("alice:s3cret@1.2.3.4:8080", type="SOCKS5")
    for text in (repr(proxy), str(proxy), f"{proxy}", f"{proxy!r}", repr([proxy])):
        assert "s3cret" not in text
        assert "***" in text
    assert str(proxy) == "socks5://alice:***@1.2.3.4:8080"
    assert "password=None" in repr(Proxy("h.example", 80))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "alice:s3cret@1.2.3.4",
        "alice:s3cret@1.2.3.4:http",
        "alice:s3cret@1.2.3.4:0",
        "alice:s3cret@1.2.3.4:70000",
        "alices3cret@1.2.3.4:80",
        "alice:s3cret@bad host:80",
        "alice:s3cret@-bad-:80",
        "alice:s3 cret@1.2.3.4:80",
        "1.2.3.4:8080:alice:s3cret:extra",
    ],
)
def test_bad_proxies_never_echo_the_password(text: str) -> None:
    message = refused(Proxy.parse, text)
    assert "Proxy" in message
    assert "s3cret" not in message and "s3 cret" not in message


def test_bad_proxy_fields() -> None:
    assert "Proxy.type" in refused(Proxy, "h.example", 80, "FTP")
    assert "Proxy.port" in refused(Proxy, "h.example", "80")
    assert "Proxy" in refused(Proxy, "h.example", 80, "HTTP", "alice", None)
    assert "Proxy.username" in refused(Proxy, "h.example", 80, "HTTP", "a:b", "pw")
    assert "Proxy.password" in refused(Proxy, "h.example", 80, "HTTP", "alice", "p@ss")


def test_invalid_input_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"RecaptchaV2\.sitekey"):
        RecaptchaV2("", PAGE)


def test_public_surface() -> None:
    import captcha_tasks.provider as solver

    assert sorted(solver.__all__) == sorted(set(solver.__all__))
    for name in solver.__all__:
        assert getattr(solver, name) is not None, name
