"""``captcha-tasks mcp``: the command (the SDK is imported when it runs, not for ``--help``)."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import click

from ..errors import ConfigurationError
from .agents import NAME_RE, Agent, load_agents, read_agents_config

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
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="HTTP: the port to listen on.")  # fmt: skip
@click.option(
    "--agents-file",
    envvar="CAPTCHA_TASKS_MCP_AGENTS_FILE",
    show_envvar=True,
    help='HTTP: a JSON file of the agents: {"agents": [{"name", "token", '
    '"max_in_flight", "max_spend_per_hour"}]}.',
)
@click.option(
    "--agents",
    "agents_json",
    envvar="CAPTCHA_TASKS_MCP_AGENTS",
    show_envvar=True,
    help="HTTP: the same JSON as --agents-file, given inline (the file wins when both are set).",
)
@click.option(
    "--agent",
    "agent_name",
    default="stdio",
    show_default=True,
    envvar="CAPTCHA_TASKS_MCP_AGENT",
    show_envvar=True,
    help="stdio: the name this server's agent is counted under (its caps are shared by every "
    "server that uses the name).",
)
@click.option(
    "--max-in-flight",
    type=click.IntRange(min=0),
    default=4,
    show_default=True,
    help="An agent's cap on solves in flight, unless its entry sets one (0: none).",
)
@click.option(
    "--max-spend-per-hour",
    default="1.00",
    show_default=True,
    help="An agent's cap on spend in the last hour, in USD, unless its entry sets one (0: none).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="Seconds a tool call waits for its task (the task goes on past it).",
)
def mcp_command(
    transport: str,
    host: str,
    port: int,
    agents_file: str | None,
    agents_json: str | None,
    agent_name: str,
    max_in_flight: int,
    max_spend_per_hour: str,
    timeout: float,
) -> None:
    """Serve the cluster's solving to AI agents over the Model Context Protocol."""
    from ..cli.errors import one_line_errors, require_extra

    require_extra("mcp", "mcp")
    from .server import ServerConfig, serve_http, serve_stdio

    try:
        spend = Decimal(max_spend_per_hour)
    except ArithmeticError:
        raise click.BadParameter(
            "must be a number of USD", param_hint="--max-spend-per-hour"
        ) from None
    if not spend.is_finite() or spend < 0:
        raise click.BadParameter("must be a number of USD >= 0", param_hint="--max-spend-per-hour")
    config = ServerConfig(timeout=timeout, host=host, port=port)
    with one_line_errors("captcha-tasks mcp"):
        if transport == "http":
            config.agents = load_agents(
                read_agents_config(agents_file, agents_json),
                default_in_flight=max_in_flight,
                default_spend=spend,
            )
            names = ", ".join(agent.name for agent in config.agents)
            asyncio.run(
                serve_http(
                    config,
                    lambda url: click.echo(f"captcha-tasks mcp: {url} for {names}", err=True),
                )
            )
        else:
            if not NAME_RE.fullmatch(agent_name):
                raise ConfigurationError("--agent: 1-64 letters, digits, '_', '.' or '-'")
            config.stdio_agent = Agent(agent_name, "", max_in_flight, spend)
            asyncio.run(serve_stdio(config))
