"""``captcha-tasks mcp``: the command (the SDK is imported when it runs, not for ``--help``)."""

from __future__ import annotations

import asyncio

import click

from .. import tracing
from ..settings import get_settings
from ..settings.parsing import agent_name as parse_agent_name
from ..settings.parsing import usd
from .agents import Agent, load_agents, read_agents_config

__all__ = ["mcp_command"]


@click.command("mcp")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: an agent host starts this process and speaks on its stdin/stdout; "
    "http: streamable HTTP at http://HOST:PORT/mcp for many agents, each with a bearer token.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="HTTP: the address to listen on."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="HTTP: the port to listen on.",
)
@click.option(
    "--agents-file",
    help='HTTP: a JSON file of the agents: {"agents": [{"name", "token", '
    '"max_in_flight", "max_spend_per_hour"}]} (default: CAPTCHA_TASKS_MCP_AGENTS_FILE, '
    "else the JSON of CAPTCHA_TASKS_MCP_AGENTS).",
)
@click.option(
    "--agent",
    "agent_name",
    help="stdio: the name this server's agent is counted under; servers that use the "
    "name share its caps (default: CAPTCHA_TASKS_MCP_AGENT, stdio).",
)
@click.option(
    "--max-in-flight",
    type=click.IntRange(min=0),
    help="An agent's cap on solves in flight, unless its entry sets one; 0: none "
    "(default: CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT, 4).",
)
@click.option(
    "--max-spend-per-hour",
    help="An agent's cap on spend in the last hour, in USD, unless its entry sets one; "
    "0: none (default: CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR, 1.00).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    help="Seconds a tool call waits for its task; the task goes on past it "
    "(default: CAPTCHA_TASKS_MCP_TIMEOUT, 600).",
)
def mcp_command(
    transport: str,
    host: str,
    port: int,
    agents_file: str | None,
    agent_name: str | None,
    max_in_flight: int | None,
    max_spend_per_hour: str | None,
    timeout: float | None,
) -> None:
    """Serve the cluster's solving to AI agents over the Model Context Protocol.

    Each option left out is its CAPTCHA_TASKS_MCP_* setting (captcha-tasks settings).
    """
    from ..cli.errors import one_line_errors, require_extra

    require_extra("mcp", "mcp")
    from .server import ServerConfig, serve_http, serve_stdio

    with one_line_errors("captcha-tasks mcp"):
        settings = get_settings()
        # Traces of the agents' calls, as a worker's: from the OTEL_* variables, if set.
        tracing.setup()
        if max_spend_per_hour is None:
            spend = settings.mcp_max_spend_per_hour
        else:
            spend = usd("--max-spend-per-hour", max_spend_per_hour)
        if max_in_flight is None:
            max_in_flight = settings.mcp_max_in_flight
        config = ServerConfig(
            timeout=settings.mcp_timeout if timeout is None else timeout, host=host, port=port
        )
        if transport == "http":
            text, source = read_agents_config(agents_file, settings)
            config.agents = load_agents(
                text, source=source, default_in_flight=max_in_flight, default_spend=spend
            )
            names = ", ".join(agent.name for agent in config.agents)
            asyncio.run(
                serve_http(
                    config,
                    lambda url: click.echo(f"captcha-tasks mcp: {url} for {names}", err=True),
                )
            )
        else:
            if agent_name is not None:
                agent_name = parse_agent_name("--agent", agent_name)
            name = settings.mcp_agent if agent_name is None else agent_name
            config.stdio_agent = Agent(name, "", max_in_flight, spend)
            asyncio.run(serve_stdio(config))
