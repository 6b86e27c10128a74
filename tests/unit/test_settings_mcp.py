"""The settings of ``captcha-tasks mcp``: read from the environment like every other,
the agents' JSON (it holds their tokens) masked wherever settings are shown, and the
command's options over them."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from click.testing import CliRunner

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings import Settings

TOKEN = "crawler-secret-token-0123456789"
AGENTS = json.dumps({"agents": [{"name": "crawler", "token": TOKEN, "max_in_flight": 2}]})


def test_the_defaults() -> None:
    s = Settings.from_env({})
    assert (s.mcp_agents_file, s.mcp_agents, s.mcp_agent) == (None, "", "stdio")
    assert (s.mcp_max_in_flight, s.mcp_max_spend_per_hour, s.mcp_timeout) == (
        4,
        Decimal("1.00"),
        600.0,
    )


def test_read_from_the_environment() -> None:
    s = Settings.from_env(
        {
            "CAPTCHA_TASKS_MCP_AGENTS_FILE": "/etc/captcha/agents.json",
            "CAPTCHA_TASKS_MCP_AGENTS": AGENTS,
            "CAPTCHA_TASKS_MCP_AGENT": "laptop.browser-1",
            "CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT": "0",
            "CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR": "2.50",
            "CAPTCHA_TASKS_MCP_TIMEOUT": "90",
        }
    )
    assert s.mcp_agents_file == "/etc/captcha/agents.json" and s.mcp_agents == AGENTS
    assert (s.mcp_agent, s.mcp_max_in_flight) == ("laptop.browser-1", 0)
    assert (s.mcp_max_spend_per_hour, s.mcp_timeout) == (Decimal("2.50"), 90.0)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CAPTCHA_TASKS_MCP_AGENT", "a b", "CAPTCHA_TASKS_MCP_AGENT must be 1-64 letters"),
        ("CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT", "-1", "CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT must be"),
        ("CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT", "2.5", "CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT must be"),
        ("CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR", "-1", "CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR"),
        ("CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR", "lots", "CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR"),
        ("CAPTCHA_TASKS_MCP_TIMEOUT", "0.5", "CAPTCHA_TASKS_MCP_TIMEOUT must be"),
    ],
)
def test_a_bad_value_names_its_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env({variable: value})
    assert message in str(info.value)


def test_the_agents_json_is_masked_in_repr_describe_and_variables() -> None:
    s = Settings.from_env({"CAPTCHA_TASKS_MCP_AGENTS": AGENTS})
    assert s.describe()["mcp_agents"] == "***"
    assert s.variables()["CAPTCHA_TASKS_MCP_AGENTS"] == "***"
    shown = repr(s) + json.dumps(s.describe()) + json.dumps(s.variables(), default=str)
    assert TOKEN not in shown and "crawler" not in shown
    assert s.describe()["mcp_max_spend_per_hour"] == "1.00"  # JSON-able, exact
    assert Settings.from_env({}).describe()["mcp_agents"] == ""


@pytest.mark.parametrize("as_json", [False, True])
def test_the_settings_command_masks_the_agents(
    settings_env: Callable[..., None], as_json: bool
) -> None:
    from captcha_tasks.cli.main import main

    settings_env(CAPTCHA_TASKS_MCP_AGENTS=AGENTS, CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT="7")
    out = CliRunner().invoke(main, ["settings", *(["--json"] if as_json else [])])
    assert out.exit_code == 0, out.output
    assert TOKEN not in out.output
    if as_json:
        shown = json.loads(out.output)
        assert (shown["mcp_agents"], shown["mcp_max_in_flight"]) == ("***", 7)
    else:
        lines = dict(line.split(maxsplit=1) for line in out.output.splitlines())
        assert lines["CAPTCHA_TASKS_MCP_AGENTS"] == "***"
        assert lines["CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT"] == "7"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The server configuration ``captcha-tasks mcp`` would serve (nothing is served)."""
    pytest.importorskip("mcp")
    from captcha_tasks.mcp import server

    seen: dict[str, Any] = {}

    async def serve_stdio(config: Any) -> None:
        seen["stdio"] = config

    async def serve_http(config: Any, on_ready: Any = None) -> None:
        seen["http"] = config

    monkeypatch.setattr(server, "serve_stdio", serve_stdio)
    monkeypatch.setattr(server, "serve_http", serve_http)
    return seen


#: The MCP settings both command tests start from.
_FROM_ENV = {
    "CAPTCHA_TASKS_MCP_AGENTS": AGENTS,
    "CAPTCHA_TASKS_MCP_AGENT": "from-env",
    "CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT": "3",
    "CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR": "0.25",
    "CAPTCHA_TASKS_MCP_TIMEOUT": "45",
}


def test_the_settings_are_the_command_defaults(
    settings_env: Callable[..., None], served: dict[str, Any]
) -> None:
    from captcha_tasks.cli.main import main

    settings_env(**_FROM_ENV)
    out = CliRunner().invoke(main, ["mcp"])
    assert out.exit_code == 0, out.output
    stdio = served["stdio"]
    assert (stdio.stdio_agent.name, stdio.stdio_agent.max_in_flight) == ("from-env", 3)
    assert (stdio.stdio_agent.max_spend_per_hour, stdio.timeout) == (Decimal("0.25"), 45.0)

    out = CliRunner().invoke(main, ["mcp", "--transport", "http"])
    assert out.exit_code == 0, out.output
    (agent,) = served["http"].agents
    # Its entry's cap wins; the spend cap it leaves out is the setting's.
    assert (agent.name, agent.max_in_flight, agent.max_spend_per_hour) == (
        "crawler",
        2,
        Decimal("0.25"),
    )


def test_the_options_override_the_settings(
    settings_env: Callable[..., None], served: dict[str, Any], tmp_path: Any
) -> None:
    from captcha_tasks.cli.main import main

    settings_env(**_FROM_ENV)
    given = ["--max-in-flight", "9", "--max-spend-per-hour", "5", "--timeout", "12"]
    out = CliRunner().invoke(main, ["mcp", "--agent", "from-option", *given])
    assert out.exit_code == 0, out.output
    stdio = served["stdio"]
    assert (stdio.stdio_agent.name, stdio.stdio_agent.max_in_flight) == ("from-option", 9)
    assert (stdio.stdio_agent.max_spend_per_hour, stdio.timeout) == (Decimal(5), 12.0)

    other = tmp_path / "agents.json"
    other.write_text(json.dumps({"agents": [{"name": "filed", "token": "f" * 16}]}))
    out = CliRunner().invoke(main, ["mcp", "--transport", "http", "--agents-file", str(other)])
    assert out.exit_code == 0, out.output
    (agent,) = served["http"].agents
    assert (agent.name, agent.max_in_flight) == ("filed", 3)


def test_a_bad_option_or_agents_config_is_one_line(
    settings_env: Callable[..., None], served: dict[str, Any]
) -> None:
    from captcha_tasks.cli.main import main

    settings_env(CAPTCHA_TASKS_MCP_AGENTS='{"agents": [{"name": "x", "token": "short"}]}')
    out = CliRunner().invoke(main, ["mcp", "--transport", "http"])
    assert out.exit_code == 1 and not served
    assert out.output.strip() == (
        "Error: captcha-tasks mcp: CONFIG: CAPTCHA_TASKS_MCP_AGENTS: agent x: its token must "
        "be 16 characters or more, got 5 characters"
    )
    assert "short" not in out.output
    out = CliRunner().invoke(main, ["mcp", "--agent", "no spaces"])
    assert out.exit_code == 1 and "--agent must be 1-64 letters" in out.output
    out = CliRunner().invoke(main, ["mcp", "--max-spend-per-hour", "-1"])
    assert out.exit_code == 1 and "--max-spend-per-hour" in out.output
    assert not served
