"""The agents of ``captcha-tasks mcp``: a configuration that is wrong is one
:class:`ConfigurationError` naming where it came from and what is wrong, and never
shows a token, neither in the message nor in a repr."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.mcp.agents import Agent, agent_for_token, load_agents, read_agents_config
from captcha_tasks.settings import Settings

TOKEN_A = "token-of-agent-a-0123456789"
TOKEN_B = "token-of-agent-b-0123456789"
SOURCE = "CAPTCHA_TASKS_MCP_AGENTS"


def _config(*agents: dict[str, Any]) -> str:
    return json.dumps({"agents": list(agents)})


def _refused(text: str) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        load_agents(text, source=SOURCE)
    error = info.value
    # No token, whole or in part, in anything an operator or a log would see.
    for shown in (str(error), repr(error), error.message):
        for token in (TOKEN_A, TOKEN_B, "short-tok"):
            assert token not in shown, shown
    return error


def test_a_good_config_and_its_defaults() -> None:
    agents = load_agents(
        _config(
            {"name": "crawler", "token": TOKEN_A, "max_in_flight": 8, "max_spend_per_hour": 2.5},
            {"name": "triage.2", "token": TOKEN_B},
        ),
        default_in_flight=4,
        default_spend=Decimal("1.00"),
    )
    assert agents == [
        Agent("crawler", TOKEN_A, 8, Decimal("2.5")),
        Agent("triage.2", TOKEN_B, 4, Decimal("1.00")),
    ]
    assert agent_for_token(agents, TOKEN_B) is agents[1]
    assert agent_for_token(agents, TOKEN_B[:-1]) is None and agent_for_token(agents, "") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"agents": [', f"{SOURCE}: not JSON (Expecting value at line 1 column 13)"),
        ("[]", f'{SOURCE}: expected {{"agents": [{{"name": ..., "token": ...}}, ...]}}'),
        (
            '{"agents": []}',
            f'{SOURCE}: expected {{"agents": [{{"name": ..., "token": ...}}, ...]}}',
        ),
        ('{"agents": ["x"]}', f"{SOURCE}: agents[0] is not an object"),
    ],
)
def test_not_a_config(text: str, message: str) -> None:
    assert _refused(text).message == message


def test_bad_json_names_where_and_never_echoes_the_text() -> None:
    error = _refused('{"agents": [{"name": "a", "token": "' + TOKEN_A + '"},]}')
    # The json module's words and column for a trailing comma differ between Pythons
    # (3.13: "Illegal trailing comma before end of array", a column earlier).
    assert re.fullmatch(
        rf"{re.escape(SOURCE)}: not JSON \([A-Z][^()]* at line 1 column \d+\)", error.message
    ), error.message
    assert TOKEN_A not in error.message
    assert error.code == "CONFIG"


@pytest.mark.parametrize("name", ["", "with space", "a/b", "x" * 65, 7, None])
def test_a_bad_name(name: object) -> None:
    error = _refused(_config({"name": "ok", "token": TOKEN_A}, {"name": name, "token": TOKEN_B}))
    assert error.message == (
        f"{SOURCE}: agents[1]: name must be 1-64 letters, digits, '_', '.' or '-'"
    )


def test_a_short_or_missing_token() -> None:
    error = _refused(_config({"name": "crawler", "token": "short-tok"}))
    assert error.message == (
        f"{SOURCE}: agent crawler: its token must be 16 characters or more, got 9 characters"
    )
    error = _refused(_config({"name": "crawler"}))
    assert error.message == (
        f"{SOURCE}: agent crawler: its token must be 16 characters or more, got no token"
    )


def test_duplicate_names_or_tokens() -> None:
    error = _refused(
        _config({"name": "crawler", "token": TOKEN_A}, {"name": "crawler", "token": TOKEN_B})
    )
    assert error.message == f"{SOURCE}: two agents are named crawler"
    error = _refused(
        _config({"name": "crawler", "token": TOKEN_A}, {"name": "triage", "token": TOKEN_A})
    )
    assert error.message == f"{SOURCE}: agents crawler and triage have the same token"


@pytest.mark.parametrize(
    ("cap", "value", "message"),
    [
        ("max_in_flight", -1, "max_in_flight must be a number >= 0, got -1"),
        ("max_in_flight", 1.5, "max_in_flight must be a whole number >= 0, got 1.5"),
        ("max_in_flight", "four", "max_in_flight must be a number >= 0, got 'four'"),
        ("max_in_flight", True, "max_in_flight must be a number >= 0, got True"),
        ("max_spend_per_hour", -0.01, "max_spend_per_hour must be a number >= 0, got -0.01"),
        ("max_spend_per_hour", "NaN", "max_spend_per_hour must be a number >= 0, got 'NaN'"),
        ("max_spend_per_hour", "lots", "max_spend_per_hour must be a number >= 0, got 'lots'"),
    ],
)
def test_a_bad_cap(cap: str, value: object, message: str) -> None:
    error = _refused(_config({"name": "crawler", "token": TOKEN_A, cap: value}))
    assert error.message == f"{SOURCE}: agent crawler: {message}"


def test_an_unknown_field() -> None:
    error = _refused(_config({"name": "crawler", "token": TOKEN_A, "max_inflight": 2}))
    assert error.message == f"{SOURCE}: agent crawler: unknown field(s) max_inflight"


def test_an_agent_never_shows_its_token() -> None:
    (agent,) = load_agents(_config({"name": "crawler", "token": TOKEN_A}))
    for shown in (repr(agent), str(agent), f"{agent}", repr([agent]), repr({"a": agent})):
        assert TOKEN_A not in shown and "crawler" in shown


def test_where_the_config_comes_from(tmp_path: Any) -> None:
    inline = _config({"name": "inline", "token": TOKEN_A})
    filed = tmp_path / "agents.json"
    filed.write_text(_config({"name": "filed", "token": TOKEN_B}))
    settings = Settings.from_env(
        {"CAPTCHA_TASKS_MCP_AGENTS": inline, "CAPTCHA_TASKS_MCP_AGENTS_FILE": str(filed)}
    )
    # The option's file, else the setting's file, else the inline JSON.
    other = tmp_path / "other.json"
    other.write_text("{}")
    assert read_agents_config(str(other), settings) == ("{}", f"MCP agents file {other}")
    assert read_agents_config(None, settings)[1] == f"MCP agents file {filed}"
    inline_only = Settings.from_env({"CAPTCHA_TASKS_MCP_AGENTS": inline})
    assert read_agents_config(None, inline_only) == (inline, SOURCE)
    with pytest.raises(ConfigurationError, match="needs its agents: --agents-file"):
        read_agents_config(None, Settings.from_env({}))
    with pytest.raises(ConfigurationError) as info:
        read_agents_config(str(tmp_path / "missing.json"), settings)
    assert info.value.message.endswith("missing.json: No such file or directory")
