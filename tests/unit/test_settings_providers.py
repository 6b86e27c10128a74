"""CAPTCHA_TASKS_PROVIDERS and each named provider's variables:
read exactly, defaults, the single-provider variables untouched when unset, every bad value refused
in one line naming its variable, and no key ever shown."""

from __future__ import annotations

import dataclasses
import decimal
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.provider.captchas import CAPTCHA_CLASSES
from captcha_tasks.provider.offers import NEVER_SOLVED, check_configured
from captcha_tasks.settings import DEFAULT_URLS, Settings
from captcha_tasks.settings.parsing import CAPTCHA_TYPES, PROVIDERS
from captcha_tasks.settings.providers import ProviderConfig, key_variable

D = decimal.Decimal
MAIN_KEY = "M41nKey" + "x" * 25  # 32 letters and digits
BACKUP_KEY = "CAP-" + "ab" * 16
OTHER_KEY = "0th3rKey" + "y" * 24


def two(**extra: str) -> dict[str, str]:
    return {
        "CAPTCHA_TASKS_PROVIDERS": "main,backup",
        "CAPTCHA_TASKS_MAIN_PROTOCOL": "captchaai",
        "CAPTCHA_TASKS_MAIN_API_KEY": MAIN_KEY,
        "CAPTCHA_TASKS_BACKUP_PROTOCOL": "capsolver",
        "CAPTCHA_TASKS_BACKUP_API_KEY": BACKUP_KEY,
        **extra,
    }


def test_unset_means_one_provider_named_default_from_todays_variables() -> None:
    s = Settings.from_env(
        {
            "CAPTCHA_TASKS_API_KEY": MAIN_KEY,
            "CAPTCHA_TASKS_THREADS": "12",
            "CAPTCHA_TASKS_SOLVER_URL": "http://127.0.0.1:9/",
            "CAPTCHA_TASKS_PRICES": "image=0.7",
            "CAPTCHA_TASKS_BALANCE_FLOOR": "2",
        }
    )
    (only,) = s.providers()
    assert only == ProviderConfig(
        name="default",
        protocol="captchaai",
        url="http://127.0.0.1:9",
        api_key=MAIN_KEY,
        threads=12,
        types=(),
        prices=(("image", D("0.7")),),
        balance_floor=D("2"),
    )
    # The built-in defaults too (a Settings built in code, not from the environment).
    assert Settings().providers()[0].threads == 5
    assert Settings().providers()[0].name == "default"


def test_named_providers_are_read_in_order_with_their_defaults(tmp_path: Path) -> None:
    key_file = tmp_path / "backup.key"
    key_file.write_text(f"\n  {BACKUP_KEY}  \n")
    env = two(
        CAPTCHA_TASKS_BACKUP_API_KEY="",
        CAPTCHA_TASKS_BACKUP_API_KEY_FILE=str(key_file),
        CAPTCHA_TASKS_MAIN_URL="https://proxy.example.com/captchaai/",
        CAPTCHA_TASKS_MAIN_THREADS="15",
        CAPTCHA_TASKS_MAIN_TYPES="recaptcha_v2, turnstile",
        CAPTCHA_TASKS_MAIN_PRICES="recaptcha_v2=2.99",
        CAPTCHA_TASKS_BACKUP_BALANCE_FLOOR="5.10",
        CAPTCHA_TASKS_PROVIDERS=" main , backup ",
    )
    main, backup = Settings.from_env(env).providers()
    assert main == ProviderConfig(
        name="main",
        protocol="captchaai",
        url="https://proxy.example.com/captchaai",
        api_key=MAIN_KEY,
        threads=15,
        types=("recaptcha_v2", "turnstile"),
        prices=(("recaptcha_v2", D("2.99")),),
        balance_floor=None,
    )
    assert backup == ProviderConfig(
        name="backup",
        protocol="capsolver",
        url=DEFAULT_URLS["capsolver"],
        api_key=BACKUP_KEY,
        threads=5,
        balance_floor=D("5.10"),
    )
    assert main.takes_type("turnstile") and not main.takes_type("image")
    assert backup.takes_type("image")


def test_one_list_of_providers_and_no_single_provider_fields() -> None:
    s = Settings.from_env(two(CAPTCHA_TASKS_PROVIDERS="backup,main"))
    assert [p.name for p in s.providers()] == ["backup", "main"]
    assert s.provider_config() is s.providers()[0]  # the preferred one
    assert s.provider_config("main").api_key == MAIN_KEY
    with pytest.raises(KeyError):
        s.provider_config("default")  # named providers only: no default beside them
    fields = {field.name for field in dataclasses.fields(Settings)}
    assert "provider_configs" in fields
    assert not fields & {"api_key", "provider", "solver_url", "threads", "prices"}
    assert not fields & {"balance_floor", "named_providers", "poll_placement"}


#: (the single-provider variable, the named provider's variable it stands for, a value)
SAME_VARIABLES = [
    ("CAPTCHA_TASKS_PROVIDER", "PROTOCOL", "capsolver"),
    ("CAPTCHA_TASKS_SOLVER_URL", "URL", "https://u:p@proxy.example.com/x/"),
    ("CAPTCHA_TASKS_API_KEY", "API_KEY", BACKUP_KEY),
    ("CAPTCHA_TASKS_THREADS", "THREADS", "9"),
    ("CAPTCHA_TASKS_PRICES", "PRICES", "image=0.5,turnstile=1"),
    ("CAPTCHA_TASKS_BALANCE_FLOOR", "BALANCE_FLOOR", "3.5"),
]


def test_the_default_provider_is_read_as_a_named_one_is() -> None:
    single = {variable: value for variable, _, value in SAME_VARIABLES}
    named = {f"CAPTCHA_TASKS_ONLY_{suffix}": value for _, suffix, value in SAME_VARIABLES}
    (default,) = Settings.from_env(single).providers()
    (only,) = Settings.from_env({"CAPTCHA_TASKS_PROVIDERS": "only", **named}).providers()
    assert default.name == "default" and only.name == "only"
    assert default == dataclasses.replace(only, name="default")
    # A bad value is refused alike, naming the variable it was read from.
    for variable, suffix, _ in SAME_VARIABLES:
        bad = "x y" if suffix != "BALANCE_FLOOR" else "-1"
        with pytest.raises(ConfigurationError) as one:
            Settings.from_env({**single, variable: bad})
        with pytest.raises(ConfigurationError) as other:
            Settings.from_env(
                {"CAPTCHA_TASKS_PROVIDERS": "only", **named, f"CAPTCHA_TASKS_ONLY_{suffix}": bad}
            )
        assert str(one.value) == str(other.value).replace(f"CAPTCHA_TASKS_ONLY_{suffix}", variable)


@pytest.mark.parametrize(
    ("single", "suffix"),
    [
        ("CAPTCHA_TASKS_PROVIDER", "PROTOCOL"),
        ("CAPTCHA_TASKS_SOLVER_URL", "URL"),
        ("CAPTCHA_TASKS_API_KEY", "API_KEY"),
        ("CAPTCHAAI_API_KEY", "API_KEY"),
        ("CAPTCHA_TASKS_THREADS", "THREADS"),
    ],
)
def test_a_single_provider_variable_beside_the_providers_list_is_refused(
    single: str, suffix: str
) -> None:
    # Both set is ambiguous (which provider would it configure?): neither wins silently.
    value = {"CAPTCHA_TASKS_SOLVER_URL": "https://h", "CAPTCHA_TASKS_PROVIDER": "2captcha"}.get(
        single, OTHER_KEY if "KEY" in single else "3"
    )
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env(two(**{single: value}))
    assert str(info.value) == "CONFIG: " + (
        f"{single} is not read when CAPTCHA_TASKS_PROVIDERS is set: "
        f"set CAPTCHA_TASKS_<NAME>_{suffix} per provider"
    )


def test_the_key_variable_named_is_the_one_the_key_was_read_from() -> None:
    assert key_variable("default", {"CAPTCHAAI_API_KEY": MAIN_KEY}) == "CAPTCHAAI_API_KEY"
    both = {"CAPTCHAAI_API_KEY": MAIN_KEY, "CAPTCHA_TASKS_API_KEY": MAIN_KEY}
    assert key_variable("default", both) == "CAPTCHA_TASKS_API_KEY"
    assert key_variable("default", {}) == "CAPTCHA_TASKS_API_KEY"
    # A provider the list names "default" is a named one, with a named one's variables.
    listed = {"CAPTCHA_TASKS_PROVIDERS": "default", "CAPTCHAAI_API_KEY": MAIN_KEY}
    assert key_variable("default", listed) == "CAPTCHA_TASKS_DEFAULT_API_KEY"
    assert key_variable("main", two()) == "CAPTCHA_TASKS_MAIN_API_KEY"
    assert key_variable("main", two(CAPTCHA_TASKS_MAIN_API_KEY_FILE="/k")) == (
        "CAPTCHA_TASKS_MAIN_API_KEY_FILE"
    )


#: (variable after CAPTCHA_TASKS_, its value, the variable the error names, what it says)
BAD = [
    ("PROVIDERS", "Main", "PROVIDERS", "'Main' is not a provider name"),
    ("PROVIDERS", "a-b", "PROVIDERS", "not a provider name"),
    ("PROVIDERS", "x" * 33, "PROVIDERS", "1-32 lowercase"),
    ("PROVIDERS", "main,backup,main", "PROVIDERS", "main is named twice"),
    ("PROVIDERS", " , ", "PROVIDERS", "names no provider"),
    ("PROVIDERS", "engine", "ENGINE_THREADS", "is another setting"),
    ("PROVIDERS", "solver", "SOLVER_URL", "is another setting"),
    ("PROVIDERS", "redis", "REDIS_URL", "is another setting"),
    ("MAIN_PROTOCOL", "", "MAIN_PROTOCOL", "must be set for provider main"),
    ("MAIN_PROTOCOL", "deathbycaptcha", "MAIN_PROTOCOL", "must be one of captchaai"),
    ("MAIN_URL", "ftp://x", "MAIN_URL", "must be an http(s) URL"),
    ("MAIN_THREADS", "0", "MAIN_THREADS", "must be a finite number >= 1"),
    ("MAIN_THREADS", "many", "MAIN_THREADS", "must be an integer"),
    ("MAIN_TYPES", "recaptcha", "MAIN_TYPES", "'recaptcha' is not a captcha type"),
    ("MAIN_TYPES", "image,image", "MAIN_TYPES", "image is named twice"),
    ("MAIN_PRICES", "image=cheap", "MAIN_PRICES", "must be a number of USD"),
    ("BACKUP_BALANCE_FLOOR", "-1", "BACKUP_BALANCE_FLOOR", ">= 0"),
    ("MAIN_API_KEY", "", "MAIN_API_KEY_FILE", "must be set for provider main"),
    ("MAIN_API_KEY_FILE", "/k", "MAIN_API_KEY_FILE", "not both"),
    (
        "MAIN_API_KEY",
        MAIN_KEY[:-1],
        "MAIN_API_KEY",
        "digits for provider captchaai (got 31",
    ),
    ("BACKUP_API_KEY", MAIN_KEY, "BACKUP_API_KEY", "CAP- followed by"),
    (
        "MAIN_API_KEY",
        MAIN_KEY[:16] + " " + MAIN_KEY[16:],
        "MAIN_API_KEY",
        "must not contain spaces",
    ),
    ("API_KEY", OTHER_KEY, "API_KEY", "not read when CAPTCHA_TASKS_PROVIDERS is set"),
    ("THREADS", "9", "<NAME>_THREADS", "per provider"),
    ("PROVIDER", "2captcha", "PROVIDER ", "not read when"),
    ("SOLVER_URL", "http://h", "SOLVER_URL", "not read when"),
    ("PRICES", "image=1", "PRICES", "not read when"),
    ("BALANCE_FLOOR", "1", "BALANCE_FLOOR", "not read when"),
]


@pytest.mark.parametrize(("name", "value", "named", "fragment"), BAD)
def test_every_bad_value_is_one_line_naming_its_variable_and_no_key(
    name: str, value: str, named: str, fragment: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env(two(**{f"CAPTCHA_TASKS_{name}": value}))
    variable = f"CAPTCHA_TASKS_{named}"
    message = str(info.value)
    assert variable in message and fragment in message and "\n" not in message, message
    for secret in (MAIN_KEY, BACKUP_KEY, OTHER_KEY, MAIN_KEY[:-1]):
        assert secret not in message + repr(info.value.args)


def test_a_key_file_that_cannot_be_read_or_is_empty_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.key"
    empty.write_text(" \n")
    for path, fragment in ((tmp_path / "missing.key", "No such file"), (empty, "is empty")):
        env = two(CAPTCHA_TASKS_MAIN_API_KEY="", CAPTCHA_TASKS_MAIN_API_KEY_FILE=str(path))
        with pytest.raises(ConfigurationError) as info:
            Settings.from_env(env)
        assert "CAPTCHA_TASKS_MAIN_API_KEY_FILE" in str(info.value)
        assert fragment in str(info.value) and str(path) in str(info.value)
    bad = tmp_path / "bad.key"
    bad.write_text(MAIN_KEY + "!")  # read, then checked like a key in a variable
    env = two(CAPTCHA_TASKS_MAIN_API_KEY="", CAPTCHA_TASKS_MAIN_API_KEY_FILE=str(bad))
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env(env)
    assert "CAPTCHA_TASKS_MAIN_API_KEY_FILE must be 32 letters" in str(info.value)
    assert MAIN_KEY not in str(info.value)


def test_keys_and_url_passwords_are_masked_in_repr_and_describe() -> None:
    s = Settings.from_env(two(CAPTCHA_TASKS_BACKUP_URL="https://u:Pr0xyPass@h.example.com"))
    shown = json.dumps(s.describe()) + repr(s) + repr(s.providers())
    assert MAIN_KEY not in shown and BACKUP_KEY not in shown and "Pr0xyPass" not in shown
    listed = json.loads(json.dumps(s.describe()))["providers"]
    assert [p["api_key"] for p in listed] == ["***", "***"]
    assert listed[1]["url"] == "https://u:***@h.example.com"
    assert "provider_configs" not in s.describe()


@pytest.mark.parametrize("as_json", [False, True])
def test_the_settings_command_lists_the_providers_with_keys_masked(
    monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    from captcha_tasks.cli.main import main
    from captcha_tasks.settings import get_settings

    for name, value in two(CAPTCHA_TASKS_BACKUP_TYPES="image,turnstile").items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        out = CliRunner().invoke(main, ["settings", *(["--json"] if as_json else [])])
    finally:
        get_settings.cache_clear()
    assert out.exit_code == 0, out.output
    assert MAIN_KEY not in out.output and BACKUP_KEY not in out.output
    if as_json:
        listed = json.loads(out.output)["providers"]
        assert [(p["name"], p["protocol"], p["api_key"]) for p in listed] == [
            ("main", "captchaai", "***"),
            ("backup", "capsolver", "***"),
        ]
        assert listed[1]["types"] == ["image", "turnstile"]
    else:
        shown = dict(line.split(maxsplit=1) for line in out.output.splitlines())
        assert shown["CAPTCHA_TASKS_PROVIDERS"] == "main,backup"
        assert shown["CAPTCHA_TASKS_MAIN_PROTOCOL"] == "captchaai"
        assert shown["CAPTCHA_TASKS_MAIN_URL"] == "https://ocr.captchaai.com"
        assert shown["CAPTCHA_TASKS_MAIN_TYPES"] == "all"
        assert shown["CAPTCHA_TASKS_BACKUP_TYPES"] == "image,turnstile"
        assert shown["CAPTCHA_TASKS_BACKUP_API_KEY"] == "***"


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("MAIN_TYPES", "image,funcaptcha", "protocol captchaai does not solve funcaptcha"),
        ("BACKUP_TYPES", "hcaptcha", "protocol capsolver does not solve hcaptcha"),
    ],
)
def test_types_a_protocol_never_solves_are_refused_naming_the_variable(
    name: str, value: str, fragment: str
) -> None:
    settings = Settings.from_env(two(**{f"CAPTCHA_TASKS_{name}": value}))
    with pytest.raises(ConfigurationError) as info:
        check_configured(settings.providers())
    message = str(info.value)
    assert f"CAPTCHA_TASKS_{name}" in message and fragment in message, message


def test_never_solved_is_what_the_declarations_offer_in_no_variant() -> None:
    assert set(NEVER_SOLVED) == set(PROVIDERS)
    for protocol in PROVIDERS:
        for kind in CAPTCHA_TYPES:
            offered = _offered_at_all(protocol, kind)
            assert (kind not in NEVER_SOLVED[protocol]) == offered, (protocol, kind)
    assert set(CAPTCHA_CLASSES) == set(CAPTCHA_TYPES)  # every kind named has its declaration


def _offered_at_all(protocol: str, kind: str) -> bool:
    from captcha_tasks.provider.json_dialects import dialect_for
    from captcha_tasks.provider.offers import CLASSIC_OFFERS, WITHDRAWN
    from captcha_tasks.settings import PROTOCOLS

    if kind in WITHDRAWN.get(protocol, {}):  # type: ignore[call-overload]
        return False
    if PROTOCOLS[protocol] == "json":  # type: ignore[index]
        return kind in dialect_for(protocol).task_types  # type: ignore[arg-type]
    return kind in CLASSIC_OFFERS[protocol]  # type: ignore[index]


def test_the_old_key_variable_is_refused_too() -> None:
    with pytest.raises(ConfigurationError, match="CAPTCHAAI_API_KEY is not read when"):
        Settings.from_env(two(CAPTCHAAI_API_KEY=OTHER_KEY))


def test_every_providers_key_and_url_password_is_a_known_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from captcha_tasks.redaction import known_secrets, scrub_text
    from captcha_tasks.settings import get_settings

    env = two(CAPTCHA_TASKS_BACKUP_URL="https://u:Pr0xyPass@h.example.com")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        secrets = known_secrets()
        text = f"main {MAIN_KEY} backup {BACKUP_KEY} url Pr0xyPass"
        scrubbed = scrub_text(text)
    finally:
        get_settings.cache_clear()
    assert {MAIN_KEY, BACKUP_KEY, "Pr0xyPass"} <= set(secrets)
    assert MAIN_KEY not in scrubbed and BACKUP_KEY not in scrubbed
    assert "Pr0xyPass" not in scrubbed
