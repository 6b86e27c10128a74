import asyncio
import json
import os
import sys
import urllib.request

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# `make run`'s demo site: `source .run/env` allows its host and port.
demo = "http://" + os.environ["CAPTCHA_TASKS_ALLOWED_DOMAINS"].split(",")[0]
# `captcha-tasks mcp`, run by this Python (a host's config names the `captcha-tasks` command).
server = StdioServerParameters(
    command=sys.executable,
    args=["-m", "captcha_tasks.cli.main", "mcp", "--agent", "example"],
    env=dict(os.environ),
)


async def call(session: ClientSession, tool: str, arguments: dict) -> dict:
    result = await session.call_tool(tool, arguments)
    if result.isError:
        raise RuntimeError(result.content[0].text)
    return json.loads(result.content[0].text)


async def main() -> None:
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        print(len(tools), "tools")
        # What an agent's browser sees: a page with a captcha on it.
        url = f"{demo}/page/welcome"
        html = urllib.request.urlopen(url).read().decode()  # noqa: S310
        found = await call(session, "find_captchas", {"html": html, "url": url})
        for captcha in found["captchas"]:
            solved = await call(session, captcha["tool"], captcha["arguments"])
            print(captcha["type"], "into", captcha["token_field"], solved["solution"][:8])
        spend = await call(session, "get_spend", {})
        print(spend["agent"], spend["in_flight"])


asyncio.run(main())
