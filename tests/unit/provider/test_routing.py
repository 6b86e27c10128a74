"""A captcha's route: the configured order, filtered by _TYPES and by what each protocol
solves (through a proxy or not), a pinned provider or excluded ones; refusals name why."""

from __future__ import annotations

import pytest

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider import HCaptcha, Image, RecaptchaV2, Turnstile
from captcha_tasks.provider.routing import route
from captcha_tasks.settings.providers import ProviderConfig

PAGE = "https://example.com/login"
RECAPTCHA = RecaptchaV2("6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI", PAGE)
TURNSTILE = Turnstile("0x4AAAAAAABkMYinukE8nzY", PAGE)
CHALLENGE = Turnstile("0x4AAAAAAABkMYinukE8nzY", PAGE, pagedata="p", action="a", cdata="c")
HCAPTCHA = HCaptcha("a5f74b19-9e45-40e0-b45d-47ff91b7a6c2", PAGE)
IMAGE = Image(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))


def config(name: str, protocol: str, *types: str) -> ProviderConfig:
    return ProviderConfig(name, protocol, "https://x.example", "k" * 32, types=types)  # type: ignore[arg-type]


MAIN = config("main", "captchaai")
BACKUP = config("backup", "capsolver")
IMAGES = config("images", "2captcha", "image")
CLUSTER = [MAIN, BACKUP, IMAGES]
TWO = config("two", "2captcha")


def test_the_route_keeps_the_configured_order_of_those_that_take_the_captcha() -> None:
    assert route(CLUSTER, RECAPTCHA) == ["main", "backup"]  # images: only image captchas
    assert route(CLUSTER, IMAGE) == ["main", "backup", "images"]
    assert route([IMAGES, BACKUP, MAIN], IMAGE) == ["images", "backup", "main"]
    assert route(CLUSTER, HCAPTCHA) == ["main"]  # capsolver solves no hCaptcha
    # Turnstile's challenge mode: neither captchaai nor capsolver; 2captcha-v2 does.
    assert route([*CLUSTER, config("v2", "2captcha-v2")], CHALLENGE) == ["v2"]


def test_a_proxied_captcha_goes_only_where_the_protocol_takes_it_through_a_proxy() -> None:
    assert route(CLUSTER, TURNSTILE) == ["main", "backup"]
    assert route(CLUSTER, TURNSTILE, proxied=True) == ["main"]


def test_a_task_may_pin_one_provider_or_exclude_some() -> None:
    assert route(CLUSTER, IMAGE, provider="backup") == ["backup"]
    assert route(CLUSTER, IMAGE, exclude={"main"}) == ["backup", "images"]
    assert route(CLUSTER, IMAGE, exclude=["main", "backup"]) == ["images"]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"provider": "spare"}, "no provider named spare is configured"),
        ({"exclude": {"main", "nope"}}, "no provider named nope"),
    ],
)
def test_an_unknown_pinned_or_excluded_name_is_invalid_input(
    kwargs: dict[str, object], fragment: str
) -> None:
    with pytest.raises(InvalidTaskInput) as info:
        route(CLUSTER, IMAGE, **kwargs)  # type: ignore[arg-type]
    assert info.value.code == "UNKNOWN_PROVIDER"
    assert fragment in str(info.value) and "main, backup, images" in str(info.value)


def test_no_provider_left_is_type_not_offered_naming_each_and_why() -> None:
    with pytest.raises(InvalidTaskInput) as info:
        route(CLUSTER, CHALLENGE)
    message = str(info.value)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert "no configured provider takes Turnstile captchas" in message
    assert "main (captchaai): provider captchaai does not solve Turnstile" in message
    assert "backup (capsolver): provider capsolver does not solve" in message
    assert "images (2captcha): turnstile is not in CAPTCHA_TASKS_IMAGES_TYPES (image)" in message
    assert "nothing was sent" in message
    with pytest.raises(InvalidTaskInput, match="main \\(captchaai\\): excluded by the task"):
        route(CLUSTER, HCAPTCHA, exclude={"main"})


def test_one_candidate_refused_by_its_protocol_reads_as_check_offered_plus_who_offers_it() -> None:
    from captcha_tasks.provider.offers import check_offered

    with pytest.raises(InvalidTaskInput) as before:
        check_offered("capsolver", CHALLENGE)
    reason = str(before.value).removesuffix("; nothing was sent")
    for configs, pinned, who in (
        ([BACKUP], None, "no configured provider offers it (offered by: 2captcha, "),
        ([*CLUSTER, TWO], "backup", "offered by configured provider two"),
    ):
        with pytest.raises(InvalidTaskInput) as info:
            route(configs, CHALLENGE, provider=pinned)
        assert str(info.value).startswith(f"{reason}; {who}")
        assert str(info.value).endswith("; nothing was sent")
        assert "still" not in str(info.value)  # nobody withdrew it: never offered there
        assert info.value.code == before.value.code == "TYPE_NOT_OFFERED"
    with pytest.raises(InvalidTaskInput, match="images \\(2captcha\\): hcaptcha is not in"):
        route([IMAGES], HCAPTCHA)


def test_the_route_skips_a_provider_that_withdrew_the_type_and_says_who_offers_it() -> None:
    anti = config("anti", "anticaptcha")
    assert route([anti, MAIN], HCAPTCHA) == ["main"]
    with pytest.raises(InvalidTaskInput) as info:
        route([anti, BACKUP], HCAPTCHA)
    message = str(info.value)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert "anti (anticaptcha): provider anticaptcha withdrew HCaptcha" in message
    assert "anti-captcha/anticaptcha-python#6" in message
    assert "no configured provider offers it (offered by: captchaai)" in message
    with pytest.raises(InvalidTaskInput, match="still offered by configured provider main"):
        route([anti, MAIN], HCAPTCHA, provider="anti")
