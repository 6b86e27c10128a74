from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import CliRunner

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings import DEFAULT_SOLVER_URL, Settings, mask_url
from captcha_tasks.settings.providers import DEFAULT_VARIABLES

KEY = "a" * 32


def test_defaults_follow_the_public_contract() -> None:
    s = Settings.from_env({})
    (only,) = s.providers()
    assert (only.name, only.protocol, only.url) == ("default", "captchaai", DEFAULT_SOLVER_URL)
    assert s.redis_url == s.broker_url == s.result_backend == s.state_url
    assert s.redis_url == "redis://localhost:6379/0"
    assert only.threads == 5
    assert s.time_scale == 1.0
    assert only.api_key == "" and not s.has_api_key()
    assert s == Settings()  # the environment's defaults are the dataclass's


def test_each_redis_url_can_be_overridden() -> None:
    s = Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": "redis://r:1/0",
            "CAPTCHA_TASKS_BROKER_URL": "redis://b:2/1",
            "CAPTCHA_TASKS_STATE_URL": "rediss://:pw@s:3/2",
        }
    )
    assert (s.broker_url, s.result_backend, s.state_url) == (
        "redis://b:2/1",
        "redis://r:1/0",
        "rediss://:pw@s:3/2",
    )


def test_provider_dialect_follows_the_url_unless_set() -> None:
    s = Settings.from_env({"CAPTCHA_TASKS_SOLVER_URL": "https://2captcha.com"})
    assert s.provider_config().protocol == "2captcha"
    s = Settings.from_env(
        {"CAPTCHA_TASKS_SOLVER_URL": "https://2captcha.com", "CAPTCHA_TASKS_PROVIDER": "captchaai"}
    )
    assert s.provider_config().protocol == "captchaai"


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("CAPTCHAAI_API_KEY", "short", "32 letters and digits"),
        ("CAPTCHA_TASKS_THREADS", "0", "CAPTCHA_TASKS_THREADS must be a finite number >= 1"),
        ("CAPTCHA_TASKS_THREADS", "five", "must be an integer"),
        ("CAPTCHA_TASKS_TIME_SCALE", "nan", "CAPTCHA_TASKS_TIME_SCALE"),
        ("CAPTCHA_TASKS_TIME_SCALE", "-1", "CAPTCHA_TASKS_TIME_SCALE"),
        ("CAPTCHA_TASKS_SOLVER_URL", "ftp://x", "http(s) URL"),
        ("CAPTCHA_TASKS_REDIS_URL", "http://x", "redis://"),
        ("CAPTCHA_TASKS_PROVIDER", "deathbycaptcha", "CAPTCHA_TASKS_PROVIDER"),
        ("CAPTCHA_TASKS_KEY_PREFIX", "has space", "CAPTCHA_TASKS_KEY_PREFIX"),
        ("CAPTCHA_TASKS_MAX_IMAGE_BYTES", "99", "MAX_IMAGE_BYTES must be a finite number >= 100"),
        ("CAPTCHA_TASKS_QUEUE_TIMEOUT", "soon", "QUEUE_TIMEOUT must be a number, got 'soon'"),
        ("CAPTCHA_TASKS_BATCH_POLL", "maybe", "BATCH_POLL must be auto, on or off"),
        ("CAPTCHA_TASKS_ALLOWED_DOMAINS", "a.com,.b", "'.b' is not a host name"),
        ("CAPTCHA_TASKS_HEARTBEAT_INTERVAL", "x", "HEARTBEAT_INTERVAL must be seconds, got 'x'"),
        ("CAPTCHA_TASKS_HEARTBEAT_INTERVAL", "0.05", "HEARTBEAT_INTERVAL must be 0.1-300"),
        ("CAPTCHA_TASKS_METRICS_PORT", "http", "METRICS_PORT must be a port number"),
        ("CAPTCHA_TASKS_METRICS_PORT", "65536", "METRICS_PORT must be 0-65535"),
        ("CAPTCHA_TASKS_STATE_URL", "http://x", "CAPTCHA_TASKS_STATE_URL must be a redis://"),
        ("CAPTCHA_TASKS_ACCEPTANCE_WINDOW", "30", "ACCEPTANCE_WINDOW must be 60-86400"),
        ("CAPTCHA_TASKS_ACCEPTANCE_HOSTS", "a.com,b c", "'b c' is not a host name"),
        ("CAPTCHA_TASKS_PAGE_ATTEMPTS", "0", "PAGE_ATTEMPTS must be 1-10"),
        ("CAPTCHA_TASKS_PAGE_ATTEMPTS", "11", "PAGE_ATTEMPTS must be 1-10"),
        ("CAPTCHA_TASKS_ROUTING", "cheapest", "CAPTCHA_TASKS_ROUTING"),
        ("CAPTCHA_TASKS_ALTCHA_MAX_SECONDS", "0", "ALTCHA_MAX_SECONDS must be 0.01-3600"),
        ("CAPTCHA_TASKS_ALTCHA_MAX_SECONDS", "soon", "ALTCHA_MAX_SECONDS must be seconds"),
        ("CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB", "0", "ALTCHA_MAX_MEMORY_MIB must be 1-65536"),
        ("CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB", "1.5", "ALTCHA_MAX_MEMORY_MIB must be MiB"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=None) as info:
        Settings.from_env({name: value})
    assert fragment in str(info.value)


def test_secrets_are_masked_everywhere_they_are_shown() -> None:
    s = Settings.from_env(
        {"CAPTCHAAI_API_KEY": KEY, "CAPTCHA_TASKS_REDIS_URL": "redis://:hunter2@h:6379/0"}
    )
    assert KEY not in repr(s)
    shown = str(s.describe())
    assert KEY not in shown and "hunter2" not in shown
    assert s.describe()["broker_url"] == "redis://:***@h:6379/0"
    assert mask_url("redis://h:1/0") == "redis://h:1/0"


SOLVER_PASSWORD = "S0lver-Pass"
REDIS_PASSWORD = "R3dis-Pass"


def test_every_url_valued_setting_shows_its_password_masked() -> None:
    s = Settings.from_env(
        {
            "CAPTCHAAI_API_KEY": KEY,
            "CAPTCHA_TASKS_SOLVER_URL": f"https://user:{SOLVER_PASSWORD}@solver.example.com",
            "CAPTCHA_TASKS_REDIS_URL": f"redis://default:{REDIS_PASSWORD}@h:6379/0",
            "CAPTCHA_TASKS_STATE_URL": f"rediss://:{REDIS_PASSWORD}@s:6380/2",
        }
    )
    shown = s.describe()
    (provider,) = shown["providers"]  # type: ignore[misc]
    assert provider["url"] == "https://user:***@solver.example.com"
    assert shown["broker_url"] == shown["result_backend"] == "redis://default:***@h:6379/0"
    assert shown["state_url"] == "rediss://:***@s:6380/2"
    assert provider["api_key"] == "***"
    for secret in (KEY, SOLVER_PASSWORD, REDIS_PASSWORD):
        assert secret not in str(shown)
    # A malformed one is refused without echoing its password either.
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env({"CAPTCHA_TASKS_SOLVER_URL": f"ftp://u:{SOLVER_PASSWORD}@h"})
    assert SOLVER_PASSWORD not in str(info.value) + repr(info.value.args)
    assert "ftp://u:***@h" in str(info.value)


@pytest.mark.parametrize("as_json", [False, True])
def test_the_settings_command_masks_passwords_and_the_api_key(
    settings_env: Callable[..., None], as_json: bool
) -> None:
    from captcha_tasks.cli.main import main

    env = {
        "CAPTCHAAI_API_KEY": KEY,
        "CAPTCHA_TASKS_SOLVER_URL": f"https://user:{SOLVER_PASSWORD}@solver.example.com",
        "CAPTCHA_TASKS_BROKER_URL": f"redis://:{REDIS_PASSWORD}@127.0.0.1:6379/1",
        "CAPTCHA_TASKS_STATE_URL": f"redis://state:{REDIS_PASSWORD}@127.0.0.1:6379/2",
    }
    settings_env(**env)
    result = CliRunner().invoke(main, ["settings", *(["--json"] if as_json else [])], env=env)
    assert result.exit_code == 0, result.output
    for secret in (KEY, SOLVER_PASSWORD, REDIS_PASSWORD):
        assert secret not in result.output
    if as_json:
        shown = json.loads(result.output)
        (provider,) = shown["providers"]
        assert provider["url"] == "https://user:***@solver.example.com"
        assert shown["broker_url"] == "redis://:***@127.0.0.1:6379/1"
        assert shown["state_url"] == "redis://state:***@127.0.0.1:6379/2"
        assert provider["api_key"] == "***"
    else:
        shown = dict(line.split(maxsplit=1) for line in result.output.splitlines())
        assert shown["CAPTCHA_TASKS_SOLVER_URL"] == "https://user:***@solver.example.com"
        assert shown["CAPTCHA_TASKS_BROKER_URL"] == "redis://:***@127.0.0.1:6379/1"
        assert shown["CAPTCHA_TASKS_API_KEY"] == "***"


def test_the_settings_command_prints_each_variable_by_its_name_aligned(
    settings_env: Callable[..., None],
) -> None:
    from captcha_tasks.cli.main import main
    from captcha_tasks.settings import _SOURCES

    env = {"CAPTCHA_TASKS_POLL_READS": "3", "CAPTCHA_TASKS_ALLOWED_DOMAINS": "a.example,b.example"}
    settings_env(**env)
    result = CliRunner().invoke(main, ["settings"], env=env)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    names = [line.split()[0] for line in lines]
    # The default provider's variables first, then every other setting's, each once.
    assert names == [*DEFAULT_VARIABLES.values(), *(variable for variable, _ in _SOURCES.values())]
    # Every value starts in one column, two spaces after the longest name.
    column = max(map(len, names)) + 2
    for line, name in zip(lines, names, strict=True):
        assert line[:column].rstrip() == name and line[column] != " ", line
    shown = {line[:column].rstrip(): line[column:] for line in lines}
    assert shown["CAPTCHA_TASKS_POLL_READS"] == "3.0"
    assert shown["CAPTCHA_TASKS_ALLOWED_DOMAINS"] == "a.example,b.example"
    assert shown["CAPTCHA_TASKS_METRICS_PORT"] == "-"  # unset


def test_time_scale_multiplies_timings() -> None:
    s = Settings.from_env({"CAPTCHA_TASKS_TIME_SCALE": "0.1"})
    assert s.scaled(15) == pytest.approx(1.5)


def test_missing_api_key_is_a_clear_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="CAPTCHA_TASKS_API_KEY is not set"):
        Settings.from_env({}).require_api_key()


def test_rediss_urls_verify_certificates() -> None:
    import ssl

    s = Settings.from_env({"CAPTCHA_TASKS_REDIS_CA_CERTS": "/ca.pem"})
    assert s.redis_ssl_options("redis://h/0") is None
    assert s.redis_ssl_options("rediss://h/0") == {
        "ssl_cert_reqs": ssl.CERT_REQUIRED,
        "ssl_ca_certs": "/ca.pem",
    }


@pytest.mark.parametrize(
    "env,provider,url",
    [
        ({}, "captchaai", "https://ocr.captchaai.com"),
        ({"CAPTCHA_TASKS_PROVIDER": "capsolver"}, "capsolver", "https://api.capsolver.com"),
        ({"CAPTCHA_TASKS_PROVIDER": "2captcha-v2"}, "2captcha-v2", "https://api.2captcha.com"),
        (
            {"CAPTCHA_TASKS_SOLVER_URL": "https://api.anti-captcha.com"},
            "anticaptcha",
            "https://api.anti-captcha.com",
        ),
        ({"CAPTCHA_TASKS_SOLVER_URL": "https://2captcha.com/"}, "2captcha", "https://2captcha.com"),
        (
            {
                "CAPTCHA_TASKS_PROVIDER": "capmonster",
                "CAPTCHA_TASKS_SOLVER_URL": "http://127.0.0.1:8765",
            },
            "capmonster",
            "http://127.0.0.1:8765",
        ),
    ],
)
def test_the_provider_and_its_url_follow_each_other(
    env: dict[str, str], provider: str, url: str
) -> None:
    config = Settings.from_env(env).provider_config()
    assert (config.protocol, config.url) == (provider, url)


def test_the_api_key_is_checked_against_the_providers_key_format() -> None:
    capsolver_key = "CAP-" + "0123456789ABCDEF" * 2
    assert (
        Settings.from_env(
            {"CAPTCHA_TASKS_PROVIDER": "capsolver", "CAPTCHA_TASKS_API_KEY": capsolver_key}
        ).require_api_key()
        == capsolver_key
    )
    with pytest.raises(ConfigurationError, match="CAPTCHA_TASKS_API_KEY must be CAP- followed"):
        Settings.from_env(
            {"CAPTCHA_TASKS_PROVIDER": "capsolver", "CAPTCHA_TASKS_API_KEY": "a" * 32}
        )
    with pytest.raises(ConfigurationError, match="must be 32 letters and digits for provider"):
        Settings.from_env({"CAPTCHA_TASKS_API_KEY": capsolver_key})
    options = "b" * 32 + "__nocache"
    assert (
        Settings.from_env(
            {"CAPTCHA_TASKS_PROVIDER": "capmonster", "CAPTCHA_TASKS_API_KEY": options}
        ).require_api_key()
        == options
    )


def test_the_new_key_variable_wins_over_the_old_one_which_still_works() -> None:
    old, new = "a" * 32, "b" * 32
    assert Settings.from_env({"CAPTCHAAI_API_KEY": old}).require_api_key() == old
    both = {"CAPTCHAAI_API_KEY": old, "CAPTCHA_TASKS_API_KEY": new}
    assert Settings.from_env(both).require_api_key() == new


@pytest.mark.parametrize("value", ["grid", "quantiles"])
def test_a_removed_variable_is_warned_about_and_ignored(
    caplog: pytest.LogCaptureFixture, value: str
) -> None:
    # An environment written for an older release still starts: one line says what to do.
    with caplog.at_level("WARNING", logger="captcha_tasks.settings"):
        s = Settings.from_env({"CAPTCHA_TASKS_POLL_PLACEMENT": value})
    assert s == Settings()
    (record,) = caplog.records
    assert record.getMessage().startswith(
        "CAPTCHA_TASKS_POLL_PLACEMENT is no longer read and is ignored: one-by-one polls"
    )
    assert "\n" not in record.getMessage()
    caplog.clear()
    with caplog.at_level("WARNING", logger="captcha_tasks.settings"):
        Settings.from_env({})
    assert not caplog.records


def test_the_settings_command_shows_each_providers_variables_once(
    settings_env: Callable[..., None],
) -> None:
    from captcha_tasks.cli.main import main
    from captcha_tasks.settings import _SOURCES

    env = {
        "CAPTCHA_TASKS_PROVIDERS": "main,backup",
        "CAPTCHA_TASKS_MAIN_PROTOCOL": "captchaai",
        "CAPTCHA_TASKS_MAIN_API_KEY": KEY,
        "CAPTCHA_TASKS_BACKUP_PROTOCOL": "2captcha",
        "CAPTCHA_TASKS_BACKUP_API_KEY": KEY,
        "CAPTCHA_TASKS_BACKUP_THREADS": "3",
    }
    settings_env(**env)
    result = CliRunner().invoke(main, ["settings"], env=env)
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.output.splitlines()]
    per = ["PROTOCOL", "URL", "API_KEY", "THREADS", "TYPES", "PRICES", "BALANCE_FLOOR"]
    assert names == [
        "CAPTCHA_TASKS_PROVIDERS",
        *(f"CAPTCHA_TASKS_MAIN_{suffix}" for suffix in per),
        *(f"CAPTCHA_TASKS_BACKUP_{suffix}" for suffix in per),
        *(variable for variable, _ in _SOURCES.values()),
    ]
    # None of the single-provider variables: they are not read with the list set.
    assert not set(names) & {*DEFAULT_VARIABLES.values(), "CAPTCHAAI_API_KEY"}
    shown = dict(line.split(maxsplit=1) for line in result.output.splitlines())
    assert shown["CAPTCHA_TASKS_BACKUP_THREADS"] == "3"
    assert shown["CAPTCHA_TASKS_BACKUP_URL"] == "https://2captcha.com"
    assert KEY not in result.output


def test_the_time_scale_is_a_sandbox_and_testing_setting() -> None:
    import dataclasses

    from captcha_tasks.settings import _SOURCES, SANDBOX_AND_TESTING

    assert {"time_scale"} == SANDBOX_AND_TESTING
    assert {field.name for field in dataclasses.fields(Settings)} >= SANDBOX_AND_TESTING
    assert _SOURCES["time_scale"][0] == "CAPTCHA_TASKS_TIME_SCALE"  # still read


def _field_comments(cls: type) -> dict[str, str]:
    """Each dataclass field's ``#:`` comment, as written above it in ``cls``'s source."""
    import inspect

    comments: dict[str, str] = {}
    block: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        text = line.strip()
        if text.startswith("#:"):
            block.append(text[2:].strip())
        elif block and ":" in text and not text.startswith(("#", "def", "@")):
            comments[text.split(":")[0]] = " ".join(block)
            block = []
        else:
            block = []
    return comments


def test_every_setting_and_provider_field_is_documented_from_its_variable() -> None:
    import dataclasses

    from captcha_tasks.settings import _SOURCES
    from captcha_tasks.settings.providers import ProviderConfig

    settings = _field_comments(Settings)
    for field in dataclasses.fields(Settings):
        variable = _SOURCES[field.name][0] if field.name in _SOURCES else "CAPTCHA_TASKS_PROVIDERS"
        assert settings[field.name].startswith(f"``{variable}``"), field.name
    providers = _field_comments(ProviderConfig)
    for field in dataclasses.fields(ProviderConfig):
        assert providers[field.name].startswith("``CAPTCHA_TASKS_"), field.name


def test_acceptance_and_page_attempt_settings() -> None:
    defaults = Settings.from_env({})
    assert (defaults.acceptance_hosts, defaults.acceptance_window) == ((), 900.0)
    assert defaults.page_attempts == 3
    assert defaults.routing == "order"
    assert Settings.from_env({"CAPTCHA_TASKS_ROUTING": "cost"}).routing == "cost"
    s = Settings.from_env(
        {
            "CAPTCHA_TASKS_ACCEPTANCE_HOSTS": "Shop.Example.com, b.test",
            "CAPTCHA_TASKS_ACCEPTANCE_WINDOW": "300",
            "CAPTCHA_TASKS_PAGE_ATTEMPTS": "1",
        }
    )
    assert s.acceptance_hosts == ("b.test", "shop.example.com")
    assert (s.acceptance_window, s.page_attempts) == (300.0, 1)


def test_altcha_bounds() -> None:
    defaults = Settings.from_env({})
    assert (defaults.altcha_max_number, defaults.altcha_max_seconds) == (10_000_000, 20.0)
    assert defaults.altcha_max_memory_mib == 256
    s = Settings.from_env(
        {"CAPTCHA_TASKS_ALTCHA_MAX_SECONDS": "2.5", "CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB": "64"}
    )
    assert (s.altcha_max_seconds, s.altcha_max_memory_mib) == (2.5, 64)
