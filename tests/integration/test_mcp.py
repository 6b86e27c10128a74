"""``captcha-tasks mcp`` driven by the ``mcp`` SDK's own client, over stdio and streamable
HTTP, against a real worker and the sandbox: the tools solve, a bad argument comes back
as a tool error naming it, tokens are required, and each agent's caps hold cluster-wide."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

from captcha_tasks_dev.procs import free_port, logged, spawn, stop_process, wait_ready
from tests.support.workers import ROOT, worker_env

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client import streamable_http  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import McpError  # noqa: E402
from mcp.types import (  # noqa: E402
    CancelledNotification,
    CancelledNotificationParams,
    ClientNotification,
    ProgressNotification,
    ServerNotification,
)

from captcha_tasks.state.keys import MCP_SPEND_TTL  # noqa: E402

pytestmark = pytest.mark.integration

COMMAND = str(Path(sys.executable).parent / "captcha-tasks")
SITEKEY = "6LcR_okUAAAAAPYrPe-HK_0RULO1aZM15ENyM-Mf"
TOKEN_A = "agent-a-token-0123456789"
TOKEN_B = "agent-b-token-0123456789"
TOKEN_C = "agent-c-token-0123456789"


def _png(padding: int = 300) -> str:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    png += chunk(b"tEXt", b"pad\x00" + b"x" * padding)
    png += chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def _json(result: Any) -> Any:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


def _error(result: Any) -> str:
    assert result.isError, result.content
    return str(result.content[0].text)


def _run(coro: Any, timeout: float = 90) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


@asynccontextmanager
async def _stdio(env: dict[str, str], *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=COMMAND, args=["mcp", *args], env={**os.environ, **env}, cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def _http(url: str, token: str, **session_options: Any) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with AsyncExitStack() as stack:
        # From mcp 1.24 the transport takes an httpx client; the older function, which takes
        # the headers itself, warns there that it is deprecated.
        if hasattr(streamable_http, "streamable_http_client"):
            client = await stack.enter_async_context(
                httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300))
            )
            transport = streamable_http.streamable_http_client(url, http_client=client)
        else:
            transport = streamable_http.streamablehttp_client(url, headers=headers)
        read, write, _ = await stack.enter_async_context(transport)
        session = await stack.enter_async_context(ClientSession(read, write, **session_options))
        await session.initialize()
        yield session


def test_stdio_lists_solves_and_names_a_bad_argument(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    env = worker_env(sandbox.url)
    worker_factory(env, concurrency=2)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def scenario() -> None:
        async with _stdio(env, "--agent", "stdio-test") as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert {"solve_recaptcha_v2", "solve_image", "find_captchas", "fetch_page"} <= set(
                tools
            )
            assert {"get_balance", "get_spend", "solve_datadome"} <= set(tools)
            schema = tools["solve_recaptcha_v2"].inputSchema
            assert schema["required"] == ["sitekey", "pageurl"]
            assert "provider" not in schema["properties"] and "ctx" not in schema["properties"]
            assert schema["properties"]["invisible"]["type"] == "boolean"

            v2 = _json(
                await session.call_tool(
                    "solve_recaptcha_v2",
                    {"sitekey": SITEKEY, "pageurl": "https://example.com/login"},
                    progress_callback=on_progress,
                )
            )
            assert v2["type"] == "recaptcha_v2" and v2["solution"].startswith("03AFcWeA")
            assert re.fullmatch(r"[0-9a-f-]{36}", v2["task_id"])
            assert progress and progress[0] == 0
            image = _json(await session.call_tool("solve_image", {"image_b64": _png()}))
            assert image["type"] == "image" and image["solution"]

            # A value the task's validator refuses: the field is named.
            bad = _error(
                await session.call_tool(
                    "solve_recaptcha_v2", {"sitekey": "short", "pageurl": "https://example.com/"}
                )
            )
            assert (
                "invalid argument 'sitekey' (INVALID_INPUT): RecaptchaV2.sitekey: 'short' does "
                "not look like a reCAPTCHA sitekey"
            ) in bad, bad
            # A wrong type, refused by the schema: named too.
            wrong = _error(
                await session.call_tool(
                    "solve_recaptcha_v2", {"sitekey": SITEKEY, "pageurl": ["x"]}
                )
            )
            assert "pageurl" in wrong, wrong
            spend = _json(await session.call_tool("get_spend", {}))
            assert spend["agent"] == "stdio-test" and spend["in_flight"] == 0

    _run(scenario())


@pytest.fixture
def http_server(tmp_path: Path, sandbox_factory: Any, worker_factory: Any) -> Any:
    """A sandbox whose reCAPTCHA v2 solves take about 4 s and images well under one, a
    worker, and ``captcha-tasks mcp --transport http`` with three agents: ``a`` (one solve
    in flight), ``b`` (three) and ``c`` (0.005 USD an hour: two solves at 0.003)."""
    sandbox = sandbox_factory(latency={"recaptcha_v2": 80.0, "image": 1.0}, jitter=0.0)
    env = worker_env(sandbox.url, CAPTCHA_TASKS_PRICES="image=3,recaptcha_v2=3")
    worker_factory(env, concurrency=2)
    agents = {
        "agents": [
            {"name": "a", "token": TOKEN_A, "max_in_flight": 1},
            {"name": "b", "token": TOKEN_B, "max_in_flight": 3},
            {"name": "c", "token": TOKEN_C, "max_spend_per_hour": "0.005"},
        ]
    }
    agents_file = tmp_path / "agents.json"
    agents_file.write_text(json.dumps(agents))
    port = free_port()
    argv = [COMMAND, "mcp", "--transport", "http", "--port", str(port)]
    server_env = {**os.environ, **env, "CAPTCHA_TASKS_MCP_AGENTS_FILE": str(agents_file)}
    child = spawn("mcp", argv, tmp_path / "mcp.log", env=server_env, cwd=ROOT)
    try:
        wait_ready(child, logged(child, "/mcp for a, b, c"), timeout=60, what="mcp server")
        yield f"http://127.0.0.1:{port}/mcp", child, sandbox
    finally:
        stop_process(child.proc)


def test_http_refuses_a_missing_or_wrong_token(celery_app: Any, http_server: Any) -> None:
    url, child, _sandbox = http_server
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer not-a-known-token-at-all"}):
        answer = requests.post(url, json=hello, headers={**accept, **headers}, timeout=10)
        assert answer.status_code == 401, answer.text
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")

    async def known() -> list[str]:
        async with _http(url, TOKEN_A) as session:
            return [tool.name for tool in (await session.list_tools()).tools]

    assert "solve_recaptcha_v2" in _run(known())
    # No token in the server's log, nor in Redis keys.
    assert TOKEN_A not in child.output() and "not-a-known-token" not in child.output()


def test_http_agents_have_their_own_caps(celery_app: Any, http_server: Any, redis_url: str) -> None:
    url, _child, _sandbox = http_server
    import redis

    store = redis.Redis.from_url(redis_url, decode_responses=True)

    async def scenario() -> None:
        async with _http(url, TOKEN_A) as a, _http(url, TOKEN_B) as b, _http(url, TOKEN_C) as c:
            slow = asyncio.ensure_future(
                a.call_tool(
                    "solve_recaptcha_v2", {"sitekey": SITEKEY, "pageurl": "https://example.com/"}
                )
            )
            # a holds its one slot (the solve takes about 4 s): its next call is refused.
            for _ in range(100):
                spend = _json(await a.call_tool("get_spend", {}))
                if spend["in_flight"] == 1:
                    break
                await asyncio.sleep(0.05)
            held = _error(await a.call_tool("solve_image", {"image_b64": _png()}))
            assert "BUDGET_IN_FLIGHT: agent a is at its cap of 1 solves in flight" in held, held
            assert "frees when one of them ends" in held
            # The slot is a leased call id under the agent's name, with a TTL.
            (call_id,) = store.zrange("ct:mcp:a:in_flight", 0, -1)
            assert re.fullmatch(r"[0-9a-f]{32}", call_id), call_id
            assert 0 < store.ttl("ct:mcp:a:in_flight") <= 600 + 60
            # b goes on meanwhile.
            images = await asyncio.gather(
                *(b.call_tool("solve_image", {"image_b64": _png()}) for _ in range(2))
            )
            assert [_json(r)["type"] for r in images] == ["image", "image"]
            assert not slow.done()
            assert _json(await slow)["type"] == "recaptcha_v2"
            # c's spend cap: two solves at 0.003 USD reach 0.005, the third is refused.
            for _ in range(2):
                assert _json(await c.call_tool("solve_image", {"image_b64": _png()}))["cost"]
            over = _error(await c.call_tool("solve_image", {"image_b64": _png()}))
            assert re.search(
                r"BUDGET_SPEND: agent c spent 0\.006 USD in the last hour, its cap is 0\.005 "
                r"USD per hour; it frees at \d\d:\d\d:\d\d UTC \(in 3[56]\d\d s\)",
                over,
            ), over
            spend = _json(await c.call_tool("get_spend", {}))
            assert spend["spent_last_hour"] == "0.006"

    _run(scenario(), timeout=120)
    # What is left: each agent's spend record, named by the agent (the slots are freed),
    # each with its TTL; no token in a key or a value.
    keys = set(store.keys("*mcp:*"))
    assert keys == {"ct:mcp:a:spend", "ct:mcp:b:spend", "ct:mcp:c:spend"}, keys
    for key in keys:
        assert 0 < store.ttl(key) <= MCP_SPEND_TTL, key
        members = store.zrange(key, 0, -1)
        assert members and all(re.fullmatch(r"[0-9a-f]{32}:3000000", m) for m in members)
    every_key = " ".join(store.keys("*"))
    assert not any(token in every_key for token in (TOKEN_A, TOKEN_B, TOKEN_C))


def test_a_cancelled_call_keeps_its_slot_until_the_solve_ends(
    celery_app: Any, http_server: Any
) -> None:
    """The client cancels a slow solve: the call ends at once, but the solve goes on,
    holds agent a's one slot until it ends, and is counted then."""
    url, _child, sandbox = http_server
    progress_tokens: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ServerNotification) and isinstance(
            message.root, ProgressNotification
        ):
            progress_tokens.append(message.root.params.progressToken)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        pass

    async def in_flight(session: ClientSession) -> int:
        return int(_json(await session.call_tool("get_spend", {}))["in_flight"])

    async def scenario() -> None:
        async with _http(url, TOKEN_A, message_handler=on_message) as a:
            slow = asyncio.ensure_future(
                a.call_tool(
                    "solve_recaptcha_v2",
                    {"sitekey": SITEKEY, "pageurl": "https://example.com/"},
                    progress_callback=on_progress,
                )
            )
            # The task is sent when the first progress notification comes (its token is
            # the request's id).
            for _ in range(200):
                if progress_tokens:
                    break
                await asyncio.sleep(0.02)
            assert progress_tokens and await in_flight(a) == 1

            # The client cancels the request (the protocol's notifications/cancelled):
            # the server ends the call at once, long before the solve.
            await a.send_notification(
                ClientNotification(
                    CancelledNotification(
                        method="notifications/cancelled",
                        params=CancelledNotificationParams(
                            requestId=progress_tokens[0], reason="the agent moved on"
                        ),
                    )
                )
            )
            with pytest.raises(McpError, match="Request cancelled"):
                await asyncio.wait_for(slow, 10)
            assert sandbox.stats()["solved"] == 0

            # The solve goes on and keeps the slot: a is refused until it ends.
            held = _error(await a.call_tool("solve_image", {"image_b64": _png()}))
            assert "BUDGET_IN_FLIGHT: agent a is at its cap of 1 solves in flight" in held, held
            for _ in range(300):
                if await in_flight(a) == 0:
                    break
                await asyncio.sleep(0.05)
            assert await in_flight(a) == 0
            stats = sandbox.stats()
            assert (stats["solved"], stats["by_type"]["recaptcha_v2"]) == (1, 1), stats

            # It is counted, and the slot is a's again.
            assert _json(await a.call_tool("get_spend", {}))["spent_last_hour"] == "0.003"
            image = _json(await a.call_tool("solve_image", {"image_b64": _png()}))
            assert image["type"] == "image"
            assert _json(await a.call_tool("get_spend", {}))["spent_last_hour"] == "0.006"

    _run(scenario(), timeout=90)


@pytest.mark.parametrize("widget", ["recaptcha", "turnstile", "hcaptcha"])
def test_find_captchas_on_the_demo_site_gives_what_solves(
    widget: str, celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    env = worker_env(demo_sandbox.url)
    worker_factory(env, concurrency=2)
    page_url = f"{demo_sandbox.demo_url}/page/inbox?widget={widget}"
    visitor = requests.Session()
    page = visitor.get(page_url, timeout=10)

    async def scenario() -> tuple[dict[str, Any], str]:
        async with _stdio(env) as session:
            found = _json(
                await session.call_tool("find_captchas", {"html": page.text, "url": page.url})
            )["captchas"]
            assert len(found) == 1, found
            (captcha,) = found
            solved = _json(await session.call_tool(captcha["tool"], captcha["arguments"]))
            return captcha, solved["solution"]

    captcha, token = _run(scenario())
    assert captcha["form"]["action"] == f"{demo_sandbox.demo_url}/verify"
    answer = visitor.post(
        captcha["form"]["action"],
        data={**captcha["form"]["fields"], captcha["token_field"]: token},
        timeout=10,
    )
    assert answer.status_code == 200 and "<h1>page inbox</h1>" in answer.text, answer.text


def _rpc(
    url: str, token: str, message: dict[str, Any] | bytes, session: str | None = None
) -> requests.Response:
    """One JSON-RPC message posted as the SDK's client posts it (``bytes``: as is)."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        **({"mcp-session-id": session} if session else {}),
    }
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    return requests.post(url, data=data, headers=headers, timeout=60)


def _session(url: str, token: str) -> str:
    """A session opened by ``token``'s agent, initialized: its id."""
    from mcp.types import LATEST_PROTOCOL_VERSION

    params = {
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "test_mcp", "version": "1"},
    }
    opened = _rpc(url, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _rpc(url, token, ready, session).status_code == 202
    return session


def _spend_of(answer: requests.Response) -> dict[str, Any]:
    """The ``get_spend`` result in a tool call's answer (a server-sent event)."""
    assert answer.status_code == 200, answer.text
    (data,) = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")]
    return dict(json.loads(json.loads(data)["result"]["content"][0]["text"]))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


GET_SPEND = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "get_spend", "arguments": {}},
}


def test_http_a_session_is_its_agents_only(celery_app: Any, http_server: Any) -> None:
    """Agent b with agent a's session id can neither call a tool in it nor delete it: both
    are answered as for a session that does not exist, and a's session goes on."""
    url, _child, _sandbox = http_server
    session = _session(url, TOKEN_A)
    assert _spend_of(_rpc(url, TOKEN_A, GET_SPEND, session))["agent"] == "a"

    called = _rpc(url, TOKEN_B, GET_SPEND, session)
    deleted = requests.delete(
        url, headers={"Authorization": f"Bearer {TOKEN_B}", "mcp-session-id": session}, timeout=10
    )
    unknown = _rpc(url, TOKEN_B, GET_SPEND, "0" * 32)
    for refused in (called, deleted):
        assert refused.status_code == 404, refused.text
        assert refused.json() == unknown.json()
        assert "agent" not in refused.text

    assert _spend_of(_rpc(url, TOKEN_A, GET_SPEND, session))["agent"] == "a"
    ended = requests.delete(
        url, headers={"Authorization": f"Bearer {TOKEN_A}", "mcp-session-id": session}, timeout=10
    )
    assert ended.status_code == 200, ended.text
    assert _rpc(url, TOKEN_A, GET_SPEND, session).status_code == 404


def test_http_a_body_over_the_limit_is_413_unread(celery_app: Any, http_server: Any) -> None:
    """A 50 MB body from a known agent, declared or chunked: 413, and the server's memory
    does not grow by anything like it."""
    from captcha_tasks.mcp.gate import MAX_BODY_BYTES

    url, child, _sandbox = http_server
    session = _session(url, TOKEN_A)
    before = _rss_mb(child.proc.pid)
    big = b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": "'
    big += b"x" * 50_000_000 + b'"}}'

    def chunked() -> Any:
        for at in range(0, len(big), 1 << 20):
            yield big[at : at + (1 << 20)]

    just_over = b'{"x": "' + b"x" * (MAX_BODY_BYTES - 8) + b'"}'
    headers = {
        "Authorization": f"Bearer {TOKEN_A}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "mcp-session-id": session,
    }
    answers = [
        requests.post(url, data=body, headers=headers, timeout=60)
        for body in (big, chunked(), just_over)
    ]
    after = _rss_mb(child.proc.pid)
    print(f"MCP server RSS {before:.1f} MB before, {after:.1f} MB after")
    for answer in answers:
        assert answer.status_code == 413, answer.text[:200]
        assert answer.json() == {"error": f"the body is over {MAX_BODY_BYTES} bytes"}
    assert after - before < 20, (before, after)
    assert _rpc(url, TOKEN_A, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, session).ok


def test_http_deep_json_is_400(celery_app: Any, http_server: Any) -> None:
    """A body nested 50,000 deep is refused before the SDK parses it, tersely, and the
    server goes on answering."""
    url, child, _sandbox = http_server
    session = _session(url, TOKEN_A)
    deep = b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": '
    deep += b"[" * 50_000 + b"]" * 50_000 + b"}}"
    answer = _rpc(url, TOKEN_A, deep, session)
    assert answer.status_code == 400, answer.text[:200]
    assert answer.json() == {"error": "JSON nested deeper than 64 levels"}
    assert "recursion" not in child.output().lower()
    ping = _rpc(url, TOKEN_A, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, session)
    assert ping.status_code == 200, ping.text
    assert _session(url, TOKEN_B)
