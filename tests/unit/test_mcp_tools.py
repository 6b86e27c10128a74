"""The MCP server's tools as the installed ``mcp`` SDK lists them, built in-process (no
worker, nothing sent): every argument a tool's schema asks for is the task's, never the
``Context`` the SDK passes itself."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from captcha_tasks import aio
from captcha_tasks.mcp.server import SOLVE_TOOLS, ServerConfig, build_server


@pytest.fixture(scope="module")
def listed() -> dict[str, Any]:
    server = build_server(ServerConfig())
    return {tool.name: tool for tool in asyncio.run(server.list_tools())}


def test_no_tool_asks_for_the_context(listed: dict[str, Any]) -> None:
    assert set(SOLVE_TOOLS) | {"fetch_page", "get_spend", "find_captchas"} <= set(listed)
    for name, tool in listed.items():
        schema = tool.inputSchema
        assert "ctx" not in schema.get("properties", {}), name
        assert "ctx" not in schema.get("required", []), name


@pytest.mark.parametrize("name", SOLVE_TOOLS)
def test_a_solve_tool_requires_what_its_aio_call_requires(
    listed: dict[str, Any], name: str
) -> None:
    required = [
        param.name
        for param in inspect.signature(getattr(aio, name)).parameters.values()
        if param.default is inspect.Parameter.empty
        and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
    ]
    assert required, name
    assert listed[name].inputSchema.get("required", []) == required
