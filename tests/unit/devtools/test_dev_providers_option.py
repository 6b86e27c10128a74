"""`captcha-tasks-dev dev --providers`: protocols the sandbox can play, each named once; each
provider's name in CAPTCHA_TASKS_PROVIDERS is its protocol's, as a name may be spelt."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from captcha_tasks.settings import PROVIDERS
from captcha_tasks.settings.providers import read_providers
from captcha_tasks_dev.cli import dev_command
from captcha_tasks_dev.run import provider_name


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("captchaai,nope", "'nope' is not one of captchaai"),
        ("captchaai,capsolver,captchaai", "name each provider once"),
    ],
)
def test_a_bad_list_is_refused_before_anything_starts(given: str, words: str) -> None:
    result = CliRunner().invoke(dev_command, ["--providers", given, "--run-dir", "/nonexistent"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--providers'" in result.output and words in result.output


def test_every_protocol_gives_a_name_the_settings_take() -> None:
    names = [provider_name(p) for p in PROVIDERS]
    env = {"CAPTCHA_TASKS_PROVIDERS": ",".join(names)}
    for name, protocol in zip(names, PROVIDERS, strict=True):
        env[f"CAPTCHA_TASKS_{name.upper()}_PROTOCOL"] = protocol
        key = "CAP-" + "0" * 32 if protocol == "capsolver" else "0" * 32
        env[f"CAPTCHA_TASKS_{name.upper()}_API_KEY"] = key
    assert [c.name for c in read_providers(env)] == names
