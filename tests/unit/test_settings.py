from __future__ import annotations

import pytest

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings import Settings, mask_url

KEY = "a" * 32


def test_defaults_follow_the_public_contract() -> None:
    s = Settings.from_env({})
    assert s.solver_url == "https://ocr.captchaai.com"
    assert s.provider == "captchaai"
    assert s.redis_url == s.broker_url == s.result_backend == s.state_url
    assert s.redis_url == "redis://localhost:6379/0"
    assert s.threads == 5
    assert s.time_scale == 1.0
    assert s.api_key == ""


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
    assert Settings.from_env({"CAPTCHA_TASKS_SOLVER_URL": "https://2captcha.com"}).provider == (
        "2captcha"
    )
    s = Settings.from_env(
        {"CAPTCHA_TASKS_SOLVER_URL": "https://2captcha.com", "CAPTCHA_TASKS_PROVIDER": "captchaai"}
    )
    assert s.provider == "captchaai"


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("CAPTCHAAI_API_KEY", "short", "32 letters and digits"),
        ("CAPTCHA_TASKS_THREADS", "0", "CAPTCHA_TASKS_THREADS must be a finite number >= 1"),
        ("CAPTCHA_TASKS_THREADS", "five", "must be a int"),
        ("CAPTCHA_TASKS_TIME_SCALE", "nan", "CAPTCHA_TASKS_TIME_SCALE"),
        ("CAPTCHA_TASKS_TIME_SCALE", "-1", "CAPTCHA_TASKS_TIME_SCALE"),
        ("CAPTCHA_TASKS_SOLVER_URL", "ftp://x", "http(s) URL"),
        ("CAPTCHA_TASKS_REDIS_URL", "http://x", "redis://"),
        ("CAPTCHA_TASKS_PROVIDER", "anticaptcha", "CAPTCHA_TASKS_PROVIDER"),
        ("CAPTCHA_TASKS_KEY_PREFIX", "has space", "CAPTCHA_TASKS_KEY_PREFIX"),
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


def test_time_scale_multiplies_timings() -> None:
    s = Settings.from_env({"CAPTCHA_TASKS_TIME_SCALE": "0.1"})
    assert s.scaled(15) == pytest.approx(1.5)


def test_missing_api_key_is_a_clear_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="CAPTCHAAI_API_KEY is not set"):
        Settings.from_env({}).require_api_key()


def test_rediss_urls_verify_certificates() -> None:
    import ssl

    s = Settings.from_env({"CAPTCHA_TASKS_REDIS_CA_CERTS": "/ca.pem"})
    assert s.redis_ssl_options("redis://h/0") is None
    assert s.redis_ssl_options("rediss://h/0") == {
        "ssl_cert_reqs": ssl.CERT_REQUIRED,
        "ssl_ca_certs": "/ca.pem",
    }
