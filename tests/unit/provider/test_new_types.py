"""The second wave of captcha types (FunCaptcha, GeeTest v4, AWS WAF, coordinates, Turnstile
challenge mode): their checks, their in.php parameters and JSON task bodies per dialect,
and who offers them (provider/offers.py)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider import (
    AwsWaf,
    Captcha,
    Coordinates,
    FunCaptcha,
    GeeTestV4,
    Image,
    Proxy,
    RecaptchaV2,
    Turnstile,
    check_offered,
    offer_matrix,
    refusal,
)
from captcha_tasks.provider.classic_params import submit_files, submit_params
from captcha_tasks.provider.json_dialects import dialect_for
from captcha_tasks.provider.json_tasks import task_for

PAGE = "https://example.com/login"
PUBKEY = "5F1B8C3A-2D4E-4F60-9A7B-0C1D2E3F4A5B"
CAPTCHA_ID = "e392e1d7fd421dc63325744d5a2b9c73"
AWS_KEY = "AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTp9Ei="
AWS_IV = "CgAHbCe2GgAAAAAj"
AWS_CONTEXT = (
    "9BUgmlm48F92WUoqv97a49ZuEJJ50TCk9MVr3C7WMtQ0X6flVbufM4n8mjFLmbLVAPgaQ1Jydeaja94iAS49ljb+"
)
CHALLENGE_JS = "https://41bcdd4fb3cb.610cd090.us-east-1.token.awswaf.com/41bcdd4fb3cb/0d21de737ccb/cd77baa6c832/challenge.js"
CAPTCHA_JS = "https://41bcdd4fb3cb.610cd090.us-east-1.captcha.awswaf.com/41bcdd4fb3cb/0d21de737ccb/cd77baa6c832/captcha.js"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
PNG_B64 = base64.b64encode(PNG).decode()
UA = "Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0 Safari/537.36"

FUN = FunCaptcha(
    PUBKEY, PAGE, surl="https://client-api.arkoselabs.com", data_blob="abc+/=", user_agent=UA
)
V4 = GeeTestV4(CAPTCHA_ID, PAGE, api_server="gcaptcha4.geetest.com")
AWS = AwsWaf(
    AWS_KEY, AWS_IV, AWS_CONTEXT, PAGE, challenge_script=CHALLENGE_JS, captcha_script=CAPTCHA_JS
)
COORDS = Coordinates.from_base64(PNG_B64, textinstructions="click the cats")
CHALLENGE = Turnstile(
    TURNSTILE_KEY, PAGE, action="managed", cdata="c0ffee", pagedata="3gAFo2...", user_agent=UA
)


def refused(build: Any) -> InvalidTaskInput:
    with pytest.raises(InvalidTaskInput) as info:
        build()
    return info.value


# -- the types' checks -------------------------------------------------------------------


def test_good_values_build_and_validate() -> None:
    for captcha in (FUN, V4, AWS, COORDS, CHALLENGE):
        assert captcha.validate() is captcha
    assert FunCaptcha(PUBKEY.lower(), PAGE, surl="client-api.arkoselabs.com").surl_host == (
        "client-api.arkoselabs.com"
    )
    assert FUN.surl == "https://client-api.arkoselabs.com"  # stored as given
    assert FUN.surl_host == "client-api.arkoselabs.com"
    assert COORDS.body == PNG and COORDS.kind == ("png", "image/png")
    assert CHALLENGE.challenge and not Turnstile(TURNSTILE_KEY, PAGE).challenge


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("FunCaptcha.publickey", lambda: FunCaptcha("not-a-uuid", PAGE)),
        ("FunCaptcha.publickey", lambda: FunCaptcha(PUBKEY + "0", PAGE)),
        ("FunCaptcha.pageurl", lambda: FunCaptcha(PUBKEY, "ftp://example.com/")),
        ("FunCaptcha.surl", lambda: FunCaptcha(PUBKEY, PAGE, surl="https://a b.com")),
        ("FunCaptcha.surl", lambda: FunCaptcha(PUBKEY, PAGE, surl="https://host.com/path")),
        ("FunCaptcha.data_blob", lambda: FunCaptcha(PUBKEY, PAGE, data_blob="a b")),
        ("FunCaptcha.data_blob", lambda: FunCaptcha(PUBKEY, PAGE, data_blob="x" * 16385)),
        ("FunCaptcha.user_agent", lambda: FunCaptcha(PUBKEY, PAGE, user_agent="x\n")),
        ("GeeTestV4.captcha_id", lambda: GeeTestV4("e392e1d7", PAGE)),
        ("GeeTestV4.captcha_id", lambda: GeeTestV4(CAPTCHA_ID[:-1] + "g", PAGE)),
        ("GeeTestV4.pageurl", lambda: GeeTestV4(CAPTCHA_ID, "example.com")),
        ("GeeTestV4.api_server", lambda: GeeTestV4(CAPTCHA_ID, PAGE, api_server="https://x.com")),
        ("AwsWaf.sitekey", lambda: AwsWaf("short", AWS_IV, AWS_CONTEXT, PAGE)),
        ("AwsWaf.sitekey", lambda: AwsWaf("k" * 2049, AWS_IV, AWS_CONTEXT, PAGE)),
        ("AwsWaf.iv", lambda: AwsWaf(AWS_KEY, "iv!iv!iv!", AWS_CONTEXT, PAGE)),
        ("AwsWaf.context", lambda: AwsWaf(AWS_KEY, AWS_IV, "c" * 8193, PAGE)),
        ("AwsWaf.context", lambda: AwsWaf(AWS_KEY, AWS_IV, "short", PAGE)),
        ("AwsWaf.pageurl", lambda: AwsWaf(AWS_KEY, AWS_IV, AWS_CONTEXT, "nope")),
        (
            "AwsWaf.challenge_script",
            lambda: AwsWaf(AWS_KEY, AWS_IV, AWS_CONTEXT, PAGE, challenge_script="javascript:x"),
        ),
        (
            "AwsWaf.captcha_script",
            lambda: AwsWaf(AWS_KEY, AWS_IV, AWS_CONTEXT, PAGE, captcha_script="/captcha.js"),
        ),
        ("Coordinates.body", lambda: Coordinates.from_base64("not base64!")),
        ("Coordinates.body", lambda: Coordinates.from_base64(base64.b64encode(b"GIF89a").decode())),
        ("Coordinates.body", lambda: Coordinates(b"x" * 200)),
        ("Coordinates.body", lambda: Coordinates("text")),  # type: ignore[arg-type]
        (
            "Coordinates.textinstructions",
            lambda: Coordinates.from_base64(PNG_B64, textinstructions="x" * 141),
        ),
        (
            "Turnstile.pagedata",
            lambda: Turnstile(TURNSTILE_KEY, PAGE, action="a", cdata="c", pagedata="p" * 4097),
        ),
        ("Turnstile.action", lambda: Turnstile(TURNSTILE_KEY, PAGE, cdata="c", pagedata="p")),
        ("Turnstile.cdata", lambda: Turnstile(TURNSTILE_KEY, PAGE, action="a", pagedata="p")),
        ("Turnstile.user_agent", lambda: Turnstile(TURNSTILE_KEY, PAGE, user_agent="")),
    ],
)
def test_bad_values_are_refused_by_field(field: str, build: Any) -> None:
    assert refused(build).message.startswith(f"{field}:")


def test_coordinates_share_the_image_checks() -> None:
    big = b"\x89PNG\r\n\x1a\n" + b"\0" * 200_000
    for cls in (Image, Coordinates):
        captcha = cls(big)
        with pytest.raises(
            InvalidTaskInput,
            match=rf"{cls.__name__}.body: .*over the 100 kB limit "
            r"\(CAPTCHA_TASKS_MAX_IMAGE_BYTES=100000\)",
        ):
            captcha.validate()
        assert captcha.validate(max_image_bytes=300_000) is captcha
    assert "image/png" not in repr(COORDS) and "bytes" in repr(COORDS)


# -- in.php ------------------------------------------------------------------------------


def test_in_php_params_of_each_new_kind() -> None:
    assert submit_params(FUN) == {
        "method": "funcaptcha",
        "publickey": PUBKEY,
        "pageurl": PAGE,
        "surl": "https://client-api.arkoselabs.com",
        "data[blob]": "abc+/=",
        "userAgent": UA,
    }
    assert submit_params(FunCaptcha(PUBKEY, PAGE, surl="api.example.com")) == {
        "method": "funcaptcha",
        "publickey": PUBKEY,
        "pageurl": PAGE,
        "surl": "https://api.example.com",
    }
    assert submit_params(V4) == {
        "method": "geetest_v4",
        "captcha_id": CAPTCHA_ID,
        "pageurl": PAGE,
        "api_server": "gcaptcha4.geetest.com",
    }
    assert submit_params(AWS) == {
        "method": "amazon_waf",
        "sitekey": AWS_KEY,
        "iv": AWS_IV,
        "context": AWS_CONTEXT,
        "pageurl": PAGE,
        "challenge_script": CHALLENGE_JS,
        "captcha_script": CAPTCHA_JS,
    }
    assert submit_params(COORDS) == {
        "method": "base64",
        "body": PNG_B64,
        "coordinatescaptcha": "1",
        "textinstructions": "click the cats",
    }
    assert submit_files(COORDS) is None
    assert submit_params(CHALLENGE) == {
        "method": "turnstile",
        "sitekey": TURNSTILE_KEY,
        "pageurl": PAGE,
        "action": "managed",
        "data": "c0ffee",
        "pagedata": "3gAFo2...",
        "userAgent": UA,
    }


def test_coordinates_from_a_file_upload_as_multipart(tmp_path: Any) -> None:
    path = tmp_path / "points.png"
    path.write_bytes(PNG)
    captcha = Coordinates.from_file(path)
    assert submit_params(captcha) == {"method": "post", "coordinatescaptcha": "1"}
    assert submit_files(captcha) == {"file": ("captcha.png", PNG, "image/png")}


# -- JSON task bodies ----------------------------------------------------------------------

BLOB = json.dumps({"blob": "abc+/="}, separators=(",", ":"))
AWS_COMMON = {
    "websiteURL": PAGE,
    "websiteKey": AWS_KEY,
    "iv": AWS_IV,
    "context": AWS_CONTEXT,
    "challengeScript": CHALLENGE_JS,
    "captchaScript": CAPTCHA_JS,
}
COORDS_BODY = {"body": PNG_B64, "comment": "click the cats"}

TASKS: list[tuple[str, Captcha, dict[str, Any]]] = [
    (
        "2captcha-v2",
        FUN,
        {
            "type": "FunCaptchaTaskProxyless",
            "websiteURL": PAGE,
            "websitePublicKey": PUBKEY,
            "funcaptchaApiJSSubdomain": "client-api.arkoselabs.com",
            "data": BLOB,
        },
    ),
    (
        "anticaptcha",
        FUN,
        {
            "type": "FunCaptchaTaskProxyless",
            "websiteURL": PAGE,
            "websitePublicKey": PUBKEY,
            "funcaptchaApiJSSubdomain": "client-api.arkoselabs.com",
            "data": BLOB,
        },
    ),
    (
        "capmonster",
        FUN,
        {
            "type": "FunCaptchaTask",
            "websiteURL": PAGE,
            "websitePublicKey": PUBKEY,
            "funcaptchaApiJSSubdomain": "client-api.arkoselabs.com",
            "data": BLOB,
            "userAgent": UA,
        },
    ),
    (
        "2captcha-v2",
        V4,
        {
            "type": "GeeTestTaskProxyless",
            "websiteURL": PAGE,
            "gt": CAPTCHA_ID,
            "version": 4,
            "initParameters": {"captcha_id": CAPTCHA_ID},
            "geetestApiServerSubdomain": "gcaptcha4.geetest.com",
        },
    ),
    (
        "anticaptcha",
        V4,
        {
            "type": "GeeTestTaskProxyless",
            "websiteURL": PAGE,
            "gt": CAPTCHA_ID,
            "version": 4,
            "geetestApiServerSubdomain": "gcaptcha4.geetest.com",
        },
    ),
    (
        "capmonster",
        V4,
        {
            "type": "GeeTestTask",
            "websiteURL": PAGE,
            "gt": CAPTCHA_ID,
            "version": 4,
            "geetestApiServerSubdomain": "gcaptcha4.geetest.com",
        },
    ),
    (
        "capsolver",
        V4,
        {
            "type": "GeeTestTaskProxyLess",
            "websiteURL": PAGE,
            "captchaId": CAPTCHA_ID,
            "geetestApiServerSubdomain": "gcaptcha4.geetest.com",
        },
    ),
    ("2captcha-v2", AWS, {"type": "AmazonTaskProxyless", **AWS_COMMON}),
    ("anticaptcha", AWS, {"type": "AmazonTaskProxyless", **AWS_COMMON}),
    ("capmonster", AWS, {"type": "AmazonTask", **AWS_COMMON, "cookieSolution": True}),
    (
        "capsolver",
        AWS,
        {
            "type": "AntiAwsWafTaskProxyLess",
            "websiteURL": PAGE,
            "awsKey": AWS_KEY,
            "awsIv": AWS_IV,
            "awsContext": AWS_CONTEXT,
            "awsChallengeJS": CHALLENGE_JS,
            "awsApiJs": CAPTCHA_JS,
        },
    ),
    ("2captcha-v2", COORDS, {"type": "CoordinatesTask", **COORDS_BODY}),
    ("anticaptcha", COORDS, {"type": "ImageToCoordinatesTask", **COORDS_BODY, "mode": "points"}),
    (
        "2captcha-v2",
        CHALLENGE,
        {
            "type": "TurnstileTaskProxyless",
            "websiteURL": PAGE,
            "websiteKey": TURNSTILE_KEY,
            "action": "managed",
            "data": "c0ffee",
            "pagedata": "3gAFo2...",
            "userAgent": UA,
        },
    ),
    (
        "anticaptcha",
        CHALLENGE,
        {
            "type": "TurnstileTaskProxyless",
            "websiteURL": PAGE,
            "websiteKey": TURNSTILE_KEY,
            "action": "managed",
            "cData": "c0ffee",
            "chlPageData": "3gAFo2...",
        },
    ),
    (
        "capmonster",
        CHALLENGE,
        {
            "type": "TurnstileTask",
            "websiteURL": PAGE,
            "websiteKey": TURNSTILE_KEY,
            "cloudflareTaskType": "token",
            "pageAction": "managed",
            "data": "c0ffee",
            "pageData": "3gAFo2...",
            "userAgent": UA,
        },
    ),
]


@pytest.mark.parametrize(("dialect", "captcha", "task"), TASKS)
def test_json_task_of_each_new_kind_per_dialect(
    dialect: str, captcha: Captcha, task: dict[str, Any]
) -> None:
    assert task_for(dialect_for(dialect), captcha) == task  # type: ignore[arg-type]


def test_proxied_variants_take_the_proxy_names_and_fields() -> None:
    proxy = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")
    fields = {
        "proxyType": "http",
        "proxyAddress": "10.1.2.3",
        "proxyPort": 8080,
        "proxyLogin": "user",
        "proxyPassword": "secret",
    }
    assert task_for(dialect_for("2captcha-v2"), FUN, proxy)["type"] == "FunCaptchaTask"
    assert task_for(dialect_for("anticaptcha"), AWS, proxy) == {
        "type": "AmazonTask",
        **AWS_COMMON,
        **fields,
    }
    capsolver = task_for(dialect_for("capsolver"), AWS, proxy)
    assert capsolver["type"] == "AntiAwsWafTask"
    assert capsolver["proxy"] == "http:10.1.2.3:8080:user:secret"
    # Coordinates are read from the bytes: the proxy is dropped, not refused.
    assert task_for(dialect_for("2captcha-v2"), COORDS, proxy) == {
        "type": "CoordinatesTask",
        **COORDS_BODY,
    }
    with pytest.raises(InvalidTaskInput, match=r"capsolver.*GeeTestV4.*through a proxy") as info:
        task_for(dialect_for("capsolver"), V4, proxy)
    assert info.value.code == "TYPE_NOT_OFFERED"


def test_a_plain_turnstile_user_agent_goes_only_where_documented() -> None:
    plain = Turnstile(TURNSTILE_KEY, PAGE, user_agent=UA)
    assert task_for(dialect_for("2captcha-v2"), plain)["userAgent"] == UA
    assert "userAgent" not in task_for(dialect_for("anticaptcha"), plain)
    assert "userAgent" not in task_for(dialect_for("capsolver"), plain)
    assert "cloudflareTaskType" not in task_for(dialect_for("capmonster"), plain)


# -- who offers what -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "captcha", "name"),
    [
        ("capsolver", FUN, "FunCaptcha"),
        ("capsolver", COORDS, "Coordinates"),
        ("capsolver", CHALLENGE, "Turnstile captchas in challenge mode"),
        ("capmonster", COORDS, "Coordinates"),
        ("captchaai", FUN, "FunCaptcha"),
        ("captchaai", V4, "GeeTestV4"),
        ("captchaai", AWS, "AwsWaf"),
        ("captchaai", COORDS, "Coordinates"),
        ("captchaai", CHALLENGE, "Turnstile captchas in challenge mode"),
    ],
)
def test_unoffered_kinds_are_refused_naming_provider_and_type(
    provider: Any, captcha: Captcha, name: str
) -> None:
    with pytest.raises(InvalidTaskInput) as info:
        check_offered(provider, captcha)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert re.search(f"provider {provider} (does not solve|withdrew) ", str(info.value))
    assert name in str(info.value) and "nothing was sent" in str(info.value)


def test_offered_kinds_pass() -> None:
    for captcha in (FUN, V4, AWS, COORDS, CHALLENGE):
        assert refusal("2captcha", captcha) is None
        assert refusal("2captcha-v2", captcha) is None
        assert refusal("anticaptcha", captcha) is None
    for captcha in (FUN, V4, AWS, CHALLENGE):
        assert refusal("capmonster", captcha) is None
    assert refusal("capsolver", V4) is None and refusal("capsolver", AWS) is None
    # Plain Turnstile stays offered at CapSolver and CaptchaAI; challenge mode does not.
    plain = Turnstile(TURNSTILE_KEY, PAGE, action="a", cdata="c")
    assert refusal("capsolver", plain) is None and refusal("captchaai", plain) is None
    assert refusal("capsolver", V4, proxied=True) is not None
    enterprise = RecaptchaV2("6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", PAGE, enterprise=True)
    assert refusal("capsolver", enterprise, proxied=True) is None


def test_the_matrix_is_derived_from_the_dialects() -> None:
    matrix = offer_matrix()
    assert matrix["capsolver"]["funcaptcha"] == "not offered"
    assert matrix["capsolver"]["turnstile_challenge"] == "not offered"
    assert matrix["capmonster"]["coordinates"] == "not offered"
    assert matrix["2captcha-v2"]["coordinates"] == "CoordinatesTask / -"
    assert matrix["anticaptcha"]["aws_waf"] == "AmazonTaskProxyless / AmazonTask"
    assert [k for k, v in matrix["2captcha"].items() if v != "offered"] == [
        "hcaptcha",
        "cloudflare_challenge",
    ]
    assert [k for k, v in matrix["captchaai"].items() if v == "offered"] == [
        "recaptcha_v2",
        "recaptcha_v3",
        "turnstile",
        "image",
        "geetest",
        "hcaptcha",
        "grid",
    ]


def test_reports_cover_the_new_kinds_where_documented() -> None:
    for kind in ("funcaptcha", "geetest_v4", "aws_waf", "coordinates"):
        assert dialect_for("2captcha-v2").report_incorrect[kind] == "reportIncorrect"  # type: ignore[index]
        assert dialect_for("2captcha-v2").report_correct[kind] == "reportCorrect"  # type: ignore[index]
        assert kind not in dialect_for("anticaptcha").report_incorrect
        assert kind not in dialect_for("capmonster").report_incorrect
    assert dialect_for("capsolver").report_incorrect["aws_waf"] == "feedbackTask"
    assert "funcaptcha" not in dialect_for("capsolver").report_incorrect
